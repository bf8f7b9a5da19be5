"""``svc app show``'s text (svc.commands.apps.app_lines): the allowlist line of spec 2.2
(``recipientAllowlistStatus``, "shown as Allowlist"), and why payments are refused when the
status is not ``allowed``."""

from __future__ import annotations

from typing import Any

from svc.commands.apps import app_lines

PAY_TO = "0x" + "ab" * 20


def app(**fields: Any) -> dict[str, Any]:
    return {"slug": "game", "id": "zapp_1", "name": "Game", "type": "Game",
            "status": "active", "payTo": PAY_TO, "payToStatus": "approved",
            "recipientAllowlistStatus": "allowed", "portalListingStatus": "listed",
            "runtime": {"url": "https://game.apps.example", "status": "active"}, **fields}


def allowlist(lines: list[str]) -> list[str]:
    """The allowlist line and the lines that explain it, up to the runtime line."""
    start = next(i for i, line in enumerate(lines) if line.startswith("  allowlist: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("  runtime: "))
    assert lines[start - 1].startswith("  payTo: ")  # shown beside the address it is about
    return lines[start:end]


def test_an_allowed_recipient_is_one_line() -> None:
    assert allowlist(app_lines(app())) == ["  allowlist: allowed"]


def test_not_allowed_says_payments_are_refused_until_operators_add_it() -> None:
    status, why = allowlist(app_lines(app(recipientAllowlistStatus="not_allowed")))
    assert status == "  allowlist: not allowed"
    assert "refused with RECIPIENT_NOT_ALLOWLISTED" in why
    assert "svc-ops allowlist add" in why


def test_unknown_says_it_is_pending_the_check() -> None:
    status, why = allowlist(app_lines(app(recipientAllowlistStatus="unknown")))
    assert status == "  allowlist: unknown, pending check"
    assert "refused with RECIPIENT_NOT_ALLOWLISTED" in why and "next cycle" in why
    assert "svc-ops allowlist add" in why


def test_without_pay_to_there_is_nothing_to_check() -> None:
    (line,) = allowlist(app_lines(app(payTo=None, payToStatus="unbound",
                                      recipientAllowlistStatus="unknown")))
    assert line.startswith("  allowlist: unknown (") and "APP_PAY_TO_INVALID" in line
