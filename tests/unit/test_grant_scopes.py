"""CLI grant scopes (spec 5.3) as plain functions: the exact list, and the refusal that
names what is missing with the one sign-in to rerun."""

from __future__ import annotations

import pytest

from payments.config.plan import Op, Plan
from payments.developer.grants import CLI_SCOPES, check_scopes, require_grant_scopes
from payments.developer.models import CliGrant
from payments.errors import ApiError


def test_the_scopes_are_exactly_the_spec_list() -> None:
    assert CLI_SCOPES == ("apps:read", "apps:write", "products:write", "webhooks:write",
                          "runtime:write", "keys:create")
    for retired in ("config:read", "config:write"):
        with pytest.raises(ApiError) as refused:
            check_scopes(["apps:read", retired])
        assert refused.value.code == "invalid_scope"
        assert f"{retired} is no longer a scope" in refused.value.message


def test_the_first_missing_scope_is_named_and_the_command_adds_every_one() -> None:
    grant = CliGrant(scopes=["apps:read", "keys:create"])
    require_grant_scopes(grant, ["apps:read"], "game")  # held: no refusal
    with pytest.raises(ApiError) as refused:
        require_grant_scopes(grant, ["webhooks:write", "apps:read", "products:write"], "game")
    assert (refused.value.code, refused.value.status) == ("developer_cli_scope_missing", 403)
    assert refused.value.extra == {
        "scope": "webhooks:write",
        "command": "svc auth browser --app game --scopes "
                   "apps:read,products:write,webhooks:write,keys:create"}


def test_a_grant_holding_a_retired_name_is_told_a_command_that_works() -> None:
    """Grants approved before config:* was retired keep those strings until they expire;
    the rerun command never asks for them again (the service would refuse it)."""
    grant = CliGrant(scopes=["apps:read", "config:write"])
    with pytest.raises(ApiError) as refused:
        require_grant_scopes(grant, ["products:write"], "game")
    assert refused.value.extra["command"] == \
        "svc auth browser --app game --scopes apps:read,products:write"


def test_a_plan_needs_the_write_scope_of_each_kind_of_change_it_makes() -> None:
    plan = Plan("game", "merge", None, ops=[
        Op("unchanged", "app", "game"), Op("create", "runtime", "https://game.example.com"),
        Op("update", "product", "retry"), Op("disable", "product", "old"),
        Op("unchanged", "webhook", "https://game.example.com/hook")])
    assert plan.write_scopes == ["runtime:write", "products:write"]
    plan.ops[0].op, plan.ops[-1].op = "update", "disable"
    assert plan.write_scopes == ["apps:write", "runtime:write", "products:write",
                                 "webhooks:write"]
    assert Plan("game", "merge", None, ops=[Op("unchanged", "app", "game")]).write_scopes == []


def test_the_cli_asks_for_the_scopes_the_config_api_needs() -> None:
    """svc imports no server package, so it spells the list itself; this pins the two."""
    from payments.developer.grants import CONFIG_SCOPES
    from svc.commands.config_init import CONFIG_SCOPES as ASKED
    assert ASKED.split(",") == list(CONFIG_SCOPES)
