"""The dev wallet: an EIP-1193 account whose key the dev server holds, so a person can click
through every flow without a browser extension. Dev mode only (the portal mounts its
routes only when ``settings.dev``); the keys are derived test keys worth nothing.

It signs exactly what the portal asks a real wallet to sign, nothing else: the USDC
``Permit`` of our token and spender (spec 1.10), and ``personal_sign`` texts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

from payments.chain.params import ChainParams
from payments.errors import ApiError
from payments.ledger.permits import PERMIT_TYPES, check_address

DEV_FUNDS_ATOMIC = 100_000_000  # 100 test USDC from the in-process faucet


def dev_account(secret_key: str) -> LocalAccount:
    """The dev server's one dev account, keyed with the server secret.

    One key for the server rather than one per browser: a runtime's modal iframe and the
    portal's own pages are different sites, whose storage the browser partitions, so a
    per-browser id would give the modal and the account page two different wallets.
    """
    seed = hmac.new(secret_key.encode(), b"dev-wallet", hashlib.sha256).digest()
    account: LocalAccount = Account.from_key(seed)
    return account


def _hex(signature: bytes) -> str:
    return "0x" + signature.hex().removeprefix("0x")


def sign_request(account: LocalAccount, params: ChainParams, method: object,
                 args: object) -> str:
    """Sign an ``eth_signTypedData_v4`` Permit or a ``personal_sign`` text for ``account``."""
    if not isinstance(args, list) or len(args) != 2:
        raise ApiError("invalid_field", 422, "'params' must be the method's two parameters.",
                       field="params")
    if method == "personal_sign":
        message, address = args
        _require_self(account, address)
        if not isinstance(message, str):
            raise ApiError("invalid_field", 422, "personal_sign takes a text.", field="params")
        text = _decode_personal(message)
        return _hex(Account.sign_message(encode_defunct(text=text), account.key).signature)
    if method == "eth_signTypedData_v4":
        address, data = args
        _require_self(account, address)
        typed = _checked_permit(params, data)
        return _hex(Account.sign_typed_data(account.key, full_message=typed).signature)
    raise ApiError("invalid_field", 422, "The dev wallet signs eth_signTypedData_v4 permits "
                   "and personal_sign texts only.", field="method")


def _require_self(account: LocalAccount, address: object) -> None:
    if check_address(address, "params").lower() != account.address.lower():
        raise ApiError("invalid_field", 422, "That is not this dev wallet's address.",
                       field="params")


def _decode_personal(message: str) -> str:
    # Wallets receive personal_sign data hex-encoded (0x + UTF-8 bytes) or as plain text.
    if message.startswith("0x") and re.fullmatch(r"0x(?:[0-9a-fA-F]{2})*", message):
        try:
            return bytes.fromhex(message[2:]).decode()
        except UnicodeDecodeError:
            raise ApiError("invalid_field", 422, "personal_sign data is not UTF-8 text.",
                           field="params") from None
    return message


def _checked_permit(params: ChainParams, data: object) -> dict[str, Any]:
    """Refuse anything but our token's Permit to our spender (spec 1.10)."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise ApiError("invalid_field", 422, "Typed data must be a JSON object.",
                       field="params")
    types = data.get("types")
    domain = data.get("domain")
    message = data.get("message")
    ok = (isinstance(types, dict) and isinstance(domain, dict) and isinstance(message, dict)
          and data.get("primaryType") == "Permit"
          and types.get("Permit") == PERMIT_TYPES["Permit"]
          and set(types) == {"EIP712Domain", "Permit"}
          and str(domain.get("verifyingContract", "")).lower() == params.token.lower()
          and str(domain.get("chainId")) == str(params.chain_id)
          and str(message.get("spender", "")).lower() == params.spender.lower()
          and set(message) == {"owner", "spender", "value", "nonce", "deadline"})
    if not ok:
        raise ApiError("invalid_field", 422, "The dev wallet signs only USDC permits for "
                       "this service's spender.", field="params")
    return data
