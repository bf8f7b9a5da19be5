"""compose.yaml and its nginx template, checked without a container engine: the services and
their order, that every SVCSRV_* variable is one router/settings.py reads, that each process
gets settings production accepts, and that nginx accepts its configuration.

No Docker engine runs here and the Docker client has no compose plugin; Debian's
docker-compose 1.29 renders the file offline (docs/deploy.md, "Container image").
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from router.settings import ENV_PREFIX, Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]
SVC_SERVICES = {"migrate", "server-1", "server-2", "chain", "webhooks"}
# what an operator puts in .env: every ${NAME} that compose.yaml requires
OPERATOR = {
    "POSTGRES_PASSWORD": "pw", "SERVICE_DOMAIN": "example.com", "APPS_DOMAIN": "apps.example.com",
    "SECRET_KEY": "k" * 40, "SMTP_HOST": "smtp.example.com",
    "SMTP_FROM": "no-reply@example.com", "CHAIN_RPC_URL": "https://rpc.example.com",
    "SPENDER_ADDRESS": "0x" + "11" * 20, "ROUTER_ADDRESSES": "203.0.113.10",
    "SERVER_CHAIN_KEY": "0x" + "22" * 32, "RELAYER_KEY": "0x" + "33" * 32,
    "TLS_DIR": "/srv/tls",
}
_REFERENCE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error}, over the parsed file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        if env.get(name):
            return env[name]
        if kind == "?":
            raise KeyError(f"compose.yaml requires {name}")
        return rest if kind == "-" else ""

    text = _REFERENCE.sub(one, value)
    assert "$" not in text, f"an interpolation this test does not know: {value!r}"
    return text


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(parsed, dict)
    return dict(interpolate(parsed, OPERATOR))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    return {name: str(value) for name, value in service.get("environment", {}).items()}


def address(service: Mapping[str, Any]) -> str:
    return str(service["networks"]["edge"]["ipv4_address"])


class RecordingEnviron(dict[str, str]):
    """An environment that remembers every name asked for."""

    asked: set[str]

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)


def names_settings_read() -> set[str]:
    environ = RecordingEnviron()
    environ.asked = set()
    load_settings(environ)
    return {name for name in environ.asked if name.startswith(ENV_PREFIX)}


def test_the_topology_and_its_commands(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == {"postgres", "redis", "nginx", *SVC_SERVICES}
    commands = {name: services[name]["command"] for name in SVC_SERVICES}
    assert commands == {
        "migrate": ["svc-ops", "migrate"],
        "server-1": ["svc-server", "serve"], "server-2": ["svc-server", "serve"],
        "chain": ["svc-ops", "chain", "run"], "webhooks": ["svc-ops", "webhooks", "run"],
    }
    assert services["migrate"]["restart"] == "no"  # a one-shot
    assert {services[name]["image"] for name in SVC_SERVICES} == {"svc-server:latest"}


def test_start_order_waits_for_the_migration_and_healthy_servers(
        services: dict[str, dict[str, Any]]) -> None:
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in SVC_SERVICES - {"migrate"}:
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"}
    assert services["nginx"]["depends_on"] == {
        "server-1": {"condition": "service_healthy"},
        "server-2": {"condition": "service_healthy"}}


def test_every_svcsrv_variable_is_one_the_settings_read(
        services: dict[str, dict[str, Any]]) -> None:
    known = names_settings_read()
    assert "SVCSRV_PROCESSES" in known and "SVCSRV_RELAYER_KEY" in known  # the probe works
    for name in SVC_SERVICES:
        unknown = {v for v in environment(services[name]) if v.startswith(ENV_PREFIX)} - known
        assert not unknown, f"{name}: {unknown}"
    # nor a developer runtime's SVC_* (spec 4.11) in our processes
    assert not any(v.startswith("SVC_") for n in SVC_SERVICES for v in environment(services[n]))


def settings_of(service: Mapping[str, Any]) -> Settings:
    return load_settings(environment(service))


def test_each_process_gets_production_settings(services: dict[str, dict[str, Any]]) -> None:
    every = {name: settings_of(services[name]) for name in SVC_SERVICES}
    assert {s.mode for s in every.values()} == {"production"}
    # one database, one Redis, one secret: tokens and sealed webhook secrets cross processes
    assert len({(s.database_url, s.redis_url, s.secret_key) for s in every.values()}) == 1
    assert all(not s.chain_workers and not s.webhook_workers for s in every.values())


def test_svc_ops_needs_only_the_database_url_beside_the_images_env() -> None:
    """deploy.md's `podman run -e SVCSRV_DATABASE_URL=... svc-server svc-ops migrate`: the
    image's ENV says production; operator commands are not held to a server's rules."""
    image = dict(re.findall(r"(SVCSRV_\w+)=(\S+)", (ROOT / "Dockerfile").read_text()))
    assert image["SVCSRV_MODE"] == "production"
    env = {**image, "SVCSRV_DATABASE_URL": "postgresql://svc:pw@postgres:5432/svc"}
    assert load_settings(env, role="operator").database_url == env["SVCSRV_DATABASE_URL"]
    with pytest.raises(SettingsError):
        load_settings(env)  # a server needs the rest of the block
    with pytest.raises(SettingsError, match="SVCSRV_DATABASE_URL"):
        load_settings(image, role="operator")  # not a SQLite file in the working directory


def test_each_operator_command_accepts_the_shared_block(
        services: dict[str, dict[str, Any]]) -> None:
    """Every process gets the same block: the svc-ops services read it as svc-ops does."""
    for name in ("migrate", "chain", "webhooks"):
        settings = load_settings(environment(services[name]), role="operator")
        assert settings.mode == "production" and settings.apps_port is None


def test_servers_run_two_processes_behind_nginx_only(
        services: dict[str, dict[str, Any]]) -> None:
    nginx = address(services["nginx"])
    for name in ("server-1", "server-2"):
        settings = settings_of(services[name])
        assert settings.processes == 2
        assert [str(n) for n in settings.trusted_proxies] == [f"{nginx}/32"]
        assert settings.chain_backend == "json_rpc" and settings.relayer_key
        # a process that exits hands its queued connections to the other (docs/router.md)
        assert str(services[name]["sysctls"]["net.ipv4.tcp_migrate_req"]) == "1"
    assert address(services["server-1"]) != address(services["server-2"])


def test_the_chain_worker_sends_with_a_key_of_its_own(
        services: dict[str, dict[str, Any]]) -> None:
    worker = settings_of(services["chain"])
    assert worker.relayer_key == OPERATOR["RELAYER_KEY"]
    assert worker.relayer_key != settings_of(services["server-1"]).relayer_key
    assert services["webhooks"]["deploy"]["replicas"] == 2


def test_a_missing_required_value_is_refused() -> None:
    parsed = yaml.safe_load((ROOT / "compose.yaml").read_text())
    with pytest.raises(KeyError, match="SECRET_KEY"):
        interpolate(parsed, {k: v for k, v in OPERATOR.items() if k != "SECRET_KEY"})


def envsubst(template: str, env: Mapping[str, str]) -> str:
    """What nginx's image does to templates: ${NAME} of its environment, nothing else
    (nginx's own $host and the like stay)."""
    return re.sub(r"\$\{(\w+)\}", lambda m: env.get(m[1], m[0]), template)


@pytest.fixture
def nginx_conf(tmp_path: Path, services: dict[str, dict[str, Any]]) -> Path:
    """The template as nginx's image renders it, TLS_DIR's certificates in a directory
    standing in for the mount, and a main file including it as the image's does."""
    tls = tmp_path / "tls"
    tls.mkdir()
    ca = trustme.CA()
    for name, host in (("apps", f"*.{OPERATOR['APPS_DOMAIN']}"),
                       ("service", f"api.{OPERATOR['SERVICE_DOMAIN']}")):
        cert = ca.issue_cert(host)
        cert.private_key_pem.write_to_path(str(tls / f"{name}.key"))
        cert.cert_chain_pems[0].write_to_path(str(tls / f"{name}.crt"))
    mount = next(v for v in services["nginx"]["volumes"] if v.endswith(":/etc/nginx/tls:ro"))
    assert mount.startswith(OPERATOR["TLS_DIR"])
    template = (ROOT / "deploy/nginx/svc.conf.template").read_text()
    rendered = envsubst(template, environment(services["nginx"]))
    assert "${" not in rendered
    (tmp_path / "svc.conf").write_text(rendered.replace("/etc/nginx/tls/", f"{tls}/"))
    main = tmp_path / "nginx.conf"
    main.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
                    f"http {{\n    access_log off;\n    include {tmp_path}/svc.conf;\n}}\n")
    return main


def test_nginx_accepts_its_configuration(nginx_conf: Path) -> None:
    checked = subprocess.run(["nginx", "-t", "-e", "stderr", "-p", str(nginx_conf.parent),
                              "-c", str(nginx_conf)], capture_output=True, text=True,
                             timeout=30, check=False)
    assert checked.returncode == 0, checked.stderr


def test_nginx_sends_to_both_servers_on_their_port(
        services: dict[str, dict[str, Any]]) -> None:
    template = (ROOT / "deploy/nginx/svc.conf.template").read_text()
    upstream = re.findall(r"^\s*server (\S+);", template, re.MULTILINE)
    # the servers listen where the image says (they do not set the port themselves)
    port = re.search(r"SVCSRV_BIND_PORT=(\d+)", (ROOT / "Dockerfile").read_text())
    assert port and all("SVCSRV_BIND_PORT" not in environment(services[n])
                        for n in ("server-1", "server-2"))
    assert upstream == [f"{address(services[n])}:{port[1]}" for n in ("server-1", "server-2")]
    assert "server_name *.${APPS_DOMAIN};" in template
