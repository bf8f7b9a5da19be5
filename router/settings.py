"""Every server setting, read from the environment in exactly one place.

The prefix is ``SVCSRV_`` so the server never confuses its own settings with the
``SVC_*`` variables of a developer's Worker Quick Launch runtime (spec 4.11).
Tests build ``Settings(...)`` directly; only :func:`load_settings` reads ``os.environ``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal
from urllib.parse import urlsplit

from payments.digits import parse_digits
from router.head_limits import HeadLimits

ENV_PREFIX = "SVCSRV_"
DEV_SECRET_KEY = "dev-only-secret-key-change-me"  # noqa: S105  (refused in production)

Mode = Literal["dev", "production"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class SettingsError(ValueError):
    """A setting is missing, malformed or unsafe for the chosen mode."""


@dataclass(frozen=True)
class Settings:
    mode: Mode = "dev"
    base_url: str = "http://api.localhost:8000"
    portal_url: str = "http://portal.localhost:8000"
    console_url: str = "http://console.localhost:8000"
    docs_url: str = "http://docs.localhost:8000"
    apps_domain: str = "apps.localhost"
    # How runtime URLs are written for people: scheme and port of `<slug>.{apps_domain}`.
    apps_scheme: str = "http"
    apps_port: int | None = 8000
    # The retired launch host whose root redirects to the portal (spec 1.1).
    legacy_launch_host: str | None = "launch.localhost"
    database_url: str = "sqlite:///var/svc.db"
    redis_url: str | None = None
    bind_host: str = "127.0.0.1"
    bind_port: int = 8000
    # Server processes of `svc-server serve`, listening on the same port (one Python
    # process uses one core). More than one needs what every process must share: Redis
    # (rate limits, cache invalidation), a JSON-RPC chain (the in-process EVM would be one
    # chain per process) and the chain workers in `svc-ops chain run` (a relayer key's
    # nonces live in one process). docs/router.md, "Processes".
    processes: int = 1
    # Peers whose X-Forwarded-* headers we believe; everyone else's are replaced.
    trusted_proxies: tuple[Network, ...] = ()
    # Loopback/private runtime origins; refused outside dev (spec 4.11 table).
    allow_private_origins: bool = True
    proxy_connect_timeout: float = 5.0
    proxy_read_timeout: float = 30.0
    proxy_max_request_bytes: int = 64 * 1024 * 1024
    proxy_max_response_bytes: int = 256 * 1024 * 1024
    proxy_pool_size: int = 512
    # Seconds an idle client keep-alive connection is kept open, on both HTTP paths
    # (uvicorn's timeout_keep_alive; router/fast_protocol.py reads the same config). uvicorn's
    # default of 5 s closes the idle connections of clients that come back less often, such
    # as many mostly idle browsers (nginx keeps them 75 s by default).
    keep_alive_timeout: int = 5
    # Bounds on every request head, on every host and both HTTP paths, and on the response
    # heads origins send (router/head_limits.py): the request line, one header line, the
    # whole head, and the number of header lines. Over them: 414/431, connection closed.
    max_request_line: int = 8 * 1024
    max_header_line: int = 8 * 1024
    max_head: int = 32 * 1024
    max_headers: int = 100
    # Serve the common runtime request (cached open route, no body, small answer) from the
    # HTTP protocol itself, bypassing the ASGI cycle (router/fast_path.py). Off: every
    # request takes the ASGI path; the answers are the same, only slower.
    proxy_fast_path: bool = True
    # Threads that run database units of work at once (payments API, console). More than a
    # few only queue on the same row locks and contend for the GIL while holding them
    # (bench/ledger_bench.py); docs/decisions.md has the measurement.
    db_workers: int = 4
    # Without Redis no other instance can tell us about a change, so entries
    # expire after one second; with Redis, pub/sub invalidates and the TTL is a backstop.
    app_cache_ttl_local: float = 1.0
    app_cache_ttl_shared: float = 60.0
    # How often an open runtime WebSocket asks the gate again (through the app cache, as
    # HTTP does); one that is no longer served is closed. With the cache's 1 s without a
    # live subscription, a kill switch reaches open WebSockets within 2 s.
    websocket_gate_interval: float = 1.0
    console_session_idle_seconds: int = 2 * 3600
    console_session_absolute_seconds: int = 12 * 3600
    # Mail for verification codes. Without a host, dev captures and prints messages;
    # production refuses to start.
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_username: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_from: str = "no-reply@localhost"
    smtp_starttls: bool = True
    # The chain: "in_process" (eth-tester + py-evm, dev and tests) or "json_rpc".
    chain_backend: str = "in_process"
    chain_rpc_url: str | None = None
    chain_id: int = 84532
    usdc_address: str = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"  # USDC on Base Sepolia
    usdc_name: str = "USDC"
    usdc_version: str = "2"
    spender_address: str | None = None
    # json_rpc: the relayer's private key (signs permit relays and settlement batches).
    relayer_key: str | None = field(default=None, repr=False)
    chain_confirmations: int = 3
    # The most any transaction of ours offers per gas (EIP-1559 maxFeePerGas), in wei; unset:
    # whatever the chain asks. While the base fee is above it nothing is signed: charges and
    # permits wait in the ledger, and a pooled transaction is not replaced past it.
    chain_max_fee_per_gas: int | None = None
    # The widest block range asked of eth_getLogs at once; lower it to the node provider's cap.
    chain_log_blocks: int = 5_000
    # The relayer and settlement worker run inside the server (the embedded default);
    # off when `svc-ops chain run` processes do that work instead.
    chain_workers: bool = True
    chain_worker_interval: float = 1.0
    # Settlement batches flush at this many charges or when the oldest is this old.
    settlement_batch_size: int = 100
    settlement_batch_age_seconds: float = 5.0
    # Keys the HMAC of merchant user ids (spec 4.5). Required outside dev.
    secret_key: str = field(default=DEV_SECRET_KEY, repr=False)
    summary_code_ttl_seconds: int = 600
    payment_code_ttl_seconds: int = 300
    handoff_ttl_seconds: int = 900
    # Runtime verification (spec 2.8): the deadline of each request to a developer origin
    # (manifest fetch, each probe) and the largest manifest read.
    runtime_fetch_timeout: float = 5.0
    runtime_manifest_max_bytes: int = 64 * 1024
    # The DNS server asked about developer origins and runtime hostnames ("ip" or "ip:port");
    # unset: the system's resolver.
    dns_server: str | None = None
    # The router's public addresses: a runtime hostname is approved only when it resolves to
    # these and nothing else (svc-ops domain approve).
    router_addresses: tuple[str, ...] = ()
    # Webhooks (docs/webhooks.md): the dispatcher runs inside the server unless
    # `svc-ops webhooks run` processes do it; retry delays after the first request (the
    # ARCHITECTURE.md schedule; tests shorten it), request timeout, the claim lease (how
    # soon a killed dispatcher's claims come back), requests in flight, poll fallback.
    webhook_workers: bool = True
    webhook_retry_delays: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)
    webhook_timeout: float = 15.0
    webhook_lease_seconds: float = 120.0
    webhook_max_in_flight: int = 256
    webhook_poll_interval: float = 1.0
    # Derived: the hosts of the four URLs and the legacy launch host (spec 5.5 refuses them
    # as webhook URLs, 4.11 and 8 item 8 as runtime origins).
    service_hosts: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("dev", "production"):
            raise SettingsError(f"mode must be 'dev' or 'production', not {self.mode!r}")
        if self.mode == "production" and self.allow_private_origins:
            raise SettingsError(
                "allow_private_origins is a dev-only setting; "
                f"unset {ENV_PREFIX}ALLOW_PRIVATE_ORIGINS in production"
            )
        for name in ("base_url", "portal_url", "console_url", "docs_url"):
            _require_http_url(name, getattr(self, name))
            if self.mode == "production" and not getattr(self, name).startswith("https://"):
                raise SettingsError(f"{name} must be an https URL in production")
        if self.mode == "production" and self.apps_scheme != "https":
            raise SettingsError("apps_scheme must be https in production")
        if self.chain_backend not in ("in_process", "json_rpc"):
            raise SettingsError("chain_backend must be 'in_process' or 'json_rpc'")
        if self.chain_backend == "json_rpc" and not (self.chain_rpc_url and self.spender_address):
            raise SettingsError(f"the json_rpc chain needs {ENV_PREFIX}CHAIN_RPC_URL and "
                                f"{ENV_PREFIX}SPENDER_ADDRESS")
        if self.mode == "production" and (self.secret_key == DEV_SECRET_KEY
                                          or len(self.secret_key) < 32):
            raise SettingsError(f"set {ENV_PREFIX}SECRET_KEY to 32+ random characters in "
                                "production")
        if self.mode == "production" and not self.smtp_host:
            raise SettingsError(f"production needs mail: set {ENV_PREFIX}SMTP_HOST "
                                "(verification codes are sent by SMTP)")
        if any(d < 0 for d in self.webhook_retry_delays):
            raise SettingsError(f"{ENV_PREFIX}WEBHOOK_RETRY_DELAYS cannot be negative")
        if self.webhook_lease_seconds < self.webhook_timeout + 10:
            raise SettingsError(f"{ENV_PREFIX}WEBHOOK_LEASE_SECONDS must exceed "
                                f"{ENV_PREFIX}WEBHOOK_TIMEOUT by 10 s or more")
        if self.chain_max_fee_per_gas is not None and self.chain_max_fee_per_gas < 1:
            raise SettingsError(f"{ENV_PREFIX}CHAIN_MAX_FEE_PER_GAS must be a positive number "
                                "of wei (or unset: no cap)")
        if self.chain_log_blocks < 1:
            raise SettingsError(f"{ENV_PREFIX}CHAIN_LOG_BLOCKS must be at least 1")
        if self.db_workers < 1:
            raise SettingsError(f"{ENV_PREFIX}DB_WORKERS must be at least 1")
        if self.websocket_gate_interval <= 0:
            raise SettingsError(f"{ENV_PREFIX}WEBSOCKET_GATE_INTERVAL must be positive")
        if self.keep_alive_timeout < 1:
            raise SettingsError(f"{ENV_PREFIX}KEEP_ALIVE_TIMEOUT must be at least 1 second")
        self._check_processes()
        self._check_head_limits()
        if not self.apps_domain or "/" in self.apps_domain or ":" in self.apps_domain:
            raise SettingsError(f"apps_domain must be a bare domain, not {self.apps_domain!r}")
        if self.runtime_fetch_timeout <= 0 or self.runtime_manifest_max_bytes < 1024:
            raise SettingsError(f"{ENV_PREFIX}RUNTIME_FETCH_TIMEOUT must be positive and "
                                f"{ENV_PREFIX}RUNTIME_MANIFEST_MAX_BYTES at least 1024")
        self.dns_nameserver  # noqa: B018  (validates dns_server)
        for address in self.router_addresses:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise SettingsError(f"{ENV_PREFIX}ROUTER_ADDRESSES: {address!r} is not an IP "
                                    "address") from None
        hosts = tuple(host_of(getattr(self, n)) for n in ("base_url", "portal_url",
                                                          "console_url", "docs_url"))
        # The legacy launch host is ours too (spec 1.1): no webhook or runtime origin there.
        if self.legacy_launch_host:
            hosts += (self.legacy_launch_host.lower().rstrip("."),)
        object.__setattr__(self, "service_hosts", hosts)

    def _check_head_limits(self) -> None:
        # Below these, ordinary browsers' requests (cookies, long URLs) would be refused.
        for name, least in (("max_request_line", 256), ("max_header_line", 256),
                            ("max_headers", 16)):
            if getattr(self, name) < least:
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be at least {least}")
        if self.max_head < max(self.max_request_line, self.max_header_line):
            raise SettingsError(f"{ENV_PREFIX}MAX_HEAD must be at least "
                                f"{ENV_PREFIX}MAX_REQUEST_LINE and {ENV_PREFIX}MAX_HEADER_LINE")

    @property
    def head_limits(self) -> HeadLimits:
        return HeadLimits(request_line=self.max_request_line, header_line=self.max_header_line,
                          head=self.max_head, headers=self.max_headers)

    def _check_processes(self) -> None:
        if self.processes < 1:
            raise SettingsError(f"{ENV_PREFIX}PROCESSES must be at least 1")
        if self.processes == 1:
            return
        missing = [need for need, ok in (
            (f"{ENV_PREFIX}REDIS_URL (rate limits and app cache invalidation are shared "
             "through Redis)", self.redis_url),
            (f"{ENV_PREFIX}CHAIN_BACKEND=json_rpc (the in-process EVM would be a separate "
             "chain in each process)", self.chain_backend == "json_rpc"),
            (f"{ENV_PREFIX}CHAIN_WORKERS=false with `svc-ops chain run` doing that work (a "
             "relayer key's nonces are allocated in one process)", not self.chain_workers),
        ) if not ok]
        if missing:
            raise SettingsError(f"{ENV_PREFIX}PROCESSES={self.processes} needs "
                                + "; ".join(missing))

    @property
    def api_host(self) -> str:
        return host_of(self.base_url)

    @property
    def portal_host(self) -> str:
        return host_of(self.portal_url)

    @property
    def console_host(self) -> str:
        return host_of(self.console_url)

    @property
    def docs_host(self) -> str:
        return host_of(self.docs_url)

    @property
    def settlement_batch_age(self) -> timedelta:
        return timedelta(seconds=self.settlement_batch_age_seconds)

    @property
    def dns_nameserver(self) -> tuple[str, int] | None:
        """``dns_server`` as (address, port), or None for the system resolver."""
        if not self.dns_server:
            return None
        text = self.dns_server.strip()
        host, port = text, 53
        if text.count(":") == 1 or text.startswith("["):  # "ip:port" or "[ipv6]:port"
            host, _, raw = text.rpartition(":")
            host = host.strip("[]")
            number = parse_digits(raw, 5)
            if number is None or not 0 < number < 65536:
                raise SettingsError(f"{ENV_PREFIX}DNS_SERVER: bad port in {text!r}")
            port = number
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise SettingsError(f"{ENV_PREFIX}DNS_SERVER must be an IP address (with an "
                                f"optional :port), not {text!r}") from None
        return host, port

    @property
    def dev(self) -> bool:
        return self.mode == "dev"

    def runtime_url(self, slug: str) -> str:
        default_port = {"http": 80, "https": 443}.get(self.apps_scheme)
        port = "" if self.apps_port in (None, default_port) else f":{self.apps_port}"
        return f"{self.apps_scheme}://{slug}.{self.apps_domain}{port}"


def host_of(url: str) -> str:
    """The lower-case host name of a URL, without port."""
    return (urlsplit(url).hostname or "").lower()


def _require_http_url(name: str, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{name} must be an http(s) URL, not {value!r}")
    if parts.path not in ("", "/"):
        raise SettingsError(f"{name} must be an origin without a path, not {value!r}")


def _bool(raw: str, name: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{ENV_PREFIX}{name} must be a boolean, not {raw!r}")


def _networks(raw: str) -> tuple[Network, ...]:
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


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from ``SVCSRV_*`` variables; ``overrides`` win (used by the CLI flags)."""
    env = os.environ if environ is None else environ
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
                  "max_head", "max_headers", "db_workers", "console_session_idle_seconds",
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
    elif values.get("mode", overrides.get("mode")) == "production":
        values["allow_private_origins"] = False
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
