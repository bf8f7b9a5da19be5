"""Handing the spender to another owner, e.g. a multisig (``svc-ops contract
transfer-ownership|accept-ownership``).

BudgetSpenderV2 is OpenZeppelin's ``Ownable2Step`` (contracts/BudgetSpenderV2.sol):
``transferOwnership(new)`` only names the ``pendingOwner()``, the owner changes when that
account sends ``acceptOwnership()``, and until then the current owner keeps control and may
name another account or cancel (``transferOwnership(0)``). A mistyped address, or one whose
key nobody holds, never accepts, so it never becomes the owner.

A spender deployed before that is plain ``Ownable``: it has no ``pendingOwner()``, and its
``transferOwnership`` makes the new owner the owner within its one transaction, with nothing
to accept and no way back. :func:`read_ownership` tells the two apart; the one-step path
stays for such a spender only (its address is what every user's permit names, so moving it
to a new contract means every budget signed again), described as irreversible and sent only
when the operator confirms it.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_utils.address import to_checksum_address

from payments.chain.addresses import account_address
from payments.chain.gateway import Receipt
from payments.chain.reader import ChainReader
from payments.chain.relayers import eth

ZERO_ADDRESS = "0x" + "0" * 40


@dataclass(frozen=True)
class Ownership:
    """Who owns the spender, and how it is handed over (checksummed addresses)."""

    owner: str
    two_step: bool  # Ownable2Step; False: deployed as plain Ownable, one step
    pending: str | None  # the pending owner; None when none (or one-step)

    def as_json(self) -> dict[str, str | None]:
        return {"owner": self.owner, "pendingOwner": self.pending,
                "ownershipHandover": "two-step" if self.two_step else "one-step"}


def read_ownership(chain: ChainReader) -> Ownership:
    pending = chain.pending_owner()
    owner = to_checksum_address(chain.owner())
    if pending is None:
        return Ownership(owner, two_step=False, pending=None)
    waiting = None if int(pending, 16) == 0 else to_checksum_address(pending)
    return Ownership(owner, two_step=True, pending=waiting)


@dataclass(frozen=True)
class OwnershipTransfer:
    """What ``transferOwnership(new)`` would do, from the chain's reads (checksummed)."""

    spender: str
    token: str
    chain_id: int
    current: str  # the owner now
    pending: str | None  # the pending owner now (two-step only)
    two_step: bool
    new: str
    code_bytes: int  # at ``new``: a contract (a multisig), or 0 for an account
    sent: int  # transactions ``new`` has sent: a key behind it exists
    balance_wei: int

    def refusal(self) -> str | None:
        """Why this transfer must not be sent, or None."""
        if self.new == self.current:
            return f"{self.new} is the spender's owner already: there is nothing to transfer"
        if self.new == self.pending:
            return (f"{self.new} is the spender's pending owner already: it becomes the owner "
                    "when it accepts (svc-ops contract accept-ownership with its key)")
        if self.new in (self.spender, self.token):
            what = "the spender itself" if self.new == self.spender else "the token"
            return (f"{self.new} is {what}, which never calls the spender's owner "
                    "functions: it could never act as the spender's owner")
        return None

    def description(self) -> list[str]:
        """What the transaction does, said before anything is signed."""
        if self.two_step:
            return self._two_step()
        return self._one_step()

    def _two_step(self) -> list[str]:
        if self.code_bytes:
            kind = (f"a contract ({self.code_bytes} bytes of code, e.g. a multisig): it "
                    "accepts by sending acceptOwnership() itself (a multisig proposes it), and "
                    "from then on the owner transactions (setRelayer, setAllowedRecipient) are "
                    "sent from it, not by svc-ops, which signs with one key")
        else:
            kind = (f"an account that has sent {self.sent} transaction(s) and holds "
                    f"{eth(self.balance_wei)} ETH: it accepts with its key (svc-ops contract "
                    "accept-ownership --owner-key-file), which from then on signs the owner "
                    "transactions")
        lines = [
            f"start handing BudgetSpenderV2 {self.spender} on chain {self.chain_id} over",
            f"  from {self.current} (the owner now)",
            f"  to   {self.new}, {kind}",
        ]
        if self.pending is not None:
            lines.append(f"  in place of the pending owner {self.pending}, who can then no "
                         "longer accept")
        lines.append(
            f"Nothing changes hands yet: {self.new} becomes the pending owner, and the owner "
            f"only once it accepts. Until then {self.current} keeps control (relayers, "
            "allowlist) and can name another owner or cancel (svc-ops contract "
            "transfer-ownership --cancel).")
        return lines

    def _one_step(self) -> list[str]:
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
            "This cannot be undone: this BudgetSpenderV2 was deployed as Ownable (one step, "
            f"not Ownable2Step), so {self.new} is the owner once the transaction is mined, "
            f"without accepting anything, and only {self.new} can transfer it again. The key "
            f"of {self.current} can no longer add or remove relayers or allowlisted recipients.",
        ]

    def warning(self) -> str | None:
        """Two-step: an account without gas money cannot send its acceptance. One step: an
        address with no code that never sent a transaction shows no sign that anyone holds
        its key (a fresh wallet looks the same, so this warns and does not refuse)."""
        if self.two_step:
            if self.code_bytes or self.balance_wei:
                return None
            return (f"{self.new} holds no ETH on chain {self.chain_id}: it needs gas money "
                    "to send acceptOwnership()")
        if self.code_bytes or self.sent:
            return None
        return (f"{self.new} has no code and has never sent a transaction on chain "
                f"{self.chain_id}: nothing shows that anyone holds its key. If it is "
                "mistyped or its key is lost, no one can change the spender's relayers or "
                "allowlist again; a transaction sent from it first shows the key works")


def plan_transfer(chain: ChainReader, ownership: Ownership, new_owner: str) -> OwnershipTransfer:
    new = to_checksum_address(new_owner)
    return OwnershipTransfer(
        spender=to_checksum_address(chain.spender.address),
        token=to_checksum_address(chain.token.address), chain_id=chain.params.chain_id,
        current=ownership.owner, pending=ownership.pending, two_step=ownership.two_step,
        new=new, code_bytes=chain.code_size(new), sent=chain.mined_nonce(new),
        balance_wei=chain.gas_balance(new))


def transfer_ownership(chain: ChainReader, owner_key: str, new_owner: str) -> Receipt:
    """The owner transaction ``transferOwnership(new_owner)``: names the pending owner
    (Ownable2Step), or makes it the owner at once on a one-step spender (see above)."""
    fn = chain.spender.functions.transferOwnership(account_address(new_owner))
    return chain.transact_as(owner_key, fn)


def cancel_transfer(chain: ChainReader, owner_key: str) -> Receipt:
    """``transferOwnership(0)``: no pending owner any more (Ownable2Step only: a one-step
    spender refuses the zero address, ``OwnableInvalidOwner``)."""
    fn = chain.spender.functions.transferOwnership(ZERO_ADDRESS)
    return chain.transact_as(owner_key, fn)


def accept_ownership(chain: ChainReader, new_owner_key: str) -> Receipt:
    """``acceptOwnership()``, signed by the pending owner's key."""
    return chain.transact_as(new_owner_key, chain.spender.functions.acceptOwnership())
