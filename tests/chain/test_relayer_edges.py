"""Relayer edges: its own signature check, crash-safe revokes, and ``payment.simulated``."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy import select, update

from payments.chain.gateway import ChainRevert
from payments.chain.models import (
    ChainFinding,
    ChainTransaction,
    ChargeRetry,
    FindingKind,
    TxKind,
    TxStatus,
)
from payments.chain.params import in_process_params
from payments.chain.relayer import Relayer
from payments.db import transaction, utcnow
from payments.errors import ApiError
from payments.ledger.authorizations import active_authorization, authorize_permit
from payments.ledger.models import (
    Authorization,
    AuthorizationStatus,
    Charge,
    Delivery,
    RelayStatus,
    SettlementStatus,
    WebhookEvent,
)
from payments.ledger.permits import LEDGER_DEADLINE_MAX, parse_permit
from payments.ledger.views import event_payload
from payments.models import App, Product
from router.chain_params import chain_params
from router.settings import Settings
from tests.chain.world import Crash, World, crash_at, recipient, wallet

SPENDER = in_process_params().spender


def _relayer_sends(world: World) -> int:
    """Transactions the relayer key has had mined: every send costs one."""
    return int(world.evm.w3.eth.get_transaction_count(to_checksum_address(world.chain.relayer)))


def _txs(world: World, authorization_id: str) -> list[ChainTransaction]:
    with world.sessions() as session:
        return list(session.scalars(select(ChainTransaction).where(
            ChainTransaction.authorization_id == authorization_id)
            .order_by(ChainTransaction.id)))


# -- the relayer's own signature check --------------------------------------------------


def test_a_permit_tampered_after_acceptance_is_refused_and_never_sent(any_world: World) -> None:
    world = any_world
    user, forger = wallet(0), wallet(7)
    auth = world.authorize(user)  # the ledger verified the real signature here
    seq = world.charge(user)
    row = world.authorization(auth)
    # Same message, someone else's key: well-formed, and it recovers the wrong owner.
    forged = world.sign_permit(forger, row.value_atomic, nonce=row.nonce,
                               deadline=int(row.deadline.timestamp()))
    with transaction(world.sessions) as session:
        session.execute(update(Authorization).where(Authorization.id == auth)
                        .values(signature=forged["signature"]))
    sends, paid_before = _relayer_sends(world), world.balance(recipient(0))

    assert world.relayer().run_once() == 1

    assert world.authorization(auth).relay_status == RelayStatus.FAILED
    assert world.authorization(auth).relay_tx_hash is None
    (refused,) = _txs(world, auth)
    # The off-chain check decided, not a simulated revert (that would say ERC2612InvalidSigner).
    assert (refused.kind, refused.status, refused.error) == (
        TxKind.PERMIT, TxStatus.REFUSED, "invalid permit signature")
    assert refused.tx_hash is None and refused.raw is None
    assert _relayer_sends(world) == sends  # nothing signed was sent
    assert world.chain.permit_nonce(user.address) == 0
    assert world.chain.allowance(user.address) == 0

    worker = world.worker()
    worker.run_once()
    worker.run_once()
    assert world.relayer().run_once() == 0  # refused once, not retried

    # The budget backs nothing: revoked, its charge failed for good (a finding, no retry),
    # no money moved and no batch was even sent (the relayer key sent nothing at all).
    assert world.authorization(auth).status == AuthorizationStatus.REVOKED
    assert world.statuses()[seq] == SettlementStatus.FAILED
    _assert_abandoned(world, seq)
    with world.sessions() as session:  # nothing left to charge against
        assert active_authorization(session, user.address, SPENDER) is None
    assert world.balance(recipient(0)) == paid_before
    assert _relayer_sends(world) == sends
    assert world.chain.charge_settled_logs(0, world.chain.block_number()) == []
    assert world.chain.allowance(user.address) == 0


@pytest.mark.parametrize("deadline", [LEDGER_DEADLINE_MAX, 2**256 - 1])
def test_a_permit_the_ledger_records_is_one_the_relayer_can_send(world: World,
                                                                deadline: int) -> None:
    """The relayer rebuilds a permit from the ledger's row, its deadline included. The
    ledger stores the deadline as a time, which ends in the year 9999; a later one (wallets
    often sign ``type(uint256).max``) was recorded as that time, so the rebuilt permit was
    not the one signed: the budget was taken, charged against, and its relay refused as a
    bad signature, failing every charge it took. Now the latest time the ledger keeps is
    relayed, and anything later is refused before a budget exists."""
    user = wallet(0)
    world.faucet(user.address)
    signed = world.sign_permit(user, 1_000_000, deadline=deadline)
    if deadline > LEDGER_DEADLINE_MAX:
        with pytest.raises(ApiError) as refused:
            parse_permit(signed)
        assert (refused.value.code, refused.value.status) == ("invalid_permit", 422)
        return
    with transaction(world.sessions) as session:
        auth = authorize_permit(session, world.chain.params, parse_permit(signed), utcnow()).id
    seq = world.charge(user)
    world.settle()
    assert world.authorization(auth).relay_status == RelayStatus.RELAYED
    assert world.statuses()[seq] == SettlementStatus.SETTLED


def _assert_abandoned(world: World, seq: int) -> None:
    with world.sessions() as session:
        retry = session.get(ChargeRetry, seq)
        assert retry is not None and retry.next_attempt_at is None
        assert (retry.last_error or "").startswith("permit relay failed")
        kinds = session.scalars(select(ChainFinding.kind).where(
            ChainFinding.charge_seq == seq)).all()
    assert kinds == [FindingKind.RETRIES_EXHAUSTED]


def test_a_refused_renewal_never_spends_the_earlier_budgets_allowance(any_world: World) -> None:
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    first = world.charge(user)
    world.settle()
    assert world.statuses()[first] == SettlementStatus.SETTLED
    allowance, paid = world.chain.allowance(user.address), world.balance(recipient(0))
    assert allowance > 0  # what is left of the first permit

    renewal = world.authorize(user, 2_000_000, fund=False)  # supersedes the first budget
    row = world.authorization(renewal)
    forged = world.sign_permit(wallet(7), row.value_atomic, nonce=row.nonce,
                               deadline=int(row.deadline.timestamp()))
    with transaction(world.sessions) as session:
        session.execute(update(Authorization).where(Authorization.id == renewal)
                        .values(signature=forged["signature"]))
    second = world.charge(user)  # taken while the renewal's permit is pending
    world.settle()

    assert world.authorization(renewal).relay_status == RelayStatus.FAILED
    assert world.authorization(renewal).status == AuthorizationStatus.REVOKED
    assert world.statuses()[second] == SettlementStatus.FAILED
    _assert_abandoned(world, second)
    assert world.chain.allowance(user.address) == allowance  # nothing spent from it
    assert world.balance(recipient(0)) == paid


# -- one owner's relays go in nonce order -------------------------------------------------


def test_a_renewal_signed_after_a_revoke_is_relayed_after_it(any_world: World) -> None:
    """Revoke (nonce 1), then a new budget (nonce 2), before the relayer's next cycle: the
    token takes one owner's permits in nonce order only. The relayer sent every permit
    before any revoke, so the new budget was simulated while the token still expected
    nonce 1, reverted (ERC2612InvalidSigner), and was failed for good: revoked, and the
    charges it had taken abandoned."""
    world = any_world
    user = wallet(0)
    world.authorize(user)
    world.relayer().run_once()
    world.revoke(user, nonce=1)
    renewal = world.authorize(user, 2_000_000, fund=False, nonce=2)
    seq = world.charge(user)  # taken on the renewal, as the product route would

    world.settle()

    row = world.authorization(renewal)
    assert (row.status, row.relay_status) == (AuthorizationStatus.ACTIVE, RelayStatus.RELAYED)
    assert world.statuses()[seq] == SettlementStatus.SETTLED
    assert world.chain.permit_nonce(user.address) == 3
    assert world.chain.allowance(user.address) == 2_000_000 - 10_000


def test_a_permit_waits_while_an_earlier_one_of_its_owner_is_in_flight(world: World) -> None:
    """The earlier permit is sent but not mined yet (a slow block, a receipt wait that
    ran out) when the owner renews: the renewal must wait for it, not be simulated against
    a token that has not taken the earlier nonce yet and failed for good."""
    user = wallet(0)
    world.faucet(user.address)
    first = world.authorize(user, fund=False, nonce=0)
    quick = Relayer(world.sessions, world.chain, receipt_timeout=0.2)
    world.evm.set_automine(False)
    try:
        assert quick.run_once() == 0  # sent, not mined
        renewal = world.authorize(user, 2_000_000, fund=False, nonce=1)
        quick.run_once()
        assert world.authorization(renewal).relay_status == RelayStatus.PENDING
        assert world.authorization(renewal).status == AuthorizationStatus.ACTIVE
    finally:
        world.evm.set_automine(True)
    world.evm.mine()
    world.relayer().run_once()
    world.relayer().run_once()
    assert world.authorization(first).relay_status == RelayStatus.RELAYED
    row = world.authorization(renewal)
    assert (row.status, row.relay_status) == (AuthorizationStatus.ACTIVE, RelayStatus.RELAYED)
    assert world.chain.allowance(user.address) == 2_000_000


# -- payment.simulated --------------------------------------------------------------------


def test_events_of_an_in_process_charge_say_simulated(world: World) -> None:
    user = wallet(0)
    world.authorize(user)
    seq = world.charge(user)
    world.settle()
    assert world.statuses()[seq] == SettlementStatus.SETTLED

    with world.sessions() as session:
        payloads = {event.type: event.payload for event in session.scalars(
            select(WebhookEvent).join(Delivery, WebhookEvent.delivery_id == Delivery.id)
            .where(Delivery.charge_seq == seq))}
    assert set(payloads) == {"payment.delivered", "payment.settled"}
    for payload in payloads.values():
        assert payload["payment"]["simulated"] is True
        assert payload["payment"]["budgetSpender"] == SPENDER


def test_json_rpc_params_make_events_not_simulated(world: World) -> None:
    spender = Account.create().address
    settings = Settings(chain_backend="json_rpc", chain_rpc_url="http://127.0.0.1:8545",
                        spender_address=spender)
    params = chain_params(settings)
    assert params.simulated is False
    assert chain_params(Settings()).simulated is True

    user = wallet(0)
    world.authorize(user)
    seq = world.charge(user)
    with world.sessions() as session:
        event = session.scalars(select(WebhookEvent)).one()
        delivery = session.get(Delivery, event.delivery_id)
        assert delivery is not None and delivery.charge_seq == seq
        charge = session.get(Charge, seq)
        app, product = session.get(App, delivery.app_id), session.get(Product, delivery.product_id)
        assert charge is not None and app is not None and product is not None
        payload = event_payload("evt_x", event.type, event.created_at, app, product, charge,
                                delivery, params)
    assert payload["payment"]["simulated"] is False
    assert payload["payment"]["budgetSpender"] == spender


# -- crash safety of the revoke relay -----------------------------------------------------


@pytest.mark.parametrize("step", ["signed", "recorded", "broadcast"])
def test_revoke_relay_crash_at_each_step_sends_one_revoke(world: World, step: str) -> None:
    user = wallet(0)
    auth = world.authorize(user)
    world.relayer().run_once()
    assert world.chain.allowance(user.address) == 1_000_000
    world.revoke(user, nonce=1)
    sends = _relayer_sends(world)

    with pytest.raises(Crash):
        world.relayer(crash_at(step)).run_once()
    world.relayer().run_once()
    assert world.relayer().run_once() == 0  # nothing left over

    row = world.authorization(auth)
    assert (row.relay_status, row.revoke_relay_status) == (RelayStatus.RELAYED,
                                                           RelayStatus.RELAYED)
    revokes = [tx for tx in _txs(world, auth) if tx.kind is TxKind.REVOKE]
    assert [tx.status for tx in revokes] == [TxStatus.CONFIRMED]
    receipt = world.chain.receipt(str(revokes[0].tx_hash))
    assert receipt is not None and receipt.succeeded
    assert _relayer_sends(world) == sends + 1  # one revoke on chain, never a second
    assert world.chain.permit_nonce(user.address) == 2
    assert world.chain.allowance(user.address) == 0


def test_a_recorded_revoke_whose_nonce_went_elsewhere_is_sent_once_more(world: World) -> None:
    user, other = wallet(0), wallet(1)
    auth = world.authorize(user)
    world.authorize(other)
    world.relayer().run_once()
    world.charge(other)
    world.revoke(user, nonce=1)
    sends = _relayer_sends(world)
    with pytest.raises(Crash):
        world.relayer(crash_at("recorded")).run_once()  # signed and recorded, never sent
    (lost,) = [tx for tx in _txs(world, auth) if tx.kind is TxKind.REVOKE]
    # Before the relayer restarts, the settlement worker's batch takes that same nonce.
    assert len(world.worker().run_once().batches) == 1

    world.relayer().run_once()

    revokes = [tx for tx in _txs(world, auth) if tx.kind is TxKind.REVOKE]
    assert [(tx.id, tx.status) for tx in revokes] == [(lost.id, TxStatus.DROPPED),
                                                     (revokes[1].id, TxStatus.CONFIRMED)]
    assert revokes[1].nonce == (lost.nonce or 0) + 1
    assert world.chain.receipt(str(lost.tx_hash)) is None
    assert world.authorization(auth).revoke_relay_status == RelayStatus.RELAYED
    assert _relayer_sends(world) == sends + 2  # the batch and one revoke
    assert world.chain.allowance(user.address) == 0


class _StaleNonceOnce:
    """The chain as a relayer sees it in a race: its first read of the permit nonce comes
    from before another worker's send was mined; everything else is the real chain."""

    def __init__(self, chain: Any, stale: int) -> None:
        self._chain: Any = chain
        self._stale: int | None = stale

    def permit_nonce(self, owner: str) -> int:
        if self._stale is not None:
            stale, self._stale = self._stale, None
            return stale
        return int(self._chain.permit_nonce(owner))

    def __getattr__(self, name: str) -> object:
        return getattr(self._chain, name)


