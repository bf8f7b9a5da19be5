"""What a CLI grant may do through the config API (spec 5.3, 4.8), on SQLite and
PostgreSQL: spec 5.3's scopes and no others. Reading needs ``apps:read``; an apply or
rollback needs the write scope of every kind of change its plan makes, checked before
anything is written, so config is no way around ``webhooks:write`` and the rest."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from manifest.url_policy import UrlPolicy
from payments.config.apply import apply_config
from payments.config.models import ConfigRevision
from payments.config.plan import Context
from payments.db import transaction, utcnow
from payments.developer.auth import Principal
from payments.developer.models import CliGrant
from payments.errors import ApiError
from payments.models import App, Product, RuntimeStatus
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.signing_secrets import SecretBox
from tests.config.test_config_api import HOOK, PAY_TO, Api, P, config
from tests.developer.test_api import World

SPEC_SCOPES = ["apps:read", "apps:write", "products:write", "webhooks:write", "runtime:write",
               "keys:create"]
ORIGIN = "http://127.0.0.1:9"


def declaring(**parts: Any) -> dict[str, Any]:
    """A config for the existing app ``game`` that declares only ``parts``."""
    return {"schemaVersion": "svc.config.v1", "app": {"slug": "game"}, **parts}


# One kind of change each, and the scope its own API asks for.
CHANGES = {
    "apps:write": declaring(app={"slug": "game", "payTo": PAY_TO}),
    "products:write": declaring(products=[{"slug": "retry", "name": "Retry",
                                           "priceAtomic": "10000"}]),
    "webhooks:write": declaring(webhooks=[{"url": HOOK}]),
    "runtime:write": declaring(runtime={"mode": "worker_quick_launch", "origin": ORIGIN}),
}


def without(scope: str) -> list[str]:
    return [s for s in SPEC_SCOPES if s != scope]


def state(world: World) -> tuple[Any, ...]:
    """Everything a config apply could write for ``game``."""
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
        return (app.pay_to, app.pay_to_status, app.runtime_status, app.runtime_origin,
                sorted((p.slug, p.price_atomic) for p in session.scalars(select(Product))),
                sorted((w.url, tuple(w.events), w.status)
                       for w in session.scalars(select(WebhookEndpoint))),
                session.scalar(select(func.count()).select_from(ConfigRevision)))


def apply_body(api: Api, document: dict[str, Any]) -> dict[str, Any]:
    plan = api.plan(document)
    return {"config": document, "baseRevision": plan["baseRevision"],
            "planDigest": plan["digest"]}


def refused_for(answer: Any, scope: str) -> None:
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert (body["code"], body["scope"]) == ("developer_cli_scope_missing", scope)
    assert scope in body["command"].split("--scopes ")[1].split(",")
    assert "secrets" not in body and "zwhsec_" not in answer.text


@pytest.mark.parametrize("scope", list(CHANGES))
def test_apply_needs_the_write_scope_of_each_kind_of_change(
        world: World, description: dict[str, Any], scope: str) -> None:
    document = CHANGES[scope]
    before = state(world)
    with world.api(world.grant("game", without(scope))) as client:
        api = Api(client, description)
        body = apply_body(api, document)  # planning only reads
        refused_for(api.call("POST", f"{P}/apply", f"{P}/apply", body), scope)
    assert state(world) == before  # nothing written, no revision
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        applied = Api(client, description).apply(document)
        assert applied.status_code == 201, applied.text
    assert state(world) != before


def test_a_grant_without_webhooks_write_gets_no_webhook_and_no_secret(
        world: World, description: dict[str, Any]) -> None:
    """The audit's case: everything else in the file is allowed, the webhook is not, so
    none of it lands, and no signing secret is handed out."""
    document = config("game")
    before = state(world)
    with world.api(world.grant("game", without("webhooks:write"))) as client:
        api = Api(client, description)
        refused_for(api.call("POST", f"{P}/apply", f"{P}/apply", apply_body(api, document)),
                    "webhooks:write")
    assert state(world) == before
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        applied = Api(client, description).apply(document)
    assert applied.status_code == 201, applied.text
    assert applied.json()["secrets"]["webhookSigningSecret"].startswith("zwhsec_")
    # Changing the endpoint it now has, and disabling it (mirror), need the scope too.
    changed = {**document, "webhooks": [{"url": HOOK, "events": ["payment.delivered"]}]}
    before = state(world)
    with world.api(world.grant("game", without("webhooks:write"))) as client:
        api = Api(client, description)
        refused_for(api.call("POST", f"{P}/apply", f"{P}/apply", apply_body(api, changed)),
                    "webhooks:write")
        mirror = {**apply_body(api, {**document, "webhooks": []}), "mode": "mirror"}
        mirror["planDigest"] = api.plan(mirror["config"], "mirror")["digest"]
        refused_for(api.call("POST", f"{P}/apply", f"{P}/apply", mirror), "webhooks:write")
    assert state(world) == before


def test_the_first_missing_scope_is_named_and_the_command_adds_them_all(
        world: World, description: dict[str, Any]) -> None:
    with world.api(world.grant("game", ["apps:read"])) as client:
        api = Api(client, description)
        answer = api.call("POST", f"{P}/apply", f"{P}/apply", apply_body(api, config("game")))
    assert answer.status_code == 403 and answer.json()["scope"] == "apps:write"
    assert answer.json()["command"] == (
        "svc auth browser --app game --scopes "
        "apps:read,apps:write,products:write,webhooks:write,runtime:write")


def test_reading_needs_apps_read_and_spec_scopes_cover_the_whole_api(
        world: World, description: dict[str, Any]) -> None:
    with world.api(world.grant("game", ["apps:read"])) as client:
        api = Api(client, description)
        assert api.plan(config("game"))["summary"]["create"] == 4
        assert api.revisions("game") == []
        unchanged = declaring(app={"slug": "game", "name": "Game"})  # the name it has
        nothing = api.apply(unchanged)  # nothing to write: no write scope needed
        assert nothing.status_code == 200 and nothing.json()["revision"] is None
    with world.api(world.grant("game", ["keys:create"])) as client:
        answer = client.post(f"{P}/plan", json={"config": config("game")})
        assert answer.status_code == 403 and answer.json()["scope"] == "apps:read"
        answer = client.get(f"{P}/revisions", params={"app": "game"})
        assert answer.status_code == 403 and answer.json()["scope"] == "apps:read"
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        api = Api(client, description)
        first = api.apply(config("game"))
        assert first.status_code == 201, first.text
        assert len(api.revisions("game")) == 1
        assert first.json()["revision"]["via"] == "cli"


def test_rollback_needs_the_scopes_of_what_it_changes(world: World,
                                                      description: dict[str, Any]) -> None:
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        api = Api(client, description)
        first = api.apply(CHANGES["products:write"]).json()["revision"]
        priced = declaring(products=[{"slug": "retry", "name": "Retry", "priceAtomic": "20000"}])
        head = api.apply(priced).json()["revision"]
    before = state(world)
    with world.api(world.grant("game", without("products:write"))) as client:
        answer = client.post(f"{P}/rollback", json={"revision": first["id"],
                                                   "baseRevision": head["id"]})
    refused_for(answer, "products:write")
    assert state(world) == before
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        answer = client.post(f"{P}/rollback", json={"revision": first["id"],
                                                   "baseRevision": head["id"]})
    assert answer.status_code == 201, answer.text


def test_a_rollback_that_disables_a_runtime_needs_runtime_write(
        world: World, description: dict[str, Any]) -> None:
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        api = Api(client, description)
        first = api.apply(CHANGES["products:write"]).json()["revision"]
        head = api.apply(CHANGES["runtime:write"]).json()["revision"]
    before = state(world)
    with world.api(world.grant("game", without("runtime:write"))) as client:
        answer = client.post(f"{P}/rollback", json={"revision": first["id"],
                                                   "baseRevision": head["id"]})
    refused_for(answer, "runtime:write")
    assert state(world) == before
    with world.api(world.grant("game", SPEC_SCOPES)) as client:
        answer = client.post(f"{P}/rollback", json={"revision": first["id"],
                                                   "baseRevision": head["id"]})
    assert answer.status_code == 201, answer.text
    assert state(world)[2] is RuntimeStatus.DISABLED


def test_the_retired_config_scopes_are_refused_when_asked_for(world: World) -> None:
    with world.api() as client:
        answer = client.post("/api/developer/cli/auth-requests",
                             json={"app": "game", "scopes": ["apps:read", "config:write"]})
    assert answer.status_code == 422, answer.text
    assert (answer.json()["code"], answer.json()["scopes"]) == ("invalid_scope",
                                                               ["config:write"])
    assert "config:write is no longer a scope" in answer.json()["message"]


def test_apply_itself_checks_the_plan_it_carries_out(world: World) -> None:
    """The API refuses early, before any DNS question; apply_config checks again, on the
    plan made under the app's lock, so a change that appeared in between is covered too."""
    with transaction(world.sessions) as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
        who = Principal(world.developer_id, (world.org_id,),
                        grant=CliGrant(app_id=app.id, scopes=without("runtime:write")))
        policy = UrlPolicy(service_hosts=frozenset(), apps_domain="apps.localhost",
                           allow_loopback=True)
        with pytest.raises(ApiError) as refused:
            apply_config(session, who, app, CHANGES["runtime:write"], "merge", base=None,
                         digest=None, context=Context(policy, lambda slug: slug),
                         box=SecretBox("test-server-secret-" + "x" * 20), now=utcnow())
        assert (refused.value.code, refused.value.extra["scope"]) == (
            "developer_cli_scope_missing", "runtime:write")
        assert app.runtime_status is RuntimeStatus.NOT_CONFIGURED


def test_sessions_keep_full_access(world: World, description: dict[str, Any]) -> None:
    with world.console() as client:
        applied = Api(client, description).apply(config("game"))
    assert applied.status_code == 201, applied.text
    assert applied.json()["revision"]["via"] == "console"
