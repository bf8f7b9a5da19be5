"""``svc export --format dotenv|toml|products-json``: the app as files a project keeps.

``dotenv`` is the Worker Quick Launch environment (spec 4.11) and the service's two URLs
the SDK reads. Secrets are shown once by the commands that create them, so the file carries
empty placeholders with a note on where each comes from: an exported file never holds a
usable secret. Written over an existing dotenv file it updates that file in place, keeping
the secrets and every other line the developer put there (``svc init`` wrote one).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from svc.client import DeveloperClient
from svc.commands.target import app_option, app_path, client_for_app
from svc.env_file import assignment, merge_env, parse_env, write_private
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.product_plan import file_product
from svc.project import Project, read_project

FORMATS = ("dotenv", "toml", "products-json")
DEFAULT_PRODUCTS_FILE = "products.json"
SECRETS = ("SVC_WEBHOOK_SECRET", "SVC_API_KEY")


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    export = groups.add_parser("export", parents=[common, app_option()],
                               help="write the app as a dotenv, svc.toml or products file "
                               "(needs apps:read)")
    export.add_argument("--format", required=True, choices=FORMATS)
    export.add_argument("--output", type=Path, metavar="FILE",
                        help="write to FILE (else print)")
    export.add_argument("--force", action="store_true",
                        help="replace an existing FILE (a dotenv FILE is otherwise updated "
                        "in place)")
    export.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    output: Path | None = args.output
    if output is not None and output.is_dir():
        raise usage(f"{output} is a directory; give a file.")
    exists = output is not None and output.exists()
    if exists and not args.force and args.format != "dotenv":
        raise usage(f"{output} exists; pass --force to replace it.")
    update = exists and not args.force  # a dotenv file: updated in place
    project = read_project(Path.cwd())
    client, slug = client_for_app(args)
    with client:
        text = render(args.format, client, slug, project)
    payload: dict[str, Any] = {"app": slug, "format": args.format}
    if output is None:
        out.emit({**payload, "content": text}, text.rstrip("\n").split("\n"))
        return ExitCode.OK
    if args.format != "dotenv":
        output.write_text(text, encoding="utf-8")
        out.emit({**payload, "path": str(output)}, [f"Wrote {output} ({args.format})."])
        return ExitCode.OK
    return _write_dotenv(output, text, update, payload, out)


def _write_dotenv(output: Path, text: str, update: bool, payload: dict[str, Any],
                  out: Output) -> int:
    """A new (or ``--force``d) file is the export; an existing one is updated in place."""
    exported = parse_env(text)
    if update:
        try:
            current = output.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise usage(f"Cannot read {output} to update it: {exc}") from exc
        merged = merge_env(current, exported, "Added by svc export --format dotenv.")
        text, changed, added, values = merged.text, merged.changed, merged.added, merged.values
    else:
        changed, added, values = [], list(exported), exported
    write_private(output, text)
    kind = "dotenv, mode 0600"
    if not update:
        lines = [f"Wrote {output} ({kind})."]
    elif changed or added:
        done = [f"{verb} {', '.join(names)}" for verb, names in (("set", changed),
                                                               ("added", added)) if names]
        lines = [f"Updated {output} ({kind}): {'; '.join(done)}; every other line kept."]
    else:
        lines = [f"{output} is up to date ({kind})."]
    empty = [name for name in SECRETS if not values.get(name)]
    if empty:
        lines.append(f"Still empty: {', '.join(empty)}; fill them in with the secrets shown "
                     "once (the comments in the file say by which command).")
    out.emit({**payload, "path": str(output), "updated": update, "changed": changed,
              "added": added, "emptySecrets": empty}, lines)
    return ExitCode.OK


def render(kind: str, client: DeveloperClient, slug: str, project: Project) -> str:
    app: dict[str, Any] = client.app(slug)["app"]
    if kind == "products-json":
        products = client.call("GET", app_path(slug, "products"))["products"]
        return json.dumps({"products": [file_product(p) for p in products]}, indent=2) + "\n"
    hooks = client.call("GET", app_path(slug, "webhooks"))["webhooks"]
    webhook_url = hooks[0]["url"] if hooks else project.webhook_url
    if kind == "dotenv":
        return dotenv(app, webhook_url) + service_env(client.api_url)
    return svc_toml(app, client.api_url, webhook_url,
                    project.products_file or DEFAULT_PRODUCTS_FILE)


def dotenv(app: dict[str, Any], webhook_url: str | None) -> str:
    runtime = app.get("runtime") or {}
    slug = app["slug"]
    lines = [
        f"# Worker Quick Launch environment of {slug} (svc export --format dotenv).",
        "# Secrets are never exported; the empty ones come from your secret store.",
        assignment("SVC_APP_ID", app["id"]),
        assignment("SVC_APP_SLUG", slug),
        assignment("SVC_PAY_TO", app.get("payTo") or ""),
        "# Your own deployed origin (never the service's proxy host).",
        assignment("SVC_RUNTIME_ORIGIN", runtime.get("origin") or ""),
        assignment("SVC_RUNTIME_APP_PATH", runtime.get("appPath") or "/"),
        assignment("SVC_RETURN_URL", f"{runtime.get('url', '')}/svc-auth-return?app={slug}"),
        "# The zwhsec_ signing secret `svc config apply` or `svc webhook upsert` (or `rotate`) "
        "showed once; server-side only.",
        "SVC_WEBHOOK_SECRET=",
        "# Optional: a backend-only zpk_ key; `svc keys create` shows it once.",
        "SVC_API_KEY=",
        assignment("SVC_WEBHOOK_URL", webhook_url or ""),
        "# Optional: your durable inventory store.",
        "DATABASE_URL=",
    ]
    return "\n".join(lines) + "\n"


def service_env(api_url: str) -> str:
    """``SVC_API_URL`` and ``SVC_PORTAL_URL``, the service's own addresses the SDK reads
    beside spec 4.11's. The CLI knows the API; the portal follows the service's host
    layout (``api.`` / ``portal.``, as ``svc-server dev`` has it) when the API's name
    starts with ``api.``, else it is left for the developer to fill in."""
    parts = urlsplit(api_url)
    portal = ""
    if parts.hostname and parts.hostname.startswith("api."):
        portal = urlunsplit((parts.scheme, "portal." + parts.netloc[len("api."):], "", "", ""))
    return "\n".join([
        "# The service, as the SDK reads it: the payment API and the portal (its modal script).",
        assignment("SVC_API_URL", api_url),
        assignment("SVC_PORTAL_URL", portal), ""])


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
