"""What the topology tests share: HTTPS clients through the edge, a steady load of requests,
the cluster's Hardhat chain as its owner sees it, and a shop that is paid through the
payment API by wallets funded on that chain."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from sqlalchemy.orm import Session, sessionmaker
from web3 import HTTPProvider, Web3
from web3.contract import Contract

from ops.cluster.services import HARDHAT_OWNER_KEY
from ops.cluster.topology import DOMAIN, Cluster
from payments.chain.contracts import charge_id, load_artifact
from payments.chain.json_rpc import read_only
from payments.chain.params import ChainParams
from payments.db import transaction, utcnow
from payments.developer.keys import KEY_SCOPES, create_key
from payments.models import AllowlistStatus, App
from payments.products import create_product
from tests.factories import add_developer, add_owned_app
from tests.ledger.flow import handoff_token, sign_permit
from tests.webhooks.kit import grant_token


def client(cluster: Cluster, name: str, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=cluster.edge, verify=cluster.client_context(), timeout=15,
                        headers={"host": cluster.host(name), **headers})


@dataclass
class Load:
    """Threads sending one request after another until stopped; every answer kept."""

    send: Callable[[httpx.Client, int], httpx.Response]
    threads: int = 4
    seen: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, body)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def start(self, make_client: Callable[[], httpx.Client]) -> Load:
        counter = iter(range(10**9))
        lock = threading.Lock()

        def run() -> None:
            with make_client() as http:
                while not self._stop.is_set():
                    with lock:
                        n = next(counter)
                    try:
                        answer = self.send(http, n)
                        self.seen.append((time.monotonic(), answer.status_code, answer.text))
                    except httpx.HTTPError as exc:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
        self._workers = [threading.Thread(target=run, daemon=True)
                         for _ in range(self.threads)]
        for worker in self._workers:
            worker.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=30)


def upstreams(cluster: Cluster, lines: list[str]) -> dict[str, int]:
    """Requests per instance (``host:port``) in nginx access log lines."""
    counts: dict[str, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 4:
            counts[parts[3]] = counts.get(parts[3], 0) + 1
    return counts


# -- the chain, as its owner (Hardhat's account 0) and as anyone reading it ----------------


def rpc(cluster: Cluster, method: str, *params: Any) -> Any:
    """A JSON-RPC call to the Hardhat node (its ``evm_*``/``hardhat_*`` methods too)."""
    assert cluster.chain is not None
    answer = httpx.post(cluster.chain.url, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}).json()
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def automine(cluster: Cluster, on: bool) -> None:
    """Off: transactions wait in the node's pool until :func:`mine` (a batch in flight
    stays in flight as long as a test needs it to)."""
    rpc(cluster, "evm_setAutomine", on)


def mine(cluster: Cluster) -> None:
    rpc(cluster, "evm_mine")


def contract(cluster: Cluster, name: str) -> Contract:
    assert cluster.chain is not None
    params = cluster.chain.params
    w3 = Web3(HTTPProvider(cluster.chain.url))
    address = params.token if name == "TestUSDC" else params.spender
    return w3.eth.contract(address=Web3.to_checksum_address(address),
                           abi=load_artifact(name).abi)


# The owner's transactions take its next nonce: one at a time, whichever thread sends.
_OWNER = threading.Lock()


def mint(cluster: Cluster, address: str, amount: int) -> None:
    """TestUSDC for ``address`` (``mint`` is the owner's)."""
    assert cluster.chain is not None
    chain = read_only(cluster.chain.url, cluster.chain.params, confirmations=1,
                      poll_interval=0.05)
    with _OWNER:
        chain.transact_as(HARDHAT_OWNER_KEY,
                          chain.token.functions.mint(Web3.to_checksum_address(address), amount))


def balance(cluster: Cluster, address: str) -> int:
    token = contract(cluster, "TestUSDC")
    return int(token.functions.balanceOf(Web3.to_checksum_address(address)).call())


def is_settled(cluster: Cluster, seq: int) -> bool:
    return bool(contract(cluster, "BudgetSpenderV2").functions.isSettled(
        charge_id(seq)).call())


# -- a shop and its paying users ------------------------------------------------------------


def wallet(name: str) -> LocalAccount:
    account: LocalAccount = Account.from_key(keccak(text=f"deploy-wallet-{name}"))
    return account


@dataclass(frozen=True)
class Payer:
    """A user connected to a shop's app: their wallet, the account connection the handoff
    made (for trusted charges) and a summary code (for product-route payments)."""

    account: LocalAccount
    connection_id: str
    summary_code: str
    user: str  # the merchantUserId the handoff was made for: trusted charges name it


@dataclass
class Shop:
    """An app with a recipient of its own (allowlisted on chain), products and a backend
    key, paid through the edge as a developer's backend and a user's browser pay."""

    cluster: Cluster
    slug: str
    app_id: str
    developer_id: str
    pay_to: str
    key: str
    products: dict[str, str]  # slug -> id

    @property
    def params(self) -> ChainParams:
        assert self.cluster.chain is not None
        return self.cluster.chain.params

    @property
    def portal(self) -> str:
        return self.cluster.url(f"portal.{DOMAIN}")

    @property
    def return_url(self) -> str:
        return f"{self.portal}/{self.slug}"

    def backend(self) -> httpx.Client:
        """The developer's backend: the ``zpk_`` key."""
        return client(self.cluster, "api", authorization=f"Bearer {self.key}")

    def browser(self) -> httpx.Client:
        """A user's browser on the portal (the audience of the summary codes made here)."""
        return client(self.cluster, "api", origin=self.portal)

    def payer(self, name: str, value: int, funds: int) -> Payer:
        """A user with ``funds`` TestUSDC who connects through the account handoff: the
        backend starts it, the portal's return-code binds the wallet with a budget of
        ``value`` (a permit for the cluster's token and spender)."""
        account = wallet(name)
        mint(self.cluster, account.address, funds)
        with self.backend() as backend:
            started = backend.post("/api/account-handoffs", json={
                "appSlug": self.slug, "merchantUserId": name, "returnUrl": self.return_url})
        assert started.status_code == 200, started.text
        token = handoff_token(started.json()["handoff"]["portalUrl"])
        with self.browser() as portal:
            answer = portal.post("/api/authorizations/return-code", json={
                "app": self.slug, "returnUrl": self.return_url, "handoff": token,
                "permit": sign_permit(account, value, params=self.params)})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        return Payer(account, body["summary"]["accountConnectionId"], body["code"], name)

    def charge(self, backend: httpx.Client, product: str, payer: Payer,
               key: str) -> httpx.Response:
        """A trusted-server charge of the payer's connection."""
        return backend.post("/api/charges", json={
            "productId": self.products[product], "accountConnectionId": payer.connection_id,
            "idempotencyKey": key, "developerUserId": payer.user})

    def payment_code(self, browser: httpx.Client, payer: Payer, product: str,
                     key: str) -> httpx.Response:
        """A payment code for ``product``, bound to the idempotency key it will be paid
        with (so a consumed code names its payment)."""
        return browser.post("/api/authorizations/payment-code", json={
            "authorizationCode": payer.summary_code, "idempotencyKey": key,
            "paymentUrl": f"{self.cluster.api_url}/api/pay/{self.slug}/{product}"})

    def pay(self, browser: httpx.Client, payer: Payer, product: str, code: str,
            key: str) -> httpx.Response:
        """The product route, as the runtime calls it with a payment code."""
        return browser.post(f"/api/pay/{self.slug}/{product}", headers={
            "x-wallet-address": payer.account.address,
            "x-svc-budget-spender": self.params.spender,
        }, json={"authorizationCode": code, "idempotencyKey": key})

    def register_webhook(self, sessions: sessionmaker[Session], url: str,
                         events: list[str] | None = None) -> str:
        """The app's webhook endpoint, created through the developer API with a CLI grant
        (as ``svc webhook upsert`` does); its signing secret."""
        token = grant_token(sessions, self.developer_id, self.slug,
                            ["apps:read", "webhooks:write"])
        with client(self.cluster, "api", authorization=f"Bearer {token}") as developer:
            answer = developer.post(f"/api/developer/apps/{self.slug}/webhooks",
                                    json={"url": url, **({"events": events} if events else {})})
        assert answer.status_code == 201, answer.text
        secret: str = answer.json()["secret"]
        return secret


def open_shop(cluster: Cluster, sessions: sessionmaker[Session], slug: str) -> Shop:
    """A developer's app ``slug`` with two products: ``gem`` (10,000, trusted charges
    allowed) and ``retry`` (10,000, the product route); its recipient is allowlisted."""
    developer_id, org_id = add_developer(sessions, f"{slug}-dev")
    pay_to = wallet(f"{slug}-recipient").address
    cluster.allow_recipient(pay_to)
    app = add_owned_app(sessions, org_id, slug, pay_to=pay_to,
                        recipient_allowlist_status=AllowlistStatus.ALLOWED)
    products: dict[str, str] = {}
    with transaction(sessions) as session:
        attached = session.get(App, app.id)
        assert attached is not None
        for spec in ({"slug": "gem", "name": "Gem", "priceAtomic": "10000",
                      "riskPolicy": {"trustedServerCharge": {"enabled": True}}},
                     {"template": "retry_continue"}):
            product = create_product(session, attached, spec)
            products[product.slug] = product.id
        key = create_key(session, organization_id=org_id, app_id=app.id, label="backend",
                         scopes=list(KEY_SCOPES), environment="test", created_by=None,
                         now=utcnow()).secret
    return Shop(cluster, slug, app.id, developer_id, pay_to, key, products)
