"""``svc export --format dotenv|toml|products-json``: the app as files a project keeps.

``dotenv`` is the Worker Quick Launch environment (spec 4.11). Secrets are shown once by
the commands that create them, so the file carries empty placeholders with a note on where
each comes from: an exported file never holds a usable secret.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from svc.client import DeveloperClient
from svc.commands.target import app_option, app_path, client_for_app
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.product_plan import file_product
from svc.project import Project, read_project

FORMATS = ("dotenv", "toml", "products-json")
DEFAULT_PRODUCTS_FILE = "products.json"


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    export = groups.add_parser("export", parents=[common, app_option()],
                               help="write the app as a dotenv, svc.toml or products file "
                               "(needs apps:read)")
    export.add_argument("--format", required=True, choices=FORMATS)
    export.add_argument("--output", type=Path, metavar="FILE",
                        help="write to FILE (else print)")
    export.add_argument("--force", action="store_true", help="replace an existing FILE")
    export.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    if args.output is not None and args.output.exists() and not args.force:
        raise usage(f"{args.output} exists; pass --force to replace it.")
    project = read_project(Path.cwd())
    client, slug = client_for_app(args)
    with client:
        text = render(args.format, client, slug, project)
    payload: dict[str, Any] = {"app": slug, "format": args.format}
    if args.output is None:
        out.emit({**payload, "content": text}, text.rstrip("\n").split("\n"))
        return ExitCode.OK
    args.output.write_text(text, encoding="utf-8")
    out.emit({**payload, "path": str(args.output)}, [f"Wrote {args.output} ({args.format})."])
    return ExitCode.OK


def render(kind: str, client: DeveloperClient, slug: str, project: Project) -> str:
    app: dict[str, Any] = client.app(slug)["app"]
    if kind == "products-json":
        products = client.call("GET", app_path(slug, "products"))["products"]
        return json.dumps({"products": [file_product(p) for p in products]}, indent=2) + "\n"
    hooks = client.call("GET", app_path(slug, "webhooks"))["webhooks"]
    webhook_url = hooks[0]["url"] if hooks else project.webhook_url
    if kind == "dotenv":
        return dotenv(app, webhook_url)
    return svc_toml(app, client.api_url, webhook_url,
                    project.products_file or DEFAULT_PRODUCTS_FILE)


def dotenv(app: dict[str, Any], webhook_url: str | None) -> str:
    runtime = app.get("runtime") or {}
    slug = app["slug"]
    lines = [
        f"# Worker Quick Launch environment of {slug} (svc export --format dotenv).",
        "# Secrets are never exported; the empty ones come from your secret store.",
        f"SVC_APP_ID={app['id']}",
        f"SVC_APP_SLUG={slug}",
        f"SVC_PAY_TO={app.get('payTo') or ''}",
        "# Your own deployed origin (never the service's proxy host).",
        f"SVC_RUNTIME_ORIGIN={runtime.get('origin') or ''}",
        f"SVC_RUNTIME_APP_PATH={runtime.get('appPath') or '/'}",
        f"SVC_RETURN_URL={runtime.get('url', '')}/svc-auth-return?app={slug}",
        "# The zwhsec_ signing secret `svc webhook upsert` (or `rotate`) showed once; "
        "server-side only.",
        "SVC_WEBHOOK_SECRET=",
        "# Optional: a backend-only zpk_ key; `svc keys create` shows it once.",
        "SVC_API_KEY=",
        f"SVC_WEBHOOK_URL={webhook_url or ''}",
        "# Optional: your durable inventory store.",
        "DATABASE_URL=",
    ]
    return "\n".join(lines) + "\n"


def svc_toml(app: dict[str, Any], api_url: str, webhook_url: str | None,
             products_file: str) -> str:
    values = {"api_url": api_url, "app_slug": app["slug"], "entry_url": app.get("entryUrl"),
              "pay_to": app.get("payTo"), "webhook_url": webhook_url,
              "products_file": products_file}
    # A JSON string is a valid TOML basic string for everything these values hold.
    lines = [f"{key} = {json.dumps(value)}" for key, value in values.items() if value]
    origin = (app.get("runtime") or {}).get("origin")
    if origin:
        lines += ["", "[runtime]", f"origin = {json.dumps(origin)}"]
    return "\n".join(lines) + "\n"
