"""Signature work with libsecp256k1 (coincurve) against eth-keys' pure-Python curve.

    .venv/bin/python bench/signature_bench.py [--rounds 5] [--count 300] [--dry-run]

What the service does with signatures: ``verify_permit`` (payments/ledger/permits.py)
recovers the signer of each permit a user signs, owner and wallet proofs recover a
``personal_sign`` message, and the relayer signs each transaction it sends. eth-keys uses
coincurve when it is installed (a dependency since 2026-11-27) and its own Python curve
otherwise; ``ECC_BACKEND_CLASS`` chooses. Each round runs both, alternating which goes
first, each in a process of its own (the backend is chosen at import). Writes the
"Signatures" section of docs/BENCHMARKS.md unless ``--dry-run``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from report import write_section  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = {"coincurve": "eth_keys.backends.CoinCurveECCBackend",
            "pure Python": "eth_keys.backends.NativeECCBackend"}
HEADING = "## Signatures (bench/signature_bench.py)"


def measure(count: int) -> dict[str, float]:
    """Milliseconds per operation, in this process's backend."""
    sys.path.insert(0, str(ROOT))
    import eth_keys
    from eth_account import Account
    from eth_account.messages import encode_defunct
    from eth_utils import to_checksum_address

    from payments.chain.params import ChainParams
    from payments.ledger.permits import Permit, permit_typed_data, verify_permit

    params = ChainParams(chain_id=84532, token=to_checksum_address("0x" + "11" * 20),
                         token_name="USDC", token_version="2",  # noqa: S106  (not secrets)
                         spender=to_checksum_address("0x" + "22" * 20),
                         network="base-sepolia", simulated=False)
    user = Account.from_key("0x" + "33" * 32)
    typed = permit_typed_data(params, user.address.lower(), 1_000_000, 0, 2_000_000_000)
    signed = Account.sign_typed_data(user.key, full_message=typed).signature.hex()
    permit = Permit(user.address.lower(), 1_000_000, 0, 2_000_000_000,
                    "0x" + signed.removeprefix("0x"))
    proof = encode_defunct(text="Confirm this wallet for a payment budget.")
    proof_signature = user.sign_message(proof).signature
    tx = {"to": "0x" + "44" * 20, "value": 0, "gas": 100_000, "maxFeePerGas": 10**9,
          "maxPriorityFeePerGas": 10**8, "nonce": 0, "chainId": 84532, "data": b"\x01" * 68}
    work = {
        "verify a permit (verify_permit)": lambda: verify_permit(params, permit),
        "recover an owner proof": lambda: Account.recover_message(
            proof, signature=proof_signature),
        "sign a transaction (relayer)": lambda: Account.sign_transaction(tx, user.key),
    }
    out = {"backend": type(eth_keys.KeyAPI().backend).__name__}
    for name, one in work.items():
        one()
        began = time.perf_counter()
        for _ in range(count):
            one()
        out[name] = (time.perf_counter() - began) / count * 1e3
    return out


def run_one(backend: str, count: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--measure", str(count)],
                          env={**os.environ, "ECC_BACKEND_CLASS": BACKENDS[backend]},
                          capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    expected = BACKENDS[backend].rsplit(".", 1)[1]
    if result.pop("backend") != expected:  # type: ignore[comparison-overlap]
        raise SystemExit(f"{backend}: eth-keys did not use {expected} (is coincurve installed?)")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=300, help="operations per measurement")
    parser.add_argument("--dry-run", action="store_true", help="print only")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        print(json.dumps(measure(options.measure)))
        return
    load = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in BACKENDS}
    for i in range(options.rounds):
        order = list(BACKENDS) if i % 2 == 0 else list(BACKENDS)[::-1]
        for backend in order:
            runs[backend].append(run_one(backend, options.count))
        print(f"round {i + 1}: " + ", ".join(
            f"{b} {runs[b][-1]['verify a permit (verify_permit)']:.3f} ms" for b in BACKENDS),
            flush=True)
    rows = []
    for op in runs["coincurve"][0]:
        fast = [r[op] for r in runs["coincurve"]]
        slow = [r[op] for r in runs["pure Python"]]
        ratio = statistics.median(f / s for f, s in zip(fast, slow, strict=True))
        rows.append(f"| {op} | {statistics.median(fast):.3f} ms | "
                    f"{statistics.median(slow):.2f} ms | **{ratio:.3f}x** |")
    section = "\n".join([
        HEADING, "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on `{platform.machine()}`, nproc "
        f"{os.cpu_count()}, Python {platform.python_version()}. Load average at start: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (a shared machine).", "",
        "The signature work of the service, with eth-keys on libsecp256k1 (coincurve, a "
        "dependency) against its own pure-Python curve, which it falls back to without "
        f"coincurve: {options.rounds} rounds, each running both in processes of their own, "
        f"alternating which goes first; {options.count} operations per measurement; medians, "
        "and the median of each round's ratio.", "",
        "| Operation | coincurve | pure Python | Ratio |", "|---|---:|---:|---:|", *rows, "",
    ])
    print(section)
    if not options.dry_run:
        write_section(HEADING, section)


if __name__ == "__main__":
    main()
