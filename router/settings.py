"""Every server setting, read from the environment in exactly one place.

The prefix is ``SVCSRV_`` so the server never confuses its own settings with the
``SVC_*`` variables of a developer's Worker Quick Launch runtime (spec 4.11).
Tests build ``Settings(...)`` directly; only :func:`load_settings` reads ``os.environ``,
and ``router/settings_env.py`` parses what it read, variable by variable.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal
from urllib.parse import urlsplit

from payments.cookies import CookieNames
from payments.digits import parse_digits
from router.head_limits import HeadLimits
from router.secret_files import with_secret_files
from router.settings_checks import (
    DEV_SECRET_KEY,
    ENV_PREFIX,
    SettingsError,
    check_head_limits,
    check_server,
    require_address,
    require_database_url,
    require_origin,
    require_private_key,
    require_url,
    variable,
)
from router.settings_env import read_environment

__all__ = ["DEV_DATABASE_URL", "DEV_SECRET_KEY", "ENV_PREFIX", "Settings", "SettingsError",
           "host_of", "load_settings"]

DEV_DATABASE_URL = "sqlite:///var/svc.db"
DEV_APPS_PORT = 8000

Mode = Literal["dev", "production"]
# Who the settings are for: a server checks everything (check_server); `svc-ops` only what
# its commands use (docs/settings.md, "Who checks what").
Role = Literal["server", "operator"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Settings:
    mode: Mode = "dev"
    base_url: str = "http://api.localhost:8000"
    portal_url: str = "http://portal.localhost:8000"
    console_url: str = "http://console.localhost:8000"
    docs_url: str = "http://docs.localhost:8000"
    apps_domain: str = "apps.localhost"
    # How runtime URLs are written: scheme and port of `<slug>.{apps_domain}`. Not only
    # for people: return URLs are compared with this origin (check_return_url), so a port
    # the edge does not listen on refuses every runtime's return. None: the scheme's
    # default port; load_settings leaves it None outside dev unless SVCSRV_APPS_PORT is set.
    apps_scheme: str = "http"
    apps_port: int | None = DEV_APPS_PORT
    # The retired launch host whose root redirects to the portal (spec 1.1).
    legacy_launch_host: str | None = "launch.localhost"
    database_url: str = DEV_DATABASE_URL
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
    # Each process's PostgreSQL pool: connections kept, and opened beyond them under load.
    # Every process of every instance and worker has its own, so their sum must fit the
    # server's max_connections (docs/deploy.md, "Sizing").
    db_pool_size: int = 10
    db_max_overflow: int = 20
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
        # Rules about the values themselves, for every process; what a server needs on top
        # (production URLs, mail, the secret key, processes) is check_server's.
        if self.mode not in ("dev", "production"):
            raise SettingsError(f"{variable('mode')} must be 'dev' or 'production', "
                                f"not {self.mode!r}")
        if self.mode == "production" and self.allow_private_origins:
            raise SettingsError(f"{variable('allow_private_origins')} is a dev-only setting; "
                                "unset it in production")
        for name in ("base_url", "portal_url", "console_url", "docs_url"):
            require_origin(name, getattr(self, name))
        if self.apps_scheme not in ("http", "https"):
            raise SettingsError(f"{variable('apps_scheme')} must be http or https, "
                                f"not {self.apps_scheme!r}")
        if self.apps_port is not None and not 0 < self.apps_port < 65536:
            raise SettingsError(f"{variable('apps_port')} must be a port (1 to 65535) or "
                                "empty for the scheme's default")
        self._check_chain()
        require_database_url("database_url", self.database_url)
        require_url("redis_url", self.redis_url, ("redis", "rediss", "unix"))
        if any(d < 0 for d in self.webhook_retry_delays):
            raise SettingsError(f"{ENV_PREFIX}WEBHOOK_RETRY_DELAYS cannot be negative")
        if self.webhook_lease_seconds < self.webhook_timeout + 10:
            raise SettingsError(f"{ENV_PREFIX}WEBHOOK_LEASE_SECONDS must exceed "
                                f"{ENV_PREFIX}WEBHOOK_TIMEOUT by 10 s or more")
        if self.db_workers < 1:
            raise SettingsError(f"{ENV_PREFIX}DB_WORKERS must be at least 1")
        if self.db_pool_size < 1 or self.db_max_overflow < 0:
            raise SettingsError(f"{ENV_PREFIX}DB_POOL_SIZE must be at least 1 and "
                                f"{ENV_PREFIX}DB_MAX_OVERFLOW at least 0")
        if self.websocket_gate_interval <= 0:
            raise SettingsError(f"{ENV_PREFIX}WEBSOCKET_GATE_INTERVAL must be positive")
        if self.keep_alive_timeout < 1:
            raise SettingsError(f"{ENV_PREFIX}KEEP_ALIVE_TIMEOUT must be at least 1 second")
        if self.processes < 1:
            raise SettingsError(f"{ENV_PREFIX}PROCESSES must be at least 1")
        check_head_limits(self)
        if not self.apps_domain or "/" in self.apps_domain or ":" in self.apps_domain:
            raise SettingsError(f"{variable('apps_domain')} must be a bare domain, "
                                f"not {self.apps_domain!r}")
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

    def _check_chain(self) -> None:
        # Parsed here, not at the first transaction: a bad key or address would otherwise
        # surface as a library's traceback (eth-account, web3) from whichever command ran.
        if self.chain_backend not in ("in_process", "json_rpc"):
            raise SettingsError(f"{variable('chain_backend')} must be 'in_process' or "
                                "'json_rpc'")
        # The spender is a server's need (check_server) and each chain command's
        # (ops/chain.py), not every process's: `svc-ops contract deploy` runs before there
        # is one, to make it.
        if self.chain_backend == "json_rpc" and not self.chain_rpc_url:
            raise SettingsError(f"the json_rpc chain needs {ENV_PREFIX}CHAIN_RPC_URL")
        require_url("chain_rpc_url", self.chain_rpc_url, ("http", "https"))
        require_address("usdc_address", self.usdc_address)
        require_address("spender_address", self.spender_address)
        require_private_key("relayer_key", self.relayer_key)
        if self.chain_max_fee_per_gas is not None and self.chain_max_fee_per_gas < 1:
            raise SettingsError(f"{ENV_PREFIX}CHAIN_MAX_FEE_PER_GAS must be a positive number "
                                "of wei (or unset: no cap)")
        if self.chain_log_blocks < 1:
            raise SettingsError(f"{ENV_PREFIX}CHAIN_LOG_BLOCKS must be at least 1")

    @property
    def head_limits(self) -> HeadLimits:
        return HeadLimits(request_line=self.max_request_line, header_line=self.max_header_line,
                          head=self.max_head, headers=self.max_headers)

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

    @property
    def secure_cookies(self) -> bool:
        """The portal's and console's cookies are Secure, and so ``__Host-`` named: outside
        dev always (a server's URLs are https there), in dev when both hosts are served over
        https (ops/cluster's topology). Plain http dev keeps the plain names."""
        return not self.dev or all(urlsplit(url).scheme == "https"
                                   for url in (self.portal_url, self.console_url))

    @property
    def cookies(self) -> CookieNames:
        """The one place the cookies' names come from (payments/cookies.py)."""
        return CookieNames(secure=self.secure_cookies)

    def runtime_url(self, slug: str) -> str:
        default_port = {"http": 80, "https": 443}.get(self.apps_scheme)
        port = "" if self.apps_port in (None, default_port) else f":{self.apps_port}"
        return f"{self.apps_scheme}://{slug}.{self.apps_domain}{port}"


def host_of(url: str) -> str:
    """The lower-case host name of a URL, without port."""
    return (urlsplit(url).hostname or "").lower()


def load_settings(environ: Mapping[str, str] | None = None, *, role: Role = "server",
                  **overrides: object) -> Settings:
    """Build settings from ``SVCSRV_*`` variables; ``overrides`` win (used by the CLI flags).

    ``role="operator"`` (``svc-ops``) skips what only a server needs (check_server)."""
    env = with_secret_files(os.environ if environ is None else environ)
    values = read_environment(env)
    mode = overrides.get("mode", values.get("mode", "dev"))
    if "allow_private_origins" not in values and mode == "production":
        values["allow_private_origins"] = False
    if "apps_port" not in values and mode != "dev":
        # Outside dev the edge listens on the scheme's port (443); 8000 is `svc-server
        # dev`'s, and a port in runtime URLs that nobody listens on refuses every return URL.
        values["apps_port"] = None
    if mode == "production" and "database_url" not in {*values, *overrides}:
        raise SettingsError(
            f"set {variable('database_url')} in production (the PostgreSQL database); unset, "
            f"it would be the dev SQLite file {DEV_DATABASE_URL.removeprefix('sqlite:///')} "
            "under the working directory")
    values.update(overrides)
    settings = Settings(**values)  # type: ignore[arg-type]
    if role == "server":
        check_server(settings)
    return settings
