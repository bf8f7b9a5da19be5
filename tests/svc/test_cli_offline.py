"""The CLI's exit codes and messages where no service answers (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from svc.cli import main
from svc.errors import ExitCode, for_api_failure
from svc.grant_store import GrantStore, StoredGrant
from tests.support.services import free_port

TOKEN = "zcli_" + "f" * 64


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GrantStore:
    monkeypatch.setenv("SVC_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SVC_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return GrantStore()


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def store_grant(store: GrantStore, api_url: str) -> None:
    store.save(StoredGrant(token=TOKEN, api_url=api_url, app="game", scopes=("apps:read",),
                           expires_at="2030-01-01T00:00:00+00:00", grant_id="zclig_1"))


def test_unreachable_service_exits_5(config: GrantStore,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    url = closed_url()
    store_grant(config, url)
    assert main(["app", "show"]) == ExitCode.NETWORK
    err = capsys.readouterr().err
    assert f"Could not reach {url}" in err and TOKEN not in err
    assert main(["auth", "device", "--app", "game", "--api-url", url]) == ExitCode.NETWORK
    assert main(["auth", "status", "--json"]) == ExitCode.NETWORK
    body = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert body["error"]["code"] == "unreachable" and body["error"]["exitCode"] == 5


def test_a_grant_is_never_sent_to_another_api(config: GrantStore,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store_grant(config, "http://api.example:1")
    other = closed_url()  # were a request made, the exit code would be 5
    assert main(["keys", "list", "--api-url", other]) == ExitCode.SIGN_IN
    err = capsys.readouterr().err
    assert "issued by http://api.example:1" in err
    assert f"svc auth browser --api-url {other}" in err


def test_not_signed_in(config: GrantStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["app", "show", "--app", "game"]) == ExitCode.SIGN_IN
    assert "svc auth browser" in capsys.readouterr().err
    assert main(["auth", "status"]) == ExitCode.FAILED
    assert main(["auth", "revoke"]) == ExitCode.FAILED
    capsys.readouterr()
    assert main(["auth", "logout", "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == {"removed": False, "revokedOnServer": False,
                                                   "signedOut": True}


def test_logout_forgets_the_grant_even_when_the_service_is_down(
        config: GrantStore, capsys: pytest.CaptureFixture[str]) -> None:
    store_grant(config, closed_url())
    assert main(["auth", "logout"]) == ExitCode.OK
    assert "Signed out locally" in capsys.readouterr().out
    assert not config.path.exists()


@pytest.mark.parametrize("argv", [
    ["auth"], ["auth", "nope"], ["keys", "list", "--bogus"], ["auth", "device", "--scopes", ","],
    ["auth", "device", "--api-url", "not-a-url"],
])
def test_usage_errors_exit_2(config: GrantStore, argv: list[str]) -> None:
    assert main(argv) == ExitCode.USAGE


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "svc 0.2.12"
    assert main([]) == 0
    assert "auth" in capsys.readouterr().out


def test_exit_codes_for_api_errors() -> None:
    rerun = "svc auth browser --app game --scopes apps:read,keys:create"
    scope = for_api_failure(403, "developer_cli_scope_missing", "This CLI grant lacks the "
                            f"scope 'apps:read'. Run: {rerun}", rerun)
    assert scope.exit_code == ExitCode.SCOPE and scope.command == rerun
    assert scope.message == "This CLI grant lacks the scope 'apps:read'."
    assert for_api_failure(403, "developer_cli_app_mismatch", "", None).exit_code == 3
    assert for_api_failure(401, "developer_grant_expired", "", None).exit_code == 4
    assert for_api_failure(422, "invalid_scope", "", None).exit_code == 2
    assert for_api_failure(404, "app_not_found", "", None).exit_code == 1
    assert for_api_failure(500, "internal_error", "", None).exit_code == 1


# Every integer flag of the CLI, with its command (a grant to a closed port is stored: a
# value that got through would be sent, and the exit code would be 5, not 2).
INTEGER_FLAGS = [(["webhook", "attempts"], "--limit"), (["config", "revisions"], "--limit"),
                 (["config", "revisions"], "--before")]


@pytest.mark.parametrize(("command", "flag"), INTEGER_FLAGS)
@pytest.mark.parametrize("value", ["\u0665", "\u0661\u0660", "\uff15", "\u00b2", " 5", "+5",
                                   "1_0", "-1", "5.0", "", "1" * 40])
def test_integer_flags_take_ascii_digits_only(
        config: GrantStore, capsys: pytest.CaptureFixture[str], command: list[str], flag: str,
        value: str) -> None:
    """``int()`` reads Arabic-Indic or fullwidth digits, spaces, a sign and underscores: a
    number spelled as the service never spells one, silently sent on."""
    store_grant(config, closed_url())
    assert main([*command, f"{flag}={value}"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}: {value!r} is not a whole number" in err, err
    assert "ASCII digits 0-9" in err


@pytest.mark.parametrize(("command", "flag"), INTEGER_FLAGS)
def test_integer_flags_read_ascii_digits(config: GrantStore, command: list[str],
                                         flag: str) -> None:
    store_grant(config, closed_url())
    assert main([*command, flag, "007"]) == ExitCode.NETWORK  # parsed, then sent


def test_a_price_in_other_digits_is_refused(config: GrantStore,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store_grant(config, closed_url())
    for flag in ("--price", "--price-atomic"):
        assert main(["product", "create", "--product", "x", "--name", "X", flag,
                     "\u0665"]) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "'\u0665' is not a" in err and ("write it like 0.05" in err
                                              or "write it like 50000" in err), err
