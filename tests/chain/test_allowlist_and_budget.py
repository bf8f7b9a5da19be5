"""Allowlist sync into ``recipient_allowlist_status``; budget drift against the allowance."""

from __future__ import annotations

from sqlalchemy import select

from payments.chain.allowlist import set_allowed_recipient, sync_allowlist
from payments.chain.budget_drift import budget_drift
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from payments.chain.models import ChainFinding, FindingKind
from payments.db import utcnow
from payments.models import AllowlistStatus, App
from tests.chain.world import World, recipient, wallet


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
