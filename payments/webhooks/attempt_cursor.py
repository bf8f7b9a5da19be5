"""The ``before`` of the webhook-attempts list: where the next, older page starts.

The list is newest first by ``(event created_at, event id)``. ``created_at`` alone is no
key: the events of one transaction share it (a settlement batch's ``payment.settled``
events, a ``settled_first`` charge's ``payment.delivered`` and ``payment.settled``), so a
page that ended inside such a group and went on from ``created_at < t`` skipped the rest of
the group. A cursor therefore names the last row shown, time and event id, and the next page
is what sorts after it. On the wire it is one opaque token (base64url of ``time|id``), so
its inside can change without changing the parameter.

A bare ISO 8601 time is still read, as ``before`` was before the token: the events created
before that time (the old ``nextBefore``, or a time a client picked). The API, the console
and ``svc webhook attempts`` read ``before`` with ``attempt_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime

from payments.errors import ApiError

MAX_LENGTH = 200  # a token is about 90 characters; nothing longer is decoded
_EVENT_ID = re.compile(r"zevt_[0-9a-z]{1,64}")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class AttemptCursor:
    created_at: datetime  # timezone-aware
    event_id: str | None  # the last row shown; None: a bare time, every event before it


def next_cursor(created_at: datetime, event_id: str) -> str:
    """The token that lists what sorts after the event ``event_id`` (created ``created_at``)."""
    text = f"{created_at.isoformat()}|{event_id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def attempt_cursor(raw: str | None, *, status: int = 422) -> AttemptCursor | None:
    """``before`` as the query string has it (None: absent): a token of ``next_cursor`` or
    an ISO 8601 time with a zone. Anything else is ``invalid_field`` with ``status``: the
    API answers 422, as for ``limit``; a console page 400, a bad address."""
    if raw is None:
        return None
    found = _bare_time(raw) if len(raw) <= MAX_LENGTH else None
    if found is None and len(raw) <= MAX_LENGTH:
        found = _token(raw)
    if found is None:
        raise ApiError("invalid_field", status, "'before' must be the nextBefore of the page "
                       "before, or an ISO 8601 time with a time zone.", field="before")
    return found


def _bare_time(raw: str) -> AttemptCursor | None:
    when = _aware_time(raw)  # Python 3.11 reads a trailing "Z"
    return None if when is None else AttemptCursor(when, None)


def _token(raw: str) -> AttemptCursor | None:
    if not _TOKEN.fullmatch(raw):  # b64decode would skip other characters, not refuse them
        return None
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
    when_text, _, event_id = text.partition("|")
    when = _aware_time(when_text)
    if when is None or not _EVENT_ID.fullmatch(event_id):
        return None
    return AttemptCursor(when, event_id)


def _aware_time(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
