"""``svc app show|create|update|upsert``: the app's own fields (spec 2.2, 4.10).

Grants are scoped to one existing app, so the service refuses ``create`` with a grant
(``developer_session_required``): the command says to create the app in the console.
Flags win over ``svc.toml`` (``app_slug``, ``entry_url``, ``pay_to``) for ``create`` and
``upsert``; ``update`` sends only the flags given.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from svc.client import ApiFailure, DeveloperClient
from svc.commands.grant import signed_in
from svc.commands.target import app_of, app_option, app_path
from svc.errors import CliError, ExitCode, usage
from svc.output import Output
from svc.project import Project, read_project

KINDS = {"game": "Game", "application": "Application"}
# Flag destination -> the API's field, for the fields both create and update accept.
FIELDS = (("name", "name"), ("kind", "type"), ("headline", "headline"),
          ("entry_url", "entryUrl"), ("pay_to", "payTo"), ("tags", "tags"),
          ("targets", "distributionTargets"))
CREATE_FIELDS = frozenset({"name", "slug", "type", "headline", "payTo", "tags"})


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    target = app_option()
    fields = argparse.ArgumentParser(add_help=False)
    fields.add_argument("--name", help="public display name")
    fields.add_argument("--kind", type=_kind, metavar="game|application")
    fields.add_argument("--headline", help="one short public line")
    fields.add_argument("--entry-url", metavar="URL", help="your public entry URL ('' clears)")
    fields.add_argument("--pay-to", metavar="ADDRESS",
                        help="Base USDC recipient; changing it restarts the review")
    fields.add_argument("--tags", type=_list, metavar="A,B")
    fields.add_argument("--distribution-targets", dest="targets", type=_list, metavar="A,B",
                        help="Web, PWA, Base, ... (review metadata only)")
    app = groups.add_parser("app", help="the app").add_subparsers(metavar="COMMAND",
                                                                  required=True)
    app.add_parser("show", parents=[common, target],
                   help="show the app (needs apps:read)").set_defaults(run=show_app)
    create = app.add_parser("create", parents=[common, fields],
                            help="create an app (a console session can; grants cannot)")
    create.add_argument("--slug", help="the slug wanted (else app_slug in svc.toml, else "
                        "made from the name)")
    create.set_defaults(run=create_app)
    app.add_parser("update", parents=[common, target, fields],
                   help="change the fields given (needs apps:write)").set_defaults(
        run=update_app)
    upsert = app.add_parser("upsert", parents=[common, target, fields],
                            help="create the app if the slug is new, else change what "
                            "differs (needs apps:read, apps:write)")
    upsert.add_argument("--slug", help="same as --app")
    upsert.set_defaults(run=upsert_app)


def show_app(args: argparse.Namespace, out: Output) -> int:
    client, stored = signed_in(args)
    with client:
        app: dict[str, Any] = client.app(app_of(args, stored))["app"]
    out.emit({"app": app}, app_lines(app))
    return ExitCode.OK


def create_app(args: argparse.Namespace, out: Output) -> int:
    project = read_project(Path.cwd())
    wanted = wanted_fields(args, project)
    wanted["slug"] = args.slug or project.app
    client, _ = signed_in(args)
    with client:
        app = _create(client, wanted)
    out.emit({"app": app, "action": "created"}, [f"Created app {app['slug']} ({app['id']}).",
                                                 *app_lines(app)[1:]])
    return ExitCode.OK


def update_app(args: argparse.Namespace, out: Output) -> int:
    body = wanted_fields(args, Project())
    if not body:
        raise usage("Nothing to change: give --name, --kind, --headline, --entry-url, "
                    "--pay-to, --tags or --distribution-targets.")
    client, stored = signed_in(args)
    with client:
        app = client.call("PATCH", app_path(app_of(args, stored)), body)["app"]
    out.emit({"app": app, "action": "updated", "changed": sorted(body)},
             [f"Updated {', '.join(sorted(body))} of {app['slug']}.", *_review_note(body)])
    return ExitCode.OK


def upsert_app(args: argparse.Namespace, out: Output) -> int:
    project = read_project(Path.cwd())
    wanted = wanted_fields(args, project)
    client, stored = signed_in(args)
    slug = args.slug or app_of(args, stored)
    with client:
        try:
            current: dict[str, Any] | None = client.app(slug)["app"]
        except ApiFailure as answer:
            if answer.code != "app_not_found":
                raise
            current = None
        if current is None:
            app = _create(client, {**wanted, "slug": slug})
            action, changed = "created", sorted(k for k, v in wanted.items() if v is not None)
        else:
            body = app_changes(current, wanted)
            changed = sorted(body)
            app = client.call("PATCH", app_path(slug), body)["app"] if body else current
            action = "updated" if body else "unchanged"
    text = {"created": f"Created app {slug} ({app['id']}).",
            "updated": f"Updated {', '.join(changed)} of {slug}.",
            "unchanged": f"{slug} already matches; nothing changed."}[action]
    out.emit({"app": app, "action": action, "changed": changed},
             [text, *(_review_note(changed) if action == "updated" else [])])
    return ExitCode.OK


def wanted_fields(args: argparse.Namespace, project: Project) -> dict[str, Any]:
    """The API fields the flags (over ``svc.toml``'s defaults) ask for."""
    defaults = {"entry_url": project.entry_url, "pay_to": project.pay_to}
    body: dict[str, Any] = {}
    for dest, wire in FIELDS:
        value = getattr(args, dest, None)
        if value is None:
            value = defaults.get(dest)
        if value is not None:
            body[wire] = value
    return body


def app_changes(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The part of ``wanted`` that differs from the app as the service shows it."""
    def same(wire: str, value: Any) -> bool:
        have = current.get(wire)
        if wire in ("tags", "distributionTargets"):
            return list(have or []) == list(value)
        if wire == "payTo":
            return str(have or "").lower() == str(value).lower()
        return bool((have or "") == value)
    return {wire: value for wire, value in wanted.items() if not same(wire, value)}


def app_lines(app: dict[str, Any]) -> list[str]:
    runtime = app.get("runtime") or {}
    return [
        f"{app['slug']}  ({app['id']})", f"  name:     {app['name']}",
        f"  type:     {app['type']}", f"  status:   {app['status']}",
        f"  payTo:    {app['payTo'] or '-'} ({app['payToStatus']})",
        *allowlist_lines(app),
        f"  runtime:  {runtime.get('url', '-')} ({runtime.get('status', '-')})",
        f"  listing:  {app['portalListingStatus']}",
    ]


def allowlist_lines(app: dict[str, Any]) -> list[str]:
    """``recipientAllowlistStatus`` (spec 2.2, "shown as Allowlist"), and, when payments to
    ``payTo`` are refused for it, until when: the service only reads the spender contract's
    list, operators change it (the console's app page says the same)."""
    status = app.get("recipientAllowlistStatus") or "unknown"
    if status == "allowed":
        return ["  allowlist: allowed"]
    if not app.get("payTo"):
        return ["  allowlist: unknown (no payTo to check yet: payments are refused with "
                "APP_PAY_TO_INVALID until one is set)"]
    refused = "payments are refused with RECIPIENT_NOT_ALLOWLISTED until"
    add = "the service's operators add it (svc-ops allowlist add)"
    if status == "not_allowed":
        return ["  allowlist: not allowed",
                f"             payTo is not on the spender contract's allowlist: {refused} "
                f"{add}."]
    return [f"  allowlist: {status}, pending check",
            f"             {refused} the service has read payTo on the spender contract's "
            "allowlist (the chain worker's next cycle after payTo is set or changed); if it "
            f"is not on it, until {add}."]


def _create(client: DeveloperClient, wanted: dict[str, Any]) -> dict[str, Any]:
    if not wanted.get("name"):
        raise usage("A new app needs --name.")
    body = {k: v for k, v in wanted.items() if k in CREATE_FIELDS and v is not None}
    try:
        created: dict[str, Any] = client.call("POST", "/apps", body)["app"]
    except ApiFailure as answer:
        if answer.code == "developer_session_required":
            raise CliError(f"{answer.message} Create the app in the developer console, then "
                           "sign in for it with `svc auth browser --app <slug> --scopes "
                           "apps:read,apps:write`.", ExitCode.SCOPE, code=answer.code) from None
        raise
    rest = {k: v for k, v in wanted.items() if k not in CREATE_FIELDS and v is not None}
    if rest:  # entryUrl and distribution targets are set after creation
        created = client.call("PATCH", app_path(created["slug"]), rest)["app"]
    return created


def _review_note(changed: Iterable[str]) -> list[str]:
    return (["payTo changed: the portal-backing and listing review starts again (listing "
             "pending_review: no public portal page until operators approve it)."]
            if "payTo" in changed else [])


def _kind(text: str) -> str:
    kind = KINDS.get(text.strip().lower())
    if kind is None:
        raise argparse.ArgumentTypeError("expected game or application")
    return kind


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
