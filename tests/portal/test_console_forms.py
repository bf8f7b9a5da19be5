"""Console forms show the domain's error on the form, escaped, and never answer 500."""

from __future__ import annotations

from html import escape

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.models import ApiKey, NotificationKind, OperatorNotification
from payments.models import App, PayToStatus, Product, RiskMode
from tests.factories import add_developer, add_owned_app
from tests.portal.conftest import Console, csrf_of, key_form_of, log_in

XSS = "<script>alert(1)</script>"


def _post(client: httpx.Client, path: str, data: dict[str, object],
          page: str = "/apps/game") -> httpx.Response:
    shown = client.get(page)
    # As a browser would: the tokens of the page's form, a create-key form's own included.
    tokens = key_form_of(shown) if path.endswith("/keys") or path == "/keys/new" else {
        "csrf": csrf_of(shown)}
    return client.post(path, data={**tokens, **data})


def test_forms_show_domain_errors_and_apply_changes(console: Console, developer: tuple[str, str],
                                                    sessions: sessionmaker[Session]) -> None:
    _, other_org = add_developer(sessions, "dev2")
    add_owned_app(sessions, other_org, "theirs")
    with console.client() as client:
        log_in(client)
        reserved = _post(client, "/apps/new", {"name": "Admin"}, "/apps/new")
        assert reserved.status_code == 422 and "reserved_slug" in reserved.text
        assert 'value="Admin"' in reserved.text
        made = _post(client, "/apps/new", {"name": "Game", "type": "Application"}, "/apps/new")
        assert made.status_code == 303

        bad = _post(client, "/apps/game/pay-to", {"payTo": XSS})
        assert bad.status_code == 422 and "invalid_pay_to" in bad.text
        assert XSS not in bad.text and "&lt;script&gt;" in bad.text
        assert _post(client, "/apps/game/products", {"template": "zent"}).status_code == 303
        again = _post(client, "/apps/game/products", {"template": "zent"})
        assert again.status_code == 409 and "product_exists" in again.text
        policy = _post(client, "/apps/game/products/zent", {
            "riskMode": "settled_first", "trustedEnabled": "on", "maxAmountAtomic": "50000"})
        assert policy.status_code == 303
        assert "0.05 USDC" in client.get("/apps/game").text
        wrong = _post(client, "/apps/game/products/zent", {"riskMode": "yolo"})
        assert wrong.status_code == 422 and "riskMode" in wrong.text

        no_scopes = _post(client, "/apps/game/keys", {"label": "x", "environment": "test"})
        assert no_scopes.status_code == 422 and "invalid_scope" in no_scopes.text
        key = _post(client, "/apps/game/keys", {"label": XSS, "environment": "live",
                                                 "scope": ["orders:read", "charges:create"]})
        assert key.status_code == 200 and "zpk_live_" in key.text and XSS not in key.text
        with sessions() as session:
            key_id = session.scalars(select(ApiKey.id)).one()
        assert _post(client, f"/apps/game/keys/{key_id}/revoke", {}).status_code == 303
        assert "revoked" in client.get("/apps/game").text

        for path in ("/apps/theirs", "/apps/nope"):
            hidden = client.get(path)
            assert hidden.status_code == 404 and "app_not_found" in hidden.text
        stolen = _post(client, "/apps/theirs/pay-to", {"payTo": "0x" + "1" * 40})
        assert stolen.status_code == 404
        unknown = client.get("/cli/approve?code=ABCD-EFGH")
        assert unknown.status_code == 404 and "cli_request_not_found" in unknown.text

    with sessions() as session:
        game = session.scalars(select(App).where(App.slug == "game")).one()
        assert game.type.value == "Application" and game.pay_to_status == PayToStatus.UNBOUND
        assert session.scalars(select(App.pay_to).where(App.slug == "theirs")).one() is None
        zent = session.scalars(select(Product)).one()
        assert zent.risk_mode == RiskMode.SETTLED_FIRST and zent.trusted_charge_enabled
        assert not zent.trusted_charge_proof_required and zent.trusted_charge_max_atomic == 50000
        kinds = session.scalars(select(OperatorNotification.kind)
                                .where(OperatorNotification.app_id == game.id)).all()
        assert kinds == [NotificationKind.DEVELOPER_APP_REQUESTED]


