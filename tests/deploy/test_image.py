"""The server image (Dockerfile), built by scripts/image.sh with podman on a Debian base
made here, runs the topology's server: migrations with `svc-ops migrate`, then the image's
own command against the test PostgreSQL and Redis, on the host network and a loopback port.

The first build on a machine takes minutes (docs/deploy.md, "Container image"); later ones
reuse the base and the dependency layer.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import fresh_pg_database
from tests.support.services import free_port
from tests.support.waits import wait_for

IMAGE_SH = Path(__file__).resolve().parents[2] / "scripts" / "image.sh"
IMAGE = "localhost/svc-server:test"
HOSTS = {"api": "api.example.test", "portal": "portal.example.test",
         "console": "console.example.test", "docs": "docs.example.test"}

# Building from nothing (base file system, dependencies) took 3.5 minutes here.
pytestmark = pytest.mark.timeout(600)


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """podman with this machine's settings (scripts/image.sh)."""
    return subprocess.run(["bash", str(IMAGE_SH), "podman", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def image() -> str:
    built = subprocess.run(["bash", str(IMAGE_SH), "build", IMAGE], capture_output=True,
                           text=True, timeout=580, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip().splitlines()[-1] == IMAGE
    return IMAGE


@dataclass
class Deployment:
    """The image, and the `-e` options of a production server on a database that the
    image's `svc-ops migrate` migrated."""
    image: str
    env: list[str]


def production_environment(database_url: str, redis_url: str) -> dict[str, str]:
    return {
        "SVCSRV_DATABASE_URL": database_url, "SVCSRV_REDIS_URL": redis_url,
        # loopback only: the image's own default is every address
        "SVCSRV_BIND_HOST": "127.0.0.1",
        "SVCSRV_BASE_URL": f"https://{HOSTS['api']}",
        "SVCSRV_PORTAL_URL": f"https://{HOSTS['portal']}",
        "SVCSRV_CONSOLE_URL": f"https://{HOSTS['console']}",
        "SVCSRV_DOCS_URL": f"https://{HOSTS['docs']}",
        "SVCSRV_APPS_DOMAIN": "apps.example.test", "SVCSRV_APPS_SCHEME": "https",
        "SVCSRV_APPS_PORT": "", "SVCSRV_SECRET_KEY": secrets.token_urlsafe(32),
        "SVCSRV_SMTP_HOST": "127.0.0.1",  # required in production; these tests send no mail
    }


def env_options(env: dict[str, str]) -> list[str]:
    return [option for name, value in env.items() for option in ("-e", f"{name}={value}")]


@pytest.fixture(scope="module")
def deployment(image: str, pg_admin_url: str, redis_url: str) -> Deployment:
    env = env_options(production_environment(fresh_pg_database(pg_admin_url, None),
                                             redis_url))
    migrated = podman("run", "--rm", "--network", "host", *env, image, "svc-ops", "migrate")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return Deployment(image, env)


@dataclass
class Container:
    name: str
    port: int
    process: subprocess.Popen[str]
    printed: str | None = None

    def client(self, host: str) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}",
                            headers={"host": HOSTS[host]}, timeout=10)

    def answers(self) -> bool:
        try:
            with self.client("api") as api:
                return api.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def output(self) -> str:
        """What the server printed, once it has exited ("" before)."""
        if self.process.poll() is None:
            return ""
        if self.printed is None:
            self.printed = self.process.communicate()[0]  # and closes the pipe
        return self.printed


@contextmanager
def serving(deployment: Deployment) -> Iterator[Container]:
    """The image's own command on a free loopback port, until the block ends."""
    name, port = f"svc-image-test-{secrets.token_hex(4)}", free_port()
    process = subprocess.Popen(
        ["bash", str(IMAGE_SH), "podman", "run", "--rm", "--name", name, "--network", "host",
         *deployment.env, "-e", f"SVCSRV_BIND_PORT={port}", deployment.image],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    container = Container(name, port, process)
    try:
        wait_for(lambda: container.answers() or process.poll() is not None, 90,
                 "the server in the image answering /healthz")
        assert process.poll() is None, container.output()
        yield container
    finally:
        if process.poll() is None:
            podman("rm", "--force", "--time", "5", name)
            process.wait(timeout=30)
        container.output()  # closes the pipe


@pytest.fixture(scope="module")
def server(deployment: Deployment) -> Iterator[Container]:
    with serving(deployment) as container:
        yield container


def test_healthz_and_statusz_show_production_on_postgresql_and_redis(
        server: Container) -> None:
    with server.client("api") as api:
        assert api.get("/healthz").json() == {"status": "ok"}
        status = api.get("/statusz")
    assert status.status_code == 200, status.text
    checks = status.json()["checks"]
    assert status.json()["mode"] == "production"  # the image's own SVCSRV_MODE
    assert checks["database"] == checks["database"] | {"status": "ok", "backend": "postgresql"}
    assert checks["redis"]["status"] == "ok"


def test_console_signup_page_and_openapi_are_served(server: Container) -> None:
    with server.client("console") as console:
        page = console.get("/signup")
    assert page.status_code == 200
    assert re.search(r'<form[^>]+method="post"', page.text)
    # production: https console URL, so Secure and `__Host-` named (payments/cookies.py)
    assert page.headers["set-cookie"].startswith("__Host-svc_csrf=")
    assert "secure" in page.headers["set-cookie"].lower()
    with server.client("docs") as docs:
        spec = docs.get("/openapi.json").json()
    assert "/api/pay/{app}/{product}" in spec["paths"]


def test_healthcheck_passes_and_server_runs_unprivileged(server: Container) -> None:
    health = podman("healthcheck", "run", server.name)
    assert health.returncode == 0, health.stdout + health.stderr
    assert podman("exec", server.name, "id", "-un").stdout.strip() == "svc"


def test_the_fast_path_runs_compiled_and_the_image_has_no_compiler(server: Container) -> None:
    """The Dockerfile's build stage compiled it for the image's own Python (a build for
    other sources or another interpreter would read ``stale``); its toolchain stayed there."""
    # -I: the installed package the server runs, not the copy in the working directory
    checked = podman("exec", server.name, "python", "-I", "-c",
                     "from router import native, fast_protocol; "
                     "print(native.status(), fast_protocol.__file__)")
    assert checked.returncode == 0, checked.stderr
    state, module = checked.stdout.split()
    assert state == "compiled"
    assert "/site-packages/router/fast_protocol." in module and module.endswith(".so")
    for tool in ("gcc", "cc", "mypyc"):
        assert podman("exec", server.name, "sh", "-c", f"command -v {tool}").returncode != 0


def test_sigterm_stops_the_server_and_removes_the_container(deployment: Deployment) -> None:
    with serving(deployment) as container:
        container.process.terminate()  # `podman run` passes it on (--sig-proxy)
        assert container.process.wait(timeout=30) == 0
        assert "Application shutdown complete" in container.output()
        assert "fast path: compiled (mypyc)" in container.output()  # its own start report
        assert podman("container", "exists", container.name).returncode == 1
