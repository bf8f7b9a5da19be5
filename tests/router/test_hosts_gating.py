"""Host dispatch, gating pages, legacy redirects and health, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from payments.models import AppStatus, DomainRequestStatus, ListingStatus, Product, RuntimeStatus
from tests.factories import add_app
from tests.router.conftest import RouterFactory
from tests.support.servers import AiohttpServer


class CountingOrigin:
    def __init__(self) -> None:
        self.requests: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        return web.Response(text="from origin")


@pytest.fixture
def counting_origin() -> Iterator[tuple[AiohttpServer, CountingOrigin]]:
    origin = CountingOrigin()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", origin.handle)
    with AiohttpServer(app) as server:
        yield server, origin


def get(url: str, host: str, path: str = "/") -> httpx.Response:
    return httpx.get(url + path, headers={"host": host}, follow_redirects=False, timeout=10)


def test_unknown_hosts_404_never_proxied(
    start_router: RouterFactory, sessions: sessionmaker[Session],
    counting_origin: tuple[AiohttpServer, CountingOrigin],
) -> None:
    server, origin = counting_origin
    add_app(sessions, "game", server.url)
    with start_router() as router:
        for host in ("evil.example", "127.0.0.1", f"x.game.apps.localhost:{router.port}",
                     f"game.apps.localhost.evil.example:{router.port}", "apps.localhost"):
            response = get(router.url, host)
            assert response.status_code == 404, host
            assert "Unknown host" in response.text
        assert get(router.url, router.host("game")).text == "from origin"
    assert origin.requests == ["/"]


@pytest.mark.parametrize(("fields", "status", "reason"), [
    ({"runtime_status": RuntimeStatus.PENDING_VERIFICATION}, 503, "waiting for verification"),
    ({"runtime_status": RuntimeStatus.NOT_CONFIGURED}, 503, "not been configured"),
    ({"runtime_status": RuntimeStatus.DISABLED}, 503, "disabled by the developer"),
    ({"status": AppStatus.SUSPENDED}, 503, "suspended"),
    ({"kill_switch": True}, 503, "paused by the service operators"),
])
def test_gated_runtime_shows_setup_page(
    start_router: RouterFactory, sessions: sessionmaker[Session],
    counting_origin: tuple[AiohttpServer, CountingOrigin],
    fields: dict[str, object], status: int, reason: str,
) -> None:
    server, origin = counting_origin
    add_app(sessions, "game", server.url, **fields)
    with start_router() as router:
        response = get(router.url, router.host("game"), "/anything")
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert reason in response.text
    assert "Game is not available right now" in response.text
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert server.url not in response.text  # the origin is the developer's business
    assert origin.requests == []


def test_unknown_slug_is_404_page(start_router: RouterFactory) -> None:
    with start_router() as router:
        response = get(router.url, router.host("nobody"))
    assert response.status_code == 404
    assert "There is no app at this address" in response.text
    assert "nobody" in response.text


def test_setup_page_lists_failed_checks_without_secrets(
    start_router: RouterFactory, sessions: sessionmaker[Session],
) -> None:
    checks = [{"rule": "appId matches", "passed": True},
              {"rule": "payTo matches", "passed": False, "fix": "Set payTo to 0xabc<script>"}]
    add_app(sessions, "game", "http://127.0.0.1:9", runtime_checks=checks,
            runtime_status=RuntimeStatus.PENDING_VERIFICATION)
    with start_router() as router:
        response = get(router.url, router.host("game"))
    assert response.status_code == 503
    assert "Failed: payTo matches" in response.text
    assert "Set payTo to 0xabc&lt;script&gt;" in response.text
    assert "<script>" not in response.text
    assert "127.0.0.1:9" not in response.text


@pytest.mark.parametrize("domain", [DomainRequestStatus.NOT_REQUESTED,
                                    DomainRequestStatus.PENDING_MANUAL_DNS,
                                    DomainRequestStatus.REJECTED])
def test_domain_approval_required_in_every_mode(
    start_router: RouterFactory, sessions: sessionmaker[Session],
    counting_origin: tuple[AiohttpServer, CountingOrigin], domain: DomainRequestStatus,
) -> None:
    """Spec 3.1: the exact hostname becomes public only after approval, dev included."""
    server, origin = counting_origin
    add_app(sessions, "game", server.url, runtime_domain_request_status=domain)
    production = {"mode": "production", "allow_private_origins": False,
                  "base_url": "https://api.example.com", "portal_url": "https://portal.example.com",
                  "console_url": "https://console.example.com",
                  "docs_url": "https://docs.example.com", "apps_scheme": "https",
                  "smtp_host": "127.0.0.1", "secret_key": "k" * 40}
    reason = {DomainRequestStatus.NOT_REQUESTED: "has not been requested",
              DomainRequestStatus.PENDING_MANUAL_DNS: "waiting for operator approval",
              DomainRequestStatus.REJECTED: "was rejected"}[domain]
    for overrides in (production, {}):
        with start_router(**overrides) as router:
            response = get(router.url, router.host("game"))
        assert response.status_code == 503
        assert reason in response.text
    assert origin.requests == []


def test_legacy_redirects_and_hosted_entry(
    start_router: RouterFactory, sessions: sessionmaker[Session],
) -> None:
    app = add_app(sessions, "game", None, headline="Shoot things", tags=["arcade"])
    with sessions.begin() as session:
        session.add(Product(app_id=app.id, slug="retry", sku="retry", name="Retry",
                            price_atomic=10_000))
    add_app(sessions, "hidden", None, portal_listing_status=ListingStatus.UNLISTED)
    with start_router() as router:
        portal = f"portal.localhost:{router.port}"
        response = get(router.url, portal, "/app/game?ref=x")
        assert response.status_code == 301
        assert response.headers["location"] == "/game?ref=x"
        response = get(router.url, f"launch.localhost:{router.port}", "/")
        assert response.status_code == 301
        assert response.headers["location"] == f"http://portal.localhost:{router.port}/"
        page = get(router.url, portal, "/game")
        assert page.status_code == 200
        assert "Shoot things" in page.text and "Retry" in page.text and "0.01 USDC" in page.text
        assert get(router.url, portal, "/hidden").status_code == 404


def test_healthz_and_statusz(start_router: RouterFactory, redis_url: str, db_url: str) -> None:
    with start_router(redis_url=redis_url) as router:
        api = f"api.localhost:{router.port}"
        assert get(router.url, api, "/healthz").json() == {"status": "ok"}
        status = get(router.url, api, "/statusz")
        assert status.status_code == 200
        body = status.json()
        assert body["checks"]["database"]["status"] == "ok"
        assert body["checks"]["database"]["backend"] == db_url.split(":")[0]
        assert body["checks"]["redis"]["status"] == "ok"
        assert body["checks"]["chain"]["status"] == "embedded"  # the in-process EVM
        missing = get(router.url, api, "/nope")
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"


def test_statusz_reports_redis_down(start_router: RouterFactory) -> None:
    from tests.support.services import free_port
    with start_router(redis_url=f"redis://127.0.0.1:{free_port()}/0") as router:
        status = get(router.url, f"api.localhost:{router.port}", "/statusz")
    assert status.status_code == 503
    assert status.json()["checks"]["redis"]["status"] == "down"
