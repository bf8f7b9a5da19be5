"""A revoke, or a renewal that lowers the allowance, reaches the chain after the charges the
ledger accepted before it have had their settlement attempt, and no later than its hold.

The worker cycle relays before it settles. So a ``Permit(value=0)`` signed right after a
purchase zeroed the allowance before that purchase's batch was sent: the charge failed on
chain (``ERC20InsufficientAllowance``) though the ledger had accepted it and the developer,
an optimistic product, had delivered. Buying and revoking at once did not pay.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest

from payments.chain.batching import BatchPolicy
from payments.chain.budget_drift import budget_drift
from payments.chain.models import ChargeRetry
from payments.chain.settlement import SettlementWorker
from payments.chain.workers import ChainCycle
from payments.db import utcnow
from payments.errors import ApiError
from payments.ledger.authorizations import remaining
from payments.ledger.models import AuthorizationStatus, DeliveryStatus, RelayStatus
from payments.ledger.models import SettlementStatus as S
from tests.chain.world import FAST, Crash, World, crash_at, recipient, wallet


def _cycle(world: World) -> ChainCycle:
    """The worker cycle the server runs: the relayer, then the settlement worker."""
    return ChainCycle.build(world.sessions, world.chain, FAST)


def test_a_charge_accepted_before_a_revoke_settles_before_the_revoke_is_relayed(
        any_world: World) -> None:
    world = any_world
    user = wallet(0)
    budget = world.authorize(user)
    world.relayer().run_once()
    bought = world.charge(user)  # optimistic: delivered at once
    assert world.delivery(bought).status == DeliveryStatus.DELIVERED
    world.revoke(user, nonce=1)  # at once, before any settlement
    paid_before = world.balance(recipient(0))
    cycle = _cycle(world)

    cycle.run()  # the relayer first: the revoke waits for the charge, which then settles

    assert world.statuses()[bought] == S.SETTLED
    assert world.authorization(budget).revoke_relay_status == RelayStatus.PENDING
    assert world.chain.allowance(user.address) == 1_000_000 - 10_000

    cycle.run()  # nothing accepted before it waits any more: the revoke goes

    row = world.authorization(budget)
    assert (row.status, row.revoke_relay_status) == (AuthorizationStatus.REVOKED,
                                                     RelayStatus.RELAYED)
    assert world.chain.allowance(user.address) == 0
    assert world.chain.permit_nonce(user.address) == 2
    assert world.balance(recipient(0)) - paid_before == 10_000
    assert world.events("payment.settled") == {bought: 1}
    with pytest.raises(ApiError) as refused:  # the ledger refuses from the revoke on
        world.charge(user, budget=budget)
    assert refused.value.code == "AUTHORIZATION_REVOKED"


def test_a_batch_mined_but_not_yet_applied_holds_the_revoke(any_world: World) -> None:
    """``settling`` holds it as ``queued`` does: the batch's outcome is not known yet."""
    world = any_world
    user = wallet(0)
    budget = world.authorize(user)
    world.relayer().run_once()
    bought = [world.charge(user), world.charge(user, product="sword")]
    with pytest.raises(Crash):  # the batch is mined; the ledger still says settling
        world.worker(crash_at("broadcast")).run_once()
    world.revoke(user, nonce=1)

    world.relayer().run_once()
    assert world.authorization(budget).revoke_relay_status == RelayStatus.PENDING

    world.worker().run_once()  # restarted: the receipt is applied
    world.relayer().run_once()

    assert world.statuses() == dict.fromkeys(bought, S.SETTLED)
    assert world.delivery(bought[1]).status == DeliveryStatus.DELIVERED  # settled_first
    assert world.authorization(budget).revoke_relay_status == RelayStatus.RELAYED
    assert world.chain.allowance(user.address) == 0


def test_a_settlement_that_keeps_failing_holds_the_revoke_no_longer_than_the_bound(
        any_world: World, caplog: pytest.LogCaptureFixture) -> None:
    world = any_world
    user = wallet(0)
    budget = world.authorize(user)
    world.relayer().run_once()
    bought = world.charge(user)
    world.revoke(user, nonce=1)
    revoked_at = world.authorization(budget).revoked_at
    assert revoked_at is not None
    bound = revoked_at + FAST.relay_hold

    for _ in range(3):  # its worker dies after each claim: the charge never gets its attempt
        with pytest.raises(Crash):
            world.worker(crash_at("claimed")).run_once()
        world.relayer().run_once()
        assert world.authorization(budget).revoke_relay_status == RelayStatus.PENDING
    world.relayer(clock=lambda: bound - timedelta(seconds=1)).run_once()
    assert world.authorization(budget).revoke_relay_status == RelayStatus.PENDING

    with caplog.at_level(logging.WARNING, logger="payments.chain.relayer"):
        world.relayer(clock=lambda: bound).run_once()

    assert world.authorization(budget).revoke_relay_status == RelayStatus.RELAYED
    assert world.chain.allowance(user.address) == 0
    assert any("waited" in r.getMessage() and budget in r.getMessage()
               for r in caplog.records)
    world.worker().run_once()  # the charge's attempt, now against no allowance
    assert world.statuses()[bought] == S.FAILED
    with world.sessions() as session:
        retry = session.get(ChargeRetry, bought)
        assert retry is not None
        assert retry.last_error == "PairTransferFailed/ERC20InsufficientAllowance"


