"""The spender's recipient allowlist on chain: the owner's ``setAllowedRecipient``
transaction (spec 1 item 5), the one way any of our code changes the list: ``svc-ops
allowlist add|remove``, the local topology and the dev chain (at start, and mirroring the
ledger each cycle) all call :func:`set_allowed_recipient`.

A module of its own, beside ``relayers.py`` (the owner's ``setRelayer``): the ledger's side
of the allowlist (``allowlist.py``) names the dev chain, and the dev chain
(``in_process.py``) allowlists through this function, so neither can hold it without
importing the other.
"""

from __future__ import annotations

from payments.chain.addresses import account_address
from payments.chain.gateway import Receipt
from payments.chain.reader import ChainReader


def set_allowed_recipient(chain: ChainReader, owner_key: str, address: str,
                          allowed: bool) -> Receipt:
    """An owner transaction (operator only): add or remove ``address``. Anything but a 0x
    address, and the zero address, are refused (ValueError) before a transaction is
    signed."""
    fn = chain.spender.functions.setAllowedRecipient(account_address(address), allowed)
    return chain.transact_as(owner_key, fn)
