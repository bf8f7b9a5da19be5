"""Authorization endpoints (spec 4.6): return-code, summary, payment-code, revoke."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from sqlalchemy import bindparam, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.dbapi import Compiled
from payments.developer.services import DeveloperServices, client_ip
from payments.errors import ApiError
from payments.http import field_str, read_json, required_str
from payments.ledger import codes
from payments.ledger.authorizations import (
    authorize_permit,
    locked_active_authorization,
    remaining,
    revoke,
)
from payments.ledger.charges import DELIVERY_KEY_PREFIX
from payments.ledger.config import LedgerConfig
from payments.ledger.cors import Cors, preflight_route
from payments.ledger.handoffs import Handoff, decode_handoff
from payments.ledger.models import (
    AccountConnection,
    Authorization,
    AuthorizationStatus,
    CodeKind,
    ConnectionStatus,
    Delivery,
    Order,
    OrderStatus,
    RelayStatus,
    UsedOwnerProof,
)
from payments.ledger.permits import (
    check_address,
    owner_proof_text,
    parse_permit,
    recover_owner_proof,
    verify_permit,
)
from payments.ledger.return_urls import check_return_url, origin_of
from payments.models import App, Product, ProductStatus
from payments.ratelimit import enforce
from payments.slugs import is_valid_slug

OWNER_PROOF_MAX_AGE_SECONDS = 300


_APP_BY_SLUG = Compiled(select(App).where(App.slug == bindparam("slug")))


def app_by_slug(session: Session, slug: str) -> App:
    """The app named ``slug``, read-only: a detached copy of its row (on every payment's
    path; see payments.dbapi), whose changes are not saved and whose relationships do not
    load."""
    app = _APP_BY_SLUG.entity(session, App, {"slug": slug}) if is_valid_slug(slug) else None
    if app is None:
        raise ApiError("app_not_found", 404, f"No app '{slug}'.")
    return app


def with_code(url: str, code: str) -> str:
    parts = urlsplit(url)
    query = f"{parts.query}&" if parts.query else ""
    return urlunsplit(parts._replace(query=query + urlencode({"code": code})))


def summary_view(record_code: str, authorization: Authorization, app: App,
                 connection_id: str | None, expires_at: datetime,
                 now: datetime) -> dict[str, Any]:
    """Spec 2.7: never API keys, secrets or private user data."""
    return {
        "authorizationCode": record_code, "authorizationId": authorization.id,
        "ownerWallet": authorization.owner_wallet, "spender": authorization.spender,
        "remaining": str(remaining(authorization, now)),
        "status": authorization.status.value, "expiresAt": expires_at.isoformat(),
        "budgetExpiresAt": authorization.deadline.isoformat(),
        "app": {"id": app.id, "slug": app.slug, "name": app.name},
        "accountConnectionId": connection_id,
    }


def spend_owner_proof(session: Session, owner: str, text: str, expires_at: datetime,
                      now: datetime) -> None:
    """Record an owner proof as used; a second use is ``owner_proof_used``.

    Keyed by owner and signed text, not by the signature, which has more than one valid
    encoding. The savepoint keeps the caller's transaction usable when the insert finds the
    proof taken (on PostgreSQL after waiting for a concurrent first use to commit)."""
    session.execute(delete(UsedOwnerProof).where(UsedOwnerProof.expires_at < now))
    digest = hashlib.sha256(f"{owner}\n{text}".encode()).hexdigest()
    session.add(UsedOwnerProof(proof_hash=digest, expires_at=expires_at))
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise ApiError("owner_proof_used", 409, "This wallet check was already used; sign "
                       "a new one.") from None


def open_for(session: Session, order: Order, idempotency_key: str | None) -> bool:
    """Whether a payment code may be issued for ``order``: it is unpaid, or it was paid
    under this very key. The latter is a retry whose answer was lost; its code can only
    find that payment's stored answer again (the product route charges a paid order
    never)."""
    if order.status == OrderStatus.CREATED:
        return True
    if idempotency_key is None or order.charge_seq is None:
        return False
    paid_under = session.scalar(select(Delivery.idempotency_key).where(
        Delivery.charge_seq == order.charge_seq))
    return paid_under == DELIVERY_KEY_PREFIX + idempotency_key


class AuthorizationRoutes:
    def __init__(self, services: DeveloperServices, config: LedgerConfig, cors: Cors) -> None:
        self.s = services
        self.c = config
        self.cors = cors

    def routes(self) -> list[Route]:
        p = "/api/authorizations"
        preflight = preflight_route(self.cors)
        readable = self.cors.readable_errors
        return [
            Route(f"{p}/return-code", readable(self.return_code), methods=["POST"]),
            Route(f"{p}/return-code", preflight, methods=["OPTIONS"]),
            Route(f"{p}/summary", readable(self.summary), methods=["GET"]),
            Route(f"{p}/summary", preflight, methods=["OPTIONS"]),
            Route(f"{p}/payment-code", readable(self.payment_code), methods=["POST"]),
            Route(f"{p}/payment-code", preflight, methods=["OPTIONS"]),
            Route(f"{p}/revoke", readable(self.revoke), methods=["POST"]),
            Route(f"{p}/revoke", preflight, methods=["OPTIONS"]),
        ]

    async def return_code(self, request: Request) -> Response:
        """Called by the portal after the user signed: a summary code and where to go."""
        # Each call may add a summary code (and a budget): counted per client, whatever
        # came of it (docs/decisions.md).
        await enforce(self.s.limiter(), self.s.limits.return_code, client_ip(self.s, request))
        body = await read_json(request)
        slug = required_str(body, "app", 63)
        return_url = required_str(body, "returnUrl", 2048)
        handoff_token = field_str(body, "handoff", required=False, max_length=2000)
        permit = parse_permit(body["permit"]) if body.get("permit") is not None else None
        proof = body.get("ownerProof")
        if (permit is None) == (proof is None):
            raise ApiError("missing_field", 422, "Send either 'permit' (a new budget) or "
                           "'ownerProof' (the wallet's current budget).", field="permit")
        if permit is not None:
            verify_permit(self.c.params, permit)  # before any database work
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            app = app_by_slug(session, slug)
            target = check_return_url(
                return_url, slug=app.slug, portal_url=self.c.portal_url,
                runtime_url=self.c.runtime_url(app.slug),
                runtime_active=app.runtime_served)
            if permit is not None:
                authorization = authorize_permit(session, self.c.params, permit, now)
            else:
                links = (None if not handoff_token else
                         self._handoff_of(handoff_token, app, now).label)
                authorization = self._proven(session, proof, app, return_url, now, links)
            connection_id = None
            if handoff_token:
                connection_id = self._bind(session, handoff_token, app, authorization, now)
            issued = codes.issue(session, CodeKind.SUMMARY, ttl=self.c.summary_ttl, now=now,
                                 authorization_id=authorization.id, app_id=app.id,
                                 audience=target.audience, return_url=return_url,
                                 connection_id=connection_id)
            return {"code": issued.code, "redirectUrl": with_code(return_url, issued.code),
                    "expiresAt": issued.record.expires_at.isoformat(),
                    "summary": summary_view(issued.code, authorization, app, connection_id,
                                            issued.record.expires_at, now)}
        try:
            result = await self.s.run(work)
        except IntegrityError:
            # A concurrent call inserted the wallet's one active budget, or the account's
            # connection, first: run again. The same permit is then found recorded and
            # refused (permit_already_used); a connection is found and bound.
            result = await self.s.run(work)
        response = JSONResponse(result, headers={"cache-control": "no-store"})
        return self.cors.allow(response, request.headers.get("origin"),
                               origin_of(self.c.portal_url))

    def _handoff_of(self, token: str, app: App, now: datetime) -> Handoff:
        handoff = decode_handoff(self.c.secret_key, token, now)
        if handoff.app_id != app.id:
            raise ApiError("handoff_invalid", 422, "The account handoff belongs to another app.")
        return handoff

    def _proven(self, session: Session, proof: Any, app: App, return_url: str,
                now: datetime, links: str | None) -> Authorization:
        """The wallet's current budget, proven by a signed owner proof; ``links``: the game
        account label of the handoff sent with it, which the signed text must name."""
        if not isinstance(proof, dict):
            raise ApiError("invalid_owner_proof", 422, "'ownerProof' must be an object.")
        owner = check_address(proof.get("owner"), "ownerProof.owner")
        authorization_id = proof.get("authorizationId")
        issued_at = proof.get("issuedAt")
        if not isinstance(authorization_id, str) or not isinstance(issued_at, str):
            raise ApiError("invalid_owner_proof", 422, "'ownerProof' needs authorizationId and "
                           "issuedAt.")
        try:
            issued = datetime.fromisoformat(issued_at.replace("Z", "+00:00"))
        except ValueError:
            raise ApiError("invalid_owner_proof", 422, "'issuedAt' is not an ISO time.") from None
        if issued.tzinfo is None:  # an aware minus a naive datetime raises TypeError
            raise ApiError("invalid_owner_proof", 422, "'issuedAt' needs a UTC offset (or Z).")
        age = (now - issued).total_seconds()
        if not -30 <= age <= OWNER_PROOF_MAX_AGE_SECONDS:
            raise ApiError("owner_proof_expired", 422, "The wallet proof is too old; sign "
                           "again.")
        text = owner_proof_text(app.slug, return_url, self.c.params.spender, authorization_id,
                                issued_at, links)
        if recover_owner_proof(text, proof.get("signature")) != owner:
            raise ApiError("invalid_owner_proof", 422, "The wallet proof was not signed by "
                           "this owner for this app, return URL and budget.")
        authorization = session.get(Authorization, authorization_id)
        if (authorization is None or authorization.owner_wallet != owner
                or authorization.status != AuthorizationStatus.ACTIVE
                or remaining(authorization, now) <= 0):
            raise ApiError("needs_budget", 402, "This wallet has no active budget left; sign a "
                           "new permit.", budgetState="needs_budget")
        spend_owner_proof(session, owner, text,
                          issued + timedelta(seconds=OWNER_PROOF_MAX_AGE_SECONDS), now)
        return authorization

    def _bind(self, session: Session, token: str, app: App, authorization: Authorization,
              now: datetime) -> str:
        handoff = self._handoff_of(token, app, now)
        connection = session.scalar(select(AccountConnection).where(
            AccountConnection.app_id == app.id,
            AccountConnection.merchant_user_hash == handoff.merchant_user_hash,
            AccountConnection.status == ConnectionStatus.ACTIVE).with_for_update())
        if connection is None:
            connection = AccountConnection(app_id=app.id, bound_at=now,
                                           merchant_user_hash=handoff.merchant_user_hash)
            session.add(connection)
        connection.owner_wallet = authorization.owner_wallet
        connection.game_account_label = handoff.label
        session.flush()
        return connection.id

    async def summary(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        now = self.s.clock()

        def work(session: Session) -> tuple[dict[str, Any], str]:
            record = codes.live_summary(session, code, now)
            authorization = session.get(Authorization, record.authorization_id)
            app = session.get(App, record.app_id)
            assert authorization is not None and app is not None
            return (summary_view(code, authorization, app, record.connection_id,
                                 record.expires_at, now), record.audience)
        view, audience = await self.s.run(work)
        return self.cors.allow(JSONResponse(view, headers={"cache-control": "no-store"}),
                               request.headers.get("origin"), audience)

    async def payment_code(self, request: Request) -> Response:
        """Exchange a summary code for a product-bound, single-use payment code.

        An app-origin browser boundary: a request without ``Origin``, or from any origin
        but the summary's audience, is refused (spec 4.6).
        """
        origin = request.headers.get("origin")
        if not origin:
            raise ApiError("PAYMENT_CODE_ORIGIN_REQUIRED", 403, "The payment-code exchange is "
                           "a browser step: it needs the Origin of the page that received the "
                           "summary code.")
        body = await read_json(request)
        summary_code = required_str(body, "authorizationCode", 200)
        payment_url = required_str(body, "paymentUrl", 2048)
        order_id = field_str(body, "orderId", required=False, max_length=48)
        connection_id = field_str(body, "accountConnectionId", required=False, max_length=48)
        developer_user_id = field_str(body, "developerUserId", required=False, max_length=200)
        idempotency_key = field_str(body, "idempotencyKey", required=False, max_length=200)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            record = codes.live_summary(session, summary_code, now)
            if origin != record.audience:
                raise ApiError("PAYMENT_CODE_ORIGIN_MISMATCH", 403, "This summary code can only "
                               "be exchanged from the page it was issued to.")
            app = session.get(App, record.app_id)
            assert app is not None
            product = self._product_for(session, app, payment_url)
            if connection_id is not None and connection_id != record.connection_id:
                raise ApiError("ACCOUNT_CONNECTION_MISMATCH", 409, "The summary code was issued "
                               "for a different account connection.")
            if order_id is not None:
                order = session.get(Order, order_id)
                if (order is None or order.app_id != app.id or order.product_id != product.id
                        or not open_for(session, order, idempotency_key)):
                    raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, "The order does "
                                   "not match this product, or is already paid.")
                codes.bound_user(developer_user_id, order.developer_user_id, "order")
            authorization = session.get(Authorization, record.authorization_id)
            assert authorization is not None
            issued = codes.issue(
                session, CodeKind.PAYMENT, ttl=self.c.payment_ttl, now=now,
                authorization_id=record.authorization_id, app_id=app.id,
                audience=record.audience, product_id=product.id, order_id=order_id,
                connection_id=record.connection_id, developer_user_id=developer_user_id,
                idempotency_key=idempotency_key)
            return {"authorization": {
                "authorizationCode": issued.code, "ownerWallet": authorization.owner_wallet,
                "spender": authorization.spender, "expiresAt": issued.record.expires_at.isoformat(),
                "paymentUrl": self.c.payment_url(app.slug, product.slug),
                "accountConnectionId": record.connection_id}}
        response = JSONResponse(await self.s.run(work), headers={"cache-control": "no-store"})
        return self.cors.allow(response, origin, origin)

    def _product_for(self, session: Session, app: App, payment_url: str) -> Product:
        prefix = f"{self.c.base_url}/api/pay/{app.slug}/"
        product_slug = payment_url[len(prefix):] if payment_url.startswith(prefix) else ""
        product = session.scalar(select(Product).where(
            Product.app_id == app.id, Product.slug == product_slug)) if product_slug else None
        if product is None or product.status != ProductStatus.ACTIVE:
            raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, f"'paymentUrl' must be "
                           f"{prefix}<product-slug> for an active product of this app.")
        return product

    async def revoke(self, request: Request) -> Response:
        """The ledger side of a signed ``Permit(value=0)`` (spec 1 item 9)."""
        body = await read_json(request)
        permit = parse_permit(body.get("permit"))
        if permit.value != 0:
            raise ApiError("invalid_permit", 422, "A revoke is a permit with value 0.")
        verify_permit(self.c.params, permit)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            authorization = locked_active_authorization(session, permit.owner,
                                                        self.c.params.spender)
            if authorization is None:
                raise ApiError("no_active_budget", 404, "This wallet has no active budget.")
            if permit.nonce <= authorization.nonce:
                raise ApiError("permit_nonce_stale", 409, "Sign the revoke with the token's "
                               "current permit nonce.")
            revoke(authorization, now)
            # The relayer sends Permit(value=0) from here (chain issue): the row is the outbox.
            authorization.revoke_relay_status = RelayStatus.PENDING
            authorization.revoke_signature = permit.signature
            authorization.revoke_nonce = permit.nonce
            authorization.revoke_deadline = permit.deadline_at
            return {"authorization": {"id": authorization.id, "status": "revoked",
                                      "ownerWallet": authorization.owner_wallet,
                                      "remaining": "0"}}
        response = JSONResponse(await self.s.run(work))
        return self.cors.allow(response, request.headers.get("origin"),
                               origin_of(self.c.portal_url))
