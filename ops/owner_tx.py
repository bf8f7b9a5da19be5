"""What every owner transaction from the operator's keyboard shares (``svc-ops allowlist
add|remove``, ``svc-ops relayer add|remove``, ``svc-ops contract deploy|transfer-ownership``,
and ``accept-ownership``, signed by the new owner's key).

The owner key is read from ``--owner-key-file`` or typed at a prompt: never taken from the
command line (which ``ps`` shows), never printed, and masked in any log line
(ops/logs.py). Addresses and the key are checked before anything is read from the node,
and the key before anything is signed: it must be the spender's owner. The setting
``SVCSRV_CHAIN_MAX_FEE_PER_GAS`` guards what the workers spend unattended; an operator at
the keyboard may give one transaction its own cap (``--max-fee-per-gas``).

web3 and eth-account are imported inside the functions: they take seconds to import, and
only the commands that talk to the chain should pay for them.
"""

from __future__ import annotations

import argparse
import getpass
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ops import logs
from router.settings import Settings
from router.settings_checks import private_key_problem

if TYPE_CHECKING:
    from payments.chain.reader import ChainReader

log = logging.getLogger(__name__)


class OpsError(Exception):
    """A refusal the operator can act on; printed without a traceback (exit 2)."""


def owner_options(whose: str = "owner") -> argparse.ArgumentParser:
    """``--owner-key-file`` and ``--max-fee-per-gas`` for every owner transaction;
    ``whose`` key it is (``accept-ownership`` takes the new owner's)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--owner-key-file", type=Path,
                        help=f"file holding the {whose} key (otherwise you are prompted)")
    parent.add_argument("--max-fee-per-gas", type=fee_cap, metavar="WEI|none",
                        help="this transaction's own fee cap, in place of "
                             "SVCSRV_CHAIN_MAX_FEE_PER_GAS (none: no cap)")
    return parent


def fee_cap(text: str) -> int:
    """``--max-fee-per-gas``: wei, or ``none`` (0 here: no cap)."""
    if text.strip().lower() == "none":
        return 0
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of wei or none") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a fee cap is at least 1 wei (none: no cap)")
    return value


def with_fee_cap(settings: Settings, cap: int | None) -> Settings:
    """The settings with the operator's own cap for this transaction, when one was given."""
    if cap is None:
        return settings
    return replace(settings, chain_max_fee_per_gas=cap or None)


def checked_address(text: str, what: str) -> str:
    """``text`` as a checksummed address, or a refusal naming ``what`` it was meant to be.
    The zero address is refused here rather than by the contract (``ZeroAddress``, after a
    round trip to the node)."""
    from eth_utils.address import to_checksum_address

    from payments.chain.addresses import is_hex_address

    given = text.strip()
    if not is_hex_address(given):
        raise OpsError(f"{text!r} is not a 0x address (0x and 40 hex digits); give the "
                       f"{what}'s address")
    if int(given, 16) == 0:
        raise OpsError(f"the zero address cannot be a {what}")
    return str(to_checksum_address(given))


def owner_key(path: Path | None, whose: str = "owner") -> str:
    key = path.read_text(encoding="utf-8").strip() if path else getpass.getpass(f"{whose} key: ")
    if not key:
        raise OpsError(f"no {whose} key given")
    if (problem := private_key_problem(key)) is not None:
        where = f"in {path}" if path else "typed"
        raise OpsError(f"the {whose} key {where} {problem}")
    logs.withhold(key)
    return key


def require_owner(chain: ChainReader, key: str) -> str:
    """The key's address, once it is the spender's owner: the contract would refuse any
    other (``OwnableUnauthorizedAccount``), and here nothing is signed or sent first."""
    from eth_account import Account

    signer = str(Account.from_key(key).address)
    owner = chain.owner()
    if signer.lower() != owner.lower():
        raise OpsError(f"the owner key given is {signer}'s, and the spender's owner is "
                       f"{owner}: only the owner's key can send this; nothing was sent")
    return signer


@contextmanager
def within_fee_cap() -> Iterator[None]:
    """A base fee above the cap refuses, saying how to send this one transaction anyway:
    the relayer's cap guards automatic spending, and an operator at the keyboard may decide
    otherwise (removing a recipient or a relayer can be urgent)."""
    from payments.chain.gateway import FeeAboveCap

    try:
        yield
    except FeeAboveCap as exc:
        raise OpsError(f"{exc}; nothing was sent. To send it anyway, give this transaction "
                       "its own cap: --max-fee-per-gas WEI (or none)") from None
