"""The console's config revision pages against a real router, on SQLite and PostgreSQL:
revisions made through the real configuration API, listed newest first a page at a time,
one revision's ops and config shown escaped, and nothing of another app's revision."""

from __future__ import annotations

import copy
import html
import json
import re
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.config.document import WITHHELD
from payments.config.models import ConfigRevision
from payments.db import transaction, utcnow
from payments.models import App
from tests.config.test_config_api import config
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.portal.conftest import Console, log_in
from tests.portal.test_console_csp import assert_strict_page

P = "/api/developer/config"
ROW_RE = re.compile(r'<tr><td><a href="/apps/arcade/config/(zcfgrev_\w+)">#(\d+)</a>')
PRE_RE = re.compile(r"<pre><code>(.*?)</code></pre>", re.S)
HOSTILE = "</code></pre><script>alert(1)</script>"


def session_client(console: Console, sessions: sessionmaker[Session],
                   developer_id: str) -> httpx.Client:
    """The console host as a signed-in developer: the pages, and the config API's writes
    (a session's CSRF token in its header, as the console's own scripts would send it)."""
    cookie, csrf = open_console_session(sessions, developer_id)
    return httpx.Client(base_url=console.url, timeout=15, follow_redirects=False, headers={
        "host": console.host("console"), "x-csrf-token": csrf,
        "cookie": f"svc_console={cookie}"})


def apply(client: httpx.Client, document: dict[str, Any], base: str | None,
          mode: str = "merge") -> dict[str, Any]:
    answer = client.post(f"{P}/apply", json={"config": document, "mode": mode,
                                             "baseRevision": base})
    assert answer.status_code == 201, answer.text
    revision: dict[str, Any] = answer.json()["revision"]
    return revision


def listed(text: str) -> list[tuple[str, int]]:
    return [(i, int(n)) for i, n in ROW_RE.findall(text)]


def three_revisions(client: httpx.Client) -> list[dict[str, Any]]:
    """#1 creates everything; #2 (mirror) edits a price, names the app with markup and
    disables what it leaves out; #3 rolls back to #1."""
    first = apply(client, config(), None)
    second_doc = config(products=[{"slug": "retry", "name": "Retry", "priceAtomic": "20000"}],
                        webhooks=[], metadata={"note": HOSTILE})
    second_doc["app"]["name"] = "Arcade <b>Deluxe</b>"
    second = apply(client, second_doc, first["id"], "mirror")
    answer = client.post(f"{P}/rollback", json={"revision": first["id"],
                                                "baseRevision": second["id"]})
    assert answer.status_code == 201, answer.text
    return [first, second, answer.json()["revision"]]


