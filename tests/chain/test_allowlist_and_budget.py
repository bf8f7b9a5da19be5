"""Allowlist sync into ``recipient_allowlist_status`` and the dev chain's allowlisting; budget
drift against the allowance."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import cast

import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from payments.apps import set_pay_to
from payments.chain import in_process
from payments.chain.allowed_recipients import set_allowed_recipient
from payments.chain.allowlist import mirror_to_dev_chain, sync_allowlist, sync_new_recipients
from payments.chain.budget_drift import CURSOR as DRIFT_CURSOR
from payments.chain.budget_drift import DriftWatch, budget_drift
from payments.chain.gateway import ChainGateway, Receipt
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY, InProcessChain
from payments.chain.models import ChainCursor, ChainFinding, FindingKind
from payments.chain.params import IN_PROCESS_DEPLOYER
from payments.chain.reader import ChainReader
from payments.chain.workers import ChainCycle
from payments.db import transaction, utcnow
from payments.errors import ApiError
from payments.ledger.models import Charge, RelayStatus, SettlementStatus
from payments.models import AllowlistStatus, App
from tests.chain.world import FAST, Crash, World, crash_at, recipient, wallet
from tests.factories import add_app


def _status(world: World, slug: str) -> AllowlistStatus:
    with world.sessions() as session:
        return session.scalars(select(App.recipient_allowlist_status)
                               .where(App.slug == slug)).one()


def test_allowlist_sync_reads_the_contract(world: World) -> None:
    world.add_app("pending", recipient(1), allowlisted=False)
    world.add_app("unset", recipient(2), allowlisted=False)
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "unset")).one()
    statuses = sync_allowlist(world.sessions, world.chain)
    assert statuses[world.apps["game"].id] == AllowlistStatus.ALLOWED
    assert statuses[app.id] == AllowlistStatus.NOT_ALLOWED

    set_allowed_recipient(world.chain, DEPLOYER_KEY.hex(), recipient(1), True)  # the operator
    set_allowed_recipient(world.chain, DEPLOYER_KEY.hex(), recipient(0), False)
    sync_allowlist(world.sessions, world.chain, pay_to=recipient(1))
    assert _status(world, "pending") == AllowlistStatus.ALLOWED
    assert _status(world, "game") == AllowlistStatus.ALLOWED  # not re-read yet
    sync_allowlist(world.sessions, world.chain)
    assert _status(world, "game") == AllowlistStatus.NOT_ALLOWED


def test_the_dev_chain_allowlists_through_the_operators_owner_transaction(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """At start and on each cycle (``mirror_to_dev_chain``) the dev chain allowlists with
    ``set_allowed_recipient``, the function ``svc-ops allowlist add`` calls, signed by its
    owner key."""
    calls: list[tuple[str, str, bool]] = []

    def spy(chain: ChainReader, owner_key: str, address: str, allowed: bool) -> Receipt:
        calls.append((owner_key, address, allowed))
        return set_allowed_recipient(chain, owner_key, address, allowed)
    monkeypatch.setattr(in_process, "set_allowed_recipient", spy)

    # Called allowed by the ledger (dev tooling, `svc-ops allowlist add` in dev), not yet
    # on the chain: the next cycle adds it.
    add_app(world.sessions, "newcomer", pay_to=recipient(4),
            recipient_allowlist_status=AllowlistStatus.ALLOWED)
    assert mirror_to_dev_chain(world.sessions, world.evm) == 1
    assert world.chain.allowed_recipient(recipient(4))
    started = InProcessChain.start(allowed_recipients=[recipient(5)])
    assert started.allowed_recipient(recipient(5))
    owner = "0x" + DEPLOYER_KEY.hex()
    assert calls == [(owner, recipient(4), True), (owner, recipient(5), True)]


def test_the_dev_chain_refuses_what_the_owner_transaction_refuses(world: World) -> None:
    """``set_allowed_recipient`` takes only a 0x address, not the zero one, before anything
    is signed; web3 alone would take a bare one (it checksums it). The dev chain refuses it
    the same way."""
    bare = recipient(5).removeprefix("0x")
    zero = "0x" + "0" * 40  # the contract refuses it too, but only after a round trip
    sent = world.chain.mined_nonce(IN_PROCESS_DEPLOYER)
    refused: list[Callable[[], object]] = [
        lambda: set_allowed_recipient(world.chain, DEPLOYER_KEY.hex(), bare, True),  # the operator
        lambda: set_allowed_recipient(world.chain, DEPLOYER_KEY.hex(), zero, True),
        lambda: world.evm.set_allowed_recipient(bare, True),
        lambda: world.evm.set_allowed_recipient(zero, True),
        lambda: InProcessChain.start(allowed_recipients=[bare]),
    ]
    for allowlist in refused:
        with pytest.raises(ValueError, match=r"^not a 0x address, or the zero address\Z"):
            allowlist()
    assert world.chain.mined_nonce(IN_PROCESS_DEPLOYER) == sent  # nothing was sent
    assert not world.chain.allowed_recipient(recipient(5))


def test_budget_drift_compares_remaining_with_the_allowance(world: World) -> None:
    alice, bob = wallet(0), wallet(1)
    world.authorize(alice)
    world.authorize(bob)
    world.relayer().run_once()
    for _ in range(3):
        world.charge(alice)
    world.worker().run_once()
    world.charge(alice)  # queued: counted as unsettled, not as drift
    assert budget_drift(world.sessions, world.chain, utcnow()) == []

    # Someone relays a bigger permit behind the ledger's back: the allowance drifts.
    relay_behind_the_ledgers_back(world, bob, 5_000_000)
    drift = budget_drift(world.sessions, world.chain, utcnow(), record=True)

    assert [(d.owner, d.ledger_remaining, d.allowance, d.drift) for d in drift] == [
        (bob.address.lower(), 1_000_000, 5_000_000, 4_000_000)]
    with world.sessions() as session:
        assert session.scalars(select(ChainFinding.kind)).all() == [FindingKind.BUDGET_DRIFT]


def relay_behind_the_ledgers_back(world: World, user: LocalAccount, value: int) -> None:
    permit = world.sign_permit(user, value)
    world.chain.transact_as(RELAYER_KEY, world.chain.spender.functions.relayPermit(
        user.address, value, permit["deadline"], *_vrs(permit["signature"])))


def drift_findings(world: World) -> list[str]:
    with world.sessions() as session:
        rows = session.scalars(select(ChainFinding).where(
            ChainFinding.kind == FindingKind.BUDGET_DRIFT).order_by(ChainFinding.id)).all()
        return [str(row.detail["authorizationId"]) for row in rows]


def test_the_chain_worker_files_drift_only_where_nothing_is_in_flight(any_world: World) -> None:
    """Its cycle checks budgets against allowances and files findings, leaving out what a
    transaction on its way explains: a batch mined but not yet applied (the allowance moved
    first), a revoke not yet relayed, a budget past its deadline (its allowance lives on by
    design). The operator's command lists those too."""
    world = any_world
    alice, bob, carol = wallet(0), wallet(1), wallet(2)
    budgets = {user.address: world.authorize(user) for user in (alice, bob, carol)}
    world.relayer().run_once()
    relay_behind_the_ledgers_back(world, bob, 5_000_000)  # drift: the chain lets us take more
    world.charge(alice)
    with pytest.raises(Crash):  # alice's batch mined, its charge still `settling` here
        world.worker(crash_at("broadcast")).run_once()
    world.revoke(carol, nonce=1)  # revoked here, its allowance still on chain

    listed = {row.authorization_id for row in budget_drift(world.sessions, world.chain,
                                                           utcnow())}
    assert listed == set(budgets.values())  # the command: every difference, explained or not
    far = utcnow() + timedelta(days=3650)
    assert DriftWatch(world.sessions, world.chain, clock=lambda: far)() == []  # all expired

    found = DriftWatch(world.sessions, world.chain)()

    assert [row.authorization_id for row in found] == [budgets[bob.address]]
    assert drift_findings(world) == [budgets[bob.address]]
    ChainCycle.build(world.sessions, world.chain, FAST).run()  # what was in flight lands
    assert set(world.statuses().values()) == {SettlementStatus.SETTLED}
    assert world.authorization(budgets[carol.address]).revoke_relay_status == RelayStatus.RELAYED
    assert drift_findings(world) == [budgets[bob.address]]  # the same drift: one finding
    relay_behind_the_ledgers_back(world, alice, 3_000_000)
    ChainCycle.build(world.sessions, world.chain, FAST).run()  # its first cycle checks
    assert drift_findings(world) == [budgets[bob.address], budgets[alice.address]]


