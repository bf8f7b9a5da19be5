"""compose.yaml and its nginx template, checked without a container engine: the services and
their order, that every SVCSRV_* variable is one router/settings.py reads, that each process
gets settings production accepts, and that nginx accepts its configuration.

No Docker engine runs here and the Docker client has no compose plugin; Debian's
docker-compose 1.29 renders the file offline (docs/deploy.md, "Container image").
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web

from ops.cluster.processes import Processes, free_port
from ops.cluster.services import start_nginx
from ops.cluster.tls import make_edge_tls
from ops.cluster.topology import NGINX_CONF, edge_conf, edge_names
from router.headers import EDGE_CONTROLS, FOREIGN_FORWARDING
from router.settings import ENV_PREFIX, Settings, SettingsError, load_settings
from tests.support.servers import AiohttpServer
from tests.support.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]
SVC_SERVICES = {"migrate", "server-1", "server-2", "chain", "webhooks"}
# what an operator puts in .env: every ${NAME} that compose.yaml requires
OPERATOR = {
    "POSTGRES_PASSWORD": "pw", "SERVICE_DOMAIN": "example.com", "APPS_DOMAIN": "apps.example.com",
    "SECRET_KEY": "k" * 40, "SMTP_HOST": "smtp.example.com",
    "SMTP_FROM": "no-reply@example.com", "CHAIN_RPC_URL": "https://rpc.example.com",
    "SPENDER_ADDRESS": "0x" + "11" * 20, "ROUTER_ADDRESSES": "203.0.113.10",
    "RELAYER_KEY": "0x" + "33" * 32,
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


def test_only_the_servers_keep_the_images_http_healthcheck(
        services: dict[str, dict[str, Any]]) -> None:
    """The Dockerfile's HEALTHCHECK asks /healthz, which only `svc-server serve` answers:
    the svc-ops processes turn it off instead of showing "unhealthy" for good."""
    assert "HEALTHCHECK CMD" in (ROOT / "Dockerfile").read_text()
    for name in ("migrate", "chain", "webhooks"):
        assert services[name]["healthcheck"] == {"disable": True}, name
    for name in ("server-1", "server-2"):
        assert "healthcheck" not in services[name], name  # the image's, which nginx waits on


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
        # the servers read the chain with no key at all (docs/deploy.md)
        assert settings.chain_backend == "json_rpc" and settings.relayer_key is None
        # a process that exits hands its queued connections to the other (docs/router.md)
        assert str(services[name]["sysctls"]["net.ipv4.tcp_migrate_req"]) == "1"
    assert address(services["server-1"]) != address(services["server-2"])


def test_only_the_chain_worker_has_a_relayer_key(
        services: dict[str, dict[str, Any]]) -> None:
    worker = settings_of(services["chain"])
    assert worker.relayer_key == OPERATOR["RELAYER_KEY"]
    keyed = {name for name in SVC_SERVICES
             if "SVCSRV_RELAYER_KEY" in environment(services[name])}
    assert keyed == {"chain"}
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
    ca.cert_pem.write_to_path(str(tls / "ca.pem"))
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
    upstream = re.findall(r"^\s*server (\S+) max_fails=1 fail_timeout=5s;", template,
                          re.MULTILINE)
    # the servers listen where the image says (they do not set the port themselves)
    port = re.search(r"SVCSRV_BIND_PORT=(\d+)", (ROOT / "Dockerfile").read_text())
    assert port and all("SVCSRV_BIND_PORT" not in environment(services[n])
                        for n in ("server-1", "server-2"))
    assert upstream == [f"{address(services[n])}:{port[1]}" for n in ("server-1", "server-2")]


# -- forwarding headers at the edge (deploy walk 25, findings 1 and 12) -----------------

def set_headers(conf: str) -> dict[str, str]:
    """``proxy_set_header NAME VALUE;`` lines, names lower-cased."""
    return {name.lower(): value for name, value in
            re.findall(r"^\s*proxy_set_header (\S+) (\S+);", conf, re.MULTILINE)}


@pytest.mark.parametrize("which", ["compose template", "cluster"])
def test_the_edge_writes_our_forwarding_headers_and_clears_the_others(which: str) -> None:
    # A client's own X-Real-IP, X-Original-URL... must not reach the servers: nginx clears
    # every forwarding header the router knows beyond the three it sets.
    if which == "cluster":
        conf, host = NGINX_CONF, "$host:$server_port"  # the cluster's edge is not on 443
    else:
        conf, host = (ROOT / "deploy/nginx/svc.conf.template").read_text(), "$host"
    headers = set_headers(conf)
    assert headers["x-forwarded-for"] == "$remote_addr"  # replaced, not appended to
    assert headers["x-forwarded-proto"] == "$scheme"
    assert headers["x-forwarded-host"] == host
    cleared = {name for name, value in headers.items() if value == '""'}
    assert cleared == {name.decode() for name in FOREIGN_FORWARDING}
    assert len(re.findall(r"proxy_set_header X-Forwarded-For ", conf)) == 1


def test_the_template_matches_the_tested_edge() -> None:
    # what ops/cluster/topology.py's nginx does and the fault tests rely on
    template = (ROOT / "deploy/nginx/svc.conf.template").read_text()
    log_format = re.search(r"log_format edge ([^;]*);", template)
    assert log_format and "$upstream_addr" in log_format[1]
    assert "$upstream_status" in log_format[1]
    assert "$request_uri" not in log_format[1] and "$args" not in log_format[1]
    # the path as sent, less the query, in both (not $uri: decoded and normalized)
    cluster_format = re.search(r"log_format edge ([^;]*);", NGINX_CONF)
    assert cluster_format
    for conf, logged in ((template, log_format[1]), (NGINX_CONF, cluster_format[1])):
        assert '$request_uri $request_path {' in conf and '"~^(?<path>[^?]*)" $path;' in conf
        assert "$request_path" in logged and "$uri" not in logged
    assert template.count("access_log /var/log/nginx/access.log edge;") == 2
    for line in ("proxy_connect_timeout 2s;", "proxy_next_upstream error timeout;"):
        assert line in template and line in NGINX_CONF


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _tls_answer(port: int, sni: str, ca: Path, request: str) -> tuple[bytes, bytes]:
    """``request`` (a head, ``Connection: close`` added) over TLS to 127.0.0.1:``port``
    naming ``sni``; the answer's head and body."""
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=sni) as tls:
        tls.sendall(f"{request}Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def _tls_send(port: int, sni: str, ca: Path, request: str) -> tuple[int, bytes]:
    """:func:`_tls_answer`'s status and body."""
    head, body = _tls_answer(port, sni, ca, request)
    return int(head.split(b" ", 2)[1]), body


def _tls_get(port: int, host: str, ca: Path, headers: list[tuple[str, str]],
             target: str = "/echo", sni: str | None = None) -> dict[str, str]:
    """What the echo server behind the edge received for a GET of ``target``."""
    sent = "".join(f"{name}: {value}\r\n" for name, value in headers)
    status, body = _tls_send(port, sni or host, ca,
                             f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{sent}")
    assert status == 200, body
    return {name: value for name, value in json.loads(body)}


def _echo_app(seen: list[dict[str, str]]) -> web.Application:
    """Answers every GET with the headers it received, as [name, value] pairs, and keeps
    them in ``seen``. ``/steer``'s answer tells the nginx in front to redirect internally,
    to a path of the origin's choosing and with the client's request headers: the router
    drops that header, and the edge must not act on one that reached it all the same."""
    async def echo(request: web.Request) -> web.Response:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        answer = web.json_response([[k.lower(), v] for k, v in request.headers.items()])
        if request.path == "/steer":
            answer.headers["X-Accel-Redirect"] = "/landed?steered=1"
        return answer

    app = web.Application()
    app.router.add_get("/{tail:.*}", echo)
    return app


SPOOFED = [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Host", "evil.example"),
           ("X-Forwarded-Proto", "http"), ("X-Real-IP", "6.6.6.6"),
           ("True-Client-IP", "6.6.6.6"), ("X-Original-URL", "/admin"),
           ("Forwarded", "for=6.6.6.6")]


@dataclass
class TemplateEdge:
    """The rendered template running in real nginx in front of an echo server."""

    plain: int  # stands for port 80
    tls: int  # stands for port 443
    ca: Path
    origin: int
    seen: list[dict[str, str]]  # the heads the echo server received
    log: Path  # nginx's access log


@pytest.fixture
def template_edge(nginx_conf: Path, tmp_path: Path) -> Iterator[TemplateEdge]:
    # Listening on loopback ports, its upstream the echo server, its log in the temporary
    # directory.
    seen: list[dict[str, str]] = []
    plain, tls = free_port(), free_port()
    conf = tmp_path / "svc.conf"
    text = re.sub(r"server 172\.30\.0\.1[12]:8000", "server 127.0.0.1:{origin}",
                  conf.read_text())
    text = text.replace("listen 80 ", f"listen 127.0.0.1:{plain} ")
    text = text.replace("listen 80;", f"listen 127.0.0.1:{plain};")
    text = text.replace("listen 443 ", f"listen 127.0.0.1:{tls} ")
    text = text.replace("/var/log/nginx/", f"{tmp_path}/")
    # in the foreground, so that the test holds the process it stops
    user = "user root root;\n" if os.geteuid() == 0 else ""  # workers read the 0600 key
    nginx_conf.write_text(f"daemon off;\n{user}{nginx_conf.read_text()}")
    with AiohttpServer(_echo_app(seen)) as origin:
        conf.write_text(text.replace("{origin}", str(origin.port)))
        errors = (tmp_path / "nginx.err").open("w")
        nginx = subprocess.Popen(["nginx", "-e", "stderr", "-p", str(tmp_path),
                                  "-c", str(nginx_conf)], stdout=errors, stderr=errors)
        try:
            wait_for(lambda: _listening(tls) or nginx.poll() is not None, 20, "nginx listening")
            assert nginx.poll() is None, (tmp_path / "nginx.err").read_text()
            yield TemplateEdge(plain, tls, tmp_path / "tls" / "ca.pem", origin.port, seen,
                               tmp_path / "access.log")
        finally:
            nginx.terminate()
            nginx.wait(timeout=20)
            errors.close()


def test_spoofed_forwarding_headers_stop_at_the_rendered_template(
        template_edge: TemplateEdge) -> None:
    edge, host = template_edge, f"demo.{OPERATOR['APPS_DOMAIN']}"
    received = _tls_get(edge.tls, host, edge.ca, SPOOFED)
    # A Host we do not serve, behind the handshake of one we do: refused at the edge,
    # never passed on as a trusted X-Forwarded-Host.
    refused = [_tls_send(edge.tls, host, edge.ca, f"GET /echo HTTP/1.1\r\nHost: {forged}\r\n")
               for forged in ("evil.example", OPERATOR["APPS_DOMAIN"])]
    # A request line naming a host wins over the Host header (RFC 9112, 3.2.2).
    absolute = _tls_get(edge.tls, "evil.example", edge.ca, [],
                        target=f"https://{host}/echo", sni=host)
    forwarding = {name: value for name, value in received.items()
                  if name in {n.decode() for n in FOREIGN_FORWARDING}
                  or name.startswith("x-forwarded")}
    assert forwarding == {"x-forwarded-for": "127.0.0.1", "x-forwarded-proto": "https",
                          "x-forwarded-host": host}
    assert [status for status, _ in refused] == [421, 421]
    assert (absolute["host"], absolute["x-forwarded-host"]) == (host, host)
    assert len(edge.seen) == 2  # the refused never reached the servers
    log = edge.log.read_text().splitlines()
    assert len(log) == 2 and all(f"127.0.0.1:{edge.origin} 200 " in line for line in log)


def ignored_headers(conf: str) -> set[str]:
    """The names of the ``proxy_ignore_headers`` line (one: the directive is not additive),
    lower-cased."""
    lines = re.findall(r"^\s*proxy_ignore_headers ([^;]+);", conf, re.MULTILINE)
    assert len(lines) == 1, lines
    return {name.lower() for name in lines[0].split()}


@pytest.mark.parametrize("which", ["compose template", "cluster"])
def test_the_edge_ignores_every_edge_control_the_router_drops(which: str) -> None:
    conf = NGINX_CONF if which == "cluster" else (
        ROOT / "deploy/nginx/svc.conf.template").read_text()
    assert ignored_headers(conf) == {name.decode() for name in EDGE_CONTROLS}


def steered_once(port: int, sni: str, ca: Path, host: str, seen: list[dict[str, str]]) -> None:
    """GET /steer through the edge: relayed as it came (less the X-Accel-* nginx never
    passes on), not /landed fetched in its place."""
    head, body = _tls_answer(port, sni, ca, f"GET /steer HTTP/1.1\r\nHost: {host}\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert len(seen) == 1, "the edge redirected internally on the origin's X-Accel-Redirect"
    assert json.loads(body)
    assert b"x-accel-" not in head.lower()


def test_the_rendered_template_ignores_x_accel_from_behind(template_edge: TemplateEdge) -> None:
    edge, host = template_edge, f"demo.{OPERATOR['APPS_DOMAIN']}"
    steered_once(edge.tls, host, edge.ca, host, edge.seen)
    assert len(edge.log.read_text().splitlines()) == 1


def test_the_cluster_edge_ignores_x_accel_from_behind(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    edge = free_port()
    tls = make_edge_tls(tmp_path / "tls", ["api.localhost", "127.0.0.1"], "apps.localhost")
    procs = Processes()
    with AiohttpServer(_echo_app(seen)) as origin:
        try:
            start_nginx(procs, tmp_path / "nginx",
                        edge_conf(tmp_path / "nginx", [origin.port], edge, tls,
                                  edge_names(Settings())), edge)
            steered_once(edge, "127.0.0.1", tls.ca, f"demo.apps.localhost:{edge}", seen)
        finally:
            procs.stop_all()


def _handshake(port: int, sni: str) -> bool:
    """Whether nginx completes a TLS handshake for ``sni``, whatever its certificate
    names: the question is which server block took the name, not whether we trust it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            context.wrap_socket(raw, server_hostname=sni).close()
        except ssl.SSLError:
            return False
    return True


def test_the_rendered_template_serves_one_label_under_the_apps_domain(
        template_edge: TemplateEdge) -> None:
    # `*.apps.example.com` in nginx also matches `a.b.apps.example.com`, which the router
    # answers as no host of ours and the wildcard certificate does not cover: the apps
    # server block takes one label only, and the rest falls to the default server.
    edge, apps = template_edge, OPERATOR["APPS_DOMAIN"]
    sni = f"demo.{apps}"

    def status(host: str) -> int:
        return _tls_send(edge.tls, sni, edge.ca, f"GET /echo HTTP/1.1\r\nHost: {host}\r\n")[0]

    served = {host: status(host) for host in (f"demo.{apps}", f"DEMO.{apps}", f"a-1.{apps}")}
    refused = {host: status(host) for host in (
        f"a.b.{apps}", f"x.demo.{apps}", f"demo.{apps.replace('.', '-')}",
        f"demo.{apps.replace('.', 'x', 1)}", f"a_b.{apps}")}
    assert served == dict.fromkeys(served, 200)
    assert refused == dict.fromkeys(refused, 421)
    assert len(edge.seen) == len(served)  # the refused never reached the servers
    # The handshake too: a name of several labels gets no certificate of ours.
    assert _handshake(edge.tls, f"demo.{apps}")
    assert not _handshake(edge.tls, f"a.b.{apps}")


def template_server_names(template: str) -> dict[str, set[str]]:
    """The ``server_name`` names of the template's non-default server blocks, by the port
    they listen on."""
    names: dict[str, set[str]] = {}
    for block in re.findall(r"^server \{(.*?)^\}", template, re.MULTILINE | re.DOTALL):
        listen = re.search(r"^\s*listen (\d+)([^;]*);", block, re.MULTILINE)
        named = re.search(r"^\s*server_name ([^;]+);", block, re.MULTILINE)
        assert listen, block
        if named:
            assert "default_server" not in listen[2], block
            names.setdefault(listen[1], set()).update(named[1].split())
    return names


def test_port_80_redirects_the_names_the_tls_servers_serve() -> None:
    template = (ROOT / "deploy/nginx/svc.conf.template").read_text()
    names = template_server_names(template)
    assert names["80"] == names["443"] and len(names["443"]) == 5


def _plain_send(port: int, request: str) -> tuple[int, str | None]:
    """``request`` (a head, ``Connection: close`` added) in plain HTTP to 127.0.0.1:``port``;
    the answer's status and ``Location``."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{request}Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    lines = answer.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    location = [line.split(":", 1)[1].strip() for line in lines[1:]
                if line.lower().startswith("location:")]
    return int(lines[0].split(" ", 2)[1]), location[0] if location else None


# Targets as a client may send them, and the path the access log must show for each: as
# sent, less the query. Decoded ($uri), the first two were logged as `/c"d` (the dot
# segments resolved, hiding what was asked for) and `/x?code=...`; a decoded %20 split the
# line's fields.
LOGGED_TARGETS = {
    "/svc-auth-return?app=demo&code=summary-code-value": "/svc-auth-return",
    "/a%20b/%2e%2e/c%22d?q=1": "/a%20b/%2e%2e/c%22d",
    "/x%3Fcode=in-the-path": "/x%3Fcode=in-the-path",
    "/plain": "/plain",
}


def test_the_rendered_template_logs_each_path_as_sent_without_its_query(
        template_edge: TemplateEdge) -> None:
    edge, host = template_edge, f"demo.{OPERATOR['APPS_DOMAIN']}"
    for target in LOGGED_TARGETS:
        status, _ = _tls_send(edge.tls, host, edge.ca, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n")
        assert status == 200, target
    # The request line's host is the one served, and logged (RFC 9112, 3.2.2).
    status, _ = _tls_send(edge.tls, host, edge.ca,
                          f"GET https://{host}/abs?code=x HTTP/1.1\r\nHost: evil.example\r\n")
    assert status == 200
    lines = edge.log.read_text().splitlines()
    # addr [time zone] status method host+path upstream upstream-status time
    fields = [line.split() for line in lines]
    assert [len(f) for f in fields] == [9] * 5, lines
    assert [f[5] for f in fields] == [f"{host}{path}" for path in
                                      [*LOGGED_TARGETS.values(), "/abs"]]
    assert not [line for line in lines if "code=x" in line or "summary-code" in line
                or "?" in line]


def test_port_80_redirects_our_hosts_only(template_edge: TemplateEdge) -> None:
    # Port 80 sent any Host to https://that-host/: a redirect we wrote for names we do not
    # serve (to a refused handshake, or wherever a forged Host pointed). Ours move to https,
    # the rest get 421 as on 443.
    edge, domain, apps = template_edge, OPERATOR["SERVICE_DOMAIN"], OPERATOR["APPS_DOMAIN"]

    def get(host: str, target: str = "/pay?x=1") -> tuple[int, str | None]:
        return _plain_send(edge.plain, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n")

    ours = [f"{name}.{domain}" for name in ("api", "portal", "console", "docs")]
    ours += [f"demo.{apps}", f"a-1.{apps}"]
    redirected = {host: get(host) for host in ours}
    refused = {host: get(host)[0] for host in (
        "evil.example", domain, apps, f"a.b.{apps}", f"api.{domain}.evil.example",
        f"demo.{apps.replace('.', '-')}", "203.0.113.10")}
    no_host = _plain_send(edge.plain, "GET / HTTP/1.0\r\n")[0]
    # The request line's host is the one nginx picks the server by (RFC 9112, 3.2.2).
    forged_line = get(f"api.{domain}", "http://evil.example/pay")[0]
    absolute = get("evil.example", f"http://api.{domain}/pay")
    assert redirected == {host: (301, f"https://{host}/pay?x=1") for host in ours}
    assert refused == dict.fromkeys(refused, 421)
    assert (no_host, forged_line) == (421, 421)
    assert absolute == (301, f"https://api.{domain}/pay")
    assert edge.seen == []  # port 80 proxies nothing


def test_the_cluster_edge_serves_only_our_hosts(tmp_path: Path) -> None:
    # ops/cluster's nginx, rendered as the cluster renders it, in front of an echo server.
    # It had one server block: the default for its port, every Host was served and passed
    # on as X-Forwarded-Host, which the servers believe from it.
    seen: list[dict[str, str]] = []
    edge = free_port()
    tls = make_edge_tls(tmp_path / "tls", ["api.localhost", "127.0.0.1"], "apps.localhost")
    names = edge_names(Settings())
    # One label under the apps domain, as the router routes: `*.apps.localhost` would
    # take `a.b.apps.localhost` too, and pass it on for the router to answer as unknown.
    assert names == ["api.localhost", "portal.localhost", "console.localhost",
                     "docs.localhost", "launch.localhost", r"~^[a-z0-9-]+\.apps\.localhost$"]
    procs = Processes()
    with AiohttpServer(_echo_app(seen)) as origin:
        try:
            start_nginx(procs, tmp_path / "nginx",
                        edge_conf(tmp_path / "nginx", [origin.port], edge, tls, names), edge)

            def get(host: str, target: str = "/echo") -> tuple[int, bytes]:
                return _tls_send(edge, "127.0.0.1", tls.ca,
                                 f"GET {target} HTTP/1.1\r\nHost: {host}\r\n")

            served = {host: get(f"{host}:{edge}") for host in (
                "api.localhost", "CONSOLE.localhost", "launch.localhost", "demo.apps.localhost",
                "DEMO.apps.localhost")}
            refused = [get(host) for host in (
                "evil.example", f"evil.example:{edge}", f"localhost:{edge}",
                f"apps.localhost:{edge}", "127.0.0.1", f"api.localhost.evil.example:{edge}",
                f"a.b.apps.localhost:{edge}", f"x.demo.apps.localhost:{edge}",
                f"demo.apps-localhost:{edge}", f"demo.appsxlocalhost:{edge}")]
            no_host = _tls_send(edge, "127.0.0.1", tls.ca, "GET /echo HTTP/1.0\r\n")
            # The request line's host is the one served (RFC 9112, 3.2.2), and so the one
            # passed on, whatever the Host header says.
            absolute = get("evil.example", f"https://demo.apps.localhost:{edge}/echo")
            forged_line = get(f"demo.apps.localhost:{edge}", "https://evil.example/echo")
        finally:
            procs.stop_all()
    assert {host: status for host, (status, _) in served.items()} == dict.fromkeys(served, 200)
    assert [status for status, _ in [*refused, no_host, forged_line]] == [421] * 12
    assert [(h["host"], h["x-forwarded-host"]) for h in seen] == [
        (f"{host.lower()}:{edge}",) * 2 for host in served] + [
        (f"demo.apps.localhost:{edge}",) * 2]
    assert absolute[0] == 200


def test_the_cluster_edge_logs_each_path_as_sent_without_its_query(tmp_path: Path) -> None:
    # Query strings carry short-lived codes (/svc-auth-return?code=): the cluster's edge
    # logged $request_uri; now the path as sent, as the production template. The host is
    # the one served and passed on, not a Host header the request line overrode.
    edge = free_port()
    host = f"demo.apps.localhost:{edge}"
    tls = make_edge_tls(tmp_path / "tls", ["api.localhost", "127.0.0.1"], "apps.localhost")
    procs = Processes()
    with AiohttpServer(_echo_app([])) as origin:
        try:
            start_nginx(procs, tmp_path / "nginx",
                        edge_conf(tmp_path / "nginx", [origin.port], edge, tls,
                                  edge_names(Settings())), edge)
            for target in LOGGED_TARGETS:
                status, _ = _tls_send(edge, "127.0.0.1", tls.ca,
                                      f"GET {target} HTTP/1.1\r\nHost: {host}\r\n")
                assert status == 200, target
            status, _ = _tls_send(edge, "127.0.0.1", tls.ca,
                                  f"GET https://{host}/abs?code=x HTTP/1.1\r\n"
                                  "Host: evil.example\r\n")
            assert status == 200
        finally:
            procs.stop_all()
    lines = (tmp_path / "nginx" / "access.log").read_text().splitlines()
    # status method host+path upstream upstream-status time
    fields = [line.split() for line in lines]
    assert [len(f) for f in fields] == [6] * 5, lines
    assert [f[2] for f in fields] == [f"{host}{path}" for path in
                                      [*LOGGED_TARGETS.values(), "/abs"]]
    assert not [line for line in lines if "code=x" in line or "summary-code" in line
                or "?" in line]
    # the fields bench/topology_figures.py and tests/deploy/kit.py read stay where they were
    assert {f[3] for f in fields} == {f"127.0.0.1:{origin.port}"}


def test_postgresql_takes_every_pool_at_its_fullest(services: dict[str, dict[str, Any]]) -> None:
    """Each svc process has its own pool; at their fullest they all fit in PostgreSQL's
    max_connections (the image's default is 100), and each names itself in
    pg_stat_activity."""
    needed = 0
    for name in SVC_SERVICES:
        service, settings = services[name], settings_of(services[name])
        replicas = int(service.get("deploy", {}).get("replicas", 1))
        needed += replicas * settings.processes * (settings.db_pool_size
                                                   + settings.db_max_overflow)
        assert environment(service)["PGAPPNAME"].startswith("svc-"), name
    command = services["postgres"]["command"]
    limits = [int(arg.split("=", 1)[1]) for arg in command if arg.startswith("max_connections=")]
    assert limits and limits[0] >= needed > 100, (limits, needed)
