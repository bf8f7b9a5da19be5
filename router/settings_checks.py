"""What makes a setting's value acceptable, checked when settings are built.

Every refusal is a :class:`SettingsError` whose sentence names the ``SVCSRV_*`` variable, so
an operator knows what to change without a traceback. A value that may hold a secret (a
private key, a node URL with an API key in its path, a database or Redis URL with a
password) is never repeated in the sentence.

Two kinds of rule: those about a value itself (it parses: an address, a key, a URL), which
hold for every process, and what a *server* needs in production (https service URLs, mail,
a secret key of its own, what several processes share): :func:`check_server`, which
``svc-ops`` skips because its commands use none of it (docs/settings.md, "Who checks what").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from router.settings import Settings

ENV_PREFIX = "SVCSRV_"
DEV_SECRET_KEY = "dev-only-secret-key-change-me"  # noqa: S105  (refused in production)

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_PRIVATE_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}")
# The order of secp256k1: a private key is a number in [1, n - 1].
_SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
# The databases the ledger is written for (row locks, NOTIFY, the migrations).
_DATABASE_BACKENDS = ("sqlite", "postgresql", "postgres")


class SettingsError(ValueError):
    """A setting is missing, malformed or unsafe for the chosen mode."""


def variable(name: str) -> str:
    """The environment variable of field ``name``: ``base_url`` -> ``SVCSRV_BASE_URL``."""
    return ENV_PREFIX + name.upper()


def require_origin(name: str, value: str) -> None:
    """A service URL: http(s), a host, no path. Public values: quoted in the message."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{variable(name)} must be an http(s) URL, not {value!r}")
    if parts.path not in ("", "/"):
        raise SettingsError(f"{variable(name)} must be an origin without a path, not {value!r}")


def require_address(name: str, value: str | None) -> None:
    """An Ethereum address: 0x and 40 hex digits (any case; checksums are not required)."""
    if value is not None and not _ADDRESS.fullmatch(value):
        raise SettingsError(f"{variable(name)} must be an address: 0x and 40 hex digits, "
                            f"not {value!r}")


def require_private_key(name: str, value: str | None) -> None:
    """A secp256k1 private key: 32 bytes of hex, with or without 0x. Never quoted."""
    if value is not None and (problem := private_key_problem(value)) is not None:
        raise SettingsError(f"{variable(name)} {problem}")


def private_key_problem(value: str) -> str | None:
    """Why ``value`` is not a secp256k1 private key, never quoting it; None when it is one.
    Also for the owner key ``svc-ops`` reads from a file or a prompt."""
    if not _PRIVATE_KEY.fullmatch(value):
        digits = value.removeprefix("0x")
        what = (f"{len(digits)} characters after any 0x" if len(digits) != 64
                else "characters other than hex digits")
        return ("must be a private key: 64 hex digits (32 bytes), with or without 0x; the "
                f"value given (not shown) has {what}")
    if not 0 < int(value.removeprefix("0x"), 16) < _SECP256K1_N:
        return ("is not a valid secp256k1 private key (zero, or not below the curve order; "
                "not shown)")
    return None


