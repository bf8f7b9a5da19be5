"""What the developer API and console pages need, passed in by the composition root."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

import anyio
import anyio.to_thread
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request

from payments.cookies import CookieNames
from payments.db import utcnow
from payments.developer.passwords import Passwords
from payments.developer.sessions import SessionPolicy
from payments.errors import ApiError
from payments.mail import Mailer
from payments.ratelimit import Limit, RateLimiter

T = TypeVar("T")

# Who a request comes from, for per-address limits: (TCP peer, request headers) -> address.
# The composition root gives the rule that believes the trusted proxies in front
# (router/client_address.py); payments imports nothing from router.
ClientAddress = Callable[[str | None, Iterable[tuple[bytes, bytes]]], str]


def peer_address(peer: str | None, headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The TCP peer, for services built without a proxy in front (tests)."""
    return peer or "unknown"


@dataclass(frozen=True)
class Limits:
    """Numbers for spec 8 item 2 and the portal's writes and chain reads; per client address
    or per account as the key says."""

    signup: Limit = Limit("signup", 10, 3600)
    # Every sign-up form sent, whatever came of it: a sign-up whose mail our server failed
    # to send is given back (docs/decisions.md), and this bounds the tries that costs.
    signup_attempt: Limit = Limit("signup-attempt", 30, 3600)
    login: Limit = Limit("login", 10, 300)
    verify: Limit = Limit("verify", 10, 900)
    key_management: Limit = Limit("key-management", 30, 60)
    grant_approval: Limit = Limit("grant-approval", 20, 600)
    # Opening /cli/approve?code= looks a user code up: as bounded as answering one.
    grant_lookup: Limit = Limit("grant-lookup", 20, 600)
    cli_request: Limit = Limit("cli-request", 30, 600)
    # The portal's, per client address (docs/decisions.md): a wallet proof opens a session
    # row, a return code a summary-code row, and the wallet reads ask the chain's node.
    wallet_proof: Limit = Limit("wallet-proof", 20, 600)
    return_code: Limit = Limit("return-code", 60, 600)
    wallet_read: Limit = Limit("wallet-read", 60, 60)
    public_balance: Limit = Limit("public-balance", 60, 60)


@dataclass(frozen=True)
class DeveloperServices:
    sessions: Callable[[], sessionmaker[Session]]
    limiter: Callable[[], RateLimiter]
    mailer: Mailer
    passwords: Passwords
    policy: SessionPolicy
    base_url: str
    console_url: str
    cookies: CookieNames  # the portal's and console's cookie names (Settings.cookies)
    limits: Limits = field(default_factory=Limits)
    client_address: ClientAddress = peer_address
    clock: Callable[[], datetime] = utcnow
    # Shared by every unit of work: a unit waits here, holding no connection and no lock,
    # rather than on a row lock while competing for the GIL (``SVCSRV_DB_WORKERS``).
    workers: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(4))

    async def run(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in one transaction on a worker thread.

        An :class:`ApiError` with ``keep_changes`` commits what was written before it was
        raised (e.g. a failed verification attempt is counted); any other error rolls back.
        """
        factory = self.sessions()

        def unit() -> T:
            with factory() as session:
                session.begin()
                try:
                    result = work(session)
                except ApiError as exc:
                    if exc.keep_changes:
                        session.commit()
                    else:
                        session.rollback()
                    raise
                except BaseException:
                    session.rollback()
                    raise
                session.commit()
                return result

        return await anyio.to_thread.run_sync(unit, limiter=self.workers)


def client_ip(services: DeveloperServices, request: Request) -> str:
    """The address per-address limits key on: behind a trusted proxy, the client it names
    (``DeveloperServices.client_address``), not the proxy."""
    peer = request.client.host if request.client else None
    return services.client_address(peer, request.scope["headers"])
