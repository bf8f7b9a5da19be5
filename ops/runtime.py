"""``svc-ops domain ...`` and ``svc-ops kill-switch ...``: what operators do to runtimes.

Every decision is recorded with the operator's name (``--operator``, else ``$USER``) and the
time (``operator_actions``), and published to the routers through Redis after it commits, so
the runtime host starts or stops serving the app at once. Without ``SVCSRV_REDIS_URL`` (or
with Redis unreachable) nothing is published and the command says so on stderr: each server
notices when its cache entry expires, up to ``SVCSRV_APP_CACHE_TTL_SHARED`` (60 s) for a
server with Redis, ``SVCSRV_APP_CACHE_TTL_LOCAL`` (1 s) for one without.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from manifest.url_policy import DnsResolver
from ops.owner_tx import OpsError
from payments.db import transaction, utcnow
from payments.errors import ApiError
from payments.models import App, DomainRequestStatus
from payments.runtime import operator as decide
from payments.runtime.domains import check_points_at_router
from router.invalidation import publish_app_changed_sync
from router.settings import ENV_PREFIX, Settings

T = TypeVar("T")


def operator_option() -> argparse.ArgumentParser:
    """``--operator`` for every command that records a decision."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--operator", metavar="NAME",
                        help="who is deciding (recorded; default $USER)")
    return parent


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    who = operator_option()
    domain = sub.add_parser("domain", help="runtime domain requests (<slug>.{apps_domain})")
    domain_sub = domain.add_subparsers(dest="action", required=True)
    listing = domain_sub.add_parser("list", help="pending requests (--all: every state)")
    listing.add_argument("--all", action="store_true")
    approve = domain_sub.add_parser("approve", parents=[who],
                                    help="approve after checking DNS points at the router")
    approve.add_argument("app", help="app slug or id")
    approve.add_argument("--skip-dns-check", action="store_true",
                         help="dev only: approve without asking DNS (*.localhost)")
    reject = domain_sub.add_parser("reject", parents=[who], help="reject a request")
    reject.add_argument("app")
    reject.add_argument("--reason", required=True)
    kill = sub.add_parser("kill-switch", help="stop (or resume) serving and charging an app")
    kill_sub = kill.add_subparsers(dest="action", required=True)
    on = kill_sub.add_parser("on", parents=[who], help="pause the app")
    on.add_argument("app")
    on.add_argument("--reason", required=True)
    off = kill_sub.add_parser("off", parents=[who], help="resume the app")
    off.add_argument("app")
    kill_sub.add_parser("list", help="apps with the kill switch on")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.command == "domain":
        return _domain(args, settings, sessions)
    return _kill_switch(args, settings, sessions)


def operator_name(args: argparse.Namespace) -> str:
    """Who decides: ``--operator``, else ``$USER``, else the login name. A name that will
    not do is bad input, refused before anything is done (``OpsError``: exit 2)."""
    given: str | None = getattr(args, "operator", None)
    source = "--operator"
    if given is None:  # an explicit --operator "" is refused, not replaced by $USER
        given, source = os.environ.get("USER") or _login_name(), "$USER"
    name = (given or "").strip()
    if not name:
        state = "unset" if given is None else "blank"
        raise OpsError(f"Name the operator deciding: --operator NAME ({source} is {state}); "
                       "the name is recorded with the decision.")
    if len(name) > decide.MAX_OPERATOR:
        raise OpsError(f"The operator's name ({source}) is {len(name)} characters; at most "
                       f"{decide.MAX_OPERATOR}.")
    return decide.check_operator(name)


def _login_name() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def changed(settings: Settings, sessions: sessionmaker[Session],
            work: Callable[[Session], T], slug: str) -> T:
    """Run ``work`` in one transaction, then tell the routers ``slug`` changed."""
    with transaction(sessions) as session:
        result = work(session)
    if not settings.redis_url:
        warn_unpublished(settings, slug, f"{ENV_PREFIX}REDIS_URL is unset")
        return result
    try:
        publish_app_changed_sync(settings.redis_url, slug)
    except RedisError as exc:  # committed already: say so rather than end in a traceback
        # The class only: a Redis error's text can name the URL, which may hold a password.
        warn_unpublished(settings, slug, f"Redis did not take it ({type(exc).__name__})")
    return result


