"""``GET {portal_url}/account``: Global Budget, Connected Apps, Ready Apps, spend records,
unlink, renew and revoke (spec 4.7, 1.9).

The page is a shell; ``account.js`` fills it. The budget appears once a wallet is
connected; connected apps and spend records only after the wallet-ownership proof
(``api_account.py``), which a browser session keeps.
"""

from __future__ import annotations

from html import escape

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from payments.portal.account import ready_apps
from portal.authorize import budget_choices
from portal.config import PortalConfig
from portal.csrf import page_token
from portal.layout import Shell


class AccountPage:
    def __init__(self, config: PortalConfig, shell: Shell) -> None:
        self.c = config
        self.shell = shell

    async def show(self, request: Request) -> Response:
        def work(session: Session) -> list[tuple[str, str]]:
            return [(a.slug, a.name) for a in ready_apps(session)]
        apps = await self.c.services.run(work)
        ready = "".join(f'<li><a href="/{escape(slug)}">{escape(name)}</a></li>'
                        for slug, name in apps) or "<li>No apps are listed yet.</li>"
        dev = ('<button id="dev-wallet" type="button" class="secondary" disabled>Use dev '
               "wallet (test funds, dev mode only)</button>" if self.c.dev else "")
        body = (
            "<h1>Your account</h1>"
            '<section aria-labelledby="wallet-h"><h2 id="wallet-h">Wallet</h2>'
            '<p id="wallet-status">No wallet is connected yet.</p><div class="row">'
            '<button id="connect" type="button" disabled>Connect wallet</button>'
            f"{dev}</div></section>"
            '<section aria-labelledby="budget-h"><h2 id="budget-h">Global Budget</h2>'
            '<p class="hint">One budget for every app you connect. It is what the service '
            "may still charge, not your wallet balance.</p>"
            '<div id="budget"><p>Connect your wallet to see your budget.</p></div>'
            '<div id="budget-actions" class="row" hidden>'
            '<button id="renew" type="button">Renew budget</button>'
            '<button id="revoke" type="button" class="danger">Revoke budget</button></div>'
            f'<form id="renew-form" hidden>{budget_choices("New budget")}'
            '<p id="renew-sentence" class="plain-sentence"></p>'
            '<button id="renew-sign" type="submit">Sign new budget permit</button></form>'
            "</section>"
            '<section aria-labelledby="connected-h"><h2 id="connected-h">Connected Apps</h2>'
            '<div id="connected"><p>Connected apps and spend records stay hidden until you '
            "verify this wallet. Verifying is one gas-free signature; it is not a payment "
            "and moves no funds.</p>"
            '<button id="verify" type="button" disabled>Verify wallet</button></div></section>'
            '<section aria-labelledby="spend-h"><h2 id="spend-h">Spend records</h2>'
            '<div id="spend"><p>Verify your wallet to see what you spent.</p></div></section>'
            '<section aria-labelledby="ready-h"><h2 id="ready-h">Ready Apps</h2>'
            '<p class="hint">Apps that take your global budget: open one to buy.</p>'
            f'<ul class="apps">{ready}</ul></section>'
            '<p id="progress" role="status" aria-live="polite"></p>'
            '<div id="error" class="alert" role="alert" hidden></div>')
        data = {"baseUrl": self.c.base_url, "spender": self.c.params.spender,
                "token": self.c.params.token,
                "chainId": hex(self.c.params.chain_id), "devWallet": self.c.dev,
                "csrfToken": page_token(self.c.secret_key, self.c.services.clock())}
        scripts = ("portal.js", *(("dev-wallet.js",) if self.c.dev else ()), "account.js")
        return self.shell.page("Account", body, data=data, scripts=scripts)
