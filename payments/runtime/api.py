"""The runtime operations of the developer API (spec 3.1, 4.10 runtime group).

``/api/developer/apps/<app>/runtime[/configure|/verify|/disable|/domain-request]``, mounted
next to the rest of the developer API: a console session (with CSRF) or a CLI grant; changes
need the grant scope ``runtime:write``. Every change is published to the routers after its
transaction commits, so the runtime host serves or stops serving it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from manifest.fetch import OriginClient
from manifest.rules import MAX_PATH_LENGTH, is_concrete_path
from manifest.url_policy import UrlRefused, check_runtime_origin
from manifest.verify import Report, verify_runtime
from payments.developer.auth import Principal, credentials, enforce_for_developer, run_as
from payments.developer.services import DeveloperServices
from payments.errors import ApiError
from payments.http import field_str, json_after_auth
from payments.models import App
from payments.ratelimit import Limit
from payments.runtime import operations
from payments.runtime.views import runtime_view

log = logging.getLogger(__name__)
T = TypeVar("T")

WRITE_SCOPE = "runtime:write"
# Verification makes outbound requests on the caller's behalf: few per client, so the
# service cannot be used to scan someone else's server.
VERIFY_LIMIT = Limit("runtime-verify", 20, 600)
CHANGE_LIMIT = Limit("runtime-change", 60, 600)

Publish = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class RuntimeServices:
    developer: DeveloperServices
    client: OriginClient  # checked, pinned requests to developer origins
    runtime_url: Callable[[str], str]
    apps_domain: str
    publish: Publish  # tells every router instance that an app changed
    # Verifications wait here, not on the database workers: each holds a thread for up to
    # three request deadlines.
    verifiers: anyio.CapacityLimiter


class RuntimeApi:
    def __init__(self, services: RuntimeServices, *, accept_session: bool) -> None:
        self.r = services
        self.s = services.developer
        self.accept_session = accept_session

    def routes(self) -> list[Route]:
        p = "/api/developer/apps/{app}/runtime"
        return [
            Route(p, self.show, methods=["GET"]),
            Route(f"{p}/configure", self.configure, methods=["POST"]),
            Route(f"{p}/verify", self.verify, methods=["POST"]),
            Route(f"{p}/disable", self.disable, methods=["POST"]),
            Route(f"{p}/domain-request", self.request_domain, methods=["POST"]),
        ]

    async def _limit(self, request: Request, limit: Limit) -> None:
        await enforce_for_developer(
            self.s, credentials(request, self.s.cookies, accept_session=self.accept_session),
            limit)

    async def _as(self, request: Request, work: Callable[[Session, Principal], T]) -> T:
        creds = credentials(request, self.s.cookies, accept_session=self.accept_session)
        return await run_as(self.s, creds, work)

    def _view(self, app: App) -> dict[str, Any]:
        return runtime_view(app, self.r.runtime_url(app.slug))

    async def _published(self, slug: str) -> None:
        try:
            await self.r.publish(slug)
        except Exception as exc:  # committed already; caches expire within their TTL
            log.warning("could not publish the change of %s: %s", slug, type(exc).__name__)

    async def show(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            return {"runtime": self._view(who.app(session, ref, "apps:read"))}
        return JSONResponse(await self._as(request, work))

    async def configure(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)
        await self._limit(request, CHANGE_LIMIT)  # authenticates first

        def work(session: Session, who: Principal) -> tuple[dict[str, Any], bool]:
            app = who.app(session, ref, WRITE_SCOPE)  # before the body: 404 whatever it is
            body = read_body()
            origin = self._origin(field_str(body, "origin", max_length=2048))
            app_path = _path(body, "appPath", "/")
            # Where a full-page authorization return lands: the app's own screen unless
            # told otherwise (spec 2.8 defaults both to /; an app at /play returns to /play).
            entry_path = _path(body, "entryPath", app_path)
            changed = operations.configure(session, app, origin, app_path, entry_path)
            return {"runtime": self._view(app), "changed": changed}, changed
        result, changed = await self._as(request, work)
        if changed:
            await self._published(result["runtime"]["app"])
        return JSONResponse(result)

    async def verify(self, request: Request) -> Response:
        ref = request.path_params["app"]
        await self._limit(request, VERIFY_LIMIT)

        def read(session: Session, who: Principal) -> operations.Snapshot:
            return operations.snapshot(who.app(session, ref, WRITE_SCOPE))
        before = await self._as(request, read)
        report: Report = await anyio.to_thread.run_sync(
            verify_runtime, before.origin, before.expected, self.r.client,
            limiter=self.r.verifiers)

        def store(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, WRITE_SCOPE)
            operations.record_verification(session, app, before, report, self.s.clock())
            return self._view(app)
        view = await self._as(request, store)
        await self._published(view["app"])
        checks = [c.as_dict() for c in report.checks]
        if not report.passed:
            failed = [c["rule"] for c in checks if not c["passed"]]
            raise ApiError("runtime_verification_failed", 422,
                           f"Runtime verification failed: {len(failed)} of {len(checks)} "
                           f"checks did not pass ({'; '.join(failed)}).",
                           runtime=view, checks=checks)
        return JSONResponse({"runtime": view, "report": {"passed": True, "checks": checks}})

    async def disable(self, request: Request) -> Response:
        ref = request.path_params["app"]
        await self._limit(request, CHANGE_LIMIT)

        def work(session: Session, who: Principal) -> tuple[dict[str, Any], bool]:
            app = who.app(session, ref, WRITE_SCOPE)
            changed = operations.disable(session, app)
            return {"runtime": self._view(app), "changed": changed}, changed
        result, changed = await self._as(request, work)
        if changed:
            await self._published(result["runtime"]["app"])
        return JSONResponse(result)

    async def request_domain(self, request: Request) -> Response:
        ref = request.path_params["app"]
        await self._limit(request, CHANGE_LIMIT)

        def work(session: Session, who: Principal) -> tuple[dict[str, Any], bool]:
            app = who.app(session, ref, WRITE_SCOPE)
            hostname = f"{app.slug}.{self.r.apps_domain}"
            filed = operations.request_domain(session, app, hostname, who.developer_id,
                                              self.s.clock())
            return {"runtime": self._view(app), "hostname": hostname, "requested": filed}, filed
        result, filed = await self._as(request, work)
        if filed:
            await self._published(result["runtime"]["app"])
        return JSONResponse(result)

    def _origin(self, raw: str | None) -> str:
        if raw is None:
            raise ApiError("missing_field", 422, "'origin' is required: your deployed HTTPS "
                           "origin, e.g. https://game.example.com.", field="origin")
        try:
            checked = check_runtime_origin(raw, self.r.client.policy)
        except UrlRefused as exc:
            raise ApiError(exc.code, 422, exc.message, field="origin", rule=exc.rule) from None
        # Stored canonical: lower-case host, no default port, no trailing slash.
        return f"{checked.scheme}://{checked.host_header}"


def _path(body: dict[str, Any], name: str, default: str) -> str:
    value = body.get(name, default)
    if value is None or not is_concrete_path(value):
        raise ApiError("invalid_field", 422, f"'{name}' must be a concrete path such as \"/\" "
                       f"or \"/play\" (starting with one '/', no query or fragment, at most "
                       f"{MAX_PATH_LENGTH} characters); it is never null.", field=name)
    assert isinstance(value, str)
    return value

