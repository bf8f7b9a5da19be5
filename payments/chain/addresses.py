"""The one check an owner transaction makes of the account it names (a relayer, a new
owner, an allowlisted recipient): a 0x address, and not the zero address, which the
contract would refuse only after a round trip to the node (``ZeroAddress``)."""

from __future__ import annotations

import re

from eth_utils.address import to_checksum_address

_ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]{40}\Z")


def is_hex_address(text: str) -> bool:
    """``0x`` and 40 hex digits, either case; web3 alone also takes a bare hex string."""
    return _ADDRESS_RE.match(text) is not None


def account_address(address: str) -> str:
    """``address`` checksummed; ValueError if it is not a 0x address or is the zero one."""
    if not is_hex_address(address) or int(address, 16) == 0:
        raise ValueError("not a 0x address, or the zero address")
    return str(to_checksum_address(address))
