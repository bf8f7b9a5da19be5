"""Portal JSON endpoints about one wallet: its budget and nonce, what to sign, renewing the
global budget, a public balance read, and (dev only) the dev wallet.

Reads need no token: they change nothing and send no CORS headers, so only the portal's
own pages can read them (the balance read excepted, which is public chain data).
Writes need the portal ``Origin`` and a page token (``portal/csrf.py``).
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import anyio.to_thread
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.chain.in_process import InProcessChain
from payments.developer.services import client_ip
from payments.digits import parse_digits
from payments.errors import ApiError, error_response
from payments.http import read_json
from payments.ledger.authorizations import active_authorization, authorize_permit
from payments.ledger.cors import EXPOSED_HEADERS
from payments.ledger.handoffs import decode_handoff
from payments.ledger.permits import (
    check_address,
    owner_proof_text,
    parse_permit,
    permit_typed_data,
    verify_permit,
)
from payments.ledger.return_urls import check_return_url
from payments.ledger.routes_authorizations import app_by_slug
from payments.portal.devwallet import DEV_FUNDS_ATOMIC, dev_account, sign_request
from payments.portal.wallets import current_budget, next_permit_nonce
from payments.ratelimit import Limit, enforce
from portal import chain_reads
from portal.config import PortalConfig
from portal.csrf import check_page_token

MAX_BUDGET_ATOMIC = 10_000 * 1_000_000  # 10,000 USDC: a budget, not a balance
MIN_DEADLINE = timedelta(minutes=10)
MAX_DEADLINE = timedelta(days=400)
NO_STORE = {"cache-control": "no-store"}


def _query_address(request: Request, name: str) -> str:
    return check_address(request.query_params.get(name), name)


def _query_int(request: Request, name: str, low: int, high: int) -> int:
    number = parse_digits(request.query_params.get(name, ""), 20)
    if number is None or not low <= number <= high:
        raise ApiError("invalid_field", 422, f"'{name}' must be a whole number from {low} to "
                       f"{high}.", field=name)
    return number


class WalletApi:
    def __init__(self, config: PortalConfig) -> None:
        self.c = config
        self.s = config.services

    def routes(self) -> list[Route]:
        routes = [
            Route("/api/portal/wallet", self.wallet, methods=["GET"]),
            Route("/api/portal/permit", self.permit, methods=["GET"]),
            Route("/api/portal/owner-proof", self.owner_proof, methods=["GET"]),
            Route("/api/portal/budget", self.renew, methods=["POST"]),
            Route("/api/public/usdc-balance", self.balance, methods=["GET"]),
        ]
        if self.c.dev:  # never mounted outside dev
            routes += [Route("/api/portal/dev-wallet/account", self.dev_account,
                             methods=["POST"]),
                       Route("/api/portal/dev-wallet/sign", self.dev_sign, methods=["POST"])]
        return routes

    async def _limit(self, request: Request, limit: Limit) -> None:
        """Each read asks the chain's node: a per-client limit keeps a script from spending
        the node's request budget (docs/decisions.md)."""
        await enforce(self.s.limiter(), limit, client_ip(self.s, request))

    async def wallet(self, request: Request) -> Response:
        """The wallet's budget (ledger ``remaining``), next permit nonce and USDC balance."""
        owner = _query_address(request, "address")
        await self._limit(request, self.s.limits.wallet_read)
        chain = self.c.chain()
        chain_nonce = await chain_reads.permit_nonce(chain, owner)
        balance = await chain_reads.usdc_balance(chain, owner)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            budget = current_budget(session, owner, self.c.params.spender, now)
            return {"address": owner,
                    "permitNonce": str(next_permit_nonce(session, owner, chain_nonce)),
                    "budget": budget.to_json() if budget else None,
                    "usdcBalance": None if balance is None else str(balance)}
        return JSONResponse(await self.s.run(work), headers=NO_STORE)

    async def permit(self, request: Request) -> Response:
        """The exact EIP-712 ``Permit`` to sign: our token, our spender, nothing else (1.10)."""
        owner = _query_address(request, "owner")
        value = _query_int(request, "value", 0, MAX_BUDGET_ATOMIC)
        now = self.s.clock()
        if value > 0:  # a revoke (value 0) may carry any future deadline
            low, high = now + MIN_DEADLINE, now + MAX_DEADLINE
        else:
            low, high = now, now + MAX_DEADLINE
        deadline = _query_int(request, "deadline", int(low.timestamp()), int(high.timestamp()))
        await self._limit(request, self.s.limits.wallet_read)
        chain_nonce = await chain_reads.permit_nonce(self.c.chain(), owner)

        def work(session: Session) -> int:
            return next_permit_nonce(session, owner, chain_nonce)
        nonce = await self.s.run(work)
        data = permit_typed_data(self.c.params, owner, value, nonce, deadline)
        # Decimal strings: a wallet's JSON numbers lose precision above 2**53.
        data["message"] = {k: str(v) if isinstance(v, int) else v
                           for k, v in data["message"].items()}
        return JSONResponse({"typedData": data}, headers=NO_STORE)

    async def owner_proof(self, request: Request) -> Response:
        """The text of the gas-free owner proof for the wallet's current budget: the
        cached-authorization shortcut of the authorize page (``return-code`` ownerProof)."""
        owner = _query_address(request, "owner")
        slug = request.query_params.get("app", "")
        return_url = request.query_params.get("returnUrl", "")
        handoff = request.query_params.get("handoff")
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            app = app_by_slug(session, slug)
            check_return_url(return_url, slug=app.slug, portal_url=self.c.portal_url,
                             runtime_url=self.c.ledger.runtime_url(app.slug),
                             runtime_active=app.runtime_served)
            # With an account handoff the text names the game account it links, as
            # return-code verifies it (the wallet shows what the signature does).
            links = None
            if handoff:
                decoded = decode_handoff(self.c.secret_key, handoff, now)
                if decoded.app_id != app.id:
                    raise ApiError("handoff_invalid", 422, "The account handoff belongs to "
                                   "another app.")
                links = decoded.label
            budget = active_authorization(session, owner, self.c.params.spender)
            if budget is None:
                raise ApiError("needs_budget", 402, "This wallet has no active budget; sign a "
                               "permit.", budgetState="needs_budget")
            issued = now.astimezone(UTC).replace(microsecond=0).isoformat()
            return {"authorizationId": budget.id, "issuedAt": issued,
                    "text": owner_proof_text(app.slug, return_url, self.c.params.spender,
                                             budget.id, issued, links)}
        return JSONResponse(await self.s.run(work), headers=NO_STORE)

    async def renew(self, request: Request) -> Response:
        """Renew the global budget from the account page: a new permit replaces the old
        budget, for every app (spec 1.8, 1.9). Apps renew through the authorize page."""
        now = self.s.clock()
        check_page_token(request, self.c.secret_key, self.c.portal_origin, now)
        body = await read_json(request)
        permit = parse_permit(body.get("permit"))
        verify_permit(self.c.params, permit)

        def work(session: Session) -> dict[str, Any]:
            authorize_permit(session, self.c.params, permit, now)
            budget = current_budget(session, permit.owner, self.c.params.spender, now)
            assert budget is not None
            return {"budget": budget.to_json()}
        try:
            result = await self.s.run(work)
        except IntegrityError:
            # A concurrent call inserted the one active budget first: run again, which
            # refuses a second submit of the same permit (permit_already_used).
            result = await self.s.run(work)
        return JSONResponse(result, headers=NO_STORE)

    async def balance(self, request: Request) -> Response:
        """Public chain data for the runtime wallet card; readable from any origin."""
        headers = {"access-control-allow-origin": "*", "cache-control": "no-store",
                   "access-control-expose-headers": EXPOSED_HEADERS}
        try:
            owner = _query_address(request, "address")
            await self._limit(request, self.s.limits.public_balance)
        except ApiError as error:  # readable by the page that asked, as the answer is
            return error_response(error, headers)
        balance = await chain_reads.usdc_balance(self.c.chain(), owner)
        return JSONResponse({"address": owner,
                             "balanceAtomic": None if balance is None else str(balance)},
                            headers=headers)

    # -- the dev wallet (dev mode only) ------------------------------------------------------

    async def dev_account(self, request: Request) -> Response:
        check_page_token(request, self.c.secret_key, self.c.portal_origin, self.s.clock())
        await read_json(request)
        account = dev_account(self.c.secret_key)
        chain = self.c.chain()
        if isinstance(chain, InProcessChain):
            # The in-process TestUSDC faucet: the dev wallet always holds test funds. A
            # node's chain (dev against a node) is reads only: no faucet, nothing signed.
            await anyio.to_thread.run_sync(chain.top_up, account.address, DEV_FUNDS_ATOMIC)
        return JSONResponse({"address": account.address,
                             "chainId": hex(self.c.params.chain_id)}, headers=NO_STORE)

    async def dev_sign(self, request: Request) -> Response:
        check_page_token(request, self.c.secret_key, self.c.portal_origin, self.s.clock())
        body = await read_json(request)
        account = dev_account(self.c.secret_key)
        signature = sign_request(account, self.c.params, body.get("method"), body.get("params"))
        return JSONResponse({"result": signature}, headers=NO_STORE)
