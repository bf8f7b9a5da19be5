"""``svc config init|plan|apply|revisions|rollback``: the app as code (spec 2.9, 4.8, 4.10).

The grant needs spec 5.3's scopes: ``apps:read`` (init, plan, revisions), and for apply and
rollback also the write scope of each kind of change the plan makes (``apps:write``,
``products:write``, ``webhooks:write``, ``runtime:write``); the service names the first one
missing and the sign-in that adds it. The file is ``--file``, else ``svc.config.json``
in the current directory; the app is the one the file names. Exit codes: 0 done (a plan was
made, or applied, or there was nothing to apply); 1 not done (a conflict: plan again; or
cancelled at the prompt); 2 the file or plan is wrong (not JSON, a secret in it, schema
errors, blocking plan errors, all listed by JSON path), or confirmation is needed (no TTY
and no ``--yes``); 3 the grant lacks a scope or is for another app (or the app does not
exist yet); 4 not signed in; 5 the service is unreachable.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from svc.commands import config_init
from svc.commands.config_flow import (
    CONFIG,
    CONFIG_TIMEOUT,
    Proposal,
    apply_body,
    blocking,
    carry_out,
    find_revision,
    request_plan,
    request_rollback_plan,
)
from svc.commands.grant import signed_in
from svc.commands.target import app_of, app_option, segment
from svc.config_sources import DEFAULT_FILE, load_config
from svc.config_view import plan_lines, revision_detail_lines, revision_line
from svc.errors import ExitCode
from svc.int_flags import whole_number
from svc.output import Output

MODES = ("merge", "mirror")


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("--file", type=Path, default=Path(DEFAULT_FILE), metavar="FILE",
                        help=f"the svc.config.v1 file (default {DEFAULT_FILE})")
    mode = argparse.ArgumentParser(add_help=False)
    mode.add_argument("--mode", choices=MODES, default="merge",
                      help="merge (default) changes what the file declares; mirror also "
                      "disables products and webhooks the file leaves out")
    confirm = argparse.ArgumentParser(add_help=False)
    confirm.add_argument("--yes", action="store_true",
                         help="apply without asking (required without a terminal)")
    commands = groups.add_parser("config", help="the app, products, webhook and runtime as "
                                 "code (svc.config.json)").add_subparsers(metavar="COMMAND",
                                                                          required=True)
    config_init.register(commands, common, source)
    commands.add_parser("plan", parents=[common, source, mode],
                        help="show what applying the file would change (needs apps:read)"
                        ).set_defaults(run=plan)
    commands.add_parser("apply", parents=[common, source, mode, confirm],
                        help="plan, confirm, apply; records a revision (needs apps:read and the "
                        "write scope of each kind of change)").set_defaults(run=apply)
    revisions = commands.add_parser(
        "revisions", parents=[common, app_option()],
        help="list the app's config revisions, or show one (needs apps:read)")
    revisions.add_argument("revision", nargs="?", metavar="REVISION",
                           help="a zcfgrev_ id or the app's revision number (3 or #3): "
                           "show that revision's changes and config")
    revisions.add_argument("--limit", type=whole_number, metavar="N",
                           help="at most N revisions (1-200; the service's default: 50)")
    revisions.add_argument("--before", type=whole_number, metavar="NUMBER",
                           help="older revisions: those numbered below NUMBER")
    revisions.set_defaults(run=list_revisions)
    rollback = commands.add_parser(
        "rollback", parents=[common, app_option(), confirm],
        help="restore the app as an earlier revision left it, as a new revision (needs "
        "apps:read and the write scope of each kind of change)")
    rollback.add_argument("revision", metavar="REVISION",
                          help="the zcfgrev_ id, or the app's revision number (3 or #3), "
                          "to go back to")
    rollback.set_defaults(run=roll_back)


def plan(args: argparse.Namespace, out: Output) -> int:
    document = load_config(args.file)
    client, _ = signed_in(args, CONFIG_TIMEOUT)
    with client:
        planned = request_plan(client, document, args.mode)
    return out.report({"file": str(args.file), "plan": planned}, plan_lines(planned),
                      blocking(planned))


def apply(args: argparse.Namespace, out: Output) -> int:
    document = load_config(args.file)
    client, _ = signed_in(args, CONFIG_TIMEOUT)
    with client:
        planned = request_plan(client, document, args.mode)
        return carry_out(out, Proposal(
            planned, {"file": str(args.file)},
            lambda: client.call("POST", f"{CONFIG}/apply", apply_body(document, planned)),
            question=f"Apply these changes to {planned['app']}?",
            again=f"svc config plan --file {args.file}"), assume_yes=args.yes)


def list_revisions(args: argparse.Namespace, out: Output) -> int:
    client, stored = signed_in(args)
    with client:
        if args.revision:
            revision = find_revision(client, args.revision, lambda: app_of(args, stored))
            out.emit({"revision": revision}, revision_detail_lines(revision))
            return ExitCode.OK
        query = f"app={segment(app_of(args, stored))}"
        for name in ("limit", "before"):
            if getattr(args, name) is not None:
                query += f"&{name}={getattr(args, name)}"
        found = client.call("GET", f"{CONFIG}/revisions?{query}")
    revisions: list[dict[str, Any]] = found["revisions"]
    lines = [revision_line(r) for r in revisions] or [
        f"No config revisions on {found['app']}" + (" yet." if args.before is None
                                                   else f" numbered below {args.before}.")]
    if found.get("nextBefore") is not None:
        lines.append(f"Older revisions: svc config revisions --before {found['nextBefore']}")
    out.emit(found, lines)
    return ExitCode.OK


def roll_back(args: argparse.Namespace, out: Output) -> int:
    client, stored = signed_in(args, CONFIG_TIMEOUT)
    with client:
        revision = find_revision(client, args.revision, lambda: app_of(args, stored))
        # The service plans the rollback as it will carry it out, so it is shown (and
        # confirmed) as a diff against the app as it is now, and sent against the head and
        # digest of that plan.
        planned = request_rollback_plan(client, revision["id"])
        body = {"revision": revision["id"], "baseRevision": planned["baseRevision"],
                "planDigest": planned["digest"]}
        number = revision["number"]
        return carry_out(out, Proposal(
            planned, {"revision": revision["id"]},
            lambda: client.call("POST", f"{CONFIG}/rollback", body),
            question=f"Roll {planned['app']} back to revision {number}?",
            again=f"svc config rollback {revision['id']}",
            unchanged=(f"Nothing to apply: the service is already as revision {number} left "
                       "it." if revision.get("state") is not None else
                       f"Nothing to apply: the service already matches revision {number}'s "
                       "config as sent (it recorded no state: see the warning).")),
            assume_yes=args.yes)
