"""A paying world for ledger tests: a developer, an app that can be paid, a key, wallets.

Wallets sign real EIP-2612 permits with eth-account for the in-process chain's token
and spender (the chain itself is not needed: the ledger verifies signatures off-chain), or
for another chain's when given its ``params`` (the topology tests' Hardhat node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.params import ChainParams, in_process_params
from payments.db import transaction, utcnow
from payments.developer.keys import KEY_SCOPES, create_key
from payments.ledger.permits import owner_proof_text, permit_typed_data
from payments.models import AllowlistStatus, App, Product, RiskMode
from payments.products import create_product
from tests.factories import add_developer, add_owned_app
from tests.support.router import RunningRouter

PARAMS = in_process_params()
PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def wallet(seed: int) -> LocalAccount:
    account: LocalAccount = Account.from_key((seed + 1000).to_bytes(32, "big"))
    return account


def sign_permit(account: LocalAccount, value: int, nonce: int = 0,
                deadline: int | None = None, *, params: ChainParams = PARAMS) -> dict[str, Any]:
    deadline = deadline or int(time.time()) + 86400
    data = permit_typed_data(params, account.address, value, nonce, deadline)
    signed = Account.sign_typed_data(account.key, full_message=data)
    return {"owner": account.address, "value": str(value), "nonce": nonce,
            "deadline": deadline, "signature": "0x" + signed.signature.hex().removeprefix("0x")}


def sign_owner_proof(account: LocalAccount, app_slug: str, return_url: str,
                     authorization_id: str, links: str | None = None) -> dict[str, Any]:
    """``links``: the game account label of the handoff sent with the proof."""
    from eth_account.messages import encode_defunct
    issued = utcnow().isoformat()
    text = owner_proof_text(app_slug, return_url, PARAMS.spender, authorization_id, issued,
                            links)
    signed = Account.sign_message(encode_defunct(text=text), account.key)
    return {"owner": account.address, "authorizationId": authorization_id, "issuedAt": issued,
            "signature": "0x" + signed.signature.hex().removeprefix("0x")}


@dataclass
class PayWorld:
    router: RunningRouter
    sessions: sessionmaker[Session]
    app: App
    api_key: str
    products: dict[str, Product] = field(default_factory=dict)

    @property
    def portal(self) -> str:
        return self.router.settings.portal_url

    @property
    def audience(self) -> str:
        """The hosted entry: the origin a summary code for ``{portal}/<slug>`` belongs to."""
        return self.portal

    def api(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.router.url, timeout=30, headers={
            "host": f"api.localhost:{self.router.port}", **headers})

    def keyed(self) -> httpx.Client:
        return self.api(authorization=f"Bearer {self.api_key}")

    def payment_url(self, product: str) -> str:
        return f"{self.router.settings.base_url}/api/pay/{self.app.slug}/{product}"

    def authorize(self, account: LocalAccount, value: int, nonce: int = 0,
                  **extra: Any) -> dict[str, Any]:
        """The portal's call after the user signed: returns the return-code response."""
        with self.api(origin=self.portal) as api:
            response = api.post("/api/authorizations/return-code", json={
                "app": self.app.slug, "returnUrl": f"{self.portal}/{self.app.slug}",
                "permit": sign_permit(account, value, nonce), **extra})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def payment_code(self, summary_code: str, product: str, **extra: Any) -> str:
        with self.api(origin=self.audience) as api:
            response = api.post("/api/authorizations/payment-code", json={
                "authorizationCode": summary_code, "paymentUrl": self.payment_url(product),
                "developerUserId": "user-1", **extra})
        assert response.status_code == 200, response.text
        code: str = response.json()["authorization"]["authorizationCode"]
        return code

    def pay(self, client: httpx.Client, account: LocalAccount, product: str, code: str,
            key: str, **extra: Any) -> httpx.Response:
        return client.post(f"/api/pay/{self.app.slug}/{product}", headers={
            "x-wallet-address": account.address, "x-svc-budget-spender": PARAMS.spender,
        }, json={"authorizationCode": code, "developerUserId": "user-1",
                 "idempotencyKey": key, **extra})


def build_world(router: RunningRouter, sessions: sessionmaker[Session]) -> PayWorld:
    _, org_id = add_developer(sessions)
    app = add_owned_app(sessions, org_id, "game", pay_to=PAY_TO,
                        recipient_allowlist_status=AllowlistStatus.ALLOWED)
    products: dict[str, Product] = {}
    with transaction(sessions) as session:
        attached = session.get(App, app.id)
        assert attached is not None
        for template in ("retry_continue", "unlock_level", "tip_creator"):
            product = create_product(session, attached, {"template": template})
            products[product.slug] = product
        scarce = create_product(session, attached, {
            "slug": "legendary", "name": "Legendary Sword", "priceAtomic": "100000",
            "riskMode": RiskMode.SETTLED_FIRST.value,
            "riskPolicy": {"trustedServerCharge": {"enabled": True,
                                                   "maxAmountAtomic": "50000"}}})
        products[scarce.slug] = scarce
        secret = create_key(session, organization_id=org_id, app_id=app.id, label="backend",
                            scopes=list(KEY_SCOPES), environment="test", created_by=None,
                            now=utcnow()).secret
    return PayWorld(router, sessions, app, secret, products)


# -- helpers added for the ledger suites (concurrency, codes, budgets, handoffs) -------------


def sign_owner_proof_as(signer: LocalAccount, owner: str, app_slug: str, return_url: str,
                        authorization_id: str, issued_at: str) -> dict[str, Any]:
    """An owner proof with a chosen ``issuedAt`` and signer (``owner`` is only claimed)."""
    from eth_account.messages import encode_defunct
    text = owner_proof_text(app_slug, return_url, PARAMS.spender, authorization_id, issued_at)
    signed = Account.sign_message(encode_defunct(text=text), signer.key)
    return {"owner": owner, "authorizationId": authorization_id, "issuedAt": issued_at,
            "signature": "0x" + signed.signature.hex().removeprefix("0x")}


def add_product(world: PayWorld, spec: dict[str, Any]) -> Product:
    """Create one more product of the world's app from wire fields (spec 2.3)."""
    with transaction(world.sessions) as session:
        attached = session.get(App, world.app.id)
        assert attached is not None
        product = create_product(session, attached, spec)
    world.products[product.slug] = product
    return product


def start_handoff(world: PayWorld, merchant_user_id: str, **extra: Any) -> httpx.Response:
    """The developer backend's ``POST /api/account-handoffs`` with the world's key."""
    body = {"appSlug": world.app.slug, "merchantUserId": merchant_user_id,
            "gameAccountLabel": "Player One", "returnUrl": f"{world.portal}/{world.app.slug}",
            **extra}
    with world.keyed() as backend:
        return backend.post("/api/account-handoffs", json=body)


def handoff_token(portal_url: str) -> str:
    from urllib.parse import parse_qs, urlsplit
    return parse_qs(urlsplit(portal_url).query)["handoff"][0]


def connect(world: PayWorld, account: LocalAccount, merchant_user_id: str, value: int,
            nonce: int = 0) -> dict[str, Any]:
    """Bind ``merchant_user_id`` to ``account`` with a fresh budget; the return-code body."""
    started = start_handoff(world, merchant_user_id)
    assert started.status_code == 200, started.text
    token = handoff_token(started.json()["handoff"]["portalUrl"])
    return world.authorize(account, value, nonce, handoff=token)
