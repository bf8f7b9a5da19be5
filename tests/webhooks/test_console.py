"""The console's webhook page: the endpoint and its recent deliveries, never the secret."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.ledger.flow import PayWorld, build_world
from tests.support.router import RouterFactory
from tests.webhooks.kit import (
    FAST,
    all_settled,
    console,
    create_endpoint,
    developer_of,
    pay,
    receiver,
    wait_until,
)


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router(**FAST) as router:
        yield build_world(router, sessions)


def test_console_webhook_page(world: PayWorld) -> None:
    with receiver(lambda n, event: "fail" if n == 0 else "ok") as hook, \
            console(world, developer_of(world)) as client:
        app_page = client.get("/apps/game")
        assert app_page.status_code == 200 and 'href="/apps/game/webhooks"' in app_page.text
        empty = client.get("/apps/game/webhooks")
        assert empty.status_code == 200 and "No webhook endpoint yet" in empty.text
        webhook, hook.secret = create_endpoint(client, "game", hook.url)
        pay(world, 2)
        wait_until(lambda: len(hook.ledger.grants()) == 2 and all_settled(world.sessions)(),
                   what="two deliveries")
        shown = client.get("/apps/game/webhooks")
        assert shown.status_code == 200
        text = shown.text
        assert webhook["id"] in text and hook.url in text and webhook["secretPreview"] in text
        assert text.count("payment.delivered") >= 2 and "<td>delivered</td>" in text
        assert "<td>2</td><td>200</td>" in text  # the first request got 503, the second 200
        assert hook.secret not in text and "sha256=" not in text
        other = client.get("/apps/nope/webhooks")
        assert other.status_code == 404
    with world.api() as anonymous:
        signed_out = anonymous.get("/apps/game/webhooks", headers={
            "host": f"console.localhost:{world.router.port}"})
        assert signed_out.status_code in (303, 302)