def test_the_new_app_form_takes_a_slug_and_speaks_of_the_name_typed(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    with console.client() as client:
        log_in(client)
        form = client.get("/apps/new")
        assert 'name="slug"' in form.text and "Leave it blank to make it from the name" in form.text
        for name in ("Статистика", "!!!"):
            refused = _post(client, "/apps/new", {"name": name, "slug": ""}, "/apps/new")
            assert refused.status_code == 422 and "invalid_slug" in refused.text
            assert f"Could not make an address from the name &#x27;{escape(name)}&#x27;; " \
                   "choose a slug" in refused.text, refused.text
            assert "&#x27;&#x27; is not a valid app slug" not in refused.text
        reserved = _post(client, "/apps/new", {"name": "Admin"}, "/apps/new")
        assert "The name &#x27;Admin&#x27; makes the slug &#x27;admin&#x27;" in reserved.text
        assert "explicit slug" not in reserved.text
        # what was typed comes back, with the slug a blank field would get as its placeholder
        assert 'value="Admin"' in reserved.text and 'placeholder="admin"' in reserved.text
        bad = _post(client, "/apps/new", {"name": "Stats", "slug": "Stats Game"}, "/apps/new")
        assert bad.status_code == 422 and "&#x27;Stats Game&#x27; is not a valid app slug" \
            in bad.text and 'value="Stats Game"' in bad.text
        made = _post(client, "/apps/new", {"name": "Статистика", "slug": "stats"}, "/apps/new")
        assert (made.status_code, made.headers["location"]) == (303, "/apps/stats?done=created")
        again = _post(client, "/apps/new", {"name": "Stats"}, "/apps/new")
        assert again.status_code == 409 and "made from the name &#x27;Stats&#x27;" in again.text
    with sessions() as session:
        assert session.scalars(select(App.name).where(App.slug == "stats")).one() == "Статистика"


def test_a_cli_sign_in_for_an_app_not_in_the_organization_can_only_be_denied(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game")
    _, other_org = add_developer(sessions, "dev2")
    add_owned_app(sessions, other_org, "theirs")
    with console.client("api") as api, console.client() as client:
        log_in(client)
        for slug in ("nope-app", "theirs"):  # missing, or another organization's: alike
            started = api.post("/api/developer/cli/auth-requests", json={"app": slug}).json()
            code = started["userCode"]
            page = client.get(f"/cli/approve?code={code}")
            assert page.status_code == 200
            assert f"There is no app <code>{slug}</code> in your organization" in page.text
            assert 'value="approve"' not in page.text and 'value="deny"' in page.text
            assert "<code>game</code>" in page.text  # the apps the CLI could name instead
            assert api.post("/api/developer/cli/token", json={
                "deviceCode": started["deviceCode"]}).json()["code"] == "authorization_pending"
            denied = client.post("/cli/approve", data={
                "csrf": csrf_of(page), "code": code, "decision": "deny"})
            assert denied.status_code == 200 and "CLI sign-in denied" in denied.text
            assert f"no app <code>{slug}</code>" not in denied.text
            ended = api.post("/api/developer/cli/token", json={"deviceCode": started["deviceCode"]})
            assert (ended.status_code, ended.json()["code"]) == (403, "access_denied")
        # an app of the organization still gets both buttons
        mine = api.post("/api/developer/cli/auth-requests", json={"app": "game"}).json()
        page = client.get(f"/cli/approve?code={mine['userCode']}")
        assert 'value="approve"' in page.text and "There is no app" not in page.text


def test_signed_out_visitors_are_sent_to_log_in(console: Console) -> None:
    with console.client() as client:
        for path in ("/apps", "/apps/new", "/device", "/cli/approve?code=ABCD-EFGH"):
            answer = client.get(path)
            assert answer.status_code == 303 and answer.headers["location"].startswith(
                "/login?next=/"), path
        page = client.get("/login?next=//evil.example/")
        assert 'name="next" value=""' in page.text


def test_the_verify_page_names_only_an_email_address(console: Console) -> None:
    """"We sent a 6-digit code to <email>" comes from the link: anyone can write one, so
    text that is not an address would be their words on the console's page."""
    spoof = "you. Your account is suspended: call +1 555 0100 to keep it"
    with console.client() as client:
        page = client.get("/verify", params={"email": spoof, "sent": "1"})
        assert page.status_code == 200
        assert "suspended" not in page.text and "We sent" not in page.text
        page = client.get("/verify", params={"email": "dev@example.com", "sent": "1"})
        assert "We sent a 6-digit code to dev@example.com." in page.text
        assert 'value="dev@example.com"' in page.text
