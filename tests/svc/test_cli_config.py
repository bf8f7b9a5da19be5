"""``svc config init|plan|apply|revisions|rollback`` and the legacy ``svc configure``: the
real ``svc`` executable against a real router (SQLite and PostgreSQL), as
test_cli_groups does, with the same world and helpers."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import time
import tomllib
from collections.abc import Callable
from select import select as wait_readable
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from payments.config.document import WITHHELD
from payments.config.models import ConfigRevision
from payments.models import App, Product, ProductStatus
from payments.webhooks.models import EndpointStatus, WebhookEndpoint
from svc.commands.configure import DEPRECATION
from svc.commands.webhooks import STORAGE_NOTE
from tests.svc.test_cli_end_to_end import SVC, World
from tests.svc.test_cli_groups import PAY_TO, ok, refused, run, signed_in

# The service under test answers on 127.0.0.1, one of its own hosts, which no webhook or
# runtime origin may name; another loopback address stands for the developer's server.
HOOK = "http://127.0.0.2:9/api/svc/webhook"
ORIGIN = "http://127.0.0.2:9"
CONFIG_SCOPES = "apps:read,apps:write,products:write,webhooks:write,runtime:write"
PROMPT = b"[y/N] "
SIGNING_SECRET = re.compile(r"zwhsec_[0-9A-Za-z]{16,}")


def game_config(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schemaVersion": "svc.config.v1", "environment": "test",
        "app": {"slug": "game", "name": "Space Game", "kind": "game", "payTo": PAY_TO,
                "tags": ["space"], "distributionTargets": ["Web"]},
        "products": [
            {"slug": "retry", "name": "Retry", "priceAtomic": "100"},
            {"slug": "skin", "sku": "skin-1", "name": "Skin", "priceAtomic": "250000",
             "riskMode": "settled_first"},
        ],
        "webhooks": [{"url": HOOK, "events": ["payment.delivered"]}],
        "runtime": {"mode": "worker_quick_launch", "origin": ORIGIN},
    }
    document.update(overrides)
    return document


def write_config(world: World, document: dict[str, Any], name: str = "svc.config.json") -> None:
    (world.home / name).write_text(json.dumps(document, indent=2))


def with_price(document: dict[str, Any], price: str) -> dict[str, Any]:
    products = [dict(p) for p in document["products"]]
    products[0]["priceAtomic"] = price
    return {**document, "products": products}


def revision_count(world: World) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(ConfigRevision)) or 0)


def product(session: Session, slug: str) -> Product:
    found = session.scalar(select(Product).where(Product.slug == slug))
    assert found is not None
    return found


def answering(world: World, *args: str, reply: str,
              meanwhile: Callable[[], object] | None = None) -> subprocess.CompletedProcess[str]:
    """Run with a terminal as stdin: wait for the question, do ``meanwhile`` (another
    change landing while the developer reads the plan), then type ``reply``."""
    terminal, cli_side = pty.openpty()
    cli = subprocess.Popen([SVC, *args, "--api-url", world.url], cwd=world.home,
                           env=world.env(), stdin=cli_side, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    os.close(cli_side)
    assert cli.stderr is not None
    asked = b""
    deadline = time.monotonic() + 60
    while not asked.endswith(PROMPT):
        ready, _, _ = wait_readable([cli.stderr], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(cli.stderr.fileno(), 4096) if ready else b""
        assert chunk, f"no question asked: {asked!r}"
        asked += chunk
    if meanwhile is not None:
        meanwhile()
    os.write(terminal, reply.encode() + b"\n")
    out, err = cli.communicate(timeout=60)
    os.close(terminal)
    return subprocess.CompletedProcess(cli.args, cli.returncode, out.decode(),
                                       (asked + err).decode())


def test_init_without_an_app_writes_a_template(world: World) -> None:
    # Nobody signed in (an empty organization starts here): nothing to read, a template.
    done = run(world, "config", "init", "--app", "new-game")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Wrote svc.config.json: a starting template for app "
                                  "new-game.\nNot signed in")
    written = json.loads((world.home / "svc.config.json").read_text())
    assert written["schemaVersion"] == "svc.config.v1"
    assert (written["app"]["slug"], written["app"]["name"]) == ("new-game", "New Game")
    assert written["products"] == [{"slug": "retry", "sku": "retry", "name": "Retry",
                                    "priceAtomic": "10000", "riskMode": "optimistic"}]
    toml = tomllib.loads((world.home / "svc.toml").read_text())
    assert toml == {"api_url": world.url, "app_slug": "new-game",
                    "products_file": "svc.config.json"}

    before = (world.home / "svc.config.json").read_text()
    error = refused(world, "config", "init", exit_code=2)
    assert "svc.config.json and svc.toml already exist" in error["message"]
    assert "--force" in error["message"]
    assert (world.home / "svc.config.json").read_text() == before

    # Signed in for game, naming an app the organization does not have: a template too.
    signed_in(world, CONFIG_SCOPES)
    made = ok(world, "config", "init", "--app", "brand-new", "--force")
    assert (made["source"], made["app"]) == ("template", "brand-new")
    assert made["files"] == {"config": "svc.config.json", "project": "svc.toml"}
    assert made["config"] == json.loads((world.home / "svc.config.json").read_text())
    assert "no app 'brand-new'" in made["notes"][0]
    assert "svc auth browser --app brand-new" in made["notes"][0]
    # A grant is for one existing app: a new app is created in the console first.
    error = refused(world, "config", "plan", exit_code=3)
    assert error["code"] == "developer_session_required" and "console" in error["message"]


def test_init_from_an_existing_app_plans_as_unchanged(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    ok(world, "app", "update", "--pay-to", PAY_TO, "--tags", "space,arcade",
       "--entry-url", "https://game.example.com/play")
    ok(world, "runtime", "configure", "--origin", ORIGIN, "--app-path", "/play")
    (world.home / "products.json").write_text(json.dumps([
        {"slug": "retry", "name": "Retry", "priceAtomic": "10000"},
        {"slug": "skin", "sku": "skin-1", "name": "Skin", "priceAtomic": "250000",
         "riskMode": "settled_first", "fulfillmentConfig": {"item": "skin"},
         "riskPolicy": {"trustedServerCharge": {"enabled": True, "maxAmountAtomic": "300000"}}},
        {"slug": "old", "name": "Old", "priceAtomic": "5000"}]))
    ok(world, "product", "upsert", "--file", "products.json")
    ok(world, "product", "update", "--product", "old", "--status", "disabled")
    secret = ok(world, "webhook", "upsert", "--url", HOOK, "--events",
                "payment.delivered,payment.settled")["secret"]

    made = ok(world, "config", "init")
    assert (made["source"], made["app"]) == ("app", "game")
    document = made["config"]
    assert document["app"] == {"slug": "game", "name": "Game", "kind": "game",
                               "entryUrl": "https://game.example.com/play", "payTo": PAY_TO,
                               "distributionTargets": [], "tags": ["space", "arcade"]}
    assert [p["slug"] for p in document["products"]] == ["retry", "skin"]
    skin = document["products"][1]
    assert (skin["sku"], skin["priceAtomic"], skin["fulfillmentConfig"]) == (
        "skin-1", "250000", {"item": "skin"})
    assert skin["riskPolicy"]["trustedServerCharge"]["maxAmountAtomic"] == "300000"
    assert document["webhooks"] == [{"url": HOOK,
                                     "events": ["payment.delivered", "payment.settled"]}]
    assert document["runtime"] == {"mode": "worker_quick_launch", "origin": ORIGIN,
                                   "appPath": "/play"}
    assert made["notes"] == ["Product old is disabled: left out (declaring it would make it "
                             "active again)."]
    files = (world.home / "svc.config.json").read_text() + (world.home / "svc.toml").read_text()
    assert secret not in files and "zwhsec_" not in files
    assert json.loads((world.home / "svc.config.json").read_text()) == document
    assert tomllib.loads((world.home / "svc.toml").read_text()) == {
        "api_url": world.url, "app_slug": "game", "entry_url": "https://game.example.com/play",
        "pay_to": PAY_TO, "webhook_url": HOOK, "products_file": "svc.config.json",
        "runtime": {"origin": ORIGIN}}

    # The file says what the app is: planning it changes nothing, nor does product diff.
    planned = ok(world, "config", "plan")["plan"]
    assert planned["errors"] == []
    assert planned["summary"] == {"create": 0, "update": 0, "disable": 0, "unchanged": 5}
    assert ok(world, "product", "diff")["inSync"] is True
    text = run(world, "config", "init")
    assert text.returncode == 2 and "already exist" in text.stderr


def test_plan_then_apply_creates_and_shows_the_secret_once(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    shown = run(world, "config", "plan")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "Plan for game (merge, against no revision yet):"
    assert lines[1:3] == ["~ app game", '    name: "Game" -> "Space Game"']
    assert f'    payTo: null -> "{PAY_TO}"' in lines and '    tags: [] -> ["space"]' in lines
    for created in ("+ runtime http://127.0.0.2:9", "+ product retry", "+ product skin",
                    f"+ webhook {HOOK}"):
        assert created in lines
    retry = lines[lines.index("+ product retry") + 1]
    assert retry.startswith('    sku: "retry", name: "Retry", priceAtomic: "100", ')
    assert "4 to create, 1 to update, 0 to disable, 0 unchanged." in lines
    assert any(line.startswith("  SVC_WEBHOOK_SECRET (issued_on_apply)") for line in lines)
    as_json = ok(world, "config", "plan")
    assert set(as_json) == {"file", "plan"} and as_json["file"] == "svc.config.json"
    assert as_json["plan"]["summary"] == {"create": 4, "update": 1, "disable": 0,
                                          "unchanged": 0}
    assert revision_count(world) == 0  # a plan writes nothing

    applied = run(world, "config", "apply", "--yes")
    assert (applied.returncode, applied.stderr) == (0, "")
    [secret] = SIGNING_SECRET.findall(applied.stdout)
    out = applied.stdout.splitlines()
    assert out[-2:] == [STORAGE_NOTE, f"  {secret}"]
    assert out[-3].startswith("Applied revision 1 (zcfgrev_") and out[-3].endswith(
        " to game: 4 created, 1 updated, 0 disabled, 0 unchanged.")
    with world.sessions() as session:
        assert product(session, "retry").price_atomic == 100
        assert product(session, "skin").sku == "skin-1"
        hook = session.scalar(select(WebhookEndpoint))
        assert hook is not None and hook.url == HOOK
        app = session.scalar(select(App).where(App.slug == "game"))
        assert app is not None and (app.name, app.pay_to) == ("Space Game", PAY_TO)

    again = ok(world, "config", "apply", "--yes")
    assert again["applied"] is None and not SIGNING_SECRET.search(json.dumps(again))
    assert again["plan"]["summary"]["unchanged"] == 5
    text = run(world, "config", "apply", "--yes")
    assert text.returncode == 0 and not SIGNING_SECRET.search(text.stdout)
    assert text.stdout.splitlines()[-1] == "Nothing to apply: the service already matches."
    assert revision_count(world) == 1


def test_a_price_edit_updates_and_mirror_disables(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    first = run(world, "config", "apply", "--yes", "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    secret = result["applied"]["secrets"]["webhookSigningSecret"]
    assert secret.startswith("zwhsec_") and first.stdout.count(secret) == 1
    assert set(result) == {"file", "plan", "applied"}
    assert result["applied"]["revision"]["number"] == 1

    write_config(world, with_price(game_config(), "150"))
    shown = run(world, "config", "plan").stdout.splitlines()
    at = shown.index("~ product retry")
    assert shown[at + 1] == '    priceAtomic: "100" -> "150"'
    assert "0 to create, 1 to update, 0 to disable, 4 unchanged." in shown
    edited = ok(world, "config", "apply", "--yes")
    assert [(o["op"], o["key"], o["changes"]) for o in edited["plan"]["ops"]
            if o["op"] != "unchanged"] == [
        ("update", "retry", [{"field": "priceAtomic", "before": "100", "after": "150"}])]
    assert edited["applied"]["revision"]["number"] == 2
    assert "secrets" not in edited["applied"]

    smaller = with_price(game_config(products=game_config()["products"][:1], webhooks=[]),
                         "150")
    write_config(world, smaller)
    merge = run(world, "config", "plan").stdout.splitlines()
    assert "Warnings:" in merge and "0 to create, 0 to update, 0 to disable, 3 unchanged." in merge
    assert any(line.startswith("  skin: Product 'skin' is active but not in the file")
               for line in merge)
    mirror = run(world, "config", "plan", "--mode", "mirror").stdout.splitlines()
    assert "- product skin" in mirror and f"- webhook {HOOK}" in mirror
    assert '    status: "active" -> "disabled"' in mirror
    done = ok(world, "config", "apply", "--mode", "mirror", "--yes")
    assert done["applied"]["summary"]["disable"] == 2 and done["plan"]["mode"] == "mirror"
    with world.sessions() as session:
        assert product(session, "skin").status is ProductStatus.DISABLED
        assert product(session, "retry").price_atomic == 150
        hook = session.scalar(select(WebhookEndpoint))
        assert hook is not None and hook.status is EndpointStatus.DISABLED


def test_revisions_and_rollback(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    first = ok(world, "config", "apply", "--yes")["applied"]["revision"]
    write_config(world, with_price(game_config(), "150"))
    second = ok(world, "config", "apply", "--yes")["applied"]["revision"]

    listed = ok(world, "config", "revisions")
    assert listed["app"] == "game"
    assert [r["id"] for r in listed["revisions"]] == [second["id"], first["id"]]
    assert listed["nextBefore"] is None
    paged = run(world, "config", "revisions", "--limit", "1").stdout.splitlines()
    assert paged[0].startswith(f"#2  {second['id']}  ") and len(paged) == 2
    assert paged[1] == "Older revisions: svc config revisions --before 2"
    older = ok(world, "config", "revisions", "--limit", "1", "--before", "2")
    assert [r["id"] for r in older["revisions"]] == [first["id"]]
    assert older["nextBefore"] is None
    text = run(world, "config", "revisions").stdout.splitlines()
    assert text[0].startswith(f"#2  {second['id']}  ") and "merge  by dev1 via cli" in text[0]
    assert text[1].startswith(f"#1  {first['id']}  ") and text[1].endswith("+4 ~1 -0")
    detail = ok(world, "config", "revisions", first["id"])["revision"]
    assert detail["config"] == game_config() and detail["number"] == 1
    shown = run(world, "config", "revisions", first["id"]).stdout.splitlines()
    assert shown[0].startswith(f"Revision #1  {first['id']}") and shown[0].endswith("-0")
    assert "State it left (what `svc config rollback` to it restores):" in shown
    assert "+ product retry" in shown and '      "priceAtomic": "100"' in shown
    assert refused(world, "config", "revisions", "zcfgrev_" + "0" * 30,
                   exit_code=1)["code"] == "config_revision_not_found"

    # Without --yes and without a terminal: the diff is shown, nothing is rolled back.
    asked = run(world, "config", "rollback", first["id"])
    assert asked.returncode == 2
    at = asked.stdout.splitlines().index("~ product retry")
    assert asked.stdout.splitlines()[at + 1] == '    priceAtomic: "150" -> "100"'
    assert "stdin is not a terminal" in asked.stderr and "--yes" in asked.stderr
    assert revision_count(world) == 2

    rolled = ok(world, "config", "rollback", first["id"], "--yes")
    assert rolled["revision"] == first["id"]
    assert rolled["plan"]["baseRevision"] == second["id"]
    revision = rolled["applied"]["revision"]
    assert (revision["number"], revision["rollbackOf"]) == (3, first["id"])
    with world.sessions() as session:
        assert product(session, "retry").price_atomic == 100
    same = run(world, "config", "rollback", first["id"], "--yes")
    assert same.returncode == 0 and "Nothing to apply" in same.stdout
    assert revision_count(world) == 3


def test_a_revision_is_named_by_its_listed_number_too(world: World) -> None:
    """`svc config revisions` shows `#n` first on each line: `1` and `#1` name that
    revision for `revisions` and `rollback` as its zcfgrev_ id does."""
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    first = ok(world, "config", "apply", "--yes")["applied"]["revision"]
    write_config(world, with_price(game_config(), "150"))
    ok(world, "config", "apply", "--yes")
    for name in ("1", "#1"):
        assert ok(world, "config", "revisions", name)["revision"]["id"] == first["id"]
    missing = refused(world, "config", "revisions", "7", exit_code=1)
    assert missing["code"] == "config_revision_not_found"
    assert "#7" in missing["message"] and "svc config revisions" in missing["message"]
    rolled = ok(world, "config", "rollback", "#1", "--yes")
    assert rolled["revision"] == first["id"]
    assert rolled["applied"]["revision"]["rollbackOf"] == first["id"]


def test_rollback_to_a_revision_whose_credentials_were_withheld_is_refused(
        world: World) -> None:
    """A revision recorded with a ?token= in its webhook URL, as migration 0018 leaves it:
    the rollback's plan is refused, exit 2, naming the path; nothing is applied."""
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    first = ok(world, "config", "apply", "--yes")["applied"]["revision"]
    write_config(world, with_price(game_config(), "150"))
    ok(world, "config", "apply", "--yes")
    with world.sessions() as session, session.begin():
        row = session.get(ConfigRevision, first["id"])
        assert row is not None and row.state is not None
        state = json.loads(json.dumps(row.state).replace(HOOK, f"{HOOK}?token={WITHHELD}"))
        session.execute(update(ConfigRevision).where(ConfigRevision.id == row.id)
                        .values(state=state))
    shown = run(world, "config", "revisions", first["id"]).stdout
    assert f"?token={WITHHELD}" in shown
    # The revision says it cannot be rolled back to, and where, before anyone tries.
    lines = shown.splitlines()
    assert lines[0].endswith("  [secrets withheld: no rollback]")
    assert lines[1].startswith("Secrets were withheld from this revision, so it cannot be "
                               "rolled back to") and lines[2] == "  $.webhooks[0].url"
    assert "State it left:" in lines and "rollback` to it restores" not in shown
    listed = run(world, "config", "revisions").stdout.splitlines()
    assert [line.endswith("  [secrets withheld: no rollback]") for line in listed] == [
        False, True]
    assert [r["withheldPaths"] for r in ok(world, "config", "revisions")["revisions"]] == [
        [], ["$.webhooks[0].url"]]
    error = refused(world, "config", "rollback", first["id"], "--yes", exit_code=2)
    assert error["code"] == "config_revision_withheld" and "Revision 1" in error["message"]
    assert [e["path"] for e in error["errors"]] == ["$.webhooks[0].url"]
    assert revision_count(world) == 2


