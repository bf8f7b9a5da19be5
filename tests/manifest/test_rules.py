"""Every rule of the runtime manifest (spec 2.8), each spelling, as pure functions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from manifest.rules import Check, Expected, check_document, is_concrete_path, same_origin
from tests.manifest.origin import PAY_TO, good_manifest

APP_ID = "zapp_0123456789abcdef0123456789abcd"
ORIGIN = "https://game.example.com"
EXPECTED = Expected(app_id=APP_ID, slug="space", pay_to=PAY_TO, app_path="/play",
                    entry_path="/", runtime_origin=ORIGIN)


def manifest(**changes: Any) -> dict[str, Any]:
    document = good_manifest(APP_ID, "space", appPath="/play")
    for key, value in changes.items():
        if value is ...:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def by_id(checks: list[Check]) -> dict[str, Check]:
    return {c.id: c for c in checks}


def failed(checks: list[Check]) -> list[str]:
    return [c.id for c in checks if not c.passed]


def test_a_good_manifest_passes_every_rule() -> None:
    checks = check_document(manifest(runtimeOrigin=ORIGIN), EXPECTED)
    assert [c.id for c in checks] == ["appId", "slug", "payTo", "webhookPath",
                                      "paymentSubmittedPath", "appPath", "entryPath",
                                      "runtimeOrigin"]
    assert failed(checks) == []
    assert all(c.fix == "" for c in checks)
    assert by_id(checks)["appPath"].seen == "/play"


@pytest.mark.parametrize(("canonical", "spelling"), [
    ("appId", "app_id"), ("slug", "appSlug"), ("slug", "app_slug"), ("payTo", "pay_to"),
    ("webhookPath", "webhook_path"), ("paymentSubmittedPath", "payment_submitted_path"),
    ("appPath", "app_path"), ("entryPath", "entry_path"),
])
def test_every_accepted_spelling(canonical: str, spelling: str) -> None:
    document = manifest()
    document[spelling] = document.pop(canonical)
    assert failed(check_document(document, EXPECTED)) == []


def test_all_snake_case_at_once() -> None:
    document = {"app_id": APP_ID, "app_slug": "space", "pay_to": PAY_TO.lower(),
                "webhook_path": "/api/svc/webhook",
                "payment_submitted_path": "/api/svc/payment-submitted",
                "app_path": "/play", "entry_path": "/"}
    assert failed(check_document(document, EXPECTED)) == []


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("appId", "zapp_someoneelse", APP_ID),
    ("slug", "other-game", "space"),
    ("payTo", "0x" + "1" * 40, PAY_TO),
    ("webhookPath", "/webhook", "/api/svc/webhook"),
    ("paymentSubmittedPath", "/api/svc/payment_submitted", "/api/svc/payment-submitted"),
    ("appPath", "/", "/play"),
    ("entryPath", "/play", "/"),
])
def test_each_wrong_value_fails_only_its_rule(field: str, value: str, expected: str) -> None:
    checks = check_document(manifest(**{field: value}), EXPECTED)
    assert failed(checks) == [field]
    check = by_id(checks)[field]
    assert (check.seen, check.expected) == (value, expected)
    assert expected in check.fix


@pytest.mark.parametrize("field", ["appId", "slug", "payTo", "webhookPath",
                                   "paymentSubmittedPath", "appPath"])
def test_each_missing_field_fails(field: str) -> None:
    checks = check_document(manifest(**{field: ...}), EXPECTED)
    assert failed(checks) == [field]
    check = by_id(checks)[field]
    assert check.seen is None
    assert check.fix.startswith(f'Add "{field}"')


@pytest.mark.parametrize("field", ["appPath", "entryPath"])
def test_a_missing_path_is_the_default_root(field: str) -> None:
    """Spec 2.8: appPath and entryPath default to "/": left out, they pass when the saved
    path is "/" and fail, saying what to add, when it is anything else."""
    at_root = replace(EXPECTED, app_path="/", entry_path="/")
    document = manifest(**{"appPath": "/", field: ...})
    checks = check_document(document, at_root)
    assert failed(checks) == []
    assert (by_id(checks)[field].seen, by_id(checks)[field].expected) == (None, "/")
    saved = "/play"
    elsewhere = replace(at_root, **{"app_path" if field == "appPath" else "entry_path": saved})
    checks = check_document(document, elsewhere)
    assert failed(checks) == [field]
    check = by_id(checks)[field]
    assert (check.seen, check.expected) == (None, saved)
    assert check.fix.startswith(f'Add "{field}": "/play" to the manifest (also accepted:')


def test_a_manifest_without_both_paths_verifies_at_the_root() -> None:
    at_root = replace(EXPECTED, app_path="/", entry_path="/")
    assert failed(check_document(manifest(appPath=..., entryPath=...), at_root)) == []


@pytest.mark.parametrize("field", ["appPath", "app_path", "entryPath", "entry_path"])
def test_null_paths_fail_with_the_reason(field: str) -> None:
    canonical = "appPath" if field.startswith("app") else "entryPath"
    document = manifest(**{canonical: ...})
    document[field] = None
    check = by_id(check_document(document, EXPECTED))[canonical]
    assert not check.passed and check.seen == "null"
    assert "null" in check.fix and "runtime root" in check.fix


@pytest.mark.parametrize("path", ["play", "//evil.example", "/a?b=1", "/a#top", "/a/../b",
                                  "/./a", " /", "/a b", "/a\\b", "", "/" + "a" * 600, 7,
                                  ["/"], {"path": "/"}, True])
def test_paths_must_be_concrete(path: object) -> None:
    assert not is_concrete_path(path)
    check = by_id(check_document(manifest(appPath=path), EXPECTED))["appPath"]
    assert not check.passed
    assert check.fix


@pytest.mark.parametrize("path", ["/", "/play", "/games/space-blaster/", "/a.b/c_d~e"])
def test_concrete_paths(path: str) -> None:
    assert is_concrete_path(path)


def test_two_spellings_must_agree() -> None:
    checks = check_document(manifest(app_id="zapp_other"), EXPECTED)
    assert failed(checks) == ["appId"]
    assert "more than once" in by_id(checks)["appId"].fix
    assert failed(check_document(manifest(app_id=APP_ID), EXPECTED)) == []


def test_pay_to_compares_without_letter_case() -> None:
    assert failed(check_document(manifest(payTo=PAY_TO.lower()), EXPECTED)) == []
    checks = check_document(manifest(payTo="not-an-address"), EXPECTED)
    assert "0x and 40 hex digits" in by_id(checks)["payTo"].fix


def test_an_app_without_pay_to_cannot_verify() -> None:
    expected = Expected(APP_ID, "space", None, "/play", "/", ORIGIN)
    check = by_id(check_document(manifest(), expected))["payTo"]
    assert not check.passed and "no pay_to address yet" in check.fix
    check = by_id(check_document(manifest(payTo=...), expected))["payTo"]
    assert not check.passed and "no pay_to address yet" in check.fix


@pytest.mark.parametrize("value", [123, None, {"appId": APP_ID}])
def test_non_string_values_fail(value: object) -> None:
    checks = check_document(manifest(appId=value), EXPECTED)
    assert failed(checks) == ["appId"]


@pytest.mark.parametrize(("value", "passes"), [
    (ORIGIN, True), (ORIGIN + "/", True), ("HTTPS://Game.Example.com:443", True),
    ("https://game.example.com:8443", False), ("http://game.example.com", False),
    ("https://other.example.com", False), (ORIGIN + "/play", False), (None, False), (5, False),
])
def test_runtime_origin_when_present(value: object, passes: bool) -> None:
    check = by_id(check_document(manifest(runtimeOrigin=value), EXPECTED))["runtimeOrigin"]
    assert check.passed is passes
    # The fix is shown on the public setup page: it never names the origin.
    assert "game.example.com" not in check.fix


def test_runtime_origin_is_optional() -> None:
    check = by_id(check_document(manifest(), EXPECTED))["runtimeOrigin"]
    assert check.passed and check.seen is None


@pytest.mark.parametrize("document", [[], "manifest", None, 3])
def test_not_an_object(document: object) -> None:
    checks = check_document(document, EXPECTED)
    assert [(c.id, c.passed) for c in checks] == [("manifest_object", False)]


def test_long_values_are_shortened() -> None:
    check = by_id(check_document(manifest(slug="x" * 5000), EXPECTED))["slug"]
    assert check.seen is not None and len(check.seen) == 200


def test_same_origin() -> None:
    assert same_origin("https://a.example.com", "https://A.example.com:443/")
    assert not same_origin("https://a.example.com", "https://a.example.com:444")
    assert not same_origin("https://a.example.com/x", "https://a.example.com")
    assert not same_origin("nonsense", "nonsense")
