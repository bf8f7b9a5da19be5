"""Off-chain checks of what a wallet signed: the EIP-2612 permit and the owner proof.

The permit is exactly USDC's ``Permit(owner, spender, value, nonce, deadline)`` with the
spender BudgetSpenderV2; nothing of ours enters it (spec 1.10).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data

from payments.chain.params import ChainParams
from payments.digits import parse_digits
from payments.errors import ApiError

ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
SIGNATURE_RE = re.compile(r"^0x[0-9a-fA-F]{130}\Z")
UINT256_MAX = 2**256 - 1
LEDGER_INT_MAX = 2**63 - 1
# 9999-12-31T23:59:59Z: the latest deadline the ledger keeps exactly (it stores a time).
LEDGER_DEADLINE_MAX = 253402300799
SECP256K1_HALF_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141 // 2

PERMIT_TYPES = {
    "Permit": [
        {"name": "owner", "type": "address"},
        {"name": "spender", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
}


@dataclass(frozen=True)
class Permit:
    owner: str  # lower-case
    value: int
    nonce: int
    deadline: int  # unix seconds
    signature: str

    @property
    def deadline_at(self) -> datetime:
        return datetime.fromtimestamp(min(self.deadline, LEDGER_DEADLINE_MAX), UTC)


def check_address(value: Any, name: str) -> str:
    if not isinstance(value, str) or not ADDRESS_RE.match(value):
        raise ApiError("invalid_address", 422, f"'{name}' must be a 0x address.", field=name)
    return value.lower()


def permit_typed_data(params: ChainParams, owner: str, value: int, nonce: int,
                      deadline: int) -> dict[str, Any]:
    """The full EIP-712 message a wallet signs (``eth_signTypedData_v4``)."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            **PERMIT_TYPES,
        },
        "primaryType": "Permit",
        "domain": {"name": params.token_name, "version": params.token_version,
                   "chainId": params.chain_id, "verifyingContract": params.token},
        "message": {"owner": owner, "spender": params.spender, "value": value,
                    "nonce": nonce, "deadline": deadline},
    }


def parse_permit(body: Any) -> Permit:
    if not isinstance(body, dict):
        raise ApiError("invalid_permit", 422, "'permit' must be an object with owner, value, "
                       "nonce, deadline and signature.")
    owner = check_address(body.get("owner"), "permit.owner")
    numbers: dict[str, int] = {}
    for name in ("value", "nonce", "deadline"):
        raw = body.get(name)
        if isinstance(raw, str):
            raw = parse_digits(raw, 78)  # uint256 has 78 digits; None is refused below
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= UINT256_MAX:
            raise ApiError("invalid_permit", 422, f"'permit.{name}' must be an unsigned "
                           "integer (a decimal string is fine).", field=f"permit.{name}")
        # value and nonce are stored in BIGINT columns (the deadline only as a time).
        if name != "deadline" and raw > LEDGER_INT_MAX:
            raise ApiError("invalid_permit", 422, f"'permit.{name}' is above {LEDGER_INT_MAX}, "
                           "the largest the ledger records; sign a smaller budget.",
                           field=f"permit.{name}")
        numbers[name] = raw
    if numbers["deadline"] > LEDGER_DEADLINE_MAX:
        # Valid on chain, but the ledger keeps the deadline as a time, and the relayer
        # rebuilds the permit from it: a later one would be recorded as another deadline,
        # and the relay refused as a bad signature after charges were taken on it.
        raise ApiError("invalid_permit", 422, "'permit.deadline' is after the year 9999, "
                       f"later than the ledger records ({LEDGER_DEADLINE_MAX}); sign it with "
                       "an earlier deadline.", field="permit.deadline")
    signature = body.get("signature")
    if not isinstance(signature, str) or not SIGNATURE_RE.match(signature):
        raise ApiError("invalid_permit", 422, "'permit.signature' must be a 65-byte hex "
                       "signature.", field="permit.signature")
    signature = signature.lower()
    if signature[130:] in ("00", "01"):  # v as the recovery id: the same signature as 27/28
        signature = signature[:130] + f"{int(signature[130:], 16) + 27:02x}"
    return Permit(owner, numbers["value"], numbers["nonce"], numbers["deadline"], signature)


def verify_permit(params: ChainParams, permit: Permit) -> None:
    """Raise unless ``permit.owner`` signed this permit for our spender on our token."""
    # (r, s) and (r, n - s) are both valid signatures of one message; the token's ECDSA
    # accepts only the low-s one (EIP-2), so the other could never be relayed.
    if int(permit.signature[66:130], 16) > SECP256K1_HALF_ORDER:
        raise ApiError("invalid_permit_signature", 422, "The permit signature is not in the "
                       "low-s form the token accepts; sign it again with a standard wallet.")
    message = encode_typed_data(full_message=permit_typed_data(
        params, permit.owner, permit.value, permit.nonce, permit.deadline))
    try:
        signer = Account.recover_message(message, signature=permit.signature)
    except Exception:  # malformed signature bytes: eth-keys raises several types
        signer = None
    if signer is None or signer.lower() != permit.owner:
        raise ApiError("invalid_permit_signature", 422, "The permit signature does not match "
                       "its owner, token, spender or values.")


def owner_proof_text(app_slug: str, return_url: str, spender: str, authorization_id: str,
                     issued_at: str, links: str | None = None) -> str:
    """A gas-free message proving wallet ownership, bound to app, return URL, spender and
    authorization (spec 4.6). Signed with ``personal_sign``; it can move no funds.

    ``links``: the game account an account handoff binds with this proof (its label, ""
    for none). The wallet shows the text, so a person asked to sign someone else's handoff
    link reads that it lets that game account spend their budget (docs/decisions.md)."""
    text = ("Confirm this wallet for a payment budget.\n"
            f"App: {app_slug}\nReturn: {return_url}\nSpender: {spender.lower()}\n"
            f"Authorization: {authorization_id}\nIssued: {issued_at}")
    if links is None:
        return text
    # The label is the app's; on one line, whatever it holds.
    label = "".join(ch if ch.isprintable() else " " for ch in links).strip()
    return (f"{text}\nLinks game account: {label or '(no name given)'}\n"
            f"This game account in {app_slug} may then spend this budget.")


def recover_owner_proof(text: str, signature: Any) -> str:
    if not isinstance(signature, str) or not SIGNATURE_RE.match(signature):
        raise ApiError("invalid_owner_proof", 422, "'ownerProof.signature' must be a 65-byte "
                       "hex signature.")
    try:
        signer: str = Account.recover_message(encode_defunct(text=text), signature=signature)
    except Exception:
        raise ApiError("invalid_owner_proof", 422, "The owner proof signature is not "
                       "valid.") from None
    return signer.lower()
