"""Per-client limits on the portal's writes and chain reads, over real HTTP: wallet reads
(each asks the chain's node), the public balance read, wallet proofs and return codes answer
429 ``rate_limited`` with Retry-After once a client is over; another client is not. What a
wallet can pile up is bounded: at most ``MAX_LIVE_SESSIONS`` live sessions, and rows no one
can use any more are swept (docs/decisions.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.services import Limits
from payments.ledger.codes import SUMMARY_RETENTION
from payments.ledger.models import AuthCode, CodeKind
from payments.portal.models import WalletSession
from payments.portal.proofs import MAX_LIVE_SESSIONS, SESSION_TTL
from payments.ratelimit import InMemoryRateLimiter, Limit
from portal.csrf import page_token
from router.settings import DEV_SECRET_KEY
from tests.ledger.flow import sign_owner_proof_as, sign_permit, wallet
from tests.portal.conftest import FakeClock
from tests.portal.test_portal_api import sign_text
from tests.portal.wallet_world import Portal, portal_world
from tests.support.router import RouterFactory

SMALL = replace(Limits(), wallet_read=Limit("wallet-read", 2, 60),
                public_balance=Limit("public-balance", 2, 60),
                wallet_proof=Limit("wallet-proof", 2, 600),
                return_code=Limit("return-code", 3, 600))
OTHER_CLIENT = "127.0.0.3"  # a loopback address of its own: another client's bucket


@contextmanager
def limited_portal(start_router: RouterFactory, sessions: sessionmaker[Session],
                   clock: FakeClock, limits: Limits = SMALL) -> Iterator[Portal]:
    limiter = InMemoryRateLimiter(clock=clock.monotonic)
    overrides = {"limits": limits, "clock": clock.now, "limiter": lambda: limiter}
    with portal_world(start_router, sessions,
                      app_options={"developer_overrides": overrides}) as portal:
        yield portal


def host_client(portal: Portal, kind: str, local_address: str | None = None,
                **headers: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=local_address) if local_address else None
    return httpx.Client(base_url=portal.router.url, timeout=15, follow_redirects=False,
                        transport=transport,
                        headers={"host": f"{kind}.localhost:{portal.router.port}", **headers})


def page_writer(portal: Portal, clock: FakeClock, local_address: str | None = None
                ) -> httpx.Client:
    """A portal page's writes: its origin and a token minted at the services' time."""
    return host_client(portal, "portal", local_address, origin=portal.url,
                       **{"x-csrf-token": page_token(DEV_SECRET_KEY, clock.now())})


def assert_limited(response: httpx.Response, limit: str) -> None:
    assert response.status_code == 429, response.text
    body = response.json()
    assert body["code"] == "rate_limited" and limit in body["message"]
    assert isinstance(body["retryAfter"], int) and body["retryAfter"] >= 1
    assert response.headers["retry-after"] == str(body["retryAfter"])


def assert_readable_retry_after(response: httpx.Response, origin: str) -> None:
    """A page of ``origin`` may read the answer and its Retry-After (not a CORS-safelisted
    response header, so it must be exposed by name)."""
    assert response.headers["access-control-allow-origin"] in (origin, "*")
    exposed = response.headers.get("access-control-expose-headers", "")
    assert "retry-after" in [name.strip().lower() for name in exposed.split(",")], exposed


def prove(client: httpx.Client, address: str, sign: Any) -> httpx.Response:
    challenge = client.post("/api/portal/wallet-proof/challenge",
                            json={"address": address}).json()
    return client.post("/api/portal/wallet-proof", json={
        "challenge": challenge["challenge"], "signature": sign(challenge["message"])})


def test_chain_reads_are_limited_per_client(start_router: RouterFactory,
                                            sessions: sessionmaker[Session]) -> None:
    clock = FakeClock()
    address = wallet(1).address
    deadline = int((clock.now() + timedelta(days=30)).timestamp())
    with limited_portal(start_router, sessions, clock) as portal, \
            host_client(portal, "portal") as me, \
            host_client(portal, "portal", OTHER_CLIENT) as other:
        wallet_read = {"address": address}
        permit = {"owner": address, "value": "5000000", "deadline": str(deadline)}
        assert me.get("/api/portal/wallet", params=wallet_read).status_code == 200
        assert me.get("/api/portal/permit", params=permit).status_code == 200
        # The wallet and permit reads share one bucket: both ask the node.
        assert_limited(me.get("/api/portal/wallet", params=wallet_read), "wallet-read")
        assert_limited(me.get("/api/portal/permit", params=permit), "wallet-read")
        assert other.get("/api/portal/wallet", params=wallet_read).status_code == 200

        # The public balance has its own bucket (a game's page calling it does not lock
        # the authorize page), and its refusal is readable from any origin, as its answer.
        balance = "/api/public/usdc-balance"
        for _ in range(2):
            read = me.get(balance, params=wallet_read, headers={"origin": "https://g.example"})
            assert read.status_code == 200 and read.headers["access-control-allow-origin"] == "*"
        refused = me.get(balance, params=wallet_read, headers={"origin": "https://g.example"})
        assert_limited(refused, "public-balance")
        assert_readable_retry_after(refused, "https://g.example")
        assert other.get(balance, params=wallet_read).status_code == 200

        clock.advance(61)
        assert me.get("/api/portal/wallet", params=wallet_read).status_code == 200
        assert me.get(balance, params=wallet_read).status_code == 200


def test_wallet_proofs_are_limited_per_client(start_router: RouterFactory,
                                              sessions: sessionmaker[Session]) -> None:
    clock = FakeClock()
    owner = wallet(2)

    def sign(message: str) -> str:
        return sign_text(owner, message)

    with limited_portal(start_router, sessions, clock) as portal, \
            page_writer(portal, clock) as me, \
            page_writer(portal, clock, OTHER_CLIENT) as other:
        assert [prove(me, owner.address, sign).status_code for _ in range(2)] == [200, 200]
        # A valid proof over the limit opens no session.
        assert_limited(prove(me, owner.address, sign), "wallet-proof")
        assert prove(other, owner.address, sign).status_code == 200
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(WalletSession)) == 3


def test_a_wallet_keeps_a_bounded_number_of_sessions_and_dead_ones_are_swept(
        start_router: RouterFactory, sessions: sessionmaker[Session]) -> None:
    clock = FakeClock()
    owner, other_owner = wallet(3), wallet(4)
    limits = replace(Limits(), wallet_proof=Limit("wallet-proof", 100, 600))

    def rows(address: str | None = None) -> list[WalletSession]:
        query = select(WalletSession).order_by(WalletSession.id)
        if address is not None:
            query = query.where(WalletSession.wallet == address.lower())
        with sessions() as session:
            return list(session.scalars(query))

    with limited_portal(start_router, sessions, clock, limits) as portal:
        def open_session(account: Any) -> str:
            with page_writer(portal, clock) as c:
                proved = prove(c, account.address, lambda text: sign_text(account, text))
                assert proved.status_code == 200, proved.text
                return str(proved.cookies["svc_portal_wallet"])

        def account_status(cookie: str) -> int:
            with host_client(portal, "portal") as c:
                c.cookies.set("svc_portal_wallet", cookie)
                return c.get("/api/portal/account").status_code

        assert open_session(other_owner)
        cookies = [open_session(owner) for _ in range(MAX_LIVE_SESSIONS + 2)]
        # The two oldest were ended by the newer proofs; the newest ten still work.
        assert [account_status(c) for c in cookies] == [401] * 2 + [200] * MAX_LIVE_SESSIONS
        mine = rows(owner.address)
        assert len(mine) == MAX_LIVE_SESSIONS + 2
        assert [r.revoked_at is not None for r in mine] == [True] * 2 + [False] * 10

        # Past the sessions' lifetime a new proof deletes every row no cookie can use,
        # whichever wallet's; the ended ones went as soon as their challenge had expired.
        clock.advance((SESSION_TTL + timedelta(minutes=1)).total_seconds())
        last = open_session(owner)
        assert account_status(last) == 200
        left = rows()
        assert [(r.wallet, r.revoked_at) for r in left] == [(owner.address.lower(), None)]


def test_return_codes_are_limited_per_client_and_old_summaries_swept(
        start_router: RouterFactory, sessions: sessionmaker[Session]) -> None:
    clock = FakeClock()
    owner = wallet(5)
    with limited_portal(start_router, sessions, clock) as portal:
        return_url = f"{portal.url}/game"
        # A budget that outlives the day the clock is moved on.
        permit = sign_permit(owner, 2_000_000, 0, int((clock.now() + timedelta(days=30))
                                                     .timestamp()))
        budget_id = ""

        def by_proof(client: httpx.Client) -> httpx.Response:
            proof = sign_owner_proof_as(owner, owner.address, "game", return_url, budget_id,
                                        clock.now().isoformat())
            return client.post("/api/authorizations/return-code", json={
                "app": "game", "returnUrl": return_url, "ownerProof": proof})

        def summaries() -> int:
            with sessions() as session:
                return int(session.scalar(select(func.count()).select_from(AuthCode).where(
                    AuthCode.kind == CodeKind.SUMMARY)) or 0)

        with host_client(portal, "api", origin=portal.url) as me, \
                host_client(portal, "api", OTHER_CLIENT, origin=portal.url) as other:
            signed = me.post("/api/authorizations/return-code", json={
                "app": "game", "returnUrl": return_url, "permit": permit})
            assert signed.status_code == 200, signed.text
            budget_id = signed.json()["summary"]["authorizationId"]
            assert [by_proof(me).status_code for _ in range(2)] == [200, 200]
            refused = by_proof(me)
            assert_limited(refused, "return-code")
            # Readable by the portal page that asked, as its other errors are.
            assert_readable_retry_after(refused, portal.url)
            assert by_proof(other).status_code == 200
            assert summaries() == 4

            # A day after they expired, the budget's summary codes are deleted by its next
            # return code; until then an old code is still answered as expired.
            clock.advance((timedelta(minutes=11)).total_seconds())
            assert by_proof(me).status_code == 200
            assert summaries() == 5
            clock.advance((SUMMARY_RETENTION + timedelta(minutes=11)).total_seconds())
            assert by_proof(me).status_code == 200
            assert summaries() == 1
