"""``svc config init [--app SLUG] [--file F] [--force]``: write ``svc.config.json`` and
``svc.toml`` (spec 2.9) from the app as the developer API shows it (``apps:read``), or a
starting template when there is no app to read: not signed in, or no such app yet.

Neither file is replaced without ``--force``, and neither ever holds a secret: the webhook
signing secret and API keys are shown once by the commands that create them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svc.client import ApiFailure, DeveloperClient
from svc.commands.export import svc_toml
from svc.commands.grant import issuer_url
from svc.commands.target import app_path
from svc.config_sources import from_app, refuse_secrets, template
from svc.errors import ExitCode, usage
from svc.grant_store import GrantStore
from svc.output import Output
from svc.project import PROJECT_FILE, api_url_from_environment, choose_app, read_project

# What config plan/apply can need of a grant (spec 5.3's scopes): apps:read to plan, and the
# write scope of each kind of change apply makes; keys:create is not among them.
CONFIG_SCOPES = "apps:read,apps:write,products:write,webhooks:write,runtime:write"
SIGN_IN = "svc auth browser --app {slug} --scopes " + CONFIG_SCOPES


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser, source: argparse.ArgumentParser) -> None:
    init = commands.add_parser("init", parents=[common, source],
                               help="write svc.config.json and svc.toml from the app (needs "
                               "apps:read), or a template when there is no app")
    init.add_argument("--app", metavar="SLUG", help="app slug (else svc.toml, the grant's)")
    init.add_argument("--force", action="store_true", help="replace existing files")
    init.set_defaults(run=init_files)


@dataclass(frozen=True)
class Start:
    """What the files are written from: the app as the service shows it, or a template."""

    source: str  # "app" or "template"
    document: dict[str, Any]
    notes: list[str]
    app: dict[str, Any]  # the app view (a template has only its slug)
    webhook_url: str | None
    api_url: str


def init_files(args: argparse.Namespace, out: Output) -> int:
    config_file, project_file = args.file, Path(PROJECT_FILE)
    existing = [str(p) for p in (config_file, project_file) if p.exists()]
    if existing and not args.force:
        raise usage(f"{' and '.join(existing)} already exist(s); nothing was written. Pass "
                    "--force to replace them with what the service has now.")
    start = start_from_service(args)
    toml = svc_toml(start.app, start.api_url, start.webhook_url, str(config_file))
    refuse_secrets(start.document, "The app's configuration", "Nothing was written.")
    refuse_secrets({PROJECT_FILE: toml}, PROJECT_FILE, "Nothing was written.")
    config_file.write_text(json.dumps(start.document, indent=2) + "\n", encoding="utf-8")
    project_file.write_text(toml, encoding="utf-8")
    out.emit({"app": start.app["slug"], "source": start.source, "config": start.document,
              "files": {"config": str(config_file), "project": str(project_file)},
              "notes": start.notes}, _lines(start, config_file, project_file))
    return ExitCode.OK


def start_from_service(args: argparse.Namespace) -> Start:
    """The app the grant can read (``--app``, svc.toml, the grant's), or a template."""
    stored = GrantStore().load()
    slug = choose_app(args.app, read_project(Path.cwd()), stored.app if stored else None)
    if stored is None:
        return _template(slug, "Not signed in, so no app was read",
                         api_url_from_environment(args.api_url))
    with DeveloperClient(issuer_url(args, stored), stored.token) as client:
        slug = slug or stored.app
        try:
            app: dict[str, Any] = client.app(slug)["app"]
        except ApiFailure as answer:
            if answer.code != "app_not_found":
                raise
            return _template(slug, f"There is no app '{slug}' in your organization yet",
                             client.api_url)
        products = client.call("GET", app_path(app["slug"], "products"))["products"]
        hooks = client.call("GET", app_path(app["slug"], "webhooks"))["webhooks"]
    document, notes = from_app(app, products, hooks)
    return Start("app", document, notes, app, hooks[0]["url"] if hooks else None,
                 client.api_url)


def _template(slug: str | None, why: str, api_url: str) -> Start:
    document = template(slug)
    slug = document["app"]["slug"]
    note = (f"{why}: this is a starting template. Edit it, create the app in the developer "
            f"console, then sign in for it: {SIGN_IN.format(slug=slug)}")
    return Start("template", document, [note], {"slug": slug}, None, api_url)


def _lines(start: Start, config_file: Path, project_file: Path) -> list[str]:
    document = start.document
    if start.source == "template":
        head = f"Wrote {config_file}: a starting template for app {start.app['slug']}."
    else:
        runtime = document.get("runtime")
        head = (f"Wrote {config_file} from app {start.app['slug']}: "
                f"{len(document['products'])} product(s), {len(document['webhooks'])} webhook "
                f"endpoint(s), " + (f"runtime {runtime['origin']}." if runtime else
                                    "no runtime."))
    return [head, *start.notes, f"Wrote {project_file} (its products_file is {config_file}).",
            "Next: `svc config plan` shows what applying the file would change."]
