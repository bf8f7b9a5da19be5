"""The client's pure decisions, without a server: what is retried, how long to wait,
what an idempotency key looks like, and that a key is never echoed."""

from __future__ import annotations

import asyncio
import email.utils
import re
import time

import httpx
import pytest

from svc.backend import AsyncBackendClient, BackendClient, RetryPolicy, new_idempotency_key
from svc.backend_errors import error_from, is_retryable
from svc.backend_errors import retry_after as seconds_asked

KEY = "zpk_" + "a1" * 20


def answer(status: int, body: bytes = b"", retry_after: str | None = None) -> httpx.Response:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return httpx.Response(status, content=body, headers=headers,
                          request=httpx.Request("POST", "http://api.example/api/orders"))


@pytest.mark.parametrize(("status", "code", "retryable"), [
    (429, "rate_limited", True), (502, None, True), (503, "service_unavailable", True),
    (504, None, True), (500, "internal_error", False), (400, "invalid_json", False),
    (401, "valid_api_key_required", False), (403, "api_key_scope_missing", False),
    (404, "not_found", False), (409, "IDEMPOTENCY_KEY_REUSED", False),
    (422, "invalid_amount", False)])
def test_only_transient_answers_are_retryable(status: int, code: str | None,
                                              retryable: bool) -> None:
    assert is_retryable(status, code) is retryable


def test_waits_grow_follow_retry_after_and_are_capped() -> None:
    policy = RetryPolicy(retries=3, backoff=0.2, max_delay=5.0)
    assert [policy.delay(n, None) for n in range(3)] == [0.2, 0.4, 0.8]
    assert policy.delay(0, answer(503, retry_after="2")) == 2.0
    assert policy.delay(0, answer(429, retry_after="3600")) == 5.0
    assert policy.delay(0, answer(503, b'{"retryAfter": 1}')) == 1.0
    assert policy.delay(2, answer(503, retry_after="soon")) == 0.8
    later = email.utils.formatdate(time.time() + 3, usegmt=True)
    assert 1.5 < (seconds_asked(answer(503, retry_after=later)) or 0) <= 3.0


def test_an_answer_that_is_not_the_services_json_has_no_code() -> None:
    error = error_from(answer(502, b"<html>Bad Gateway</html>"), "k:1", KEY)
    assert (error.status, error.code, error.retryable, error.body) == (502, None, True, {})
    assert error.idempotency_key == "k:1" and "api.example" in error.message
    echoed = error_from(answer(400, f'{{"code":"x","message":"bad {KEY}"}}'.encode()),
                        None, KEY)
    assert KEY not in str(echoed) and echoed.message == "bad zpk_…"


def test_idempotency_keys_have_the_spec_shape() -> None:
    key = new_idempotency_key("game", "retry")
    assert re.fullmatch(r"game:retry:[0-9a-f-]{36}", key)
    assert key != new_idempotency_key("game", "retry")
    for prefix, slug in (("", "retry"), ("game", ""), ("g" * 200, "retry")):
        with pytest.raises(ValueError, match="prefix and a product slug"):
            new_idempotency_key(prefix, slug)


def test_a_client_needs_a_zpk_key_and_never_shows_it() -> None:
    for wrong in ("zcli_" + "b" * 40, "", "zpk" + "c" * 40):
        with pytest.raises(ValueError, match="zpk_ secret") as refused:
            BackendClient("http://127.0.0.1:9", wrong)
        assert wrong not in str(refused.value) or not wrong
    with BackendClient("http://127.0.0.1:9/", KEY) as client:
        assert KEY not in repr(client) and client.api_url == "http://127.0.0.1:9"
    async_client = AsyncBackendClient("http://127.0.0.1:9", KEY)
    assert KEY not in repr(async_client)
    asyncio.run(async_client.aclose())
