"""``svc doctor``: check a project's ``svc.toml`` and env file before deploying it.

Offline: nothing is sent anywhere, and secrets in the env file are never printed (the rules
in :mod:`svc.doctor` name keys, not secret values).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from svc.doctor import (
    DEFAULT_ENVIRONMENT,
    ENV_NAME_KEY,
    Finding,
    Inputs,
    apps_domain_of,
    examine,
    production_like,
)
from svc.env_file import read_env_file
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.project import Project, read_project


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    doctor = groups.add_parser("doctor", parents=[common],
                               help="check svc.toml and an env file for deploy mistakes")
    doctor.add_argument("--env-file", type=Path, metavar="FILE",
                        help="a dotenv file, e.g. the one `svc export --format dotenv` wrote")
    doctor.add_argument("--env", metavar="NAME", help="the environment checked: local, test, "
                        f"preview, production (else {ENV_NAME_KEY} in the env file, else "
                        f"{DEFAULT_ENVIRONMENT})")
    doctor.add_argument("--apps-domain", metavar="DOMAIN", help="the service's runtime proxy "
                        "domain (else taken from SVC_RETURN_URL)")
    doctor.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    project = read_project(Path.cwd())
    env = read_env_file(args.env_file) if args.env_file else {}
    if project.path is None and args.env_file is None:
        raise usage("Nothing to check: run it in a project with svc.toml, or pass "
                    "--env-file FILE.")
    environment = args.env or env.get(ENV_NAME_KEY) or DEFAULT_ENVIRONMENT
    apps_domain = (args.apps_domain or apps_domain_of(env) or "").lower().strip(".") or None
    findings = examine(Inputs(environment, env, _toml_keys(project), apps_domain))
    failed = [f for f in findings if f.level == "error"]
    checked = [str(p) for p in (project.path, args.env_file) if p is not None]
    out.emit({"ok": not failed, "environment": environment,
              "productionLike": production_like(environment), "appsDomain": apps_domain,
              "checked": checked, "findings": [f.as_json() for f in findings]},
             _lines(environment, checked, findings, failed))
    return ExitCode.FAILED if failed else ExitCode.OK


def _toml_keys(project: Project) -> dict[str, str | None]:
    return {"api_url": project.api_url, "app_slug": project.app, "entry_url": project.entry_url,
            "webhook_url": project.webhook_url, "pay_to": project.pay_to,
            "[runtime].origin": project.runtime_origin}


def _lines(environment: str, checked: list[str], findings: list[Finding],
           failed: list[Finding]) -> list[str]:
    lines = [f"Checked {', '.join(checked)} as {environment}:"]
    for finding in findings:
        mark = "FAIL" if finding.level == "error" else "WARN"
        lines += [f"  {mark}  {finding.code} ({finding.key}): {finding.message}",
                  f"        fix: {finding.fix}"]
    lines.append(f"{len(failed)} problem(s) to fix." if failed else "No problems found.")
    return lines