def unpublished_warning(settings: Settings, slug: str, why: str) -> str:
    """What an operator needs to know when a committed change did not reach the servers."""
    return (f"svc-ops: warning: the change to {slug} is recorded but not published to the "
            f"servers ({why}). Each server keeps serving the old state until its cache entry "
            f"expires: up to {settings.app_cache_ttl_shared:g} s on a server with Redis "
            f"({ENV_PREFIX}APP_CACHE_TTL_SHARED), {settings.app_cache_ttl_local:g} s on one "
            f"without. Give svc-ops the servers' {ENV_PREFIX}REDIS_URL to make changes take "
            "effect at once.")


def warn_unpublished(settings: Settings, slug: str, why: str) -> None:
    print(unpublished_warning(settings, slug, why), file=sys.stderr, flush=True)


def _domain(args: argparse.Namespace, settings: Settings,
            sessions: sessionmaker[Session]) -> int:
    if args.action == "list":
        status = None if args.all else DomainRequestStatus.PENDING_MANUAL_DNS
        with sessions() as session:
            apps = decide.domain_requests(session, status)
            for app in apps:
                requested = (app.runtime_domain_requested_at.isoformat()
                             if app.runtime_domain_requested_at else "-")
                print(f"{app.slug}\t{hostname(app, settings)}\t"
                      f"{app.runtime_domain_request_status.value}\trequested={requested}\t"
                      f"runtime={app.runtime_status.value}\t"
                      f"review={app.hosted_review_status.value}")
            if not apps:
                print("no domain requests" if args.all else "no pending domain requests")
        return 0
    who = operator_name(args)
    slug = app_slug(sessions, args.app)
    name = f"{slug}.{settings.apps_domain}"
    if args.action == "approve":
        answers = None
        if args.skip_dns_check:
            if not settings.dev:
                raise ApiError("dns_check_required", 409, "--skip-dns-check is for dev "
                               "settings only; production approvals always ask DNS.")
        else:
            nameserver, port = settings.dns_nameserver or (None, 53)
            # DNS waits as long as a request to a developer origin may.
            resolver = DnsResolver(nameserver, port, timeout=settings.runtime_fetch_timeout)
            answers = check_points_at_router(name, settings.router_addresses, resolver)

        def approve(session: Session) -> None:
            decide.approve_domain(session, decide.find_app(session, slug), name, who,
                                  utcnow(), answers)
        changed(settings, sessions, approve, slug)
        shown = ", ".join(str(a) for a in answers) if answers else "not checked (dev)"
        print(f"approved {name} (DNS: {shown}); recorded for {who}")
    else:
        def reject(session: Session) -> None:
            decide.reject_domain(session, decide.find_app(session, slug), name, who, utcnow(),
                                 args.reason)
        changed(settings, sessions, reject, slug)
        print(f"rejected {name}; recorded for {who}")
    return 0


def _kill_switch(args: argparse.Namespace, settings: Settings,
                 sessions: sessionmaker[Session]) -> int:
    if args.action == "list":
        with sessions() as session:
            apps = session.scalars(select(App).where(App.kill_switch.is_(True))
                                   .order_by(App.slug)).all()
            for app in apps:
                print(f"{app.slug}\t{app.kill_switch_reason}")
            if not apps:
                print("no app has the kill switch on")
        return 0
    who = operator_name(args)
    slug = app_slug(sessions, args.app)
    on = args.action == "on"
    reason = args.reason if on else ""

    def flip(session: Session) -> bool:
        return decide.set_kill_switch(session, decide.find_app(session, slug), who, utcnow(),
                                      on=on, reason=reason)
    if changed(settings, sessions, flip, slug):
        print(f"kill switch {args.action} for {slug}; recorded for {who}")
    else:
        print(f"kill switch already {args.action} for {slug}; nothing recorded")
    return 0


def hostname(app: App, settings: Settings) -> str:
    return f"{app.slug}.{settings.apps_domain}"


def app_slug(sessions: sessionmaker[Session], ref: str) -> str:
    """The slug of app ``ref`` (slug or id), to publish its change after the commit."""
    with sessions() as session:
        slug = session.scalar(select(App.slug).where((App.id == ref) | (App.slug == ref)))
    if slug is None:
        raise ApiError("app_not_found", 404, f"No app '{ref}'.")
    return slug
