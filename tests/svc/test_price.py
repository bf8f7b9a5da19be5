"""``svc price`` and the USD/atomic conversion under it: exact, 6 decimals, no floats."""

from __future__ import annotations

import json

import pytest

from svc.amounts import MAX_ATOMIC, AmountError, atomic_to_usd, parse_atomic, usd_to_atomic
from svc.cli import main
from svc.errors import ExitCode


@pytest.mark.parametrize(("usd", "atomic"), [
    ("0", 0), ("0.0", 0), ("1", 1_000_000), ("0.01", 10_000), ("0.05", 50_000),
    ("0.1", 100_000), ("0.3", 300_000),  # 0.1 and 0.3 are inexact as floats
    ("0.000001", 1), ("12.5", 12_500_000), ("1.999999", 1_999_999),
    ("$2.50", 2_500_000), (" 7 ", 7_000_000), ("0001.10", 1_100_000),
    ("9007199254.740993", 9_007_199_254_740_993),  # above 2**53: a float would round it
])
def test_usd_to_atomic_is_exact(usd: str, atomic: int) -> None:
    assert usd_to_atomic(usd) == atomic
    assert usd_to_atomic(atomic_to_usd(atomic)) == atomic


@pytest.mark.parametrize(("usd", "words"), [
    ("0.0000001", "7 decimals"), ("1.1234567", "7 decimals"), ("0.0100000", "7 decimals"),
    ("-1", "negative"), ("-0.01", "negative"), ("+1", "not a USD amount"),
    ("abc", "not a USD amount"), ("", "not a USD amount"), (".5", "not a USD amount"),
    ("1.", "not a USD amount"), ("1e3", "not a USD amount"), ("1,000", "not a USD amount"),
    ("1_000", "not a USD amount"), ("NaN", "not a USD amount"), ("inf", "not a USD amount"),
    ("\u0661", "not a USD amount"),  # an Arabic-Indic digit: isdigit() but not ASCII
    ("0x10", "not a USD amount"), ("1.2.3", "not a USD amount"),
    ("9223372036854.775808", "larger than the service accepts"),
])
def test_usd_refusals_say_why(usd: str, words: str) -> None:
    with pytest.raises(AmountError, match=words):
        usd_to_atomic(usd)


@pytest.mark.parametrize(("atomic", "usd"), [
    (0, "0.000000"), (1, "0.000001"), (10_000, "0.010000"), (1_000_000, "1.000000"),
    (123_456_789, "123.456789"), (MAX_ATOMIC, "9223372036854.775807"),
])
def test_atomic_to_usd_always_has_six_decimals(atomic: int, usd: str) -> None:
    assert atomic_to_usd(atomic) == usd
    assert parse_atomic(str(atomic)) == atomic


@pytest.mark.parametrize("text", ["-5", "5.0", "1e6", "abc", "", " ", "½", str(MAX_ATOMIC + 1)])
def test_atomic_refusals(text: str) -> None:
    with pytest.raises(AmountError):
        parse_atomic(text)


def test_price_command_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "0.05"]) == ExitCode.OK
    assert capsys.readouterr().out == "0.050000 USD = 50000 atomic units\n"
    assert main(["price", "--atomic", "1234567", "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == {"usd": "1.234567", "atomic": "1234567"}
    assert main(["price", "0.1", "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["atomic"] == "100000"


@pytest.mark.parametrize("argv", [
    ["price", "0.0000001"], ["price", "-1"], ["price", "ten"], ["price", "--atomic", "-1"],
    ["price", "--atomic", "0.5"], ["price"], ["price", "1", "--atomic", "1"],
])
def test_price_command_refuses_with_exit_2(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("svc: ") and len(err.strip()) > 20
    assert main([*argv, "--json"]) == ExitCode.USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["code"], error["exitCode"]) == ("usage", 2)
