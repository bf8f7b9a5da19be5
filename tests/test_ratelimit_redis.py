"""The Redis rate limiter on a real redis-server: the same rules, exact under concurrency."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from payments.errors import ApiError
from payments.ratelimit import Decision, Limit, RedisRateLimiter, enforce

RESEND = Limit("verification-resend", 1, 60)


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


Scenario = Callable[[aioredis.Redis, str], Awaitable[None]]


@pytest.fixture
def run(redis_url: str) -> Callable[[Scenario], None]:
    """Run ``scenario(client, prefix)`` with a fresh client and a prefix no other test uses."""
    def runner(scenario: Scenario) -> None:
        async def main() -> None:
            client = aioredis.Redis.from_url(redis_url)
            try:
                await scenario(client, f"test:{uuid.uuid4().hex}:")
            finally:
                await client.aclose()
        asyncio.run(main())
    return runner


def test_limit_is_hit_then_lifted_after_the_window(run: Callable[[Scenario], None]) -> None:
    login = Limit("developer-login", 3, 0.5)

    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        limiter = RedisRateLimiter(client, prefix=prefix)
        for _ in range(3):
            assert await limiter.hit(login, "a@example.com") == Decision(True, 0.0)
        refused = await limiter.hit(login, "a@example.com")
        assert not refused.allowed and 0 < refused.retry_after <= 0.5
        await asyncio.sleep(refused.retry_after + 0.02)
        assert (await limiter.hit(login, "a@example.com")).allowed

    run(scenario)


def test_sliding_window_and_exact_retry_after_on_a_given_clock(
    run: Callable[[Scenario], None],
) -> None:
    login = Limit("developer-login", 3, 60)

    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        clock = FakeClock()
        limiter = RedisRateLimiter(client, prefix=prefix, clock=clock)
        start = clock.now
        for offset in (0, 10, 20):
            clock.now = start + offset
            assert (await limiter.hit(login, "a@example.com")).allowed
        clock.now = start + 59
        assert await limiter.hit(login, "a@example.com") == Decision(False, 1.0)
        clock.now = start + 60
        assert (await limiter.hit(login, "a@example.com")).allowed
        clock.now = start + 61
        assert await limiter.hit(login, "a@example.com") == Decision(False, 9.0)

    run(scenario)


def test_resend_cooldown_is_exactly_sixty_seconds(run: Callable[[Scenario], None]) -> None:
    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        clock = FakeClock()
        limiter = RedisRateLimiter(client, prefix=prefix, clock=clock)
        start = clock.now
        assert (await limiter.hit(RESEND, "dev-1")).allowed
        clock.now = start + 10
        assert await limiter.hit(RESEND, "dev-1") == Decision(False, 50.0)
        clock.now = start + 59.5
        assert await limiter.hit(RESEND, "dev-1") == Decision(False, 0.5)
        clock.now = start + 60
        assert await limiter.hit(RESEND, "dev-1") == Decision(True, 0.0)
        assert await limiter.hit(RESEND, "dev-1") == Decision(False, 60.0)

    run(scenario)


def test_resend_cooldown_on_the_server_clock(run: Callable[[Scenario], None]) -> None:
    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        limiter = RedisRateLimiter(client, prefix=prefix)
        assert (await limiter.hit(RESEND, "dev-1")).allowed
        refused = await limiter.hit(RESEND, "dev-1")
        assert not refused.allowed and 59 < refused.retry_after <= 60

    run(scenario)


def test_keys_and_limits_are_independent_and_reset(run: Callable[[Scenario], None]) -> None:
    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        limiter = RedisRateLimiter(client, prefix=prefix)
        assert (await limiter.hit(RESEND, "dev-1")).allowed
        assert not (await limiter.hit(RESEND, "dev-1")).allowed
        assert (await limiter.hit(RESEND, "dev-2")).allowed
        assert (await limiter.hit(Limit("api-key-create", 1, 60), "dev-1")).allowed
        await limiter.reset(RESEND, "dev-1")
        assert (await limiter.hit(RESEND, "dev-1")).allowed

    run(scenario)


def test_refund_takes_back_the_newest_hit(run: Callable[[Scenario], None]) -> None:
    limit = Limit("signup", 2, 60)

    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        clock = FakeClock()
        limiter = RedisRateLimiter(client, prefix=prefix, clock=clock)
        start = clock.now
        assert (await limiter.hit(limit, "a")).allowed
        clock.now = start + 10
        assert (await limiter.hit(limit, "a")).allowed
        await limiter.refund(limit, "a")  # the hit at +10 failed on our side
        clock.now = start + 20
        assert (await limiter.hit(limit, "a")).allowed
        refused = await limiter.hit(limit, "a")  # the hit at 0 still counts
        assert not refused.allowed and refused.retry_after == pytest.approx(40.0)
        await limiter.refund(limit, "nobody")
        assert not await client.exists(limiter.key(limit, "nobody"))

    run(scenario)


def test_storage_is_bounded_and_expires_with_the_window(
    run: Callable[[Scenario], None],
) -> None:
    login = Limit("developer-login", 5, 0.5)

    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        limiter = RedisRateLimiter(client, prefix=prefix)
        key = limiter.key(login, "a@example.com")
        for _ in range(100):
            await limiter.hit(login, "a@example.com")
        assert await client.zcard(key) == 5  # refused hits are not stored
        assert 0 < await client.pttl(key) <= 500
        await asyncio.sleep(0.6)
        assert await client.exists(key) == 0

    run(scenario)


def test_concurrent_hits_across_connections_never_overshoot(
    run: Callable[[Scenario], None], redis_url: str,
) -> None:
    limit = Limit("api-key-management", 50, 60)

    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        clients = [aioredis.Redis.from_url(redis_url) for _ in range(4)]
        limiters = [RedisRateLimiter(c, prefix=prefix) for c in clients]
        try:
            started = time.monotonic()
            decisions = await asyncio.gather(
                *(limiters[n % 4].hit(limit, "dev-1") for n in range(200)))
            elapsed = time.monotonic() - started
        finally:
            for c in clients:
                await c.aclose()
        assert sum(d.allowed for d in decisions) == 50
        assert all(0 < d.retry_after <= 60 for d in decisions if not d.allowed)
        assert elapsed < 5
        assert await client.zcard(limiters[0].key(limit, "dev-1")) == 50

    run(scenario)


def test_enforce_raises_rate_limited(run: Callable[[Scenario], None]) -> None:
    async def scenario(client: aioredis.Redis, prefix: str) -> None:
        limiter = RedisRateLimiter(client, prefix=prefix)
        await enforce(limiter, RESEND, "dev-1")
        with pytest.raises(ApiError) as caught:
            await enforce(limiter, RESEND, "dev-1")
        assert (caught.value.code, caught.value.status) == ("rate_limited", 429)
        assert caught.value.extra == {"retryAfter": 60}
        assert "verification-resend" in caught.value.message

    run(scenario)
