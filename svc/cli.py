"""``svc``: the developer CLI (spec 4.10). Its command groups arrive issue by issue.

Exit codes: 0 success, 1 refused or not completed (e.g. a runtime verification with a
failed check), 2 usage, 3 the grant lacks a scope (or is for another app), 4 not signed in
or the grant expired, 5 service unreachable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from svc import __version__
from svc.client import ApiFailure, ServiceUnreachable
from svc.commands import (
    apps,
    auth,
    config,
    configure,
    doctor,
    export,
    init,
    keys,
    orders,
    price,
    products,
    runtime,
    webhooks,
)
from svc.errors import CliError, ExitCode, for_api_failure
from svc.int_flags import whole_number
from svc.output import Output
from svc.pipes import finished
from svc.sent import Sent, interrupted, recording
from svc.trace import tracing
from svc.ttl import parse_ttl

Command = Callable[[argparse.Namespace, Output], int]
VERBOSE_HELP = ("print each HTTP request (method, URL, status, time) on stderr; never a "
                "header, token or key")


def main(argv: list[str] | None = None) -> int:
    return finished(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and usage errors (2)
        return stop.code if isinstance(stop.code, int) else ExitCode.USAGE
    command: Command | None = getattr(args, "run", None)
    if command is None:
        parser.print_help()
        return ExitCode.OK
    out = Output(args.json)
    sent: list[Sent] = []
    try:
        with tracing(sys.stderr if args.verbose else None), recording() as sent:
            return int(command(args, out))
    except CliError as error:
        failure = error
    except ApiFailure as answer:
        failure = for_api_failure(answer.status, answer.code, answer.message,
                                  _text(answer.body.get("command")), answer.errors)
    except ServiceUnreachable as exc:
        failure = CliError(f"{exc}. Check the API URL (--api-url, SVC_API_URL or api_url in "
                           "svc.toml) and your network.", ExitCode.NETWORK, code="unreachable")
    except KeyboardInterrupt:
        # "Nothing was changed" only if no request that changes something was sent.
        out.error(interrupted(sent))
        return 130
    out.error(failure)
    return int(failure.exit_code)


JSON_HELP = "print JSON, one object a line"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="svc", description="Developer CLI for the service.")
    parser.add_argument("--version", action="version", version=f"svc {__version__}")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    groups = parser.add_subparsers(metavar="GROUP")
    common = argparse.ArgumentParser(add_help=False)
    # Both before and after the command. SUPPRESS: a subcommand's own default would
    # otherwise overwrite the True that a flag before the command put there.
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help=JSON_HELP)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help=VERBOSE_HELP)
    common.add_argument("--api-url", metavar="URL",
                        help="the API origin (else SVC_API_URL, svc.toml api_url, the grant's)")
    _auth_commands(groups, common)
    for group in (init, config, apps, products, orders, price, keys, export, doctor, configure):
        group.register(groups, common)
    _runtime_commands(groups, common)
    _webhook_commands(groups, common)
    return parser


def _auth_commands(groups: argparse._SubParsersAction[argparse.ArgumentParser],
                   common: argparse.ArgumentParser) -> None:
    group = groups.add_parser("auth", help="sign in with a scoped, expiring CLI grant")
    commands = group.add_subparsers(metavar="COMMAND", required=True)
    request = argparse.ArgumentParser(add_help=False)
    request.add_argument("--app", metavar="SLUG", help="the app the grant is for")
    request.add_argument("--scopes", type=_scopes, metavar="A,B",
                         help="grant scopes, comma separated: apps:read, apps:write, "
                         "products:write, webhooks:write, runtime:write, keys:create "
                         "(default apps:read)")
    request.add_argument("--ttl", type=_ttl, metavar="TTL",
                         help="grant lifetime: 90s, 30m, 2h, 7d (default 2h)")
    browser = commands.add_parser("browser", parents=[common, request],
                                  help="approve the sign-in in this machine's browser")
    browser.add_argument("--no-open", action="store_true", help="print the URL, do not open it")
    browser.set_defaults(run=auth.browser)
    commands.add_parser("device", parents=[common, request],
                        help="approve the sign-in on another device").set_defaults(run=auth.device)
    for name, run, text in (("status", auth.status, "show the current grant"),
                            ("revoke", auth.revoke, "revoke the grant and forget it"),
                            ("logout", auth.logout, "forget the grant (revoking it if possible)")):
        commands.add_parser(name, parents=[common], help=text).set_defaults(run=run)


def _runtime_commands(groups: argparse._SubParsersAction[argparse.ArgumentParser],
                      common: argparse.ArgumentParser) -> None:
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--app", metavar="SLUG", help="app slug (else svc.toml, the grant's)")
    group = groups.add_parser("runtime", help="the app runtime (Worker Quick Launch)")
    commands = group.add_subparsers(metavar="COMMAND", required=True)
    configure = commands.add_parser(
        "configure", parents=[common, target],
        help="save the runtime origin and paths (needs runtime:write)")
    configure.add_argument("--origin", metavar="URL",
                           help="your deployed HTTPS origin (else [runtime] origin in svc.toml)")
    configure.add_argument("--app-path", default="/", metavar="PATH",
                           help="the runtime app path (default /)")
    configure.add_argument("--entry-path", default=None, metavar="PATH",
                           help="the browser return entry path (default: the app path)")
    configure.set_defaults(run=runtime.configure)
    for name, run, text in (
            ("verify", runtime.verify, "check the manifest and routes; active when all pass"),
            ("request-domain", runtime.request_domain,
             "ask for https://<app-slug>.{apps_domain} (after activation)"),
            ("disable", runtime.disable, "stop serving the runtime"),
            ("status", runtime.status, "show the runtime and its last verification")):
        scope = "apps:read" if name == "status" else "runtime:write"
        commands.add_parser(name, parents=[common, target],
                            help=f"{text} (needs {scope})").set_defaults(run=run)


def _webhook_commands(groups: argparse._SubParsersAction[argparse.ArgumentParser],
                      common: argparse.ArgumentParser) -> None:
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--app", metavar="SLUG", help="app slug (else svc.toml, the grant's)")
    shape = argparse.ArgumentParser(add_help=False)
    shape.add_argument("--url", metavar="URL", help="the receiver's public HTTPS URL")
    shape.add_argument("--events", type=webhooks.events_list, metavar="A,B",
                       help="payment.delivered, payment.settled, delivery.created")
    group = groups.add_parser("webhook", help="the app's webhook endpoint")
    commands = group.add_subparsers(metavar="COMMAND", required=True)
    commands.add_parser("list", parents=[common, target],
                        help="show the endpoint (needs apps:read)").set_defaults(
        run=webhooks.list_webhooks)
    commands.add_parser("upsert", parents=[common, target, shape],
                        help="create or change the endpoint (needs webhooks:write)"
                        ).set_defaults(run=webhooks.upsert)
    update = commands.add_parser("update", parents=[common, target, shape],
                                 help="change the endpoint (needs webhooks:write)")
    switch = update.add_mutually_exclusive_group()
    switch.add_argument("--enable", dest="enabled", action="store_const", const=True)
    switch.add_argument("--disable", dest="enabled", action="store_const", const=False)
    update.set_defaults(run=webhooks.update, enabled=None)
    rotate = commands.add_parser("rotate", parents=[common, target],
                                 help="replace the signing secret (needs webhooks:write)")
    rotate.add_argument("--yes", action="store_true", help="confirm the rotation")
    rotate.set_defaults(run=webhooks.rotate)
    commands.add_parser("test", parents=[common, target],
                        help="send a test event (needs webhooks:write)").set_defaults(
        run=webhooks.send_test)
    retry = commands.add_parser("retry", parents=[common, target],
                                help="send an event again, same id (needs webhooks:write)")
    retry.add_argument("id", metavar="EVENT_OR_ATTEMPT", help="zevt_... or zwha_...")
    retry.set_defaults(run=webhooks.retry)
    commands.add_parser("resend-skipped", parents=[common, target],
                        help="send the events skipped while the endpoint was disabled, oldest "
                        "first (needs webhooks:write)").set_defaults(run=webhooks.resend_skipped)
    attempts = commands.add_parser("attempts", parents=[common, target],
                                   help="recent events and their delivery (needs apps:read)")
    attempts.add_argument("--before", metavar="CURSOR",
                          help="the nextBefore of the page before: list older events")
    attempts.add_argument("--status", choices=["pending", "delivered", "failed", "skipped"])
    attempts.add_argument("--limit", type=whole_number, default=20, metavar="N")
    attempts.set_defaults(run=webhooks.list_attempts)


def _ttl(text: str) -> int:
    try:
        return parse_ttl(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _scopes(text: str) -> list[str]:
    scopes = [s.strip() for s in text.split(",") if s.strip()]
    if not scopes:
        raise argparse.ArgumentTypeError("name at least one scope, e.g. apps:read,keys:create")
    return scopes


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


if __name__ == "__main__":
    raise SystemExit(main())
