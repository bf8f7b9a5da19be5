"""Sign-up, email verification, log-in and log-out (spec 5.2, 8 items 1-2)."""

from __future__ import annotations

import logging
from urllib.parse import quote

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from payments.developer import accounts
from payments.developer.auth import SESSION_COOKIE, Principal
from payments.developer.services import client_ip
from payments.developer.sessions import open_session, revoke_session
from payments.errors import ApiError
from payments.mail import MailError, Message
from payments.ratelimit import enforce
from portal.console.account_views import login_page, signup_page, verify_page
from portal.console.context import AUTH_REQUIRED, Console, signed_out_token
from portal.console.cookies import clear_session_cookie, set_session_cookie
from portal.console.csrf import is_local_path
from portal.console.forms import Form, read_form

log = logging.getLogger(__name__)

SUBJECT = "Your svc developer console verification code"
MAIL_FAILED = "mail_failed"


class AccountPages:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.s = console.services

    async def signup_form(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        return token.attach(signup_page(token.value))

    async def signup(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        form = Form({})
        try:
            form = await read_form(request)
            self.c.check_signed_out_form(request, form)
            email = await self._register(form, client_ip(self.s, request))
        except ApiError as error:
            return token.attach(signup_page(token.value, form.get("email"),
                                            form.get("username"), error))
        return RedirectResponse(f"/verify?email={quote(email)}&sent=1", status_code=303)

    async def _register(self, form: Form, address: str) -> str:
        """The account and its mailed code, within ``address``'s sign-up limits; the email."""
        limiter, limits = self.s.limiter(), self.s.limits
        # Attempts first: a sign-up the next line refuses is still an attempt.
        await enforce(limiter, limits.signup_attempt, address)
        await enforce(limiter, limits.signup, address)
        now = self.s.clock()

        def unit(session: Session) -> str:
            issued = accounts.register(
                session, self.s.passwords, email=form.get("email"),
                username=form.get("username"), password=form.get("password"), now=now)
            self._mail_code(issued)
            return issued.developer.email
        try:
            return await self.s.run(unit)
        except ApiError as error:
            if error.code == MAIL_FAILED:
                # Our mail server failed, not the person: the sign-up is given back
                # (nothing was committed); the attempt stays counted (docs/decisions.md).
                await limiter.refund(limits.signup, address)
            raise

    def _mail_code(self, issued: accounts.IssuedCode) -> None:
        # Sent inside the unit of work: if the mail server refuses, nothing is committed,
        # so the person can simply try again (no half-made account, no resend cooldown).
        email = issued.developer.email
        link = f"{self.s.console_url}/verify?email={quote(email)}"
        minutes = int(accounts.CODE_LIFETIME.total_seconds() // 60)
        text = (f"Your verification code is {issued.code}\n\nEnter it at {link}\n"
                f"It is valid for {minutes} minutes. If you did not sign up, ignore this "
                "email.\n")
        try:
            self.s.mailer.send(Message(to=email, subject=SUBJECT, text=text))
        except MailError as exc:
            log.warning("verification mail failed: %s", exc)  # MailError never holds the body
            raise ApiError(MAIL_FAILED, 502, "We could not send the verification email "
                           "right now; please try again in a minute.") from None

    async def verify_form(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        email = request.query_params.get("email", "")[:254]
        if not accounts.EMAIL_RE.match(email):
            # The page says "We sent a code to <email>": anyone can write the link, so text
            # that is not an address would be their words on the console's page.
            email = ""
        sent = request.query_params.get("sent") == "1"
        return token.attach(verify_page(token.value, email, sent=sent))

    async def verify(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        form = Form({})
        try:
            form = await read_form(request)
            self.c.check_signed_out_form(request, form)
            email = form.get("email").strip().lower()
            await enforce(self.s.limiter(), self.s.limits.verify, email)
            now, previous = self.s.clock(), self.c.cookies.read(request, SESSION_COOKIE)

            def unit(session: Session) -> str:
                developer = accounts.verify_email(session, email=email, code=form.get("code"),
                                                  now=now)
                # As a log-in does: the browser's earlier session (another account's, say)
                # ends rather than living on beside the new cookie.
                revoke_session(session, previous, now)
                return open_session(session, developer.id, now, self.s.policy).token
            session_token = await self.s.run(unit)
        except ApiError as error:
            return token.attach(verify_page(token.value, form.get("email"), error=error))
        return self._signed_in(RedirectResponse("/apps", status_code=303), session_token)

    async def resend(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        form = Form({})
        try:
            form = await read_form(request)
            self.c.check_signed_out_form(request, form)
            # Each mail asked for counts as a sign-up attempt: the account's cooldown is set
            # only by a send that worked, so failing resends would have no bound.
            await enforce(self.s.limiter(), self.s.limits.signup_attempt,
                          client_ip(self.s, request))
            now = self.s.clock()

            def unit(session: Session) -> str:
                issued = accounts.resend_code(session, email=form.get("email"), now=now)
                self._mail_code(issued)
                return issued.developer.email
            email = await self.s.run(unit)
        except ApiError as error:
            return token.attach(verify_page(token.value, form.get("email"),
                                            resend_error=error))
        return RedirectResponse(f"/verify?email={quote(email)}&sent=1", status_code=303)

    async def login_form(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        next_path = request.query_params.get("next", "")
        signed_out = request.query_params.get("signed_out") == "1"
        return token.attach(login_page(token.value, next_path=next_path if is_local_path(
            next_path) else "", signed_out=signed_out))

    async def login(self, request: Request) -> Response:
        token = signed_out_token(request, self.c.cookies)
        form = Form({})
        try:
            form = await read_form(request)
            self.c.check_signed_out_form(request, form)
            name = form.get("login").strip().lower()[:254]
            limit, key = self.s.limits.login, f"{client_ip(self.s, request)}|{name}"
            await enforce(self.s.limiter(), limit, key)
            now, previous = self.s.clock(), self.c.cookies.read(request, SESSION_COOKIE)

            def unit(session: Session) -> str:
                developer = accounts.authenticate(session, self.s.passwords, login=name,
                                                  password=form.get("password"))
                revoke_session(session, previous, now)  # a new log-in replaces the old one
                return open_session(session, developer.id, now, self.s.policy).token
            session_token = await self.s.run(unit)
            await self.s.limiter().reset(limit, key)  # only failures count toward the limit
        except ApiError as error:
            next_path = form.get("next")
            return token.attach(login_page(token.value, form.get("login"),
                                           next_path if is_local_path(next_path) else "",
                                           error=error))
        target = form.get("next")
        response = RedirectResponse(target if is_local_path(target) else "/apps",
                                    status_code=303)
        return self._signed_in(response, session_token)

    async def logout(self, request: Request) -> Response:
        now = self.s.clock()
        cookie = self.c.cookies.read(request, SESSION_COOKIE)

        def work(session: Session, who: Principal) -> None:
            revoke_session(session, cookie, now)
        try:
            await self.c.as_developer(request, work, form=await read_form(request))
        except ApiError as error:
            if error.code != AUTH_REQUIRED:
                return self.c.failure(request, error)
        response = RedirectResponse("/login?signed_out=1", status_code=303)
        clear_session_cookie(response, self.c.cookies)
        return response

    def _signed_in(self, response: Response, session_token: str) -> Response:
        set_session_cookie(response, self.c.cookies, session_token,
                           max_age=int(self.s.policy.absolute.total_seconds()))
        return response
