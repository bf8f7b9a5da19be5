"""What the portal browser tests share: an EIP-1193 wallet injected into Chromium and backed
by eth-account in Python, a paying world behind a real router, and the demo origin.

The wallet is the true edge of the world: a real wallet extension signs with the user's
key; here Python signs with a test key, through the same ``window.ethereum.request`` calls
(``eth_requestAccounts``, ``eth_chainId``, ``eth_signTypedData_v4``, ``personal_sign``). It
records what it was asked to sign so tests can check it (spec 1.10).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import uvicorn
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from playwright.sync_api import BrowserContext, Page, Route
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from examples.demo_origin import DemoIdentity, demo_origin
from payments.ledger.models import Authorization, AuthorizationStatus
from payments.models import DomainRequestStatus, RuntimeStatus
from tests.factories import update_app
from tests.ledger.flow import PARAMS, PayWorld, build_world
from tests.support.browser import BrowserSession
from tests.support.browser import assert_clean as assert_clean  # re-exported for the tests
from tests.support.browser import wait_for as wait_for  # re-exported for the tests
from tests.support.router import RouterFactory, RunningRouter
from tests.support.services import free_port

# Defines window.ethereum in every page and frame; each call goes to the Python wallet.
PROVIDER_SCRIPT = """(() => {
  const provider = {
    isSvcTestWallet: true,
    request: async ({method, params}) => {
      const answer = await window.__svcTestWallet(method, params === undefined ? null : params);
      if (answer && answer.error) {
        const error = new Error(answer.error.message);
        error.code = answer.error.code;
        throw error;
      }
      return answer.result;
    },
    on() {}, removeListener() {},
  };
  Object.defineProperty(window, "ethereum", {value: provider, configurable: true});
})();"""


@dataclass
class TestWallet:
    """A browser wallet holding ``account``; ``reject`` makes the next signature fail 4001."""

    account: LocalAccount
    chain_id: int = PARAMS.chain_id
    typed: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    reject: bool = False

    __test__ = False  # not a pytest class

    @property
    def address(self) -> str:
        return str(self.account.address).lower()

    def install(self, context: BrowserContext) -> TestWallet:
        context.expose_binding("__svcTestWallet", self._handle)
        context.add_init_script(PROVIDER_SCRIPT)
        return self

    def _handle(self, source: Any, method: str, params: Any) -> dict[str, Any]:
        self.methods.append(method)
        if method in ("eth_requestAccounts", "eth_accounts"):
            return {"result": [self.account.address]}
        if method == "eth_chainId":
            return {"result": hex(self.chain_id)}
        if method == "wallet_switchEthereumChain":
            return {"result": None}
        if method in ("eth_signTypedData_v4", "personal_sign"):
            if self.reject:
                self.reject = False
                return {"error": {"code": 4001, "message": "User rejected the request."}}
            return {"result": self._sign(method, params)}
        return {"error": {"code": 4200, "message": f"unsupported {method}"}}

    def _sign(self, method: str, params: list[Any]) -> str:
        if method == "eth_signTypedData_v4":
            address, payload = params
            assert str(address).lower() == self.address
            data = json.loads(payload)
            self.typed.append(data)
            signed = Account.sign_typed_data(self.account.key, full_message=data)
        else:
            message, address = params
            assert str(address).lower() == self.address
            text = bytes.fromhex(message[2:]).decode()
            self.texts.append(text)
            signed = Account.sign_message(encode_defunct(text=text), self.account.key)
        return "0x" + str(signed.signature.hex()).removeprefix("0x")


def new_wallet(seed: int) -> TestWallet:
    return TestWallet(Account.from_key((seed + 5000).to_bytes(32, "big")))


@dataclass
class Portal:
    router: RunningRouter
    world: PayWorld
    demo_url: str | None = None

    @property
    def url(self) -> str:
        return self.router.settings.portal_url

    @property
    def runtime(self) -> str:
        return self.router.settings.runtime_url(self.world.app.slug)

    def budgets(self, owner: str) -> list[Authorization]:
        with self.world.sessions() as session:
            return list(session.scalars(select(Authorization).where(
                Authorization.owner_wallet == owner.lower())
                .order_by(Authorization.created_at)))

    def active_budget(self, owner: str) -> Authorization | None:
        active = [a for a in self.budgets(owner) if a.status == AuthorizationStatus.ACTIVE]
        return active[0] if active else None


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """An ASGI app under uvicorn on a loopback port (the demo origin)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False,
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("demo origin did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def portal_world(start_router: RouterFactory, sessions: sessionmaker[Session], *,
                 demo: bool = False, **overrides: Any) -> Iterator[Portal]:
    """A router with the paying world of the ledger tests (app ``game``, listed, payable,
    with products and a backend key); with ``demo``, the game's runtime is the real demo
    origin (active, domain approved) serving ``/wallet``."""
    with start_router(**overrides) as router:
        world = build_world(router, sessions)
        if not demo:
            yield Portal(router, world)
            return
        identity = DemoIdentity(app_id=world.app.id, slug=world.app.slug,
                                pay_to=world.app.pay_to or "", runtime_origin="",
                                portal_url=router.settings.portal_url)
        with serve_app(demo_origin(identity)) as origin:
            update_app(sessions, world.app.slug, runtime_origin=origin,
                       runtime_status=RuntimeStatus.ACTIVE,
                       runtime_domain_request_status=DomainRequestStatus.APPROVED)
            yield Portal(router, world, origin)


