"""The in-process rate limiter on a fake clock, and the 429 error ``enforce`` raises."""

from __future__ import annotations

import asyncio

import pytest

from payments.errors import ApiError
from payments.ratelimit import Decision, InMemoryRateLimiter, Limit, enforce

LOGIN = Limit("developer-login", 3, 60)
RESEND = Limit("verification-resend", 1, 60)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def hit(limiter: InMemoryRateLimiter, limit: Limit, key: str) -> Decision:
    return asyncio.run(limiter.hit(limit, key))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limiter(clock: FakeClock) -> InMemoryRateLimiter:
    return InMemoryRateLimiter(clock=clock)


def test_limit_is_hit_then_lifted_as_the_window_slides(
    limiter: InMemoryRateLimiter, clock: FakeClock,
) -> None:
    start = clock.now
    for offset in (0, 10, 20):
        clock.now = start + offset
        assert hit(limiter, LOGIN, "a@example.com") == Decision(True, 0.0)
    clock.now = start + 59
    assert hit(limiter, LOGIN, "a@example.com") == Decision(False, 1.0)
    clock.now = start + 60  # the hit at 0 has left the window
    assert hit(limiter, LOGIN, "a@example.com").allowed
    clock.now = start + 61  # now the hit at 10 is the oldest
    assert hit(limiter, LOGIN, "a@example.com") == Decision(False, 9.0)


def test_resend_cooldown_is_exactly_sixty_seconds(
    limiter: InMemoryRateLimiter, clock: FakeClock,
) -> None:
    start = clock.now
    assert hit(limiter, RESEND, "dev-1").allowed
    clock.now = start + 10
    assert hit(limiter, RESEND, "dev-1") == Decision(False, 50.0)
    clock.now = start + 59.5
    assert hit(limiter, RESEND, "dev-1") == Decision(False, 0.5)
    clock.now = start + 60
    assert hit(limiter, RESEND, "dev-1") == Decision(True, 0.0)
    assert hit(limiter, RESEND, "dev-1") == Decision(False, 60.0)


def test_refused_hits_do_not_extend_the_wait(
    limiter: InMemoryRateLimiter, clock: FakeClock,
) -> None:
    start = clock.now
    assert hit(limiter, RESEND, "dev-1").allowed
    for second in range(1, 60):
        clock.now = start + second
        assert hit(limiter, RESEND, "dev-1") == Decision(False, 60.0 - second)
    clock.now = start + 60
    assert hit(limiter, RESEND, "dev-1").allowed


def test_keys_and_limits_are_independent(limiter: InMemoryRateLimiter) -> None:
    assert hit(limiter, RESEND, "dev-1").allowed
    assert not hit(limiter, RESEND, "dev-1").allowed
    assert hit(limiter, RESEND, "dev-2").allowed
    assert hit(limiter, Limit("api-key-create", 1, 60), "dev-1").allowed


def test_reset_forgets_the_hits(limiter: InMemoryRateLimiter) -> None:
    assert hit(limiter, RESEND, "dev-1").allowed
    asyncio.run(limiter.reset(RESEND, "dev-1"))
    assert hit(limiter, RESEND, "dev-1").allowed


def test_refund_takes_back_the_newest_hit(limiter: InMemoryRateLimiter,
                                         clock: FakeClock) -> None:
    limit = Limit("signup", 2, 60)
    start = clock.now
    assert hit(limiter, limit, "a").allowed
    clock.now = start + 10
    assert hit(limiter, limit, "a").allowed
    asyncio.run(limiter.refund(limit, "a"))  # the hit at +10 failed on our side
    clock.now = start + 20
    assert hit(limiter, limit, "a").allowed
    assert hit(limiter, limit, "a") == Decision(False, 40.0)  # the hit at 0 still counts
    asyncio.run(limiter.refund(limit, "nobody"))  # nothing to give back: nothing happens
    assert len(limiter) == 1


def test_idle_keys_are_pruned_and_active_ones_kept(
    limiter: InMemoryRateLimiter, clock: FakeClock,
) -> None:
    long = Limit("grant-approval", 1, 10_000)
    assert hit(limiter, long, "kept").allowed
    short = Limit("developer-login", 5, 1)

    async def many_keys() -> int:
        largest = 0
        for n in range(20_000):  # ten new keys a second, each idle after a second
            clock.now += 0.1
            assert (await limiter.hit(short, f"ip-{n}")).allowed
            largest = max(largest, len(limiter))
        return largest

    assert asyncio.run(many_keys()) <= 1024
    refused = hit(limiter, long, "kept")
    assert not refused.allowed and refused.retry_after == pytest.approx(8000.0)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_hits"):
        Limit("nothing", 0, 60)
    with pytest.raises(ValueError, match="per_seconds"):
        Limit("never", 1, 0)


def test_enforce_lets_allowed_hits_through(limiter: InMemoryRateLimiter) -> None:
    asyncio.run(enforce(limiter, RESEND, "dev-1"))


def test_enforce_raises_rate_limited_with_retry_after_rounded_up(
    limiter: InMemoryRateLimiter, clock: FakeClock,
) -> None:
    asyncio.run(enforce(limiter, RESEND, "dev-1"))
    clock.now += 9.5
    with pytest.raises(ApiError) as caught:
        asyncio.run(enforce(limiter, RESEND, "dev-1"))
    error = caught.value
    assert (error.code, error.status, error.extra) == ("rate_limited", 429, {"retryAfter": 51})
    assert error.message == ("Too many verification-resend requests: at most 1 request per "
                             "60 seconds. Retry in 51 seconds.")
    clock.now += 50.25  # 0.25 s left: still at least one second
    with pytest.raises(ApiError) as caught:
        asyncio.run(enforce(limiter, RESEND, "dev-1"))
    assert caught.value.extra == {"retryAfter": 1}
    assert caught.value.message.endswith("Retry in 1 second.")
