"""Identifiers with the exact prefixes of the spec."""

from __future__ import annotations

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


def new_id(prefix: IdPrefix) -> str:
    """A prefixed id with 120 random bits, lower-case hex (safe in URLs and logs)."""
    return prefix.value + secrets.token_hex(15)


def new_charge_id() -> str:
    """A charge id: a 32-byte hex string, as the chain contract takes it."""
    return "0x" + secrets.token_hex(32)
