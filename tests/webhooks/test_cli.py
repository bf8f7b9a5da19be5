"""``svc webhook ...`` against a real router, as a developer runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from payments.models import AllowlistStatus
from svc.grant_store import GrantStore, StoredGrant
from tests.factories import add_developer, add_owned_app
from tests.ledger.flow import PayWorld, build_world
from tests.support.router import RouterFactory, RunningRouter
from tests.support.services import free_port
from tests.webhooks.kit import (
    FAST,
    all_settled,
    attempts,
    developer_of,
    enqueue_events,
    grant_token,
    pay,
    receiver,
    wait_until,
)

SVC = str(Path(sys.executable).with_name("svc"))
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Cli:
    router: RunningRouter
    home: Path

    @property
    def url(self) -> str:
        return self.router.settings.base_url

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "SVC_API_URL"}
        env["SVC_CONFIG_DIR"] = str(self.home / "config")
        # The `svc` script of an editable install may import another checkout.
        env["PYTHONPATH"] = str(REPO)
        return subprocess.run([SVC, *args, "--api-url", self.url], cwd=self.home, env=env,
                              text=True, capture_output=True, timeout=60, check=False)

    def json(self, *args: str) -> dict[str, Any]:
        done = self.run(*args, "--json")
        assert done.returncode == 0, (done.stdout, done.stderr)
        body: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return body


@pytest.fixture
def cli(start_router: RouterFactory, sessions: sessionmaker[Session],
        tmp_path: Path) -> Iterator[Cli]:
    port = free_port()
    with start_router(**FAST, bind_port=port, base_url=f"http://127.0.0.1:{port}") as router:
        developer_id, org_id = add_developer(sessions)
        add_owned_app(sessions, org_id, "game", pay_to="0x" + "ab" * 20,
                      recipient_allowlist_status=AllowlistStatus.ALLOWED)
        token = grant_token(sessions, developer_id, "game", ["apps:read", "webhooks:write"])
        GrantStore(tmp_path / "config").save(StoredGrant(
            token=token, api_url=router.settings.base_url, app="game",
            scopes=("apps:read", "webhooks:write"), expires_at="2099-01-01T00:00:00Z"))
        yield Cli(router, tmp_path)


def test_webhook_commands(cli: Cli, sessions: sessionmaker[Session]) -> None:
    with receiver() as hook:
        url = hook.url.replace("127.0.0.1", "localhost")  # 127.0.0.1 is the API host here
        assert "No webhook endpoint on game." in cli.run("webhook", "list").stdout
        created = cli.json("webhook", "upsert", "--url", url)
        assert created["created"] is True and created["secret"].startswith("zwhsec_")
        hook.secret = created["secret"]
        text = cli.run("webhook", "list")
        assert url in text.stdout and created["secret"] not in text.stdout
        changed = cli.json("webhook", "upsert", "--url", url,
                           "--events", "payment.delivered,payment.settled")
        assert changed["created"] is False and "secret" not in changed
        assert changed["webhook"]["events"] == ["payment.delivered", "payment.settled"]
        refused = cli.run("webhook", "rotate")
        assert refused.returncode == 2 and "--yes" in refused.stderr
        rotated = cli.json("webhook", "rotate", "--yes")
        assert rotated["secret"] != created["secret"]
        hook.secret = rotated["secret"]
        tested = cli.json("webhook", "test")
        wait_until(lambda: len(hook.requests) == 1, what="the test event")
        assert hook.requests[0].event_id == tested["attempt"]["eventId"]
        disabled = cli.json("webhook", "update", "--disable")
        assert disabled["webhook"]["status"] == "disabled"
        cli.json("webhook", "update", "--enable")
        bad = cli.run("webhook", "upsert", "--url", "https://metadata.google.internal/x")
        assert bad.returncode == 2 and "refused" in bad.stderr
        # A failed event, retried by id.
        hook.plan = lambda n, event: "fail"
        from payments.models import App
        with sessions() as session:
            from sqlalchemy import select
            app = session.scalars(select(App).where(App.slug == "game")).one()
        (event_id,) = enqueue_events(sessions, app, 1)
        wait_until(lambda: attempts(sessions)[event_id].status.value == "failed",
                   what="schedule used up")
        listed = cli.run("webhook", "attempts", "--status", "failed").stdout
        assert event_id in listed and "tries=8" in listed
        hook.plan = lambda n, event: "ok"
        retried = cli.json("webhook", "retry", event_id)
        assert retried["attempt"]["eventId"] == event_id
        wait_until(lambda: attempts(sessions)[event_id].status.value == "delivered",
                   what="the manual retry")


class LoopbackWorld(PayWorld):
    """The paying world with its API host at 127.0.0.1, where the CLI can reach it (no
    ``*.localhost`` name resolves on every machine)."""

    def api(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.router.url, timeout=30, headers={
            "host": f"127.0.0.1:{self.router.port}", **headers})


@pytest.fixture
def paying_cli(start_router: RouterFactory, sessions: sessionmaker[Session],
               tmp_path: Path) -> Iterator[tuple[Cli, PayWorld]]:
    """The CLI signed in for the paying world's app, so purchases make real events."""
    port = free_port()
    with start_router(**FAST, bind_port=port, base_url=f"http://127.0.0.1:{port}") as router:
        built = build_world(router, sessions)
        world = LoopbackWorld(router, sessions, built.app, built.api_key, built.products)
        token = grant_token(sessions, developer_of(world), "game",
                            ["apps:read", "webhooks:write"])
        GrantStore(tmp_path / "config").save(StoredGrant(
            token=token, api_url=router.settings.base_url, app="game",
            scopes=("apps:read", "webhooks:write"), expires_at="2099-01-01T00:00:00Z"))
        yield Cli(router, tmp_path), world


