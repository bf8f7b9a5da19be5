"""What every console handler needs: the services, who is signed in, and error answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from payments.cookies import CookieNames
from payments.developer.auth import SESSION_COOKIE, Credentials, Principal, run_as
from payments.developer.models import Developer
from payments.developer.services import DeveloperServices
from payments.errors import ApiError
from payments.ratelimit import Limit
from portal.console.cookies import set_csrf_cookie
from portal.console.csrf import CSRF_COOKIE, CSRF_FIELD, check_double_submit, new_csrf_token
from portal.console.forms import Form
from portal.console.layout import Nav, alert, error_headers, page

T = TypeVar("T")
RuntimeUrl = Callable[[str], str]
AUTH_REQUIRED = "developer_auth_required"


@dataclass(frozen=True)
class Console:
    services: DeveloperServices
    runtime_url: RuntimeUrl

    @property
    def cookies(self) -> CookieNames:
        return self.services.cookies

    async def as_developer(self, request: Request, work: Callable[[Session, Principal], T], *,
                           form: Form | None = None, limit: Limit | None = None
                           ) -> tuple[Nav, T]:
        """Run ``work`` as the session's developer; with a ``form``, as a checked mutation;
        with a ``limit``, counted against the developer's budget first."""
        creds = Credentials(bearer=None, cookie=self.cookies.read(request, SESSION_COOKIE),
                            csrf=form.get(CSRF_FIELD) if form else None,
                            method="POST" if form else "GET",
                            origin=request.headers.get("origin"))

        def unit(session: Session, who: Principal) -> tuple[Nav, T]:
            return nav_of(session, who), work(session, who)
        return await run_as(self.services, creds, unit, limit)

    def check_signed_out_form(self, request: Request, form: Form) -> None:
        check_double_submit(self.cookies.read(request, CSRF_COOKIE),
                            form.get(CSRF_FIELD) or None,
                            request.headers.get("origin"), self.services.console_url)

    def failure(self, request: Request, error: ApiError, *, back: str = "/apps") -> Response:
        """A signed-in page's error that no form shows: log in again, or an error page."""
        if error.code == AUTH_REQUIRED:
            return to_login(back if request.method == "POST" else _here(request))
        return page("Something went wrong", (
            f"<h1>{'Not found' if error.status == 404 else 'That did not work'}</h1>"
            f"{alert(error)}<p><a href=\"{quote(back, safe='/?=&-_.')}\">Go back</a></p>"),
            status=error.status, headers=error_headers(error))


def nav_of(session: Session, who: Principal) -> Nav:
    developer = session.get(Developer, who.developer_id)
    assert who.console_session is not None and developer is not None
    return Nav(csrf=who.console_session.csrf_token, username=developer.username)


def to_login(next_path: str) -> RedirectResponse:
    return RedirectResponse(f"/login?next={quote(next_path, safe='/')}", status_code=303)


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


@dataclass(frozen=True)
class SignedOutToken:
    """The double-submit token for a signed-out form; minted when the cookie is missing."""

    value: str
    minted: bool
    cookies: CookieNames

    def attach(self, response: Response) -> Response:
        if self.minted:
            set_csrf_cookie(response, self.cookies, self.value)
        return response


def signed_out_token(request: Request, cookies: CookieNames) -> SignedOutToken:
    existing = cookies.read(request, CSRF_COOKIE)
    if existing and 16 <= len(existing) <= 128:
        return SignedOutToken(existing, minted=False, cookies=cookies)
    return SignedOutToken(new_csrf_token(), minted=True, cookies=cookies)
