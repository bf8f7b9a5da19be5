"""The webhook-attempts list's ``before``: the opaque cursor it answers as ``nextBefore``,
and the bare ISO 8601 time it took before the cursor (payments.webhooks.attempt_cursor)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest

from payments.errors import ApiError
from payments.webhooks.attempt_cursor import AttemptCursor, attempt_cursor, next_cursor

WHEN = datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=UTC)
EVENT = "zevt_" + "ab" * 15


def token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_a_cursor_reads_back_as_the_time_and_event_it_names() -> None:
    made = next_cursor(WHEN, EVENT)
    assert made.isascii() and "=" not in made and "|" not in made  # one query-safe word
    assert attempt_cursor(made) == AttemptCursor(WHEN, EVENT)
    whole_second = WHEN.replace(microsecond=0)
    assert attempt_cursor(next_cursor(whole_second, EVENT)) == AttemptCursor(whole_second,
                                                                             EVENT)


def test_a_bare_time_with_a_zone_is_still_read_as_before_the_cursor() -> None:
    assert attempt_cursor("2026-11-27T12:00:00.123456Z") == AttemptCursor(WHEN, None)
    east = attempt_cursor("2026-11-27T14:00:00.123456+02:00")
    assert east is not None and east.created_at == WHEN and east.event_id is None
    assert attempt_cursor(None) is None


@pytest.mark.parametrize("raw", [
    "", "yesterday", "2026-11-27T12:00:00",  # no zone: which instant is unknown
    "\u0662\u0660\u0662\u0666-11-27T12:00:00Z",  # Arabic-Indic digits
    token(f"{WHEN.isoformat()}|zwha_{'ab' * 15}"),  # not an event id
    token(f"{WHEN.isoformat()}|"), token(f"2026-11-27T12:00:00|{EVENT}"),  # naive time
    token(f"{WHEN.isoformat()}|{EVENT}") + "!", token("\u00e9|x"),
    next_cursor(WHEN, EVENT)[:40], "Zm9v" * 60,  # cut in half; longer than any cursor
])
def test_anything_else_is_invalid_field_naming_before(raw: str) -> None:
    with pytest.raises(ApiError) as refused:
        attempt_cursor(raw)
    assert (refused.value.code, refused.value.status) == ("invalid_field", 422)
    assert refused.value.extra.get("field") == "before"
    with pytest.raises(ApiError) as page:  # a console page: a bad address
        attempt_cursor(raw, status=400)
    assert page.value.status == 400


def test_the_cursor_keeps_the_instant_whatever_zone_the_time_came_in() -> None:
    shifted = WHEN.astimezone(timezone(timedelta(hours=-5)))
    read = attempt_cursor(next_cursor(shifted, EVENT))
    assert read is not None and read.created_at == WHEN
