"""``svc webhook rotate`` whose answer does not come back: the real ``svc`` against a real
router behind a loopback proxy that loses the answer after the service rotated, answers a
gateway's 502 in its place, or holds the request while the CLI is interrupted. The new
secret is in that one answer only, and the old one stops signing at once (svc/rotation.py),
so the CLI says whether the rotation was made, that the old secret no longer verifies
deliveries if it was, and that rotating again is the remedy."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from typing import Any

from sqlalchemy import select

from payments.webhooks.models import WebhookEndpoint
from tests.sdk.proxy import running_proxy
from tests.support.cli_grant import save_grant
from tests.svc.test_cli_end_to_end import SVC, World
from tests.svc.test_cli_groups import ok

HOOK = "http://127.0.0.2:9/api/svc/webhook"
SCOPES = "apps:read,webhooks:write"
GATEWAY_ERROR = (b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n"
                 b"content-length: 11\r\nconnection: close\r\n\r\nBad Gateway")
ROTATE_AGAIN = "svc webhook rotate --app game --yes"
SECRET = re.compile(r"zwhsec_[0-9a-f]{64}")
# The exchanges of `svc webhook rotate` through the proxy: the endpoint read, the rotation.
ROTATION = 1


def secret_of(world: World) -> tuple[str, str]:
    """The endpoint's (secret preview, when it was made), as the service holds them."""
    with world.sessions() as session:
        preview, made = session.execute(select(WebhookEndpoint.secret_preview,
                                               WebhookEndpoint.secret_created_at)).one()
    return preview, made.isoformat()


def with_endpoint(world: World) -> tuple[str, str]:
    save_grant(world.sessions, world.developer_id, "game", SCOPES, world.config, world.url)
    secret = ok(world, "webhook", "upsert", "--url", HOOK)["secret"]
    assert secret.startswith("zwhsec_")
    return secret_of(world)


def rotate(world: World, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    save_grant(world.sessions, world.developer_id, "game", SCOPES, world.config, url)
    return subprocess.run([SVC, "webhook", "rotate", "--yes", *extra, "--api-url", url],
                          cwd=world.home, env=world.env(), text=True, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60, check=False)


def error_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    return error


def test_a_rotation_made_whose_answer_was_lost_says_to_rotate_again(world: World) -> None:
    old_preview, old_made = with_endpoint(world)

    def lose_the_rotation(n: int, body: bytes, response: bytes) -> bytes | None:
        return None if n == ROTATION else response  # the service rotated; no answer comes

    with running_proxy(world.port, lose_the_rotation) as proxy:
        done = rotate(world, proxy.url, "--json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    new_preview, new_made = secret_of(world)
    assert (new_preview, new_made) != (old_preview, old_made)  # it was made
    error = error_of(done)
    assert (error["code"], error["command"]) == ("webhook_secret_lost", ROTATE_AGAIN)
    assert f"The rotation was made (the secret is now {new_preview}, made at " in \
        error["message"]
    assert f"so the old secret ({old_preview}) no longer verifies them" in error["message"]
    assert SECRET.search(done.stdout + done.stderr) is None

    text = rotate(world, world.url)  # the remedy, straight to the service: a new secret
    assert text.returncode == 0, text.stderr
    assert SECRET.search(text.stdout) and secret_of(world)[0] != new_preview


def test_a_rotation_a_gateway_refused_says_nothing_changed(world: World) -> None:
    old = with_endpoint(world)

    def gateway(n: int, body: bytes) -> bytes | None:
        return GATEWAY_ERROR if n == ROTATION else None  # never reaches the service

    with running_proxy(world.port, in_front=gateway) as proxy:
        done = rotate(world, proxy.url)
    assert done.returncode == 1 and secret_of(world) == old
    assert done.stderr.startswith("svc: The rotation was answered with HTTP 502, not its "
                                  "result (Unexpected answer from "), done.stderr
    assert f"The rotation was not made: the secret is still {old[0]}, and deliveries are " \
        "still signed with it." in done.stderr
    assert done.stdout == ""


def test_an_interrupted_rotation_says_what_a_lost_secret_means(world: World) -> None:
    old_preview, _ = with_endpoint(world)
    reached, release = threading.Event(), threading.Event()

    def hold(n: int, body: bytes) -> bytes | None:
        if n == ROTATION:
            reached.set()
            release.wait(60)
        return None  # then forwarded: the service rotates after the CLI stopped waiting

    with running_proxy(world.port, in_front=hold) as proxy:
        save_grant(world.sessions, world.developer_id, "game", SCOPES, world.config, proxy.url)
        process = subprocess.Popen([SVC, "webhook", "rotate", "--yes", "--api-url", proxy.url],
                                   cwd=world.home, env=world.env(), text=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        try:
            assert reached.wait(30), process.communicate(timeout=5)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, (out, err)
        message = err.strip()
        assert message.startswith("svc: Interrupted after sending POST /api/developer/apps/"
                                  "game/webhooks/zwh_"), message
        assert f"so the old one ({old_preview}) no longer verifies them" in message
        assert f"run `{ROTATE_AGAIN}` again" in message
        assert message.endswith("Check with `svc webhook list --app game` before running the "
                                "command again.")
        for _ in range(100):  # the held request lands: the note was right to warn
            if secret_of(world)[0] != old_preview:
                break
            threading.Event().wait(0.1)
    assert secret_of(world)[0] != old_preview
