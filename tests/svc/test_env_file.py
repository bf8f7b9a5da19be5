"""``merge_env``: what ``svc export --format dotenv --output FILE`` does to an existing file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from svc.commands.init import template_env
from svc.env_file import assignment, merge_env, parse_env
from svc.errors import CliError

EXPORTED = {"SVC_APP_ID": "zapp_1", "SVC_APP_SLUG": "space-race", "SVC_WEBHOOK_SECRET": "",
            "SVC_API_KEY": "", "DATABASE_URL": "", "SVC_API_URL": "http://api.localhost:8000"}


def test_the_template_of_svc_init_is_filled_in_once_the_app_exists() -> None:
    template = template_env("space-race")
    assert parse_env(template)["SVC_APP_ID"] == ""  # `SVC_APP_ID=    # zapp_...` is empty
    merged = merge_env(template, EXPORTED, "added")
    env = parse_env(merged.text)
    assert env["SVC_APP_ID"] == "zapp_1" and merged.changed == ["SVC_APP_ID"]
    assert env["DATABASE_URL"] == "sqlite:///reference-app.db"  # the template's, kept
    assert merged.added == ["SVC_API_URL"] and env["SVC_API_URL"] == "http://api.localhost:8000"
    assert merged.values["SVC_WEBHOOK_SECRET"] == ""


def test_every_assignment_of_a_name_is_set_and_empty_values_empty_nothing() -> None:
    current = ("export SVC_APP_ID=old\nSVC_API_KEY=zpk_test_x  # pasted\nSVC_APP_ID='old'\n"
               "# SVC_APP_ID=commented out\n")
    merged = merge_env(current, EXPORTED, "added by the export")
    assert merged.text.splitlines()[:4] == [
        "export SVC_APP_ID=zapp_1", "SVC_API_KEY=zpk_test_x  # pasted", "SVC_APP_ID=zapp_1",
        "# SVC_APP_ID=commented out"]
    assert merged.values["SVC_API_KEY"] == "zpk_test_x"
    assert merged.text.splitlines()[4:6] == ["", "# added by the export"]
    assert merged.added == ["SVC_APP_SLUG", "SVC_WEBHOOK_SECRET", "DATABASE_URL",
                            "SVC_API_URL"]
    assert merge_env(merged.text, EXPORTED, "again").text == merged.text  # settled


def test_a_value_a_shell_would_split_is_quoted_and_reads_back_the_same(tmp_path: Path) -> None:
    """`set -a; . ./.env` (the quickstart) must not run part of a value: an unquoted `&` in
    a webhook URL's query sent the rest of the line to the background."""
    values = {"SVC_WEBHOOK_URL": "https://game.example/hook?a=1&b=$HOME x",
              "SVC_RETURN_URL": "https://game.apps.example/svc-auth-return?app=game",
              "QUOTED": "it's; a (test) &", "PLAIN": "zapp_1"}
    merged = merge_env("", values, "exported")
    assert "PLAIN=zapp_1" in merged.text.splitlines()
    assert "SVC_RETURN_URL=https://game.apps.example/svc-auth-return?app=game" in merged.text
    assert parse_env(merged.text) == values
    env = tmp_path / ".env"
    env.write_text(merged.text)
    shown = subprocess.run(
        ["sh", "-c", f"set -a; . {env}; printf '%s\\n' \"$SVC_WEBHOOK_URL\" \"$PLAIN\" "
                     "\"$SVC_RETURN_URL\""],
        capture_output=True, text=True, check=True, cwd=tmp_path)
    assert shown.stdout.splitlines() == [values["SVC_WEBHOOK_URL"], "zapp_1",
                                         values["SVC_RETURN_URL"]]
    assert shown.stderr == ""


def test_a_value_no_quoting_keeps_whole_is_refused() -> None:
    with pytest.raises(CliError):
        assignment("X", "it's $HOME")
