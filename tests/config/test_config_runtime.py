"""The runtime part of a config plan, through the real API on SQLite and PostgreSQL: an
``appPath`` is held to the runtime API's rule (``manifest.rules.is_concrete_path``), and
``runtimeValidation`` reports what verification requires (``manifest.rules``), warning
when the webhook is registered on the runtime origin at another path."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from manifest.rules import PAYMENT_SUBMITTED_PATH, WEBHOOK_PATH, is_concrete_path
from payments.db import transaction
from payments.models import App
from tests.config.test_config_api import Api, config, console
from tests.developer.test_api import World

__all__ = ["console"]  # the fixture, used by name

ORIGIN = "http://127.0.0.1:9"


def with_runtime(app_path: str | None = None, hook: str | None = None) -> dict[str, Any]:
    document = config()
    if app_path is not None:
        document["runtime"] = {**document["runtime"], "appPath": app_path}
    if hook is not None:
        document["webhooks"] = [{**document["webhooks"][0], "url": hook}]
    return document


def saved_paths(world: World) -> tuple[str, str] | None:
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "arcade")).first()
        return (app.runtime_app_path, app.runtime_entry_path) if app else None


@pytest.mark.parametrize("path", ["//evil.example/x", "/a/../b", "/play now", "/./",
                                  "/tab\there", "/a\\b", "/ctl\x01"])
def test_an_app_path_the_runtime_api_refuses_is_a_blocking_error(
        world: World, console: Api, path: str) -> None:
    assert not is_concrete_path(path)
    plan = console.plan(with_runtime(path))
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.runtime.appPath", "invalid_field")]
    refused = console.apply(with_runtime(path), planned=False)
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "config_plan_errors"
    assert saved_paths(world) is None  # nothing was created


@pytest.mark.parametrize("path", ["/", "/play", "/games/space-blaster/", "/a.b/..c"])
def test_a_concrete_app_path_is_saved(world: World, console: Api, path: str) -> None:
    assert is_concrete_path(path)
    applied = console.apply(with_runtime(path))
    assert applied.status_code == 201, applied.text
    assert saved_paths(world) == (path, path)


def test_a_saved_app_path_that_is_not_concrete_must_be_declared_again(
        world: World, console: Api) -> None:
    """Config once saved what the runtime API refuses; a file that leaves appPath out is
    told the saved one must be replaced, not planned as if it were valid."""
    assert console.apply(config()).status_code == 201
    with transaction(world.sessions) as session:
        session.execute(update(App).where(App.slug == "arcade").values(
            runtime_app_path="//evil.example/x", runtime_entry_path="//evil.example/x"))
    plan = console.plan(config())
    assert [(e["path"], e["code"]) for e in plan["errors"]] == [
        ("$.runtime.appPath", "invalid_field")]
    assert "The saved one" in plan["errors"][0]["message"]
    assert console.plan(with_runtime("/play"))["errors"] == []


def test_runtime_validation_expects_the_paths_verification_requires(
        world: World, console: Api) -> None:
    plan = console.plan(with_runtime("/play", hook=f"{ORIGIN}/hooks/pay"))
    expected = plan["runtimeValidation"]["expected"]
    # Not the webhook URL's path: the manifest rule is the constant.
    assert expected["webhookPath"] == WEBHOOK_PATH == "/api/svc/webhook"
    assert expected["paymentSubmittedPath"] == PAYMENT_SUBMITTED_PATH
    assert expected["entryPath"] == "/play" and plan["runtimeValidation"]["appPath"] == "/play"
    warning = next(w for w in plan["warnings"] if w["code"] == "webhook_path_not_verified")
    assert warning["key"] == f"{ORIGIN}/hooks/pay"
    assert WEBHOOK_PATH in warning["message"] and "/hooks/pay" in warning["message"]
    # Applied, the same is planned from the saved rows (no webhook or runtime in the file).
    assert console.apply(with_runtime("/play", hook=f"{ORIGIN}/hooks/pay")).status_code == 201
    later = config(webhooks=[])
    del later["runtime"]
    again = console.plan(later)
    assert again["runtimeValidation"]["expected"]["webhookPath"] == WEBHOOK_PATH
    assert "webhook_path_not_verified" in {w["code"] for w in again["warnings"]}


def test_no_webhook_path_warning_off_the_runtime_origin_or_at_the_verified_path(
        world: World, console: Api) -> None:
    for hook in (f"{ORIGIN}{WEBHOOK_PATH}", "http://127.0.0.2:9/hooks/pay"):
        plan = console.plan(with_runtime(hook=hook))
        assert plan["errors"] == [], hook
        assert plan["runtimeValidation"]["expected"]["webhookPath"] == WEBHOOK_PATH
        assert "webhook_path_not_verified" not in {w["code"] for w in plan["warnings"]}


def test_the_expected_entry_path_is_the_one_apply_leaves(world: World,
                                                         console: Api) -> None:
    assert console.apply(with_runtime("/play")).status_code == 201
    with transaction(world.sessions) as session:  # set apart, as the console can
        session.execute(update(App).where(App.slug == "arcade").values(
            runtime_entry_path="/home"))
    plan = console.plan(with_runtime("/arena"))
    assert plan["runtimeValidation"]["expected"]["entryPath"] == "/home"
    assert console.apply(with_runtime("/arena")).status_code == 201
    assert saved_paths(world) == ("/arena", "/home")
