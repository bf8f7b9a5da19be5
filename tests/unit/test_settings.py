"""Settings come from SVCSRV_* variables only, and refuse unsafe production values."""

from __future__ import annotations

import dataclasses
import inspect
import ipaddress
from pathlib import Path

import pytest
from sqlalchemy.pool import QueuePool

from payments.db import make_engine
from router.chain_params import chain_params
from router.settings import Settings, SettingsError, load_settings
from router.settings_env import read_environment

PROD = {
    "SVCSRV_MODE": "production",
    "SVCSRV_BASE_URL": "https://api.example.com",
    "SVCSRV_PORTAL_URL": "https://portal.example.com",
    "SVCSRV_CONSOLE_URL": "https://console.example.com",
    "SVCSRV_DOCS_URL": "https://docs.example.com/",
    "SVCSRV_APPS_DOMAIN": "apps.example.com",
    "SVCSRV_APPS_SCHEME": "https",
    "SVCSRV_APPS_PORT": "",
    "SVCSRV_SMTP_HOST": "smtp.example.com",
    "SVCSRV_SECRET_KEY": "x" * 40,
    "SVCSRV_DATABASE_URL": "postgresql://svc:db-pass-7Q@db.example.com:5432/svc",
}


def test_dev_defaults_are_the_localhost_hosts() -> None:
    settings = load_settings({})
    assert settings.mode == "dev"
    assert settings.base_url == "http://api.localhost:8000"
    assert settings.runtime_url("demo") == "http://demo.apps.localhost:8000"
    assert settings.database_url.startswith("sqlite:///")
    assert settings.redis_url is None


def test_worker_runtime_variables_are_ignored() -> None:
    settings = load_settings({"SVC_APP_SLUG": "x", "SVC_RUNTIME_ORIGIN": "http://evil",
                              "DATABASE_URL": "postgresql://nope"})
    assert settings == load_settings({})


def test_production_from_environment() -> None:
    env = {**PROD, "SVCSRV_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::1",
           "SVCSRV_REDIS_URL": "redis://127.0.0.1:6379/0"}
    settings = load_settings(env)
    assert settings.docs_url == "https://docs.example.com"
    assert settings.allow_private_origins is False
    assert settings.runtime_url("demo") == "https://demo.apps.example.com"
    assert settings.trusted_proxies == (ipaddress.ip_network("10.0.0.0/8"),
                                        ipaddress.ip_network("2001:db8::1/128"))


REFUSED = [
    ({**PROD, "SVCSRV_ALLOW_PRIVATE_ORIGINS": "true"}, "dev-only"),
    ({**PROD, "SVCSRV_BASE_URL": "http://api.example.com"}, "https"),
    ({**PROD, "SVCSRV_APPS_SCHEME": "http"}, "https"),
    ({"SVCSRV_MODE": "staging"}, "SVCSRV_MODE"),
    ({"SVCSRV_BASE_URL": "ftp://x"}, "SVCSRV_BASE_URL"),
    ({"SVCSRV_PORTAL_URL": "http://portal.localhost/app"}, "without a path"),
    ({"SVCSRV_APPS_DOMAIN": "apps.localhost:8000"}, "bare domain"),
    ({"SVCSRV_BIND_PORT": "eighty"}, "number"),
    # Digits to str.isdigit(): int() refuses the first (a ValueError), reads the others.
    ({"SVCSRV_DNS_SERVER": "127.0.0.1:\u00b2"}, "DNS_SERVER: bad port"),
    ({"SVCSRV_DNS_SERVER": "127.0.0.1:\u0665\u0663"}, "DNS_SERVER: bad port"),
    ({"SVCSRV_BIND_PORT": "\u0668\u0660"}, "BIND_PORT must be a number"),
    ({"SVCSRV_WEBHOOK_TIMEOUT": "\uff15"}, "WEBHOOK_TIMEOUT must be a number"),
    ({"SVCSRV_TRUSTED_PROXIES": "10.0.0.0/33"}, "TRUSTED_PROXIES"),
    ({"SVCSRV_ALLOW_PRIVATE_ORIGINS": "perhaps"}, "boolean"),
    ({"SVCSRV_DB_WORKERS": "0"}, "DB_WORKERS"),
    ({"SVCSRV_PROCESSES": "0"}, "PROCESSES must be at least 1"),
    ({"SVCSRV_PROCESSES": "two"}, "PROCESSES must be a number"),
    ({"SVCSRV_KEEP_ALIVE_TIMEOUT": "0"}, "KEEP_ALIVE_TIMEOUT must be at least 1"),
    ({"SVCSRV_CHAIN_MAX_FEE_PER_GAS": "0"}, "CHAIN_MAX_FEE_PER_GAS must be a positive"),
    ({"SVCSRV_CHAIN_MAX_FEE_PER_GAS": "5 gwei"}, "CHAIN_MAX_FEE_PER_GAS must be a number"),
    ({"SVCSRV_CHAIN_LOG_BLOCKS": "0"}, "CHAIN_LOG_BLOCKS must be at least 1"),
]


