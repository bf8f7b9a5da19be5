"""What an attempt's outcome means for the outbox row: pure decisions, no I/O.

The schedule of ARCHITECTURE.md: the first request at once, then retries 5 s, 5 min,
30 min, 2 h, 5 h, 10 h and 10 h after each failure (8 requests in all). Tests pass their
own delays; the number of requests is always ``len(delays) + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from payments.ledger.models import AttemptStatus

DEFAULT_DELAYS: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)
# An origin that could not be reached, or did not answer within the timeout (spec 6 item 6).
UNREACHABLE = 522


@dataclass(frozen=True)
class Outcome:
    """One request's result. ``status`` is the HTTP status, or 522 when there was no answer;
    ``error`` is a short class (``timeout``, ``connect_failed``, ``url_refused:<rule>``...)
    and never carries a header, a body or a secret."""

    status: int | None
    error: str | None = None
    contacted: bool = True  # False when the URL policy refused before any connection

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class Next:
    status: AttemptStatus
    next_attempt_at: datetime


@dataclass(frozen=True)
class RetrySchedule:
    delays: tuple[float, ...] = DEFAULT_DELAYS

    def __post_init__(self) -> None:
        if any(d < 0 for d in self.delays):
            raise ValueError("retry delays cannot be negative")

    @property
    def max_requests(self) -> int:
        return len(self.delays) + 1

    def after(self, outcome: Outcome, requests_made: int, now: datetime) -> Next:
        """The row's state after its ``requests_made``-th request ended with ``outcome``.

        Every answer that is not 2xx is retried, not only 5xx: a 404 or 401 usually means a
        receiver being deployed or a secret being rotated, and the schedule is bounded."""
        if outcome.delivered:
            return Next(AttemptStatus.DELIVERED, now)
        if requests_made >= self.max_requests:
            return Next(AttemptStatus.FAILED, now)
        delay = self.delays[max(0, requests_made - 1)]
        return Next(AttemptStatus.PENDING, now + timedelta(seconds=delay))
