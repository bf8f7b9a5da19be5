"""``svc-ops contract transfer-ownership|accept-ownership`` (ops/ownership.py,
payments/chain/ownership.py) on the in-process EVM behind the JSON-RPC test node, with the
compiled BudgetSpenderV2 (Ownable2Step): the owner names a pending owner, who becomes the
owner only when it accepts with its own key; until then the owner keeps control and may
replace or cancel the offer.

A spender deployed before the two-step handover is plain ``Ownable``. The test deploys that
very contract: ``tests/ops/data/BudgetSpenderV2-Ownable.json`` is the committed artifact as it
was before (``git show a02ef2b:payments/chain/artifacts/BudgetSpenderV2.json``), compiled
with the same solc and settings. The two-step commands refuse it; ``--one-step --yes`` hands
it over at once, as the command used to."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from eth_utils.crypto import keccak
from sqlalchemy import select

from payments.chain.gateway import ChainRevert
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from payments.chain.json_rpc import read_only
from payments.runtime.models import OperatorAction, OperatorActionKind
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode

OWNER = str(Account.from_key(DEPLOYER_KEY).address)
NEW_OWNER_KEY = keccak(text="ops-test-new-owner")
NEW_OWNER = str(Account.from_key(NEW_OWNER_KEY).address)
OTHER_KEY = keccak(text="ops-test-other-owner")
OTHER = str(Account.from_key(OTHER_KEY).address)
ZERO = "0x" + "0" * 40
OWNABLE_ARTIFACT = Path(__file__).parent / "data" / "BudgetSpenderV2-Ownable.json"
OWNERSHIP_KINDS = (OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED,
                   OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
                   OperatorActionKind.CONTRACT_OWNERSHIP_CANCELLED,
                   OperatorActionKind.CONTRACT_OWNERSHIP_ACCEPTED)


def recorded(ops: Ops) -> list[OperatorAction]:
    """The ownership records, oldest first."""
    with ops.sessions()() as session:
        return list(session.scalars(select(OperatorAction).where(
            OperatorAction.action.in_(OWNERSHIP_KINDS)).order_by(OperatorAction.id)))


def key_file(tmp_path: Path, key: bytes, name: str) -> str:
    path = tmp_path / f"{name}.key"
    path.write_text(key.hex())
    return str(path)


def accept(ops: Ops, key: str, *args: str, **env: str | None) -> tuple[int, str, str]:
    return ops("contract", "accept-ownership", "--owner-key-file", key, *args, **env)


def status(ops: Ops, **env: str | None) -> dict[str, Any]:
    code, out, err = ops("chain", "status", **env)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def test_the_new_owner_owns_the_spender_only_once_it_accepts(any_ops: Ops, evm: EvmNode,
                                                              tmp_path: Path) -> None:
    ops = any_ops
    evm.chain.fund_gas(NEW_OWNER)
    spender = evm.params.spender
    assert {k: status(ops)[k] for k in ("owner", "pendingOwner", "ownershipHandover")} == {
        "owner": OWNER, "pendingOwner": None, "ownershipHandover": "two-step"}

    code, out, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER.lower(),
                               "--operator", "dana")

    assert code == 0, err  # no --yes: nothing changes hands until the new owner accepts
    assert out.splitlines()[:3] == [
        f"start handing BudgetSpenderV2 {spender} on chain {evm.params.chain_id} over",
        f"  from {OWNER} (the owner now)",
        f"  to   {NEW_OWNER}, an account that has sent 0 transaction(s) and holds 1 ETH: it "
        "accepts with its key (svc-ops contract accept-ownership --owner-key-file), which "
        "from then on signs the owner transactions"]
    assert (f"Nothing changes hands yet: {NEW_OWNER} becomes the pending owner, and the "
            f"owner only once it accepts. Until then {OWNER} keeps control") in out
    assert f"handover to {NEW_OWNER} started: tx 0x" in out
    assert (f"the spender's pendingOwner() is now {NEW_OWNER} and its owner() is still "
            f"{OWNER}; recorded for dana") in out
    assert "warning" not in err
    assert evm.chain.owner() == OWNER and evm.chain.pending_owner() == NEW_OWNER
    assert status(ops)["pendingOwner"] == NEW_OWNER

    # Until the acceptance the owner's key keeps control, and the new one has none.
    assert ops.owner("relayer", "add", recipient(3))[0] == 0
    new_key = key_file(tmp_path, NEW_OWNER_KEY, "new-owner")
    code, _, err = ops("relayer", "add", recipient(4), "--owner-key-file", new_key)
    assert code == 2 and f"the owner key given is {NEW_OWNER}'s" in err

    code, out, err = accept(ops, new_key, "--operator", "erin")

    assert code == 0, err
    assert out.splitlines()[0] == (
        f"accept the ownership of BudgetSpenderV2 {spender} on chain {evm.params.chain_id}: "
        f"from {OWNER} (the owner now) to {NEW_OWNER} (the pending owner)")
    assert (f"the spender's owner() is now {NEW_OWNER} (was {OWNER}); recorded for erin"
            in out)
    assert evm.chain.owner() == NEW_OWNER and evm.chain.pending_owner() == ZERO
    assert {k: status(ops)[k] for k in ("owner", "pendingOwner")} == {
        "owner": NEW_OWNER, "pendingOwner": None}

    started, accepted = recorded(ops)
    assert (started.action, started.operator, started.subject) == (
        OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED, "dana", spender)
    assert {k: started.detail[k] for k in ("owner", "pendingOwner", "replacedPendingOwner",
                                           "chainId")} == {
        "owner": OWNER, "pendingOwner": NEW_OWNER, "replacedPendingOwner": None,
        "chainId": evm.params.chain_id}
    assert (accepted.action, accepted.operator, accepted.subject) == (
        OperatorActionKind.CONTRACT_OWNERSHIP_ACCEPTED, "erin", spender)
    assert {k: accepted.detail[k] for k in ("previousOwner", "newOwner")} == {
        "previousOwner": OWNER, "newOwner": NEW_OWNER}
    for row in (started, accepted):
        receipt = evm.chain.receipt(row.detail["txHash"])
        assert receipt is not None and receipt.succeeded
    actions = ops("actions")[1]
    assert "\tdana\tcontract_ownership_offered\t" in actions
    assert "\terin\tcontract_ownership_accepted\t" in actions

    code, out, err = ops.owner("relayer", "add", recipient(5))  # the old owner's key
    assert (code, out) == (2, "")
    assert err == (f"svc-ops: the owner key given is {OWNER}'s, and the spender's owner is "
                   f"{NEW_OWNER}: only the owner's key can send this; nothing was sent\n")
    code, _, err = ops("relayer", "add", recipient(5), "--owner-key-file", new_key)
    assert code == 0, err
    assert evm.chain.is_relayer(recipient(5))


def test_only_the_pending_owners_key_accepts(ops: Ops, evm: EvmNode, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    other_key = key_file(tmp_path, OTHER_KEY, "other")
    evm.chain.fund_gas(OTHER)
    code, out, err = accept(ops, other_key)  # nothing pending yet
    assert (code, out) == (2, "")
    assert err == (f"svc-ops: no handover of the spender {evm.params.spender} is pending "
                   f"(pendingOwner() is the zero address): its owner {OWNER} starts one with "
                   "svc-ops contract transfer-ownership --to ADDRESS; nothing was sent\n")

    assert ops.owner("contract", "transfer-ownership", NEW_OWNER)[0] == 0  # positional too
    assert evm.chain.pending_owner() == NEW_OWNER

    for key, signer in ((other_key, OTHER), (str(ops.owner_key_file), OWNER)):
        code, _, err = accept(ops, key)
        assert code == 2
        assert err.endswith(f"svc-ops: the key given is {signer}'s, and the spender's pending "
                            f"owner is {NEW_OWNER}: only the pending owner's key can accept; "
                            "nothing was sent\n")
    # The contract refuses them too, had the command not: OwnableUnauthorizedAccount.
    with pytest.raises(ChainRevert, match="OwnableUnauthorizedAccount"):
        evm.chain.transact_as(OTHER_KEY, evm.chain.spender.functions.acceptOwnership())

    # The pending owner without gas money could not send its acceptance: said, not sent.
    monkeypatch.setattr("getpass.getpass", lambda prompt: {
        "new owner key: ": NEW_OWNER_KEY.hex()}[prompt])
    code, _, err = ops("contract", "accept-ownership")
    assert code == 2 and f"{NEW_OWNER} holds no gas money on chain" in err
    assert evm.chain.owner() == OWNER and evm.chain.pending_owner() == NEW_OWNER
    evm.chain.fund_gas(NEW_OWNER)
    code, _, err = ops("contract", "accept-ownership")  # the key typed at the prompt
    assert code == 0, err
    assert evm.chain.owner() == NEW_OWNER
    assert [r.action for r in recorded(ops)] == [
        OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
        OperatorActionKind.CONTRACT_OWNERSHIP_ACCEPTED]


def test_the_owner_replaces_or_cancels_a_pending_handover(ops: Ops, evm: EvmNode,
                                                          tmp_path: Path) -> None:
    code, out, err = ops.owner("contract", "transfer-ownership", "--cancel")
    assert (code, out) == (2, "")
    assert "there is nothing to cancel; nothing was sent" in err

    assert ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER)[0] == 0
    code, out, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER)
    assert code == 2 and f"{NEW_OWNER} is the spender's pending owner already" in err

    code, out, err = ops.owner("contract", "transfer-ownership", "--to", OTHER)
    assert code == 0, err
    assert (f"  in place of the pending owner {NEW_OWNER}, who can then no longer accept"
            in out)
    # No code and no gas money: it could not send its acceptance (a warning, sent anyway).
    assert (f"svc-ops: warning: {OTHER} holds no ETH on chain {evm.params.chain_id}: it needs "
            "gas money to send acceptOwnership()") in err
    assert evm.chain.pending_owner() == OTHER
    evm.chain.fund_gas(NEW_OWNER)
    code, _, err = accept(ops, key_file(tmp_path, NEW_OWNER_KEY, "new-owner"))
    assert code == 2 and f"pending owner is {OTHER}" in err

    code, out, err = ops.owner("contract", "transfer-ownership", "--cancel",
                               "--operator", "dana")

    assert code == 0, err
    assert out.splitlines()[0] == (
        f"cancel the pending handover of BudgetSpenderV2 {evm.params.spender} on chain "
        f"{evm.params.chain_id} to {OTHER}: transferOwnership(0x0); {OWNER} stays the owner")
    assert out.splitlines()[1].startswith(f"handover to {OTHER} cancelled: tx 0x")
    assert evm.chain.pending_owner() == ZERO and evm.chain.owner() == OWNER
    assert status(ops)["pendingOwner"] is None
    evm.chain.fund_gas(OTHER)
    code, _, err = accept(ops, key_file(tmp_path, OTHER_KEY, "other"))
    assert code == 2 and "no handover of the spender" in err
    with pytest.raises(ChainRevert, match="OwnableUnauthorizedAccount"):
        evm.chain.transact_as(OTHER_KEY, evm.chain.spender.functions.acceptOwnership())

    rows = recorded(ops)
    assert [r.action for r in rows] == [
        OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
        OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
        OperatorActionKind.CONTRACT_OWNERSHIP_CANCELLED]
    assert rows[1].detail["replacedPendingOwner"] == NEW_OWNER
    assert (rows[2].operator, rows[2].detail["owner"], rows[2].detail["cancelledPendingOwner"]
            ) == ("dana", OWNER, OTHER)

    # Only the owner cancels.
    assert ops.owner("contract", "transfer-ownership", "--to", OTHER)[0] == 0
    code, _, err = ops("contract", "transfer-ownership", "--cancel", "--owner-key-file",
                       key_file(tmp_path, OTHER_KEY, "other"))
    assert code == 2 and f"the owner key given is {OTHER}'s" in err
    assert evm.chain.pending_owner() == OTHER


def deploy_ownable(evm: EvmNode) -> str:
    """The spender as deployed before the two-step handover, owned by OWNER."""
    artifact = json.loads(OWNABLE_ARTIFACT.read_text(encoding="utf-8"))
    w3 = evm.chain.w3
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    tx_hash = factory.constructor(evm.params.token, OWNER).transact(
        {"from": OWNER, "gas": 6_000_000})
    address = w3.eth.wait_for_transaction_receipt(tx_hash)["contractAddress"]
    assert address is not None
    return str(address)


def test_a_spender_deployed_as_plain_ownable_is_told_apart(ops: Ops, evm: EvmNode,
                                                          tmp_path: Path) -> None:
    old = deploy_ownable(evm)
    reads = read_only(evm.url, replace(evm.params, spender=old), confirmations=1)
    assert reads.pending_owner() is None and evm.chain.pending_owner() == ZERO
    evm.chain.fund_gas(NEW_OWNER)
    spender = {"SPENDER_ADDRESS": old}
    assert {k: status(ops, **spender)[k] for k in ("owner", "pendingOwner",
                                                   "ownershipHandover")} == {
        "owner": OWNER, "pendingOwner": None, "ownershipHandover": "one-step"}

    for command in (("transfer-ownership", "--to", NEW_OWNER),
                    ("transfer-ownership", "--cancel")):
        code, out, err = ops.owner("contract", *command, **spender)
        assert (code, out) == (2, "")
        assert err.startswith(f"svc-ops: the spender {old} was deployed as plain Ownable (it "
                              "has no pendingOwner()), so there is no two-step handover to ")
        assert ("To do that anyway: svc-ops contract transfer-ownership --to ADDRESS "
                "--one-step (it says what it would do; --yes sends it). Nothing was sent"
                in err)
    code, _, err = accept(ops, key_file(tmp_path, NEW_OWNER_KEY, "new-owner"), **spender)
    assert code == 2 and "so there is no two-step handover to accept" in err
    # --one-step is for that spender only.
    code, _, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER,
                             "--one-step", "--yes")
    assert code == 2 and "is Ownable2Step: --one-step is only for one deployed as" in err
    assert evm.chain.pending_owner() == ZERO and reads.owner() == OWNER and recorded(ops) == []

    code, out, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER,
                               "--one-step", **spender)
    assert code == 2  # without --yes: what it would do, and nothing sent
    assert out.splitlines()[0] == (f"transfer the ownership of BudgetSpenderV2 {old} on "
                                   f"chain {evm.params.chain_id}")
    assert "This cannot be undone: this BudgetSpenderV2 was deployed as Ownable" in out
    assert (f"svc-ops: warning: {NEW_OWNER} has no code and has never sent a transaction"
            in err)
    assert err.endswith("svc-ops: nothing was sent: the transfer is irreversible; read the "
                        "above and run the command again with --yes to send it\n")
    assert reads.owner() == OWNER

    code, out, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER,
                               "--one-step", "--yes", "--operator", "dana", **spender)

    assert code == 0, err
    assert out.endswith(f"the spender's owner() is now {NEW_OWNER}; recorded for dana\n")
    assert reads.owner() == NEW_OWNER  # at once, nothing accepted
    [row] = recorded(ops)
    assert (row.action, row.subject) == (OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED, old)
    assert {k: row.detail[k] for k in ("previousOwner", "newOwner")} == {
        "previousOwner": OWNER, "newOwner": NEW_OWNER}


def test_a_contract_as_new_owner_is_named_as_one(ops: Ops, evm: EvmNode) -> None:
    """A multisig is a contract: it accepts by itself, and svc-ops can no longer sign its
    owner transactions; both are said. (A second BudgetSpenderV2 stands in for one: code
    at an address.)"""
    code, out, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None)
    assert code == 0, err
    other = out.split("BudgetSpenderV2 deployed at ", 1)[1].split(":", 1)[0]

    code, out, err = ops.owner("contract", "transfer-ownership", "--to", other)

    assert code == 0 and "warning" not in err
    assert f"  to   {other}, a contract (" in out
    assert ("bytes of code, e.g. a multisig): it accepts by sending acceptOwnership() itself "
            "(a multisig proposes it)") in out
    assert evm.chain.owner() == OWNER and evm.chain.pending_owner() == other


@pytest.mark.parametrize(("new_owner", "said"), [
    ("0x1234", "'0x1234' is not a 0x address (0x and 40 hex digits); give the new owner's "
               "address"),
    ("0x" + "0" * 40, "the zero address cannot be a new owner"),
    (OWNER.lower(), f"{OWNER} is the spender's owner already: there is nothing to transfer; "
                    "nothing was sent"),
    ("spender", "is the spender itself, which never calls the spender's owner functions"),
    ("token", "is the token, which never calls the spender's owner functions"),
], ids=["malformed", "zero", "the-owner", "the-spender", "the-token"])
def test_addresses_that_could_never_own_it_are_refused(
        ops: Ops, evm: EvmNode, new_owner: str, said: str) -> None:
    address = {"spender": evm.params.spender, "token": evm.params.token}.get(new_owner,
                                                                             new_owner)
    code, out, err = ops.owner("contract", "transfer-ownership", "--to", address)
    assert (code, out) == (2, "")
    assert err.startswith("svc-ops: ") and said in err and err.count("\n") == 1
    assert evm.chain.pending_owner() == ZERO and recorded(ops) == []


def test_a_key_not_the_owners_sends_nothing(ops: Ops, evm: EvmNode) -> None:
    ops.owner_key_file.write_text(RELAYER_KEY.hex())
    signer = str(Account.from_key(RELAYER_KEY).address)
    code, _, err = ops.owner("contract", "transfer-ownership", "--to", NEW_OWNER)
    assert code == 2
    assert err.endswith(f"svc-ops: the owner key given is {signer}'s, and the spender's owner "
                        f"is {OWNER}: only the owner's key can send this; nothing was sent\n")
    assert evm.chain.pending_owner() == ZERO and recorded(ops) == []