def test_a_renewal_signed_behind_a_waiting_revoke_waits_behind_it(any_world: World) -> None:
    """The token takes the owner's permits in nonce order: a renewal (nonce 2) sent while
    the revoke (nonce 1) waits would revert and be failed for good."""
    world = any_world
    user = wallet(0)
    first = world.authorize(user)
    world.relayer().run_once()
    bought = world.charge(user)
    world.revoke(user, nonce=1)
    renewal = world.authorize(user, 2_000_000, fund=False, nonce=2)
    later = world.charge(user)  # on the renewal
    cycle = _cycle(world)

    cycle.run()
    assert world.statuses() == {bought: S.SETTLED, later: S.QUEUED}
    assert world.authorization(first).revoke_relay_status == RelayStatus.PENDING
    assert world.authorization(renewal).relay_status == RelayStatus.PENDING

    cycle.run()  # the revoke, then the renewal, then the renewal's charge

    row = world.authorization(renewal)
    assert (row.status, row.relay_status) == (AuthorizationStatus.ACTIVE, RelayStatus.RELAYED)
    assert world.authorization(first).revoke_relay_status == RelayStatus.RELAYED
    assert world.statuses() == {bought: S.SETTLED, later: S.SETTLED}
    assert world.chain.permit_nonce(user.address) == 3
    assert world.chain.allowance(user.address) == 2_000_000 - 10_000


def test_a_renewal_below_the_charges_before_it_waits_for_them(any_world: World) -> None:
    """A renewal sets the allowance: one signed for less than the earlier budget's unsettled
    charges, relayed first, zeroes them out as a revoke would (one owner and recipient is
    one netted transfer, so all of them failed)."""
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    bought = [world.charge(user) for _ in range(3)]  # 30 000 on the first budget
    renewal = world.authorize(user, 10_000, fund=False, nonce=1)
    now = utcnow()
    assert remaining(world.authorization(renewal), now) == 0  # they count against it
    cycle = _cycle(world)

    cycle.run()

    assert world.statuses() == dict.fromkeys(bought, S.SETTLED)
    assert world.authorization(renewal).relay_status == RelayStatus.PENDING
    assert world.chain.allowance(user.address) == 1_000_000 - 30_000

    cycle.run()

    row = world.authorization(renewal)
    assert row.relay_status == RelayStatus.RELAYED
    assert world.chain.allowance(user.address) == 10_000
    # Paid from the first allowance, they no longer count against the renewal's: the
    # ledger's remaining is the allowance again, and no drift is reported.
    assert remaining(row, now) == 10_000
    assert budget_drift(world.sessions, world.chain, now) == []
    extra = world.charge(user)
    cycle.run()
    assert world.statuses()[extra] == S.SETTLED
    assert world.chain.allowance(user.address) == 0


def test_a_renewal_covering_the_charges_before_it_is_relayed_at_once(
        any_world: World) -> None:
    """Only a relay that would leave earlier charges short waits: a renewal at or above
    them is sent in the same cycle, and they settle against it as before."""
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    bought = [world.charge(user), world.charge(user)]
    renewal = world.authorize(user, 20_000, fund=False, nonce=1)  # exactly what they need

    assert world.relayer().run_once() == 1

    assert world.authorization(renewal).relay_status == RelayStatus.RELAYED
    assert world.chain.allowance(user.address) == 20_000
    world.worker().run_once()
    assert world.statuses() == dict.fromkeys(bought, S.SETTLED)
    assert world.chain.allowance(user.address) == 0
    assert remaining(world.authorization(renewal), utcnow()) == 0
    assert budget_drift(world.sessions, world.chain, utcnow()) == []


def test_revokes_wait_for_a_settlement_worker_running_beside_the_relayer(
        pg_world: World) -> None:
    """Two chain workers on PostgreSQL, their own key each, the relayer cycling while the
    settlement worker claims, sends and applies small batches: no revoke is sent before
    every charge of its budget has been applied, whatever the interleaving."""
    world = pg_world
    users = [wallet(i) for i in range(3)]
    budgets = [world.authorize(user) for user in users]
    world.relayer().run_once()
    bought = [world.charge(users[i % 3]) for i in range(12)]
    for user in users:
        world.revoke(user, nonce=1)
    policy = BatchPolicy(max_charges=2, max_age=timedelta(0), unsent_grace=timedelta(hours=1),
                         receipt_timeout=5.0)
    worker = SettlementWorker(world.sessions, world.evm.with_relayer((3000).to_bytes(32, "big")),
                              policy=policy)
    relayer = world.relayer()
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def settle() -> None:
        start.wait()
        try:
            for _ in range(10):
                worker.run_once(max_batches=1)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def relay() -> None:
        start.wait()
        try:
            for _ in range(200):
                relayer.run_once()
                if {world.authorization(b).revoke_relay_status for b in budgets} == {
                        RelayStatus.RELAYED}:
                    return
                time.sleep(0.02)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=settle), threading.Thread(target=relay)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []

    assert world.statuses() == dict.fromkeys(bought, S.SETTLED)
    assert {world.authorization(b).revoke_relay_status for b in budgets} == {RelayStatus.RELAYED}
    assert [world.chain.allowance(user.address) for user in users] == [0, 0, 0]
