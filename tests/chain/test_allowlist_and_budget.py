"""Allowlist sync into ``recipient_allowlist_status``; budget drift against the allowance."""

from __future__ import annotations

from typing import cast

import pytest
from sqlalchemy import select

from payments.apps import set_pay_to
from payments.chain.allowlist import set_allowed_recipient, sync_allowlist, sync_new_recipients
from payments.chain.budget_drift import budget_drift
from payments.chain.gateway import ChainGateway
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from payments.chain.models import ChainFinding, FindingKind
from payments.chain.workers import ChainCycle
from payments.db import transaction, utcnow
from payments.errors import ApiError
from payments.ledger.models import Charge
from payments.models import AllowlistStatus, App
from tests.chain.world import FAST, World, recipient, wallet


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
    permit = world.sign_permit(bob, 5_000_000)
    world.chain.transact_as(RELAYER_KEY,
                            world.chain.spender.functions.relayPermit(
                                bob.address, 5_000_000, permit["deadline"],
                                *_vrs(permit["signature"])))
    drift = budget_drift(world.sessions, world.chain, utcnow(), record=True)

    assert [(d.owner, d.ledger_remaining, d.allowance, d.drift) for d in drift] == [
        (bob.address.lower(), 1_000_000, 5_000_000, 4_000_000)]
    with world.sessions() as session:
        assert session.scalars(select(ChainFinding.kind)).all() == [FindingKind.BUDGET_DRIFT]


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
