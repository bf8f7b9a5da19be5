"""Settlement gas of BudgetSpenderV2 on the in-process chain (eth-tester + py-evm, prague).

    .venv/bin/python bench/gas_bench.py [--dry-run]

Measures gas per charge for one `charge` and for `chargeBatch` of 10, 50 and 100 charges paid
by (a) one owner to one recipient and (b) 10 owners to 5 recipients, plus wall-clock
settlement throughput. Prints a markdown table and, unless --dry-run, writes it as the
"Settlement gas" section of docs/BENCHMARKS.md (replacing an earlier run of this section).

Figures are steady state: recipients already hold tokens, allowances are set, and charge ids
continue one sequence across batches, so a fresh settled-bitmap slot (256 ids) is paid for
as it comes. Each case runs ROUNDS batches; gas is their mean.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from report import write_section  # bench/ is on sys.path when run as a script
from web3 import EthereumTesterProvider, Web3
from web3.contract import Contract

from payments.chain.contracts import charge_id, load_artifact
from payments.chain.deploy import deploy_local
from payments.chain.in_process import DEPLOYER_KEY

ROUNDS = 5
AMOUNT = 10_000  # 0.01 USDC
TARGET = 12_000  # gas per charge, 100 charges, 10 owners x 5 recipients
HEADING = "## Settlement gas (bench/gas_bench.py)"
REPORT = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


@dataclass(frozen=True)
class Case:
    label: str
    charges: int
    owners: int
    recipients: int


@dataclass(frozen=True)
class Result:
    case: Case
    pairs: int
    gas: float
    seconds: float

    @property
    def per_charge(self) -> float:
        return self.gas / self.case.charges

    @property
    def throughput(self) -> float:
        return self.case.charges * ROUNDS / self.seconds


CASES = [
    Case("single `charge`", 1, 1, 1),
    *(Case("batch, 1 owner x 1 recipient", n, 1, 1) for n in (10, 50, 100)),
    *(Case("batch, 10 owners x 5 recipients", n, 10, 5) for n in (10, 50, 100)),
]


class Bench:
    def __init__(self) -> None:
        self.w3 = Web3(EthereumTesterProvider())
        self.admin, self.relayer = list(self.w3.eth.accounts)[:2]
        assert Account.from_key(DEPLOYER_KEY).address == self.admin  # eth-tester account 0
        # As dev, the topology and `svc-ops contract deploy` deploy: the check once mined,
        # and the relayer made by the owner's setRelayer.
        deployed = deploy_local(self.w3, "0x" + DEPLOYER_KEY.hex(), [self.relayer])
        self.usdc = self._contract("TestUSDC", deployed.token.address)
        self.spender = self._contract("BudgetSpenderV2", deployed.spender.address)
        self.owners = [Account.from_key(keccak(text=f"bench-user-{i}")) for i in range(10)]
        apps = [Account.from_key(keccak(text=f"bench-app-{i}")) for i in range(5)]
        self.recipients = [app.address for app in apps]
        self.sequence = count(1)
        for owner in self.owners:
            self._send(self.usdc.functions.mint(owner.address, 10**12), self.admin)
            self._relay_permit(owner, 10**12)
        for recipient in self.recipients:
            self._send(self.spender.functions.setAllowedRecipient(recipient, True), self.admin)
            self._send(self.usdc.functions.mint(recipient, 1), self.admin)  # steady state

    def run(self, case: Case) -> Result:
        gas, pairs, started = 0, 0, time.perf_counter()
        for _ in range(ROUNDS):
            batch = self._pairs(case)
            pairs = len(batch)
            if case.charges == 1:
                ((owner, recipient, [(cid, amount)]),) = batch
                fn = self.spender.functions.charge(cid, owner, recipient, amount)
            else:
                fn = self.spender.functions.chargeBatch(batch)
            gas += self._send(fn, self.relayer)
        return Result(case, pairs, gas / ROUNDS, time.perf_counter() - started)

    def _pairs(self, case: Case) -> list[tuple[str, str, list[tuple[bytes, int]]]]:
        """Charge k goes to pair k mod (owners x recipients), pairs in first-seen order."""
        grouped: dict[tuple[str, str], list[tuple[bytes, int]]] = {}
        width = case.owners * case.recipients
        for k in range(case.charges):
            pair = k % width
            owner = self.owners[pair % case.owners].address
            recipient = self.recipients[pair // case.owners]
            grouped.setdefault((owner, recipient), []).append(
                (charge_id(next(self.sequence)), AMOUNT)
            )
        return [(owner, recipient, charges) for (owner, recipient), charges in grouped.items()]

    def _contract(self, name: str, address: str) -> Contract:
        return self.w3.eth.contract(address=to_checksum_address(address),
                                    abi=load_artifact(name).abi)

    def _send(self, fn: Any, sender: str) -> int:
        # An explicit gas limit: py-evm's estimation would re-run every transaction.
        tx_hash = fn.transact({"from": sender, "gas": 10_000_000})
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash)
        if receipt["status"] != 1:
            raise RuntimeError(f"transaction failed: {fn.fn_name}")
        gas: int = receipt["gasUsed"]
        return gas

    def _relay_permit(self, owner: Any, value: int) -> None:
        deadline = int(time.time()) + 3600
        signed = Account.sign_typed_data(
            owner.key,
            domain_data={
                "name": "Test USDC",
                "version": "1",
                "chainId": self.w3.eth.chain_id,
                "verifyingContract": self.usdc.address,
            },
            message_types={
                "Permit": [
                    {"name": "owner", "type": "address"},
                    {"name": "spender", "type": "address"},
                    {"name": "value", "type": "uint256"},
                    {"name": "nonce", "type": "uint256"},
                    {"name": "deadline", "type": "uint256"},
                ]
            },
            message_data={
                "owner": owner.address,
                "spender": self.spender.address,
                "value": value,
                "nonce": self.usdc.functions.nonces(owner.address).call(),
                "deadline": deadline,
            },
        )
        r, s = signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big")
        fn = self.spender.functions.relayPermit(owner.address, value, deadline, signed.v, r, s)
        self._send(fn, self.relayer)


def render(results: list[Result]) -> str:
    compiler = load_artifact("BudgetSpenderV2").compiler
    lines = [
        HEADING,
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on `{platform.machine()}`, "
        f"Python {platform.python_version()}, solc {str(compiler['solc']).split('+')[0]} "
        f"(optimizer {compiler['optimizer']['runs']} runs, viaIR {compiler.get('viaIR', False)}, "
        f"evm {compiler['evmVersion']}), "
        "eth-tester + py-evm in process. Steady state (recipients hold tokens, allowances set), "
        f"mean of {ROUNDS} transactions per row; total gas includes the 21,000 base and calldata.",
        "",
        "| Case | Charges | Pairs | Total gas | Gas/charge | Charges/s (wall clock) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.case.label} | {r.case.charges} | {r.pairs} | {r.gas:,.0f} "
            f"| {r.per_charge:,.0f} | {r.throughput:,.0f} |"
        )
    goal = f"Target: at most {TARGET:,} gas/charge at 100 charges, 10 owners x 5 recipients."
    lines += ["", goal]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print only")
    options = parser.parse_args()
    bench = Bench()
    results = [bench.run(case) for case in CASES]
    section = render(results)
    print(section)
    if not options.dry_run:
        write_section(HEADING, section)
    target = results[-1]
    ok = target.per_charge <= TARGET
    print(f"target {'met' if ok else 'MISSED'}: {target.per_charge:,.0f} gas/charge")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
