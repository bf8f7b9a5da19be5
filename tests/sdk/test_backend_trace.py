"""``svc --verbose`` traces the backend clients' requests, the async one as the sync one:
one line per request from the one tracer in svc/trace.py, retries included, and never the
``zpk_`` key that travels in ``Authorization`` nor a secret in a URL."""

from __future__ import annotations

import io
import re

import pytest

from svc.backend import BackendError, ServiceUnreachable
from svc.trace import tracing
from tests.sdk.conftest import Connect, SdkWorld

TRACE = re.compile(r"^svc: (GET|POST) (\S+) -> (\d{3}|no answer \(\w+\)) in \d+ ms$")
WEBHOOK_SECRET = "zwhsec_" + "s3cr3t" * 4


def traced(text: str) -> list[tuple[str, str, str]]:
    lines = text.splitlines()
    found = [TRACE.match(line) for line in lines]
    assert all(found), lines  # nothing but trace lines
    return [(m[1], m[2], m[3]) for m in found if m]


def calls(world: SdkWorld, backend: Connect) -> str:
    """An order created and read back, and a lookup with a secret in its path (refused)."""
    with backend() as client:
        order = client.create_order(product_id=world.products["retry"].id,
                                    developer_user_id="user-1")
        client.get_order(order.id)
        with pytest.raises(BackendError):
            client.get_delivery(WEBHOOK_SECRET)
    return order.id


def test_each_request_is_one_line_and_none_without_verbose(
        world: SdkWorld, backend: Connect, capfd: pytest.CaptureFixture[str]) -> None:
    stream = io.StringIO()
    with tracing(stream):
        order_id = calls(world, backend)
    api = world.router.url
    assert traced(stream.getvalue()) == [
        ("POST", f"{api}/api/orders", "201"), ("GET", f"{api}/api/orders/{order_id}", "200"),
        ("GET", f"{api}/api/deliveries/zwhsec_[redacted]", "404")]
    shown = stream.getvalue()
    for secret in (world.api_key, "zpk_", WEBHOOK_SECRET, "s3cr3t", "Bearer", "uthorization"):
        assert secret not in shown, secret
    with tracing(None):  # what the CLI does without --verbose
        calls(world, backend)
    assert "svc: " not in "".join(capfd.readouterr())


def test_requests_without_an_answer_are_traced_per_try(backend: Connect) -> None:
    stream = io.StringIO()
    with tracing(stream), pytest.raises(ServiceUnreachable):
        backend(url="http://127.0.0.1:9", retries=1, max_retry_delay=0).get_order("zord_x")
    assert traced(stream.getvalue()) == [
        ("GET", "http://127.0.0.1:9/api/orders/zord_x", "no answer (ConnectError)")] * 2
