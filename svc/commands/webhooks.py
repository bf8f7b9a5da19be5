"""``svc webhook list|upsert|update|rotate|test|retry|resend-skipped|attempts`` (spec 4.10).

The signing secret is printed once, by ``upsert`` when it creates the endpoint and by
``rotate``; store it server-side as ``SVC_WEBHOOK_SECRET`` (spec 4.11), never in frontend
code or a repository. Later answers carry only its preview.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from urllib.parse import quote

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.grant import signed_in
from svc.errors import CliError, ExitCode, usage
from svc.output import Output
from svc.project import choose_app, read_project
from svc.rotation import after_lost_answer, if_interrupted
from svc.sent import noting

STORAGE_NOTE = ("Signing secret (shown once; keep it server-side as SVC_WEBHOOK_SECRET, never "
               "in frontend code or a repository):")


def list_webhooks(args: argparse.Namespace, out: Output) -> int:
    client, slug = _client(args)
    with client:
        hooks: list[dict[str, Any]] = client.call("GET", _path(slug, "webhooks"))["webhooks"]
    out.emit({"app": slug, "webhooks": hooks},
             [line for h in hooks for line in (_line(h), *_skipped(slug, h))]
             or [f"No webhook endpoint on {slug}."])
    return ExitCode.OK


def upsert(args: argparse.Namespace, out: Output) -> int:
    """Create the app's endpoint, or change the existing one to this URL and events."""
    if not args.url:
        raise usage("Give the receiver's public HTTPS URL with --url.")
    client, slug = _client(args)
    body: dict[str, Any] = {"url": args.url}
    if args.events:
        body["events"] = args.events
    with client:
        hooks = client.call("GET", _path(slug, "webhooks"))["webhooks"]
        if hooks:
            changed = client.call("PATCH", _path(slug, f"webhooks/{_q(hooks[0]['id'])}"), body)
            hook = changed["webhook"]
            out.emit({"app": slug, "webhook": hook, "created": False},
                     [f"Updated {_line(hook)}", *_skipped(slug, hook)])
            return ExitCode.OK
        created = client.call("POST", _path(slug, "webhooks"), body)
    hook, secret = created["webhook"], created["secret"]
    out.emit({"app": slug, "webhook": hook, "created": True, "secret": secret},
             [f"Created {_line(hook)}", STORAGE_NOTE, f"  {secret}"])
    return ExitCode.OK


def update(args: argparse.Namespace, out: Output) -> int:
    body: dict[str, Any] = {}
    if args.url:
        body["url"] = args.url
    if args.events:
        body["events"] = args.events
    if args.enabled is not None:
        body["enabled"] = args.enabled
    if not body:
        raise usage("Nothing to change: give --url, --events, --enable or --disable.")
    client, slug = _client(args)
    with client:
        hook_id = _endpoint_id(client, slug)
        hook = client.call("PATCH", _path(slug, f"webhooks/{_q(hook_id)}"), body)["webhook"]
    out.emit({"app": slug, "webhook": hook}, [f"Updated {_line(hook)}", *_skipped(slug, hook)])
    return ExitCode.OK


def resend_skipped(args: argparse.Namespace, out: Output) -> int:
    """The events skipped while the endpoint was disabled, sent again oldest first."""
    client, slug = _client(args)
    with client:
        hook_id = _endpoint_id(client, slug)
        sent = client.call("POST", _path(slug, f"webhooks/{_q(hook_id)}/resend-skipped"))
    views: list[dict[str, Any]] = sent["attempts"]
    lines = ([f"Resending {len(views)} skipped event(s), oldest first, one at a time "
              "(same event ids):", *(f"  {v['eventId']}  {v['type']}" for v in views),
              f"See them with `svc webhook attempts --app {slug}`."]
             if views else ["No skipped events were left to send."])
    out.emit({"app": slug, "resent": sent["resent"], "attempts": views}, lines)
    return ExitCode.OK


def rotate(args: argparse.Namespace, out: Output) -> int:
    if not args.yes:
        raise usage("Rotating replaces the signing secret at once: requests from now on are "
                    "signed with the new one. Rerun with --yes.")
    client, slug = _client(args)
    with client:
        before = _endpoint(client, slug)  # the secret's preview and age, to compare after
        hook_id = str(before["id"])
        try:
            with noting(if_interrupted(slug, before)):
                rotated = client.call("POST", _path(slug, f"webhooks/{_q(hook_id)}/rotate"))
        except ServiceUnreachable as lost:
            raise after_lost_answer(client, slug, before, lost) from None
        except ApiFailure as failure:
            if failure.status < 500:  # refused: nothing was rotated
                raise
            raise after_lost_answer(client, slug, before, failure) from None
    out.emit({"app": slug, "webhook": rotated["webhook"], "secret": rotated["secret"]},
             [f"Rotated the signing secret of {hook_id}.", STORAGE_NOTE,
              f"  {rotated['secret']}"])
    return ExitCode.OK


