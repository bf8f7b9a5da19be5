"""Account handoffs (spec 4.5, 3.5): a backend sends its user to the portal to connect a
wallet, or learns that the user is connected and gets a summary code to pay with."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.developer.services import DeveloperServices
from payments.http import field_str, json_after_auth, required_str
from payments.ledger import codes, handoffs
from payments.ledger.authorizations import active_authorization, remaining
from payments.ledger.config import LedgerConfig
from payments.ledger.handoffs import Handoff, encode_handoff, merchant_user_hash
from payments.ledger.keyauth import authorized_key, presented_key, require_app_access
from payments.ledger.models import AccountConnection, CodeKind, ConnectionStatus
from payments.ledger.return_urls import check_return_url
from payments.ledger.routes_authorizations import app_by_slug


class HandoffRoutes:
    def __init__(self, services: DeveloperServices, config: LedgerConfig) -> None:
        self.s = services
        self.c = config

    def routes(self) -> list[Route]:
        return [Route("/api/account-handoffs", self.handoff, methods=["POST"])]

    async def handoff(self, request: Request) -> Response:
        secret = presented_key(request)
        read_body = await json_after_auth(request)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            api_key = authorized_key(session, secret, "connections:create", now)
            body = read_body()
            slug = required_str(body, "appSlug", 63)
            merchant_user_id = handoffs.merchant_user_id_of(body)
            label = field_str(body, "gameAccountLabel", required=False, max_length=120,
                              default="")
            field_str(body, "emailHint", required=False, max_length=254)
            wallet_hint = handoffs.wallet_hint_of(body)
            return_url = required_str(body, "returnUrl", 2048)
            app = require_app_access(api_key, app_by_slug(session, slug), "app")
            target = check_return_url(
                return_url, slug=app.slug, portal_url=self.c.portal_url,
                runtime_url=self.c.runtime_url(app.slug),
                runtime_active=app.runtime_served)
            user_hash = merchant_user_hash(self.c.secret_key, app.id, merchant_user_id)
            expires = now + self.c.handoff_ttl
            token = encode_handoff(self.c.secret_key, Handoff(app.id, user_hash, label or "",
                                                              expires))
            query = {"app": app.slug, "return": return_url, "handoff": token}
            if wallet_hint:
                query["walletHint"] = wallet_hint
            connection = session.scalar(select(AccountConnection).where(
                AccountConnection.app_id == app.id,
                AccountConnection.merchant_user_hash == user_hash,
                AccountConnection.status == ConnectionStatus.ACTIVE))
            authorization = (active_authorization(session, connection.owner_wallet,
                                                  self.c.params.spender)
                             if connection else None)
            ready = authorization is not None and remaining(authorization, now) > 0
            if connection is not None and not ready:
                query["renew"] = "1"
            result: dict[str, Any] = {
                "status": "ready" if ready else
                          "needs_budget" if connection is not None else "needs_connection",
                "handoff": {"portalUrl": f"{self.c.portal_url}/authorize?{urlencode(query)}",
                            "expiresAt": expires.isoformat(), "appSlug": app.slug,
                            "gameAccountLabel": label or ""},
                "connection": None if connection is None else {
                    "id": connection.id, "status": connection.status.value,
                    "ownerWallet": connection.owner_wallet,
                    "budgetRemaining": str(remaining(authorization, now) if authorization
                                           else 0),
                    "boundAt": connection.bound_at.isoformat()},
            }
            if ready and authorization is not None and connection is not None:
                issued = codes.issue(session, CodeKind.SUMMARY, ttl=self.c.summary_ttl,
                                     now=now, authorization_id=authorization.id, app_id=app.id,
                                     audience=target.audience, return_url=return_url,
                                     connection_id=connection.id)
                result["authorization"] = {
                    "ownerWallet": authorization.owner_wallet,
                    "spender": authorization.spender, "authorizationCode": issued.code,
                    "accountConnectionId": connection.id}
            return result
        return JSONResponse(await self.s.run(work), headers={"cache-control": "no-store"})

