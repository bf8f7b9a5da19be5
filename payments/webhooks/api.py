"""Developer API for the app's webhook endpoint, its test event, attempts and retries.

Mounted beside ``payments.developer.api`` (same authentication: a CLI grant on the API
host, also a console session on the console host). Reads need ``apps:read``; changes need
``webhooks:write``. Management calls are rate-limited per developer account (spec 8 item
2). The signing secret is in the answers of creation and rotation only (``no-store``).
What each call does is ``operations``'s, which the console's pages call too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.developer.auth import Principal, credentials, enforce_for_developer, run_as
from payments.http import json_after_auth, page_size
from payments.ratelimit import Limit
from payments.webhooks import operations as ops
from payments.webhooks.attempt_cursor import attempt_cursor
from payments.webhooks.services import WebhookServices

T = TypeVar("T")
NO_STORE = {"cache-control": "no-store"}


class WebhookApi:
    def __init__(self, services: WebhookServices, *, accept_session: bool) -> None:
        self.s = services
        self.accept_session = accept_session

    def routes(self) -> list[Route]:
        p = "/api/developer/apps/{app}"
        return [
            Route(f"{p}/webhooks", self.list_endpoints, methods=["GET"]),
            Route(f"{p}/webhooks", self.create, methods=["POST"]),
            Route(f"{p}/webhooks/{{webhook}}", self.get, methods=["GET"]),
            Route(f"{p}/webhooks/{{webhook}}", self.update, methods=["PATCH"]),
            Route(f"{p}/webhooks/{{webhook}}/rotate", self.rotate, methods=["POST"]),
            Route(f"{p}/webhooks/{{webhook}}/test", self.test, methods=["POST"]),
            Route(f"{p}/webhooks/{{webhook}}/resend-skipped", self.resend_skipped,
                  methods=["POST"]),
            Route(f"{p}/webhook-attempts", self.list_attempts, methods=["GET"]),
            Route(f"{p}/webhook-attempts/{{attempt}}", self.get_attempt, methods=["GET"]),
            Route(f"{p}/webhook-attempts/{{attempt}}/retry", self.retry, methods=["POST"]),
        ]

    # Plumbing

    async def _as(self, request: Request, work: Callable[[Session, Principal], T]) -> T:
        creds = credentials(request, self.s.developer.cookies,
                            accept_session=self.accept_session)
        return await run_as(self.s.developer, creds, work)

    async def _limit(self, request: Request, limit: Limit) -> None:
        await enforce_for_developer(
            self.s.developer, credentials(request, self.s.developer.cookies,
                                          accept_session=self.accept_session), limit)

    # Endpoints

    async def list_endpoints(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> list[ops.View]:
            _, endpoint = ops.app_endpoint(session, who, ref)
            return [] if endpoint is None else [endpoint]
        return JSONResponse({"webhooks": await self._as(request, work)})

    async def get(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        return JSONResponse({"webhook": await self._as(
            request, lambda session, who: ops.get_endpoint(session, who, ref, hook))})

    async def create(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)
        await self._limit(request, self.s.limits.management)  # authenticates first
        # The app, then the body and the URL's text rules, then its DNS answers, before
        # the unit that saves it.
        url, events, checked = await self._as(request, lambda session, who: (
            ops.checked_creation(session, who, ref, read_body, self.s)))
        await ops.resolve(checked, self.s)
        webhook, secret = await self._as(request, lambda session, who: ops.create(
            session, who, ref, url, events, self.s))
        # The only answers that carry the secret: this one and rotate's.
        return JSONResponse({"webhook": webhook, "secret": secret}, status_code=201,
                            headers=NO_STORE)

    async def update(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        read_body = await json_after_auth(request)
        await self._limit(request, self.s.limits.management)  # authenticates first
        wanted, checked = await self._as(request, lambda session, who: (
            ops.checked_change(session, who, ref, hook, read_body, self.s)))
        if checked is not None:
            await ops.resolve(checked, self.s)
        return JSONResponse({"webhook": await self._as(request, lambda session, who: ops.change(
            session, who, ref, hook, wanted, self.s))})

    async def rotate(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        await self._limit(request, self.s.limits.management)
        webhook, secret = await self._as(request, lambda session, who: ops.rotate(
            session, who, ref, hook, self.s))
        return JSONResponse({"webhook": webhook, "secret": secret}, headers=NO_STORE)

    async def test(self, request: Request) -> Response:
        """Queue a test event (spec 6 item 7); the answer does not wait for the request.
        Its attempt shows the outcome (``GET .../webhook-attempts/<id>``)."""
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        await self._limit(request, self.s.limits.test)
        return JSONResponse({"attempt": await self._as(request, lambda session, who: (
            ops.queue_test(session, who, ref, hook, self.s)))}, status_code=202)

    async def resend_skipped(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        await self._limit(request, self.s.limits.management)
        return JSONResponse(await self._as(request, lambda session, who: ops.resend_skipped(
            session, who, ref, hook, self.s)), status_code=202)

    # Attempts

    async def list_attempts(self, request: Request) -> Response:
        ref = request.path_params["app"]
        query = request.query_params

        def wanted() -> ops.AttemptFilter:
            return ops.attempt_filter(query.get("status"), query.get("type"),
                                      attempt_cursor(query.get("before")),
                                      page_size(query.get("limit")))
        return JSONResponse(await self._as(request, lambda session, who: ops.list_attempts(
            session, who, ref, wanted)))

    async def get_attempt(self, request: Request) -> Response:
        ref, attempt_ref = request.path_params["app"], request.path_params["attempt"]
        return JSONResponse(await self._as(request, lambda session, who: ops.get_attempt(
            session, who, ref, attempt_ref)))

    async def retry(self, request: Request) -> Response:
        ref, attempt_ref = request.path_params["app"], request.path_params["attempt"]
        await self._limit(request, self.s.limits.management)
        return JSONResponse({"attempt": await self._as(request, lambda session, who: ops.retry(
            session, who, ref, attempt_ref, self.s))}, status_code=202)

