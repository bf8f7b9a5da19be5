"""The app a command acts on, and a signed-in client for it."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import quote

from svc.client import DeveloperClient
from svc.commands.grant import signed_in
from svc.errors import usage
from svc.grant_store import StoredGrant
from svc.project import choose_app, read_project


def app_option() -> argparse.ArgumentParser:
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--app", metavar="SLUG", help="app slug (else svc.toml, the grant's)")
    return target


def app_of(args: argparse.Namespace, stored: StoredGrant | None) -> str:
    app = choose_app(args.app, read_project(Path.cwd()), stored.app if stored else None)
    if not app:
        raise usage("Which app? Pass --app SLUG or set app_slug in svc.toml.")
    return app


def client_for_app(args: argparse.Namespace) -> tuple[DeveloperClient, str]:
    client, stored = signed_in(args)
    return client, app_of(args, stored)


def app_path(slug: str, rest: str = "") -> str:
    return f"/apps/{quote(slug, safe='')}" + (f"/{rest}" if rest else "")


def segment(value: str) -> str:
    return quote(value, safe="")