def test_a_permit_sent_by_another_worker_meanwhile_is_relayed_not_failed(
        world: World) -> None:
    """Two relayers on one queue (docs/deploy.md warns against it, and it happens in a
    rolling restart): the other's send is mined between this one's nonce check and its gas
    estimate, which then reverts. The permit is on chain: its budget must stay active."""
    from typing import cast

    from payments.chain.relayer import Relayer
    from payments.chain.web3_chain import Web3Chain
    user = wallet(0)
    auth = world.authorize(user)
    seq = world.charge(user)
    row = world.authorization(auth)
    signature = bytes.fromhex(row.signature[2:])
    # The other worker's send, mined.
    world.chain.transact_as(world.owner_key, world.chain.token.functions.permit(
        to_checksum_address(user.address), SPENDER, row.value_atomic,
        int(row.deadline.timestamp()), signature[64], signature[:32], signature[32:64]))
    assert world.chain.permit_nonce(user.address) == row.nonce + 1

    racing = cast(Web3Chain, _StaleNonceOnce(world.chain, row.nonce))
    Relayer(world.sessions, racing, receipt_timeout=5.0).run_once()

    after = world.authorization(auth)
    assert (after.status, after.relay_status) == (AuthorizationStatus.ACTIVE,
                                                  RelayStatus.RELAYED)
    with world.sessions() as session:
        charge = session.get(Charge, seq)
        assert charge is not None and charge.settlement_status is SettlementStatus.QUEUED


