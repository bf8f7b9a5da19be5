"""The ``app``, ``product``, ``order``, ``keys`` and ``export`` groups: the real ``svc``
executable against a real router (SQLite and PostgreSQL), as test_cli_end_to_end does.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tomllib
from typing import Any

from sqlalchemy import select, update

from payments.config.product_match import renamed
from payments.db import transaction
from payments.developer.models import ApiKey
from payments.models import App, Product
from svc.env_file import parse_env
from tests.support.cli_grant import save_grant
from tests.svc.test_cli_end_to_end import SVC, World

PAY_TO = "0x" + "ab" * 20


def run(world: World, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    # stdin is never the terminal pytest runs in: a command that may ask waits for nobody.
    return subprocess.run([SVC, *args, "--api-url", world.url], cwd=world.home,
                          env={**world.env(), **(env or {})}, text=True, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60, check=False)


def ok(world: World, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run with ``--json``, expect exit 0, return the answer."""
    done = run(world, *args, "--json", env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def refused(world: World, *args: str, exit_code: int,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run with ``--json``, expect ``exit_code``, return the error object."""
    done = run(world, *args, "--json", env=env)
    assert done.returncode == exit_code, (args, done.stdout, done.stderr)
    error: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error["exitCode"] == exit_code and error["message"]
    return error


def signed_in(world: World, scopes: str) -> None:
    """As ``svc auth device`` leaves the CLI once approved (tests/support/cli_grant.py)."""
    save_grant(world.sessions, world.developer_id, "game", scopes, world.config, world.url)


def test_app_update_and_upsert_change_only_what_differs(world: World) -> None:
    signed_in(world, "apps:read,apps:write")
    updated = ok(world, "app", "update", "--name", "Space Game", "--headline", "Mine stars",
                 "--kind", "application", "--entry-url", "https://game.example.com/play",
                 "--tags", "space, arcade", "--distribution-targets", "Web,PWA")
    app = updated["app"]
    assert updated["action"] == "updated"
    assert updated["changed"] == ["distributionTargets", "entryUrl", "headline", "name",
                                  "tags", "type"]
    assert (app["name"], app["headline"], app["type"], app["entryUrl"]) == (
        "Space Game", "Mine stars", "Application", "https://game.example.com/play")
    assert (app["tags"], app["distributionTargets"]) == (["space", "arcade"], ["Web", "PWA"])
    assert refused(world, "app", "update", exit_code=2)["code"] == "usage"
    assert run(world, "app", "update", "--kind", "wizard").returncode == 2

    (world.home / "svc.toml").write_text(
        f'app_slug = "game"\nentry_url = "https://game.example.com/play"\npay_to = "{PAY_TO}"\n')
    upserted = ok(world, "app", "upsert", "--name", "Space Game")
    assert (upserted["action"], upserted["changed"]) == ("updated", ["payTo"])
    assert (upserted["app"]["payTo"], upserted["app"]["payToStatus"]) == (PAY_TO, "testing")
    text = run(world, "app", "upsert", "--name", "Space Game")
    assert (text.returncode, text.stdout) == (0, "game already matches; nothing changed.\n")
    again = ok(world, "app", "upsert", "--headline", "New line")
    assert (again["action"], again["changed"]) == ("updated", ["headline"])
    assert ok(world, "app", "show")["app"]["headline"] == "New line"

    # Grants are for one existing app: a new slug is created in the console instead.
    new = refused(world, "app", "upsert", "--slug", "brand-new", "--name", "Brand New",
                  exit_code=3)
    assert new["code"] == "developer_session_required" and "console" in new["message"]
    created = run(world, "app", "create", "--name", "Other")
    assert created.returncode == 3 and "developer console" in created.stderr
    with world.sessions() as session:
        assert session.scalar(select(App).where(App.slug == "brand-new")) is None


def test_a_read_only_grant_cannot_change_the_app(world: World) -> None:
    signed_in(world, "apps:read")
    error = refused(world, "app", "update", "--name", "X", exit_code=3)
    assert error["code"] == "developer_cli_scope_missing"
    assert error["command"] == "svc auth browser --app game --scopes apps:read,apps:write"
    assert refused(world, "product", "create", "--product", "retry", "--name", "Retry",
                   "--price", "0.01", exit_code=3)["code"] == "developer_cli_scope_missing"
    assert refused(world, "keys", "create", exit_code=3)["command"] == \
        "svc auth browser --app game --scopes apps:read,keys:create"


def test_products_create_update_diff_and_upsert(world: World) -> None:
    signed_in(world, "apps:read,products:write")
    assert refused(world, "product", "diff", exit_code=2)["message"].startswith(
        "Which products file?")
    retry = ok(world, "product", "create", "--product", "retry", "--name", "Retry",
               "--price", "0.01")["product"]
    assert (retry["slug"], retry["sku"], retry["priceAtomic"]) == ("retry", "retry", "10000")
    assert retry["paymentRoute"].endswith("/api/pay/game/retry")
    tip = ok(world, "product", "create", "--template", "tip_creator")["product"]
    assert (tip["slug"], tip["pricing"]) == ("tip", "dynamic_order")
    assert "7 decimals" in refused(world, "product", "create", "--product", "x", "--name", "X",
                                   "--price", "0.0000001", exit_code=2)["message"]
    assert refused(world, "product", "create", "--product", "x", exit_code=2)["code"] == "usage"
    assert refused(world, "product", "create", "--product", "retry", "--name", "Again",
                   "--price", "1", exit_code=1)["code"] == "product_exists"
    assert run(world, "product", "create", "--product", "x", "--price", "1",
               "--price-atomic", "1").returncode == 2  # one price flag at a time
    # The service's refusals of priceAtomic name the flag that set it, as order create's do.
    for given, message in [
        (("create", "--product", "x", "--name", "X", "--price", "0"),
         "--price must be greater than zero."),
        (("create", "--product", "x", "--name", "X", "--price-atomic", "0"),
         "--price-atomic must be greater than zero."),
        (("update", "--product", "retry", "--price", "0.000000"),
         "--price must be greater than zero."),
        (("upsert", "--product", "retry", "--price-atomic", "00"),
         "--price-atomic must be greater than zero."),
    ]:
        price = refused(world, "product", *given, exit_code=2)
        assert (price["code"], price["message"]) == ("invalid_amount", message), given
        text = run(world, "product", *given)
        assert "priceAtomic" not in text.stderr + text.stdout, given

    listed = ok(world, "product", "list")["products"]
    assert [p["slug"] for p in listed] == ["retry", "tip"]
    shown = run(world, "product", "list").stdout
    assert "retry  sku retry  Retry  0.010000 USD (10000 atomic)  fixed  active" in shown

    changed = ok(world, "product", "update", "--product", "retry", "--price-atomic", "20000",
                 "--name", "Retry level")
    assert (changed["product"]["priceAtomic"], changed["product"]["name"]) == (
        "20000", "Retry level")
    assert (changed["changed"], changed["warnings"]) == (["name", "priceAtomic"], [])
    # A new slug moves the payment route: the service's warning is shown, text and JSON.
    moved = run(world, "product", "update", "--product", "tip", "--slug", "tip-jar")
    assert moved.returncode == 0, moved.stderr
    assert "Warnings:\n  tip-jar: Product 'tip'" in moved.stdout
    assert "/api/pay/game/tip to /api/pay/game/tip-jar" in moved.stdout
    back = ok(world, "product", "update", "--product", "tip-jar", "--slug", "tip")
    assert [w["code"] for w in back["warnings"]] == ["product_slug_changed"]
    assert refused(world, "product", "update", "--product", "nope", "--name", "X",
                   exit_code=1)["code"] == "product_not_found"
    assert refused(world, "product", "update", "--product", "retry", exit_code=2)["code"] == \
        "usage"

    (world.home / "products.json").write_text(json.dumps({"products": [
        {"slug": "retry", "name": "Retry level", "priceAtomic": "30000"},
        {"slug": "unlock-level", "sku": "unlock", "name": "Unlock Level",
         "priceAtomic": 30000, "riskMode": "settled_first"},
    ]}))
    planned = ok(world, "product", "diff", "--file", "products.json")
    assert planned["inSync"] is False
    assert [(c["change"], c["sku"]) for c in planned["changes"]] == [
        ("~", "retry"), ("+", "unlock"), ("-", "tip")]
    assert planned["changes"][0]["fields"] == {"priceAtomic": {"from": "20000", "to": "30000"}}
    (world.home / "svc.toml").write_text('app_slug = "game"\nproducts_file = "products.json"\n')
    text = run(world, "product", "diff")
    assert text.returncode == 0
    assert text.stdout.splitlines() == [
        "~ retry  retry", '    priceAtomic: "20000" -> "30000"',
        "+ unlock  unlock-level  Unlock Level  30000",
        "- tip  tip  (on the service, not in the file; left as is)"]

    applied = ok(world, "product", "upsert")
    assert [(c["change"], c["sku"]) for c in applied["applied"]] == [("~", "retry"),
                                                                       ("+", "unlock")]
    assert [c["sku"] for c in applied["untouched"]] == ["tip"]
    after = ok(world, "product", "diff")
    assert after["inSync"] is False and [c["change"] for c in after["changes"]] == ["-"]
    with world.sessions() as session:
        prices = {sku: price for sku, price in session.execute(
            select(Product.sku, Product.price_atomic))}
    assert prices == {"retry": 30000, "unlock": 30000, "tip": 10000}

    one = ok(world, "product", "upsert", "--product", "retry", "--price", "0.05")
    assert [c["fields"] for c in one["applied"]] == [
        {"priceAtomic": {"from": "30000", "to": "50000"}}]
    assert one["untouched"] == []
    same = run(world, "product", "upsert", "--product", "retry", "--price", "0.05")
    assert same.stdout.strip() == "game: products already match; nothing changed."

    (world.home / "bad.json").write_text('[{"slug": "retry", "priceAtomic": 0.05}]')
    assert "integer string of atomic units" in refused(
        world, "product", "diff", "--file", "bad.json", exit_code=2)["message"]
    (world.home / "bad.json").write_text('[{"slug": "retry", "price": "0.05"}]')
    assert "unknown field(s) price" in refused(
        world, "product", "upsert", "--file", "bad.json", exit_code=2)["message"]


def test_upsert_matches_by_sku_so_a_new_slug_renames_as_config_apply_does(
        world: World) -> None:
    """A known sku with a new slug is a rename, warned ``product_slug_changed`` with the words
    config apply uses (payments.config.product_match.renamed); a new sku on a held slug is
    a new product, refused ``product_exists``."""
    signed_in(world, "apps:read,products:write")
    made = ok(world, "product", "create", "--product", "retry", "--name", "Retry",
              "--price", "0.01")["product"]
    ok(world, "product", "create", "--product", "boost", "--name", "Boost", "--price", "0.02")

    moved = ok(world, "product", "upsert", "--product", "retry-level", "--sku", "retry")
    assert [(c["change"], c["sku"], c["slug"], c["fields"]) for c in moved["applied"]] == [
        ("~", "retry", "retry-level", {"slug": {"from": "retry", "to": "retry-level"}})]
    assert moved["warnings"] == [renamed("game", Product(slug="retry", sku="retry"),
                                         "retry-level")]
    (world.home / "products.json").write_text(json.dumps([
        {"slug": "retry", "sku": "retry", "name": "Retry", "priceAtomic": "10000"}]))
    back = run(world, "product", "upsert", "--file", "products.json")
    assert back.returncode == 0, back.stderr
    assert back.stdout.splitlines()[:2] == ["~ retry  retry", '    slug: "retry-level" -> "retry"']
    assert "Warnings:\n  retry: Product 'retry-level' (sku 'retry') is renamed to 'retry'" in \
        back.stdout
    with world.sessions() as session:
        assert session.execute(select(Product.id, Product.slug).where(
            Product.sku == "retry")).one() == (made["id"], "retry")  # the same product

    taken = refused(world, "product", "upsert", "--product", "boost", "--sku", "other",
                    "--name", "Other", "--price", "0.01", exit_code=1)
    assert taken["code"] == "product_exists"
    with world.sessions() as session:
        assert sorted(session.scalars(select(Product.sku))) == ["boost", "retry"]


def test_keys_create_update_revoke_and_pull(world: World) -> None:
    signed_in(world, "apps:read,keys:create")
    as_json = run(world, "keys", "create", "--label", "backend", "--scopes",
                  "orders:create,orders:read", "--json")
    assert as_json.returncode == 0, as_json.stderr
    created = json.loads(as_json.stdout)
    secret, key = created["secret"], created["key"]
    assert as_json.stdout.count(secret) == 1 and secret not in as_json.stderr
    assert secret.startswith("zpk_test_") and key["preview"] == f"zpk_test_…{secret[-4:]}"
    assert (key["label"], key["scopes"]) == ("backend", ["orders:create", "orders:read"])

    text = run(world, "keys", "create", "--label", "second", "--env", "live")
    assert text.returncode == 0 and text.stderr == ""
    second = next(w for w in text.stdout.split() if w.startswith("zpk_live_") and "…" not in w)
    assert text.stdout.count(second) == 1 and "shown once" in text.stdout

    listed = run(world, "keys", "list", "--json")
    assert secret not in listed.stdout and second not in listed.stdout
    assert [k["label"] for k in json.loads(listed.stdout)["keys"]] == ["backend", "second"]

    changed = ok(world, "keys", "update", key["id"], "--label", "renamed", "--scopes",
                 "charges:create,orders:create")["key"]
    assert (changed["label"], changed["scopes"]) == ("renamed",
                                                      ["orders:create", "charges:create"])
    assert refused(world, "keys", "update", key["id"], exit_code=2)["code"] == "usage"
    assert refused(world, "keys", "update", key["id"], "--scopes", "settle",
                   exit_code=2)["code"] == "invalid_scope"
    assert refused(world, "keys", "update", "zkey_missing", "--label", "x",
                   exit_code=1)["code"] == "key_not_found"

    assert "--yes" in refused(world, "keys", "revoke", key["id"], exit_code=2)["message"]
    with world.sessions() as session:
        assert session.get(ApiKey, key["id"]).revoked_at is None  # type: ignore[union-attr]
    gone = ok(world, "keys", "revoke", key["id"], "--yes")["key"]
    assert gone["revokedAt"] is not None
    assert refused(world, "keys", "update", key["id"], "--label", "x",
                   exit_code=1)["code"] == "key_revoked"

    pulled = ok(world, "keys", "pull")
    assert pulled["usable"] is False and pulled["path"] == "svc-keys.env"
    written = world.home / "svc-keys.env"
    content = written.read_text()
    assert secret not in content and second not in content
    assert f"zpk_live_…{second[-4:]}" in content  # the active key's preview, as a comment
    assert key["id"] not in content  # revoked keys are not offered
    assert "NOT a usable key" in content and "svc keys create --app game" in content
    assert parse_env(content) == {"SVC_API_KEY": ""}
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert "exists" in refused(world, "keys", "pull", exit_code=2)["message"]
    assert ok(world, "keys", "pull", "--force", "--output", "other.env")["path"] == "other.env"


def test_order_create_uses_the_backend_key_and_never_prints_it(world: World) -> None:
    signed_in(world, "apps:read,products:write,keys:create")
    product = ok(world, "product", "create", "--product", "retry", "--name", "Retry",
                 "--price", "0.01")["product"]
    ok(world, "product", "create", "--template", "tip_creator")
    secret = ok(world, "keys", "create", "--scopes", "orders:create")["secret"]
    reader = ok(world, "keys", "create", "--scopes", "orders:read")["secret"]
    args = ("order", "create", "--product", "retry", "--developer-user", "user-1")

    assert "No SVC_API_KEY" in refused(world, *args, exit_code=2)["message"]
    with_key = {"SVC_API_KEY": secret}
    done = run(world, *args, "--idempotency", "k-1", "--json", env=with_key)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    first = json.loads(done.stdout)
    assert first["order"]["id"].startswith("zord_")
    assert (first["order"]["status"], first["order"]["amountAtomic"]) == ("created", "10000")
    assert first["product"]["paymentUrl"].endswith("/api/pay/game/retry")
    assert first["idempotencyKey"] == "k-1"
    replay = ok(world, *args, "--idempotency", "k-1", env=with_key)
    assert replay["order"]["id"] == first["order"]["id"]
    fresh = ok(world, *args, env=with_key)
    assert fresh["order"]["id"] != first["order"]["id"]
    assert fresh["idempotencyKey"].startswith("svc-cli:retry:")

    (world.home / "backend.env").write_text(f"SVC_API_KEY={secret}\n")
    by_id = run(world, "order", "create", "--product", product["id"], "--developer-user", "u2",
                "--env-file", "backend.env", env={"SVC_API_KEY": ""})
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout.startswith("Created order zord_") and secret not in by_id.stdout
    tip = ok(world, "order", "create", "--product", "tip", "--developer-user", "u3",
             "--amount", "2.5", env=with_key)
    assert tip["order"]["amountAtomic"] == "2500000"
    tip_atomic = ok(world, "order", "create", "--product", "tip", "--developer-user", "u3",
                    "--amount-atomic", "20000", env=with_key)
    assert tip_atomic["order"]["amountAtomic"] == "20000"

    assert "7 decimals" in refused(world, *args, "--amount", "0.0000001", exit_code=2,
                                   env=with_key)["message"]
    # The service's refusals of amountAtomic name the flag that set it.
    tip_args = ("order", "create", "--product", "tip", "--developer-user", "u3")
    for given, message in [
        ((*args, "--amount", "0.02"),
         "This product has a fixed price; omit --amount or send the price."),
        ((*args, "--amount-atomic", "20000"),
         "This product has a fixed price; omit --amount-atomic or send the price."),
        (tip_args, "This product is priced per order: send --amount USD (or --amount-atomic "
                   "N)."),
        ((*tip_args, "--amount-atomic", "5"), "--amount-atomic must be between 10000 and "
                                              "10000000."),
        ((*tip_args, "--amount", "20"), "--amount must be between 10000 and 10000000 (atomic "
                                        "units; --amount 20 is 20000000)."),
    ]:
        amount = refused(world, *given, exit_code=2, env=with_key)
        assert amount["message"] == message, given
        assert amount["code"] in ("invalid_amount", "missing_field")
    masked = refused(world, *args, exit_code=2, env={"SVC_API_KEY": f"zpk_test_…{secret[-4:]}"})
    assert "masked" in masked["message"]
    wrong = refused(world, *args, exit_code=4, env={"SVC_API_KEY": "zpk_test_" + "0" * 48})
    assert wrong["code"] == "valid_api_key_required" and "SVC_API_KEY" in wrong["message"]
    scope = refused(world, *args, exit_code=3, env={"SVC_API_KEY": reader})
    assert (scope["code"], scope["command"]) == ("api_key_scope_missing",
                                                 "svc keys create --scopes orders:create")
    assert reader not in json.dumps(scope)
    assert refused(world, "order", "create", "--product", "nope", "--developer-user", "u",
                   exit_code=2, env=with_key)["code"] == "product_not_found"
    assert run(world, "order", "create", "--product", "retry").returncode == 2


def test_export_dotenv_toml_and_products(world: World) -> None:
    signed_in(world, "apps:read,products:write")
    with transaction(world.sessions) as session:
        session.execute(update(App).where(App.slug == "game").values(
            pay_to=PAY_TO, runtime_origin="https://game.example.com", entry_url="https://e.x/"))
    ok(world, "product", "create", "--product", "retry", "--name", "Retry", "--price", "0.01")
    (world.home / "svc.toml").write_text(
        'app_slug = "game"\nwebhook_url = "https://game.example.com/api/svc/webhook"\n')
    app = ok(world, "app", "show")["app"]

    exported = ok(world, "export", "--format", "dotenv")
    assert (exported["app"], exported["format"]) == ("game", "dotenv")
    env = parse_env(exported["content"])
    assert env == {
        "SVC_APP_ID": app["id"], "SVC_APP_SLUG": "game", "SVC_PAY_TO": PAY_TO,
        "SVC_RUNTIME_ORIGIN": "https://game.example.com", "SVC_RUNTIME_APP_PATH": "/",
        "SVC_RETURN_URL": f"{app['runtime']['url']}/svc-auth-return?app=game",
        "SVC_WEBHOOK_SECRET": "", "SVC_API_KEY": "",
        "SVC_WEBHOOK_URL": "https://game.example.com/api/svc/webhook", "DATABASE_URL": "",
        # the SDK's service URLs: the API in effect; no portal guessed for a bare address
        "SVC_API_URL": world.url, "SVC_PORTAL_URL": ""}
    assert "`svc config apply` or `svc webhook upsert` (or `rotate`)" in exported["content"]
    plain = run(world, "export", "--format", "dotenv")
    assert plain.stdout == exported["content"]

    written = ok(world, "export", "--format", "dotenv", "--output", "app.env")
    assert (written["path"], written["updated"]) == ("app.env", False)
    assert stat.S_IMODE((world.home / "app.env").stat().st_mode) == 0o600
    # The exported file is a starting point: doctor says the secret is still to fill in.
    doctor = run(world, "doctor", "--env-file", "app.env", "--env", "local", "--json")
    assert doctor.returncode == 1
    assert [(f["code"], f["key"]) for f in json.loads(doctor.stdout)["findings"]] == [
        ("missing_variable", "SVC_WEBHOOK_SECRET")]

    ok(world, "export", "--format", "toml", "--output", "exported.toml")
    with (world.home / "exported.toml").open("rb") as handle:
        toml = tomllib.load(handle)
    assert toml == {"api_url": world.url, "app_slug": "game", "entry_url": "https://e.x/",
                    "pay_to": PAY_TO,
                    "webhook_url": "https://game.example.com/api/svc/webhook",
                    "products_file": "products.json",
                    "runtime": {"origin": "https://game.example.com"}}

    ok(world, "export", "--format", "products-json", "--output", "products.json")
    products = json.loads((world.home / "products.json").read_text())["products"]
    assert [(p["sku"], p["priceAtomic"]) for p in products] == [("retry", "10000")]
    assert "id" not in products[0] and "paymentRoute" not in products[0]
    assert ok(world, "product", "diff", "--file", "products.json")["inSync"] is True
    assert "exists" in refused(world, "export", "--format", "toml", "--output",
                               "exported.toml", exit_code=2)["message"]
    assert run(world, "export", "--format", "yaml").returncode == 2


def test_export_dotenv_updates_an_existing_file_in_place(world: World) -> None:
    """What `svc init` wrote, with the developer's secrets and own lines, survives an export;
    the values the service knows are brought up to date; --force replaces the file."""
    signed_in(world, "apps:read")
    with transaction(world.sessions) as session:
        session.execute(update(App).where(App.slug == "game").values(
            pay_to=PAY_TO, runtime_origin="https://game.example.com"))
    secret, key = "zwhsec_" + "3" * 64, "zpk_test_" + "4" * 48
    env_file = world.home / ".env"
    env_file.write_text(
        "# mine\nSVC_APP_SLUG=game\nSVC_RUNTIME_ORIGIN=\nexport SVC_PAY_TO=0xold\n"
        f"SVC_WEBHOOK_SECRET={secret}\nSVC_API_KEY='{key}'\nDATABASE_URL=sqlite:///game.db\n"
        "SVC_PORTAL_URL=https://portal.example.com\nGAME_MODE=hard  # my own\n"
        "a line no dotenv tool reads\n")
    env_file.chmod(0o644)
    updated = ok(world, "export", "--format", "dotenv", "--output", ".env")
    assert updated["updated"] is True and updated["emptySecrets"] == []
    assert updated["changed"] == ["SVC_RUNTIME_ORIGIN", "SVC_PAY_TO"]
    assert updated["added"] == ["SVC_APP_ID", "SVC_RUNTIME_APP_PATH", "SVC_RETURN_URL",
                                "SVC_WEBHOOK_URL", "SVC_API_URL"]
    text = env_file.read_text()
    assert text.startswith("# mine\nSVC_APP_SLUG=game\n"
                           "SVC_RUNTIME_ORIGIN=https://game.example.com\n"
                           f"export SVC_PAY_TO={PAY_TO}\nSVC_WEBHOOK_SECRET={secret}\n"
                           f"SVC_API_KEY='{key}'\nDATABASE_URL=sqlite:///game.db\n"
                           "SVC_PORTAL_URL=https://portal.example.com\n"
                           "GAME_MODE=hard  # my own\na line no dotenv tool reads\n"), text
    env = parse_env(text.replace("a line no dotenv tool reads\n", ""))
    assert (env["SVC_API_URL"], env["SVC_WEBHOOK_SECRET"], env["SVC_API_KEY"]) == (
        world.url, secret, key)
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # it holds secrets now
    again = run(world, "export", "--format", "dotenv", "--output", ".env")
    assert again.returncode == 0 and again.stdout == ".env is up to date (dotenv, mode 0600).\n"
    assert secret not in again.stdout + again.stderr and key not in again.stdout + again.stderr

    replaced = ok(world, "export", "--format", "dotenv", "--output", ".env", "--force")
    assert replaced["updated"] is False
    assert replaced["emptySecrets"] == ["SVC_WEBHOOK_SECRET", "SVC_API_KEY"]
    assert secret not in env_file.read_text() and "GAME_MODE" not in env_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600


def test_export_never_writes_secrets_from_the_environment(world: World) -> None:
    signed_in(world, "apps:read")
    leaked = {"SVC_API_KEY": "zpk_test_" + "1" * 48, "SVC_WEBHOOK_SECRET": "zwhsec_" + "2" * 40}
    done = run(world, "export", "--format", "dotenv", env={**os.environ, **leaked})
    assert done.returncode == 0, done.stderr
    assert all(value not in done.stdout for value in leaked.values())
