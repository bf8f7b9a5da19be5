"""The compiled contracts (committed artifacts) and the decoding of their reverts.

The artifacts are built from ``contracts/*.sol`` by ``contracts/build.mjs``; ``source_hash``
recomputes the hash stored in them so a test can tell a stale artifact without node.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from eth_abi import abi
from eth_abi.exceptions import DecodingError
from eth_typing import ABI, ABIError
from eth_utils.abi import (
    abi_to_signature,
    function_signature_to_4byte_selector,
    get_abi_input_names,
    get_abi_input_types,
)
from eth_utils.address import to_checksum_address

ARTIFACTS_DIR = Path(__file__).resolve().parent / "artifacts"
CONTRACTS_DIR = Path(__file__).resolve().parents[2] / "contracts"
CONTRACT_NAMES = ("BudgetSpenderV2", "TestUSDC")


@dataclass(frozen=True)
class Artifact:
    contract_name: str
    abi: ABI
    bytecode: str
    deployed_bytecode: str
    source_hash: str
    compiler: Mapping[str, Any]


def load_artifact(name: str, directory: Path = ARTIFACTS_DIR) -> Artifact:
    raw = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    return Artifact(
        contract_name=raw["contractName"],
        abi=raw["abi"],
        bytecode=raw["bytecode"],
        deployed_bytecode=raw["deployedBytecode"],
        source_hash=raw["sourceHash"],
        compiler=raw["compiler"],
    )


def source_hash(contracts_dir: Path = CONTRACTS_DIR) -> str | None:
    """sha256 over each ``*.sol`` in name order: name, NUL, bytes (as build.mjs computes it).

    None when the sources are not there (an installed wheel carries only the artifacts).
    """
    sources = sorted(contracts_dir.glob("*.sol")) if contracts_dir.is_dir() else []
    if not sources:
        return None
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def charge_id(sequence: int) -> bytes:
    """The on-chain id of the ledger's charge number ``sequence``: ``bytes32(uint256(seq))``.

    Consecutive numbers share BudgetSpenderV2's settled-bitmap slots (256 per slot), which is
    what keeps a batch cheap; any 32 bytes are still settled at most once.
    """
    if not 0 <= sequence < 2**256:
        raise ValueError(f"charge sequence out of range: {sequence}")
    return sequence.to_bytes(32, "big")


@dataclass(frozen=True)
class RevertInfo:
    """A decoded revert: the error's name and arguments; ``inner`` is the token's own error
    carried in the ``reason`` of ``PairTransferFailed``."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    inner: RevertInfo | None = None


_BUILTIN_ERRORS: tuple[tuple[str, str, str], ...] = (
    ("Error(string)", "Error", "message"),
    ("Panic(uint256)", "Panic", "code"),
)


@cache
def _known_errors() -> dict[bytes, tuple[str, list[str], list[str]]]:
    """selector -> (name, argument names, argument ABI types) for every error we can meet."""
    table = {
        function_signature_to_4byte_selector(sig): (name, [arg], [sig[len(name) + 1 : -1]])
        for sig, name, arg in _BUILTIN_ERRORS
    }
    for contract in CONTRACT_NAMES:
        for item in load_artifact(contract).abi:
            if item["type"] == "error":
                error: ABIError = item
                selector = function_signature_to_4byte_selector(abi_to_signature(error))
                names = [n or f"arg{i}" for i, n in enumerate(get_abi_input_names(error))]
                table[selector] = (error["name"], names, get_abi_input_types(error))
    return table


def decode_revert_data(data: bytes) -> RevertInfo:
    """Decodes raw revert data (selector + ABI-encoded arguments)."""
    if not data:
        return RevertInfo("Reverted")
    known = _known_errors().get(data[:4])
    if known is None:
        return RevertInfo("UnknownError", {"data": "0x" + data.hex()})
    name, names, types = known
    try:
        values = abi.decode(types, data[4:])
    except DecodingError:
        return RevertInfo("UnknownError", {"data": "0x" + data.hex()})
    args = {
        arg: to_checksum_address(value) if type_ == "address" else value
        for arg, type_, value in zip(names, types, values, strict=True)
    }
    reason = args.get("reason")
    inner = decode_revert_data(reason) if isinstance(reason, bytes) else None
    return RevertInfo(name, args, inner)


def revert_info(exc: BaseException) -> RevertInfo:
    """Decodes the revert carried by a web3 or eth-tester exception."""
    for data in _candidate_data(exc):
        if isinstance(data, bytes):
            return decode_revert_data(data)
        if data.startswith("0x") and re.fullmatch(r"0x(?:[0-9a-fA-F]{2})*", data):
            return decode_revert_data(bytes.fromhex(data[2:]))
        literal = re.fullmatch(r"(?:execution reverted: )?(b(['\"]).*\2)", data, re.DOTALL)
        if literal:
            # eth-tester renders raw revert data as the repr() of the bytes
            return decode_revert_data(ast.literal_eval(literal.group(1)))
        message = data.removeprefix("execution reverted").removeprefix(":").strip()
        if message:
            return RevertInfo("Error", {"message": message})
    return RevertInfo("Reverted")


def decode_revert(exc: BaseException) -> str:
    """The name of the error a reverted call raised, e.g. ``"ChargeAlreadySettled"``."""
    return revert_info(exc).name


def _candidate_data(exc: BaseException) -> Iterator[bytes | str]:
    # web3 puts the hex revert data on `.data` (some nodes, Hardhat among them, as the
    # JSON-RPC error's own `data` object: {"message": ..., "data": "0x..."}); eth-tester
    # passes bytes, a nested exception or a message string as its first argument.
    data = getattr(exc, "data", None)
    if isinstance(data, Mapping):
        data = data.get("data")
    if isinstance(data, bytes | str) and data:
        yield data
    for arg in exc.args[:1]:
        if isinstance(arg, BaseException):
            yield from _candidate_data(arg)
        elif isinstance(arg, bytes | str) and arg:
            yield arg
