"""The console's organization keys page (/keys): the secret once, previews after, revoke."""

from __future__ import annotations

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.models import ApiKey
from tests.factories import add_developer, add_member, add_owned_app
from tests.portal.conftest import PASSWORD, Console, csrf_of, key_form_of, log_in

XSS = "<script>alert(1)</script>"


def _post(client: httpx.Client, path: str, data: dict[str, object],
          page: str = "/keys") -> httpx.Response:
    shown = client.get(page)
    # As a browser would: the tokens of the page's form, a create-key form's own included.
    tokens = key_form_of(shown) if path.endswith("/keys") or path == "/keys/new" else {
        "csrf": csrf_of(shown)}
    return client.post(path, data={**tokens, **data})


def test_organization_keys_page(console: Console, developer: tuple[str, str],
                                sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game")
    with console.client() as client:
        log_in(client)
        empty = client.get("/keys")
        assert empty.status_code == 200 and "No API keys yet." in empty.text
        assert 'href="/keys"' in client.get("/apps").text  # reachable from every page

        no_scopes = _post(client, "/keys/new", {"label": "x", "environment": "test"})
        assert no_scopes.status_code == 422 and "invalid_scope" in no_scopes.text
        created = _post(client, "/keys/new", {"label": XSS, "environment": "live",
                                          "scope": ["orders:read", "deliveries:read"]})
        assert created.status_code == 200, created.text
        assert created.headers["cache-control"] == "no-store"
        assert XSS not in created.text and "&lt;script&gt;" in created.text
        assert "<dt>Organization</dt><dd>dev1</dd>" in created.text
        secret = created.text.split('id="secret" class="secret">')[1].split("<")[0]
        assert secret.startswith("zpk_live_") and len(secret) > 40

        listed = client.get("/keys")
        assert secret not in listed.text and f"zpk_live_…{secret[-4:]}" in listed.text
        assert "orders:read, deliveries:read" in listed.text and "active" in listed.text
        app_page = client.get("/apps/game")
        assert f"…{secret[-4:]}" not in app_page.text  # not one of the app's keys

        with sessions() as session:
            key = session.scalars(select(ApiKey)).one()
        assert key.app_id is None and key.organization_id == developer[1]
        bare = client.post(f"/keys/{key.id}/revoke", data={"csrf": "not-the-token"})
        assert bare.status_code == 403 and "csrf_failed" in bare.text
        revoked = _post(client, f"/keys/{key.id}/revoke", {})
        assert revoked.status_code == 303
        assert revoked.headers["location"] == "/keys?done=key-revoked#keys"
        after = client.get("/keys?done=key-revoked")
        assert "Organization key revoked" in after.text and "revoked" in after.text
        assert f'/keys/{key.id}/revoke"' not in after.text and secret not in after.text
    with console.client() as api:
        refused = api.get("/api/orders/zord_nope", headers={"host": console.host("api"),
                                                            "authorization": f"Bearer {secret}"})
        assert refused.status_code == 401

    add_developer(sessions, "dev2", PASSWORD)
    with console.client() as stranger:
        log_in(stranger, "dev2")
        assert f"…{secret[-4:]}" not in stranger.get("/keys").text
        theirs = _post(stranger, f"/keys/{key.id}/revoke", {})
        assert theirs.status_code == 404 and "key_not_found" in theirs.text


def test_a_member_of_two_organizations_sees_each_keys_organization(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    _, rival_org = add_developer(sessions, "dev2", PASSWORD)
    rival = "Rival <b>&</b> Co"
    add_member(sessions, rival_org, developer[0], name=rival)
    shown = "Rival &lt;b&gt;&amp;&lt;/b&gt; Co"
    with console.client() as client:
        log_in(client)
        secrets = {}
        for organization, label in ((developer[1], "ours"), (rival_org, "theirs")):
            created = _post(client, "/keys/new", {
                "organizationId": organization, "label": label, "environment": "test",
                "scope": ["orders:read"]})
            assert created.status_code == 200, created.text
            secrets[label] = created.text.split('id="secret" class="secret">')[1].split("<")[0]
        assert f"<dt>Organization</dt><dd>{shown}</dd>" in created.text

        listed = client.get("/keys").text
        assert rival not in listed and "<b>" not in listed
        keys = listed.split("Keys of your organizations", 1)[1].split(
            "Create an organization key", 1)[0]
        ours, theirs = keys.split(f"<h3>{shown}</h3>")
        assert "<h3>dev1</h3>" in ours
        # Each key under its own organization's name, by its masked preview only.
        assert "ours" in ours and f"…{secrets['ours'][-4:]}" in ours and "theirs" not in ours
        assert "theirs" in theirs and f"…{secrets['theirs'][-4:]}" in theirs
        assert "ours" not in theirs
        for secret in secrets.values():
            assert secret not in listed
    with console.client() as other:  # dev2 is in the rival organization alone
        log_in(other, "dev2")
        alone = other.get("/keys").text
        assert f"Keys of organization {shown}</h2>" in alone
        assert f"…{secrets['theirs'][-4:]}" in alone and f"…{secrets['ours'][-4:]}" not in alone


def test_a_key_forms_target_opened_as_a_page_leads_back_to_its_list(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    """Back or reload on the secret page asks for the form's target with GET: the list it
    came from, not a 405, and never the secret again."""
    add_owned_app(sessions, developer[1], "game")
    with console.client() as client:
        log_in(client)
        for target, back in (("/keys/new", "/keys#keys"), ("/apps/game/keys",
                                                          "/apps/game#keys")):
            opened = client.get(target, follow_redirects=False)
            assert (opened.status_code, opened.headers["location"]) == (303, back), target
            assert client.get(back.split("#")[0]).status_code == 200
