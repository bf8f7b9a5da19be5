"""Identifiers with the exact prefixes of the spec."""

from __future__ import annotations

import re
import secrets
from enum import StrEnum


class IdPrefix(StrEnum):
    APP = "zapp_"
    PRODUCT = "zprod_"
    ORDER = "zord_"
    DELIVERY = "ztdlv_"
    EVENT = "zevt_"
    WEBHOOK = "zwh_"
    WEBHOOK_SECRET = "zwhsec_"  # noqa: S105  (a prefix, not a secret)
    API_KEY = "zpk_"
    CONFIG_REVISION = "zcfgrev_"
    # Ours, where the spec names no prefix.
    ORGANIZATION = "zorg_"
    DEVELOPER = "zdev_"
    API_KEY_RECORD = "zkey_"
    CLI_GRANT = "zgrant_"
    CLI_GRANT_TOKEN = "zcli_"  # noqa: S105  (a prefix, not a secret)
    CLI_AUTH_REQUEST = "zcliauth_"
    SESSION = "zses_"
    NOTIFICATION = "znote_"
    AUTHORIZATION = "zauth_"
    CONNECTION = "zconn_"
    HANDOFF = "zhand_"
    BATCH = "zbatch_"
    WEBHOOK_ATTEMPT = "zwha_"


_CHARGE_ID = re.compile(r"0x[0-9a-f]{64}")


def new_id(prefix: IdPrefix) -> str:
    """A prefixed id with 120 random bits, lower-case hex (safe in URLs and logs)."""
    return prefix.value + secrets.token_hex(15)


def charge_id(seq: int) -> str:
    """The public charge id of ledger sequence number ``seq``: ``bytes32(uint256(seq))`` in hex.

    BudgetSpenderV2 keeps one settled bit per sequence number (256 per storage slot),
    so ids from one increasing sequence are what makes batches cheap on chain.
    """
    if not 0 < seq < 2**256:
        raise ValueError("charge sequence numbers are positive 256-bit integers")
    return "0x" + format(seq, "064x")


def charge_seq(charge: str) -> int | None:
    """The sequence number of a public charge id, or None if it is not one.

    Only the exact form :func:`charge_id` gives out: ``int(x, 16)`` alone also reads "_"
    separators, spaces, "+" and upper case, so one charge would answer to many ids.
    """
    if _CHARGE_ID.fullmatch(charge) is None:
        return None
    seq = int(charge[2:], 16)
    return seq if seq > 0 else None
