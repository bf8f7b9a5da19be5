"""What one ``svc`` run has sent that may change something, so that an interrupted run
(Ctrl-C) says "nothing was changed" only when that is true.

A request counts from the moment it is handed to the transport with a method other than
GET, HEAD or OPTIONS: once its bytes may have left, the service may carry it out whether
or not its answer is awaited. It stops counting when nothing can have reached the service
(the connection was never made) or when the service refused it (a 4xx: the API changes
nothing on a refusal). The POSTs that write nothing (a config plan, starting a sign-in,
which does nothing until approved) never count. The clients wrap their transports in
:class:`Recorded` (:class:`AsyncRecorded`); :func:`recording` switches it on for one run.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import unquote

import httpx

from svc.errors import CliError

READS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTs that change nothing the developer owns: a plan is a preview; a sign-in request is
# inert until approved in the console, and expires.
WRITE_NOTHING = frozenset({"/api/developer/config/plan", "/api/developer/cli/auth-requests"})
# Where to look to see whether a change landed, by the path it was sent to.
_APP = r"^/api/developer/apps/(?P<app>[^/]+)"
CHECKS = (
    (re.compile(r"^/api/developer/config/(apply|rollback)\Z"), "svc config revisions"),
    (re.compile(_APP + r"/keys(/|\Z)"), "svc keys list"),
    (re.compile(_APP + r"/products(/|\Z)"), "svc product list"),
    (re.compile(_APP + r"/(webhook-attempts/|webhooks/[^/]+/(test|resend-skipped)\Z)"),
     "svc webhook attempts"),
    (re.compile(_APP + r"/webhooks(/|\Z)"), "svc webhook list"),
    (re.compile(_APP + r"/runtime(/|\Z)"), "svc runtime status"),
    (re.compile(_APP + r"\Z"), "svc app show"),
    (re.compile(r"^/api/developer/apps\Z"), "svc app show"),
    (re.compile(r"^/api/developer/cli/(token|grant)\Z"), "svc auth status"),
)
INTERRUPTED = "interrupted"
UNKNOWN = "interrupted_change_unknown"


@dataclass
class Sent:
    """One request that may have changed something."""

    method: str
    path: str
    app: str | None = None  # the app it is about, when the path or body names it
    idempotency_key: str | None = None  # a rerun under it makes no second one
    refused: bool = field(default=False)  # answered 4xx: the service changed nothing
    note: str | None = None  # what its command adds if the run is interrupted (noting)


_sent: ContextVar[list[Sent] | None] = ContextVar("svc_sent", default=None)
_note: ContextVar[str | None] = ContextVar("svc_sent_note", default=None)


@contextmanager
def recording() -> Iterator[list[Sent]]:
    """Record, into the list yielded, each request made inside the block that may change
    something."""
    sent: list[Sent] = []
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


@contextmanager
def noting(note: str) -> Iterator[None]:
    """What an interruption says, beyond "may have made that change", of a request sent
    inside the block: what that change would mean (``svc webhook rotate``: a new secret
    nobody received)."""
    token = _note.set(note)
    try:
        yield
    finally:
        _note.reset(token)


def interrupted(sent: list[Sent]) -> CliError:
    """What to tell someone who interrupted the run, given what it had sent."""
    changing = [s for s in sent if not s.refused]
    if not changing:
        return CliError("Interrupted; nothing was changed.", code=INTERRUPTED)
    last = changing[-1]
    named = ", ".join(f"{s.method} {s.path}" for s in changing[-3:])
    check = _check_command(last)
    lines = [f"Interrupted after sending {named}: the service may have made "
             f"{'that change' if len(changing) == 1 else 'those changes'}, whether or not "
             "this command printed it."]
    if last.idempotency_key:
        lines.append(f"It carried the idempotency key {last.idempotency_key}: run the "
                     f"command again with --idempotency {shlex.quote(last.idempotency_key)} "
                     "to learn what was made without making a second one.")
    if last.note:
        lines.append(last.note)
    if check:
        lines.append(f"Check with `{check}` before running the command again.")
    else:
        lines.append("Check the app before running the command again.")
    return CliError(" ".join(lines), code=UNKNOWN, command=check)


def _check_command(request: Sent) -> str | None:
    for pattern, command in CHECKS:
        if pattern.search(request.path):
            return f"{command} --app {shlex.quote(request.app)}" if request.app and \
                command != "svc auth status" else command
    return None


def _begin(request: httpx.Request) -> Sent | None:
    sent = _sent.get()
    path = request.url.path
    if sent is None or request.method in READS or path in WRITE_NOTHING:
        return None
    body = _json(request)
    key = body.get("idempotencyKey") or request.headers.get("idempotency-key")
    record = Sent(request.method, path, _app_of(path, body),
                  key if isinstance(key, str) else None, note=_note.get())
    sent.append(record)
    return record


def _app_of(path: str, body: dict[str, object]) -> str | None:
    """The app slug a request is about: in its path, or the body of an app creation or a
    config apply."""
    found = re.match(_APP, path)
    if found:
        return unquote(found.group("app"))
    config = body.get("config")
    named = body.get("slug") if path == "/api/developer/apps" else (
        config.get("app", {}).get("slug") if isinstance(config, dict) else None)
    return named if isinstance(named, str) else None


def _json(request: httpx.Request) -> dict[str, object]:
    try:
        body = json.loads(request.content or b"{}")
    except (ValueError, httpx.RequestNotRead):
        return {}
    return body if isinstance(body, dict) else {}


def _settle(record: Sent | None, response: httpx.Response | None,
            error: BaseException | None) -> None:
    """Nothing reached the service (no connection was made), or it refused: not a change."""
    if record is None:
        return
    unsent = isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout))
    if unsent or (response is not None and 400 <= response.status_code < 500):
        record.refused = True


class Recorded(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        record = _begin(request)
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as error:
            _settle(record, None, error)
            raise
        _settle(record, response, None)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncRecorded(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        record = _begin(request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError as error:
            _settle(record, None, error)
            raise
        _settle(record, response, None)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
