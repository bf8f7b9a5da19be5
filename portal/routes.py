"""The portal host: hosted entry profiles and the legacy redirects of spec 1.1."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, sessionmaker
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from payments.models import App, AppStatus, ListingStatus, ProductStatus
from payments.slugs import is_valid_slug
from router.pages import render

Sessions = Callable[[], sessionmaker[Session]]


def format_usdc(atomic: int) -> str:
    """6-decimal atomic units as a USDC amount with at least two decimals: 10000 -> 0.01."""
    whole, frac = divmod(atomic, 1_000_000)
    digits = f"{frac:06d}".rstrip("0")
    return f"{whole}.{digits.ljust(2, '0')}"


def legacy_app_redirect(request: Request) -> Response:
    slug = request.path_params["slug"]
    url = f"/{slug}"
    if request.url.query:
        url += "?" + request.url.query
    return RedirectResponse(url, status_code=301)


def hosted_entry(sessions: Sessions) -> Callable[[Request], HTMLResponse]:
    def page(request: Request) -> HTMLResponse:
        slug = request.path_params["slug"]
        app = None
        if is_valid_slug(slug):
            with sessions()() as session:
                app = session.scalar(select(App).where(App.slug == slug)
                                     .options(selectinload(App.products)))
        listed = (app is not None and app.status == AppStatus.ACTIVE and not app.kill_switch
                  and app.portal_listing_status == ListingStatus.LISTED)
        if app is None or not listed:
            return render("App not found", "<h1>This app is not listed</h1><p>No public app "
                          "has this address.</p>", 404)
        products = "".join(
            f"<li><strong>{escape(p.name)}</strong> &middot; {format_usdc(p.price_atomic)} USDC"
            "</li>" for p in sorted(app.products, key=lambda p: p.price_atomic)
            if p.status == ProductStatus.ACTIVE)
        tags = ", ".join(escape(t) for t in app.tags)
        return render(app.name, (
            f"<h1>{escape(app.name)}</h1><p>{escape(app.headline)}</p>"
            f"<dl><dt>Type</dt><dd>{escape(app.type.value)}</dd>"
            f"<dt>Tags</dt><dd>{tags or '&mdash;'}</dd></dl>"
            f"<h2>Products</h2><ul>{products or '<li>No products yet.</li>'}</ul>"), 200)
    return page


def portal_routes(sessions: Sessions) -> list[Route]:
    return [
        Route("/app/{slug}", legacy_app_redirect, methods=["GET", "HEAD"]),
        Route("/{slug}", hosted_entry(sessions), methods=["GET", "HEAD"]),
    ]


def legacy_launch_routes(portal_url: str) -> list[Route]:
    def root(request: Request) -> Response:
        return RedirectResponse(portal_url + "/", status_code=301)
    return [Route("/", root, methods=["GET", "HEAD"])]
