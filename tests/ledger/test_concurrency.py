"""Single use, budget limits and idempotency under real parallel clients (SQLite and
PostgreSQL): the guarantees must come from the database, not from request ordering."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from payments.db import make_engine, make_sessionmaker
from payments.ledger.models import (
    AccountConnection,
    AuthCode,
    Authorization,
    AuthorizationStatus,
    Charge,
    Delivery,
    Order,
)
from tests.conftest import fresh_pg_database
from tests.ledger.flow import (
    PayWorld,
    build_world,
    handoff_token,
    sign_owner_proof,
    sign_permit,
    start_handoff,
    wallet,
)
from tests.ledger.parallel import run_parallel
from tests.support.router import RouterFactory, router_factory

PRICE = 10_000  # the ``retry`` template


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        yield build_world(router, sessions)


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def paying(world: PayWorld, code: str, key: str) -> Callable[[httpx.Client], httpx.Response]:
    user = wallet(1)
    return lambda client: world.pay(client, user, "retry", code, key)


def test_one_code_two_hundred_callers_one_charge(world: PayWorld) -> None:
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    code = world.payment_code(summary, "retry")
    jobs = [paying(world, code, f"game:retry:{i}") for i in range(200)]
    responses = run_parallel(world, jobs, workers=200)
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 1, 409: 199}, statuses
    refused = {r.json()["code"] for r in responses if r.status_code == 409}
    assert refused == {"AUTHORIZATION_CODE_CONSUMED"}
    assert count(world, Charge) == 1
    assert count(world, Delivery) == 1
    with world.sessions() as session:
        budget = session.scalars(select(Authorization)).one()
        assert budget.spent_atomic == PRICE


def test_three_hundred_charges_against_a_budget_for_one_hundred(world: PayWorld) -> None:
    user = wallet(1)
    value = 100 * PRICE
    summary = world.authorize(user, value)["code"]

    def exchange(client: httpx.Client) -> str:
        response = client.post("/api/authorizations/payment-code", json={
            "authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
            "developerUserId": "user-1"})
        assert response.status_code == 200, response.text
        code: str = response.json()["authorization"]["authorizationCode"]
        return code

    codes = run_parallel(world, [exchange] * 300, workers=30, origin=world.audience)
    assert len(set(codes)) == 300
    jobs = [paying(world, code, f"game:retry:{i}") for i, code in enumerate(codes)]
    responses = run_parallel(world, jobs, workers=150)

    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 100, 402: 200}, statuses
    refused = [r.json() for r in responses if r.status_code == 402]
    assert {body["code"] for body in refused} == {"INSUFFICIENT_BUDGET"}
    remainders = [int(r.json()["remaining"]) for r in responses]
    assert min(remainders) >= 0
    assert sorted(int(r.json()["remaining"]) for r in responses if r.status_code == 201) == [
        value - PRICE * n for n in range(100, 0, -1)]  # every step of the budget, once
    assert count(world, Charge) == 100
    assert count(world, Delivery) == 100
    with world.sessions() as session:
        budget = session.scalars(select(Authorization)).one()
        assert budget.spent_atomic == value
        assert budget.value_atomic - budget.spent_atomic == 0
        assert session.scalar(select(func.sum(Charge.amount_atomic))) == value


def test_same_key_same_code_in_parallel_is_one_charge(world: PayWorld) -> None:
    summary = world.authorize(wallet(1), 10 * PRICE)["code"]
    code = world.payment_code(summary, "retry")
    responses = run_parallel(world, [paying(world, code, "game:retry:once")] * 60, workers=60)
    assert {r.status_code for r in responses} == {201}
    bodies = [r.json() for r in responses]
    assert all(body == bodies[0] for body in bodies)
    assert bodies[0]["idempotencyKey"] == "svc:game:retry:once"
    assert count(world, Charge) == 1
    with world.sessions() as session:
        assert session.scalars(select(Authorization)).one().spent_atomic == PRICE


def test_one_order_paid_by_parallel_codes_is_charged_once(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 100 * PRICE)["code"]
    with world.keyed() as backend:
        created = backend.post("/api/orders", json={
            "productId": world.products["retry"].id, "developerUserId": "user-1",
            "idempotencyKey": "order-1"})
    assert created.status_code == 201, created.text
    order_id = created.json()["order"]["id"]
    codes = [world.payment_code(summary, "retry", orderId=order_id) for _ in range(20)]
    jobs = [lambda client, c=code, i=i: world.pay(client, user, "retry", c, f"order:{i}",
                                                  orderId=order_id)
            for i, code in enumerate(codes)]
    responses = run_parallel(world, jobs, workers=20)
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 1, 409: 19}, statuses
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {
        "ORDER_ALREADY_PAID"}
    assert count(world, Charge) == 1
    with world.sessions() as session:
        assert session.scalars(select(Authorization)).one().spent_atomic == PRICE
        order = session.get(Order, order_id)
        assert order is not None and order.status.value == "paid"


def test_a_permit_posted_in_parallel_counts_once(world: PayWorld) -> None:
    """A double-submitting portal, or someone replaying the user's permit at the same
    time: one budget, one summary code, one connection; the others are told why."""
    user = wallet(1)
    token = handoff_token(start_handoff(world, "merchant-1").json()["handoff"]["portalUrl"])
    body = {"app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": sign_permit(user, 10 * PRICE), "handoff": token}

    def post(client: httpx.Client) -> httpx.Response:
        return client.post("/api/authorizations/return-code", json=body)

    responses = run_parallel(world, [post] * 20, workers=20, origin=world.portal)
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: 1, 409: 19}, [r.text for r in responses][:3]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {
        "permit_already_used"}
    with world.sessions() as session:
        assert session.scalars(select(Authorization.status)).all() == [
            AuthorizationStatus.ACTIVE]
        assert session.scalar(select(func.count()).select_from(AuthCode)) == 1
    assert count(world, AccountConnection) == 1


def test_an_owner_proof_posted_in_parallel_counts_once(world: PayWorld) -> None:
    user = wallet(1)
    return_url = f"{world.portal}/{world.app.slug}"
    budget = world.authorize(user, 10 * PRICE)["summary"]["authorizationId"]
    body = {"app": world.app.slug, "returnUrl": return_url,
            "ownerProof": sign_owner_proof(user, world.app.slug, return_url, budget)}

    def post(client: httpx.Client) -> httpx.Response:
        return client.post("/api/authorizations/return-code", json=body)

    responses = run_parallel(world, [post] * 12, workers=12, origin=world.portal)
    assert Counter(r.status_code for r in responses) == {200: 1, 409: 11}, [
        r.text for r in responses][:3]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {
        "owner_proof_used"}
    with world.sessions() as session:
        # The permit's summary code and the one proof's.
        assert session.scalar(select(func.count()).select_from(AuthCode)) == 2


@pytest.fixture
def pg_world(pg_admin_url: str, pg_template: str) -> Iterator[PayWorld]:
    """The paying world on PostgreSQL only: for races a test stages with row locks, which
    SQLite does not have (its writers queue at BEGIN, in no order a test can set)."""
    url = fresh_pg_database(pg_admin_url, pg_template)
    engine = make_engine(url)
    with router_factory(url)() as router:
        yield build_world(router, make_sessionmaker(engine))
    engine.dispose()


def lock_waiters(world: PayWorld, at_least: int) -> None:
    """Until ``at_least`` transactions wait for a row lock."""
    with world.sessions() as session:
        for _ in range(200):
            waiting = session.scalar(text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()")) or 0
            session.rollback()  # a fresh snapshot for the next look
            if waiting >= at_least:
                return
            time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} transactions waited for a lock")


def test_a_revoke_queued_behind_a_renewal_revokes_the_renewed_budget(
        pg_world: PayWorld) -> None:
    """The portal's renew and revoke, sent at once: the renewal supersedes budget A with B
    while the revoke waits for A's row. The revoke had read A active before it waited, and
    then revoked A, already superseded: it answered 'revoked' while B stayed active (and
    spendable), and its Permit(value=0) would zero B's allowance on chain under it. Run
    after the renewal, as its place in the queue says, it must revoke B."""
    world = pg_world
    user = wallet(1)
    first = world.authorize(user, 10 * PRICE)["summary"]["authorizationId"]
    portal = world.api(origin=world.portal)
    results: dict[str, httpx.Response] = {}

    def renew() -> None:
        results["renew"] = portal.post("/api/authorizations/return-code", json={
            "app": world.app.slug, "returnUrl": f"{world.portal}/{world.app.slug}",
            "permit": sign_permit(user, 20 * PRICE, nonce=1)})

    def revoke() -> None:
        with world.api(origin=world.portal) as api:
            results["revoke"] = api.post("/api/authorizations/revoke", json={
                "permit": sign_permit(user, 0, nonce=2)})

    with world.sessions() as holder:  # holds budget A's row while both requests queue
        holder.execute(select(Authorization).where(Authorization.id == first)
                       .with_for_update())
        renewing = threading.Thread(target=renew)
        renewing.start()
        lock_waiters(world, 1)  # the renewal waits first...
        revoking = threading.Thread(target=revoke)
        revoking.start()
        lock_waiters(world, 2)  # ...then the revoke
        holder.rollback()
    for thread in (renewing, revoking):
        thread.join(60)
    portal.close()

    assert results["renew"].status_code == 200, results["renew"].text
    renewed = results["renew"].json()["summary"]["authorizationId"]
    assert results["revoke"].status_code == 200, results["revoke"].text
    assert results["revoke"].json()["authorization"]["id"] == renewed
    with world.sessions() as session:
        rows = {a.id: a for a in session.scalars(select(Authorization))}
    assert rows[first].status == AuthorizationStatus.SUPERSEDED
    assert rows[first].revoke_relay_status is None
    assert rows[renewed].status == AuthorizationStatus.REVOKED
    assert rows[renewed].revoke_nonce == 2