def authorize_url(portal: Portal, return_url: str | None = None, **extra: str) -> str:
    """The portal's authorize page for the app ``game``, back to its hosted entry unless
    ``return_url`` says otherwise."""
    query = {"app": "game", "return": return_url or f"{portal.url}/game", **extra}
    return f"{portal.url}/authorize?{urlencode(query)}"


def record_hosts(chrome: BrowserSession) -> set[str]:
    """Every host the browser asks for from now on (no third-party CDN may appear)."""
    hosts: set[str] = set()
    chrome.context.on("request", lambda r: hosts.add(urlsplit(r.url).hostname or r.url))
    return hosts


def only_ours(hosts: set[str]) -> bool:
    return all(h == "127.0.0.1" or h == "localhost" or h.endswith(".localhost") for h in hosts)


def revoke_on_account_page(chrome: BrowserSession, portal: Portal) -> None:
    account = chrome.new_page()
    account.goto(f"{portal.url}/account")
    account.get_by_role("button", name="Connect wallet").click()
    account.locator("#budget-state").wait_for()
    account.get_by_role("button", name="Revoke budget").click()
    account.get_by_text("Budget revoked. Apps can no longer charge it.").wait_for()
    wait_for(account, lambda: account.locator("#budget-state").inner_text().startswith(
        "Revoked"))
    account.close()


def alter_permits(page: Page, portal: Portal, **changes: str) -> None:
    """Every ``/api/portal/permit`` answer reaches ``page`` with ``changes`` made to the
    permit's message: a server (or anything between it and the page) that answered another
    permit than the page asked for. The only way to get one: ours answers what is asked.
    (The real answer is fetched here: Playwright's own fetch cannot resolve ``*.localhost``.)"""
    def handle(route: Route) -> None:
        asked = urlsplit(route.request.url)
        with httpx.Client(base_url=portal.router.url, timeout=15) as client:
            answer = client.get(f"{asked.path}?{asked.query}",
                                headers={"host": asked.netloc})
        body = answer.json()
        body["typedData"]["message"].update(changes)
        route.fulfill(status=answer.status_code, json=body,
                      headers={"cache-control": "no-store"})
    page.route("**/api/portal/permit?*", handle)


# Wraps the installed wallet: whether the amount and expiry pickers were enabled at the moment
# the wallet was asked to sign (a person could otherwise change them meanwhile), kept in
# sessionStorage past the page's return.
PICKERS_AT_SIGNING = """(() => {
  const provider = window.ethereum;
  if (!provider) { return; }
  const request = provider.request;
  provider.request = (args) => {
    if (args.method === "eth_signTypedData_v4") {
      sessionStorage.setItem("pickersEnabledAtSigning", JSON.stringify(["amount", "days"].map(
        (id) => document.getElementById(id) && !document.getElementById(id).disabled)));
    }
    return request(args);
  };
})();"""