def test_the_drift_check_goes_round_the_budgets_a_few_at_a_time(world: World) -> None:
    users = [wallet(i) for i in range(3)]
    ids = sorted(world.authorize(user) for user in users)
    world.relayer().run_once()
    for user in users:
        relay_behind_the_ledgers_back(world, user, 2_000_000)
    def run() -> list[str]:  # a new watch each time: a worker restarted between runs
        watch = DriftWatch(world.sessions, world.chain, per_run=2)
        return [row.authorization_id for row in watch()]

    runs = [run() for _ in range(3)]

    assert runs == [ids[:2], ids[2:], ids[:2]]


def test_two_workers_saving_the_drift_checks_first_place_at_once(pg_world: World) -> None:
    """On PostgreSQL (any number of chain workers): the other worker writes the cursor's
    first row between this one's read and its insert; this one updates that row instead
    of failing its run."""
    world = pg_world
    users = [wallet(i) for i in range(3)]
    ids = sorted(world.authorize(user) for user in users)
    world.relayer().run_once()
    other = DriftWatch(world.sessions, world.chain, per_run=1)
    ran: list[bool] = []

    def before_flush(session: Session, *_: object) -> None:
        if not ran and any(isinstance(row, ChainCursor) for row in session.new):
            ran.append(True)
            other()  # its whole run, row committed, before this insert reaches the database

    event.listen(world.sessions, "before_flush", before_flush)
    try:
        DriftWatch(world.sessions, world.chain, per_run=2)()
    finally:
        event.remove(world.sessions, "before_flush", before_flush)

    assert ran
    with world.sessions() as session:
        [cursor] = session.scalars(select(ChainCursor)).all()
    assert (cursor.name, cursor.position) == (DRIFT_CURSOR, ids[1])


