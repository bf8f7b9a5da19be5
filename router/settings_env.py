"""Reading ``SVCSRV_*`` variables: each one that is set, parsed into its setting's type.

What the values may be is :class:`router.settings.Settings`' and
``router/settings_checks.py``'s to judge; here a value that does not even parse (a number
that is not one, a boolean that is neither) is refused with its variable's name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from router.settings_checks import ENV_PREFIX, SettingsError


def read_environment(env: Mapping[str, str]) -> dict[str, object]:
    """Each ``SVCSRV_*`` variable that is set, parsed into its field's type."""
    values: dict[str, object] = {}
    text_fields = ("mode", "base_url", "portal_url", "console_url", "docs_url", "apps_domain",
                   "apps_scheme", "database_url", "bind_host", "smtp_from", "chain_backend",
                   "usdc_address", "usdc_name", "usdc_version", "secret_key")
    for name in text_fields:
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = raw.strip().rstrip("/") if name.endswith("_url") else raw.strip()
    for name in ("redis_url", "legacy_launch_host", "smtp_host", "smtp_username",
                 "smtp_password", "chain_rpc_url", "spender_address", "relayer_key",
                 "dns_server"):
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = raw.strip() or None
    for name in ("apps_port", "chain_max_fee_per_gas"):  # integers that may be unset
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = int(_number(raw, name.upper(), int)) if raw.strip() else None
    int_fields = ("bind_port", "processes", "proxy_max_request_bytes", "proxy_max_response_bytes",
                  "proxy_pool_size", "keep_alive_timeout", "max_request_line", "max_header_line",
                  "max_head", "max_headers", "db_workers", "db_pool_size", "db_max_overflow",
                  "console_session_idle_seconds",
                  "console_session_absolute_seconds", "smtp_port", "chain_id",
                  "summary_code_ttl_seconds", "payment_code_ttl_seconds",
                  "handoff_ttl_seconds", "chain_confirmations", "chain_log_blocks",
                  "settlement_batch_size", "runtime_manifest_max_bytes", "webhook_max_in_flight")
    for name in int_fields:
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = _number(raw, name.upper(), int)
    float_fields = ("proxy_connect_timeout", "proxy_read_timeout", "app_cache_ttl_local",
                    "app_cache_ttl_shared", "websocket_gate_interval", "chain_worker_interval",
                    "settlement_batch_age_seconds", "runtime_fetch_timeout",
                    "webhook_timeout", "webhook_lease_seconds", "webhook_poll_interval")
    for name in float_fields:
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = _number(raw, name.upper(), float)
    if (raw := env.get(ENV_PREFIX + "ROUTER_ADDRESSES")) is not None:
        values["router_addresses"] = tuple(a.strip() for a in raw.split(",") if a.strip())
    if (raw := env.get(ENV_PREFIX + "TRUSTED_PROXIES")) is not None:
        values["trusted_proxies"] = _networks(raw)
    if (raw := env.get(ENV_PREFIX + "SMTP_STARTTLS")) is not None:
        values["smtp_starttls"] = _bool(raw, "SMTP_STARTTLS")
    if (raw := env.get(ENV_PREFIX + "PROXY_FAST_PATH")) is not None:
        values["proxy_fast_path"] = _bool(raw, "PROXY_FAST_PATH")
    if (raw := env.get(ENV_PREFIX + "CHAIN_WORKERS")) is not None:
        values["chain_workers"] = _bool(raw, "CHAIN_WORKERS")
    if (raw := env.get(ENV_PREFIX + "WEBHOOK_WORKERS")) is not None:
        values["webhook_workers"] = _bool(raw, "WEBHOOK_WORKERS")
    if (raw := env.get(ENV_PREFIX + "WEBHOOK_RETRY_DELAYS")) is not None:
        values["webhook_retry_delays"] = tuple(
            float(_number(p.strip(), "WEBHOOK_RETRY_DELAYS", float))
            for p in raw.split(",") if p.strip())
    if (raw := env.get(ENV_PREFIX + "ALLOW_PRIVATE_ORIGINS")) is not None:
        values["allow_private_origins"] = _bool(raw, "ALLOW_PRIVATE_ORIGINS")
    if values.get("database_url") == "":
        del values["database_url"]  # empty is unset: the dev default, refused in production
    return values


def _bool(raw: str, name: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{ENV_PREFIX}{name} must be a boolean, not {raw!r}")


def _networks(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(p.strip(), strict=False)
                     for p in raw.split(",") if p.strip())
    except ValueError as exc:
        raise SettingsError(f"{ENV_PREFIX}TRUSTED_PROXIES: {exc}") from None


def _number(raw: str, name: str, cast: type[int] | type[float]) -> int | float:
    # int() and float() also read other scripts' digits (Arabic-Indic U+0668 U+0660 as 80);
    # a setting's digits are ASCII.
    if raw.isascii():
        try:
            return cast(raw)
        except ValueError:
            pass
    raise SettingsError(f"{ENV_PREFIX}{name} must be a number, not {raw!r}")
