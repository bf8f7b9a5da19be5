"""The portal host: hosted entry, authorize, account, their JSON endpoints, our static
files and the runtime modal SDK, plus the legacy redirects of spec 1.1.

Paths are chosen so no app slug can shadow them: ``/api``, ``/assets``, ``/authorize``
and ``/account`` are reserved slugs (spec 1.2 rule 3), and ``/sdk/svc-modal.js`` has two
segments where a hosted entry has one.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from payments.errors import (
    DATABASE_UNAVAILABLE,
    ApiError,
    handle_api_error,
    handle_database_unavailable,
    handle_http_exception,
    handle_unexpected,
)
from payments.ledger.return_urls import origin_of
from portal.account_page import AccountPage
from portal.api_account import AccountApi
from portal.api_wallet import WalletApi
from portal.assets import Assets
from portal.authorize import AuthorizePage
from portal.config import PortalConfig
from portal.hosted import PublicPages
from portal.layout import Shell
from portal.money import format_usdc as format_usdc  # re-exported for the console pages

GET = ["GET", "HEAD"]


def legacy_app_redirect(request: Request) -> Response:
    slug = request.path_params["slug"]
    url = f"/{slug}"
    if request.url.query:
        url += "?" + request.url.query
    return RedirectResponse(url, status_code=301)


def portal_app(config: PortalConfig) -> Starlette:
    assets = Assets({"portalUrl": config.portal_url, "baseUrl": config.base_url})
    shell = Shell(assets, origin_of(config.base_url), config.dev)
    public = PublicPages(config, shell)

    async def not_found(request: Request, exc: Exception) -> Response:
        # JSON for the API paths, a page for people everywhere else.
        if request.url.path.startswith("/api/"):
            return await handle_http_exception(request, exc)
        assert isinstance(exc, HTTPException)
        return shell.message("Not found" if exc.status_code == 404 else "Not allowed",
                             "There is nothing at this address.", exc.status_code)

    async def unavailable(request: Request, exc: Exception) -> Response:
        response = await handle_database_unavailable(request, exc)
        if request.url.path.startswith("/api/"):
            return response
        page = shell.message("Unavailable", "The portal cannot reach its database right "
                             "now. Nothing was changed; try again in a moment.", 503)
        page.headers["retry-after"] = response.headers["retry-after"]
        return page

    async def unexpected(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return await handle_unexpected(request, exc)
        return shell.message("Something went wrong", "The portal could not show this page. "
                             "It has been logged; try again later.", 500)

    routes = [
        Route("/", public.home, methods=GET),
        Route("/authorize", AuthorizePage(config, shell).show, methods=GET),
        Route("/account", AccountPage(config, shell).show, methods=GET),
        Route("/assets/{name}", assets.serve, methods=GET),
        Route("/sdk/svc-modal.js", assets.serve_sdk, methods=GET),
        *WalletApi(config).routes(),
        *AccountApi(config).routes(),
        Route("/app/{slug}", legacy_app_redirect, methods=GET),
        Route("/{slug}", public.hosted_entry, methods=GET),
    ]
    return Starlette(routes=routes, exception_handlers={
        ApiError: handle_api_error, HTTPException: not_found,
        **dict.fromkeys(DATABASE_UNAVAILABLE, unavailable), Exception: unexpected})


def legacy_launch_routes(portal_url: str) -> list[Route]:
    def root(request: Request) -> Response:
        return RedirectResponse(portal_url + "/", status_code=301)
    return [Route("/", root, methods=["GET", "HEAD"])]
