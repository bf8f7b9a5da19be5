"""Faults on the production topology while money moves (issue #17): kill -9 of a server
instance under a payment load, of the chain worker with a settlement batch in flight (three
times, each recovering differently, then two chain workers at once), and of the webhook
worker with 1,000 events pending. Every process is the real one, on loopback; the chain is
a Hardhat node, the money TestUSDC, the contract BudgetSpenderV2."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from ops.cluster.topology import Cluster
from payments.chain.contracts import charge_id
from payments.chain.models import ChainFinding, ChainTransaction, FindingKind, TxKind, TxStatus
from payments.ledger.models import (
    AttemptStatus,
    AuthCode,
    Authorization,
    AuthorizationStatus,
    Charge,
    CodeKind,
    Delivery,
    RelayStatus,
    SettlementBatch,
    SettlementStatus,
    WebhookAttempt,
    WebhookEvent,
)
from payments.models import App
from tests.deploy.kit import (
    Load,
    Payer,
    Shop,
    automine,
    balance,
    contract,
    is_settled,
    mine,
    open_shop,
    rpc,
)
from tests.support.waits import wait_for
from tests.webhooks.kit import enqueue_events, receiver

pytestmark = pytest.mark.timeout(300)

BUDGET = 100_000_000  # 100 TestUSDC of budget per user, and as much minted to them
LEASE = 12.0


@pytest.fixture(scope="module")
def cluster_settings() -> dict[str, str]:
    # Timers short enough for a test, the same code paths: batches flush after 0.5 s, the
    # chain cycle runs every 0.2 s, a killed dispatcher's claims come back after 12 s.
    return {"SETTLEMENT_BATCH_AGE_SECONDS": "0.5", "CHAIN_WORKER_INTERVAL": "0.2",
            "WEBHOOK_TIMEOUT": "2", "WEBHOOK_LEASE_SECONDS": str(LEASE),
            "WEBHOOK_POLL_INTERVAL": "0.2",
            "WEBHOOK_RETRY_DELAYS": ",".join(["0.2"] * 7)}


# -- 1. an instance killed under a payment load ---------------------------------------------


class Purchases:
    """The clients' side of a payment load: the last answer for each idempotency key, and
    the keys whose first answer was a 502 (their instance died holding the request)."""

    def __init__(self) -> None:
        self.answers: dict[str, httpx.Response] = {}
        self.retried: dict[str, httpx.Response] = {}

    def send(self, key: str, request: Callable[[], httpx.Response]) -> httpx.Response:
        answer = request()
        first = answer.status_code
        for _ in range(20):
            if answer.status_code != 502:
                break
            time.sleep(0.2)
            # What a client does after a 502: the same request with the same key.
            answer = request()
        if first == 502:
            self.retried[key] = answer
        self.answers[key] = answer
        return answer


def _trusted(shop: Shop, payers: list[Payer], bought: Purchases,
             ) -> Callable[[httpx.Client, int], httpx.Response]:
    def send(backend: httpx.Client, n: int) -> httpx.Response:
        key = f"trusted-{n}"
        return bought.send(key, lambda: shop.charge(backend, "gem", payers[n % len(payers)],
                                                    key))
    return send


def _routed(shop: Shop, payers: list[Payer], bought: Purchases,
            ) -> Callable[[httpx.Client, int], httpx.Response]:
    def send(browser: httpx.Client, n: int) -> httpx.Response:
        key, payer = f"route-{n}", payers[n % len(payers)]
        exchanged = shop.payment_code(browser, payer, "retry", key)
        for _ in range(20):  # nothing paid yet: after a 502 a new code is as good
            if exchanged.status_code != 502:
                break
            time.sleep(0.2)
            exchanged = shop.payment_code(browser, payer, "retry", key)
        if exchanged.status_code != 200:
            return exchanged
        code = exchanged.json()["authorization"]["authorizationCode"]
        return bought.send(key, lambda: shop.pay(browser, payer, "retry", code, key))
    return send


def test_an_instance_killed_under_payment_load_loses_and_doubles_no_payment(
        cluster: Cluster, sessions: sessionmaker[Session]) -> None:
    shop = open_shop(cluster, sessions, "steady")
    with receiver() as hook:
        hook.secret = shop.register_webhook(sessions, hook.url)
        payers = [shop.payer(f"steady-{i}", BUDGET, BUDGET) for i in range(4)]
        bought = Purchases()
        loads = [Load(_trusted(shop, payers, bought), threads=4).start(shop.backend),
                 Load(_routed(shop, payers, bought), threads=2).start(shop.browser)]
        try:
            time.sleep(3)
            # Frozen first, so that the kill is sure to find requests in flight: the edge
            # keeps sending the instance its share, and each waits there until the kill.
            # Those it held when frozen may be anywhere, a transaction open included.
            cluster.freeze_instance(0)
            time.sleep(1)
            killed_at = time.monotonic()
            cluster.kill_instance(0)
            time.sleep(3)
        finally:
            for load in loads:
                load.stop()
        # The instance stays down: tests/deploy/test_topology.py covers its return, and its
        # start costs half a minute of this machine's two cores.
        seen = [entry for load in loads for entry in load.seen]
        assert [error for load in loads for error in load.errors] == []
        assert len([at for at, _, _ in seen if at > killed_at]) > 20, "the load kept going"
        assert {status for _, status, _ in seen} == {201}, Counter(s for _, s, _ in seen)
        assert bought.retried, "the kill hit requests in flight (else nothing was tested)"
        answers = {key: answer.json() for key, answer in bought.answers.items()}
        _every_answer_is_in_the_ledger(sessions, shop, answers)
        _no_code_consumed_without_its_charge(sessions, shop)
        for key, answer in bought.retried.items():  # the retry found or made the one charge
            assert answer.json()["chargeId"] == answers[key]["chargeId"]
        events = {body["eventId"] for body in answers.values()}
        wait_for(lambda: hook.delivered_ids() >= events, 60, "every payment's webhook")


def _every_answer_is_in_the_ledger(sessions: sessionmaker[Session], shop: Shop,
                                   answers: dict[str, dict[str, str]]) -> None:
    with sessions() as session:
        deliveries = {d.idempotency_key: d for d in session.scalars(
            select(Delivery).where(Delivery.app_id == shop.app_id))}
        charges = {c.seq: c for c in session.scalars(
            select(Charge).where(Charge.app_id == shop.app_id))}
        events = {e.id: e for e in session.scalars(
            select(WebhookEvent).where(WebhookEvent.app_id == shop.app_id,
                                       WebhookEvent.type == "payment.delivered"))}
        attempts = set(session.scalars(select(WebhookAttempt.event_id).where(
            WebhookAttempt.event_id.in_(events))))
        budgets = session.scalars(select(Authorization).where(
            Authorization.id.in_({c.authorization_id for c in charges.values()}))).all()
    # One charge per purchase the clients saw, none besides: a request that died with its
    # instance and was sent again did not charge twice.
    assert set(deliveries) == {f"svc:{key}" for key in answers}
    assert len(charges) == len(answers)
    for key, body in answers.items():
        delivery = deliveries[f"svc:{key}"]
        assert (body["deliveryId"], charge_id(delivery.charge_seq)) == (
            delivery.id, bytes.fromhex(body["chargeId"][2:]))
        assert events[body["eventId"]].delivery_id == delivery.id
        assert body["eventId"] in attempts
    for budget in budgets:  # and reserved each once
        assert budget.spent_atomic == sum(c.amount_atomic for c in charges.values()
                                          if c.authorization_id == budget.id)


def _no_code_consumed_without_its_charge(sessions: sessionmaker[Session], shop: Shop) -> None:
    with sessions() as session:
        consumed = set(session.scalars(select(AuthCode.idempotency_key).where(
            AuthCode.app_id == shop.app_id, AuthCode.kind == CodeKind.PAYMENT,
            AuthCode.consumed_at.is_not(None))))
        keys = set(session.scalars(select(Delivery.idempotency_key).where(
            Delivery.app_id == shop.app_id)))
    assert consumed, "product-route payments were made"
    assert {f"svc:{key}" for key in consumed} <= keys


# -- 2. the chain worker killed mid-batch, then two of them ---------------------------------


@dataclass(frozen=True)
class InFlight:
    """A settlement batch whose transaction is signed, recorded and in the node's pool,
    and the charges the batch held then."""

    batch_id: str
    tx_hash: str
    nonce: int
    charges: frozenset[int]


def _in_flight(cluster: Cluster, sessions: sessionmaker[Session]) -> list[InFlight]:
    with sessions() as session:
        txs = session.scalars(select(ChainTransaction).where(
            ChainTransaction.kind == TxKind.CHARGE_BATCH,
            ChainTransaction.status == TxStatus.PENDING).order_by(ChainTransaction.nonce)).all()
        found = []
        for tx in txs:
            assert tx.batch_id is not None and tx.tx_hash is not None and tx.nonce is not None
            pooled = rpc(cluster, "eth_getTransactionByHash", tx.tx_hash)
            if pooled is not None and pooled["blockNumber"] is None:
                charges = frozenset(session.scalars(select(Charge.seq).where(
                    Charge.batch_id == tx.batch_id)))
                found.append(InFlight(tx.batch_id, tx.tx_hash, tx.nonce, charges))
    return found


def _wait_in_flight(cluster: Cluster, sessions: sessionmaker[Session], count: int = 1,
                    above: int = -1, limit: float = 60) -> list[InFlight]:
    """At least ``count`` batches in flight with a nonce above ``above``."""
    found: list[InFlight] = []

    def check() -> bool:
        found[:] = [f for f in _in_flight(cluster, sessions) if f.nonce > above]
        return len(found) >= count
    wait_for(check, limit, f"{count} settlement batch(es) in flight", poll=0.05)
    return found


def _batch(sessions: sessionmaker[Session], batch_id: str) -> tuple[SettlementStatus,
                                                                    frozenset[int]]:
    """A batch's status and the charges it holds."""
    with sessions() as session:
        batch = session.get(SettlementBatch, batch_id)
        assert batch is not None
        return batch.status, frozenset(session.scalars(select(Charge.seq).where(
            Charge.batch_id == batch_id)))


