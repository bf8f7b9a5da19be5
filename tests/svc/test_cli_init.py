"""``svc init DIR``: the real ``svc`` executable against a real router (SQLite and
PostgreSQL), with the world and helpers of test_cli_groups and test_cli_config."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib

from sqlalchemy import select

from examples.reference_app.catalogue import Catalogue
from payments.models import App
from svc.env_file import parse_env
from tests.svc.test_cli_config import HOOK, ORIGIN, SIGNING_SECRET
from tests.svc.test_cli_end_to_end import REPO, SVC, World
from tests.svc.test_cli_groups import PAY_TO, ok, refused, run, signed_in

SOURCES = REPO / "examples" / "reference_app"


def copied_sources() -> set[str]:
    return {str(p.relative_to(SOURCES)) for p in SOURCES.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_init_writes_the_reference_app_and_the_app_as_files(world: World) -> None:
    signed_in(world, "apps:read,apps:write,products:write,webhooks:write,runtime:write")
    ok(world, "app", "update", "--pay-to", PAY_TO)
    ok(world, "product", "create", "--product", "retry", "--name", "Retry", "--price", "0.01")
    ok(world, "runtime", "configure", "--origin", ORIGIN)
    secret = ok(world, "webhook", "upsert", "--url", HOOK)["secret"]

    made = ok(world, "init", "game-server")
    target = world.home / "game-server"
    assert (made["source"], made["app"], made["directory"]) == ("app", "game", "game-server")
    written = set(made["files"])
    assert {"svc.config.json", "svc.toml", ".env", ".gitignore"} <= written
    assert {f"reference_app/{name}" for name in copied_sources()} <= written
    assert (target / "reference_app" / "static" / "app.js").read_bytes() == (
        SOURCES / "static" / "app.js").read_bytes()
    for path in (target / "reference_app").rglob("*.py"):
        assert "examples.reference_app" not in path.read_text(), path  # a package of its own

    # svc.config.json and svc.toml say what the app is, as `svc config init` does.
    document = json.loads((target / "svc.config.json").read_text())
    assert document["app"]["payTo"] == PAY_TO
    assert document["webhooks"] == [{"url": HOOK, "events": ["payment.delivered"]}]
    assert document["runtime"]["origin"] == ORIGIN
    project = tomllib.loads((target / "svc.toml").read_text())
    assert (project["api_url"], project["app_slug"], project["products_file"]) == (
        world.url, "game", "svc.config.json")
    # The .env of `svc export`: values, empty secrets, readable by its owner only.
    env = dict(line.split("=", 1) for line in (target / ".env").read_text().splitlines()
               if line and not line.startswith("#"))
    with world.sessions() as session:
        app_id = session.scalar(select(App.id).where(App.slug == "game"))
    assert (env["SVC_APP_ID"], env["SVC_APP_SLUG"], env["SVC_PAY_TO"]) == (app_id, "game", PAY_TO)
    assert (env["SVC_RUNTIME_ORIGIN"], env["SVC_WEBHOOK_URL"]) == (ORIGIN, HOOK)
    assert env["SVC_WEBHOOK_SECRET"] == "" and env["SVC_API_KEY"] == ""
    # The SDK's service URLs: the API in effect; no portal guessed for a bare address.
    assert (env["SVC_API_URL"], env["SVC_PORTAL_URL"]) == (world.url, "")
    assert stat.S_IMODE((target / ".env").stat().st_mode) == 0o600
    assert ".env" in (target / ".gitignore").read_text().split()
    everything = "".join(p.read_text() for p in target.iterdir() if p.is_file())
    assert secret not in everything and not SIGNING_SECRET.search(everything)

    # Ready for `svc config plan/apply` from the new directory: nothing to change.
    planned = subprocess.run([SVC, "config", "plan", "--json", "--api-url", world.url],
                             cwd=target, env=world.env(), text=True, capture_output=True,
                             timeout=60, check=False)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["plan"]["summary"]["create"] == 0

    # The steps printed are the ones that work, pasted in order (the app started by hand).
    assert made["next"] == [
        "cd game-server",
        "svc config plan && svc config apply   # products, webhook, runtime origin",
        "svc keys create --label backend --scopes orders:create,orders:read,receipts:read,"
        "deliveries:read,charges:create,connections:create,connections:read",
        "svc export --format dotenv --output .env   # updates it; then add the two secrets "
        "shown once",
        "svc product list --json > catalogue.json   # the product ids orders and trusted "
        "charges need",
        "set -a; . ./.env; set +a; python -m reference_app --host 127.0.0.1 --port 8787 "
        "--products catalogue.json",
        "svc runtime verify && svc runtime request-domain   # in another terminal, here"]
    exported = subprocess.run([SVC, "export", "--format", "dotenv", "--output", ".env",
                               "--json", "--api-url", world.url], cwd=target, env=world.env(),
                              text=True, capture_output=True, timeout=60, check=False)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["updated"] is True
    assert parse_env((target / ".env").read_text())["SVC_API_URL"] == world.url
    with (target / "catalogue.json").open("w") as catalogue:  # the step's `>`
        listed = subprocess.run([SVC, "product", "list", "--json", "--api-url", world.url],
                                cwd=target, env=world.env(), stdout=catalogue, timeout=60,
                                check=False)
    assert listed.returncode == 0
    sold = Catalogue.from_file(target / "catalogue.json").by_slug("retry")
    assert sold is not None and sold.product_id is not None  # orders and charges need it

    # The copy runs on its own: a missing variable is named (its settings module loaded).
    started = subprocess.run([sys.executable, "-m", "reference_app", "--port", "1"],
                             cwd=target, env={k: v for k, v in world.env().items()
                                              if not k.startswith("SVC_")},
                             text=True, capture_output=True, timeout=60, check=False)
    assert started.returncode == 2, started.stderr
    assert "SVC_APP_ID" in started.stderr


def test_init_refuses_a_directory_that_is_not_empty(world: World) -> None:
    signed_in(world, "apps:read")
    target = world.home / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    error = refused(world, "init", "busy", exit_code=2)
    assert "not empty" in error["message"] and "--force" in error["message"]
    assert sorted(os.listdir(target)) == ["notes.txt"]  # nothing was written

    forced = ok(world, "init", "busy", "--force")
    assert forced["source"] == "app"
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "reference_app" / "app.py").is_file()
    assert refused(world, "init", "busy/notes.txt", exit_code=2)["message"].endswith(
        "is a file, not a directory; nothing was written.")


def test_init_without_a_grant_writes_a_template_and_the_commands(world: World) -> None:
    made = ok(world, "init", "new-game", "--app", "space-race")
    target = world.home / "new-game"
    assert (made["source"], made["app"]) == ("template", "space-race")
    assert made["next"][0].startswith("create the app 'space-race' in the developer console, "
                                      "then: svc auth browser --app space-race --scopes ")
    assert any(step.startswith("svc config plan && svc config apply") for step in made["next"])
    assert "Not signed in" in made["notes"][0]
    document = json.loads((target / "svc.config.json").read_text())
    assert (document["schemaVersion"], document["app"]["slug"]) == ("svc.config.v1",
                                                                   "space-race")
    env = (target / ".env").read_text()
    assert "SVC_APP_SLUG=space-race\n" in env and "\nSVC_WEBHOOK_SECRET=\n" in env
    text = run(world, "init", "other", "--app", "space-race")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].startswith("Wrote ")
    assert text.stdout.splitlines()[-1] == (
        "  svc runtime verify && svc runtime request-domain   # in another terminal, here")
