"""``svc app show`` and ``svc keys list``: the first commands that use a grant."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from svc.commands.grant import signed_in
from svc.errors import ExitCode, usage
from svc.grant_store import StoredGrant
from svc.output import Output
from svc.project import choose_app, read_project


def show_app(args: argparse.Namespace, out: Output) -> int:
    client, stored = signed_in(args)
    with client:
        app: dict[str, Any] = client.app(_app_of(args, stored))["app"]
    runtime = app.get("runtime") or {}
    out.emit({"app": app}, [
        f"{app['slug']}  ({app['id']})", f"  name:     {app['name']}",
        f"  type:     {app['type']}", f"  status:   {app['status']}",
        f"  payTo:    {app['payTo'] or '-'} ({app['payToStatus']})",
        f"  runtime:  {runtime.get('url', '-')} ({runtime.get('status', '-')})",
        f"  listing:  {app['portalListingStatus']}",
    ])
    return ExitCode.OK


def list_keys(args: argparse.Namespace, out: Output) -> int:
    client, stored = signed_in(args)
    slug = _app_of(args, stored)
    with client:
        keys: list[dict[str, Any]] = client.keys(slug)["keys"]
    rows = [f"{k['id']}  {k['preview']}  {k['environment']}  "
            f"{','.join(k['scopes']) or '(legacy: no scopes)'}  "
            f"{'revoked' if k['revokedAt'] else 'active'}  {k['label']}" for k in keys]
    out.emit({"app": slug, "keys": keys}, rows or [f"No API keys on {slug}."])
    return ExitCode.OK


def _app_of(args: argparse.Namespace, stored: StoredGrant) -> str:
    app = choose_app(args.app, read_project(Path.cwd()), stored.app)
    if not app:
        raise usage("Which app? Pass --app SLUG or set app_slug in svc.toml.")
    return app
