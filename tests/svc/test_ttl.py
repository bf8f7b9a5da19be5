"""Grant lifetimes as typed on the command line."""

from __future__ import annotations

import pytest

from svc.cli import main
from svc.ttl import parse_ttl


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("30m", 1800), ("2h", 7200), ("7d", 604800), (" 2H ", 7200), ("1d", 86400),
])
def test_lifetimes(text: str, seconds: int) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "h", "2x", "1.5h", "-1h", "0m", "2 h", "2hours",
                                  "1h30m", "99999999d"])
def test_bad_lifetimes_say_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 90s, 30m, 2h or 7d"):
        parse_ttl(text)


def test_bad_ttl_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["auth", "device", "--ttl", "2weeks", "--api-url", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "argument --ttl: '2weeks' is not a lifetime" in err
