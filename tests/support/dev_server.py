"""``svc-server dev`` as a real subprocess, as a person runs it: a fresh directory (an
empty ``var/``), no ``SVCSRV_*`` variables, its output read by a thread.

The child imports this checkout's code (``PYTHONPATH``): the ``svc-server`` script of an
editable install may point at another checkout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.services import free_port

REPO = Path(__file__).resolve().parents[2]
SVC_SERVER = str(Path(sys.executable).with_name("svc-server"))


@dataclass
class DevServer:
    proc: subprocess.Popen[str]
    port: int
    directory: Path
    lines: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def host(self, name: str) -> dict[str, str]:
        return {"host": f"{name}.localhost:{self.port}"}

    def output(self) -> str:
        with self._lock:
            return "".join(self.lines)

    def pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 10) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            found = pattern.search(self.output())
            if found:
                return found
            assert self.proc.poll() is None, "svc-server dev exited:\n" + self.output()
            assert time.monotonic() < deadline, f"no {pattern.pattern!r} in:\n" + self.output()
            time.sleep(0.05)


def dev_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVCSRV_", "SVC_"))}
    return {**env, "PYTHONPATH": str(REPO)}


@contextmanager
def dev_server(directory: Path, port: int | None = None) -> Iterator[DevServer]:
    """Start ``svc-server dev`` in ``directory``, wait until it answers, stop it (SIGINT)
    at the end; a traceback in its output fails the test."""
    port = port or free_port()
    proc = subprocess.Popen([SVC_SERVER, "dev", "--port", str(port)], cwd=directory,
                            env=dev_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    server = DevServer(proc, port, directory)
    reader = threading.Thread(target=server.pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(server.url + "/healthz", headers=server.host("api"), timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, "svc-server dev exited:\n" + server.output()
                assert time.monotonic() < deadline, "svc-server dev did not start"
                time.sleep(0.1)
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        assert proc.stdout is not None
        proc.stdout.close()
    assert "Traceback" not in server.output()
