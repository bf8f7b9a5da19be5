"""What the relayer sends for a budget row: its permit, or its revoke (``Permit(value=0)``),
rebuilt from what the ledger recorded, with the allowance each sets."""

from __future__ import annotations

from dataclasses import dataclass

from payments.chain.models import TxKind
from payments.chain.relay_hold import Lowering
from payments.ledger.models import Authorization


@dataclass(frozen=True)
class RelayJob:
    authorization_id: str
    kind: TxKind
    owner: str
    value: int
    nonce: int
    deadline: int
    signature: str
    sets: Lowering  # the allowance it sets, for the charges accepted before it


def relay_job(authorization: Authorization, kind: TxKind) -> RelayJob:
    owner, spender = authorization.owner_wallet, authorization.spender
    if kind is TxKind.PERMIT:
        return RelayJob(authorization.id, kind, owner, authorization.value_atomic,
                        authorization.nonce, int(authorization.deadline.timestamp()),
                        authorization.signature,
                        Lowering(owner, spender, authorization.nonce,
                                 authorization.value_atomic, authorization.created_at))
    assert authorization.revoke_signature is not None and authorization.revoke_nonce is not None
    # Revokes recorded before the ledger kept their deadline cannot be rebuilt; the budget's
    # deadline is the best guess (the signature check then refuses it if wrong).
    deadline = authorization.revoke_deadline or authorization.deadline
    accepted = authorization.revoked_at or authorization.created_at
    return RelayJob(authorization.id, kind, owner, 0, authorization.revoke_nonce,
                    int(deadline.timestamp()), authorization.revoke_signature,
                    Lowering(owner, spender, authorization.revoke_nonce, 0, accepted))
