"""Dead summary and payment codes are deleted, a batch at a time, by the issue of a code of
the same kind (``codes.expired_codes``), on SQLite and PostgreSQL: a summary code a day
after it expired, a payment code once the answer of its payment is no longer kept (30 days,
``idempotency.RETENTION``). A code that has not expired, used or not, is never deleted;
until its row goes, a late client is told expired or consumed (or given its payment's
stored answer) rather than "unknown"."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.ledger import idempotency
from payments.ledger.codes import RETENTION, expired_codes
from payments.ledger.models import AuthCode, Authorization, CodeKind
from payments.sweeps import run_sweep
from tests.factories import add_developer, add_owned_app
from tests.ledger.flow import PayWorld, build_world, sign_owner_proof_as, sign_permit, wallet
from tests.ledger.test_codes import refused
from tests.portal.conftest import FakeClock
from tests.support.router import RouterFactory

WALLET = "0x" + "2" * 40


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session],
          clock: FakeClock) -> Iterator[PayWorld]:
    with start_router(app_options={"developer_overrides": {"clock": clock.now}}) as router:
        yield build_world(router, sessions)


def codes_by_kind(sessions: sessionmaker[Session]) -> dict[CodeKind, int]:
    with sessions() as session:
        rows = session.execute(select(AuthCode.kind, func.count()).group_by(AuthCode.kind))
        return {CodeKind(kind): int(count) for kind, count in rows}


def test_codes_are_answered_while_kept_and_swept_by_the_next_code_of_their_kind(
        world: PayWorld, clock: FakeClock) -> None:
    user = wallet(7)
    return_url = f"{world.portal}/{world.app.slug}"
    deadline = int((clock.now() + timedelta(days=90)).timestamp())
    with world.api(origin=world.portal) as portal:
        signed = portal.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": return_url,
            "permit": sign_permit(user, 1_000_000, 0, deadline)})
        assert signed.status_code == 200, signed.text
        budget_id = signed.json()["summary"]["authorizationId"]

        def summary_code() -> str:  # the cached-budget shortcut: a new summary code
            proof = sign_owner_proof_as(user, user.address, world.app.slug, return_url,
                                        budget_id, clock.now().isoformat())
            answer = portal.post("/api/authorizations/return-code", json={
                "app": world.app.slug, "returnUrl": return_url, "ownerProof": proof})
            assert answer.status_code == 200, answer.text
            return str(answer.json()["code"])

        first_summary = signed.json()["code"]
        unused = world.payment_code(first_summary, "retry")
        paid = world.payment_code(first_summary, "retry")
        with world.api() as api:
            bought = world.pay(api, user, "retry", paid, "k:1")
            assert bought.status_code == 201, bought.text

        # Past a day after they expired, summary codes go with the next one issued; payment
        # codes stay, and say what they were: expired, or the stored answer of their payment.
        clock.advance(timedelta(days=1, minutes=11).total_seconds())
        summary = summary_code()
        assert codes_by_kind(world.sessions) == {CodeKind.SUMMARY: 1, CodeKind.PAYMENT: 2}
        with world.api(origin=world.portal) as api:
            refused(api.get("/api/authorizations/summary", params={"code": first_summary}),
                    401, "AUTHORIZATION_CODE_INVALID")
        with world.api() as api:
            refused(world.pay(api, user, "retry", unused, "k:2"), 410,
                    "AUTHORIZATION_CODE_EXPIRED")
            again = world.pay(api, user, "retry", paid, "k:1")
            assert (again.status_code, again.json()) == (201, bought.json())
            refused(world.pay(api, user, "retry", paid, "k:3"), 409,
                    "AUTHORIZATION_CODE_CONSUMED")
        later = world.payment_code(summary, "retry")  # nothing of its kind is dead yet
        assert codes_by_kind(world.sessions) == {CodeKind.SUMMARY: 1, CodeKind.PAYMENT: 3}

        # Once the payment's answer is no longer kept, its code goes with the next payment
        # code issued, as does the unused one; the one issued a day later is kept a day more.
        clock.advance((idempotency.RETENTION - timedelta(hours=12)).total_seconds())
        fresh = world.payment_code(summary_code(), "retry")
        assert codes_by_kind(world.sessions) == {CodeKind.SUMMARY: 1, CodeKind.PAYMENT: 2}
        with world.api() as api:
            refused(world.pay(api, user, "retry", paid, "k:1"), 401,
                    "AUTHORIZATION_CODE_INVALID")
            refused(world.pay(api, user, "retry", later, "k:4"), 410,
                    "AUTHORIZATION_CODE_EXPIRED")
            assert world.pay(api, user, "retry", fresh, "k:5").status_code == 201


def add_codes(sessions: sessionmaker[Session], *expiries: tuple[CodeKind, datetime, bool]
              ) -> None:
    """Codes of one budget: (kind, expires_at, consumed)."""
    _, organization_id = add_developer(sessions)
    app = add_owned_app(sessions, organization_id, "game")
    now = utcnow()
    with transaction(sessions) as session:
        budget = Authorization(owner_wallet=WALLET, spender=WALLET, token=WALLET, chain_id=1,
                               value_atomic=10**12, deadline=now + timedelta(days=1), nonce=1,
                               signature="0x", created_at=now)
        session.add(budget)
        session.flush()
        for n, (kind, expires, consumed) in enumerate(expiries):
            session.add(AuthCode(kind=kind, code_hash=f"{n:064x}", authorization_id=budget.id,
                                 app_id=app.id, audience="https://game.example",
                                 created_at=expires - timedelta(minutes=5), expires_at=expires,
                                 consumed_at=expires - timedelta(minutes=1) if consumed
                                 else None))


def left(sessions: sessionmaker[Session]) -> list[tuple[CodeKind, datetime, bool]]:
    with sessions() as session:
        return [(r.kind, r.expires_at, r.consumed_at is not None)
                for r in session.scalars(select(AuthCode).order_by(AuthCode.id))]


def test_a_sweep_deletes_a_batch_and_never_a_code_that_can_still_be_used(
        sessions: sessionmaker[Session]) -> None:
    now = utcnow()
    cutoff = now - RETENTION[CodeKind.PAYMENT]
    dead = [(CodeKind.PAYMENT, cutoff - timedelta(seconds=n), n % 2 == 0) for n in range(7)]
    kept = [
        (CodeKind.PAYMENT, cutoff + timedelta(seconds=1), True),  # its answer is still kept
        (CodeKind.PAYMENT, now - timedelta(minutes=1), False),  # expired: told so (410)
        (CodeKind.PAYMENT, now + timedelta(minutes=4), False),  # live, unused
        (CodeKind.PAYMENT, now + timedelta(minutes=4), True),  # live, used
        (CodeKind.SUMMARY, now - RETENTION[CodeKind.SUMMARY] - timedelta(minutes=1), False),
        (CodeKind.SUMMARY, now + timedelta(minutes=9), False),
    ]
    add_codes(sessions, *dead[:4], *kept, *dead[4:])

    def sweep() -> int:
        with transaction(sessions) as session:  # one transaction per batch
            return run_sweep(session, expired_codes(CodeKind.PAYMENT, now, batch=3))
    assert [sweep() for _ in range(4)] == [3, 3, 1, 0]
    assert left(sessions) == kept  # the summary code past its retention is the summaries'
    with transaction(sessions) as session:
        assert run_sweep(session, expired_codes(CodeKind.SUMMARY, now)) == 1
    assert left(sessions) == [*kept[:4], kept[5]]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_concurrent_sweeps_take_different_rows_and_never_wait(
        sessions: sessionmaker[Session]) -> None:
    """Two instances issuing codes at once: the second sweep skips the rows the first one's
    open transaction holds (SKIP LOCKED) instead of waiting for it to end."""
    now = utcnow()
    dead = now - RETENTION[CodeKind.PAYMENT] - timedelta(minutes=1)
    add_codes(sessions, *[(CodeKind.PAYMENT, dead, True)] * 8)
    first_done, release = threading.Event(), threading.Event()
    counts: list[int] = []

    def first() -> None:
        with transaction(sessions) as session:
            counts.append(run_sweep(session, expired_codes(CodeKind.PAYMENT, now, batch=3)))
            first_done.set()
            release.wait(10)
    holder = threading.Thread(target=first)
    holder.start()
    try:
        assert first_done.wait(10)
        with transaction(sessions) as session:
            session.execute(text("SET LOCAL lock_timeout = '2s'"))  # a wait would fail
            assert run_sweep(session, expired_codes(CodeKind.PAYMENT, now, batch=3)) == 3
    finally:
        release.set()
        holder.join(10)
    assert counts == [3]
    assert len(left(sessions)) == 2

