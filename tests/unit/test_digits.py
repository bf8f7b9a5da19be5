"""Whole numbers from outside are ASCII digits only (payments.digits, svc.digits,
svc.amounts)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from examples.reference_app.catalogue import Catalogue, CatalogueError
from payments.digits import is_digits, parse_digits
from payments.ledger.cors import Cors
from router.hosts import strip_port
from svc import digits as sdk_digits
from svc.amounts import is_atomic_text
from svc.backend_errors import retry_after
from svc.ttl import parse_ttl
from svc.webhooks import WebhookVerificationError, parse_event
from tests.webhooks.test_units import event

# Each is true for str.isdigit(): int() refuses the superscripts (a ValueError, so a 500 in
# a handler) and reads the others as numbers, in spellings that are not our wire's.
NOT_OURS = ["\u00b2", "1\u00b3", "\u0661\u0660\u0660", "\u0967", "\uff11\uff10", "\U0001d7d9"]


@pytest.mark.parametrize("text", [*NOT_OURS, "", " 1", "1 ", "+1", "-1", "1_0", "0x1", "1.0"])
def test_only_ascii_digits_are_digits(text: str) -> None:
    assert not is_digits(text) and parse_digits(text, 10) is None and not is_atomic_text(text)
    assert not sdk_digits.is_digits(text) and sdk_digits.parse_digits(text, 10) is None


def test_ascii_digits_parse_within_their_bound() -> None:
    assert is_digits("0123456789") and is_atomic_text("0123456789")
    assert parse_digits("007", 3) == 7
    assert parse_digits("1000", 3) is None
    assert parse_digits("9" * 5000, 78) is None  # int() itself would raise past 4300 digits
    assert sdk_digits.is_digits("0123456789") and sdk_digits.parse_digits("007", 3) == 7
    assert sdk_digits.parse_digits("1000", 3) is None
    assert sdk_digits.parse_digits("9" * 5000, 78) is None


def test_a_host_port_is_stripped_only_when_it_is_ascii_digits() -> None:
    assert strip_port("game.apps.localhost:8000") == "game.apps.localhost"
    assert strip_port("game.apps.localhost:\u00b2") == "game.apps.localhost:\u00b2"


def test_the_sdk_refuses_unicode_digits_without_crashing() -> None:
    with pytest.raises(ValueError, match="not a lifetime"):
        parse_ttl("\u0661\u0660m")
    request = httpx.Request("GET", "http://api.example/")
    # "\u00b2" arrives as Latin-1 byte 0xB2; float() of it raised instead of giving up
    odd = httpx.Response(503, headers=[(b"retry-after", b"\xb2")], request=request)
    assert retry_after(odd) is None
    for amount in ("\u00b2", "\u0661\u0660"):
        body: dict[str, Any] = event()
        body["product"]["priceAtomic"] = amount
        with pytest.raises(WebhookVerificationError, match="not an integer string"):
            parse_event(body)


# Starlette reads headers as Latin-1, whose only decimal digits are ASCII; Cors is a plain
# decision over text all the same, so it holds for any caller.
@pytest.mark.parametrize("port", ["\u0663\u0660\u0660\u0660", "\uff13\uff10\uff10\uff10",
                                  "3\u0660"])
def test_a_cors_origin_port_is_ascii_digits(port: str) -> None:
    cors = Cors("https://portal.example.com", "apps.example.com", "https")
    assert cors.plausible("http://localhost:3000")
    assert cors.plausible("https://game.apps.example.com:8443")
    assert not cors.plausible(f"http://localhost:{port}")
    assert not cors.plausible(f"http://127.0.0.1:{port}")
    assert not cors.plausible(f"https://game.apps.example.com:{port}")


def _catalogue(price: object) -> Catalogue:
    return Catalogue.from_json({"products": [{"slug": "retry", "name": "Retry",
                                              "priceAtomic": price}]})


@pytest.mark.parametrize("price", ["\u00b2", "\u0661\u0660", "1_0", " 10", "9" * 5000, True])
def test_a_catalogue_price_is_ascii_digits(price: object) -> None:
    assert _catalogue("10000").items[0].price_atomic == _catalogue(10000).items[0].price_atomic
    with pytest.raises(CatalogueError, match="priceAtomic is not an integer string"):
        _catalogue(price)


def test_operator_commands_refuse_integer_flags_in_other_digits(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``svc-server dev --port`` (and svc-ops, the cluster) read flags as the wire reads
    numbers: argparse's ``type=int`` would have taken U+0668 U+0660 U+0660 U+0660 as 8000."""
    from router.cli import main as server_main
    with pytest.raises(SystemExit) as refused:
        server_main(["dev", "--port", "\u0668\u0660\u0660\u0660"])
    assert refused.value.code == 2
    assert "is not a whole number" in capsys.readouterr().err
