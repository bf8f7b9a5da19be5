"""``svc-ops contract transfer-ownership`` (ops/contract.py, payments/chain/ownership.py): the
spender's one-step ``transferOwnership``, said before it is sent and sent only with ``--yes``;
afterwards the old owner's key is refused by name and the new owner's key is the one."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account
from eth_utils.crypto import keccak
from sqlalchemy import select

from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from payments.runtime.models import OperatorAction, OperatorActionKind
from tests.chain.world import recipient
from tests.ops.conftest import Ops
from tests.support.evm_node import EvmNode

OWNER = str(Account.from_key(DEPLOYER_KEY).address)
NEW_OWNER_KEY = keccak(text="ops-test-new-owner")
NEW_OWNER = str(Account.from_key(NEW_OWNER_KEY).address)


def transfers(ops: Ops) -> list[OperatorAction]:
    with ops.sessions()() as session:
        return list(session.scalars(select(OperatorAction).where(
            OperatorAction.action == OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED)))


def test_the_new_owner_takes_over_and_the_old_key_is_refused(any_ops: Ops, evm: EvmNode,
                                                             tmp_path: Path) -> None:
    ops = any_ops
    evm.chain.fund_gas(NEW_OWNER)  # gas money, but it never sent a transaction: a warning
    spender = evm.params.spender

    code, out, err = ops.owner("contract", "transfer-ownership", NEW_OWNER.lower())

    assert code == 2  # without --yes: what it would do, and nothing sent
    assert out.splitlines()[:3] == [
        f"transfer the ownership of BudgetSpenderV2 {spender} on chain {evm.params.chain_id}",
        f"  from {OWNER} (the owner now)",
        f"  to   {NEW_OWNER}, an account that has sent 0 transaction(s) and holds 1 ETH: "
        "from then on its key signs the owner transactions (svc-ops ... --owner-key-file)"]
    assert "This cannot be undone: BudgetSpenderV2 is Ownable (one step" in out
    assert (f"svc-ops: warning: {NEW_OWNER} has no code and has never sent a transaction on "
            f"chain {evm.params.chain_id}: nothing shows that anyone holds its key") in err
    assert err.endswith("svc-ops: nothing was sent: the transfer is irreversible; read the "
                        "above and run the command again with --yes to send it\n")
    assert evm.chain.owner() == OWNER and transfers(ops) == []

    code, out, err = ops.owner("contract", "transfer-ownership", NEW_OWNER, "--yes",
                               "--operator", "dana")

    assert code == 0, err
    assert out.splitlines()[-1].startswith(f"ownership transferred to {NEW_OWNER}: tx 0x")
    assert out.endswith(f"the spender's owner() is now {NEW_OWNER}; recorded for dana\n")
    assert evm.chain.owner() == NEW_OWNER
    [row] = transfers(ops)
    assert (row.operator, row.subject) == ("dana", spender)
    assert {k: row.detail[k] for k in ("previousOwner", "newOwner", "chainId")} == {
        "previousOwner": OWNER, "newOwner": NEW_OWNER, "chainId": evm.params.chain_id}
    receipt = evm.chain.receipt(row.detail["txHash"])
    assert receipt is not None and receipt.succeeded
    assert "\tdana\tcontract_ownership_transferred\t" in ops("actions")[1]

    code, out, err = ops.owner("relayer", "add", recipient(3))  # the old owner's key
    assert (code, out) == (2, "")
    assert err == (f"svc-ops: the owner key given is {OWNER}'s, and the spender's owner is "
                   f"{NEW_OWNER}: only the owner's key can send this; nothing was sent\n")
    assert not evm.chain.is_relayer(recipient(3))

    new_key_file = tmp_path / "new-owner.key"
    new_key_file.write_text(NEW_OWNER_KEY.hex())
    code, _, err = ops("relayer", "add", recipient(3), "--owner-key-file", str(new_key_file))
    assert code == 0, err
    assert evm.chain.is_relayer(recipient(3))


def test_a_contract_as_new_owner_is_named_as_one_without_a_warning(ops: Ops,
                                                                   evm: EvmNode) -> None:
    """A multisig is a contract: svc-ops can no longer sign its owner transactions, and
    says so. (A second BudgetSpenderV2 stands in for one: code at an address.)"""
    code, out, err = ops.owner("contract", "deploy", SPENDER_ADDRESS=None)
    assert code == 0, err
    other = out.split("BudgetSpenderV2 deployed at ", 1)[1].split(":", 1)[0]

    code, out, err = ops.owner("contract", "transfer-ownership", other)

    assert code == 2 and "warning" not in err
    assert f"  to   {other}, a contract (" in out
    assert "bytes of code, e.g. a multisig): from then on the owner transactions" in out
    assert evm.chain.owner() == OWNER


@pytest.mark.parametrize(("new_owner", "said"), [
    ("0x1234", "'0x1234' is not a 0x address (0x and 40 hex digits); give the new owner's "
               "address"),
    ("0x" + "0" * 40, "the zero address cannot be a new owner"),
    (OWNER.lower(), f"{OWNER} is the spender's owner already: there is nothing to transfer; "
                    "nothing was sent"),
    ("spender", "is the spender itself, which never calls the spender's owner functions"),
    ("token", "is the token, which never calls the spender's owner functions"),
], ids=["malformed", "zero", "the-owner", "the-spender", "the-token"])
def test_addresses_that_could_never_own_it_are_refused_with_yes_too(
        ops: Ops, evm: EvmNode, new_owner: str, said: str) -> None:
    address = {"spender": evm.params.spender, "token": evm.params.token}.get(new_owner,
                                                                             new_owner)
    code, out, err = ops.owner("contract", "transfer-ownership", address, "--yes")
    assert (code, out) == (2, "")
    assert err.startswith("svc-ops: ") and said in err and err.count("\n") == 1
    assert evm.chain.owner() == OWNER and transfers(ops) == []


def test_a_key_not_the_owners_sends_nothing(ops: Ops, evm: EvmNode) -> None:
    ops.owner_key_file.write_text(RELAYER_KEY.hex())
    signer = str(Account.from_key(RELAYER_KEY).address)
    code, _, err = ops.owner("contract", "transfer-ownership", NEW_OWNER, "--yes")
    assert code == 2
    assert err.endswith(f"svc-ops: the owner key given is {signer}'s, and the spender's owner "
                        f"is {OWNER}: only the owner's key can send this; nothing was sent\n")
    assert evm.chain.owner() == OWNER and transfers(ops) == []
