"""An app's service worker and ``/svc-auth-return``, in real Chromium (docs/decisions.md).

A runtime's origin can register a service worker scoped to its whole origin, and that
worker answers the navigations to ``/svc-auth-return`` on it before the router sees them.
The router accepts this (docs/decisions.md, "An app's service worker may answer its own
return page"): the page hands the code to that origin's own scripts anyway. What this
shows is what the decision rests on: the worker sees its own app's return and nothing of
any other app's, whose return page the router still serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_app
from tests.router.conftest import RouterFactory
from tests.router.test_auth_return_browser import CODE, STORAGE_KEY, return_path, runtime
from tests.support.browser import BrowserSession
from tests.support.servers import AiohttpServer

# The app's pages: one registering a worker for the whole origin, which answers every
# navigation to /svc-auth-return itself.
REGISTERING = """<!doctype html><html><head><title>Game</title></head><body><h1>Game</h1>
<script>
navigator.serviceWorker.register("/sw.js", {scope: "/"});
navigator.serviceWorker.ready.then(function () { document.title = "ready"; });
</script></body></html>"""
WORKER = """self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(clients.claim()); });
self.addEventListener("fetch", function (event) {
  var url = new URL(event.request.url);
  if (url.pathname.indexOf("/svc-auth-return") === 0) {
    event.respondWith(new Response("<h1>worker: " + url.searchParams.get("code") + "</h1>",
                                   {headers: {"content-type": "text/html"}}));
  }
});"""


@dataclass
class Origin:
    """The app's origin, and what it was asked for: (path, its Service-Worker header)."""

    server: AiohttpServer
    seen: list[tuple[str, str]] = field(default_factory=list)


@pytest.fixture
def origin() -> Iterator[Origin]:
    seen: list[tuple[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Service-Worker", "")))
        if request.path == "/sw.js":
            return web.Response(text=WORKER, content_type="text/javascript")
        return web.Response(text=REGISTERING, content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    with AiohttpServer(app) as server:
        yield Origin(server, seen)


def test_an_apps_worker_answers_its_own_return_page_and_no_other_apps(
    start_router: RouterFactory,
    sessions: sessionmaker[Session],
    origin: Origin,
    chrome: BrowserSession,
) -> None:
    add_app(sessions, "game", origin.server.url)
    add_app(sessions, "other", origin.server.url)
    with start_router() as router:
        page = chrome.new_page()
        page.goto(runtime(router, "game", "/"))
        page.wait_for_function("document.title === 'ready'")
        # The browser fetched the script saying what it was for.
        assert ("/sw.js", "script") in origin.seen
        page.goto(runtime(router, "game", return_path()))
        # game's worker answered its own return: the code it sees is the one the router's
        # page would have stored for game's scripts.
        assert page.locator("h1").text_content() == f"worker: {CODE}"
        assert page.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") is None
        # Another app's host is another origin: game's worker has no say there, and the
        # router's page stores the code for that origin and goes on to its entry path.
        page.goto(runtime(router, "other", return_path("other")))
        page.wait_for_url(runtime(router, "other", "/"))
        assert page.evaluate("sessionStorage.getItem('svc:auth-summary:other')") == CODE
    assert not [path for path, _ in origin.seen if path.startswith("/svc-auth-return")]
    assert chrome.log.errors == []
