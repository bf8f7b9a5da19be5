"""``svc init DIR [--app SLUG] [--force]``: a new project holding a copy of the reference
app (spec 4.9), ``svc.config.json`` and ``svc.toml`` (spec 2.9) and a ``.env`` of the
Worker Quick Launch variables (spec 4.11), ready for ``svc config apply``.

The three files describe the app the grant can read, as ``svc config init`` and ``svc
export`` do; without one (not signed in, or no such app yet) they are a starting template
with placeholders and the commands that fill them. Nothing written holds a secret: the
``.env`` keeps empty ``SVC_WEBHOOK_SECRET`` and ``SVC_API_KEY`` lines for the values that
`svc config apply` (or `svc webhook upsert`) and `svc keys create` show once, and is created
readable by its owner only, since that is where they go; `svc export --format dotenv
--output .env` later updates it in place.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from svc.commands.config_init import Start, start_from_service
from svc.commands.export import dotenv, service_env, svc_toml
from svc.config_sources import refuse_secrets
from svc.env_file import write_private
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.project import PROJECT_FILE
from svc.reference_copy import TARGET_PACKAGE, SourceFile, reference_dir, source_files

CONFIG_FILE = "svc.config.json"
ENV_FILE = ".env"
CATALOGUE_FILE = "catalogue.json"  # what the reference app sells, with the products' ids
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
    steps = next_steps(start, target)
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
        "# Once the app exists: `svc export --format dotenv --output .env` fills them in here.",
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
            write_private(path, text)  # 0600: the developer adds the secrets here
        else:
            path.write_text(text, encoding="utf-8")
        written.append(name)
    return written


def next_steps(start: Start, target: Path) -> list[str]:
    """The commands that take the new project to a verified runtime, each as it works when
    pasted: the project's commands read ``svc.toml`` and ``.env`` from its directory."""
    slug = start.app["slug"]
    steps = [] if start.source == "app" else [
        f"create the app '{slug}' in the developer console, then: "
        f"svc auth browser --app {slug} --scopes {SCOPES}"]
    return [*steps, f"cd {shlex.quote(str(target))}",
            "svc config plan && svc config apply   # products, webhook, runtime origin",
            "svc keys create --label backend --scopes orders:create,orders:read,receipts:read,"
            "deliveries:read,charges:create,connections:create,connections:read",
            f"svc export --format dotenv --output {ENV_FILE}   # updates it; then add the two "
            "secrets shown once",
            f"svc product list --json > {CATALOGUE_FILE}   # the product ids orders and trusted "
            "charges need",
            f"set -a; . ./{ENV_FILE}; set +a; python -m {TARGET_PACKAGE} --host 127.0.0.1 "
            f"--port 8787 --products {CATALOGUE_FILE}",
            "svc runtime verify && svc runtime request-domain   # in another terminal, here"]


def _lines(target: Path, start: Start, written: list[str], steps: list[str]) -> list[str]:
    what = (f"app {start.app['slug']} as the service shows it" if start.source == "app"
            else f"a template for app {start.app['slug']}")
    return [f"Wrote {len(written)} files to {target}: the reference app ({TARGET_PACKAGE}/), "
            f"{CONFIG_FILE}, {PROJECT_FILE} and {ENV_FILE} from {what}.", *start.notes,
            "Next:", *(f"  {step}" for step in steps)]
