"""Config plans, apply results and revisions as lines for people (spec 4.8).

``+`` create, ``~`` update (each field ``before -> after``), ``-`` disable; unchanged
resources are only counted. Values are printed as JSON, so ``"100"`` (an integer string of
atomic units) reads differently from ``100``.
"""

from __future__ import annotations

import json
from typing import Any

from svc.commands.webhooks import STORAGE_NOTE

MARKS = {"create": "+", "update": "~", "disable": "-"}
WIDTH = 96


def changes_anything(plan: dict[str, Any]) -> bool:
    return any(op["op"] != "unchanged" for op in plan["ops"])


def plan_lines(plan: dict[str, Any]) -> list[str]:
    base = plan["baseRevision"] or "no revision yet"
    lines = [f"Plan for {plan['app']} ({plan['mode']}, against {base}):"]
    lines += op_lines(plan["ops"])
    lines.append(summary_line(plan["summary"]))
    if plan["errors"]:
        lines.append(f"Blocking errors ({len(plan['errors'])}):")
        lines += [f"  {e['path']}: {e['message']} ({e['code']})" for e in plan["errors"]]
    if plan["warnings"]:
        lines.append("Warnings:")
        lines += [f"  {w['key']}: {w['message']}" for w in plan["warnings"]]
    if plan["missingSecrets"]:
        lines.append("Secrets the config cannot hold (keep them in your runtime's environment):")
        lines += [f"  {s['name']} ({s['status']}): {s['message']}"
                  for s in plan["missingSecrets"]]
    lines += _runtime_lines(plan.get("runtimeValidation"))
    return lines


def op_lines(ops: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for op in ops:
        mark = MARKS.get(op["op"])
        if mark is None:
            continue
        lines.append(f"{mark} {op['resource']} {op['key']}")
        if op["op"] == "create":
            lines += _packed([f"{c['field']}: {_shown(c['after'])}" for c in op["changes"]])
        else:
            lines += [f"    {c['field']}: {_shown(c['before'])} -> {_shown(c['after'])}"
                      for c in op["changes"]]
    return lines


def _packed(items: list[str], width: int = WIDTH) -> list[str]:
    """``items`` comma-separated on indented lines of at most ``width`` characters (an item
    longer than that gets a line of its own): a created product stays a short paragraph."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(item) + 2 <= width:
            lines[-1] += f", {item}"
        else:
            lines.append(f"    {item}")
    return lines


def summary_line(summary: dict[str, int]) -> str:
    return (f"{summary['create']} to create, {summary['update']} to update, "
            f"{summary['disable']} to disable, {summary['unchanged']} unchanged.")


def _runtime_lines(inputs: dict[str, Any] | None) -> list[str]:
    if not inputs:
        return []
    expected = ", ".join(f"{k}={v}" for k, v in inputs["expected"].items() if v is not None)
    return ["Runtime verification (`svc runtime verify`) will read "
            f"{inputs['manifestUrl']} and expect {expected}."]


def applied_lines(applied: dict[str, Any], shown: list[dict[str, Any]]) -> list[str]:
    """What an apply (or rollback) did, the warnings its plan (``shown``) did not have (the
    events enabling the webhook left unsent, a state it could not record), and the new
    webhook secret, printed this once."""
    revision = applied.get("revision")
    summary = applied["summary"]
    if revision is None:
        lines = [f"Nothing changed on {applied['app']}; no revision recorded."]
    else:
        lines = [f"Applied revision {revision['number']} ({revision['id']}) to "
                 f"{applied['app']}: {summary['create']} created, {summary['update']} "
                 f"updated, {summary['disable']} disabled, {summary['unchanged']} unchanged."]
    new = [w for w in applied.get("warnings") or [] if w not in shown]
    if new:
        lines.append("Warnings:")
        lines += [f"  {w['key']}: {w['message']}" for w in new]
    secret = (applied.get("secrets") or {}).get("webhookSigningSecret")
    if secret:
        lines += [STORAGE_NOTE, f"  {secret}"]
    return lines


def revision_line(revision: dict[str, Any]) -> str:
    summary = revision["summary"]
    by = revision["appliedBy"].get("username") or revision["appliedBy"]["developerId"]
    rollback = f"  rollback of {revision['rollbackOf']}" if revision["rollbackOf"] else ""
    # A service from before withheldPaths sends none: nothing to mark.
    withheld = "  [secrets withheld: no rollback]" if revision.get("withheldPaths") else ""
    return (f"#{revision['number']}  {revision['id']}  {revision['createdAt']}  "
            f"{revision['mode']}  by {by} via {revision['via']}  "
            f"+{summary['create']} ~{summary['update']} -{summary['disable']}{rollback}"
            f"{withheld}")


def revision_detail_lines(revision: dict[str, Any]) -> list[str]:
    state = revision.get("state")
    withheld: list[str] = revision.get("withheldPaths") or []
    if withheld:
        restored = ["State it left:" if state else
                    "State it left: not recorded (applied before revisions kept one, or a "
                    "value in it looked like a secret)."]
    elif state:
        restored = ["State it left (what `svc config rollback` to it restores):"]
    else:
        restored = ["State it left: not recorded (applied before revisions kept one, or a "
                    "value in it looked like a secret); a rollback to it applies the config "
                    "above again, and what that config leaves out keeps the value it has then."]
    return [f"Revision {revision_line(revision)}", *_withheld_lines(withheld), "Changes it made:",
            *(op_lines(revision["ops"]) or ["  (none)"]), "Config as applied (as sent):",
            *json.dumps(revision["config"], indent=2, sort_keys=False).splitlines(),
            *restored, *(json.dumps(state, indent=2, sort_keys=False).splitlines()
                         if state else [])]


def _withheld_lines(paths: list[str]) -> list[str]:
    """Why a revision whose secrets were withheld (migrations 0018, 0021) cannot be rolled
    back to: `svc config rollback` to it is refused, config_revision_withheld."""
    if not paths:
        return []
    return ["Secrets were withheld from this revision, so it cannot be rolled back to: it "
            "recorded values that look like secrets, before the secret guard refused them, and "
            "a rollback would write the mark that replaced them where they were "
            "(config_revision_withheld). Withheld at:", *(f"  {path}" for path in paths),
            "To go back to it, apply a config with the values you want (`svc config apply`)."]


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
