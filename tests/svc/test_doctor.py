"""``svc doctor``: its rules as plain functions, and the command on real files (offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from svc.cli import main
from svc.doctor import Inputs, apps_domain_of, examine, production_like
from svc.env_file import parse_env
from svc.errors import CliError, ExitCode

SECRET = "zwhsec_" + "a" * 40
KEY = "zpk_live_" + "b" * 48
GOOD = {
    "SVC_APP_ID": "zapp_1", "SVC_APP_SLUG": "game",
    "SVC_PAY_TO": "0x" + "ab" * 20, "SVC_RUNTIME_ORIGIN": "https://game.example.com",
    "SVC_RUNTIME_APP_PATH": "/", "SVC_WEBHOOK_URL": "https://game.example.com/api/svc/webhook",
    "SVC_RETURN_URL": "https://game.apps.example.net/svc-auth-return?app=game",
    "SVC_WEBHOOK_SECRET": SECRET, "SVC_API_KEY": KEY,
}


def codes(env: dict[str, str], environment: str = "production",
          toml: dict[str, str | None] | None = None,
          apps_domain: str | None = "apps.example.net") -> set[tuple[str, str]]:
    found = examine(Inputs(environment, env, toml or {}, apps_domain))
    return {(f.code, f.key) for f in found if f.level == "error"}


def test_a_complete_production_env_passes() -> None:
    assert codes(GOOD) == set()


@pytest.mark.parametrize(("key", "value", "code"), [
    ("SVC_RUNTIME_ORIGIN", "http://localhost:8787", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "http://127.0.0.1:8787", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "http://127.8.9.10", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "http://[::1]:8787", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "http://[::ffff:127.0.0.1]", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "http://0.0.0.0:80", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "https://game.localhost", "url_loopback"),
    ("SVC_RUNTIME_ORIGIN", "https://10.1.2.3", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://172.16.0.9", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://192.168.1.20", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://169.254.169.254", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://100.64.0.1", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://[fd00::1]", "url_private_ip"),
    ("SVC_RUNTIME_ORIGIN", "https://game.apps.example.net", "runtime_origin_proxy_host"),
    ("SVC_RUNTIME_ORIGIN", "https://other.apps.example.net", "runtime_origin_proxy_host"),
    ("SVC_RUNTIME_ORIGIN", "https://apps.example.net", "runtime_origin_proxy_host"),
    ("SVC_RUNTIME_ORIGIN", "https://GAME.Apps.Example.NET", "runtime_origin_proxy_host"),
    ("SVC_RUNTIME_ORIGIN", "http://game.example.com", "url_not_https"),
    ("SVC_RUNTIME_ORIGIN", "https://game.example.com/app", "runtime_origin_not_origin"),
    ("SVC_RUNTIME_ORIGIN", "game.example.com", "url_invalid"),
    ("SVC_WEBHOOK_URL", "https://db.internal/hook", "url_internal_host"),
    ("SVC_WEBHOOK_URL", "https://printer.local/hook", "url_internal_host"),
    ("SVC_WEBHOOK_URL", "https://intranet/hook", "url_internal_host"),
    ("SVC_WEBHOOK_URL", "http://game.example.com/hook", "url_not_https"),
    ("SVC_RETURN_URL", "http://127.0.0.1:8787/game/return", "url_loopback"),
    ("SVC_RETURN_URL", "https://other.apps.example.net/svc-auth-return?app=other",
     "return_url_mismatch"),
    ("SVC_RETURN_URL", "https://game.apps.example.net/wrong?app=game", "return_url_mismatch"),
    ("SVC_PAY_TO", "0x123", "pay_to_invalid"),
    ("SVC_RUNTIME_APP_PATH", "app", "runtime_app_path_invalid"),
    ("SVC_API_KEY", "zpk_test_…abcd", "secret_placeholder"),
    ("SVC_API_KEY", "zpk_test_...abcd", "secret_placeholder"),
    ("SVC_API_KEY", "<your key>", "secret_placeholder"),
    ("SVC_WEBHOOK_SECRET", "REPLACE_ME", "secret_placeholder"),
    ("SVC_WEBHOOK_SECRET", "", "missing_variable"),
    ("SVC_APP_ID", "", "missing_variable"),
])
def test_production_failures_name_code_and_key(key: str, value: str, code: str) -> None:
    found = codes({**GOOD, key: value})
    assert (code, key) in found


def test_what_an_export_leaves_empty_is_not_fixed_by_exporting_again() -> None:
    """`svc export --format dotenv` writes the webhook secret empty (never exported) and
    the runtime origin empty until one is declared: the fix names where each comes from,
    not the export that just wrote it empty."""
    exported = {**GOOD, "SVC_WEBHOOK_SECRET": "", "SVC_RUNTIME_ORIGIN": ""}
    found = {f.key: f for f in examine(Inputs("dev", exported, {}, None))}
    secret, origin = found["SVC_WEBHOOK_SECRET"], found["SVC_RUNTIME_ORIGIN"]
    assert secret.message == "SVC_WEBHOOK_SECRET is empty."
    assert "svc config apply" in secret.fix and "svc webhook upsert" in secret.fix
    assert "svc export" not in secret.fix.split(";")[0]
    assert "runtime.origin" in origin.fix and "svc runtime configure" in origin.fix
    absent = {k: v for k, v in GOOD.items() if k != "SVC_APP_ID"}
    (app_id,) = examine(Inputs("dev", absent, {}, None))
    assert app_id.message == "SVC_APP_ID is not set."
    assert "svc export --format dotenv" in app_id.fix  # the export does write this one


def test_local_development_may_use_loopback_but_never_the_proxy_host() -> None:
    local = {**GOOD, "SVC_RUNTIME_ORIGIN": "http://127.0.0.1:8787",
             "SVC_RETURN_URL": "http://127.0.0.1:8787/game/return",
             "SVC_WEBHOOK_URL": "http://localhost:8787/api/svc/webhook",
             "SVC_API_KEY": "zpk_test_…abcd"}
    for name in ("local", "dev", "Development"):
        assert codes(local, name) == set()
        assert not production_like(name)
    assert codes(local, "preview") >= {("url_loopback", "SVC_RUNTIME_ORIGIN"),
                                       ("url_loopback", "SVC_WEBHOOK_URL")}
    proxy = {**local, "SVC_RUNTIME_ORIGIN": "https://game.apps.example.net"}
    assert codes(proxy, "local") == {("runtime_origin_proxy_host", "SVC_RUNTIME_ORIGIN")}


def test_findings_carry_a_fix_and_never_a_secret() -> None:
    found = examine(Inputs("production", {**GOOD, "SVC_API_KEY": "zpk_live_…wxyz",
                                          "SVC_WEBHOOK_SECRET": "zwhsec_" + "c" * 10 + "..."},
                           {}, None))
    assert found and all(f.fix and f.message for f in found)
    text = json.dumps([f.as_json() for f in found])
    assert "wxyz" not in text and "c" * 10 not in text


def test_database_on_loopback_only_warns_and_hides_the_url() -> None:
    env = {**GOOD, "DATABASE_URL": "postgresql://app:hunter2@127.0.0.1/inv"}
    found = examine(Inputs("production", env, {}, "apps.example.net"))
    assert [(f.code, f.level) for f in found] == [("database_on_loopback", "warning")]
    assert "hunter2" not in json.dumps(found[0].as_json())


def test_svc_toml_keys_are_checked_too() -> None:
    toml: dict[str, str | None] = {
        "[runtime].origin": "https://game.apps.example.net", "entry_url": "http://10.0.0.1/",
        "api_url": "http://api.localhost:8000", "pay_to": "nope", "app_slug": "other"}
    found = codes(GOOD, toml=toml)
    assert found == {("runtime_origin_proxy_host", "svc.toml:[runtime].origin"),
                     ("url_private_ip", "svc.toml:entry_url"),
                     ("url_loopback", "svc.toml:api_url"),
                     ("pay_to_invalid", "svc.toml:pay_to"),
                     ("app_slug_mismatch", "SVC_APP_SLUG")}
    assert codes({}, "local", toml={"api_url": "http://api.localhost:8000"}) == set()


def test_apps_domain_comes_from_the_return_url() -> None:
    assert apps_domain_of(GOOD) == "apps.example.net"
    assert apps_domain_of({**GOOD, "SVC_RETURN_URL": "https://x.example/"}) is None
    assert apps_domain_of({}) is None


def test_env_file_format() -> None:
    env = parse_env("# comment\n\nexport A=1\nB = 'two words'\nC=\"q#x\"\nD=v # note\nE=\n"
                    "F=https://h/p?a=1&b=2\nG=       # a note, as svc init's template has\n"
                    "H=#x\n")
    assert env == {"A": "1", "B": "two words", "C": "q#x", "D": "v", "E": "",
                   "F": "https://h/p?a=1&b=2", "G": "", "H": "#x"}
    with pytest.raises(CliError, match="line 2 is not KEY=value"):
        parse_env("A=1\nnot a line\n")


def write(path: Path, env: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_doctor_command_exit_codes_and_json(project: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    good = write(project / "good.env", GOOD)
    assert main(["doctor", "--env-file", str(good)]) == ExitCode.OK
    assert "No problems found." in capsys.readouterr().out

    bad = write(project / "bad.env", {**GOOD, "SVC_ENV": "production",
                                      "SVC_RUNTIME_ORIGIN": "https://game.apps.example.net",
                                      "SVC_WEBHOOK_URL": "https://192.168.0.2/hook"})
    assert main(["doctor", "--env-file", str(bad), "--json"]) == ExitCode.FAILED
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["productionLike"] is True
    assert report["appsDomain"] == "apps.example.net"
    assert {(f["code"], f["key"]) for f in report["findings"]} == {
        ("runtime_origin_proxy_host", "SVC_RUNTIME_ORIGIN"),
        ("url_private_ip", "SVC_WEBHOOK_URL")}
    assert all(set(f) == {"code", "key", "message", "fix", "level"}
               for f in report["findings"])
    assert KEY not in json.dumps(report) and SECRET not in json.dumps(report)

    local = write(project / "local.env", {**GOOD, "SVC_ENV": "local",
                                          "SVC_WEBHOOK_URL": "http://127.0.0.1:9/hook"})
    assert main(["doctor", "--env-file", str(local)]) == ExitCode.OK
    assert main(["doctor", "--env-file", str(local), "--env", "production"]) == ExitCode.FAILED
    out = capsys.readouterr().out
    assert "FAIL  url_loopback (SVC_WEBHOOK_URL)" in out and "fix: " in out


def test_doctor_reads_svc_toml_and_the_apps_domain_flag(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "svc.toml").write_text('app_slug = "game"\n[runtime]\n'
                                      'origin = "https://game.zentapps.example"\n')
    assert main(["doctor", "--json"]) == ExitCode.OK  # the proxy domain is not known yet
    capsys.readouterr()
    assert main(["doctor", "--apps-domain", "zentapps.example", "--json"]) == ExitCode.FAILED
    report = json.loads(capsys.readouterr().out)
    assert [f["key"] for f in report["findings"]] == ["svc.toml:[runtime].origin"]
    assert report["checked"] == [str(project / "svc.toml")]


def test_doctor_without_anything_to_check_is_a_usage_error(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == ExitCode.USAGE
    assert "Nothing to check" in capsys.readouterr().err
    assert main(["doctor", "--env-file", str(project / "missing.env")]) == ExitCode.USAGE
    assert "Cannot read the env file" in capsys.readouterr().err
