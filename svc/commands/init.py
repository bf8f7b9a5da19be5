"""``svc init DIR [--app SLUG] [--force]``: a new project holding a copy of the reference
app (spec 4.9), ``svc.config.json`` and ``svc.toml`` (spec 2.9) and a ``.env`` of the
Worker Quick Launch variables (spec 4.11), ready for ``svc config apply``.

The three files describe the app the grant can read, as ``svc config init`` and ``svc
export`` do; without one (not signed in, or no such app yet) they are a starting template
with placeholders and the commands that fill them. Nothing written holds a secret: the
``.env`` keeps empty ``SVC_WEBHOOK_SECRET`` and ``SVC_API_KEY`` lines for the values that
`svc webhook upsert` and `svc keys create` show once, and is created readable by its owner
only, since that is where they go.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from svc.commands.config_init import Start, start_from_service
from svc.commands.export import dotenv, svc_toml
from svc.config_sources import refuse_secrets
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.project import PROJECT_FILE
from svc.reference_copy import TARGET_PACKAGE, SourceFile, reference_dir, source_files

CONFIG_FILE = "svc.config.json"
ENV_FILE = ".env"
GITIGNORE = "# Secrets and local stores never go to a repository (spec 1.4 item 8).\n" \
            ".env\n*.db\n__pycache__/\n"
SCOPES = "apps:read,apps:write,products:write,webhooks:write,runtime:write,keys:create"


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    init = groups.add_parser("init", parents=[common],
                             help="start a project: the reference app, svc.config.json, "
                             "svc.toml and .env (reads the app with apps:read)")
    init.add_argument("directory", type=Path, metavar="DIR", help="where to write it")
    init.add_argument("--app", metavar="SLUG", help="app slug (else svc.toml, the grant's)")
    init.add_argument("--force", action="store_true",
                      help="write into a directory that is not empty, replacing these files")
    init.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    target: Path = args.directory
    if target.exists() and not target.is_dir():
        raise usage(f"{target} is a file, not a directory; nothing was written.")
    if target.is_dir() and any(target.iterdir()) and not args.force:
        raise usage(f"{target} is not empty; nothing was written. Pass --force to write the "
                    "project into it anyway (files of the same names are replaced).")
    sources = source_files(reference_dir())
    start = start_from_service(args)
    files = project_files(start)
    for name, text in files.items():
        refuse_secrets({name: text}, name, "Nothing was written.")
    written = write_project(target, sources, files)
    slug = start.app["slug"]
    steps = next_steps(start)
    out.emit({"directory": str(target), "app": slug, "source": start.source,
              "files": written, "notes": start.notes, "next": steps},
             _lines(target, start, written, steps))
    return ExitCode.OK


def project_files(start: Start) -> dict[str, str]:
    """``svc.config.json``, ``svc.toml``, ``.env`` and ``.gitignore``, by name."""
    if start.source == "app":
        env = dotenv(start.app, start.webhook_url)
    else:
        env = template_env(start.app["slug"])
    env += service_env(start.api_url)
    return {
        CONFIG_FILE: json.dumps(start.document, indent=2) + "\n",
        PROJECT_FILE: svc_toml(start.app, start.api_url, start.webhook_url, CONFIG_FILE),
        ENV_FILE: env,
        ".gitignore": GITIGNORE,
    }


def template_env(slug: str) -> str:
    """The variables of spec 4.11 for an app the service does not show yet."""
    lines = [
        f"# Worker Quick Launch environment of {slug}: a template (svc init found no app).",
        "# Once the app exists: `svc export --format dotenv` prints these values.",
        "SVC_APP_ID=          # zapp_..., from `svc app show`",
        f"SVC_APP_SLUG={slug}",
        "SVC_PAY_TO=          # your Base USDC receive address (app.payTo in svc.config.json)",
        "# Local dev: http://127.0.0.1:<port>; deployed: your own HTTPS origin.",
        "SVC_RUNTIME_ORIGIN=",
        "SVC_RUNTIME_APP_PATH=/",
        f"SVC_RETURN_URL=      # https://{slug}.<apps domain>/svc-auth-return?app={slug}",
        "# The zwhsec_ signing secret `svc config apply` (or `svc webhook upsert`) shows once.",
        "SVC_WEBHOOK_SECRET=",
        "# A backend-only zpk_ key with the seven backend scopes; `svc keys create` shows it once.",
        "SVC_API_KEY=",
        "SVC_WEBHOOK_URL=     # <your origin>/api/svc/webhook",
        "DATABASE_URL=sqlite:///reference-app.db",
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
        f"SVC_API_URL={api_url}",
        f"SVC_PORTAL_URL={portal}", ""])


def write_project(target: Path, sources: list[SourceFile], files: dict[str, str]) -> list[str]:
    written: list[str] = []
    for source in sources:
        path = target / TARGET_PACKAGE / source.relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.content)
        written.append(str(Path(TARGET_PACKAGE) / source.relative))
    for name, text in files.items():
        path = target / name
        if name == ENV_FILE:
            # Created 0600 before anything is in it: the developer adds the secrets here.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)  # an existing file (--force) keeps its old mode otherwise
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        written.append(name)
    return written


def next_steps(start: Start) -> list[str]:
    slug = start.app["slug"]
    steps = [] if start.source == "app" else [
        f"create the app '{slug}' in the developer console, then: "
        f"svc auth browser --app {slug} --scopes {SCOPES}"]
    return [*steps,
            "svc config plan && svc config apply   # products, webhook, runtime origin",
            "svc keys create --label backend --scopes orders:create,orders:read,receipts:read,"
            "deliveries:read,charges:create,connections:create,connections:read",
            "svc export --format dotenv   # then add the two secrets to .env",
            f"python -m {TARGET_PACKAGE} --host 127.0.0.1 --port 8787",
            "svc runtime verify && svc runtime request-domain"]


def _lines(target: Path, start: Start, written: list[str], steps: list[str]) -> list[str]:
    what = (f"app {start.app['slug']} as the service shows it" if start.source == "app"
            else f"a template for app {start.app['slug']}")
    return [f"Wrote {len(written)} files to {target}: the reference app ({TARGET_PACKAGE}/), "
            f"{CONFIG_FILE}, {PROJECT_FILE} and {ENV_FILE} from {what}.", *start.notes,
            "Next:", *(f"  {step}" for step in steps)]