def _settled(sessions: sessionmaker[Session], flight: InFlight) -> bool:
    """The batch settled with the very charges it held in flight: none was claimed again
    into another batch."""
    return _batch(sessions, flight.batch_id) == (SettlementStatus.SETTLED, flight.charges)


def _idle(sessions: sessionmaker[Session]) -> bool:
    """Nothing for the chain worker to do: every permit relayed, every charge settled."""
    with sessions() as session:
        unsettled = session.scalar(select(func.count()).select_from(Charge).where(
            Charge.settlement_status != SettlementStatus.SETTLED))
        unrelayed = session.scalar(select(func.count()).select_from(Authorization).where(
            Authorization.relay_status == RelayStatus.PENDING))
    return unsettled == 0 and unrelayed == 0


def _connected(sessions: sessionmaker[Session], *names: str) -> bool:
    """Whether each process ``name`` holds a database connection (its PGAPPNAME)."""
    with sessions() as session:
        found = set(session.scalars(text("SELECT application_name FROM pg_stat_activity")))
    return set(names) <= found


def _buy(shop: Shop, payers: list[Payer], count: int, tag: str) -> list[int]:
    """``count`` trusted charges through the edge; their charge sequence numbers."""
    seqs = []
    with shop.backend() as backend:
        for n in range(count):
            answer = shop.charge(backend, "gem", payers[n % len(payers)], f"{tag}-{n}")
            assert answer.status_code == 201, answer.text
            seqs.append(int(answer.json()["chargeId"], 16))
    return seqs


