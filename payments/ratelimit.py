"""Rate limits for developer auth, key and webhook management, and grant approval (spec 8).

A limit allows at most ``max_hits`` hits per key in any window of ``per_seconds`` (a sliding
log: exact, and for the small limits we use a few timestamps per key). Refused hits are not
recorded, so a client that waits ``retry_after`` seconds is let through. The in-process
limiter serves a single instance; Redis serves many, atomically, on the server's clock.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis

from payments.errors import ApiError


@dataclass(frozen=True)
class Limit:
    name: str
    max_hits: int
    per_seconds: float

    def __post_init__(self) -> None:
        if self.max_hits < 1 or not self.per_seconds > 0:
            raise ValueError(f"limit {self.name!r} needs max_hits >= 1 and per_seconds > 0")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: float  # seconds until a hit would be allowed; 0 when this one was


class RateLimiter(Protocol):
    async def hit(self, limit: Limit, key: str) -> Decision:
        """Record a hit for ``key`` under ``limit`` if the limit allows it."""

    async def reset(self, limit: Limit, key: str) -> None:
        """Forget the hits of ``key`` (e.g. after a successful login)."""

    async def refund(self, limit: Limit, key: str) -> None:
        """Take back the newest hit of ``key``: its request failed on our side. The newest,
        not necessarily the caller's own when hits race: the count is what matters."""


async def enforce(limiter: RateLimiter, limit: Limit, key: str) -> None:
    """Record a hit or raise the 429 ``rate_limited`` error; ``retryAfter`` feeds Retry-After."""
    decision = await limiter.hit(limit, key)
    if decision.allowed:
        return
    seconds = max(1, math.ceil(decision.retry_after))
    raise ApiError(
        "rate_limited", 429,
        f"Too many {limit.name} requests: at most {_count(limit.max_hits, 'request')} "
        f"per {_count(limit.per_seconds, 'second')}. Retry in {_count(seconds, 'second')}.",
        retryAfter=seconds,
    )


def _count(n: float, unit: str) -> str:
    return f"{n:g} {unit}" + ("" if n == 1 else "s")


@dataclass
class _Log:
    window: float
    hits: deque[float]


class InMemoryRateLimiter:
    """One process's limiter. Keys idle for a whole window are swept, so memory follows the
    number of keys active within their window (at most twice that between sweeps)."""

    _MIN_SWEEP = 1024

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._logs: dict[tuple[str, str], _Log] = {}
        self._lock = threading.Lock()
        self._sweep_at = self._MIN_SWEEP

    def __len__(self) -> int:
        """Keys currently tracked."""
        return len(self._logs)

    async def hit(self, limit: Limit, key: str) -> Decision:
        with self._lock:
            now = self._clock()
            log = self._logs.get((limit.name, key))
            if log is None:
                log = self._logs[limit.name, key] = _Log(limit.per_seconds, deque())
                self._maybe_sweep(now)
            log.window = limit.per_seconds
            return _hit_log(log.hits, limit, now)

    async def reset(self, limit: Limit, key: str) -> None:
        with self._lock:
            self._logs.pop((limit.name, key), None)

    async def refund(self, limit: Limit, key: str) -> None:
        with self._lock:
            log = self._logs.get((limit.name, key))
            if log is not None and log.hits:
                log.hits.pop()

    def _maybe_sweep(self, now: float) -> None:
        if len(self._logs) < self._sweep_at:
            return
        idle = [k for k, log in self._logs.items() if not log.hits or
                log.hits[-1] <= now - log.window]
        for k in idle:
            del self._logs[k]
        self._sweep_at = max(self._MIN_SWEEP, 2 * len(self._logs))


def _hit_log(hits: deque[float], limit: Limit, now: float) -> Decision:
    """The sliding-log decision; a hit at ``t`` counts against ``[t, t + per_seconds)``."""
    while hits and hits[0] <= now - limit.per_seconds:
        hits.popleft()
    if len(hits) < limit.max_hits:
        hits.append(now)
        return Decision(True, 0.0)
    return Decision(False, hits[0] + limit.per_seconds - now)


# The same sliding log in a sorted set, scores in microseconds. ARGV: max hits, window (us),
# a unique member suffix, and "now" in microseconds or "" for the server's TIME.
_HIT_SCRIPT = """
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local max_hits = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < max_hits then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"""


class RedisRateLimiter:
    """Shared by every instance: one Lua script per hit, so concurrent hits cannot overshoot.

    Time is the Redis server's ``TIME`` (the one clock all processes agree on) unless
    ``clock`` is given; a given clock must be wall time shared by every caller (tests use a
    fake one). Keys expire a window after their last allowed hit.
    """

    def __init__(self, client: aioredis.Redis, prefix: str = "svc:rl:",
                 clock: Callable[[], float] | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self._clock = clock
        self._script = client.register_script(_HIT_SCRIPT)

    def key(self, limit: Limit, key: str) -> str:
        return f"{self._prefix}{limit.name}:{key}"

    async def hit(self, limit: Limit, key: str) -> Decision:
        now = "" if self._clock is None else str(round(self._clock() * 1_000_000))
        window = round(limit.per_seconds * 1_000_000)
        allowed, retry_us = await self._script(
            keys=[self.key(limit, key)],
            args=[limit.max_hits, window, secrets.token_hex(8), now],
        )
        return Decision(bool(allowed), int(retry_us) / 1_000_000)

    async def reset(self, limit: Limit, key: str) -> None:
        await self._client.delete(self.key(limit, key))

    async def refund(self, limit: Limit, key: str) -> None:
        await self._client.zpopmax(self.key(limit, key))  # scores are the hits' times