# -- a key that is not a relayer (not yet, or no longer) ---------------------------------


def test_a_relay_refused_for_our_key_waits_for_a_relayer(world: World) -> None:
    """``NotRelayer`` is about the key, not the permit: simulated, the cycle says so and the
    budget stays pending; mined after `svc-ops relayer remove` took the key off, the
    transaction is reverted and the budget still waits. Both used to fail the budget for
    good (revoked, its charges failed) for what the operator did."""
    user = wallet(0)
    auth = world.authorize(user)
    seq = world.charge(user)
    world.evm.set_relayer(world.chain.relayer, False)
    with pytest.raises(ChainRevert, match="NotRelayer"):
        world.relayer().run_once()
    assert _pending(world, auth)

    world.evm.set_relayer(world.chain.relayer, True)

    def removed_meanwhile(point: str) -> None:  # signed and recorded, not yet sent
        if point == "recorded":
            world.evm.set_relayer(world.chain.relayer, False)

    assert world.relayer(removed_meanwhile).run_once() == 1
    assert [(tx.status, tx.error) for tx in _txs(world, auth)] == [
        (TxStatus.REVERTED, "NotRelayer")]
    assert _pending(world, auth)

    world.evm.set_relayer(world.chain.relayer, True)
    world.settle()
    assert world.authorization(auth).relay_status == RelayStatus.RELAYED
    assert world.statuses()[seq] == SettlementStatus.SETTLED


def _pending(world: World, authorization_id: str) -> bool:
    budget = world.authorization(authorization_id)
    return (budget.relay_status, budget.status) == (RelayStatus.PENDING,
                                                    AuthorizationStatus.ACTIVE)