def send_test(args: argparse.Namespace, out: Output) -> int:
    client, slug = _client(args)
    with client:
        hook_id = _endpoint_id(client, slug)
        attempt = client.call("POST", _path(slug, f"webhooks/{_q(hook_id)}/test"))["attempt"]
    out.emit({"app": slug, "attempt": attempt},
             [f"Test event {attempt['eventId']} queued ({attempt['id']}); "
              f"see it with `svc webhook attempts --app {slug}`."])
    return ExitCode.OK


def retry(args: argparse.Namespace, out: Output) -> int:
    client, slug = _client(args)
    with client:
        attempt = client.call("POST", _path(slug, f"webhook-attempts/{_q(args.id)}/retry"))
    view = attempt["attempt"]
    out.emit({"app": slug, "attempt": view},
             [f"Retrying {view['eventId']} (same event id); it was tried "
              f"{view['attemptCount']} time(s)."])
    return ExitCode.OK


def list_attempts(args: argparse.Namespace, out: Output) -> int:
    """One page, newest first; ``--before`` takes the ``nextBefore`` of the page before."""
    client, slug = _client(args)
    query = f"?limit={args.limit}" + (f"&status={_q(args.status)}" if args.status else "")
    if args.before is not None:
        query += f"&before={_q(args.before)}"
    with client:
        found = client.call("GET", _path(slug, "webhook-attempts") + query)
    views: list[dict[str, Any]] = found["attempts"]
    older: str | None = found.get("nextBefore")
    rows = [f"{v['eventId']}  {v['type']}{' (test)' if v['test'] else ''}  {v['status']}  "
            f"tries={v['attemptCount']}  last={v['responseStatus'] or '-'}"
            f"{'  ' + v['lastError'] if v['lastError'] else ''}" for v in views]
    if not rows:
        rows = [f"No older webhook events on {slug}." if args.before is not None
                else f"No webhook events on {slug} yet."]
    if older is not None:
        again = " ".join(["svc webhook attempts", f"--app {slug}", f"--limit {args.limit}",
                          *([f"--status {args.status}"] if args.status else []),
                          f"--before {older}"])
        rows.append(f"Older events: {again}")
    out.emit({"app": slug, "attempts": views, "nextBefore": older}, rows)
    return ExitCode.OK


def events_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _client(args: argparse.Namespace) -> tuple[DeveloperClient, str]:
    client, stored = signed_in(args)
    slug = choose_app(args.app, read_project(Path.cwd()), stored.app)
    if not slug:
        client.close()
        raise usage("Which app? Pass --app SLUG or set app_slug in svc.toml.")
    return client, slug


def _endpoint_id(client: DeveloperClient, slug: str) -> str:
    return str(_endpoint(client, slug)["id"])


def _endpoint(client: DeveloperClient, slug: str) -> dict[str, Any]:
    hooks = client.call("GET", _path(slug, "webhooks"))["webhooks"]
    if not hooks:
        raise CliError(f"App {slug} has no webhook endpoint yet.", ExitCode.FAILED,
                       code="webhook_not_found",
                       command=f"svc webhook upsert --app {slug} --url https://...")
    hook: dict[str, Any] = hooks[0]
    return hook


def _path(slug: str, rest: str) -> str:
    return f"/apps/{_q(slug)}/{rest}"


def _q(value: str) -> str:
    return quote(value, safe="")


def _line(hook: dict[str, Any]) -> str:
    return (f"{hook['id']}  {hook['url']}  [{', '.join(hook['events'])}]  {hook['status']}  "
            f"secret {hook['secretPreview']}")


def _skipped(slug: str, hook: dict[str, Any]) -> list[str]:
    """What enabling (or not yet) left unsent: events skipped while it was disabled."""
    count = int(hook.get("skippedWhileDisabled") or 0)
    if not count:
        return []
    said = f"{count} event(s) came due while the endpoint was disabled and were not sent"
    if hook["status"] != "enabled":
        return [f"{said}; enable it, then resend them with "
                f"`svc webhook resend-skipped --app {slug}`."]
    return [f"{said}; resend them in the order they were created with "
            f"`svc webhook resend-skipped --app {slug}`."]
