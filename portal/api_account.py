"""Portal JSON endpoints of the account page: the wallet-ownership proof, the records it
unlocks (connected apps, spend), unlinking, and forgetting the proof.

The proof opens a browser session: a random token in an HttpOnly, host-only cookie
(no ``Domain``, so it never reaches the API, console or runtime hosts; over https named
``__Host-svc_portal_wallet``, so no other host can plant one, payments/cookies.py) without
``Max-Age``, so it ends with the browser session (spec 4.7); the server also ends it
after 12 hours.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.developer.services import client_ip
from payments.errors import ApiError
from payments.http import read_json, required_str
from payments.ledger.permits import check_address
from payments.portal import account, proofs
from payments.portal.models import WalletSession
from payments.portal.wallets import current_budget
from payments.ratelimit import enforce
from portal.config import PortalConfig
from portal.csrf import check_page_token, check_session_token

WALLET_COOKIE = "svc_portal_wallet"  # the base name (payments/cookies.py)
NO_STORE = {"cache-control": "no-store"}


def proof_required() -> ApiError:
    return ApiError("wallet_proof_required", 401, "Verify your wallet to see connected apps "
                    "and spend records.")


class AccountApi:
    def __init__(self, config: PortalConfig) -> None:
        self.c = config
        self.s = config.services

    def routes(self) -> list[Route]:
        p = "/api/portal"
        return [
            Route(f"{p}/wallet-proof/challenge", self.challenge, methods=["POST"]),
            Route(f"{p}/wallet-proof", self.prove, methods=["POST"]),
            Route(f"{p}/wallet-proof/forget", self.forget, methods=["POST"]),
            Route(f"{p}/account", self.account, methods=["GET"]),
            Route(f"{p}/connections/{{connection_id}}/unlink", self.unlink, methods=["POST"]),
        ]

    async def challenge(self, request: Request) -> Response:
        now = self.s.clock()
        check_page_token(request, self.c.secret_key, self.c.portal_origin, now)
        body = await read_json(request)
        challenge, token = proofs.issue_challenge(
            self.c.secret_key, check_address(body.get("address"), "address"), now)
        return JSONResponse({"challenge": token, "message": challenge.message(self.c.portal_url),
                             "expiresAt": challenge.expires_at.isoformat()}, headers=NO_STORE)

    async def prove(self, request: Request) -> Response:
        now = self.s.clock()
        check_page_token(request, self.c.secret_key, self.c.portal_origin, now)
        # Each proof opens a session row: counted per client, whatever came of it.
        await enforce(self.s.limiter(), self.s.limits.wallet_proof, client_ip(self.s, request))
        body = await read_json(request)
        challenge = proofs.read_challenge(self.c.secret_key,
                                          required_str(body, "challenge", 600), now)
        signature = body.get("signature")

        def work(session: Session) -> tuple[str, dict[str, Any]]:
            opened = proofs.open_wallet_session(session, challenge, signature,
                                                self.c.portal_url, now)
            return opened.token, self._view(session, opened.record)
        token, view = await self.s.run(work)
        response = JSONResponse(view, headers=NO_STORE)
        # SameSite=Strict: only the portal's own pages ever need it.
        self.c.cookies.set(response, WALLET_COOKIE, token, samesite="strict")
        return response

    async def account(self, request: Request) -> Response:
        now = self.s.clock()
        cookie = self.c.cookies.read(request, WALLET_COOKIE)

        def work(session: Session) -> dict[str, Any]:
            record = proofs.live_wallet_session(session, cookie, now)
            if record is None:
                raise proof_required()
            return self._view(session, record)
        return JSONResponse(await self.s.run(work), headers=NO_STORE)

    async def unlink(self, request: Request) -> Response:
        now = self.s.clock()
        cookie = self.c.cookies.read(request, WALLET_COOKIE)
        connection_id = request.path_params["connection_id"]

        def work(session: Session) -> dict[str, Any]:
            record = proofs.live_wallet_session(session, cookie, now)
            if record is None:
                raise proof_required()
            check_session_token(request, record.csrf_token, self.c.portal_origin)
            account.unlink(session, record.wallet, connection_id)
            return self._view(session, record)
        return JSONResponse(await self.s.run(work), headers=NO_STORE)

    async def forget(self, request: Request) -> Response:
        now = self.s.clock()
        cookie = self.c.cookies.read(request, WALLET_COOKIE)

        def work(session: Session) -> None:
            record = proofs.live_wallet_session(session, cookie, now)
            if record is not None:
                check_session_token(request, record.csrf_token, self.c.portal_origin)
                proofs.end_wallet_session(session, record, now)
        await self.s.run(work)
        response = JSONResponse({"forgotten": True}, headers=NO_STORE)
        self.c.cookies.clear(response, WALLET_COOKIE, samesite="strict")
        return response

    def _view(self, session: Session, record: WalletSession) -> dict[str, Any]:
        now = self.s.clock()
        budget = current_budget(session, record.wallet, self.c.params.spender, now)
        return {"wallet": record.wallet, "csrfToken": record.csrf_token,
                "verifiedUntil": record.expires_at.isoformat(),
                "budget": budget.to_json() if budget else None,
                "connections": account.connected_apps(session, record.wallet),
                "spend": account.spend_records(session, record.wallet)}
