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

# URLs without a credential: a user name alone, empty parameters, names that only contain
# a credential word, a colon and an @ in the path.
PLAIN_URLS = {"repo": "ssh://git@github.com/studio/game.git", "mail": "mailto:a@b.example",
              "empty": "https://game.example.com/cb?token=&sig=", "nopass": "https://u:@h/",
              "words": "https://game.example.com/?sort_key=a&keyword=b&design=c&signin=d",
              "path": "https://game.example.com/a:b@c/d", "hash": "https://x.example/#top"}
ALLOWED: dict[str, Any] = {
    "passthrough": {"passthrough": "yes", "maxTokens": "5", "tokenizer": "bpe"},
    "an address": {"payTo": "0x" + "ab" * 20},
    "empty credentials": {"password": "", "apiKey": "  "},
    "odd keys": {"a b": {"secret": "x"}, "list": [{"seedPhrase": "words"}, "zcli_1abc"]},
    "plain URLs": PLAIN_URLS,
}
# Credentials in URLs, each alone in a string, by what they are.
URL_SECRETS = {
    "postgres://game:hunter22@db.example.com:5432/x": "password",
    "https://ops:hunter22@[::1]:8443/": "password",
    "https://b.s3.amazonaws.com/k?X-Amz-Date=1&X-Amz-Signature=hunter22": "'X-Amz-Signature'",
    "https://storage.googleapis.com/b/o?X-Goog-Signature=hunter22": "X-Goog-Signature",
    "https://a.blob.core.windows.net/c/b?sv=2024&sig=hunter22": "'sig'",
    "https://b.s3.amazonaws.com/k?AWSAccessKeyId=A&Signature=hunter22": "'Signature'",
    "https://b.s3.amazonaws.com/k?X-Amz-Security-Token=hunter22": "X-Amz-Security-Token",
    "https://maps.example.com/api/js?key=hunter22": "'key'",
    "https://api.example.com/v1?api_key=hunter22": "'api_key'",
    "https://api.example.com/v1?apiKey=hunter22": "'apiKey'",
    "https://game.example.com/cb#access_token=hunter22&token_type=bearer": "'access_token'",
    "wss://rt.example.com/socket?auth=hunter22": "'auth'",
    "see https://hooks.example.com/in?client_secret=hunter22 to post": "'client_secret'",
    "https://x.example/?p%61ssword=hunter22": "'password'",
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


@pytest.mark.parametrize("url", list(URL_SECRETS))
def test_a_credential_in_a_url_is_found_by_both_and_never_repeated(url: str) -> None:
    document = config(metadata={"link": url, "links": [{"at": url}]})
    mine, theirs = secret_problems(document), service_problems(document)
    paths = ["$.metadata.link", "$.metadata.links[0].at"]
    assert [p["path"] for p in mine] == [p.path for p in theirs] == paths
    assert URL_SECRETS[url] in mine[0]["message"] and URL_SECRETS[url] in theirs[0].message
    assert "hunter22" not in str(mine) + str(theirs)


def test_urls_without_a_credential_pass_both() -> None:
    document = config(metadata=PLAIN_URLS)
    assert secret_problems(document) == [] and service_problems(document) == []


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
