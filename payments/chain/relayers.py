"""The spender's relayers, the keys that relay permits and settle charges: the owner's
``setRelayer`` transaction (operator only, ``svc-ops relayer add|remove``) and where an
address stands. The contract keeps a mapping and no list: who is a relayer is asked one
address at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_utils.address import to_checksum_address

from payments.chain.addresses import account_address
from payments.chain.gateway import Receipt
from payments.chain.reader import ChainReader

WEI_PER_ETH = 10**18


@dataclass(frozen=True)
class RelayerStanding:
    address: str  # checksummed
    relayer: bool
    balance_wei: int  # gas money

    @property
    def can_send(self) -> bool:
        """A relayer of the spender with gas money: what signing relays and batches needs."""
        return self.relayer and self.balance_wei > 0

    def line(self) -> str:
        """``address<TAB>relayer|not a relayer<TAB>gas <wei> wei (<eth> ETH)``."""
        role = "relayer" if self.relayer else "not a relayer"
        gas = f"gas {self.balance_wei} wei ({eth(self.balance_wei)} ETH)"
        if self.relayer and self.balance_wei == 0:
            gas += ": no gas money, it cannot send"
        return f"{self.address}\t{role}\t{gas}"


def eth(wei: int) -> str:
    """Wei as ETH, exactly (no float): ``1500000000000000000`` -> ``1.5``."""
    whole, fraction = divmod(wei, WEI_PER_ETH)
    digits = f"{fraction:018d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def standing(chain: ChainReader, address: str) -> RelayerStanding:
    return RelayerStanding(to_checksum_address(address), chain.is_relayer(address),
                           chain.gas_balance(address))


def set_relayer(chain: ChainReader, owner_key: str, address: str, allowed: bool) -> Receipt:
    """An owner transaction (operator only): make ``address`` a relayer, or no longer one."""
    fn = chain.spender.functions.setRelayer(account_address(address), allowed)
    return chain.transact_as(owner_key, fn)
