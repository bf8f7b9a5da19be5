"""``svc-ops relayer add|remove|list|status`` (ops/relayers.py): the spender's ``setRelayer``
owner transaction, handled as the allowlist's, and a relayer's standing read without a key."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_utils.crypto import keccak
from sqlalchemy import select

from payments.chain.gateway import ChainRevert
from payments.chain.heartbeat import beat
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from payments.chain.json_rpc import JsonRpcChain
from payments.db import utcnow
from payments.ledger.models import RelayStatus, SettlementStatus
from payments.runtime.models import OperatorAction
from tests.chain.world import World, recipient, wallet
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode

NEW_KEY = keccak(text="ops-test-relayer")
NEW = str(Account.from_key(NEW_KEY).address)
OWNER = str(Account.from_key(DEPLOYER_KEY).address)


def relayer_actions(ops: Ops) -> list[tuple[str, str, str, str]]:
    with ops.sessions()() as session:
        rows = session.scalars(select(OperatorAction).order_by(OperatorAction.id)).all()
        return [(r.operator, r.action.value, r.subject, r.detail["txHash"]) for r in rows
                if r.action.value.startswith("relayer_")]


def test_an_added_relayer_settles_and_a_removed_one_cannot(any_ops: Ops, evm: EvmNode) -> None:
    """A chain worker on a new key, over the node: refused until `relayer add`, then its
    permit relays and its batch settles; after `relayer remove` its next batch is refused
    (NotRelayer) and the charge waits, queued. Both decisions are in the audit log."""
    ops = any_ops
    evm.chain.fund_gas(NEW)
    worker = JsonRpcChain.connect(evm.url, evm.params, NEW_KEY.hex(), confirmations=1,
                                  poll_interval=0.01)
    world = World(ops.sessions(), worker)
    world.add_app("game", recipient(0))
    alice = wallet(0)
    auth = world.authorize(alice)
    first = world.charge(alice)
    assert ops("relayer", "status", NEW)[1] == f"{NEW}\tnot a relayer\tgas {10**18} wei (1 ETH)\n"
    with pytest.raises(ChainRevert, match="NotRelayer"):
        world.relayer().run_once()

    code, out, err = ops.owner("relayer", "add", NEW.lower(), "--operator", "dana")

    assert (code, err) == (0, "")
    assert out.startswith(f"add {NEW}: tx 0x") and out.endswith("; recorded for dana\n")
    assert evm.chain.is_relayer(NEW)
    world.settle()
    assert world.authorization(auth).relay_status == RelayStatus.RELAYED
    assert world.statuses()[first] == SettlementStatus.SETTLED
    assert ops("relayer", "status", NEW)[1].startswith(f"{NEW}\trelayer\tgas ")

    assert ops.owner("relayer", "remove", NEW)[0] == 0
    assert not evm.chain.is_relayer(NEW)
    second = world.charge(alice)
    with pytest.raises(ChainRevert, match="NotRelayer"):
        world.worker().run_once()
    assert world.statuses()[second] == SettlementStatus.QUEUED

    recorded = relayer_actions(ops)
    assert [r[:3] for r in recorded] == [("dana", "relayer_add", NEW),
                                         ("opsuser", "relayer_remove", NEW)]
    for *_, tx_hash in recorded:
        receipt = evm.chain.receipt(tx_hash)
        assert receipt is not None and receipt.succeeded
    assert "\tdana\trelayer_add\t" in ops("actions")[1]


def test_a_key_not_the_owners_is_refused_before_anything_is_sent(ops: Ops,
                                                                  evm: EvmNode) -> None:
    """The relayer's own key (funded, a relayer, not the owner): one sentence naming both
    addresses, no traceback, no transaction, no record."""
    ops.owner_key_file.write_text(RELAYER_KEY.hex())
    signer = str(Account.from_key(RELAYER_KEY).address)
    sent = evm.chain.mined_nonce(signer)

    code, out, err = ops.owner("relayer", "add", NEW)

    assert code == 2 and out == ""
    assert err == (f"svc-ops: the owner key given is {signer}'s, and the spender's owner is "
                   f"{OWNER}: only the owner's key can send this; nothing was sent\n")
    assert evm.chain.mined_nonce(signer) == sent
    assert not evm.chain.is_relayer(NEW) and relayer_actions(ops) == []
    code, _, err = ops.owner("allowlist", "add", recipient(5))  # the allowlist says the same
    assert code == 2 and "only the owner's key can send this" in err


@pytest.mark.parametrize(("args", "said"), [
    (("relayer", "add", "0x1234"), "'0x1234' is not a 0x address (0x and 40 hex digits); "
                                   "give the relayer's address"),
    (("relayer", "remove", "0x" + "0" * 40), "the zero address cannot be a relayer"),
    (("relayer", "status", "relayer-1"), "'relayer-1' is not a 0x address"),
    (("allowlist", "add", "0x" + "g" * 40), "give the recipient's address"),  # a traceback once
    (("allowlist", "remove", "0x" + "0" * 40), "the zero address cannot be a recipient"),
])
def test_a_malformed_or_zero_address_is_refused_in_one_sentence(
        ops: Ops, args: tuple[str, ...], said: str) -> None:
    code, out, err = ops.owner(*args) if args[1] != "status" else ops(*args)
    assert (code, out) == (2, "")
    assert err.startswith("svc-ops: ") and said in err and err.count("\n") == 1


def test_a_malformed_owner_key_is_refused_without_showing_it(ops: Ops) -> None:
    pasted_short = "ab" * 31
    ops.owner_key_file.write_text(pasted_short)
    code, _, err = ops.owner("relayer", "add", NEW)
    assert code == 2
    assert err == (f"svc-ops: the owner key in {ops.owner_key_file} must be a private key: "
                   "64 hex digits (32 bytes), with or without 0x; the value given (not shown) "
                   "has 62 characters after any 0x\n")


def test_a_fee_above_the_cap_sends_nothing_unless_the_operator_caps_it_himself(
        ops: Ops, evm: EvmNode) -> None:
    code, _, err = ops.owner("relayer", "add", NEW, CHAIN_MAX_FEE_PER_GAS="1")
    assert code == 2 and "nothing was sent" in err and "--max-fee-per-gas" in err
    assert not evm.chain.is_relayer(NEW)
    assert ops.owner("relayer", "add", NEW, "--max-fee-per-gas", "none",
                     CHAIN_MAX_FEE_PER_GAS="1")[0] == 0
    assert evm.chain.is_relayer(NEW)


def test_relayer_list_reads_the_addresses_this_service_knows(ops: Ops, evm: EvmNode) -> None:
    """The contract keeps no list: the settings' key, the workers' heartbeats and the
    operators' decisions name the addresses, and the chain says what each one is."""
    retired = str(Account.from_key(keccak(text="retired-relayer")).address)
    beat(ops.sessions(), retired, 3, utcnow())
    assert ops.owner("relayer", "add", NEW)[0] == 0
    current = str(Account.from_key(RELAYER_KEY).address)

    code, out, _ = ops("relayer", "list", RELAYER_KEY=RELAYER_KEY.hex())

    assert code == 0
    lines = [line.split("\t")[:2] for line in out.splitlines()]
    assert lines == [[current, "relayer"], [retired, "not a relayer"], [NEW, "relayer"]]
    assert "no gas money, it cannot send" in out.splitlines()[2]  # NEW was never funded
    assert ops("relayer", "list")[1].splitlines()[0].split("\t")[0] == retired