def test_revisions_are_listed_newest_first_and_each_shows_its_ops_and_config(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    with session_client(console, sessions, developer[0]) as client:
        first, second, third = three_revisions(client)
        app_page = client.get("/apps/arcade")
        assert 'href="/apps/arcade/config"' in app_page.text

        page = client.get("/apps/arcade/config")
        assert page.status_code == 200
        assert_strict_page(page)
        text = page.text
        assert listed(text) == [(third["id"], 3), (second["id"], 2), (first["id"], 1)]
        rows = text.split("<tr>")[2:]  # after the header row: #3, #2, #1
        assert "dev1 <span class=\"hint\">(console)</span>" in rows[0]
        assert f'<a href="/apps/arcade/config/{first["id"]}">#1</a></td></tr>' in rows[0]
        assert "<td>mirror</td>" in rows[1] and "<td>merge</td>" in rows[2]
        assert "5 created</td>" in rows[2]
        assert "2 updated · 2 disabled · 1 unchanged</td>" in rows[1]
        assert rows[1].endswith("<td>—</td></tr>")  # not a rollback
        assert "Older revisions" not in text and "Newest revisions" not in text

        detail = client.get(f"/apps/arcade/config/{second['id']}")
        assert detail.status_code == 200
        assert_strict_page(detail)
        shown = detail.text
        assert "<h1>Config revision #2</h1>" in shown and second["id"] in shown
        assert "mirror (also disables what the file leaves out)" in shown
        assert ("<tr><td>update</td><td>product</td><td><code>retry</code></td><td>"
                "<ul class=\"changes\"><li><code>priceAtomic</code>: <code>10000</code> → "
                "<code>20000</code></li></ul></td></tr>") in shown
        assert ("<tr><td>disable</td><td>product</td><td><code>skin</code></td><td>"
                "<ul class=\"changes\"><li><code>status</code>: <code>active</code> → "
                "<code>disabled</code></li></ul></td></tr>") in shown
        assert "<td>disable</td><td>webhook</td>" in shown
        assert ("<li><code>name</code>: <code>Arcade</code> → <code>Arcade &lt;b&gt;Deluxe"
                "&lt;/b&gt;</code></li>") in shown
        assert "<summary>1 unchanged</summary><ul><li>runtime <code>" in shown
        assert "<b>Deluxe" not in shown and "<script>alert(1)" not in shown
        # The config block is the recorded document, escaped: it reads back as the same JSON;
        # the state block the state it left (mirror disabled skin and the webhook), which is
        # what a rollback to it restores.
        blocks = PRE_RE.findall(shown)
        assert len(blocks) == 2
        with sessions() as session:
            recorded = session.get(ConfigRevision, second["id"])
            assert recorded is not None and recorded.state is not None
            assert json.loads(html.unescape(blocks[0])) == recorded.config
            assert json.loads(html.unescape(blocks[1])) == recorded.state
        assert '\n  "schemaVersion": ' in html.unescape(blocks[0])  # indented, one key a line
        assert [p["slug"] for p in recorded.state["products"]] == ["retry"]
        assert recorded.state["webhooks"] == [] and "metadata" not in recorded.state
        assert "<h2 id=\"state-h\">State it left</h2>" in shown
        assert f"<code>svc config rollback {second['id']}</code>" in shown

        created = client.get(f"/apps/arcade/config/{first['id']}").text
        assert ("<tr><td>create</td><td>product</td><td><code>skin</code></td><td>"
                "<ul class=\"changes\"><li><code>sku</code>: <code>skin-1</code></li>") in created
        assert "<code>fulfillmentConfig</code>: <code>{&quot;item&quot;: &quot;skin&quot;}" \
            in created
        assert "<p>Nothing changed.</p>" not in created and "unchanged</summary>" not in created

        rolled = client.get(f"/apps/arcade/config/{third['id']}").text
        assert (f'<dt>Rollback of</dt><dd><a href="/apps/arcade/config/{first["id"]}">#1</a>'
                "</dd>") in rolled
        assert ("<li><code>status</code>: <code>disabled</code> → <code>active</code></li>"
                ) in rolled
        first_state, rolled_state = (PRE_RE.findall(client.get(
            f"/apps/arcade/config/{r['id']}").text)[1] for r in (first, third))
        assert rolled_state == first_state  # the app is as #1 left it

        # A revision recorded before states were kept says what a rollback to it does.
        with transaction(sessions) as session:
            old = session.get(ConfigRevision, first["id"])
            assert old is not None
            old.state = None
        bare = client.get(f"/apps/arcade/config/{first['id']}")
        assert_strict_page(bare)
        assert len(PRE_RE.findall(bare.text)) == 1
        assert "<p>Not recorded: this revision was applied before revisions kept" in bare.text


def test_an_app_without_revisions_says_how_to_make_the_first(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game")
    with console.client() as client:
        signed_out = client.get("/apps/game/config")
        assert signed_out.status_code == 303
        assert signed_out.headers["location"] == "/login?next=/apps/game/config"
        log_in(client)
        page = client.get("/apps/game/config")
        assert page.status_code == 200
        assert_strict_page(page)
        assert "No config revisions of game yet." in page.text
        assert "<code>svc config plan</code>" in page.text
        assert "<code>svc config apply</code>" in page.text
        assert "<table>" not in page.text


def test_another_apps_revision_is_not_found_and_shows_nothing_of_it(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game")
    dev2, _ = add_developer(sessions, "dev2")
    theirs_doc = config("theirs", metadata={"owner": "team-b-secret-plans"})
    with session_client(console, sessions, dev2) as other:
        theirs = apply(other, theirs_doc, None)
    with session_client(console, sessions, developer[0]) as client:
        ours = apply(client, config(), None)
        for path in (f"/apps/arcade/config/{theirs['id']}",  # another organization's
                     f"/apps/game/config/{ours['id']}",  # our other app's
                     "/apps/arcade/config/zcfgrev_nope", "/apps/arcade/config/1"):
            refused = client.get(path)
            assert refused.status_code == 404, path
            assert_strict_page(refused)
            assert "config_revision_not_found" in refused.text
            assert "team-b" not in refused.text and "schemaVersion" not in refused.text
        for path in ("/apps/theirs/config", f"/apps/theirs/config/{theirs['id']}"):
            refused = client.get(path)
            assert refused.status_code == 404, path
            assert "app_not_found" in refused.text and "team-b" not in refused.text
        assert client.get(f"/apps/arcade/config/{ours['id']}").status_code == 200


def test_revisions_are_paged_by_number(console: Console, developer: tuple[str, str],
                                       sessions: sessionmaker[Session]) -> None:
    with session_client(console, sessions, developer[0]) as client:
        first = apply(client, config(), None)
        with transaction(sessions) as session:  # 26 more, as 26 applies would record them
            app = session.scalar(select(App).where(App.slug == "arcade"))
            assert app is not None
            template = session.get(ConfigRevision, first["id"])
            assert template is not None
            for number in range(2, 28):
                session.add(ConfigRevision(
                    app_id=app.id, number=number, mode="merge",
                    config=copy.deepcopy(template.config), ops=template.ops,
                    summary={"create": 0, "update": 1, "disable": 0, "unchanged": 4},
                    applied_by=developer[0], via="cli",
                    created_at=utcnow() + timedelta(minutes=number)))
        newest = client.get("/apps/arcade/config").text
        assert [n for _, n in listed(newest)] == list(range(27, 2, -1))  # 25 a page
        assert '<a href="/apps/arcade/config?before=3" rel="next">Older revisions</a>' in newest
        assert "Newest revisions" not in newest
        assert "dev1 <span class=\"hint\">(CLI)</span>" in newest

        older = client.get("/apps/arcade/config?before=3").text
        assert [n for _, n in listed(older)] == [2, 1]
        assert '<a href="/apps/arcade/config">Newest revisions</a>' in older
        assert "Older revisions" not in older

        none = client.get("/apps/arcade/config?before=1")
        assert none.status_code == 200 and "No revisions before #1." in none.text
        for bad in ("abc", "0", "-1", "3.5", "99999999999"):
            refused = client.get(f"/apps/arcade/config?before={bad}")
            assert refused.status_code == 400, bad
            assert "invalid_field" in refused.text


def test_the_page_and_the_api_read_before_alike(console: Console, developer: tuple[str, str],
                                                sessions: sessionmaker[Session]) -> None:
    """One reading of ``before`` (payments.config.history.revision_cursor): the API's, which
    has always taken leading zeros; what it refuses is its 422 envelope there and a 400
    page here, never a 500."""
    with session_client(console, sessions, developer[0]) as client:
        three_revisions(client)

        def both(value: str) -> tuple[httpx.Response, httpx.Response]:
            return (client.get("/apps/arcade/config", params={"before": value}),
                    client.get(f"{P}/revisions", params={"app": "arcade", "before": value}))

        for value, numbers in (("3", [2, 1]), ("003", [2, 1]), ("0000000002", [1]),
                               ("2147483647", [3, 2, 1])):
            page, api = both(value)
            assert (page.status_code, api.status_code) == (200, 200), value
            assert [n for _, n in listed(page.text)] == numbers, value
            assert [r["number"] for r in api.json()["revisions"]] == numbers, value
        # Empty, zero, signed, spaced, not whole, digits that are not ASCII (a superscript,
        # Arabic-Indic three), past the column, and longer than int() reads at all.
        for value in ("", "0", "000", "-1", "+3", " 3", "3.5", "\u00b2", "\u0663",
                      "2147483648", "9" * 30, "1" * 5000):
            page, api = both(value)
            assert api.status_code == 422, (value, api.text)
            assert api.headers["content-type"].startswith("application/json")
            body = api.json()
            assert (body["code"], body["field"]) == ("invalid_field", "before"), value
            assert "'before' must be a revision number" in body["message"]
            assert page.status_code == 400, (value, page.text)
            assert "invalid_field" in page.text and body["message"] in html.unescape(page.text)


def test_a_revision_whose_secrets_were_withheld_says_it_cannot_be_rolled_back_to(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    """What migrations 0018 and 0021 leave: a revision whose state (or, without one, config)
    holds the mark. The service refuses a rollback to it, so its page says why instead of
    offering one, and the list marks it; a revision without the mark still offers it."""
    with session_client(console, sessions, developer[0]) as client:
        first, second, third = three_revisions(client)
        with transaction(sessions) as session:
            old = session.get(ConfigRevision, first["id"])
            bare = session.get(ConfigRevision, second["id"])
            assert old is not None and old.state is not None and bare is not None
            state = copy.deepcopy(old.state)
            state["products"][1]["fulfillmentConfig"] = {"item": "skin", "apiKey": WITHHELD}
            state["webhooks"][0]["url"] += f"?token={WITHHELD}"
            old.state = state
            document = copy.deepcopy(bare.config)
            document["products"][0]["fulfillmentConfig"] = {"apiKey": WITHHELD}
            bare.config, bare.state = document, None

        listing = client.get("/apps/arcade/config")
        assert_strict_page(listing)
        rows = listing.text.split("<tr>")[2:]  # #3, #2, #1
        mark = "Secrets withheld: cannot be rolled back to"
        assert [mark in row for row in rows] == [False, True, True]

        page = client.get(f"/apps/arcade/config/{first['id']}")
        assert page.status_code == 200
        assert_strict_page(page)
        shown = html.unescape(page.text)
        assert ("Secrets were withheld from this revision, so it cannot be rolled back to."
                in shown)
        assert "config_revision_withheld" in shown and "the state it left" in shown
        assert ("<li><code>$.products[1].fulfillmentConfig.apiKey</code></li>"
                "<li><code>$.webhooks[0].url</code></li>") in shown
        assert "svc config rollback" not in shown and "restores this" not in shown
        assert "Rolling back to it" not in shown
        # The state is still shown, its secrets withheld; the notice comes before the ops.
        assert shown.index("cannot be rolled back to") < shown.index("What it changed")
        assert len(PRE_RE.findall(page.text)) == 2

        no_state = html.unescape(client.get(f"/apps/arcade/config/{second['id']}").text)
        assert "so it cannot be rolled back to." in no_state
        assert "its config as sent (it recorded no state)" in no_state
        assert "<li><code>$.products[0].fulfillmentConfig.apiKey</code></li>" in no_state
        assert "svc config rollback" not in no_state and "applies the config above" not in no_state

        kept = client.get(f"/apps/arcade/config/{third['id']}").text
        assert f"<code>svc config rollback {third['id']}</code>" in kept
        assert "restores this" in kept and "cannot be rolled back to" not in kept
        refused = client.post(f"{P}/rollback", json={"revision": second["id"],
                                                     "baseRevision": third["id"]})
        assert refused.status_code == 422 and refused.json()["code"] == "config_revision_withheld"