def test_enable_tells_what_was_skipped_and_resend_skipped_sends_it_once(
        paying_cli: tuple[Cli, PayWorld]) -> None:
    cli, world = paying_cli
    with receiver() as hook:
        hook.secret = cli.json("webhook", "upsert", "--url",
                               hook.url.replace("127.0.0.1", "localhost"))["secret"]
        cli.json("webhook", "update", "--disable")
        deliveries = pay(world, 2)
        wait_until(all_settled(world.sessions), what="two payment.delivered skipped")
        assert hook.requests == []
        hint = "`svc webhook resend-skipped --app game`"
        disabled = cli.run("webhook", "list").stdout
        assert "2 event(s) came due while the endpoint was disabled" in disabled
        assert f"enable it, then resend them with {hint}" in disabled
        # Upsert changes the endpoint and keeps it disabled: it says the same.
        upserted = cli.run("webhook", "upsert", "--url", hook.url.replace("127.0.0.1",
                                                                          "localhost"))
        assert f"enable it, then resend them with {hint}" in upserted.stdout, upserted.stdout
        enabled = cli.run("webhook", "update", "--enable")
        assert enabled.returncode == 0, enabled.stderr
        assert ("2 event(s) came due while the endpoint was disabled and were not sent; "
                f"resend them in the order they were created with {hint}.") in enabled.stdout
        assert cli.json("webhook", "list")["webhooks"][0]["skippedWhileDisabled"] == 2
        resent = cli.run("webhook", "resend-skipped")
        assert resent.returncode == 0, resent.stderr
        assert "Resending 2 skipped event(s), oldest first" in resent.stdout
        wait_until(lambda: len(hook.ledger.grants()) == 2 and all_settled(world.sessions)(),
                   what="both resent and granted")
        assert sorted(d for _, d in hook.ledger.grants()) == sorted(deliveries)
        again = cli.json("webhook", "resend-skipped")
        assert again["resent"] == 0 and again["attempts"] == []
        assert "No skipped events were left to send." in cli.run(
            "webhook", "resend-skipped").stdout
        assert len(hook.requests) == 2
        assert "came due while" not in cli.run("webhook", "update", "--enable").stdout


def test_config_apply_that_enables_the_endpoint_tells_what_was_skipped(
        paying_cli: tuple[Cli, PayWorld]) -> None:
    """An apply that enables the endpoint says, as `svc webhook update --enable` does, how
    many events came due while it was disabled and which command resends them."""
    cli, world = paying_cli
    with receiver() as hook:
        url = hook.url.replace("127.0.0.1", "localhost")
        hook.secret = cli.json("webhook", "upsert", "--url", url)["secret"]
        assert cli.json("config", "init")["config"]["webhooks"] == [
            {"url": url, "events": ["payment.delivered"]}]
        cli.json("webhook", "update", "--disable")
        pay(world, 2)
        wait_until(all_settled(world.sessions), what="two payment.delivered skipped")
        applied = cli.run("config", "apply", "--yes")
        assert applied.returncode == 0, applied.stderr
        lines = applied.stdout.splitlines()
        assert '    status: "disabled" -> "enabled"' in lines
        assert lines[-2:] == ["Warnings:", (
            f"  {url}: 2 event(s) came due while the endpoint was disabled and were not sent; "
            "resend them in the order they were created with "
            "`svc webhook resend-skipped --app game`.")], applied.stdout
        cli.json("webhook", "update", "--disable")
        answer = cli.json("config", "apply", "--yes")["applied"]
        [warning] = [w for w in answer["warnings"]
                     if w["code"] == "webhook_skipped_while_disabled"]
        assert (warning["key"], warning["skippedWhileDisabled"]) == (url, 2)
        cli.json("webhook", "resend-skipped")
        wait_until(lambda: len(hook.ledger.grants()) == 2, what="both resent")
        cli.json("webhook", "update", "--disable")
        after = cli.run("config", "apply", "--yes")  # nothing left skipped: nothing said
        assert after.returncode == 0 and "came due while" not in after.stdout, after.stdout


def test_webhook_attempts_pages_with_before(cli: Cli, sessions: sessionmaker[Session]) -> None:
    """`--before` takes the page's cursor; the text output ends with the command that lists
    the next page while there is one, and events sharing one time are each listed once."""
    from sqlalchemy import select

    from payments.models import App
    with sessions() as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
    written = enqueue_events(sessions, app, 3)  # one transaction: one created_at
    first = cli.run("webhook", "attempts", "--limit", "2")
    assert first.returncode == 0, first.stderr
    *rows, more = first.stdout.splitlines()
    assert len(rows) == 2 and more.startswith(
        "Older events: svc webhook attempts --app game --limit 2 --before ")
    second = cli.run(*more.removeprefix("Older events: svc ").split())
    assert second.returncode == 0, second.stderr
    last = second.stdout.splitlines()
    assert len(last) == 1 and "Older events" not in second.stdout
    listed = [line.split()[0] for line in rows + last]
    assert sorted(listed) == sorted(written)
    page = cli.json("webhook", "attempts", "--limit", "2")
    assert [v["eventId"] for v in page["attempts"]] == listed[:2]
    older = cli.json("webhook", "attempts", "--limit", "2", "--before", page["nextBefore"])
    assert [v["eventId"] for v in older["attempts"]] == listed[2:]
    assert older["nextBefore"] is None
    none_left = cli.run("webhook", "attempts", "--before", "2000-01-01T00:00:00Z")
    assert none_left.stdout.strip() == "No older webhook events on game."
    refused = cli.run("webhook", "attempts", "--before", "yesterday")
    assert refused.returncode == 2 and "'before' must be the nextBefore" in refused.stderr
