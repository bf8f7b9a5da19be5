"""Plan, show, confirm, carry out: the one path by which ``config apply``, ``config
rollback`` and the legacy ``configure`` change anything (spec 4.8).

The change is sent with the plan's ``baseRevision`` and ``planDigest``, so the service
refuses it (409) if another apply landed, or the app changed, after the plan was shown:
what was confirmed is what happens, or nothing does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from svc.client import ApiFailure, DeveloperClient
from svc.config_view import applied_lines, changes_anything, plan_lines
from svc.errors import CliError, ExitCode, for_api_failure
from svc.output import Output

CONFIG = "/config"
# The service checks a new webhook URL's DNS answers while planning and applying.
CONFIG_TIMEOUT = 60.0
CONFLICTS = ("config_conflict", "config_plan_stale")


@dataclass(frozen=True)
class Proposal:
    plan: dict[str, Any]
    payload: dict[str, Any]  # what ``--json`` prints beside ``plan`` and ``applied``
    send: Callable[[], dict[str, Any]]  # carries the plan out; the service's answer
    question: str  # asked before sending
    again: str  # the command that makes a fresh plan after a conflict
    unchanged: str = "Nothing to apply: the service already matches."  # a plan of no change


def request_plan(client: DeveloperClient, document: dict[str, Any],
                 mode: str) -> dict[str, Any]:
    return client.call("POST", f"{CONFIG}/plan", {"config": document, "mode": mode})


def request_rollback_plan(client: DeveloperClient, revision: str) -> dict[str, Any]:
    """The plan of a rollback to ``revision``, made by the service as the rollback will make
    it (what it restores is the service's: the state that revision recorded)."""
    return client.call("POST", f"{CONFIG}/plan", {"revision": revision})


def apply_body(document: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    return {"config": document, "mode": plan["mode"], "baseRevision": plan["baseRevision"],
            "planDigest": plan["digest"]}


def revision_path(revision: str) -> str:
    return f"{CONFIG}/revisions/{quote(revision, safe='')}"


# `3` or `#3`, as `svc config revisions` lists them; ASCII digits only, as the service reads
# numbers (svc/int_flags.py), and no more of them than a revision number can have.
_REVISION_NUMBER = re.compile(r"#?([0-9]{1,18})")


def find_revision(client: DeveloperClient, revision: str,
                  app: Callable[[], str]) -> dict[str, Any]:
    """The revision named by its ``zcfgrev_`` id, or by its number within the app: the
    list shows ``#n`` first on each line, and the service knows revisions by id only, so a
    number is looked up in the app's list (the one revision numbered below n + 1)."""
    number = _REVISION_NUMBER.fullmatch(revision)
    if number is None:
        found: dict[str, Any] = client.call("GET", revision_path(revision))["revision"]
        return found
    wanted, slug = int(number.group(1)), app()
    listed = client.call("GET", f"{CONFIG}/revisions?app={quote(slug, safe='')}&limit=1"
                                f"&before={wanted + 1}")["revisions"]
    if not listed or listed[0]["number"] != wanted:
        raise CliError(f"No config revision #{wanted} on {slug}; `svc config revisions "
                       f"--app {slug}` lists them.", code="config_revision_not_found")
    return find_revision(client, listed[0]["id"], app)


def blocking(plan: dict[str, Any]) -> CliError | None:
    """The exit-2 error of a plan with blocking errors (they are listed with the plan)."""
    count = len(plan["errors"])
    if not count:
        return None
    return CliError(f"The plan has {count} blocking error(s), listed by JSON path; fix them "
                    "and plan again. Nothing was applied.", ExitCode.USAGE,
                    code="config_plan_errors")


def carry_out(out: Output, proposal: Proposal, *, assume_yes: bool) -> int:
    plan = proposal.plan
    payload = {**proposal.payload, "plan": plan, "applied": None}
    lines = plan_lines(plan)
    problem = blocking(plan)
    if problem is not None:
        return out.report(payload, lines, problem)
    if not changes_anything(plan):
        return out.report(payload, [*lines, proposal.unchanged])
    if not assume_yes:
        refusal = _cannot_ask(out)
        if refusal is not None:
            return out.report(payload, lines, refusal)
        out.emit(payload, lines)  # text mode here: the plan is read before the question
        lines = []
        if not _confirmed(out, proposal.question):
            return out.report(payload, [], CliError("Cancelled; nothing was changed.",
                                                    code="cancelled"))
    try:
        applied = proposal.send()
    except ApiFailure as failure:
        return out.report(payload, lines, _refusal(failure, proposal.again))
    payload["applied"] = applied
    return out.report(payload, [*lines, *applied_lines(applied, plan["warnings"])])


def _cannot_ask(out: Output) -> CliError | None:
    if out.as_json:
        return CliError("Not applied: --json prints one answer and asks nothing. Review the "
                        "plan, then rerun with --yes.", ExitCode.USAGE,
                        code="confirmation_required")
    if not sys.stdin.isatty():
        return CliError("Not applied: stdin is not a terminal, so nobody can confirm. Review "
                        "the plan above, then rerun with --yes.", ExitCode.USAGE,
                        code="confirmation_required")
    return None


def _confirmed(out: Output, question: str) -> bool:
    out.err.write(f"{question} [y/N] ")
    out.err.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _refusal(failure: ApiFailure, again: str) -> CliError:
    if failure.code in CONFLICTS:
        # The service's message says what moved; the command shows the plan as it is now.
        return CliError(f"{failure.message} Review the new plan before applying again.",
                        ExitCode.FAILED, code=failure.code, command=again)
    command = failure.body.get("command")
    return for_api_failure(failure.status, failure.code, failure.message,
                           command if isinstance(command, str) else None, failure.errors)
