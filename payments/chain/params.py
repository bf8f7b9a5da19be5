"""Which chain, token and spender the ledger signs against.

The in-process chain (dev, tests) deploys TestUSDC then BudgetSpenderV2 from eth-tester's
first account, so their addresses are known before the chain starts: CREATE addresses
depend only on the deployer and its nonce.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

IN_PROCESS_CHAIN_ID = 131277322940537  # eth-tester's chain id
IN_PROCESS_DEPLOYER = "0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf"  # eth-tester account 0
# TestUSDC's EIP-712 domain (contracts/TestUSDC.sol): what permits on the dev chain and the
# local topology are signed under.
TEST_USDC_NAME = "Test USDC"
TEST_USDC_VERSION = "1"
BASE_SEPOLIA_CHAIN_ID = 84532
# The label events, deliveries and receipts carry in ``network`` (spec 2.1), by chain id.
NETWORKS = {BASE_SEPOLIA_CHAIN_ID: "base-sepolia", 8453: "base"}


@dataclass(frozen=True)
class ChainParams:
    chain_id: int
    token: str  # checksummed
    token_name: str  # the EIP-712 domain name of the token's permit
    token_version: str
    spender: str  # BudgetSpenderV2, checksummed
    network: str
    simulated: bool

    @property
    def spender_lower(self) -> str:
        return self.spender.lower()


def network_name(chain_id: int) -> str:
    """The ``network`` of a node reached over JSON-RPC: ``base-sepolia`` for Base Sepolia, the
    spec's active network; any other chain (a local node, a fork) by its CAIP-2 id,
    ``eip155:<chain id>``, never as Base Sepolia. (The in-process chain stands in for Base
    Sepolia and says so with ``simulated``.)"""
    return NETWORKS.get(chain_id, f"eip155:{chain_id}")


def create_address(deployer: str, nonce: int) -> str:
    """The CREATE address: keccak(rlp([deployer, nonce]))[12:], for nonces below 128."""
    if not 0 <= nonce < 128:
        raise ValueError("only small nonces are encoded here")
    encoded_nonce = b"\x80" if nonce == 0 else bytes([nonce])
    payload = b"\x94" + bytes.fromhex(deployer[2:]) + encoded_nonce
    return str(to_checksum_address(keccak(bytes([0xC0 + len(payload)]) + payload)[-20:]))


def in_process_params() -> ChainParams:
    return ChainParams(
        chain_id=IN_PROCESS_CHAIN_ID, token=create_address(IN_PROCESS_DEPLOYER, 0),
        token_name=TEST_USDC_NAME, token_version=TEST_USDC_VERSION,
        spender=create_address(IN_PROCESS_DEPLOYER, 1), network="base-sepolia",
        simulated=True,
    )
