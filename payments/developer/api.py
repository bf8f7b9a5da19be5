"""The JSON developer API: apps, products, API keys and CLI sign-in (spec 5.2, 5.3).

Mounted on the API host (CLI grants only) and on the console host (console session with
CSRF, or a grant). Paths are ours and described in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from manifest.url_policy import UrlPolicy
from payments.apps import check_distribution_targets, check_entry_url_field, set_pay_to
from payments.config.document import refuse_secrets
from payments.config.product_match import renamed
from payments.developer import grants
from payments.developer.apps import create_developer_app
from payments.developer.auth import Principal, credentials, run_as
from payments.developer.key_answers import created_answer, key_answer
from payments.developer.key_idempotency import HEADER as IDEMPOTENCY_HEADER
from payments.developer.keys import (
    create_key,
    key_changes,
    new_key_fields,
    revoke_key,
    update_key,
)
from payments.developer.models import ApiKey, CliGrant
from payments.developer.services import DeveloperServices, client_ip
from payments.developer.views import app_view, grant_view, key_view
from payments.errors import ApiError
from payments.http import (
    field_int,
    field_str,
    field_str_list,
    json_after_auth,
    read_json,
    required_str,
)
from payments.models import App, AppType, Product
from payments.products import TEMPLATES, create_product, product_view, update_product
from payments.ratelimit import Limit, enforce

RuntimeUrl = Callable[[str], str]


class DeveloperApi:
    def __init__(self, services: DeveloperServices, runtime_url: RuntimeUrl, *,
                 accept_session: bool, url_policy: UrlPolicy) -> None:
        self.s = services
        self.runtime_url = runtime_url
        self.accept_session = accept_session
        self.url_policy = url_policy  # the rules of an app's Entry URL

    async def _as(self, request: Request, work: Callable[[Session, Principal], Any],
                  limit: Limit | None = None) -> Any:
        creds = credentials(request, self.s.cookies, accept_session=self.accept_session)
        return await run_as(self.s, creds, work, limit)

    def routes(self) -> list[Route]:
        p = "/api/developer"
        console_only = [
            Route(f"{p}/cli/approve", self.answer_cli_request, methods=["POST"]),
        ] if self.accept_session else []
        return [*console_only,
            Route(f"{p}/me", self.me, methods=["GET"]),
            Route(f"{p}/templates", self.templates, methods=["GET"]),
            Route(f"{p}/apps", self.list_apps, methods=["GET"]),
            Route(f"{p}/apps", self.create_app, methods=["POST"]),
            Route(f"{p}/apps/{{app}}", self.get_app, methods=["GET"]),
            Route(f"{p}/apps/{{app}}", self.update_app, methods=["PATCH"]),
            Route(f"{p}/apps/{{app}}/products", self.list_products, methods=["GET"]),
            Route(f"{p}/apps/{{app}}/products", self.create_product, methods=["POST"]),
            Route(f"{p}/apps/{{app}}/products/{{product}}", self.update_product,
                  methods=["PATCH"]),
            Route(f"{p}/apps/{{app}}/keys", self.list_keys, methods=["GET"]),
            Route(f"{p}/apps/{{app}}/keys", self.create_key, methods=["POST"]),
            Route(f"{p}/apps/{{app}}/keys/{{key}}", self.update_key, methods=["PATCH"]),
            Route(f"{p}/apps/{{app}}/keys/{{key}}/revoke", self.revoke_key, methods=["POST"]),
            Route(f"{p}/cli/auth-requests", self.start_cli_request, methods=["POST"]),
            Route(f"{p}/cli/token", self.redeem_cli_request, methods=["POST"]),
            Route(f"{p}/cli/grant", self.current_grant, methods=["GET"]),
            Route(f"{p}/cli/grant", self.revoke_current_grant, methods=["DELETE"]),
        ]

    async def me(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> dict[str, Any]:
            from payments.developer.models import Developer
            developer = session.get(Developer, who.developer_id)
            assert developer is not None
            body: dict[str, Any] = {
                "developer": {"id": developer.id, "username": developer.username,
                              "email": developer.email},
                "organizations": list(who.organization_ids),
                "via": "grant" if who.grant else "session",
            }
            if who.grant is not None:
                app = session.get(App, who.grant.app_id)
                body["grant"] = grant_view(who.grant, app.slug if app else "")
            return body
        return JSONResponse(await self._as(request, work))

    async def templates(self, request: Request) -> Response:
        return JSONResponse({"templates": [
            {"template": t.key, "slug": t.slug, "name": t.name,
             "priceAtomic": None if t.price_atomic is None else str(t.price_atomic)}
            for t in TEMPLATES]})

    async def list_apps(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> dict[str, Any]:
            query = select(App).where(App.organization_id.in_(who.organization_ids))
            if who.grant is not None:
                grants.require_grant_scope(who.grant, "apps:read", "<app>")
                query = query.where(App.id == who.grant.app_id)
            apps = session.scalars(query.order_by(App.created_at)).all()
            return {"apps": [app_view(a, self.runtime_url(a.slug)) for a in apps]}
        return JSONResponse(await self._as(request, work))

    async def create_app(self, request: Request) -> Response:
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            body = read_body()
            name = required_str(body, "name", 120)
            slug = field_str(body, "slug", required=False, max_length=63)
            app_type = field_str(body, "type", required=False, default="Game")
            if app_type not in {t.value for t in AppType}:
                raise ApiError("invalid_field", 422, "'type' must be Game or Application.",
                               field="type")
            headline = field_str(body, "headline", required=False, max_length=200, default="")
            pay_to = field_str(body, "payTo", required=False, max_length=42)
            tags = field_str_list(body, "tags") or []
            app = create_developer_app(session, who, name=name, slug=slug,
                                       app_type=AppType(app_type), headline=headline or "",
                                       pay_to=pay_to, tags=tags)
            return {"app": app_view(app, self.runtime_url(app.slug))}
        return JSONResponse(await self._as(request, work), status_code=201)

    async def get_app(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            return {"app": app_view(app, self.runtime_url(app.slug))}
        return JSONResponse(await self._as(request, work))

    async def update_app(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:write")  # before the body: 404 whatever it is
            body = read_body()
            changes: dict[str, Any] = {}
            for wire, limit in (("name", 120), ("headline", 200), ("entryUrl", 2048)):
                value = field_str(body, wire, required=False, max_length=limit)
                if value is not None:
                    changes[wire] = value
            pay_to = field_str(body, "payTo", required=False, max_length=42)
            app_type = field_str(body, "type", required=False)
            if app_type is not None and app_type not in {t.value for t in AppType}:
                raise ApiError("invalid_field", 422, "'type' must be Game or Application.",
                               field="type")
            tags = field_str_list(body, "tags")
            targets = field_str_list(body, "distributionTargets")
            if "name" in changes:
                if not changes["name"].strip():
                    raise ApiError("invalid_name", 422, "An app name cannot be empty.")
                app.name = changes["name"].strip()
            if "headline" in changes:
                app.headline = changes["headline"]
            if "entryUrl" in changes:
                app.entry_url = check_entry_url_field(changes["entryUrl"], self.url_policy,
                                                      app.slug)
            if app_type is not None:
                app.type = AppType(app_type)
            if tags is not None:
                app.tags = [t.strip() for t in tags if t.strip()]
            if targets is not None:
                app.distribution_targets = check_distribution_targets(targets)
            if pay_to is not None:
                set_pay_to(app, pay_to)  # binding/changing pay_to restarts the review
            session.flush()
            return {"app": app_view(app, self.runtime_url(app.slug))}
        return JSONResponse(await self._as(request, work))

    async def list_products(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            from payments.products import products_of
            app = who.app(session, ref, "apps:read")
            return {"products": [product_view(p, self.s.base_url, app.slug)
                                 for p in products_of(session, app)]}
        return JSONResponse(await self._as(request, work))

    async def create_product(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "products:write")
            body = read_body()
            refuse_secrets(body, "This product")  # its fields are config's (spec 2.9)
            product = create_product(session, app, body)
            return {"product": product_view(product, self.s.base_url, app.slug)}
        return JSONResponse(await self._as(request, work), status_code=201)

    async def update_product(self, request: Request) -> Response:
        ref, product_ref = request.path_params["app"], request.path_params["product"]
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "products:write")
            product = session.scalar(select(Product).where(
                Product.app_id == app.id,
                (Product.id == product_ref) | (Product.slug == product_ref)))
            if product is None:
                raise ApiError("product_not_found", 404, f"No product '{product_ref}'.")
            body = read_body()
            refuse_secrets(body, "This product")
            was = Product(slug=product.slug, sku=product.sku)  # for the rename's warning
            update_product(session, product, body)
            # As config apply warns: the payment route moves, and the old one answers 404.
            warnings = ([] if product.slug == was.slug
                        else [renamed(app.slug, was, product.slug)])
            return {"product": product_view(product, self.s.base_url, app.slug),
                    "warnings": warnings}
        return JSONResponse(await self._as(request, work))

    async def list_keys(self, request: Request) -> Response:
        ref = request.path_params["app"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "apps:read")
            keys = session.scalars(select(ApiKey).where(ApiKey.app_id == app.id)
                                   .order_by(ApiKey.created_at)).all()
            return {"keys": [key_view(k) for k in keys]}
        return key_answer(await self._as(request, work))

    async def create_key(self, request: Request) -> Response:
        ref = request.path_params["app"]
        read_body = await json_after_auth(request)
        idempotency_header = request.headers.get(IDEMPOTENCY_HEADER)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            app = who.app(session, ref, "keys:create")
            fields = new_key_fields(read_body(), idempotency_header)
            assert app.organization_id is not None
            created = create_key(session, organization_id=app.organization_id, app_id=app.id,
                                 label=fields.label, scopes=fields.scopes,
                                 environment=fields.environment,
                                 created_by=who.developer_id, now=self.s.clock(),
                                 idempotency_key=fields.idempotency_key)
            # The only response that ever carries the secret.
            return {"key": key_view(created.key), "secret": created.secret}
        return await created_answer(self._as(request, work, self.s.limits.key_management))

    async def update_key(self, request: Request) -> Response:
        ref, key_id = request.path_params["app"], request.path_params["key"]
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            key = _app_key(session, who.app(session, ref, "keys:create"), key_id)
            label, scopes = key_changes(read_body())
            update_key(key, label=label, scopes=scopes)
            session.flush()
            return {"key": key_view(key)}
        return key_answer(await self._as(request, work, self.s.limits.key_management))

    async def revoke_key(self, request: Request) -> Response:
        ref, key_id = request.path_params["app"], request.path_params["key"]

        def work(session: Session, who: Principal) -> dict[str, Any]:
            key = _app_key(session, who.app(session, ref, "keys:create"), key_id)
            revoke_key(key, self.s.clock())
            return {"key": key_view(key)}
        return key_answer(await self._as(request, work, self.s.limits.key_management))

    async def start_cli_request(self, request: Request) -> Response:
        body = await read_json(request)
        app = field_str(body, "app", required=False, max_length=63)
        scopes = field_str_list(body, "scopes")
        ttl = field_int(body, "ttlSeconds", minimum=1)
        await enforce(self.s.limiter(), self.s.limits.cli_request, client_ip(self.s, request))
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            started = grants.start_request(session, app_slug=app, scopes=scopes,
                                           ttl_seconds=ttl, now=now)
            record = started.record
            approve = f"{self.s.console_url}/cli/approve?code={record.user_code}"
            return {
                "deviceCode": started.device_code, "userCode": record.user_code,
                "verificationUri": f"{self.s.console_url}/device",
                "verificationUriComplete": approve,
                "expiresIn": int((record.expires_at - now).total_seconds()),
                "interval": grants.POLL_INTERVAL_SECONDS, "scopes": list(record.scopes),
                "app": record.app_slug, "ttlSeconds": record.ttl_seconds,
            }
        return JSONResponse(await self.s.run(work), status_code=201)

    async def redeem_cli_request(self, request: Request) -> Response:
        body = await read_json(request)
        device_code = required_str(body, "deviceCode", 200)
        now = self.s.clock()

        def work(session: Session) -> dict[str, Any]:
            issued = grants.redeem(session, device_code, now)
            app = session.get(App, issued.grant.app_id)
            return {"token": issued.token, "grant": grant_view(issued.grant,
                                                               app.slug if app else "")}
        return JSONResponse(await self.s.run(work), headers={"cache-control": "no-store"})

    async def answer_cli_request(self, request: Request) -> Response:
        """Approve or deny a pending CLI sign-in; a console session only, never a grant."""
        read_body = await json_after_auth(request)

        def work(session: Session, who: Principal) -> dict[str, Any]:
            who.require_session("Approving a CLI sign-in")
            body = read_body()
            code = required_str(body, "userCode", 32)
            decision = required_str(body, "decision", 16)
            if decision not in ("approve", "deny"):
                raise ApiError("invalid_field", 422, "'decision' must be approve or deny.",
                               field="decision")
            app_ref = field_str(body, "app", required=False, max_length=63)
            return answer_cli_request(session, who, code, decision, app_ref, self.s.clock())
        return JSONResponse(await self._as(request, work, self.s.limits.grant_approval))

    async def current_grant(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> dict[str, Any]:
            grant = self._grant_of(who)
            app = session.get(App, grant.app_id)
            return {"grant": grant_view(grant, app.slug if app else "")}
        return JSONResponse(await self._as(request, work))

    async def revoke_current_grant(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> dict[str, Any]:
            grant = self._grant_of(who)
            grants.revoke_grant(grant, self.s.clock())
            app = session.get(App, grant.app_id)
            return {"grant": grant_view(grant, app.slug if app else "")}
        return JSONResponse(await self._as(request, work))

    @staticmethod
    def _grant_of(who: Principal) -> CliGrant:
        if who.grant is None:
            raise ApiError("developer_grant_required", 400, "Send the CLI grant to inspect or "
                           "revoke it.")
        return who.grant


def _app_key(session: Session, app: App, key_id: str) -> ApiKey:
    key = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.app_id == app.id))
    if key is None:
        raise ApiError("key_not_found", 404, f"No API key '{key_id}' on this app.")
    return key


def answer_cli_request(session: Session, who: Principal, code: str, decision: str,
                       app_ref: str | None, now: datetime) -> dict[str, Any]:
    """Shared by the JSON endpoint and the console's approval page."""
    record = grants.pending_request(session, code, now)
    if decision == "deny":
        grants.deny(record)
        return {"status": record.status.value}
    ref = app_ref or record.app_slug
    if ref is None:
        raise ApiError("missing_field", 422, "Choose the app this CLI grant is for.",
                       field="app")
    app = who.app(session, ref, "apps:read")
    if record.app_slug is not None and app.slug != record.app_slug:
        raise ApiError("developer_cli_app_mismatch", 409, f"The CLI asked for app "
                       f"'{record.app_slug}', not '{app.slug}'.")
    grants.approve(record, developer_id=who.developer_id, app=app)
    return {"status": record.status.value, "app": app.slug, "scopes": list(record.scopes)}