def test_rollback_restores_what_the_old_file_left_out(world: World) -> None:
    """The walkthrough: revision 1 names no risk policy, revision 2 turns trusted-server
    charges on and adds a product; rolling back to 1 turns them off and disables it."""
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    first = ok(world, "config", "apply", "--yes")["applied"]["revision"]
    trusted = game_config()
    trusted["products"][0]["riskPolicy"] = {"trustedServerCharge": {"enabled": True}}
    trusted["products"].append({"slug": "boost", "name": "Boost", "priceAtomic": "300"})
    write_config(world, trusted)
    second = ok(world, "config", "apply", "--yes")["applied"]["revision"]
    shown = run(world, "config", "revisions", first["id"]).stdout.splitlines()
    assert "State it left (what `svc config rollback` to it restores):" in shown

    rolled = run(world, "config", "rollback", first["id"], "--yes")
    assert rolled.returncode == 0, rolled.stderr
    lines = rolled.stdout.splitlines()
    assert lines[0] == f"Plan for game (mirror, against {second['id']}):"
    at = lines.index("~ product retry")
    assert lines[at + 1] == "    riskPolicy.trustedServerCharge.enabled: true -> false"
    assert "- product boost" in lines
    assert "1 to update, 1 to disable" in rolled.stdout
    assert lines[-1].startswith("Applied revision 3 (")
    with world.sessions() as session:
        assert not product(session, "retry").trusted_charge_enabled
        assert product(session, "boost").status is ProductStatus.DISABLED
    again = run(world, "config", "rollback", first["id"], "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == ("Nothing to apply: the service is already as "
                                            "revision 1 left it.")

    # A revision recorded before states were kept: its file again, and the plan says so.
    with world.sessions() as session, session.begin():
        session.execute(update(ConfigRevision).where(ConfigRevision.id == second["id"])
                        .values(state=None))
    old = run(world, "config", "rollback", second["id"], "--yes")
    assert old.returncode == 0, old.stderr
    lines = old.stdout.splitlines()
    assert lines[0].startswith("Plan for game (merge, against zcfgrev_")
    assert f"  {second['id']}: Revision 2 recorded no state of the app" in "\n".join(lines)
    assert "~ product retry" in lines and "~ product boost" in lines  # both named by #2
    with world.sessions() as session:
        assert product(session, "retry").trusted_charge_enabled
        assert product(session, "boost").status is ProductStatus.ACTIVE
    assert revision_count(world) == 4
    assert "State it left: not recorded" in run(world, "config", "revisions",
                                                 second["id"]).stdout


