"""Public portal pages: the app directory at ``/`` and the hosted entry ``/<app-slug>``
(spec 1.2 Hosted Entry: profile, authorization bridge, product payment routes).

Buying from the hosted entry runs the hosted-entry path of spec 1.3 in the browser
(``hosted.js``): authorize if needed, return here with a summary code, exchange it for a
payment code, pay. What the page shows afterwards is UI feedback only (spec 1.4 item 2).
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload
from starlette.requests import Request
from starlette.responses import Response

from payments.models import App, AppStatus, ListingStatus, Pricing, ProductStatus
from payments.portal.account import ready_apps
from payments.slugs import is_valid_slug
from portal.config import PortalConfig
from portal.csrf import page_token
from portal.layout import Shell
from portal.money import format_usdc


def listed(app: App | None) -> bool:
    """Spec 2.2: a public portal entry requires ``listed`` (and an active app)."""
    return (app is not None and app.status == AppStatus.ACTIVE and not app.kill_switch
            and app.portal_listing_status == ListingStatus.LISTED)


def authorize_url(portal_url: str, slug: str, **extra: str) -> str:
    """The hosted entry return form of spec 4.7."""
    return f"{portal_url}/authorize?" + urlencode({"app": slug,
                                                   "return": f"{portal_url}/{slug}", **extra})


class PublicPages:
    def __init__(self, config: PortalConfig, shell: Shell) -> None:
        self.c = config
        self.shell = shell

    async def home(self, request: Request) -> Response:
        def work(session: Session) -> list[tuple[str, str, str, str]]:
            return [(a.slug, a.name, a.type.value, a.headline) for a in ready_apps(session)]
        apps = await self.c.services.run(work)
        items = "".join(
            f'<li><a href="/{escape(slug)}">{escape(name)}</a> <span class="kind">'
            f"{escape(kind)}</span><br><span class=\"hint\">{escape(headline)}</span></li>"
            for slug, name, kind, headline in apps)
        return self.shell.page("Apps", (
            "<h1>Apps</h1><p>Games and apps that take your USDC budget. One budget, signed "
            "once, works in every app you connect; manage it on your "
            "<a href=\"/account\">account page</a>.</p>"
            f"<ul class=\"apps\">{items or '<li>No apps are listed yet.</li>'}</ul>"))

    async def hosted_entry(self, request: Request) -> Response:
        slug = request.path_params["slug"]

        def work(session: Session) -> App | None:
            if not is_valid_slug(slug):
                return None
            return session.scalar(select(App).where(App.slug == slug)
                                  .options(selectinload(App.products)))
        app = await self.c.services.run(work)
        if app is None or not listed(app):
            return self.shell.message("App not found", "No public app has this address.", 404)
        products = sorted((p for p in app.products if p.status == ProductStatus.ACTIVE),
                          key=lambda p: (p.price_atomic, p.name))
        rows, buyable = [], []
        for product in products:
            price = f"{format_usdc(product.price_atomic)} USDC"
            if product.pricing == Pricing.DYNAMIC_ORDER:
                price = "custom amount"
                action = '<span class="hint">The app sets the amount at checkout</span>'
            else:
                action = (f'<button type="button" class="buy" data-product="'
                          f'{escape(product.slug)}" disabled>Buy {escape(product.name)} · '
                          f"{price}</button>")
                buyable.append({"slug": product.slug, "name": product.name,
                                "priceAtomic": str(product.price_atomic),
                                "paymentUrl": self.c.ledger.payment_url(app.slug, product.slug)})
            rows.append(f'<li><span class="name">{escape(product.name)}</span> '
                        f'<span class="price">{price}</span> {action}</li>')
        tags = "".join(f"<li>{escape(t)}</li>" for t in app.tags)
        body = (
            f'<article class="profile"><p class="kind">{escape(app.type.value)}</p>'
            f"<h1>{escape(app.name)}</h1><p class=\"headline\">{escape(app.headline)}</p>"
            f"<ul class=\"tags\" aria-label=\"Tags\">{tags}</ul></article>"
            '<section aria-labelledby="products-h"><h2 id="products-h">Products</h2>'
            '<p id="budget-status" role="status">Checking your budget…</p>'
            f"<ul class=\"products\">{''.join(rows) or '<li>No products yet.</li>'}</ul>"
            '<div id="result" role="status" aria-live="polite"></div>'
            '<div id="error" class="alert" role="alert" hidden></div>'
            '<p class="hint">Buying here pays from your USDC budget (spender BudgetSpenderV2). '
            "This page only shows what happened: the app's own server delivers what you "
            "bought once the payment is recorded.</p></section>")
        data = {"app": {"slug": app.slug, "name": app.name}, "baseUrl": self.c.base_url,
                "portalUrl": self.c.portal_url, "products": buyable,
                "authorizeUrl": authorize_url(self.c.portal_url, app.slug),
                "renewUrl": authorize_url(self.c.portal_url, app.slug, renew="1"),
                "csrfToken": page_token(self.c.secret_key, self.c.services.clock())}
        return self.shell.page(app.name, body, data=data, scripts=("portal.js", "hosted.js"))
