"""eth-keys signs and recovers on libsecp256k1 (coincurve, a dependency): without it, it
falls back to a pure-Python curve 20 to 50 times slower per permit verified or transaction
signed (docs/BENCHMARKS.md, "Signatures"), silently."""

from __future__ import annotations

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_keys.backends.native.main import NativeECCBackend
from eth_keys.main import KeyAPI


def test_eth_keys_runs_on_libsecp256k1() -> None:
    assert type(KeyAPI().backend).__name__ == "CoinCurveECCBackend"
    # and it signs as the pure-Python curve does (RFC 6979: deterministic)
    key = bytes.fromhex("33" * 32)
    message = encode_defunct(text="Confirm this wallet for a payment budget.")
    signed = Account.sign_message(message, key)
    native = KeyAPI(NativeECCBackend).PrivateKey(key).sign_msg_hash(signed.message_hash)
    assert (native.r, native.s, native.v + 27) == (signed.r, signed.s, signed.v)
