"""Developer API for the app's webhook endpoint, its test event, attempts and retries.

Mounted beside ``payments.developer.api`` (same authentication: a CLI grant on the API
host, also a console session on the console host). Reads need ``apps:read``; changes need
``webhooks:write``. Management calls are rate-limited per client address (spec 8 item 2).
The signing secret is in the answers of creation and rotation only (``no-store``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payments.chain.params import ChainParams
from payments.developer.auth import Principal, credentials, enforce_for_developer, run_as
from payments.developer.services import DeveloperServices
from payments.errors import ApiError
from payments.http import field_str, field_str_list, json_after_auth, page_size, required_str
from payments.ledger.models import AttemptStatus, WebhookAttempt, WebhookEvent
from payments.models import App
from payments.ratelimit import Limit
from payments.webhooks import endpoints, outbox
from payments.webhooks.endpoints import UrlChecks
from payments.webhooks.models import EVENT_TYPES, WebhookEndpoint, WebhookTry
from payments.webhooks.samples import test_event_payload
from payments.webhooks.signing_secrets import SecretBox
from payments.webhooks.views import attempt_view, endpoint_view, iso, try_view

T = TypeVar("T")
NO_STORE = {"cache-control": "no-store"}


@dataclass(frozen=True)
class WebhookLimits:
    management: Limit = Limit("webhook-management", 30, 60)
    test: Limit = Limit("webhook-test", 10, 60)


@dataclass(frozen=True)
class WebhookServices:
    developer: DeveloperServices
    checks: UrlChecks
    box: SecretBox
    params: ChainParams
    limits: WebhookLimits = field(default_factory=WebhookLimits)


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
            Route(f"{p}/webhook-attempts", self.list_attempts, methods=["GET"]),
            Route(f"{p}/webhook-attempts/{{attempt}}", self.get_attempt, methods=["GET"]),
            Route(f"{p}/webhook-attempts/{{attempt}}/retry", self.retry, methods=["POST"]),
        ]

    # Plumbing

    async def _as(self, request: Request, work: Callable[[Session, Principal], T]) -> T:
        return await run_as(self.s.developer,
                            credentials(request, accept_session=self.accept_session), work)

    async def _limit(self, request: Request, limit: Limit) -> None:
        await enforce_for_developer(
            self.s.developer, credentials(request, accept_session=self.accept_session), limit)

    async def _resolved(self, request: Request, ref: str, url: str) -> None:
        """The URL's text rules, then its DNS answers, before the transaction that saves it:
        a slow DNS server must hold no database lock (SQLite locks at BEGIN)."""
        def read(session: Session, who: Principal) -> App:
            return who.app(session, ref, "webhooks:write")
        app = await self._as(request, read)
        checked = endpoints.check_url(url, app, self.s.checks)
        await anyio.to_thread.run_sync(endpoints.resolve_url, checked, self.s.checks)

    # Endpoints

    async def list_endpoints(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            found = session.scalars(select(WebhookEndpoint).where(
                WebhookEndpoint.app_id == app.id)).all()
            return {"webhooks": [endpoint_view(e) for e in found]}
        return JSONResponse(await self._as(request, work))

    async def get(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            return {"webhook": endpoint_view(endpoints.endpoint_of(session, app, hook))}
        return JSONResponse(await self._as(request, work))

    async def create(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)
        await self._limit(request, self.s.limits.management)  # authenticates first
        body = read_body()
        url = required_str(body, "url", 8192)
        events = endpoints.parse_events(field_str_list(body, "events", max_items=10),
                                        default=endpoints.DEFAULT_EVENTS)
        await self._resolved(request, ref, url)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "webhooks:write")
            checked = endpoints.check_url(url, app, self.s.checks)  # the runtime may have moved
            created = endpoints.create_endpoint(session, app, checked, events, self.s.box,
                                                self.s.developer.clock())
            # The only answers that carry the secret: this one and rotate's.
            return {"webhook": endpoint_view(created.endpoint), "secret": created.secret}
        return JSONResponse(await self._as(request, work), status_code=201, headers=NO_STORE)

    async def update(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        read_body = await json_after_auth(request)
        await self._limit(request, self.s.limits.management)  # authenticates first
        body = read_body()
        url = field_str(body, "url", required=False, max_length=8192)
        raw_events = field_str_list(body, "events", max_items=10)
        events = None if raw_events is None else endpoints.parse_events(raw_events, default=None)
        enabled = body.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise ApiError("invalid_field", 422, "'enabled' must be true or false.",
                           field="enabled")
        if url is not None:
            await self._resolved(request, ref, url)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "webhooks:write")
            endpoint = endpoints.endpoint_of(session, app, hook)
            checked = None if url is None else endpoints.check_url(url, app, self.s.checks)
            endpoints.update_endpoint(endpoint, checked=checked, events=events, enabled=enabled,
                                      now=self.s.developer.clock())
            session.flush()
            return {"webhook": endpoint_view(endpoint)}
        return JSONResponse(await self._as(request, work))

    async def rotate(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        await self._limit(request, self.s.limits.management)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "webhooks:write")
            endpoint = endpoints.endpoint_of(session, app, hook)
            secret = endpoints.rotate_secret(endpoint, self.s.box, self.s.developer.clock())
            session.flush()
            return {"webhook": endpoint_view(endpoint), "secret": secret}
        return JSONResponse(await self._as(request, work), headers=NO_STORE)

    async def test(self, request: Request) -> Response:
        """Queue a test event (spec 6 item 7); the answer does not wait for the request.
        Its attempt shows the outcome (``GET .../webhook-attempts/<id>``)."""
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        await self._limit(request, self.s.limits.test)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "webhooks:write")
            endpoints.endpoint_of(session, app, hook)
            now = self.s.developer.clock()
            payload = test_event_payload(session, app, self.s.params, now)
            attempt = outbox.enqueue(session, app.id, "payment.delivered", payload, None, now)
            event = session.get(WebhookEvent, payload["id"])
            assert event is not None
            return {"attempt": attempt_view(attempt, event)}
        return JSONResponse(await self._as(request, work), status_code=202)

    # Attempts

    async def list_attempts(self, request: Request) -> Response:
        ref = request.path_params["app"]
        query = request.query_params
        status = query.get("status")
        if status is not None and status not in {s.value for s in AttemptStatus}:
            raise ApiError("invalid_field", 422, "'status' must be one of "
                           f"{', '.join(s.value for s in AttemptStatus)}.", field="status")
        event_type = query.get("type")
        if event_type is not None and event_type not in EVENT_TYPES:
            raise ApiError("invalid_field", 422, f"'type' must be one of "
                           f"{', '.join(EVENT_TYPES)}.", field="type")
        limit = page_size(query.get("limit"))
        before = _timestamp(query.get("before"), "before")

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            q = (select(WebhookAttempt, WebhookEvent)
                 .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
                 .where(WebhookEvent.app_id == app.id))
            if status is not None:
                q = q.where(WebhookAttempt.status == AttemptStatus(status))
            if event_type is not None:
                q = q.where(WebhookEvent.type == event_type)
            if before is not None:
                q = q.where(WebhookEvent.created_at < before)
            rows = session.execute(q.order_by(WebhookEvent.created_at.desc(),
                                              WebhookEvent.id.desc()).limit(limit)).all()
            views = [attempt_view(a, e) for a, e in rows]
            last = iso(rows[-1][1].created_at) if len(rows) == limit else None
            return {"attempts": views, "nextBefore": last}
        return JSONResponse(await self._as(request, work))

    async def get_attempt(self, request: Request) -> Response:
        ref, attempt_ref = request.path_params["app"], request.path_params["attempt"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            attempt, event = _attempt_of(session, app, attempt_ref)
            tries = session.scalars(select(WebhookTry).where(
                WebhookTry.attempt_id == attempt.id).order_by(WebhookTry.id)).all()
            # The event body as sent: no signature, no header, no secret (spec 5.6 item 3).
            return {"attempt": attempt_view(attempt, event), "event": dict(event.payload),
                    "tries": [try_view(t) for t in tries]}
        return JSONResponse(await self._as(request, work))

    async def retry(self, request: Request) -> Response:
        ref, attempt_ref = request.path_params["app"], request.path_params["attempt"]
        await self._limit(request, self.s.limits.management)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "webhooks:write")
            attempt, event = _attempt_of(session, app, attempt_ref)
            outbox.retry(session, attempt, self.s.developer.clock())
            return {"attempt": attempt_view(attempt, event)}
        return JSONResponse(await self._as(request, work), status_code=202)


def _attempt_of(session: Session, app: App, ref: str) -> tuple[WebhookAttempt, WebhookEvent]:
    """By attempt id (``zwha_``) or event id (``zevt_``): retries are asked for by either."""
    column = WebhookEvent.id if ref.startswith("zevt_") else WebhookAttempt.id
    row = session.execute(
        select(WebhookAttempt, WebhookEvent)
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .where(column == ref, WebhookEvent.app_id == app.id)).first()
    if row is None:
        raise ApiError("webhook_attempt_not_found", 404, f"No webhook attempt or event "
                       f"'{ref}' on app '{app.slug}'.")
    return row[0], row[1]


def _timestamp(raw: str | None, name: str) -> datetime | None:
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError("invalid_field", 422, f"'{name}' must be an ISO 8601 time.",
                       field=name) from None
    if value.tzinfo is None:
        raise ApiError("invalid_field", 422, f"'{name}' needs a time zone.", field=name)
    return value
