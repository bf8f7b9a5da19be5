"""Ctrl-C during a ``svc`` command says "nothing was changed" only when that is true: a
real ``svc`` process, a real router behind a loopback proxy that holds one request until
the test lets it go, and a real SIGINT while the CLI waits for that request's answer.
Once a request that changes something has been sent, the service may carry it out
anyway (the held request is let through afterwards and lands), so the CLI says the change
may have been made and which command shows whether it was (svc/sent.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import func, select

from payments.config.models import ConfigRevision
from payments.developer.models import ApiKey
from tests.sdk.proxy import Proxy, running_proxy
from tests.support.cli_grant import save_grant
from tests.svc.test_cli_end_to_end import SVC, World

CONFIG = {"schemaVersion": "svc.config.v1", "app": {"slug": "game"},
          "products": [{"slug": "retry", "name": "Retry", "priceAtomic": "10000"}]}


class Hold:
    """Holds the first request whose body ``matches`` until released: the service has not
    answered it yet, and the CLI is waiting."""

    def __init__(self, matches: Callable[[bytes], bool]) -> None:
        self.matches = matches
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, n: int, body: bytes) -> bytes | None:
        if self.matches(body) and not self.reached.is_set():
            self.reached.set()
            self.release.wait(60)
        return None  # then forwarded to the service, as if it had been slow


@contextmanager
def held(world: World, scopes: str, hold: Hold) -> Iterator[Proxy]:
    with running_proxy(world.port, in_front=hold) as proxy:
        save_grant(world.sessions, world.developer_id, "game", scopes, world.config, proxy.url)
        try:
            yield proxy
        finally:
            hold.release.set()


def interrupted(world: World, proxy: Proxy, hold: Hold, *args: str
                ) -> tuple[int, str, str]:
    process = subprocess.Popen([SVC, *args, "--api-url", proxy.url], cwd=world.home,
                               env=world.env(), text=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert hold.reached.wait(30), process.communicate(timeout=5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, out, err


def error_of(out: str) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(out.strip().splitlines()[-1])["error"]
    return error


def count(world: World, model: type[Any]) -> int:
    with world.sessions() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def test_an_interrupted_key_creation_says_the_key_may_exist(world: World) -> None:
    hold = Hold(lambda body: b"idempotencyKey" in body)
    with held(world, "apps:read,keys:create", hold) as proxy:
        code, out, err = interrupted(world, proxy, hold, "keys", "create", "--label", "ci",
                                     "--idempotency", "run-7", "--json")
        assert code == 130, (out, err)
        error = error_of(out)
        assert error["code"] == "interrupted_change_unknown"
        assert "nothing was changed" not in error["message"]
        assert "POST /api/developer/apps/game/keys" in error["message"]
        assert "may have made that change" in error["message"]
        assert "--idempotency run-7" in error["message"]
        assert error["command"] == "svc keys list --app game"
        hold.release.set()  # the service answers the request the CLI no longer awaits
        for _ in range(100):
            if count(world, ApiKey):
                break
            threading.Event().wait(0.1)
    assert count(world, ApiKey) == 1  # it was right not to say "nothing was changed"


def test_an_interrupt_while_only_reading_says_nothing_was_changed(world: World) -> None:
    hold = Hold(lambda body: body == b"")  # the GET of the key list
    with held(world, "apps:read", hold) as proxy:
        code, out, err = interrupted(world, proxy, hold, "keys", "list")
    assert code == 130 and out == ""
    assert err.strip() == "svc: Interrupted; nothing was changed."


def test_config_apply_interrupted_after_its_post_points_at_the_revisions(
        world: World) -> None:
    (world.home / "svc.config.json").write_text(json.dumps(CONFIG))
    # Held at the plan (a POST that writes nothing): nothing was changed.
    plan = Hold(lambda body: b"baseRevision" not in body and b"schemaVersion" in body)
    with held(world, "apps:read,products:write", plan) as proxy:
        code, out, err = interrupted(world, proxy, plan, "config", "apply", "--yes", "--json")
    assert code == 130 and error_of(out)["code"] == "interrupted", (out, err)
    assert "nothing was changed" in error_of(out)["message"]
    assert count(world, ConfigRevision) == 0

    # Held at the apply itself: the change may have been made, and it is.
    apply = Hold(lambda body: b"baseRevision" in body)
    with held(world, "apps:read,products:write", apply) as proxy:
        code, out, err = interrupted(world, proxy, apply, "config", "apply", "--yes")
        assert code == 130, (out, err)
        lines = err.strip().splitlines()
        assert lines[0].startswith("svc: Interrupted after sending POST "
                                   "/api/developer/config/apply: the service may have made "
                                   "that change"), err
        assert "Check with `svc config revisions --app game`" in lines[0]
        assert lines[1:] == []  # the command is in the message, not repeated
        apply.release.set()
        for _ in range(100):
            if count(world, ConfigRevision):
                break
            threading.Event().wait(0.1)
    assert count(world, ConfigRevision) == 1
