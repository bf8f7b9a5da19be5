"""Webhook URLs in a config meet the DNS rule of the webhook API at apply time, rollback
included: a name that now resolves to a private address is refused before anything is
written. The DNS answers come from a local server (the mocked edge of the world)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.config.test_config_api import config
from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.router.conftest import RouterFactory
from tests.support.dns import DnsServer, dns_server

P = "/api/developer/config"
PUBLIC = "93.184.216.34"  # a public address; never contacted, only resolved


@pytest.fixture
def harness(start_router: RouterFactory,
            sessions: sessionmaker[Session]) -> Iterator[tuple[World, DnsServer]]:
    records = {"first.shop-dev.com": [PUBLIC], "second.shop-dev.com": [PUBLIC]}
    with dns_server(records) as dns, start_router(
            allow_private_origins=False, dns_server=f"{dns.host}:{dns.port}") as router:
        developer_id, org_id = add_developer(sessions)
        add_owned_app(sessions, org_id, "game")
        yield World(router, sessions, developer_id, org_id), dns


def _document(host: str) -> dict[str, Any]:
    return config("game", webhooks=[{"url": f"https://{host}/hook"}],
                  runtime={"mode": "worker_quick_launch", "origin": "https://game.shop-dev.com"})


def test_rollback_refuses_a_webhook_name_that_now_resolves_privately(
        harness: tuple[World, DnsServer]) -> None:
    world, dns = harness
    with world.console() as console:
        applied = []
        for host in ("first.shop-dev.com", "second.shop-dev.com"):
            plan = console.post(f"{P}/plan", json={"config": _document(host)}).json()
            assert plan["errors"] == [], plan["errors"]
            answer = console.post(f"{P}/apply", json={
                "config": _document(host), "baseRevision": plan["baseRevision"]})
            assert answer.status_code == 201, answer.text
            applied.append(answer.json()["revision"]["id"])
        dns.records["first.shop-dev.com"] = ["10.1.2.3"]  # rebound since revision 1
        refused = console.post(f"{P}/rollback", json={"revision": applied[0],
                                                      "baseRevision": applied[1]})
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "config_plan_errors"
        assert [e["path"] for e in refused.json()["errors"]] == ["$.webhooks[0].url"]
        listed = console.get(f"{P}/revisions", params={"app": "game"}).json()["revisions"]
        assert [r["id"] for r in listed] == applied[::-1]  # nothing was recorded
        dns.records["first.shop-dev.com"] = [PUBLIC]
        rolled = console.post(f"{P}/rollback", json={"revision": applied[0],
                                                     "baseRevision": applied[1]})
        assert rolled.status_code == 201, rolled.text
        assert rolled.json()["revision"]["rollbackOf"] == applied[0]
