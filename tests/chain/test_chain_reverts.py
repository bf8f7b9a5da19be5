"""decode_revert maps the exceptions web3 and eth-tester raise to our error names."""

from __future__ import annotations

import pytest
from eth_abi import abi
from eth_tester.exceptions import TransactionFailed  # type: ignore[import-untyped]  # no py.typed
from eth_utils.crypto import keccak
from web3.exceptions import ContractCustomError, ContractLogicError, ContractPanicError

from payments.chain.contracts import charge_id, decode_revert, decode_revert_data, revert_info

SETTLED = keccak(text="ChargeAlreadySettled(bytes32)")[:4] + charge_id(7)
ALLOWANCE = keccak(text="ERC20InsufficientAllowance(address,uint256,uint256)")[:4] + abi.encode(
    ["address", "uint256", "uint256"], ["0x" + "11" * 20, 0, 30_000]
)
PAIR = keccak(text="PairTransferFailed(uint256,address,address,uint256,bytes)")[:4] + abi.encode(
    ["uint256", "address", "address", "uint256", "bytes"],
    [3, "0x" + "22" * 20, "0x" + "33" * 20, 30_000, ALLOWANCE],
)
PANIC = keccak(text="Panic(uint256)")[:4] + abi.encode(["uint256"], [0x11])


@pytest.mark.parametrize(
    "exc",
    [
        ContractCustomError("0x" + SETTLED.hex(), data="0x" + SETTLED.hex()),
        TransactionFailed(f"execution reverted: {SETTLED!r}"),
        TransactionFailed(SETTLED),
        TransactionFailed(TransactionFailed(SETTLED)),
    ],
)
def test_custom_error_from_any_exception_shape(exc: Exception) -> None:
    assert decode_revert(exc) == "ChargeAlreadySettled"
    assert revert_info(exc).args == {"chargeId": charge_id(7)}


def test_pair_failure_carries_the_token_error() -> None:
    info = decode_revert_data(PAIR)
    assert info.name == "PairTransferFailed"
    assert info.args["pairIndex"] == 3
    assert info.args["owner"] == "0x" + "22" * 20
    assert info.inner is not None
    assert info.inner.name == "ERC20InsufficientAllowance"
    assert info.inner.args["needed"] == 30_000


def test_builtin_and_unknown_reverts() -> None:
    assert decode_revert(ContractPanicError("overflow", data="0x" + PANIC.hex())) == "Panic"
    assert revert_info(ContractPanicError("x", data="0x" + PANIC.hex())).args == {"code": 0x11}
    message = revert_info(TransactionFailed("execution reverted: not today"))
    assert (message.name, message.args) == ("Error", {"message": "not today"})
    assert decode_revert(ContractLogicError("execution reverted", data="0x")) == "Reverted"
    assert decode_revert(TransactionFailed("execution reverted")) == "Reverted"
    assert decode_revert(RuntimeError()) == "Reverted"
    unknown = revert_info(TransactionFailed(b"\xde\xad\xbe\xef"))
    assert (unknown.name, unknown.args) == ("UnknownError", {"data": "0xdeadbeef"})
    assert decode_revert_data(SETTLED[:10]).name == "UnknownError"  # truncated arguments


def test_charge_id_is_the_big_endian_sequence() -> None:
    assert charge_id(0) == bytes(32)
    assert charge_id(257) == bytes(30) + b"\x01\x01"
    with pytest.raises(ValueError, match="out of range"):
        charge_id(-1)
    with pytest.raises(ValueError, match="out of range"):
        charge_id(2**256)
