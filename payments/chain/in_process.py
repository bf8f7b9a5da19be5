"""The embedded chain: eth-tester + py-evm in this process, our contracts deployed at start.

A real EVM with the committed artifacts, for dev and tests. eth-tester's first account
deploys TestUSDC (nonce 0) then BudgetSpenderV2 (nonce 1) through
:func:`payments.chain.deploy.deploy_local`, as the local topology and ``svc-ops contract
deploy`` do, so the addresses match :func:`payments.chain.params.in_process_params`; its
second account is the relayer. Relayers and allowlisted recipients are set by the owner
transactions of ``svc-ops relayer add`` and ``svc-ops allowlist add``. The keys are
eth-tester's published test keys, worthless anywhere else.

:meth:`InProcessChain.start` makes a new chain; :meth:`InProcessChain.resume` takes up one
that ``svc-server dev`` kept between runs (payments/chain/dev_state.py), deploying nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from eth_account import Account
from eth_utils.address import to_checksum_address
from web3 import EthereumTesterProvider, Web3

from payments.chain.allowed_recipients import set_allowed_recipient
from payments.chain.deploy import deploy_local
from payments.chain.gateway import ChainError, Receipt
from payments.chain.params import IN_PROCESS_DEPLOYER, in_process_params
from payments.chain.relayers import set_relayer
from payments.chain.web3_chain import Web3Chain

if TYPE_CHECKING:
    from eth_tester import EthereumTester, PyEVMBackend  # type: ignore[import-untyped]

DEPLOYER_KEY = (1).to_bytes(32, "big")  # eth-tester account 0, the contracts' owner
RELAYER_KEY = (2).to_bytes(32, "big")  # eth-tester account 1
_OWNER = "0x" + DEPLOYER_KEY.hex()


def _web3(tester: EthereumTester) -> Web3:
    w3 = Web3(EthereumTesterProvider(tester))
    # eth-tester's middleware puts this account in a call without "from", asking
    # eth_accounts three times to find it; named here, every contract read (the checks
    # after each deploy, /statusz, the portal's) costs 40% less.
    w3.eth.default_account = to_checksum_address(IN_PROCESS_DEPLOYER)
    return w3


class InProcessChain(Web3Chain):
    """Use :meth:`start`; ``allowed_recipients`` are allowlisted right away (dev apps)."""

    def __init__(self, w3: Web3, tester: EthereumTester, relayer_key: bytes = RELAYER_KEY,
                 lock: threading.RLock | None = None) -> None:
        super().__init__(w3, in_process_params(), relayer_key, confirmations=1,
                         poll_interval=0.01)
        from eth_tester.exceptions import TransactionFailed  # type: ignore[import-untyped]

        self.reverts = (*self.reverts, TransactionFailed)
        self._tester = tester
        if lock is not None:
            self._lock = lock  # one EVM, one lock: eth-tester is not thread-safe

    @classmethod
    def start(cls, allowed_recipients: Iterable[str] = (),
              backend: PyEVMBackend | None = None) -> InProcessChain:
        """A new chain (on ``backend``'s genesis, else eth-tester's own) with our contracts
        deployed."""
        # eth-tester and py-evm here, not at the top: they cost a server that runs on a node
        # half a second of start (its processes import this module for isinstance checks).
        from eth_tester import EthereumTester, PyEVMBackend

        tester = EthereumTester(PyEVMBackend() if backend is None else backend)
        w3 = _web3(tester)
        assert Account.from_key(DEPLOYER_KEY).address == IN_PROCESS_DEPLOYER
        deployed = deploy_local(w3, _OWNER, [Account.from_key(RELAYER_KEY).address])
        chain = cls(w3, tester)
        if deployed.params(chain.params.network) != chain.params:
            raise ChainError("the in-process contracts did not land on their known addresses")
        for recipient in allowed_recipients:
            chain.set_allowed_recipient(recipient, True)
        return chain

    @classmethod
    def resume(cls, backend: PyEVMBackend) -> InProcessChain:
        """The chain ``backend`` already holds (``svc-server dev``'s kept chain,
        payments/chain/dev_state.py): nothing deployed, the contracts checked to be there."""
        from eth_tester import EthereumTester

        tester = EthereumTester(backend)
        chain = cls(_web3(tester), tester)
        for name, address in (("TestUSDC", chain.params.token),
                              ("BudgetSpenderV2", chain.params.spender)):
            if not chain.code_size(address):
                raise ChainError(f"the chain has no {name} at {address}")
        return chain

    def with_relayer(self, key: bytes) -> InProcessChain:
        """The same chain seen by another relayer key (registered, with gas money)."""
        other = InProcessChain(self._w3, self._tester, key, self._lock)
        self.fund_gas(other.relayer)
        self.set_relayer(other.relayer, True)
        return other

    def set_allowed_recipient(self, recipient: str, allowed: bool) -> Receipt:
        return set_allowed_recipient(self, _OWNER, recipient, allowed)

    def set_relayer(self, relayer: str, allowed: bool) -> Receipt:
        return set_relayer(self, _OWNER, relayer, allowed)

    def faucet(self, address: str, amount: int) -> Receipt:
        """Dev only: mint test USDC to ``address`` (the token owner is the deployer)."""
        return self.transact_as(DEPLOYER_KEY,
                                self.token.functions.mint(to_checksum_address(address), amount))

    def top_up(self, address: str, amount: int) -> None:
        """Dev faucet: mint what ``address`` lacks to hold ``amount`` test USDC."""
        held = int(self._read(self.token.functions.balanceOf(to_checksum_address(address)).call))
        if held < amount:
            self.faucet(address, amount - held)

    def fund_gas(self, address: str, wei: int = 10**18) -> None:
        """Give another relayer key gas money (dev and tests run several workers)."""
        with self._lock:
            self._tester.send_transaction({
                "from": IN_PROCESS_DEPLOYER, "to": to_checksum_address(address),
                "value": wei, "gas": 21_000})

    def set_automine(self, on: bool) -> None:
        """Off: sent transactions wait unmined (a node's pool) until it is turned on again."""
        with self._lock:
            if on:
                self._tester.enable_auto_mine_transactions()
            else:
                self._tester.disable_auto_mine_transactions()

    def mine(self, blocks: int = 1) -> None:
        with self._lock:
            self._tester.mine_blocks(blocks)

    @property
    def w3(self) -> Web3:
        return self._w3