def test_apply_asks_on_a_terminal_and_refuses_without_one(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    write_config(world, game_config())
    refusal = run(world, "config", "apply")
    assert refusal.returncode == 2
    assert "+ product retry" in refusal.stdout.splitlines()
    assert refusal.stderr.startswith("svc: Not applied: stdin is not a terminal")
    as_json = run(world, "config", "apply", "--json")
    assert as_json.returncode == 2
    body = json.loads(as_json.stdout)
    assert body["applied"] is None and body["plan"]["summary"]["create"] == 4
    assert (body["error"]["code"], body["error"]["exitCode"]) == ("confirmation_required", 2)
    no = answering(world, "config", "apply", reply="n")
    assert no.returncode == 1 and "Cancelled; nothing was changed." in no.stderr
    assert "Apply these changes to game? [y/N]" in no.stderr
    assert revision_count(world) == 0

    yes = answering(world, "config", "apply", reply="yes")
    assert yes.returncode == 0, yes.stderr
    assert "Applied revision 1" in yes.stdout and len(SIGNING_SECRET.findall(yes.stdout)) == 1

    # Another apply lands while the plan is on screen: the confirmed plan is refused.
    write_config(world, with_price(game_config(), "150"))
    write_config(world, with_price(game_config(), "175"), "other.json")
    conflict = answering(world, "config", "apply", reply="y", meanwhile=lambda: ok(
        world, "config", "apply", "--file", "other.json", "--yes"))
    assert conflict.returncode == 1
    assert "Another apply landed since your plan" in conflict.stderr
    assert "Run:\n  svc config plan --file svc.config.json\n" in conflict.stderr
    # The app changes outside config while the plan is on screen: refused as stale.
    stale = answering(world, "config", "apply", reply="y", meanwhile=lambda: ok(
        world, "product", "update", "--product", "skin", "--name", "Renamed"))
    assert stale.returncode == 1 and "changed since this plan was made" in stale.stderr
    with world.sessions() as session:
        assert product(session, "retry").price_atomic == 175
    assert revision_count(world) == 2


def test_files_and_plans_that_cannot_be_applied(world: World) -> None:
    leaked = "zpk_" + "a" * 40
    write_config(world, game_config(metadata={"note": leaked}))
    # Refused before signing in or sending anything: exit 2, not 4.
    secret = run(world, "config", "plan")
    assert secret.returncode == 2 and leaked not in secret.stdout + secret.stderr
    assert "  $.metadata.note: this looks like a zpk_ API key" in secret.stderr
    error = refused(world, "config", "apply", "--yes", exit_code=2)
    assert error["code"] == "config_contains_secret"
    assert [e["path"] for e in error["errors"]] == ["$.metadata.note"]
    (world.home / "svc.config.json").write_text("{not json")
    assert "is not valid JSON" in refused(world, "config", "plan", exit_code=2)["message"]
    assert "svc config init" in refused(world, "config", "plan", "--file", "none.json",
                                        exit_code=2)["message"]

    signed_in(world, CONFIG_SCOPES)
    bad = game_config()
    bad["products"][0]["priceAtomic"] = "1.5"
    write_config(world, bad)
    invalid = run(world, "config", "plan")
    assert invalid.returncode == 2
    assert "  $.products[0].priceAtomic: '1.5' does not match" in invalid.stderr
    assert refused(world, "config", "plan", exit_code=2)["errors"][0]["path"] == \
        "$.products[0].priceAtomic"

    write_config(world, game_config(webhooks=[{"url": "http://example.com/hook"}],
                                    runtime={"mode": "worker_quick_launch", "origin": "ftp://x"}))
    blocked = run(world, "config", "plan")
    assert blocked.returncode == 2
    assert "Blocking errors (2):" in blocked.stdout
    assert any(line.startswith("  $.webhooks[0].url: ") for line in blocked.stdout.splitlines())
    assert "listed by JSON path" in blocked.stderr
    body = json.loads(run(world, "config", "apply", "--yes", "--json").stdout)
    assert body["error"]["code"] == "config_plan_errors" and body["applied"] is None
    assert {e["path"] for e in body["plan"]["errors"]} == {"$.webhooks[0].url",
                                                           "$.runtime.origin"}
    assert revision_count(world) == 0

    # The file changes products, the webhook and the runtime: a grant that may change only
    # products is refused before anything is written, told the sign-in that adds the rest.
    signed_in(world, "apps:read,products:write")
    write_config(world, game_config())
    scope = refused(world, "config", "apply", "--yes", exit_code=3)
    assert scope["code"] == "developer_cli_scope_missing"
    assert "lacks the scope 'apps:write'" in scope["message"]
    assert scope["command"] == ("svc auth browser --app game --scopes "
                                "apps:read,apps:write,products:write,webhooks:write,runtime:write")
    assert revision_count(world) == 0
    signed_in(world, "keys:create")
    scope = refused(world, "config", "plan", exit_code=3)
    assert scope["command"] == "svc auth browser --app game --scopes apps:read,keys:create"


def test_legacy_configure_maps_svc_toml_and_warns(world: World) -> None:
    signed_in(world, CONFIG_SCOPES)
    (world.home / "svc.toml").write_text(
        f'app_slug = "game"\npay_to = "{PAY_TO}"\nwebhook_url = "{HOOK}"\n'
        f'products_file = "products.json"\n[runtime]\norigin = "{ORIGIN}"\n')
    products = [{"slug": "retry", "name": "Retry", "priceAtomic": 100, "template": "zent"},
                {"slug": "old", "name": "Old", "priceAtomic": "5000", "status": "disabled"}]
    (world.home / "products.json").write_text(json.dumps(products))
    done = run(world, "configure", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == DEPRECATION
    body = json.loads(done.stdout)
    assert body["config"] == {
        "schemaVersion": "svc.config.v1", "app": {"slug": "game", "payTo": PAY_TO},
        "products": [{"slug": "retry", "sku": "retry", "name": "Retry", "priceAtomic": "100"}],
        "webhooks": [{"url": HOOK}],
        "runtime": {"mode": "worker_quick_launch", "origin": ORIGIN}}
    assert body["productsFile"].endswith("products.json")
    assert body["plan"]["mode"] == "merge" and body["applied"]["revision"]["number"] == 1
    secret = body["applied"]["secrets"]["webhookSigningSecret"]
    assert done.stdout.count(secret) == 1
    assert "old is disabled in the products file" in body["notes"][0]
    with world.sessions() as session:
        assert product(session, "retry").price_atomic == 100
        assert session.scalar(select(Product).where(Product.slug == "old")) is None

    (world.home / "products.json").write_text(json.dumps({"products": products}))
    again = run(world, "configure")
    assert again.returncode == 0 and not SIGNING_SECRET.search(again.stdout)
    assert again.stderr.startswith(DEPRECATION + "\nsvc: Product old is disabled")
    assert again.stdout.splitlines()[-1] == "Nothing to apply: the service already matches."
    (world.home / "products.json").write_text(json.dumps([{"slug": "x", "name": "X"}]))
    lacking = refused(world, "configure", exit_code=2)
    assert "lacks priceAtomic" in lacking["message"]
    assert revision_count(world) == 1
