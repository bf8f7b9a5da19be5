"""The CLI's secret guard gives the service's answers (svc.config_guard repeats the rules of
payments.config.document because the CLI imports no server code), and the legacy mapping
of ``svc.toml`` and a products file onto svc.config.v1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from payments.config.document import secret_problems as service_problems
from svc.config_guard import secret_problems
from svc.config_sources import from_project
from svc.errors import CliError, ExitCode
from svc.project import Project
from tests.config.test_config_api import SECRETS, config

ALLOWED: dict[str, Any] = {
    "passthrough": {"passthrough": "yes", "maxTokens": "5", "tokenizer": "bpe"},
    "an address": {"payTo": "0x" + "ab" * 20},
    "empty credentials": {"password": "", "apiKey": "  "},
    "odd keys": {"a b": {"secret": "x"}, "list": [{"seedPhrase": "words"}, "zcli_1abc"]},
}


@pytest.mark.parametrize("case", [*SECRETS, *ALLOWED])
def test_the_cli_guard_finds_what_the_service_finds(case: str) -> None:
    if case in SECRETS:
        where, value, _ = SECRETS[case]
        document = config(**{where: value})
    else:
        document = config(metadata=ALLOWED[case])
    mine = secret_problems(document)
    assert [p["path"] for p in mine] == [p.path for p in service_problems(document)]
    assert all(p["code"] == "config_contains_secret" for p in mine)
    assert all(leaf not in str(mine) for leaf in ("hunter22", "zpk_aaaa", "eyJhbGci"))


def test_the_legacy_files_map_onto_a_config() -> None:
    project = Project(app="game", entry_url="https://game.example", pay_to="0x" + "cd" * 20,
                      webhook_url="https://game.example/hook",
                      runtime_origin="https://game.example", path=Path("svc.toml"))
    capped = {"slug": "skin", "sku": "skin", "name": "Skin", "priceAtomic": "5",
              "status": "active", "template": "zent",
              "riskPolicy": {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": 7}}}
    document, notes = from_project(project, [capped])
    assert document == {
        "schemaVersion": "svc.config.v1",
        "app": {"slug": "game", "entryUrl": "https://game.example", "payTo": "0x" + "cd" * 20},
        "products": [{"slug": "skin", "sku": "skin", "name": "Skin", "priceAtomic": "5",
                      "riskPolicy": {"trustedServerCharge": {"enabled": True,
                                                             "maxAmountAtomic": "7"}}}],
        "webhooks": [{"url": "https://game.example/hook"}],
        "runtime": {"mode": "worker_quick_launch", "origin": "https://game.example"}}
    assert notes == []
    # No products file: products are not declared at all (merge leaves them as they are).
    assert "products" not in from_project(Project(app="game"), None)[0]
    with pytest.raises(CliError) as caught:
        from_project(Project(), None)
    assert caught.value.exit_code == ExitCode.USAGE and "app_slug" in caught.value.message
