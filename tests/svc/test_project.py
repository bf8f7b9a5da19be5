"""Where the API URL and the app come from (flags, environment, svc.toml, grant, default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from svc.errors import CliError, ExitCode
from svc.project import (
    DEFAULT_API_URL,
    Project,
    checked_api_url,
    choose_api_url,
    choose_app,
    read_project,
)

TOML = Project(api_url="http://toml.example:1", app="from-toml")


def test_api_url_precedence() -> None:
    assert choose_api_url("http://flag:1/", "http://env:1", TOML, "http://grant:1") \
        == "http://flag:1"
    assert choose_api_url(None, "http://env:1", TOML, "http://grant:1") == "http://env:1"
    assert choose_api_url(None, "", TOML, "http://grant:1") == "http://toml.example:1"
    assert choose_api_url(None, None, Project(), "http://grant:1") == "http://grant:1"
    assert choose_api_url(None, None, Project()) == DEFAULT_API_URL


def test_app_precedence() -> None:
    assert choose_app("flag", TOML, "grant") == "flag"
    assert choose_app(None, TOML, "grant") == "from-toml"
    assert choose_app(None, Project(), "grant") == "grant"
    assert choose_app(None, Project()) is None


@pytest.mark.parametrize("url", ["api.example.com", "ftp://api.example.com", "http://", ""])
def test_api_url_must_be_http(url: str) -> None:
    with pytest.raises(CliError) as caught:
        checked_api_url(url)
    assert caught.value.exit_code == ExitCode.USAGE


def test_svc_toml(tmp_path: Path) -> None:
    assert read_project(tmp_path) == Project()
    (tmp_path / "svc.toml").write_text('api_url = "http://api.example:9"\napp = "legacy"\n'
                                       'entry_url = "https://game.example"\n'
                                       '[runtime]\norigin = "https://game.example"\n')
    path = tmp_path / "svc.toml"
    assert read_project(tmp_path) == Project("http://api.example:9", "legacy",
                                             entry_url="https://game.example",
                                             runtime_origin="https://game.example", path=path)
    path.write_text('app_slug = "game"\napp = "legacy"\npay_to = "0xabc"\n'
                    'webhook_url = "https://game.example/hook"\n'
                    'products_file = "config/products.json"\n')
    project = read_project(tmp_path)
    assert project == Project(None, "game", pay_to="0xabc",
                              webhook_url="https://game.example/hook",
                              products_file="config/products.json", path=path)
    assert project.products_path() == tmp_path / "config" / "products.json"


@pytest.mark.parametrize("text", ["api_url = ", "app_slug = 3", 'app_slug = "  "',
                                  "runtime = 1", "[runtime]\norigin = 5",
                                  "products_file = []"])
def test_bad_svc_toml_is_a_usage_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "svc.toml").write_text(text + "\n")
    with pytest.raises(CliError) as caught:
        read_project(tmp_path)
    assert caught.value.exit_code == ExitCode.USAGE
    assert "svc.toml" in caught.value.message