@pytest.mark.parametrize(("env", "message"), REFUSED)
def test_bad_settings_are_refused_clearly(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(env)


def test_the_fee_cap_is_wei_or_unset() -> None:
    assert load_settings({}).chain_max_fee_per_gas is None
    assert load_settings({"SVCSRV_CHAIN_MAX_FEE_PER_GAS": ""}).chain_max_fee_per_gas is None
    assert load_settings({"SVCSRV_CHAIN_MAX_FEE_PER_GAS": " 50000000000 "}
                         ).chain_max_fee_per_gas == 50_000_000_000
    assert load_settings({"SVCSRV_CHAIN_LOG_BLOCKS": "500"}).chain_log_blocks == 500


def test_keep_alive_timeout_reaches_the_server_config() -> None:
    from router.cli import server_config

    assert load_settings({}).keep_alive_timeout == 5  # uvicorn's own default
    settings = load_settings({"SVCSRV_KEEP_ALIVE_TIMEOUT": "75"})
    assert server_config(None, settings).timeout_keep_alive == 75


def test_db_workers_from_environment() -> None:
    assert load_settings({}).db_workers == 4
    assert load_settings({"SVCSRV_DB_WORKERS": "2"}).db_workers == 2


SHARED = {"SVCSRV_REDIS_URL": "redis://127.0.0.1:6379/0", "SVCSRV_CHAIN_BACKEND": "json_rpc",
          "SVCSRV_CHAIN_RPC_URL": "https://node.example.com", "SVCSRV_CHAIN_WORKERS": "false",
          "SVCSRV_SPENDER_ADDRESS": "0x" + "22" * 20}


def test_several_processes_need_what_they_must_share() -> None:
    assert load_settings({**SHARED, "SVCSRV_PROCESSES": "4"}).processes == 4
    assert load_settings({}).processes == 1
    for name, needed in (("SVCSRV_REDIS_URL", "SVCSRV_REDIS_URL"),
                         ("SVCSRV_CHAIN_BACKEND", "SVCSRV_CHAIN_BACKEND=json_rpc"),
                         ("SVCSRV_CHAIN_WORKERS", "SVCSRV_CHAIN_WORKERS=false")):
        env = {k: v for k, v in SHARED.items() if k != name}
        with pytest.raises(SettingsError) as refused:
            load_settings({**env, "SVCSRV_PROCESSES": "2"})
        assert needed in str(refused.value)
        assert load_settings(env).processes == 1  # one process needs none of it
    with pytest.raises(SettingsError, match=r"REDIS_URL.*CHAIN_BACKEND.*CHAIN_WORKERS"):
        load_settings({"SVCSRV_PROCESSES": "2"})  # every missing piece, in one message


def test_service_hosts_derived() -> None:
    assert Settings().service_hosts == ("api.localhost", "portal.localhost",
                                        "console.localhost", "docs.localhost",
                                        "launch.localhost")
    assert Settings(legacy_launch_host="Launch.Example.COM.").service_hosts[-1] == (
        "launch.example.com")
    assert Settings(legacy_launch_host=None).service_hosts == (
        "api.localhost", "portal.localhost", "console.localhost", "docs.localhost")


def test_websocket_gate_interval_must_be_positive() -> None:
    assert load_settings({"SVCSRV_WEBSOCKET_GATE_INTERVAL": "0.5"}).websocket_gate_interval == 0.5
    with pytest.raises(SettingsError, match="WEBSOCKET_GATE_INTERVAL"):
        load_settings({"SVCSRV_WEBSOCKET_GATE_INTERVAL": "0"})


def test_production_requires_a_real_secret_key() -> None:
    with pytest.raises(SettingsError, match="SECRET_KEY"):
        load_settings({**PROD, "SVCSRV_SECRET_KEY": "short"})
    with pytest.raises(SettingsError, match="SECRET_KEY"):
        load_settings({k: v for k, v in PROD.items() if k != "SVCSRV_SECRET_KEY"})


def test_json_rpc_chain_needs_its_settings() -> None:
    with pytest.raises(SettingsError, match="CHAIN_RPC_URL"):
        load_settings({"SVCSRV_CHAIN_BACKEND": "json_rpc"})
    settings = load_settings({"SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_CHAIN_ID": "84532",
                              "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:8545",
                              "SVCSRV_SPENDER_ADDRESS": "0x" + "1" * 40})
    assert settings.chain_id == 84532


def test_production_requires_mail() -> None:
    env = {k: v for k, v in PROD.items() if k != "SVCSRV_SMTP_HOST"}
    with pytest.raises(SettingsError, match="SMTP_HOST"):
        load_settings(env)


def test_smtp_password_never_in_repr() -> None:
    settings = load_settings({"SVCSRV_SMTP_HOST": "mail", "SVCSRV_SMTP_PASSWORD": "hunter2-pw"})
    assert settings.smtp_password == "hunter2-pw"
    assert "hunter2-pw" not in repr(settings)


def test_every_setting_is_read_from_its_variable_and_documented() -> None:
    """Each field but the derived ``service_hosts`` has a ``SVCSRV_<NAME>`` variable that
    load_settings reads and docs/settings.md describes."""
    doc = (Path(__file__).parents[2] / "docs" / "settings.md").read_text()
    source = inspect.getsource(load_settings) + inspect.getsource(read_environment)
    missing_doc, unread = [], []
    for field in dataclasses.fields(Settings):
        if field.name == "service_hosts":
            continue
        if f"`SVCSRV_{field.name.upper()}`" not in doc:
            missing_doc.append(field.name)
        if f'"{field.name}"' not in source and f'"{field.name.upper()}"' not in source:
            unread.append(field.name)
    assert missing_doc == [] and unread == []


def test_head_limits_are_read_and_refused_below_what_browsers_send() -> None:
    limits = load_settings({"SVCSRV_MAX_REQUEST_LINE": "4096", "SVCSRV_MAX_HEADER_LINE": "16384",
                            "SVCSRV_MAX_HEAD": "65536", "SVCSRV_MAX_HEADERS": "200"}).head_limits
    assert (limits.request_line, limits.header_line, limits.head, limits.headers) == (
        4096, 16384, 65536, 200)
    assert load_settings({}).head_limits.head == 32 * 1024
    for name, value in (("MAX_REQUEST_LINE", "100"), ("MAX_HEADER_LINE", "0"),
                        ("MAX_HEADERS", "3")):
        with pytest.raises(SettingsError, match=name):
            load_settings({f"SVCSRV_{name}": value})
    with pytest.raises(SettingsError, match="MAX_HEAD must be at least"):
        load_settings({"SVCSRV_MAX_HEAD": "4096"})  # under one 8 KB line


def test_the_network_label_follows_the_chain_id() -> None:
    """Events, deliveries and receipts carry ``network``: Base Sepolia by its name, any other
    chain (a local node, a fork) by its CAIP-2 id, never labelled Base Sepolia."""
    base = {"SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_CHAIN_RPC_URL": "http://127.0.0.1:8545",
            "SVCSRV_SPENDER_ADDRESS": "0x" + "1" * 40}
    named = {chain_id: chain_params(load_settings({**base, "SVCSRV_CHAIN_ID": chain_id})).network
             for chain_id in ("84532", "8453", "31337")}
    assert named == {"84532": "base-sepolia", "8453": "base", "31337": "eip155:31337"}
    assert chain_params(load_settings({})).network == "base-sepolia"  # in-process: simulated
    assert chain_params(load_settings({})).simulated


# Deploy walk 25, finding 3: deploy.md says "APPS_PORT (unset for 443)".

def test_an_unset_apps_port_outside_dev_is_the_schemes_default() -> None:
    """Unset meant 8000 everywhere, so production runtime URLs said ``:8000`` and every
    runtime return URL (compared with that origin) was refused."""
    from payments.ledger.return_urls import check_return_url

    env = {k: v for k, v in PROD.items() if k != "SVCSRV_APPS_PORT"}
    settings = load_settings(env)
    assert settings.apps_port is None
    runtime = settings.runtime_url("demo")
    assert runtime == "https://demo.apps.example.com"
    check_return_url("https://demo.apps.example.com/svc-auth-return?app=demo", slug="demo",
                     portal_url=settings.portal_url, runtime_url=runtime, runtime_active=True)
    assert load_settings({**env, "SVCSRV_APPS_PORT": "8443"}).runtime_url("demo") == (
        "https://demo.apps.example.com:8443")  # a port that is set is kept
    assert load_settings({}).apps_port == 8000  # dev: svc-server dev's port
    assert load_settings({"SVCSRV_APPS_PORT": ""}).apps_port is None
    with pytest.raises(SettingsError, match="SVCSRV_APPS_PORT must be a port"):
        load_settings({"SVCSRV_APPS_PORT": "70000"})


# Finding 7: svc-ops checks what its commands use, not what a server needs.

def test_operator_settings_skip_what_only_a_server_needs() -> None:
    """``svc-ops migrate`` in the image (SVCSRV_MODE=production) with the database URL alone:
    no https URLs, mail, secret key or processes rules."""
    env = {"SVCSRV_MODE": "production", "SVCSRV_DATABASE_URL": PROD["SVCSRV_DATABASE_URL"],
           "SVCSRV_PROCESSES": "2"}  # the servers' block: PROCESSES means nothing to svc-ops
    settings = load_settings(env, role="operator")
    assert settings.mode == "production" and settings.database_url.startswith("postgresql")
    with pytest.raises(SettingsError, match="SVCSRV_BASE_URL must be an https URL"):
        load_settings(env)  # a server still needs all of it
    # Malformed values are refused whoever reads them.
    with pytest.raises(SettingsError, match="SVCSRV_SPENDER_ADDRESS"):
        load_settings({**env, "SVCSRV_SPENDER_ADDRESS": "0x1234"}, role="operator")


def test_production_refuses_an_unset_database_url() -> None:
    """Unset, it was the dev SQLite file under the working directory: `svc-ops migrate`
    migrated a new empty file there and reported success."""
    env = {k: v for k, v in PROD.items() if k != "SVCSRV_DATABASE_URL"}
    for role in ("server", "operator"):
        for given in (env, {**env, "SVCSRV_DATABASE_URL": " "}):
            with pytest.raises(SettingsError, match="set SVCSRV_DATABASE_URL in production"):
                load_settings(given, role=role)
    assert load_settings({}).database_url == "sqlite:///var/svc.db"  # dev keeps its default


# Finding 15: bad values are refused at load, naming the variable, never echoing secrets.

KEY = "0x" + "ab" * 32
CHAIN = {"SVCSRV_CHAIN_BACKEND": "json_rpc", "SVCSRV_SPENDER_ADDRESS": "0x" + "1" * 40,
         "SVCSRV_CHAIN_RPC_URL": "https://node.example.com/v2/RPC-API-KEY-42"}
SECRETS = ("db-pass-7Q", "RPC-API-KEY-42", "ab" * 32, "cd" * 31, "redis-pass-9", "x" * 40,
           "QQ" * 32)


@pytest.mark.parametrize(("env", "variable"), [
    ({"SVCSRV_DATABASE_URL": "garbage"}, "SVCSRV_DATABASE_URL"),
    ({"SVCSRV_DATABASE_URL": "mysql://svc:db-pass-7Q@db/svc"}, "SVCSRV_DATABASE_URL"),
    ({"SVCSRV_DATABASE_URL": "postgresql://svc:db-pass-7Q@db:port/svc"}, "SVCSRV_DATABASE_URL"),
    ({**CHAIN, "SVCSRV_RELAYER_KEY": "0xdeadbeef"}, "SVCSRV_RELAYER_KEY"),
    ({**CHAIN, "SVCSRV_RELAYER_KEY": "0x" + "cd" * 31}, "SVCSRV_RELAYER_KEY"),  # 31 bytes
    ({**CHAIN, "SVCSRV_RELAYER_KEY": "QQ" * 32}, "SVCSRV_RELAYER_KEY"),  # not hex
    ({**CHAIN, "SVCSRV_RELAYER_KEY": "0x" + "00" * 32}, "SVCSRV_RELAYER_KEY"),  # zero
    ({**CHAIN, "SVCSRV_RELAYER_KEY": "0x" + "ff" * 32}, "SVCSRV_RELAYER_KEY"),  # above n
    ({**CHAIN, "SVCSRV_SPENDER_ADDRESS": "0x1234"}, "SVCSRV_SPENDER_ADDRESS"),
    ({"SVCSRV_USDC_ADDRESS": "0x" + "g" * 40}, "SVCSRV_USDC_ADDRESS"),
    ({**CHAIN, "SVCSRV_CHAIN_RPC_URL": "node.example.com/v2/RPC-API-KEY-42"},
     "SVCSRV_CHAIN_RPC_URL"),
    ({**CHAIN, "SVCSRV_CHAIN_RPC_URL": "https://node.example.com:RPC-API-KEY-42/"},
     "SVCSRV_CHAIN_RPC_URL"),
    ({"SVCSRV_REDIS_URL": "http://:redis-pass-9@cache:6379/0"}, "SVCSRV_REDIS_URL"),
    ({"SVCSRV_REDIS_URL": "redis://:redis-pass-9@/0"}, "SVCSRV_REDIS_URL"),
    ({**PROD, "SVCSRV_BASE_URL": "http://api.example.com"}, "SVCSRV_BASE_URL"),
    ({**PROD, "SVCSRV_APPS_DOMAIN": "https://apps.example.com"}, "SVCSRV_APPS_DOMAIN"),
    ({**PROD, "SVCSRV_APPS_SCHEME": "http"}, "SVCSRV_APPS_SCHEME"),
    ({"SVCSRV_APPS_SCHEME": "gopher"}, "SVCSRV_APPS_SCHEME"),
    ({"SVCSRV_CHAIN_BACKEND": "ganache"}, "SVCSRV_CHAIN_BACKEND"),
    ({"SVCSRV_MODE": "prod"}, "SVCSRV_MODE"),
    ({**PROD, "SVCSRV_ALLOW_PRIVATE_ORIGINS": "true"}, "SVCSRV_ALLOW_PRIVATE_ORIGINS"),
    ({**PROD, "SVCSRV_SECRET_KEY": "x" * 20}, "SVCSRV_SECRET_KEY"),
])
def test_a_bad_value_is_refused_naming_its_variable_and_not_its_secret(
        env: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(env)
    message = str(refused.value)
    assert variable in message
    assert not [s for s in SECRETS if s in message]


def test_good_chain_values_are_accepted() -> None:
    settings = load_settings({**CHAIN, "SVCSRV_RELAYER_KEY": KEY.removeprefix("0x"),
                              "SVCSRV_REDIS_URL": "rediss://:redis-pass-9@cache:6380/1"})
    assert settings.relayer_key == KEY.removeprefix("0x")
    assert load_settings({**CHAIN, "SVCSRV_RELAYER_KEY": KEY}).relayer_key == KEY
    assert load_settings({"SVCSRV_REDIS_URL": "unix:///run/redis.sock"}).redis_url


def test_every_refusal_names_a_svcsrv_variable() -> None:
    """The refusals of test_bad_settings_are_refused_clearly, and each server rule."""
    bad: list[dict[str, str]] = [
        {**PROD, "SVCSRV_SMTP_HOST": ""}, {"SVCSRV_PROCESSES": "2"},
        {"SVCSRV_WEBHOOK_TIMEOUT": "200"}, {"SVCSRV_ROUTER_ADDRESSES": "router.example.com"},
        {"SVCSRV_CHAIN_BACKEND": "json_rpc"}, {"SVCSRV_DNS_SERVER": "dns.example.com"},
        {"SVCSRV_MAX_HEAD": "300"}, {"SVCSRV_RUNTIME_FETCH_TIMEOUT": "0"},
        {"SVCSRV_WEBHOOK_RETRY_DELAYS": "5,-1"},
    ]
    for env in [*bad, *(env for env, _ in REFUSED)]:
        with pytest.raises(SettingsError) as refused:
            load_settings(env)
        assert "SVCSRV_" in str(refused.value), env


# Finding 16: production over dev parts is said at start.

def test_serve_says_its_mode_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    from router.cli import mode_line, report_mode

    dev = mode_line(load_settings({}))
    assert dev.startswith("mode: dev") and "not for production" in dev and "\n" not in dev
    production = load_settings({**PROD, **CHAIN, "SVCSRV_RELAYER_KEY": KEY})
    assert mode_line(production) == (
        "mode: production (database postgresql, chain json_rpc, 1 process)")
    with caplog.at_level("INFO", logger="router.cli"):
        report_mode(production)
    assert [r.getMessage() for r in caplog.records] == [mode_line(production)]
    assert "db-pass-7Q" not in caplog.text and "RPC-API-KEY" not in caplog.text


def test_production_on_sqlite_or_the_in_process_chain_is_a_loud_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    """Not a refusal: tests run production rules over SQLite (tests/router/test_processes.py)."""
    from router.cli import report_mode

    settings = load_settings({**PROD, "SVCSRV_DATABASE_URL": "sqlite:////srv/svc.db"})
    with caplog.at_level("INFO", logger="router.cli"):
        report_mode(settings)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2
    assert "production on SQLite (SVCSRV_DATABASE_URL)" in warnings[0]
    assert "SVCSRV_CHAIN_BACKEND=in_process" in warnings[1]


def test_each_process_sizes_its_database_pool() -> None:
    settings = load_settings({"SVCSRV_DB_POOL_SIZE": "3", "SVCSRV_DB_MAX_OVERFLOW": "0"})
    assert (settings.db_pool_size, settings.db_max_overflow) == (3, 0)
    assert (Settings().db_pool_size, Settings().db_max_overflow) == (10, 20)
    for bad in ({"SVCSRV_DB_POOL_SIZE": "0"}, {"SVCSRV_DB_MAX_OVERFLOW": "-1"}):
        with pytest.raises(SettingsError, match="SVCSRV_DB_POOL_SIZE"):
            load_settings(bad)
    engine = make_engine("postgresql://svc@127.0.0.1:9/svc", pool_size=3, max_overflow=1)
    assert isinstance(engine.pool, QueuePool)  # nothing connects until asked
    assert (engine.pool.size(), engine.pool._max_overflow) == (3, 1)


def test_secrets_can_come_from_files_and_never_show_in_refusals(tmp_path: Path) -> None:
    """``SVCSRV_<NAME>_FILE`` (a mounted Docker or Kubernetes secret) instead of the value in
    the environment, where ``docker inspect`` shows it."""
    secret = "s" * 40
    key_file, empty = tmp_path / "secret_key", tmp_path / "empty"
    key_file.write_text(secret + "\n")  # as `echo` writes it
    empty.write_text("\n")
    without = {k: v for k, v in PROD.items() if k != "SVCSRV_SECRET_KEY"}
    settings = load_settings({**without, "SVCSRV_SECRET_KEY_FILE": str(key_file)})
    assert settings.secret_key == secret
    refusals = {
        "both": {**PROD, "SVCSRV_SECRET_KEY_FILE": str(key_file)},
        "missing": {"SVCSRV_RELAYER_KEY_FILE": str(tmp_path / "nope")},
        "empty": {"SVCSRV_SMTP_PASSWORD_FILE": str(empty)},
    }
    for case, env in refusals.items():
        with pytest.raises(SettingsError) as refused:
            load_settings(env)
        assert "_FILE" in str(refused.value) and secret not in str(refused.value), case