def _vrs(signature: str) -> tuple[int, bytes, bytes]:
    raw = bytes.fromhex(signature[2:])
    return raw[64], raw[:32], raw[32:64]


def test_a_changed_pay_to_is_not_paid_until_its_allowlist_entry_is_read(any_world: World) -> None:
    world = any_world
    alice = wallet(0)
    world.authorize(alice)
    world.relayer().run_once()
    world.charge(alice)  # the allowlisted recipient(0) is paid
    with transaction(world.sessions) as session:
        set_pay_to(session.get_one(App, world.apps["game"].id), recipient(3))
    assert _status(world, "game") == AllowlistStatus.UNKNOWN
    with pytest.raises(ApiError) as refused:
        world.charge(alice)
    assert refused.value.code == "RECIPIENT_NOT_ALLOWLISTED"

    cycle = ChainCycle.build(world.sessions, world.chain, FAST)
    cycle.run()  # reads the new address: not on the list
    assert _status(world, "game") == AllowlistStatus.NOT_ALLOWED
    assert sync_new_recipients(world.sessions, world.chain) == 0  # nothing unknown is left

    set_allowed_recipient(world.chain, DEPLOYER_KEY.hex(), recipient(3), True)  # the operator
    sync_allowlist(world.sessions, world.chain, pay_to=recipient(3))
    assert _status(world, "game") == AllowlistStatus.ALLOWED
    world.charge(alice)
    with world.sessions() as session:
        paid = session.scalars(select(Charge.pay_to).order_by(Charge.seq)).all()
    assert [p.lower() for p in paid] == [recipient(0).lower(), recipient(3).lower()]


def test_the_allowlist_read_is_dropped_when_pay_to_changed_meanwhile(any_world: World) -> None:
    world = any_world
    world.add_app("moving", recipient(1), allowlisted=False)
    with transaction(world.sessions) as session:
        app = session.scalars(select(App).where(App.slug == "moving")).one()
        app.recipient_allowlist_status = AllowlistStatus.UNKNOWN

    class Moving:
        """The chain read, during which the developer changes pay_to again."""

        def allowed_recipient(self, address: str) -> bool:
            with transaction(world.sessions) as session:
                moved = session.scalars(select(App).where(App.slug == "moving")).one()
                set_pay_to(moved, recipient(4))
            return True

    statuses = sync_allowlist(world.sessions, cast(ChainGateway, Moving()), only_unknown=True)
    assert statuses == {}
    assert _status(world, "moving") == AllowlistStatus.UNKNOWN
