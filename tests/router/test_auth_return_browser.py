"""``/svc-auth-return`` in real Chromium against a real router and a real origin (spec 4.7).

The origin plays the developer's app: its pages (served through the proxy on
``<slug>.apps.localhost``) open the return page in a popup or an iframe and record the
``message`` events they receive. The code is a sync hint only (spec 1.4 item 9); these
tests check that it reaches exactly the runtime origin and nobody else.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pytest
from aiohttp import web
from sqlalchemy.orm import Session, sessionmaker

from payments.models import DomainRequestStatus
from tests.factories import add_app
from tests.router.conftest import RouterFactory, RunningRouter
from tests.support.browser import (
    BrowserSession,
    assert_clean,
    screenshot,
    wait_for,
)
from tests.support.servers import AiohttpServer

CODE = "zsum_" + "A1b2-C3d4.E5f6_G7h8~" * 2
STORAGE_KEY = "svc:auth-summary:game"
ORIGIN_DECOY = "ORIGIN-SERVED-SVC-AUTH-RETURN"

# The developer's pages: no CSP of their own, inline scripts allowed.
LISTENER = """window.__got = [];
window.addEventListener("message", function (event) {
  window.__got.push({data: event.data, origin: event.origin});
});
var target = new URLSearchParams(window.location.search).get("target");"""
OPENER_PAGE = f"""<!doctype html><html><head><title>Game</title></head><body>
<button id="authorize">Authorize</button>
<script>{LISTENER}
document.getElementById("authorize").addEventListener("click", function () {{
  window.__popup = window.open(target);
}});
</script></body></html>"""
MODAL_PAGE = f"""<!doctype html><html><head><title>Game</title></head><body>
<h1>Game with a modal</h1>
<script>{LISTENER}
var frame = document.createElement("iframe");
frame.id = "modal"; frame.width = "720"; frame.height = "400"; frame.src = target;
document.body.appendChild(frame);
</script></body></html>"""
ENTRY_PAGE = "<!doctype html><html><head><title>Play</title></head><body><h1>Play</h1></body>"


@dataclass
class Origin:
    server: AiohttpServer
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.seen]


@pytest.fixture
def origin() -> Iterator[Origin]:
    seen: list[tuple[str, str, dict[str, str]]] = []
    pages = {"/opener": OPENER_PAGE, "/modal": MODAL_PAGE, "/play": ENTRY_PAGE,
             "/": "<!doctype html><title>Home</title><h1>Home</h1>"}

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path,
                     {k.lower(): v for k, v in request.headers.items()}))
        if request.path.startswith("/svc-auth-return"):
            return web.Response(text=ORIGIN_DECOY)
        body = pages.get(request.path)
        if body is None:
            return web.Response(status=404, text="not here")
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    with AiohttpServer(app) as server:
        yield Origin(server, seen)


def runtime(router: RunningRouter, slug: str, path: str = "/") -> str:
    return f"http://{router.host(slug)}{path}"


def return_path(app: str = "game", code: str = CODE) -> str:
    return "/svc-auth-return?" + urlencode({"app": app, "code": code})


def page_with_target(router: RunningRouter, slug: str, page: str, target: str) -> str:
    return runtime(router, slug, f"{page}?target={quote(target, safe='')}")


def expected_message(router: RunningRouter) -> list[dict[str, object]]:
    return [{"data": {"type": "svc:auth-return", "app": "game", "code": CODE},
             "origin": f"http://{router.host('game')}"}]


def test_popup_posts_to_opener_and_closes(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin,
        chrome: BrowserSession) -> None:
    add_app(sessions, "game", origin.url)
    with start_router() as router:
        page = chrome.new_page()
        page.goto(page_with_target(router, "game", "/opener", return_path()))
        with page.expect_popup() as popup_info:
            page.click("#authorize")
        popup = popup_info.value
        page.wait_for_function("window.__popup && window.__popup.closed")
        if not popup.is_closed():
            popup.wait_for_event("close")
        page.wait_for_function("window.__got.length > 0")
        assert page.evaluate("window.__got") == expected_message(router)
    assert_clean(chrome)
    assert not [p for p in origin.paths() if p.startswith("/svc-auth-return")]


def test_iframe_modal_posts_to_parent_and_keeps_code_on_runtime_origin(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin,
        chrome: BrowserSession, db_url: str) -> None:
    add_app(sessions, "game", origin.url)
    with start_router() as router:
        page = chrome.new_page()
        page.goto(page_with_target(router, "game", "/modal", return_path()))
        page.wait_for_function("window.__got.length > 0")
        assert page.evaluate("window.__got") == expected_message(router)
        frame = next(f for f in page.frames if "/svc-auth-return" in f.url)
        frame.wait_for_function(
            "document.getElementById('status').textContent === 'Authorization received.'")
        assert frame.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") == CODE
        # same origin, same tab: the app's own page reads the summary from storage
        assert page.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") == CODE
        if db_url.startswith("sqlite"):
            screenshot(page.locator("#modal"), "auth-return-iframe-received")
    assert_clean(chrome)
    assert not [p for p in origin.paths() if p.startswith("/svc-auth-return")]


def test_other_origin_never_receives_the_code(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin,
        chrome: BrowserSession) -> None:
    add_app(sessions, "game", origin.url)
    add_app(sessions, "other", origin.url)
    with start_router() as router:
        target = runtime(router, "game", return_path())
        # framed by another origin: frame-ancestors 'self' refuses to render it at all
        framed = chrome.new_page()
        framed.goto(page_with_target(router, "other", "/modal", target))
        wait_for(framed, lambda: any("frame-ancestors" in t for t in chrome.log.texts()))
        # opened as a popup by another origin: postMessage aims at the runtime origin only
        opener = chrome.new_page()
        opener.goto(page_with_target(router, "other", "/opener", target))
        with opener.expect_popup() as popup_info:
            opener.click("#authorize")
        popup = popup_info.value
        opener.wait_for_function("window.__popup && window.__popup.closed")
        if not popup.is_closed():
            popup.wait_for_event("close")
        # Chromium reports the drop: the target origin is the runtime's, not the opener's
        def dropped() -> bool:
            return any("postMessage" in t and "does not match the recipient window's origin"
                       in t for t in chrome.log.texts())
        wait_for(opener, lambda: dropped() or opener.evaluate("window.__got.length") > 0)
        assert opener.evaluate("window.__got") == []
        assert dropped()
        assert framed.evaluate("window.__got") == []
        # the other origin's storage never saw the code either
        assert opener.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") is None
    assert chrome.log.errors == []
    refused = [t for t in chrome.log.csp_violations() if "frame-ancestors" not in t]
    assert refused == []


def test_full_page_return_goes_to_entry_path_with_code_stored(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin,
        chrome: BrowserSession) -> None:
    add_app(sessions, "game", origin.url, runtime_entry_path="/play")
    with start_router() as router:
        page = chrome.new_page()
        page.goto(runtime(router, "game", "/"))
        page.goto(runtime(router, "game", return_path()))
        page.wait_for_url(runtime(router, "game", "/play"))
        assert page.locator("h1").text_content() == "Play"
        assert page.evaluate(f"sessionStorage.getItem({STORAGE_KEY!r})") == CODE
        # replaced, not pushed: Back skips the URL carrying the code
        page.go_back()
        assert page.url == runtime(router, "game", "/")
        # an entry path that would leave the runtime origin lands on its root instead
        hostile = {"sly-a": f"//{router.host('other')}/steal",
                   "sly-b": f"/\\{router.host('other')}/steal"}
        for slug, entry in hostile.items():
            add_app(sessions, slug, origin.url, runtime_entry_path=entry)
            page.goto(runtime(router, slug, return_path(slug)))
            page.wait_for_url(runtime(router, slug, "/"))
            assert page.locator("h1").text_content() == "Home"
    assert_clean(chrome)
    plays = [headers for _, path, headers in origin.seen if path == "/play"]
    assert plays
    assert "referer" not in plays[0]  # the code in the return URL never leaks onwards
    assert not [p for p in origin.paths() if p.startswith(("/svc-auth-return", "/steal"))]


def test_rejections_and_never_proxied(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin,
        chrome: BrowserSession, db_url: str) -> None:
    add_app(sessions, "game", origin.url)
    add_app(sessions, "other", origin.url)
    add_app(sessions, "waiting", origin.url,
            runtime_domain_request_status=DomainRequestStatus.PENDING_MANUAL_DNS)
    add_app(sessions, "paused", origin.url, kill_switch=True)
    with start_router() as router, router.client("game") as client:
        bad = {
            "slug mismatch": {"app": "other", "code": CODE},
            "no app": {"code": CODE},
            "no code": {"app": "game"},
            "short code": {"app": "game", "code": "abc"},
            "markup in code": {"app": "game", "code": "abcdefgh<script>"},
            "long code": {"app": "game", "code": "a" * 1025},
        }
        for why, params in bad.items():
            response = client.get("/svc-auth-return", params=params)
            assert response.status_code == 400, why
            assert ORIGIN_DECOY not in response.text
            assert "<script>" not in response.text
        with router.client("nope") as unknown:
            assert unknown.get("/svc-auth-return", params={"app": "nope", "code": CODE}
                               ).status_code == 404
        # A host that is not served shows its setup page: no return URL there is accepted.
        for slug in ("waiting", "paused"):
            with router.client(slug) as unserved:
                setup = unserved.get("/svc-auth-return", params={"app": slug, "code": CODE})
                assert setup.status_code == 503, slug
                assert CODE not in setup.text and "sessionStorage" not in setup.text
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            response = client.request(method, return_path(), content=b"x")
            assert response.status_code == 405, method
            assert response.headers["allow"] == "GET, HEAD"
            assert ORIGIN_DECOY not in response.text
        # a trailing slash is still ours, never the origin's
        assert ORIGIN_DECOY not in client.get("/svc-auth-return/", params={
            "app": "game", "code": CODE}).text
        assert client.head(return_path()).status_code == 200
        ok = client.get(return_path())
        assert ok.status_code == 200
        assert ORIGIN_DECOY not in ok.text
        # the proxy itself works: other paths do reach the origin
        assert client.get("/play").text == ENTRY_PAGE

        page = chrome.new_page()
        shown = page.goto(runtime(router, "game", return_path(app="other")))
        assert shown is not None
        assert shown.status == 400
        assert page.locator("h1").text_content() == "Bad request"
        if db_url.startswith("sqlite"):
            screenshot(page, "auth-return-400")
    assert_clean(chrome)
    assert [p for p in origin.paths() if p.startswith("/svc-auth-return")] == []
    assert [p for p in origin.paths() if p != "/favicon.ico"] == ["/play"]


def _inline_script(html: str) -> str:
    match = re.search(r"<script>(.*?)</script>", html, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_security_headers_and_script_hash(
        start_router: RouterFactory, sessions: sessionmaker[Session], origin: Origin) -> None:
    add_app(sessions, "game", origin.url)
    with start_router() as router, router.client("game") as client:
        response = client.get(return_path())
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    digest = hashlib.sha256(_inline_script(response.text).encode()).digest()
    assert directives["script-src"] == ["'sha256-" + base64.b64encode(digest).decode() + "'"]
    assert "unsafe-inline" not in csp
    assert directives["default-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'self'"]
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    # the code is data, never markup: only the JSON data block carries it
    assert response.text.count(CODE) == 1
