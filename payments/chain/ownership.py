"""Handing the spender to another owner, e.g. a multisig (``svc-ops contract
transfer-ownership``).

BudgetSpenderV2 is OpenZeppelin's ``Ownable`` (contracts/BudgetSpenderV2.sol), not
``Ownable2Step``: ``transferOwnership`` makes the new owner the owner within its one
transaction, with nothing for the new owner to accept. A mistyped address, or one whose key
nobody holds, is then an owner no one can act as, and the spender's relayers and allowlist
can never change again. So the transfer is read and described before anything is signed
(:func:`plan_transfer`): addresses that can never act are refused, and one that shows no
sign of a key behind it is warned about.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_utils.address import to_checksum_address

from payments.chain.addresses import account_address
from payments.chain.gateway import Receipt
from payments.chain.reader import ChainReader
from payments.chain.relayers import eth


@dataclass(frozen=True)
class OwnershipTransfer:
    """What ``transferOwnership(new)`` would do, from the chain's reads (checksummed)."""

    spender: str
    token: str
    chain_id: int
    current: str  # the owner now
    new: str
    code_bytes: int  # at ``new``: a contract (a multisig), or 0 for an account
    sent: int  # transactions ``new`` has sent: a key behind it exists
    balance_wei: int

    def refusal(self) -> str | None:
        """Why this transfer must not be sent, or None."""
        if self.new == self.current:
            return f"{self.new} is the spender's owner already: there is nothing to transfer"
        if self.new in (self.spender, self.token):
            what = "the spender itself" if self.new == self.spender else "the token"
            return (f"{self.new} is {what}, which never calls the spender's owner "
                    "functions: the spender would have an owner that can never act, and its "
                    "relayers and allowlist could never change again")
        return None

    def description(self) -> list[str]:
        """What the transaction does, in the words the operator confirms with ``--yes``."""
        if self.code_bytes:
            kind = (f"a contract ({self.code_bytes} bytes of code, e.g. a multisig): from then "
                    "on the owner transactions (setRelayer, setAllowedRecipient) are sent "
                    "from it, not by svc-ops, which signs with one key")
        else:
            kind = (f"an account that has sent {self.sent} transaction(s) and holds "
                    f"{eth(self.balance_wei)} ETH: from then on its key signs the owner "
                    "transactions (svc-ops ... --owner-key-file)")
        return [
            f"transfer the ownership of BudgetSpenderV2 {self.spender} on chain {self.chain_id}",
            f"  from {self.current} (the owner now)",
            f"  to   {self.new}, {kind}",
            "This cannot be undone: BudgetSpenderV2 is Ownable (one step, not Ownable2Step), "
            f"so {self.new} is the owner once the transaction is mined, without accepting "
            f"anything, and only {self.new} can transfer it again. The key of {self.current} "
            "can no longer add or remove relayers or allowlisted recipients.",
        ]

    def warning(self) -> str | None:
        """An address with no code that never sent a transaction: no sign that anyone holds
        its key (a fresh wallet looks the same, so this warns and does not refuse)."""
        if self.code_bytes or self.sent:
            return None
        return (f"{self.new} has no code and has never sent a transaction on chain "
                f"{self.chain_id}: nothing shows that anyone holds its key. If it is "
                "mistyped or its key is lost, no one can change the spender's relayers or "
                "allowlist again; a transaction sent from it first shows the key works")


def plan_transfer(chain: ChainReader, new_owner: str) -> OwnershipTransfer:
    new = to_checksum_address(new_owner)
    return OwnershipTransfer(
        spender=to_checksum_address(chain.spender.address),
        token=to_checksum_address(chain.token.address), chain_id=chain.params.chain_id,
        current=to_checksum_address(chain.owner()), new=new, code_bytes=chain.code_size(new),
        sent=chain.mined_nonce(new), balance_wei=chain.gas_balance(new))


def transfer_ownership(chain: ChainReader, owner_key: str, new_owner: str) -> Receipt:
    """The owner transaction ``transferOwnership(new_owner)``: irreversible (see above)."""
    fn = chain.spender.functions.transferOwnership(account_address(new_owner))
    return chain.transact_as(owner_key, fn)
