"""Who is calling the developer API: a console session or a CLI grant.

Console sessions are accepted only where the caller says so (the console host) and
need the CSRF token on every mutation; CLI grants (``Authorization: Bearer zcli_...``)
are accepted on the API and console hosts and are limited to one app and their scopes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy.orm import Session
from starlette.requests import Request

from payments.apps import app_by_ref
from payments.cookies import CookieNames
from payments.developer.accounts import organization_ids
from payments.developer.grants import grant_for_token, require_grant_scope, require_grant_scopes
from payments.developer.models import CliGrant, ConsoleSession
from payments.developer.services import DeveloperServices
from payments.developer.sessions import SessionPolicy, load_session
from payments.developer.tokens import same
from payments.errors import ApiError
from payments.ids import IdPrefix
from payments.models import App
from payments.ratelimit import Limit, enforce

T = TypeVar("T")

# The base name: served over https the cookie is `__Host-svc_console` (payments/cookies.py).
SESSION_COOKIE = "svc_console"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Principal:
    developer_id: str
    organization_ids: tuple[str, ...]
    grant: CliGrant | None = None
    console_session: ConsoleSession | None = None

    def app(self, session: Session, ref: str, scope: str) -> App:
        """The app ``ref`` (id or slug) if this caller may use ``scope`` on it."""
        app = app_by_ref(session, ref)
        if app is None or app.organization_id not in self.organization_ids:
            raise ApiError("app_not_found", 404, f"No app '{ref}' in your organization.")
        if self.grant is not None:
            if self.grant.app_id != app.id:
                command = f"svc auth browser --app {app.slug} --scopes {scope}"
                raise ApiError("developer_cli_app_mismatch", 403, f"This CLI grant is for "
                               f"another app; run `{command}`.", command=command)
            require_grant_scope(self.grant, scope, app.slug)
        return app

    def require_scopes(self, app_slug: str, scopes: Iterable[str]) -> None:
        """For a change that needs several scopes (a config apply): a CLI grant must hold
        each; a console session is the developer themself and may do all of it."""
        if self.grant is not None:
            require_grant_scopes(self.grant, scopes, app_slug)

    def require_session(self, action: str) -> None:
        if self.grant is not None:
            raise ApiError("developer_session_required", 403, f"{action} needs a console "
                           "session; CLI grants are scoped to one existing app.")


@dataclass(frozen=True)
class Credentials:
    """What a request presented, read before any database work."""

    bearer: str | None
    cookie: str | None
    csrf: str | None
    method: str
    origin: str | None


def credentials(request: Request, cookies: CookieNames, *, accept_session: bool
                ) -> Credentials:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return Credentials(
        bearer=value.strip() if scheme.lower() == "bearer" and value.strip() else None,
        cookie=cookies.read(request, SESSION_COOKIE) if accept_session else None,
        csrf=request.headers.get(CSRF_HEADER), method=request.method,
        origin=request.headers.get("origin"),
    )


def authenticate(session: Session, creds: Credentials, now: datetime, policy: SessionPolicy,
                 console_origin: str) -> Principal:
    if creds.bearer is not None:
        if not creds.bearer.startswith(IdPrefix.CLI_GRANT_TOKEN.value):
            raise ApiError("developer_auth_required", 401, "The developer API takes a CLI "
                           "grant (zcli_...), not an API key; run `svc auth browser`.")
        grant = grant_for_token(session, creds.bearer, now)
        grant.last_used_at = now
        return Principal(grant.developer_id, tuple(organization_ids(session, grant.developer_id)),
                         grant=grant)
    record = load_session(session, creds.cookie, now, policy)
    if record is None:
        raise ApiError("developer_auth_required", 401, "Log in to the console, or send a CLI "
                       "grant as 'Authorization: Bearer zcli_...'.")
    if creds.method not in SAFE_METHODS:
        check_csrf(record, creds.csrf, creds.origin, console_origin)
    return Principal(record.developer_id,
                     tuple(organization_ids(session, record.developer_id)),
                     console_session=record)


def check_csrf(record: ConsoleSession, token: str | None, origin: str | None,
               console_origin: str) -> None:
    if origin is not None and origin != console_origin:
        raise ApiError("csrf_failed", 403, "Cross-origin requests to the console are refused.")
    if not token or not same(token, record.csrf_token):
        raise ApiError("csrf_failed", 403, "Missing or wrong CSRF token; reload the page.")


async def run_as(services: DeveloperServices, creds: Credentials,
                 work: Callable[[Session, Principal], T], limit: Limit | None = None) -> T:
    """Run ``work`` in one unit of work as the caller ``creds`` name; with a ``limit``,
    counted against the caller's budget first (:func:`enforce_for_developer`)."""
    if limit is not None:
        await enforce_for_developer(services, creds, limit)
    now = services.clock()

    def unit(session: Session) -> T:
        return work(session, authenticate(session, creds, now, services.policy,
                                          services.console_url))
    return await services.run(unit)


async def enforce_for_developer(services: DeveloperServices, creds: Credentials,
                                limit: Limit) -> None:
    """Count a hit on ``limit`` for the caller's developer account, once it is known who
    the caller is.

    Counted after authentication and per account, not per address: a request without
    valid credentials gets its 401 and uses up nobody's budget, and developers behind one
    address (an office, a CI provider) do not share one. The caller is authenticated in a
    unit of its own, and again in the unit that does the work: the limiter is async (Redis)
    and is not called while a transaction is open.
    """
    developer_id = await run_as(services, creds, lambda session, who: who.developer_id)
    await enforce(services.limiter(), limit, limit_key(developer_id))


def limit_key(developer_id: str) -> str:
    """Whose budget a developer's limited calls spend (see enforce_for_developer)."""
    return f"developer:{developer_id}"
