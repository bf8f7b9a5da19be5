"""The console's webhook page (spec 3.7, 5.6 item 1, 6 item 7): the app's endpoint, made
and changed here, its signing secret shown once, a test event, and the recent events with
a retry for each that was not delivered.

Every action is ``payments.webhooks.operations``'s, the functions the JSON API (and so
``svc webhook``) runs; the same limits count both. Forms carry the session's CSRF token
(checked by ``Console.as_developer``); an action answers with a redirect back to the page
(``?done=``), its error on the page beside its form, or, for creation and rotation, the
secret page, the one answer that holds the secret (``no-store``, never redirected to).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from payments.developer.auth import Principal
from payments.errors import ApiError
from payments.ratelimit import Limit
from payments.webhooks import operations as ops
from payments.webhooks.attempt_cursor import attempt_cursor
from payments.webhooks.services import WebhookServices
from portal.console.app_views import Problem
from portal.console.context import AUTH_REQUIRED, Console
from portal.console.forms import Form, read_form
from portal.console.webhook_views import PAGE_FIELD, WebhookState, secret_page, webhook_page

RECENT = 50
# Errors that leave no form to show them on: answered by Console.failure.
PAGE_ERRORS = frozenset({AUTH_REQUIRED, "csrf_failed", "app_not_found", "webhook_not_found",
                         "webhook_attempt_not_found", "unsupported_media_type",
                         "payload_too_large", "invalid_form"})


class WebhookPages:
    def __init__(self, console: Console, services: WebhookServices) -> None:
        self.c = console
        self.s = services

    # Reading

    def _state(self, session: Session, who: Principal, ref: str,
               before: str | None) -> WebhookState:
        app, endpoint = ops.app_endpoint(session, who, ref)
        # ``before``: the API's cursor, read as the API reads it; a bad one is a bad
        # address (400), found after the app so another organization's is still 404.
        recent = ops.list_attempts(session, who, ref, lambda: ops.AttemptFilter(
            before=attempt_cursor(before, status=400), limit=RECENT))
        return WebhookState(app.slug, endpoint, recent["attempts"], before=before,
                            older=recent["nextBefore"])

    async def show(self, request: Request) -> Response:
        query = request.query_params
        return await self._show(request, request.path_params["app"], done=query.get("done"),
                                before=query.get("before"))

    async def _show(self, request: Request, ref: str, *, done: str | None = None,
                    before: str | None = None, problem: Problem | None = None) -> Response:
        try:
            nav, state = await self.c.as_developer(
                request, lambda session, who: self._state(session, who, ref, before))
        except ApiError as error:
            shown = error if problem is None or error.code == AUTH_REQUIRED else problem.error
            return self.c.failure(request, shown, back=f"/apps/{ref}/webhooks")
        return webhook_page(nav, state, done=done, problem=problem)

    async def to_page(self, request: Request) -> Response:
        """A form's target opened as a page (back, reload, a bookmark of the secret page):
        the webhook page, never a 405; the secret is not shown again."""
        return RedirectResponse(f"/apps/{quote(request.path_params['app'], safe='')}/webhooks",
                                status_code=303)

    # Creating and rotating: answered with the secret page

    async def create(self, request: Request) -> Response:
        ref = request.path_params["app"]
        form = Form({})
        try:
            form = await read_form(request)

            _, (url, events, checked) = await self.c.as_developer(
                request, lambda session, who: ops.checked_creation(
                    session, who, ref, lambda: _body(form), self.s),
                form=form, limit=self.s.limits.management)
            await ops.resolve(checked, self.s)
            nav, (webhook, secret) = await self.c.as_developer(
                request, lambda session, who: ops.create(session, who, ref, url, events,
                                                         self.s), form=form)
        except ApiError as error:
            return await self._refused(request, ref, "endpoint", error, form)
        return secret_page(nav, ref, webhook, secret, rotated=False)

    async def rotate(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        form = Form({})
        try:
            form = await read_form(request)
            nav, (webhook, secret) = await self.c.as_developer(
                request, lambda session, who: ops.rotate(
                    session, who, ref, hook, self.s,
                    unless_rotated_since=form.get("secretCreatedAt")),
                form=form, limit=self.s.limits.management)
        except ApiError as error:
            return await self._refused(request, ref, "secret", error, form)
        return secret_page(nav, ref, webhook, secret, rotated=True)

    # Everything else: redirected back to the page

    async def update(self, request: Request) -> Response:
        ref, hook = request.path_params["app"], request.path_params["webhook"]
        form = Form({})
        section = "change"
        try:
            form = await read_form(request)
            section = "endpoint" if "enabled" in form.fields else "change"
            _, (wanted, checked) = await self.c.as_developer(
                request, lambda session, who: ops.checked_change(
                    session, who, ref, hook, lambda: _change_body(form), self.s),
                form=form, limit=self.s.limits.management)
            if checked is not None:
                await ops.resolve(checked, self.s)
            await self.c.as_developer(request, lambda session, who: ops.change(
                session, who, ref, hook, wanted, self.s), form=form)
        except ApiError as error:
            return await self._refused(request, ref, section, error, form)
        done = "saved" if wanted.enabled is None else "enabled" if wanted.enabled else "disabled"
        return _back(ref, done, "endpoint")

    async def test(self, request: Request) -> Response:
        hook = request.path_params["webhook"]

        def work(session: Session, who: Principal, ref: str) -> str:
            ops.queue_test(session, who, ref, hook, self.s)
            return "test-queued"
        return await self._act(request, "test", self.s.limits.test, work, to="deliveries")

    async def resend_skipped(self, request: Request) -> Response:
        hook = request.path_params["webhook"]

        def work(session: Session, who: Principal, ref: str) -> str:
            resent = ops.resend_skipped(session, who, ref, hook, self.s)["resent"]
            return "resent" if resent else "nothing-to-resend"
        return await self._act(request, "resend", self.s.limits.management, work,
                               to="deliveries")

    async def retry(self, request: Request) -> Response:
        attempt = request.path_params["attempt"]

        def work(session: Session, who: Principal, ref: str) -> str:
            ops.retry(session, who, ref, attempt, self.s)
            return "retried"
        return await self._act(request, "deliveries", self.s.limits.management, work,
                               to="deliveries")

    async def _act(self, request: Request, section: str, limit: Limit,
                   work: Callable[[Session, Principal, str], str], *, to: str) -> Response:
        ref = request.path_params["app"]
        form = Form({})
        try:
            form = await read_form(request)
            _, done = await self.c.as_developer(
                request, lambda session, who: work(session, who, ref), form=form, limit=limit)
        except ApiError as error:
            return await self._refused(request, ref, section, error, form)
        return _back(ref, done, to, page_of(form))

    async def _refused(self, request: Request, ref: str, section: str, error: ApiError,
                       form: Form) -> Response:
        """The page with the error beside the form it came from, the form as it was typed;
        or, with no form to show it on, the console's error page."""
        if error.code in PAGE_ERRORS:
            return self.c.failure(request, error, back=f"/apps/{ref}/webhooks")
        values = {"url": form.get("url"), "events": ",".join(form.all("event"))}
        return await self._show(request, ref, before=page_of(form), problem=Problem(
            section, error, {k: v for k, v in values.items() if k in _sent(form)}))


def _body(form: Form) -> dict[str, Any]:
    """A form's fields in the JSON body's shape, so the API's checks read them."""
    return {"url": form.optional("url"), "events": form.all("event")}


def _change_body(form: Form) -> dict[str, Any]:
    if "enabled" in form.fields:  # the enable/disable button's form
        value = form.get("enabled")
        return {"enabled": {"true": True, "false": False}.get(value, value)}
    return _body(form)


def _sent(form: Form) -> set[str]:
    names = set(form.fields) - {PAGE_FIELD}
    return {"url", "events"} if "url" in names else names


def page_of(form: Form) -> str | None:
    """The page of the list a Retry or Resend form was sent from (its ``before``), to go
    back to; None, the newest page, for a form without one or with one the list would not
    read: where to land afterwards is no reason to refuse the action itself."""
    before = form.optional(PAGE_FIELD)
    try:
        attempt_cursor(before)
    except ApiError:
        return None
    return before


def _back(ref: str, done: str, section: str, before: str | None = None) -> RedirectResponse:
    page = "" if before is None else f"before={quote(before, safe='')}&"
    return RedirectResponse(f"/apps/{quote(ref, safe='')}/webhooks?{page}done={done}"
                            f"#{section}", status_code=303)

