"""Paying: the product route, orders and trusted-server charges (spec 4.1, 4.2, 4.4).
Looking payments up is routes_lookups.py (4.3); account handoffs, routes_handoffs.py (4.5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.dbapi import Compiled
from payments.developer.services import DeveloperServices
from payments.errors import ApiError
from payments.http import atomic_amount, field_str, json_after_auth, read_json, required_str
from payments.ids import charge_id
from payments.ledger import codes, handoffs, idempotency, purchases
from payments.ledger.authorizations import active_authorization, current_authorization, remaining
from payments.ledger.charges import ChargeIntent, Recorded, record_charge
from payments.ledger.config import LedgerConfig
from payments.ledger.cors import Cors, preflight_route
from payments.ledger.keyauth import (
    authorized_key,
    presented_key,
    product_for_key,
    require_app_access,
)
from payments.ledger.lookups import (
    nameable,
)
from payments.ledger.models import (
    AccountConnection,
    Authorization,
    ConnectionStatus,
    Order,
    OrderStatus,
)
from payments.ledger.permits import ADDRESS_RE
from payments.ledger.proofs import sign_payment_proof
from payments.ledger.purchases import PayRequest
from payments.ledger.routes_authorizations import app_by_slug
from payments.models import App, Pricing, Product, ProductStatus

# Compiled once, run on the driver's cursor (payments.dbapi): every payment's path.
_PRODUCT_BY_SLUG = Compiled(select(Product).where(Product.app_id == bindparam("app_id"),
                                                  Product.slug == bindparam("slug")))


class LostRace(Exception):
    """A concurrent call with the same idempotency key committed first: run again, in a
    new transaction, to find its stored answer."""


def charge_response(recorded: Recorded, authorization: Authorization,
                    now: datetime) -> dict[str, Any]:
    delivery = recorded.delivery
    return {
        "status": delivery.status.value, "chargeId": charge_id(recorded.charge.seq),
        "deliveryId": delivery.id, "idempotencyKey": delivery.idempotency_key,
        "amountAtomic": str(recorded.charge.amount_atomic),
        "settlementStatus": recorded.charge.settlement_status.value,
        "orderId": delivery.order_id, "remaining": str(remaining(authorization, now)),
        "eventId": recorded.event.id if recorded.event else None,
    }


def locked_order(session: Session, order_id: str | None) -> Order | None:
    """The order row, locked until commit: two payments of one order must not both read
    ``created`` (PostgreSQL; SQLite's write lock already serializes them)."""
    if not order_id:
        return None
    return session.get(Order, order_id, with_for_update=True, populate_existing=True)


class PaymentRoutes:
    def __init__(self, services: DeveloperServices, config: LedgerConfig, cors: Cors) -> None:
        self.s = services
        self.c = config
        self.cors = cors

    def routes(self) -> list[Route]:
        return [
            Route("/api/pay/{app}/{product}", self.cors.readable_errors(self.pay),
                  methods=["POST"]),
            Route("/api/pay/{app}/{product}", preflight_route(self.cors), methods=["OPTIONS"]),
            Route("/api/orders", self.create_order, methods=["POST"]),
            Route("/api/orders/{order_id}", self.get_order, methods=["GET"]),
            Route("/api/charges", self.trusted_charge, methods=["POST"]),
        ]

    # -- the product route (spec 4.1) -------------------------------------------------

    async def pay(self, request: Request) -> Response:
        app_slug, product_slug = request.path_params["app"], request.path_params["product"]
        wallet = request.headers.get("x-wallet-address", "")
        spender = request.headers.get("x-svc-budget-spender", "")
        if not ADDRESS_RE.match(wallet) or not ADDRESS_RE.match(spender):
            raise ApiError("invalid_headers", 400, "Send x-wallet-address and "
                           "x-svc-budget-spender: the summary's ownerWallet and spender.")
        body = await read_json(request)
        code = required_str(body, "authorizationCode", 200)
        key = idempotency.check_key(body.get("idempotencyKey"))
        asked = PayRequest(
            key=key, code=code, wallet=wallet.lower(), spender=spender.lower(),
            developer_user_id=field_str(body, "developerUserId", required=False,
                                        max_length=200),
            order_id=field_str(body, "orderId", required=False, max_length=48),
            connection_id=field_str(body, "accountConnectionId", required=False,
                                    max_length=48))
        field_str(body, "source", required=False, max_length=64)
        now = self.s.clock()

        def work(session: Session) -> tuple[int, dict[str, Any], str | None]:
            app = app_by_slug(session, app_slug)
            product = _PRODUCT_BY_SLUG.entity(
                session, Product, {"app_id": app.id, "slug": product_slug}
            ) if nameable(product_slug) else None
            stored = idempotency.find(session, app.id, "pay", key, now)
            if stored is not None:
                return purchases.replayed(session, stored, app.id, product, asked)
            if product is None or product.status != ProductStatus.ACTIVE:
                raise ApiError("product_not_found", 404, f"No active product '{product_slug}' "
                               f"in app '{app_slug}'.")
            try:
                record = codes.consume_payment_code(session, code, now)
            except ApiError as exc:
                if exc.code != "AUTHORIZATION_CODE_CONSUMED":
                    raise
                # The same key racing its own first call: answer what the winner answered.
                again = idempotency.find(session, app.id, "pay", key, now)
                if again is None:
                    raise
                return purchases.replayed(session, again, app.id, product, asked)
            purchases.check_binding(record, app.id, product.id, asked)
            authorization = current_authorization(session, record.authorization_id)
            purchases.check_payer(authorization, asked)
            order = locked_order(session, asked.order_id)
            if (order is not None and order.status != OrderStatus.CREATED
                    and idempotency.find(session, app.id, "pay", key, now) is not None):
                # Paid while this call waited for the order's lock, by the same key's
                # first call (a retry with another code): run again and replay its answer.
                raise LostRace
            amount = self._amount(product, order)
            user = purchases.granted_user(asked, record, order)
            # (Racing a retry with another code, this code stays unused: see _record.)
            recorded = self._record(session, "pay", ChargeIntent(
                app=app, product=product, authorization=authorization, amount=amount,
                order=order, developer_user_id=user, idempotency_key=key,
                source="product_route"), now)
            answer = charge_response(recorded, authorization, now)
            idempotency.remember(session, app.id, "pay", key,
                                 purchases.fingerprint(record, authorization, user), 201,
                                 answer, now)
            return 201, answer, record.audience

        status, answer, audience = await self._retrying(work)
        response = JSONResponse(answer, status_code=status)
        return self.cors.allow(response, request.headers.get("origin"), audience)

    def _record(self, session: Session, scope: str, intent: ChargeIntent,
                now: datetime) -> Recorded:
        """``record_charge``, where a call racing its own key's first call (a retry while
        that one still ran) is a LostRace: on PostgreSQL the delivery insert waited for the
        winner's commit and found its key taken. This run rolls back (its charge row, and
        the payment code it consumed, with it) and runs again, to answer with the winner's
        stored answer, or ``IDEMPOTENCY_KEY_REUSED`` if it was another request."""
        try:
            return record_charge(session, intent, self.c.params, now)
        except ApiError as exc:
            if (exc.code == "IDEMPOTENCY_KEY_REUSED" and idempotency.find(
                    session, intent.app.id, scope, intent.idempotency_key, now) is not None):
                raise LostRace from exc
            raise

    async def _retrying(self, work: Any) -> Any:
        """Run once more if a concurrent request with the same idempotency key won the
        insert race: the second run finds its stored answer."""
        try:
            return await self.s.run(work)
        except (IntegrityError, LostRace):
            return await self.s.run(work)

    @staticmethod
    def _amount(product: Product, order: Order | None) -> int:
        if order is not None:
            if order.status != OrderStatus.CREATED:
                raise ApiError("ORDER_ALREADY_PAID", 409, "This order is already paid.")
            return order.amount_atomic
        if product.pricing == Pricing.DYNAMIC_ORDER:
            raise ApiError("ORDER_REQUIRED", 409, "This product is priced per order: create "
                           "an order first (POST /api/orders).")
        return product.price_atomic

    # -- orders (spec 4.2) -------------------------------------------------------------

    async def create_order(self, request: Request) -> Response:
        secret = presented_key(request)
        read_body = await json_after_auth(request)
        now = self.s.clock()

        def work(session: Session) -> tuple[int, dict[str, Any]]:
            api_key = authorized_key(session, secret, "orders:create", now)
            body = read_body()
            product_id = required_str(body, "productId", 48)
            developer_user_id = required_str(body, "developerUserId", 200)
            if not developer_user_id.strip():  # an order is for someone: the grant goes there
                raise ApiError("invalid_field", 422, "'developerUserId' must name the "
                               "developer-side user.", field="developerUserId")
            key = idempotency.check_key(body.get("idempotencyKey"))
            raw_amount = body.get("amountAtomic")
            amount = None if raw_amount is None else atomic_amount(raw_amount, "amountAtomic")
            request_hash = idempotency.fingerprint({"productId": product_id, "amount": amount,
                                                    "developerUserId": developer_user_id})
            product, app = product_for_key(session, api_key, product_id)
            stored = idempotency.replay(session, app.id, "order", key, request_hash, now)
            if stored is not None:
                return stored.status, stored.body
            if product.status != ProductStatus.ACTIVE:
                raise ApiError("product_not_found", 404, "This product is not active.")
            if session.scalar(select(Order.id).where(Order.app_id == app.id,
                                                     Order.idempotency_key == key)):
                # The order keeps its key after the stored answer (30 days) is gone.
                raise ApiError("IDEMPOTENCY_KEY_REUSED", 409, "This idempotencyKey already "
                               "names another order of this app; use a new key for a new "
                               "order.")
            order = Order(app_id=app.id, product_id=product.id,
                          amount_atomic=self._order_amount(product, amount),
                          developer_user_id=developer_user_id, idempotency_key=key,
                          created_at=now)
            session.add(order)
            session.flush()
            result = {"order": self._order_view(order),
                      "product": {"id": product.id, "slug": product.slug,
                                  "paymentUrl": self.c.payment_url(app.slug, product.slug)}}
            idempotency.remember(session, app.id, "order", key, request_hash, 201, result, now)
            return 201, result

        status, result = await self._retrying(work)
        return JSONResponse(result, status_code=status)

    @staticmethod
    def _order_amount(product: Product, amount: int | None) -> int:
        if product.pricing != Pricing.DYNAMIC_ORDER:
            if amount is not None and amount != product.price_atomic:
                raise ApiError("invalid_amount", 422, "This product has a fixed price; omit "
                               "amountAtomic or send the price.", field="amountAtomic")
            return product.price_atomic
        low, high = product.min_amount_atomic or 1, product.max_amount_atomic
        if amount is None:
            raise ApiError("missing_field", 422, "This product is priced per order: send "
                           "amountAtomic.", field="amountAtomic")
        if amount < low or (high is not None and amount > high):
            bounds = (f"between {low} and {high}" if high is not None
                      else f"at least {low} (this product sets no maximum)")
            raise ApiError("invalid_amount", 422, f"amountAtomic must be {bounds}.",
                           field="amountAtomic")
        return amount

    @staticmethod
    def _order_view(order: Order) -> dict[str, Any]:
        return {"id": order.id, "status": order.status.value,
                "amountAtomic": str(order.amount_atomic), "productId": order.product_id,
                "developerUserId": order.developer_user_id,
                "idempotencyKey": order.idempotency_key,
                "chargeId": charge_id(order.charge_seq) if order.charge_seq else None,
                "createdAt": order.created_at.isoformat(),
                "paidAt": order.paid_at.isoformat() if order.paid_at else None}

    async def get_order(self, request: Request) -> Response:
        secret = presented_key(request)
        order_id = request.path_params["order_id"]
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            api_key = authorized_key(session, secret, "orders:read", now)
            order = session.get(Order, order_id) if nameable(order_id) else None
            require_app_access(api_key, session.get(App, order.app_id) if order else None,
                               "order")
            assert order is not None
            return {"order": self._order_view(order)}
        return JSONResponse(await self.s.run(work))

    # -- trusted-server charges (spec 4.4) ---------------------------------------------------

    async def trusted_charge(self, request: Request) -> Response:
        secret = presented_key(request)
        read_body = await json_after_auth(request)
        now = self.s.clock()

        def work(session: Session) -> tuple[int, dict[str, Any]]:
            api_key = authorized_key(session, secret, "charges:create", now)
            body = read_body()
            product_id = required_str(body, "productId", 48)
            connection_id = required_str(body, "accountConnectionId", 48)
            key = idempotency.check_key(body.get("idempotencyKey"))
            developer_user_id = field_str(body, "developerUserId", required=False,
                                          max_length=200)
            order_id = field_str(body, "orderId", required=False, max_length=48)
            request_hash = idempotency.fingerprint({
                "productId": product_id, "orderId": order_id,
                "accountConnectionId": connection_id, "developerUserId": developer_user_id})
            product, app = product_for_key(session, api_key, product_id)
            assert secret is not None
            stored = idempotency.replay(session, app.id, "charge", key, request_hash, now)
            if stored is not None:
                return stored.status, stored.body
            connection = session.get(AccountConnection, connection_id)
            if (connection is None or connection.app_id != app.id
                    or connection.status != ConnectionStatus.ACTIVE):
                raise ApiError("ACCOUNT_CONNECTION_MISMATCH", 409, "No active account "
                               "connection with this id for this app.")
            order = locked_order(session, order_id)
            if order_id and (order is None or order.app_id != app.id
                             or order.product_id != product.id):
                raise ApiError("AUTHORIZATION_CODE_INTENT_MISMATCH", 409, "The order does not "
                               "match this product.")
            if product.status != ProductStatus.ACTIVE:
                raise ApiError("product_not_found", 404, "This product is not active.")
            amount = self._amount(product, order)
            if order is not None:
                developer_user_id = codes.bound_user(developer_user_id,
                                                     order.developer_user_id, "order")
            # No user in the loop here: the connection is what says whose wallet pays for
            # whom, so the grant must go to the account it was made for (spec 1.5). The
            # service keeps only a hash of that account (spec 4.5): it can check a user it
            # is told, never supply one, so a charge must name it (after the replay above,
            # so a retry of a charge made while this was allowed still gets its answer).
            if developer_user_id is None:
                raise ApiError("missing_field", 422, "Send developerUserId: the "
                               "merchantUserId this account connection's handoff was made "
                               "for (or charge an order made for that user).",
                               field="developerUserId")
            if not handoffs.made_for(self.c.secret_key, app.id, connection.merchant_user_hash,
                                     developer_user_id):
                raise ApiError("ACCOUNT_CONNECTION_MISMATCH", 409, "This account connection "
                               "was made for another user than the developerUserId (or the "
                               "order's user): charge a connection of that user.")
            self._check_trusted_policy(product, amount)
            authorization = active_authorization(session, connection.owner_wallet,
                                                 self.c.params.spender)
            if authorization is None:
                raise ApiError("needs_budget", 402, "The connected wallet has no active budget; "
                               "send the user through the handoff to renew.",
                               budgetState="needs_budget")
            recorded = self._record(session, "charge", ChargeIntent(
                app=app, product=product, authorization=authorization, amount=amount,
                order=order, developer_user_id=developer_user_id, idempotency_key=key,
                source="trusted_server"), now)
            result = charge_response(recorded, authorization, now)
            result["paymentProof"] = sign_payment_proof(secret, {
                "chargeId": result["chargeId"], "deliveryId": result["deliveryId"],
                "idempotencyKey": result["idempotencyKey"], "appId": app.id,
                "productId": product.id, "amountAtomic": result["amountAtomic"],
                "ownerWallet": authorization.owner_wallet, "accountConnectionId": connection.id,
                "developerUserId": developer_user_id, "issuedAt": now.isoformat(),
                # What the proof proves (spec 1.6): a backend granting from it alone must
                # see that a settled_first delivery is not to be fulfilled yet.
                "riskMode": product.risk_mode.value, "deliveryStatus": result["status"]})
            idempotency.remember(session, app.id, "charge", key, request_hash, 201, result, now)
            return 201, result

        status, result = await self._retrying(work)
        return JSONResponse(result, status_code=status, headers={"cache-control": "no-store"})

    @staticmethod
    def _check_trusted_policy(product: Product, amount: int) -> None:
        if not product.trusted_charge_enabled:
            raise ApiError("TRUSTED_CHARGE_NOT_ALLOWED", 403, "This product does not allow "
                           "trusted-server charges (riskPolicy.trustedServerCharge.enabled).")
        cap = product.trusted_charge_max_atomic
        if cap is not None and amount > cap:
            raise ApiError("TRUSTED_CHARGE_OVER_LIMIT", 403, f"{amount} is over this product's "
                           f"trusted-charge limit of {cap}.")
