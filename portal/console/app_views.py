"""HTML of the signed-in app pages: the list, the new-app form and one app's page.

Views take the JSON shapes of ``payments.developer.views`` and ``product_view``, which
never hold a key secret; the keys' own HTML is in ``portal.console.key_views``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from starlette.responses import HTMLResponse

from payments.errors import ApiError
from payments.models import AppType, RiskMode
from payments.products import TEMPLATES, TIP_MAX_ATOMIC, TIP_MIN_ATOMIC
from payments.slugs import slugify
from portal.console.key_views import key_form, key_table
from portal.console.layout import Nav, alert, attr, csrf_field, error_headers, notice, page
from portal.routes import format_usdc

View = dict[str, Any]

NOTICES = {
    "created": "App created. It exists now: add products and API keys below. The service "
               "operators were told about it.",
    "pay-to-review": "pay_to saved. Review started: its status is now testing and the listing "
                     "pending_review while portal backing and public listing are reviewed; "
                     "the public portal page waits for it, payments do not.",
    "pay-to-same": "pay_to is unchanged.",
    "product-added": "Product added.",
    "product-saved": "Product settings saved.",
    "key-revoked": "API key revoked. Requests with it are refused from now on.",
}


def _usdc(atomic: str | None) -> str:
    return "—" if atomic is None else f"{format_usdc(int(atomic))} USDC"


def apps_page(nav: Nav, apps: list[View]) -> HTMLResponse:
    rows = "".join(
        f"<tr><td><a href=\"/apps/{attr(a['slug'])}\">{escape(a['name'])}</a></td>"
        f"<td><code>{escape(a['slug'])}</code></td><td>{escape(a['type'])}</td>"
        f"<td>{escape(a['payToStatus'])}</td><td>{escape(a['portalListingStatus'])}</td>"
        f"<td>{escape(a['runtime']['status'])}</td></tr>"
        for a in apps)
    table = ("<table><caption class=\"hint\">Your apps</caption><thead><tr><th scope=\"col\">"
             "Name</th><th scope=\"col\">Slug</th><th scope=\"col\">Type</th>"
             "<th scope=\"col\">pay_to status</th><th scope=\"col\">Listing</th>"
             "<th scope=\"col\">Runtime</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if apps else "<p>You have no apps yet.</p>"
    return page("Apps", f"<h1>Apps</h1>{table}<p><a href=\"/apps/new\">Create an app</a></p>",
                nav=nav)


# Shows, as the slug field's placeholder, the slug a blank field gets: payments.slugs.slugify
# in JavaScript (NFKD, drop what is not ASCII, lower-case, runs of anything else to one
# hyphen). Only a preview: the service makes the slug itself, and without the script the
# placeholder is what the server computed when it drew the page.
SLUG_PREVIEW_SCRIPT = (
    "(function(){var n=document.getElementById('name'),s=document.getElementById('slug');"
    "function show(){s.placeholder=n.value.normalize('NFKD').replace(/[^\\x00-\\x7f]/g,'')"
    ".toLowerCase().replace(/[^a-z0-9]+/g,'-').replace(/^-+|-+$/g,'').slice(0,63)"
    ".replace(/-+$/,'');}n.addEventListener('input',show);show();})();")


def new_app_page(nav: Nav, values: dict[str, str] | None = None,
                 error: ApiError | None = None) -> HTMLResponse:
    v = values or {}
    types = "".join(f"<option value=\"{t.value}\"{_sel(v.get('type'), t.value)}>{t.value}"
                    "</option>" for t in AppType)
    return page("New app", (
        "<h1>Create an app</h1>"
        "<p>Creating an app is a technical step, not a review: it exists at once.</p>"
        f"{alert(error)}<form class=\"stack\" method=\"post\" action=\"/apps/new\">"
        f"{csrf_field(nav.csrf)}"
        "<label for=\"name\">Name</label>"
        f"<input id=\"name\" name=\"name\" type=\"text\" required maxlength=\"120\" "
        f"value=\"{attr(v.get('name', ''))}\" aria-describedby=\"name-hint\">"
        "<span id=\"name-hint\" class=\"hint\">The public name.</span>"
        "<label for=\"slug\">Slug <span class=\"hint\">(optional)</span></label>"
        f"<input id=\"slug\" name=\"slug\" type=\"text\" maxlength=\"63\" "
        f"value=\"{attr(v.get('slug', ''))}\" placeholder=\"{attr(slugify(v.get('name', '')))}\" "
        "spellcheck=\"false\" autocapitalize=\"off\" aria-describedby=\"slug-hint\">"
        "<span id=\"slug-hint\" class=\"hint\">The app's address in URLs: its runtime host "
        "<code>&lt;slug&gt;.</code>… and its portal page <code>/&lt;slug&gt;</code>. Lower-case "
        "letters, digits and single hyphens; it cannot change later. Leave it blank to make it "
        "from the name.</span>"
        f"<label for=\"type\">Type</label><select id=\"type\" name=\"type\">{types}</select>"
        "<label for=\"headline\">Headline <span class=\"hint\">(optional)</span></label>"
        f"<input id=\"headline\" name=\"headline\" type=\"text\" maxlength=\"200\" "
        f"value=\"{attr(v.get('headline', ''))}\">"
        "<label for=\"payTo\">pay_to address <span class=\"hint\">(optional)</span></label>"
        f"<input id=\"payTo\" name=\"payTo\" type=\"text\" maxlength=\"42\" "
        f"value=\"{attr(v.get('payTo', ''))}\" placeholder=\"0x…\" spellcheck=\"false\">"
        "<button type=\"submit\">Create app</button></form>"),
        nav=nav, status=error.status if error else 200, headers=error_headers(error),
        script=SLUG_PREVIEW_SCRIPT)


def _sel(current: str | None, value: str) -> str:
    return " selected" if current == value else ""


def _checked(on: bool) -> str:
    return " checked" if on else ""


@dataclass(frozen=True)
class AppState:
    app: View
    products: list[View]
    keys: list[View]


@dataclass(frozen=True)
class Problem:
    """An error to show next to the form (section) it came from."""

    section: str
    error: ApiError
    values: dict[str, str] = field(default_factory=dict)


def app_page(nav: Nav, state: AppState, *, done: str | None = None,
             problem: Problem | None = None) -> HTMLResponse:
    a = state.app

    def at(section: str) -> str:
        return alert(problem.error) if problem and problem.section == section else ""
    body = (f"<h1>{escape(a['name'])}</h1>{notice(NOTICES.get(done or ''))}"
            f"{_details(a)}{_pay_to(nav, a, at('pay-to'), problem)}"
            f"{_products(nav, a, state.products, at('products'))}"
            f"{_keys(nav, a, state.keys, at('keys'))}")
    error = problem.error if problem else None
    return page(a["name"], body, nav=nav, status=error.status if error else 200,
                headers=error_headers(error))


def _details(a: View) -> str:
    rows = (("Slug", f"<code>{escape(a['slug'])}</code>"), ("Type", escape(a["type"])),
            ("Headline", escape(a["headline"]) or "—"),
            ("pay_to", f"<code>{escape(a['payTo'])}</code>" if a["payTo"] else "not set"),
            ("pay_to status", escape(a["payToStatus"])),
            ("Allowlist", _allowlist(a)),
            ("Listing", escape(a["portalListingStatus"])),
            ("Runtime URL", f"<code>{escape(a['runtime']['url'])}</code>"),
            ("Runtime status", escape(a["runtime"]["status"])))
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    here = f"/apps/{attr(a['slug'])}"
    return f"<section id=\"details\" aria-labelledby=\"details-h\"><h2 id=\"details-h\">" \
           f"Details</h2><dl>{items}</dl>" \
           f"<p><a href=\"{here}/runtime\">Runtime: whether it is served, and why not</a></p>" \
           f"<p><a href=\"{here}/webhooks\">Webhooks: endpoint, signing secret, test and " \
           "deliveries</a></p>" \
           f"<p><a href=\"{here}/config\">Config revisions: what each config apply " \
           "changed</a></p>" \
           "</section>"


REFUSED = "Payments are refused with <code>RECIPIENT_NOT_ALLOWLISTED</code> until"
ADD = "the operators add it (<code>svc-ops allowlist add</code>)"


def _allowlist(a: View) -> str:
    """``recipientAllowlistStatus`` (spec 2.2, "shown as Allowlist"): whether the spender
    contract may pay ``pay_to``, and, when it may not, until when payments are refused.
    The service only reads the contract's list (payments.chain.allowlist); operators change
    it, so a developer learns here what they are waiting for."""
    status = a["recipientAllowlistStatus"]
    if status == "allowed":
        return "allowed"
    if not a["payTo"]:
        return ("unknown<br><span class=\"hint\">No pay_to to check yet: payments are "
                "refused with <code>APP_PAY_TO_INVALID</code> until one is saved.</span>")
    if status == "not_allowed":
        return ("not allowed<br><span class=\"hint\">This pay_to is not on the spender "
                f"contract's recipient allowlist. {REFUSED} {ADD}; this page then says "
                "allowed.</span>")
    return (f"{escape(status)}, pending check<br><span class=\"hint\">{REFUSED} the "
            "service has read this pay_to on the spender contract's recipient allowlist, "
            "which the chain worker does on its next cycle after pay_to is saved or "
            f"changed; if the address is not on it, payments stay refused until {ADD}."
            "</span>")


def _pay_to(nav: Nav, a: View, error_html: str, problem: Problem | None) -> str:
    typed = problem.values.get("payTo") if problem and problem.section == "pay-to" else None
    value = typed if typed is not None else (a["payTo"] or "")
    return (
        "<section id=\"pay-to\" aria-labelledby=\"pay-to-h\"><h2 id=\"pay-to-h\">Payout "
        f"address (pay_to)</h2>{error_html}"
        f"<form class=\"stack\" method=\"post\" action=\"/apps/{attr(a['slug'])}/pay-to\">"
        f"{csrf_field(nav.csrf)}<label for=\"payTo\">Base USDC address</label>"
        f"<input id=\"payTo\" name=\"payTo\" type=\"text\" maxlength=\"42\" required "
        f"spellcheck=\"false\" value=\"{attr(value)}\" aria-describedby=\"pay-to-hint\">"
        "<span id=\"pay-to-hint\" class=\"hint\">Binding or changing pay_to starts a review "
        "for portal backing and public listing (status testing, listing pending_review); "
        "until it is approved the app has no public portal page.</span>"
        "<button type=\"submit\">Save pay_to</button></form></section>")


def _products(nav: Nav, a: View, products: list[View], error_html: str) -> str:
    slug = attr(a["slug"])
    taken = {p["slug"] for p in products}
    rows = "".join(
        f"<tr><td>{escape(p['name'])}</td><td><code>{escape(p['slug'])}</code></td>"
        f"<td>{_price(p)}</td><td>{escape(p['riskMode'])}</td>"
        f"<td>{_trusted_summary(p)}</td></tr>" for p in products)
    table = ("<table><thead><tr><th scope=\"col\">Product</th><th scope=\"col\">Slug</th>"
             "<th scope=\"col\">Price</th><th scope=\"col\">Risk mode</th>"
             "<th scope=\"col\">Trusted server charge</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if products else "<p>No products yet.</p>"
    policies = "".join(_policy_form(nav, slug, p) for p in products)
    buttons = "".join(
        f"<form class=\"inline\" method=\"post\" action=\"/apps/{slug}/products\">"
        f"{csrf_field(nav.csrf)}<input type=\"hidden\" name=\"template\" value=\"{t.key}\">"
        f"<button class=\"secondary\" type=\"submit\"{' disabled' if t.slug in taken else ''}>"
        f"{escape(t.name)} · {_template_price(t.price_atomic)}"
        f"{' (added)' if t.slug in taken else ''}</button></form>" for t in TEMPLATES)
    return ("<section id=\"products\" aria-labelledby=\"products-h\"><h2 id=\"products-h\">"
            f"Products</h2>{error_html}{table}{policies}"
            f"<h3>Add a product from a template</h3><div class=\"row\">{buttons}</div>"
            "</section>")


def _price(p: View) -> str:
    if p["pricing"] == "dynamic_order":
        return f"{_usdc(p['minAmountAtomic'])} to {_usdc(p['maxAmountAtomic'])} (per order)"
    return _usdc(p["priceAtomic"])


def _template_price(atomic: int | None) -> str:
    if atomic is None:
        return (f"custom amount ({format_usdc(TIP_MIN_ATOMIC)} to "
                f"{format_usdc(TIP_MAX_ATOMIC)} USDC)")
    return f"{format_usdc(atomic)} USDC"


def _trusted_summary(p: View) -> str:
    t = p["riskPolicy"]["trustedServerCharge"]
    if not t["enabled"]:
        return "off"
    proof = "payment proof required" if t["paymentProofRequired"] else "no payment proof"
    cap = _usdc(t["maxAmountAtomic"]) if t["maxAmountAtomic"] is not None else "no cap"
    return f"on · {proof} · max {cap}"


def _policy_form(nav: Nav, app_slug: str, p: View) -> str:
    t = p["riskPolicy"]["trustedServerCharge"]
    pid = attr(p["slug"])
    modes = "".join(f"<option value=\"{m.value}\"{_sel(p['riskMode'], m.value)}>{m.value}"
                    "</option>" for m in RiskMode)
    return (
        f"<details><summary>Risk settings: {escape(p['name'])}</summary>"
        f"<form class=\"stack\" method=\"post\" action=\"/apps/{app_slug}/products/{pid}\">"
        f"{csrf_field(nav.csrf)}"
        f"<label for=\"risk-{pid}\">riskMode</label>"
        f"<select id=\"risk-{pid}\" name=\"riskMode\">{modes}</select>"
        "<fieldset><legend>Trusted server charge</legend>"
        f"<label><input type=\"checkbox\" name=\"trustedEnabled\"{_checked(t['enabled'])}> "
        "Enabled</label><br>"
        f"<label><input type=\"checkbox\" name=\"proofRequired\""
        f"{_checked(t['paymentProofRequired'])}> paymentProof required</label><br>"
        f"<label for=\"max-{pid}\">maxAmountAtomic (6 decimals; blank: no cap)</label>"
        f"<input id=\"max-{pid}\" name=\"maxAmountAtomic\" type=\"text\" inputmode=\"numeric\" "
        f"value=\"{attr(t['maxAmountAtomic'] or '')}\"></fieldset>"
        "<button type=\"submit\">Save settings</button></form></details>")


def _keys(nav: Nav, a: View, keys: list[View], error_html: str) -> str:
    slug = attr(a["slug"])
    return (
        "<section id=\"keys\" aria-labelledby=\"keys-h\"><h2 id=\"keys-h\">API keys</h2>"
        f"{error_html}<p class=\"hint\">Keys of this app only. A key for every app of your "
        "organization is an <a href=\"/keys\">organization key</a>.</p>"
        f"{key_table(nav, keys, f'/apps/{slug}/keys')}<h3>Create an API key</h3>"
        f"{key_form(nav, f'/apps/{slug}/keys')}</section>")