def require_database_url(name: str, value: str) -> None:
    """A SQLAlchemy URL of a backend we run on. Never quoted: it may hold a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        backend = make_url(value).get_backend_name()
    except (ArgumentError, ValueError):
        raise SettingsError(f"{variable(name)} is not a database URL (SQLAlchemy's form: "
                            "postgresql://user:password@host/name or sqlite:///path; "
                            "the value is not shown)") from None
    if backend not in _DATABASE_BACKENDS:
        raise SettingsError(f"{variable(name)} must be a postgresql:// or sqlite:/// URL, "
                            f"not {backend}://")


def require_url(name: str, value: str | None, schemes: tuple[str, ...]) -> None:
    """A URL of one of ``schemes`` with a host (or a path, for unix sockets). Never quoted:
    node URLs carry API keys, Redis URLs passwords."""
    if value is None:
        return
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError:
        raise SettingsError(f"{variable(name)} is not a URL (the value is not shown)") from None
    if parts.scheme not in schemes:
        raise SettingsError(f"{variable(name)} must be a {' or '.join(schemes)} URL, not "
                            f"{parts.scheme or 'one without a scheme'}")
    if not (parts.hostname or (parts.scheme == "unix" and parts.path)):
        raise SettingsError(f"{variable(name)} has no host (the value is not shown)")


def check_server(settings: Settings) -> None:
    """What a server needs beyond well-formed values: in production, what users reach
    (https), mail for codes, a secret key of its own; with several processes, what they
    must share. ``svc-ops`` commands send no mail, write no links and run one process."""
    if settings.mode == "production":
        for name in ("base_url", "portal_url", "console_url", "docs_url"):
            if not getattr(settings, name).startswith("https://"):
                raise SettingsError(f"{variable(name)} must be an https URL in production")
        if settings.apps_scheme != "https":
            raise SettingsError(f"{variable('apps_scheme')} must be https in production")
        require_secret_key(settings)
        if not settings.smtp_host:
            raise SettingsError(f"production needs mail: set {variable('smtp_host')} "
                                "(verification codes are sent by SMTP)")
    if settings.chain_backend == "json_rpc" and not settings.spender_address:
        raise SettingsError(f"the json_rpc chain needs {ENV_PREFIX}SPENDER_ADDRESS (the "
                            "BudgetSpenderV2 address; `svc-ops contract deploy` deploys one)")
    check_processes(settings)


def require_secret_key(settings: Settings) -> None:
    """Production: a secret key of its own (servers; ``svc-ops webhooks run`` opens sealed
    webhook secrets with it). Never quoted."""
    if settings.mode == "production" and (settings.secret_key == DEV_SECRET_KEY
                                          or len(settings.secret_key) < 32):
        raise SettingsError(f"set {variable('secret_key')} to 32+ random characters in "
                            "production")


def check_processes(settings: Settings) -> None:
    """Several server processes need what every one of them must share."""
    if settings.processes <= 1:
        return
    missing = [need for need, ok in (
        (f"{ENV_PREFIX}REDIS_URL (rate limits and app cache invalidation are shared "
         "through Redis)", settings.redis_url),
        (f"{ENV_PREFIX}CHAIN_BACKEND=json_rpc (the in-process EVM would be a separate "
         "chain in each process)", settings.chain_backend == "json_rpc"),
        (f"{ENV_PREFIX}CHAIN_WORKERS=false with `svc-ops chain run` doing that work (a "
         "relayer key's nonces are allocated in one process)", not settings.chain_workers),
    ) if not ok]
    if missing:
        raise SettingsError(f"{variable('processes')}={settings.processes} needs "
                            + "; ".join(missing))


def check_head_limits(settings: Settings) -> None:
    # Below these, ordinary browsers' requests (cookies, long URLs) would be refused.
    for name, least in (("max_request_line", 256), ("max_header_line", 256),
                        ("max_headers", 16)):
        if getattr(settings, name) < least:
            raise SettingsError(f"{variable(name)} must be at least {least}")
    if settings.max_head < max(settings.max_request_line, settings.max_header_line):
        raise SettingsError(f"{variable('max_head')} must be at least "
                            f"{variable('max_request_line')} and {variable('max_header_line')}")


def production_warnings(settings: Settings) -> list[str]:
    """Dev parts a production server accepts but should not run on, said loudly at start.
    Refusing them would also refuse the tests that run production rules over SQLite."""
    from sqlalchemy.engine import make_url

    if settings.mode != "production":
        return []
    warnings = []
    if make_url(settings.database_url).get_backend_name() == "sqlite":
        warnings.append(f"production on SQLite ({variable('database_url')}): one file on one "
                        "machine, writers queue on one lock, and instances cannot share it; "
                        "production is PostgreSQL")
    if settings.chain_backend == "in_process":
        warnings.append(f"production on the in-process chain ({variable('chain_backend')}="
                        "in_process): a simulated chain inside this process, forgotten at "
                        "every restart; nothing settles on a real network")
    return warnings