def _kill_mid_batch(cluster: Cluster, sessions: sessionmaker[Session], shop: Shop,
                    payers: list[Payer], tag: str) -> tuple[list[int], InFlight]:
    """Charges whose batch the chain worker sends while the node mines nothing, and the
    worker killed with that transaction in the pool: after its record, before any receipt."""
    automine(cluster, False)
    seqs = _buy(shop, payers, 4, tag)
    flight = _wait_in_flight(cluster, sessions)[-1]
    assert cluster.chain_worker is not None
    cluster.kill(cluster.chain_worker)
    with sessions() as session:
        statuses = set(session.scalars(select(Charge.settlement_status).where(
            Charge.seq.in_(flight.charges))))
    assert flight.charges and statuses == {SettlementStatus.SETTLING}
    assert _batch(sessions, flight.batch_id)[0] == SettlementStatus.SETTLING
    return seqs, flight


def test_the_chain_worker_killed_mid_batch_or_doubled_settles_each_charge_once(
        cluster: Cluster, sessions: sessionmaker[Session]) -> None:
    shop = open_shop(cluster, sessions, "settle")
    payers = [shop.payer(f"settle-{i}", BUDGET, BUDGET) for i in range(3)]
    # Quiet first: with the node's mining paused, a permit or an earlier load's batch would
    # hold the worker instead of ours.
    wait_for(lambda: _idle(sessions), 90, "the chain worker idle")
    seqs: list[int] = []
    try:
        # Kill 1: the transaction is mined while no worker runs; the restarted worker finds
        # the receipt and applies it.
        bought, flight = _kill_mid_batch(cluster, sessions, shop, payers, "kill-1")
        seqs += bought
        mine(cluster)
        automine(cluster, True)
        cluster.start_chain_worker()
        wait_for(lambda: _settled(sessions, flight), 60, "batch 1 settled")

        # Kill 2: the node loses the transaction (a restarted node's pool); the restarted
        # worker sends the recorded bytes again: same nonce, same hash.
        bought, flight = _kill_mid_batch(cluster, sessions, shop, payers, "kill-2")
        seqs += bought
        rpc(cluster, "hardhat_dropTransaction", flight.tx_hash)
        automine(cluster, True)
        cluster.start_chain_worker()
        wait_for(lambda: _settled(sessions, flight), 60, "batch 2 settled")

        # Kill 3: still in the pool when the worker is back. It must wait for that one, not
        # claim its charges again, and send its next batch under the next nonce.
        bought, flight = _kill_mid_batch(cluster, sessions, shop, payers, "kill-3")
        seqs += bought
        cluster.start_chain_worker()
        seqs += _buy(shop, payers, 4, "after-kill-3")
        after = _wait_in_flight(cluster, sessions, above=flight.nonce)[0]
        mine(cluster)
        automine(cluster, True)
        wait_for(lambda: _settled(sessions, flight) and _settled(sessions, after), 60,
                 "batch 3 and the next settled")
    finally:
        automine(cluster, True)
        mine(cluster)

    # Two workers at once, with one relayer key (the mistake docs/deploy.md warns of).
    second = cluster.start_chain_worker("chain-worker-2")
    try:
        wait_for(lambda: _connected(sessions, "chain-worker", "chain-worker-2"), 60,
                 "both chain workers running")
        # Each holds a batch in flight at once: a worker waits for its receipt before it
        # claims again, so two batches in the pool are two workers'.
        automine(cluster, False)
        seqs += _buy(shop, payers, 4, "doubled-a")
        _wait_in_flight(cluster, sessions)
        seqs += _buy(shop, payers, 4, "doubled-b")
        # Two workers on one key may collide on a nonce: the node refuses the loser's
        # transaction ("replacement transaction underpriced"), and the loser drops that
        # batch, asks the node for its next nonce and sends its charges again (docs/chain.md).
        together = _wait_in_flight(cluster, sessions, count=2, limit=60)
        mine(cluster)
        automine(cluster, True)
        wait_for(lambda: all(_settled(sessions, f) for f in together), 60,
                 "the two workers' batches settled")
        # Then both race for a new user's permit and a burst of charges.
        payers.append(shop.payer("settle-late", BUDGET, BUDGET))
        bought_together: list[list[int]] = [[] for _ in payers]
        threads = [threading.Thread(target=lambda i=i: bought_together[i].extend(
            _buy(shop, [payers[i]], 6, f"doubled-{i}"))) for i in range(len(payers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        seqs += [seq for part in bought_together for seq in part]
        wait_for(lambda: _idle(sessions), 90, "every charge settled by the two workers")
    finally:
        automine(cluster, True)
        cluster.kill(second)

    _settled_exactly_once(cluster, sessions, shop, seqs)
    with sessions() as session:  # every budget still backs its charges
        budgets = session.scalars(select(Authorization).where(Authorization.owner_wallet.in_(
            [p.account.address.lower() for p in payers]))).all()
    assert {(b.status, b.relay_status) for b in budgets} == {(AuthorizationStatus.ACTIVE,
                                                              RelayStatus.RELAYED)}


def _settled_exactly_once(cluster: Cluster, sessions: sessionmaker[Session], shop: Shop,
                          seqs: list[int]) -> None:
    with sessions() as session:
        charges = {c.seq: c for c in session.scalars(
            select(Charge).where(Charge.app_id == shop.app_id))}
        settled_events = Counter(session.scalars(
            select(Delivery.charge_seq).join(WebhookEvent, WebhookEvent.delivery_id
                                             == Delivery.id)
            .where(Delivery.app_id == shop.app_id, WebhookEvent.type == "payment.settled")))
        findings = session.scalars(select(ChainFinding.kind).where(
            ChainFinding.charge_seq.in_(seqs))).all()
    assert len(seqs) == len(set(seqs))
    assert set(charges) == set(seqs)  # none lost, none made up
    assert {c.settlement_status for c in charges.values()} == {SettlementStatus.SETTLED}
    assert settled_events == dict.fromkeys(seqs, 1)  # once in the ledger
    assert set(findings) <= {FindingKind.REPAIRED}
    spender = contract(cluster, "BudgetSpenderV2")
    logs = spender.events.ChargeSettled.get_logs(from_block=0)
    on_chain = Counter(int.from_bytes(log["args"]["chargeId"], "big") for log in logs)
    assert {seq: on_chain[seq] for seq in seqs} == dict.fromkeys(seqs, 1)  # once on chain
    assert all(is_settled(cluster, seq) for seq in seqs)
    # The recipient got each amount once: nothing moved twice, nothing stayed behind.
    assert balance(cluster, shop.pay_to) == sum(c.amount_atomic for c in charges.values())


# -- 3. the webhook worker killed with 1,000 events pending ----------------------------------

EVENTS = 1000


def _claimed(sessions: sessionmaker[Session], app_id: str) -> int:
    """The app's pending outbox rows a dispatcher holds a claim on."""
    with sessions() as session:
        return int(session.scalar(
            select(func.count()).select_from(WebhookAttempt)
            .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
            .where(WebhookEvent.app_id == app_id, WebhookAttempt.status == AttemptStatus.PENDING,
                   WebhookAttempt.claim_token.is_not(None))) or 0)


def test_the_webhook_worker_killed_with_1000_events_pending_loses_none(
        cluster: Cluster, sessions: sessionmaker[Session]) -> None:
    outbox_app = open_shop(cluster, sessions, "outbox")
    assert cluster.webhook_worker is not None
    cluster.stop_process(cluster.webhook_worker)
    with receiver() as hook:
        hook.delay = 0.2  # requests overlap: the kill finds many in flight
        hook.secret = outbox_app.register_webhook(sessions, hook.url)
        with sessions() as session:
            app = session.get(App, outbox_app.app_id)
            assert app is not None
        # The rows the ledger writes with each payment, written straight into the outbox:
        # 1,000 real payments would take half a minute here, and the subject is the worker.
        ids = set(enqueue_events(sessions, app, EVENTS))
        cluster.start_webhook_worker()
        wait_for(lambda: len(hook.requests) >= 200, 90, "deliveries under way")
        cluster.kill(cluster.webhook_worker)
        assert len(hook.delivered_ids()) < EVENTS
        assert _claimed(sessions, app.id) > 0  # it died holding claims
        cluster.start_webhook_worker()
        wait_for(lambda: hook.delivered_ids() >= ids, LEASE + 90,
                 "every event delivered after the restart")
        with sessions() as session:
            stored = set(session.scalars(select(WebhookEvent.id).where(
                WebhookEvent.app_id == app.id)))
    assert stored == ids  # the database's events, no more, no fewer
    received = Counter(r.event_id for r in hook.requests if r.status == 200)
    assert set(received) == ids  # each at least once (those in flight at the kill twice)
    assert len(hook.ledger.grants()) == EVENTS  # the receiver granted each once anyway
    wait_for(lambda: _claimed(sessions, app.id) == 0 and _all_delivered(sessions, app.id),
             30, "every outcome recorded")


def _all_delivered(sessions: sessionmaker[Session], app_id: str) -> bool:
    with sessions() as session:
        statuses = set(session.scalars(
            select(WebhookAttempt.status)
            .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
            .where(WebhookEvent.app_id == app_id)))
    return statuses == {AttemptStatus.DELIVERED}
