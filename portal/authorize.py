"""``GET {portal_url}/authorize``: one EIP-2612 Permit for BudgetSpenderV2, then back to the
app with a summary code (spec 4.7, 1.9, 1.10).

The server decides everything that can be decided before a wallet is involved: the app
must exist and take payments, the return URL must be one of the forms of spec 5.5 (the
ledger's own rule, so the page can never promise a return ``return-code`` would refuse),
an account handoff token must be valid for this app. ``authorize.js`` then connects the
wallet, asks for the signature and calls ``return-code`` on the API host.

``mode=popup&embed=1`` is the compact layout for a runtime's in-page iframe modal: only
then may the page be framed, and only by the app's own runtime origin (the return URL's
origin); every other page of the portal refuses framing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from payments.errors import ApiError
from payments.ledger.handoffs import decode_handoff
from payments.ledger.permits import ADDRESS_RE
from payments.ledger.return_urls import ReturnTarget, check_return_url
from payments.ledger.routes_authorizations import app_by_slug
from payments.models import App, AppStatus
from payments.slugs import is_valid_slug
from portal.config import PortalConfig
from portal.csrf import page_token
from portal.layout import Shell
from portal.money import format_usdc

BUDGET_PRESETS = (1_000_000, 5_000_000, 10_000_000, 25_000_000)  # 1, 5, 10, 25 USDC
DEFAULT_BUDGET = 5_000_000
DURATION_PRESETS = (7, 30, 90)  # days
DEFAULT_DAYS = 30


@dataclass(frozen=True)
class AuthorizeRequest:
    app: App
    target: ReturnTarget
    embed: bool
    force: bool
    handoff_label: str | None
    handoff: str | None
    wallet_hint: str | None


def plain_date(moment: datetime) -> str:
    return f"{moment.day} {moment:%B %Y}"


def budget_choices(label: str) -> str:
    """The amount and lifetime pickers (authorize page, account renew form)."""
    amounts = "".join(f'<option value="{v}"{" selected" if v == DEFAULT_BUDGET else ""}>'
                      f"{format_usdc(v)} USDC</option>" for v in BUDGET_PRESETS)
    days = "".join(f'<option value="{d}"{" selected" if d == DEFAULT_DAYS else ""}>'
                   f"{d} days</option>" for d in DURATION_PRESETS)
    return (f'<div class="row"><label for="amount">{label}</label>'
            f'<select id="amount">{amounts}</select><label for="days">Valid for</label>'
            f'<select id="days">{days}</select></div>')


def _framer(target: ReturnTarget) -> str:
    """Who may frame the embed returning to ``target``: the app's runtime or local-dev
    origin, where the modal lives; a hosted-entry return has no modal to frame it."""
    return target.audience if target.kind in ("runtime", "local_dev") else "'none'"


def _wallet_hint(value: str | None) -> str | None:
    """``walletHint`` if it is an address, else nothing: the page shows it as the wallet the
    app expected, and anyone can write a link, so any other text would be words of the
    link maker's choosing on the portal's signing page. A handoff only ever puts an address
    there (``payments.ledger.handoffs.wallet_hint_of``)."""
    return value if value is not None and ADDRESS_RE.fullmatch(value) else None


class Refused(Exception):
    """A request the page refuses in words (never a stack trace, never a 500)."""

    def __init__(self, status: int, title: str, text: str, detail: str = "") -> None:
        super().__init__(text)
        self.status, self.title, self.text, self.detail = status, title, text, detail


class AuthorizePage:
    def __init__(self, config: PortalConfig, shell: Shell) -> None:
        self.c = config
        self.shell = shell

    async def show(self, request: Request) -> Response:
        q = request.query_params
        embed = q.get("mode") == "popup" and q.get("embed") == "1"
        # renew / forceAuthorize: skip the current-budget shortcut, ask for a fresh permit.
        force = q.get("renew") == "1" or q.get("forceAuthorize") == "1"
        try:
            checked = await self._check(q.get("app"), q.get("return"), embed, force,
                                        q.get("handoff"), _wallet_hint(q.get("walletHint")))
        except Refused as refused:
            ancestors = (self._refusal_ancestors(q.get("app"), q.get("return")) if embed
                         else "'none'")
            return self.shell.message(refused.title, refused.text, refused.status,
                                      detail=refused.detail, embed=embed,
                                      frame_ancestors=ancestors)
        return self.shell.page(f"Authorize {checked.app.name}", self._body(checked),
                               data=self._data(checked), embed=embed,
                               scripts=self._scripts(),
                               frame_ancestors=_framer(checked.target) if embed else "'none'")

    def _refusal_ancestors(self, slug: str | None, return_url: str | None) -> str:
        """Who may frame a refusal in the embed: the origin that could have framed the page
        had it been accepted (the slug's runtime, a local-dev origin), so the app's modal
        shows the reason instead of a blocked frame. Decided from the link alone, whatever
        was refused (the app may not exist); the message has no script, form or link, so
        framing it lets nobody act. Anything else: 'none'."""
        if not slug or not return_url or not is_valid_slug(slug):
            return "'none'"  # a valid slug only: the runtime origin is built from it
        try:
            target = check_return_url(return_url, slug=slug, portal_url=self.c.portal_url,
                                      runtime_url=self.c.ledger.runtime_url(slug),
                                      runtime_active=True)
        except ApiError:
            return "'none'"
        return _framer(target)

    def _scripts(self) -> tuple[str, ...]:
        dev = ("dev-wallet.js",) if self.c.dev else ()
        return ("portal.js", *dev, "authorize.js")

    async def _check(self, slug: str | None, return_url: str | None, embed: bool, force: bool,
                     handoff: str | None, wallet_hint: str | None) -> AuthorizeRequest:
        if not slug or not return_url:
            raise Refused(400, "This authorization link is incomplete",
                          "The link must name the app and the address to return to. Go "
                          "back to the app and start again.")
        now = self.c.services.clock()

        def work(session: Session) -> AuthorizeRequest:
            try:
                app = app_by_slug(session, slug)
            except ApiError:
                raise Refused(404, "App not found", "No app has this name.") from None
            if app.status != AppStatus.ACTIVE or app.kill_switch:
                raise Refused(403, f"{app.name} is not taking payments",
                              "This app cannot take payments right now.")
            try:
                target = check_return_url(
                    return_url, slug=app.slug, portal_url=self.c.portal_url,
                    runtime_url=self.c.ledger.runtime_url(app.slug),
                    runtime_active=app.runtime_served)
            except ApiError as exc:
                raise Refused(400, "This return address is not allowed", exc.message,
                              self._allowed_forms(app)) from None
            label = None
            if handoff:
                try:
                    decoded = decode_handoff(self.c.secret_key, handoff, now)
                except ApiError as exc:
                    raise Refused(exc.status if exc.status == 410 else 400,
                                  "This account link cannot be used", exc.message) from None
                if decoded.app_id != app.id:
                    raise Refused(400, "This account link cannot be used",
                                  "The account link belongs to another app.")
                label = decoded.label
            return AuthorizeRequest(app, target, embed, force, label, handoff, wallet_hint)
        result: AuthorizeRequest = await self.c.services.run(work)
        return result

    def _allowed_forms(self, app: App) -> str:
        runtime = self.c.ledger.runtime_url(app.slug)
        return ("<p>An authorization can only return to one of these addresses of "
                f"<strong>{escape(app.name)}</strong>:</p><ul>"
                f"<li>its hosted entry, <code>{escape(self.c.portal_url)}/{escape(app.slug)}"
                "</code>;</li>"
                f"<li>its runtime, <code>{escape(runtime)}/…</code>, once the runtime is "
                "active;</li>"
                f"<li>for local development, <code>http://localhost:&lt;port&gt;/"
                f"{escape(app.slug)}/…</code> or <code>http://127.0.0.1:&lt;port&gt;/"
                f"{escape(app.slug)}/…</code>.</li></ul>"
                "<p>Nothing was signed. Go back to the app and try again, or tell its "
                "developer.</p>")

    def _body(self, r: AuthorizeRequest) -> str:
        name = escape(r.app.name)
        binding = (f'<p class="note">This also links your game account <strong>'
                   f"{escape(r.handoff_label or 'in this app')}</strong> in {name} to the "
                   "wallet you use here.</p>" if r.handoff else "")
        renew = ('<p class="note">You asked to renew: sign a new budget; it replaces your '
                 "current one.</p>" if r.force else "")
        cancel = ('<p><button id="cancel" type="button" class="secondary" disabled>Cancel'
                  "</button></p>" if r.embed else "")
        return (
            f"<h1>Authorize payments for {name}</h1>"
            f"<p class=\"lead\">{name} asks for a USDC budget it can charge for purchases, "
            f"without asking you each time.</p>{binding}{renew}{self._wallet_step()}"
            f"{self._budget_step(r)}"
            '<p id="progress" role="status" aria-live="polite"></p>'
            f'<div id="error" class="alert" role="alert" hidden></div>{cancel}'
            f'<p class="hint">You return to <code>{escape(r.target.audience)}</code> '
            "afterwards.</p>")

    def _wallet_step(self) -> str:
        dev = ('<button id="dev-wallet" type="button" class="secondary" disabled>Use dev '
               "wallet (test funds, dev mode only)</button>" if self.c.dev else "")
        return ('<section id="wallet-step" aria-labelledby="wallet-h"><h2 id="wallet-h">1. '
                'Your wallet</h2><p id="wallet-status">No wallet is connected yet.</p>'
                '<div class="row"><button id="connect" type="button" disabled>Connect wallet'
                f"</button>{dev}</div></section>")

    def _budget_step(self, r: AuthorizeRequest) -> str:
        name = escape(r.app.name)
        expires = plain_date(self.c.services.clock() + timedelta(days=DEFAULT_DAYS))
        amount = format_usdc(DEFAULT_BUDGET)
        existing = ('<div id="existing" hidden><p id="existing-text"></p><div class="row">'
                    '<button id="use-existing" type="button">Continue with this budget'
                    '</button><button id="new-budget" type="button" class="secondary">Sign a '
                    "new budget instead</button></div></div>")
        terms = (
            '<dl class="plain">'
            f"<dt>App</dt><dd>{name} <code>{escape(r.app.slug)}</code></dd>"
            f'<dt>Budget</dt><dd id="plain-amount">up to {amount} USDC</dd>'
            "<dt>Spender</dt><dd>BudgetSpenderV2 "
            f'<code class="address">{escape(self.c.params.spender)}</code></dd>'
            f'<dt>Expires</dt><dd id="plain-expiry">on {expires} (in {DEFAULT_DAYS} days)</dd>'
            "</dl>"
            '<p id="plain-sentence" class="plain-sentence">You sign one USDC permit. It lets '
            f"the BudgetSpenderV2 contract take up to {amount} USDC out of this wallet until "
            f"{expires}, only for purchases you make in {name} and other apps you connect. "
            "You pay no gas and need no ETH; each purchase is charged without asking again. "
            "You can revoke it at any time on your account page.</p>")
        return ('<section id="budget-step" aria-labelledby="budget-h" hidden>'
                f'<h2 id="budget-h">2. Your budget</h2>{existing}'
                f'<form id="budget-form">{budget_choices("Budget")}{terms}'
                '<button id="sign" type="submit">Sign budget permit</button></form></section>')

    def _data(self, r: AuthorizeRequest) -> dict[str, Any]:
        p = self.c.params
        return {
            "app": {"slug": r.app.slug, "name": r.app.name}, "returnUrl": r.target.url,
            "audience": r.target.audience, "embed": r.embed, "force": r.force,
            "handoff": r.handoff, "walletHint": r.wallet_hint, "baseUrl": self.c.base_url,
            "spender": p.spender, "token": p.token, "chainId": hex(p.chain_id),
            "network": p.network, "presets": [str(v) for v in BUDGET_PRESETS],
            "devWallet": self.c.dev,
            "csrfToken": page_token(self.c.secret_key, self.c.services.clock()),
        }
