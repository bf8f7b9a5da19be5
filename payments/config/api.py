"""The developer configuration API (spec 4.8): plan, apply, revisions, rollback.

Mounted beside the developer API, with its authentication: a CLI grant (one app) on the API
host, also a console session on the console host (which may create the app a config names).
A grant needs spec 5.3's scopes, the ones the resources' own APIs ask for: ``apps:read`` to
plan and read revisions; to apply or roll back, ``apps:read`` and the write scope of each
kind of change the plan makes (``Plan.write_scopes``), so config is no way around them.
Request bodies are ours (docs/config.md): ``{"config": {...svc.config.v1...}, "mode":
"merge"|"mirror", "baseRevision": "zcfgrev_..."|null, "planDigest": "sha256:..."}``; a
rollback, and the plan of one, name a ``revision`` instead of ``config`` and ``mode``
(what it applies: ``payments.config.rollback``).

A webhook URL's DNS answers are checked between two units of work, never inside one (a
slow DNS server must hold no database lock), as the webhook API does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from manifest.url_policy import UrlRefused, check_webhook_url
from payments.config.apply import apply_config
from payments.config.document import Problem, check_document, check_mode
from payments.config.history import (
    revision_cursor,
    revision_detail,
    revision_view,
    revisions_of,
)
from payments.config.models import ConfigRevision
from payments.config.plan import Context, Plan, make_plan
from payments.config.rollback import rollback_target
from payments.developer.auth import Principal, credentials, enforce_for_developer, run_as
from payments.developer.grants import CONFIG_SCOPES
from payments.errors import ApiError
from payments.http import field_str, json_after_auth, page_size, required_str
from payments.ids import IdPrefix
from payments.models import App
from payments.ratelimit import Limit
from payments.webhooks import endpoints
from payments.webhooks.endpoints import url_error
from payments.webhooks.services import WebhookServices

log = logging.getLogger(__name__)
T = TypeVar("T")
NO_STORE = {"cache-control": "no-store"}
APPLY_LIMIT = Limit("config-apply", 30, 60)
READ = "apps:read"  # plan, revisions; apply adds what its plan changes (Plan.write_scopes)


@dataclass(frozen=True)
class ConfigRequest:
    """A plan or apply request, read after the caller was authenticated."""

    document: dict[str, Any]
    mode: str
    base: str | None
    digest: str | None
    notes: list[dict[str, str]] = field(default_factory=list)  # warnings the plan adds
    rollback_of: str | None = None  # the revision a rollback goes back to
    restores_state: bool = False  # the document is that revision's state (make_plan)


class ConfigApi:
    def __init__(self, services: WebhookServices, runtime_url: Callable[[str], str],
                 publish: Callable[[str], Awaitable[None]], *, accept_session: bool) -> None:
        self.s = services
        self.context = Context(services.checks.policy, runtime_url)
        self.publish = publish
        self.accept_session = accept_session

    def routes(self) -> list[Route]:
        p = "/api/developer/config"
        return [
            Route(f"{p}/plan", self.plan, methods=["POST"]),
            Route(f"{p}/apply", self.apply, methods=["POST"]),
            Route(f"{p}/revisions", self.revisions, methods=["GET"]),
            Route(f"{p}/revisions/{{revision}}", self.revision, methods=["GET"]),
            Route(f"{p}/rollback", self.rollback, methods=["POST"]),
        ]

    async def _as(self, request: Request, work: Callable[[Session, Principal], T]) -> T:
        creds = credentials(request, self.s.developer.cookies,
                            accept_session=self.accept_session)
        return await run_as(self.s.developer, creds, work)

    # -- plan and apply -----------------------------------------------------------------

    async def plan(self, request: Request) -> Response:
        read_body = await json_after_auth(request, max_bytes=4 * 1024 * 1024)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            body = read_body()
            app: App | None
            if "revision" in body:  # the plan of a rollback to it, as the rollback makes it
                app, asked = _rollback_request(session, who, body, need_base=False)
            else:
                asked = _read(body, need_base=False)
                app = _target(session, who, asked.document["app"]["slug"], READ)
            return _planned(session, app, asked, self.context).as_dict()
        result = await self._as(request, work)
        await self._dns_problems(result)
        return JSONResponse(result, headers=NO_STORE)

    async def apply(self, request: Request) -> Response:
        read_body = await json_after_auth(request, max_bytes=4 * 1024 * 1024)
        await self._limit(request)
        asked: list[ConfigRequest] = []

        def prepare(session: Session, who: Principal) -> dict[str, Any]:
            asked.append(_read(read_body(), need_base=True))
            app = _target(session, who, asked[0].document["app"]["slug"], READ)
            return _permitted_plan(session, who, app, asked[0], self.context)
        await self._refuse_dns_problems(await self._as(request, prepare))
        return await self._apply(request, asked[0])

    async def _refuse_dns_problems(self, planned: dict[str, Any]) -> None:
        """DNS is asked outside the apply's transaction, so a name that resolves to a
        private address is refused before anything is written."""
        problems = await self._dns_problems(planned)
        if problems:
            raise ApiError("config_plan_errors", 422, f"The plan has {len(problems)} blocking "
                           f"error(s); first: {problems[0].path}: {problems[0].message}",
                           errors=[p.as_dict() for p in problems])

    async def _apply(self, request: Request, asked: ConfigRequest) -> Response:
        now = self.s.developer.clock()

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = _target(session, who, asked.document["app"]["slug"], READ)
            applied = apply_config(session, who, app, asked.document, asked.mode,
                                   base=asked.base, digest=asked.digest, context=self.context,
                                   box=self.s.box, now=now, rollback_of=asked.rollback_of,
                                   notes=asked.notes, restores_state=asked.restores_state)
            result: dict[str, Any] = {
                "app": applied.app.slug, "mode": asked.mode, "ops": [
                    o.as_dict() for o in applied.plan.ops],
                "summary": applied.plan.summary, "ids": applied.ids,
                "warnings": applied.plan.warnings,
                "revision": revision_view(applied.revision) if applied.revision else None,
            }
            if applied.secrets:  # created by this apply: shown here, once
                result["secrets"] = applied.secrets
            return result
        result = await self._as(request, work)
        if result["revision"] is not None:
            try:
                await self.publish(result["app"])
            except Exception as exc:  # committed already; caches expire within their TTL
                log.warning("could not publish the change of %s: %s", result["app"],
                            type(exc).__name__)
        return JSONResponse(result, status_code=201 if result["revision"] else 200,
                            headers=NO_STORE)

    async def rollback(self, request: Request) -> Response:
        read_body = await json_after_auth(request)
        await self._limit(request)
        asked: list[ConfigRequest] = []

        def prepare(session: Session, who: Principal) -> dict[str, Any]:
            app, rollback = _rollback_request(session, who, read_body(), need_base=True)
            asked.append(rollback)
            return _permitted_plan(session, who, app, rollback, self.context)
        # The old config meets today's rules, DNS included, like any other apply.
        await self._refuse_dns_problems(await self._as(request, prepare))
        return await self._apply(request, asked[0])

    async def _limit(self, request: Request) -> None:
        await enforce_for_developer(
            self.s.developer, credentials(request, self.s.developer.cookies,
                                          accept_session=self.accept_session),
            APPLY_LIMIT)

    async def _dns_problems(self, plan: dict[str, Any]) -> list[Problem]:
        """Every blocking error of ``plan``, after checking the DNS answers of a webhook URL
        it creates or changes; the plan's ``errors`` are updated in place."""
        for op in plan["ops"]:
            if op["resource"] != "webhook" or op["op"] not in ("create", "update"):
                continue
            try:
                # The text rules passed in the plan; this parse is for the DNS rule.
                checked = check_webhook_url(op["key"], self.context.policy,
                                            app_slug=plan["app"], runtime_active=True)
                await anyio.to_thread.run_sync(endpoints.resolve_url, checked, self.s.checks)
            except UrlRefused as exc:
                error = url_error(exc)
                plan["errors"].append(Problem("$.webhooks[0].url", error.code,
                                              error.message).as_dict())
            except ApiError as error:
                plan["errors"].append(Problem("$.webhooks[0].url", error.code,
                                              error.message).as_dict())
        return [Problem(e["path"], e["code"], e["message"]) for e in plan["errors"]]

    # -- history --------------------------------------------------------------------------

    async def revisions(self, request: Request) -> Response:
        query = request.query_params
        ref = query.get("app")
        limit = page_size(query.get("limit"))
        before = revision_cursor(query.get("before"))

        def work(session: Session, who: Principal) -> dict[str, Any]:
            if not ref:
                raise ApiError("missing_field", 422, "Name the app: ?app=<id or slug>.",
                               field="app")
            app = who.app(session, ref, READ)
            page = revisions_of(session, app.id, before=before, limit=limit)
            return {"app": app.slug, "revisions": page.revisions, "nextBefore": page.older}
        return JSONResponse(await self._as(request, work))

    async def revision(self, request: Request) -> Response:
        ref = request.path_params["revision"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            return {"revision": revision_detail(session, _revision(session, who, ref, READ))}
        return JSONResponse(await self._as(request, work))


def _read(body: dict[str, Any], *, need_base: bool) -> ConfigRequest:
    if "config" not in body:
        raise ApiError("missing_field", 422, "'config' is required: the svc.config.v1 "
                       "document.", field="config")
    document = check_document(body["config"])
    mode = check_mode(body.get("mode"))
    if need_base and "baseRevision" not in body:
        raise ApiError("missing_field", 422, "'baseRevision' is required: the revision your "
                       "plan was made against (null before the first).", field="baseRevision")
    base = field_str(body, "baseRevision", required=False, max_length=64)
    digest = field_str(body, "planDigest", required=False, max_length=80)
    return ConfigRequest(document, mode, base, digest)


def _rollback_request(session: Session, who: Principal, body: dict[str, Any], *,
                      need_base: bool) -> tuple[App, ConfigRequest]:
    """A rollback (or the plan of one): ``{revision, baseRevision, planDigest?}``. What it
    applies is ``payments.config.rollback``'s choice, checked as any document is."""
    ref = required_str(body, "revision", 64)
    for other in ("config", "mode"):
        if other in body:
            raise ApiError("invalid_field", 422, f"'{other}' cannot go with 'revision': a "
                           "rollback applies what that revision recorded, in the mode that "
                           "restores it.", field=other)
    revision = _revision(session, who, ref, READ)
    if need_base and "baseRevision" not in body:
        raise ApiError("missing_field", 422, "'baseRevision' is required: the head "
                       "revision your rollback plan was made against.", field="baseRevision")
    app = session.get(App, revision.app_id)
    assert app is not None
    target = rollback_target(revision, app)
    return app, ConfigRequest(
        check_document(target.document), target.mode,
        field_str(body, "baseRevision", required=False, max_length=64),
        field_str(body, "planDigest", required=False, max_length=80),
        notes=target.warnings, rollback_of=revision.id, restores_state=target.restores_state)


def _planned(session: Session, app: App | None, asked: ConfigRequest,
             context: Context) -> Plan:
    planned = make_plan(session, app, asked.document, asked.mode, context,
                        restores_state=asked.restores_state)
    planned.warnings += asked.notes
    return planned


def _permitted_plan(session: Session, who: Principal, app: App | None, asked: ConfigRequest,
                    context: Context) -> dict[str, Any]:
    """The plan an apply is about to carry out, refused early (before any DNS question) when
    the caller may not make its changes; apply checks again under the app's lock."""
    planned = _planned(session, app, asked, context)
    who.require_scopes(planned.app_slug, planned.write_scopes)
    return planned.as_dict()


def _target(session: Session, who: Principal, slug: str, scope: str) -> App | None:
    """The app a config names, if this caller may change it with ``scope``; None when it
    does not exist yet and the caller may create it (a console session)."""
    exists = session.scalar(select(App.id).where(App.slug == slug))
    if exists is None:
        if who.grant is not None:
            raise ApiError("developer_session_required", 403, f"There is no app '{slug}' "
                           "yet, and a CLI grant is for one existing app: create it in the "
                           f"console, then run `svc auth browser --app {slug} --scopes "
                           f"{','.join(CONFIG_SCOPES)}`.")
        return None
    return who.app(session, slug, scope)


def _revision(session: Session, who: Principal, ref: str, scope: str) -> ConfigRevision:
    revision = (session.get(ConfigRevision, ref)
                if ref.startswith(IdPrefix.CONFIG_REVISION.value) else None)
    app = session.get(App, revision.app_id) if revision else None
    if revision is None or app is None or app.organization_id not in who.organization_ids:
        raise ApiError("config_revision_not_found", 404, f"No config revision '{ref}'.")
    who.app(session, app.id, scope)
    return revision


__all__ = ["ConfigApi", "Plan"]
