"""The signed-in app pages: list, create, and one app's pay_to, products and API keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from payments.apps import set_pay_to
from payments.developer.apps import create_developer_app
from payments.developer.auth import Principal
from payments.developer.keys import create_key, revoke_key
from payments.developer.models import ApiKey
from payments.developer.views import app_view, key_view
from payments.errors import ApiError
from payments.models import App, AppType, Product
from payments.products import apply_product_fields, create_product, product_view, products_of
from payments.ratelimit import Limit
from portal.console.app_views import AppState, Problem, app_page, apps_page, new_app_page
from portal.console.context import AUTH_REQUIRED, Console
from portal.console.forms import Form, read_form
from portal.console.key_creation import create_once, form_token
from portal.console.key_views import NewKey, key_answer

# Errors that leave no form to show them on: answered by Console.failure.
PAGE_ERRORS = frozenset({AUTH_REQUIRED, "csrf_failed", "app_not_found", "product_not_found",
                         "key_not_found", "unsupported_media_type", "payload_too_large",
                         "invalid_form"})

Work = Callable[[Session, Principal, App, Form], str]


class AppPages:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.s = console.services

    def _state(self, session: Session, app: App) -> AppState:
        keys = session.scalars(select(ApiKey).where(ApiKey.app_id == app.id)
                               .order_by(ApiKey.created_at)).all()
        return AppState(app_view(app, self.c.runtime_url(app.slug)),
                        [product_view(p, self.s.base_url, app.slug)
                         for p in products_of(session, app)],
                        [key_view(k) for k in keys])

    async def list(self, request: Request) -> Response:
        def work(session: Session, who: Principal) -> list[dict[str, Any]]:
            apps = session.scalars(select(App).where(App.organization_id.in_(
                who.organization_ids)).order_by(App.created_at)).all()
            return [app_view(a, self.c.runtime_url(a.slug)) for a in apps]
        try:
            nav, apps = await self.c.as_developer(request, work)
        except ApiError as error:
            return self.c.failure(request, error)
        return apps_page(nav, apps)

    async def new_form(self, request: Request) -> Response:
        try:
            nav, _ = await self.c.as_developer(request, lambda session, who: None)
        except ApiError as error:
            return self.c.failure(request, error)
        return new_app_page(nav)

    async def create(self, request: Request) -> Response:
        form = Form({})
        values: dict[str, str] = {}

        def work(session: Session, who: Principal) -> str:
            app_type = values["type"] or AppType.GAME.value
            if app_type not in {t.value for t in AppType}:
                raise ApiError("invalid_field", 422, "Type must be Game or Application.")
            # A blank slug field means "make it from the name", as the API's absent slug.
            app = create_developer_app(session, who, name=values["name"],
                                       slug=values["slug"] or None,
                                       app_type=AppType(app_type), headline=values["headline"],
                                       pay_to=values["payTo"] or None)
            return app.slug
        try:
            form = await read_form(request)
            values = {k: form.get(k).strip()
                      for k in ("name", "slug", "type", "headline", "payTo")}
            _, slug = await self.c.as_developer(request, work, form=form)
        except ApiError as error:
            if error.code in PAGE_ERRORS:
                return self.c.failure(request, error, back="/apps/new")
            try:
                nav, _ = await self.c.as_developer(request, lambda session, who: None)
            except ApiError as again:
                return self.c.failure(request, again, back="/apps/new")
            return new_app_page(nav, values, error)
        return RedirectResponse(f"/apps/{slug}?done=created", status_code=303)

    async def show(self, request: Request) -> Response:
        slug = request.path_params["app"]
        done = request.query_params.get("done")
        return await self._show(request, slug, done=done)

    async def _show(self, request: Request, slug: str, *, done: str | None = None,
                    problem: Problem | None = None) -> Response:
        def work(session: Session, who: Principal) -> AppState:
            return self._state(session, who.app(session, slug, "apps:read"))
        try:
            nav, state = await self.c.as_developer(request, work)
        except ApiError as error:
            shown = error if problem is None or error.code == AUTH_REQUIRED else problem.error
            return self.c.failure(request, shown, back=f"/apps/{slug}")
        return app_page(nav, state, done=done, problem=problem)

    async def _mutate(self, request: Request, section: str, work: Work,
                      limit: Limit | None = None) -> Response:
        """Run a form's change on the app; redirect to the app page, or show the error there."""
        slug = request.path_params["app"]
        form = Form({})

        def unit(session: Session, who: Principal) -> str:
            return work(session, who, who.app(session, slug, "apps:write"), form)
        try:
            form = await read_form(request)
            _, done = await self.c.as_developer(request, unit, form=form, limit=limit)
        except ApiError as error:
            if error.code in PAGE_ERRORS:
                return self.c.failure(request, error, back=f"/apps/{slug}")
            values = {k: v[0] for k, v in form.fields.items() if v and k != "csrf"}
            return await self._show(request, slug, problem=Problem(section, error, values))
        return RedirectResponse(f"/apps/{slug}?done={done}#{section}", status_code=303)

    async def set_pay_to(self, request: Request) -> Response:
        def work(session: Session, who: Principal, app: App, form: Form) -> str:
            before = app.pay_to
            set_pay_to(app, form.get("payTo").strip())  # a new address starts the review
            return "pay-to-review" if app.pay_to != before else "pay-to-same"
        return await self._mutate(request, "pay-to", work)

    async def add_product(self, request: Request) -> Response:
        def work(session: Session, who: Principal, app: App, form: Form) -> str:
            create_product(session, app, {"template": form.get("template")})
            return "product-added"
        return await self._mutate(request, "products", work)

    async def update_product(self, request: Request) -> Response:
        product_slug = request.path_params["product"]

        def work(session: Session, who: Principal, app: App, form: Form) -> str:
            product = session.scalar(select(Product).where(Product.app_id == app.id,
                                                           Product.slug == product_slug))
            if product is None:
                raise ApiError("product_not_found", 404, f"No product '{product_slug}'.")
            apply_product_fields(product, {
                "riskMode": form.get("riskMode"),
                "riskPolicy": {"trustedServerCharge": {
                    "enabled": form.checked("trustedEnabled"),
                    "paymentProofRequired": form.checked("proofRequired"),
                    "maxAmountAtomic": form.optional("maxAmountAtomic")}},
            }, creating=False)
            session.flush()
            return "product-saved"
        return await self._mutate(request, "products", work)

    async def revoke_key(self, request: Request) -> Response:
        key_id = request.path_params["key"]

        def work(session: Session, who: Principal, app: App, form: Form) -> str:
            key = session.scalar(select(ApiKey).where(ApiKey.id == key_id,
                                                      ApiKey.app_id == app.id))
            if key is None:
                raise ApiError("key_not_found", 404, "No such API key on this app.")
            revoke_key(key, self.s.clock())
            return "key-revoked"
        return await self._mutate(request, "keys", work, self.s.limits.key_management)

    async def create_key(self, request: Request) -> Response:
        slug = request.path_params["app"]
        form = Form({})

        def work(session: Session, who: Principal) -> NewKey:
            app = who.app(session, slug, "keys:create")
            assert app.organization_id is not None
            organization_id, token = app.organization_id, form_token(form)
            return create_once(session, who, lambda: create_key(
                session, organization_id=organization_id, app_id=app.id,
                label=form.get("label"), scopes=form.all("scope"),
                environment=form.get("environment", "test"), created_by=who.developer_id,
                now=self.s.clock(), form_token=token))
        try:
            form = await read_form(request)
            nav, made = await self.c.as_developer(
                request, work, form=form, limit=self.s.limits.key_management)
        except ApiError as error:
            if error.code in PAGE_ERRORS:
                return self.c.failure(request, error, back=f"/apps/{slug}")
            return await self._show(request, slug, problem=Problem("keys", error))
        # Answered directly, never redirected: the secret exists only in this response (a
        # second sending of the form is answered without it, key_creation).
        return key_answer(nav, made)
