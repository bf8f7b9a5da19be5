"""``svc runtime configure|verify|request-domain|disable|status`` (spec 3.1, 4.10).

The grant needs ``runtime:write`` (``status`` needs ``apps:read``). Exit codes scripts can
rely on: 0 done (verify: every check passed); 1 the service did not do it (verification
failed: every failed check is printed, with ``--json`` the whole report; or the runtime is
in a state that does not allow it); 2 bad input (an origin the policy refuses, a path that
is not concrete); 3 the grant lacks ``runtime:write`` (the sign-in to rerun is printed);
4 not signed in; 5 the service is unreachable.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from svc.client import ApiFailure, DeveloperClient
from svc.commands.grant import issuer_url
from svc.errors import CliError, ExitCode, not_signed_in, usage
from svc.grant_store import GrantStore
from svc.output import Output
from svc.project import PROJECT_FILE, choose_app, read_project

# The server fetches the manifest and probes two routes, each within its own deadline.
VERIFY_TIMEOUT = 90.0


def configure(args: argparse.Namespace, out: Output) -> int:
    origin = args.origin or _project_origin()
    if not origin:
        raise usage("Which origin? Pass --origin https://<your domain> or set [runtime] "
                    f"origin in {PROJECT_FILE}.")
    body = {"origin": origin, "appPath": args.app_path}
    if args.entry_path is not None:  # otherwise the service takes the app path
        body["entryPath"] = args.entry_path
    result = _call(args, "POST", "configure", body)
    runtime = result["runtime"]
    out.emit(result, [line for line in [
        f"Saved the runtime of {runtime['app']}: {runtime['origin']} "
        f"(app path {runtime['appPath']}, entry path {runtime['entryPath']}).",
        f"Status: {runtime['status']}." + ("" if result.get("changed") else " Nothing changed."),
        "Next: deploy /.well-known/svc.json there, then run `svc runtime verify`."
        if runtime["status"] == "pending_verification" else "",
    ] if line])
    return ExitCode.OK


def verify(args: argparse.Namespace, out: Output) -> int:
    try:
        result = _call(args, "POST", "verify", None, timeout=VERIFY_TIMEOUT)
    except ApiFailure as failure:
        if failure.code != "runtime_verification_failed":
            raise
        runtime, checks = failure.body.get("runtime") or {}, failure.body.get("checks") or []
        out.emit({"runtime": runtime, "report": {"passed": False, "checks": checks},
                  "error": {"code": failure.code, "message": failure.message,
                            "exitCode": int(ExitCode.FAILED)}},
                 [f"Verifying the runtime of {runtime.get('app', '?')} at "
                  f"{runtime.get('origin', '?')}:", *report_lines(checks),
                  f"Verification failed: {sum(not c.get('passed') for c in checks)} of "
                  f"{len(checks)} checks did not pass. Status: {runtime.get('status')}.",
                  "Fix the failed checks, then run `svc runtime verify` again."])
        return ExitCode.FAILED
    runtime, checks = result["runtime"], result["report"]["checks"]
    out.emit(result, [f"Verifying the runtime of {runtime['app']} at {runtime['origin']}:",
                      *report_lines(checks),
                      f"Verified: all {len(checks)} checks passed. Status: active.",
                      _next_after_active(runtime)])
    return ExitCode.OK


def request_domain(args: argparse.Namespace, out: Output) -> int:
    result = _call(args, "POST", "domain-request", None)
    runtime = result["runtime"]
    if result["requested"]:
        text = (f"Requested {result['hostname']}. Operators check its DNS and approve it by "
                "hand; the runtime is served there once approved.")
    else:
        text = (f"{result['hostname']}: the request is already "
                f"{runtime['domainRequestStatus']}; nothing new was filed.")
    out.emit(result, [text, f"Domain request: {runtime['domainRequestStatus']}."])
    return ExitCode.OK


def disable(args: argparse.Namespace, out: Output) -> int:
    result = _call(args, "POST", "disable", None)
    runtime = result["runtime"]
    out.emit(result, [f"Disabled the runtime of {runtime['app']}: {runtime['url']} shows the "
                      "inactive page. Run `svc runtime verify` to turn it back on."
                      if result["changed"] else
                      f"The runtime of {runtime['app']} was already disabled."])
    return ExitCode.OK


def status(args: argparse.Namespace, out: Output) -> int:
    runtime = _call(args, "GET", "", None)["runtime"]
    report = runtime.get("lastReport") or {}
    lines = [f"{runtime['app']}  {runtime['url']}",
             f"  status:          {runtime['status']}",
             f"  origin:          {runtime['origin'] or '-'}",
             f"  paths:           app {runtime['appPath']}, entry {runtime['entryPath']}",
             f"  domain request:  {runtime['domainRequestStatus']}",
             f"  last verified:   {runtime['verifiedAt'] or '-'}"]
    if report:
        lines += [f"Last verification ({runtime['checkedAt']}):",
                  *report_lines(report.get("checks") or [])]
    out.emit({"runtime": runtime}, lines)
    return ExitCode.OK


def report_lines(checks: list[dict[str, Any]]) -> list[str]:
    """Each check on a line; a failed one with what was seen, expected and the fix."""
    lines: list[str] = []
    for check in checks:
        mark = "PASS" if check.get("passed") else "FAIL"
        lines.append(f"  {mark}  {check.get('id')}: {check.get('rule')}")
        if not check.get("passed"):
            lines.append(f"          seen:     {_shown(check.get('seen'))}")
            lines.append(f"          expected: {_shown(check.get('expected'))}")
            lines.append(f"          fix:      {check.get('fix')}")
    return lines


def _next_after_active(runtime: dict[str, Any]) -> str:
    state = runtime.get("domainRequestStatus")
    if state == "approved":
        return f"Served at {runtime['url']}."
    if state == "pending_manual_dns":
        return "The domain request waits for operator approval."
    return f"Next: `svc runtime request-domain` to publish it at {runtime['url']}."


def _call(args: argparse.Namespace, method: str, action: str, body: dict[str, Any] | None,
          timeout: float = 30.0) -> dict[str, Any]:
    stored = GrantStore().load()
    if stored is None:
        raise not_signed_in()
    app = choose_app(args.app, read_project(Path.cwd()), stored.app)
    if not app:
        raise usage("Which app? Pass --app SLUG or set app_slug in svc.toml.")
    path = f"/apps/{quote(app, safe='')}/runtime" + (f"/{action}" if action else "")
    with DeveloperClient(issuer_url(args, stored), stored.token, timeout=timeout) as client:
        return client.call(method, path, body)


def _project_origin() -> str | None:
    path = Path.cwd() / PROJECT_FILE
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise usage(f"{path} is not readable TOML: {exc}") from exc
    runtime = data.get("runtime")
    origin = runtime.get("origin") if isinstance(runtime, dict) else None
    if origin is not None and not isinstance(origin, str):
        raise CliError(f"{path}: [runtime] origin must be a string", ExitCode.USAGE,
                       code="usage")
    return origin


def _shown(value: object) -> str:
    return "(absent)" if value is None else str(value)
