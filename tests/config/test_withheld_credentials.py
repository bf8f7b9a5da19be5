"""Credentials riding in URLs that revisions recorded before the secret guard refused them
(docs/config.md, "No secrets, ever"): withheld by the guard's own rule, by migration 0018 on
SQLite and PostgreSQL, and a rollback to a revision that held one is refused, over HTTP."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text, update

from payments import migrate
from payments.config.document import (
    WITHHELD,
    secret_problems,
    url_credential_in,
    withhold_url_credentials,
)
from payments.config.models import ConfigRevision
from payments.db import make_engine, make_sessionmaker, transaction, utcnow
from payments.models import App
from tests.config.test_config_api import HOOK, Api, P, config, console
from tests.config.test_config_rollback import second_config
from tests.developer.test_api import World
from tests.svc.test_config_guard import PLAIN_URLS, URL_SECRETS

__all__ = ["console"]  # the fixture, used by name

# What a server before the URL rule (aec65a9) recorded: each credential once, in the config
# as sent, the state and the ops, and what the migration turns it into in the stored text.
HOOKED = "https://hooks.example.com/in?token=hunter22a&v=2"
SIGNED = "https://cdn.example.com/s.png?X-Amz-Date=1&X-Amz-Signature=hunter22c"
WITHHOLDS = {
    "token=hunter22a": f"token={WITHHELD}", "key=hunter22b": f"key={WITHHELD}",
    "X-Amz-Signature=hunter22c": f"X-Amz-Signature={WITHHELD}", "game:hunter22d": WITHHELD,
    "access_token=hunter22e": f"access_token={WITHHELD}", "ops:hunter22f": WITHHELD,
    "token=hunter22g": f"token={WITHHELD}"}
FIRST, LAST = "zcfgrev_" + "0" * 30, "zcfgrev_" + "f" * 30  # the first and the last read


def old_documents() -> dict[str, Any]:
    app = {"slug": "arcade", "name": "Arcade \u2713", "kind": "game",
           "entryUrl": "https://arcade.example.com/play?key=hunter22b&lang=en"}
    products = [{"slug": "skin", "name": "Skin", "priceAtomic": "250000",
                 "fulfillmentConfig": {"image": SIGNED, "sizes": [1, 2.5, None, True]}}]
    webhooks = [{"url": HOOKED, "events": ["payment.delivered"]}]
    state = {"schemaVersion": "svc.config.v1", "app": app, "products": products,
             "webhooks": webhooks}
    metadata = {"db": "postgres://game:hunter22d@db.example.com/x",
                "note": "see https://game.example.com/cb#access_token=hunter22e&state=1 then",
                "mirrors": {"https://ops:hunter22f@m.example.com/": 1},
                "repo": "ssh://git@github.com/studio/game.git", "empty": "https://x.example/?sig="}
    ops = [{"op": "update", "resource": "webhook", "key": HOOKED, "id": "zwh_1", "changes": [
               {"field": "url", "before": "https://hooks.example.com/in?token=hunter22g",
                "after": HOOKED}]},
           {"op": "update", "resource": "product", "key": "skin", "id": "zprod_1", "changes": [
               {"field": "fulfillmentConfig", "before": {}, "after": products[0][
                   "fulfillmentConfig"]}]}]
    return {"config": {**state, "environment": "production", "metadata": metadata},
            "state": state, "ops": ops}


def stored(engine: Engine) -> dict[str, tuple[str | None, ...]]:
    """Each revision's columns as the database holds them, as text."""
    with engine.connect() as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(text(
            "SELECT id, CAST(config AS TEXT), CAST(state AS TEXT), CAST(ops AS TEXT), "
            "CAST(summary AS TEXT) FROM config_revisions"))}


def strings(value: Any) -> list[str]:
    """Every string in ``value``, object keys included."""
    if isinstance(value, dict):
        return [*value, *(s for item in value.values() for s in strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def withheld_text(raw: str) -> str:
    for credential, shown in WITHHOLDS.items():
        raw = raw.replace(credential, shown)
    return raw


@pytest.mark.parametrize("url", list(URL_SECRETS))
def test_each_credential_the_guard_finds_is_withheld_and_nothing_else(url: str) -> None:
    withheld = withhold_url_credentials(url)
    # The whole user part when it holds a password; a parameter's value, its name kept.
    expected = re.sub(r"(?<=://)[^@/]*:hunter22(?=@)", WITHHELD, url).replace(
        "=hunter22", f"={WITHHELD}")
    assert withheld == expected
    assert url_credential_in(url) is not None and url_credential_in(withheld) is None
    assert withhold_url_credentials(withheld) == withheld


def test_urls_without_a_credential_and_other_values_are_kept() -> None:
    document = {"urls": PLAIN_URLS, "n": [1, 2.5, None, True], "s": "no URL here"}
    assert withhold_url_credentials(document) == document


def test_a_credential_after_a_withheld_one_is_still_found() -> None:
    """The mark has spaces: the guard reads it as part of its URL, so what follows it in the
    same URL is still looked at, by the guard and by the withholding alike."""
    url = f"https://h.example/x?token={WITHHELD}&sig=hunter22"
    assert url_credential_in(url) is not None
    assert withhold_url_credentials(url) == f"https://h.example/x?token={WITHHELD}&sig={WITHHELD}"


def test_the_guard_refuses_the_mark_itself() -> None:
    """A config copied from a withheld revision holds the mark, not the value it stood for:
    applying it would write the mark where the value was."""
    problems = secret_problems({"app": {"entryUrl": f"https://a.example/?key={WITHHELD}"},
                                "metadata": {WITHHELD: 1}})
    assert [(p.path, p.code) for p in problems] == [
        ("$.app.entryUrl", "config_contains_secret"), ("$.metadata", "config_contains_secret")]
    assert "mark of a withheld secret" in problems[0].message


def test_migration_0018_withholds_what_old_revisions_recorded(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            app = App(name="Arcade", slug="arcade")
            session.add(app)
            session.flush()
            old, clean = old_documents(), config()

            def revision(number: int, id_: str | None, **documents: Any) -> ConfigRevision:
                return ConfigRevision(
                    **({"id": id_} if id_ else {}), app_id=app.id, number=number,
                    mode="merge", summary={"update": 2}, applied_by="zdev_x", via="cli",
                    created_at=utcnow(), **documents)
            # Two revisions holding credentials, read in the first and the last batch, and
            # more than a batch of clean ones (one recorded no state) between them.
            session.add_all([revision(1, FIRST, **old), revision(2, LAST, **{
                **old, "state": None}), revision(3, None, config=clean, state=None, ops=[])])
            session.add_all([revision(n, None, config=clean, state=clean, ops=[])
                             for n in range(4, 205)])
        before = stored(engine)
        assert all("hunter22" in str(column) for column in before[FIRST][:3])

        migrate.downgrade(engine, "0017")  # 0018 is data only: its downgrade changes nothing
        assert stored(engine) == before
        migrate.upgrade(engine)
        after = stored(engine)
        assert "hunter22" not in str(after)
        for id_, columns in before.items():  # byte for byte, but for each credential
            assert after[id_] == tuple(None if c is None else withheld_text(c)
                                       for c in columns), id_
        with transaction(sessions) as session:
            for row in session.scalars(select(ConfigRevision)):
                found = strings([row.config, row.state, row.ops])
                assert [s for s in found if url_credential_in(s) is not None] == []
            assert session.scalar(select(func.count()).select_from(ConfigRevision)) == 204

        migrate.downgrade(engine, "0017")  # and again: nothing left to withhold
        migrate.upgrade(engine)
        assert stored(engine) == after
    finally:
        engine.dispose()


def test_a_rollback_to_a_revision_whose_credentials_were_withheld_is_refused(
        world: World, console: Api, db_url: str) -> None:
    """A webhook URL with a ?token= was recorded by a server before the URL rule (the webhook
    API takes one, and a config file could declare it); after 0018 it reads WITHHELD, and a
    rollback to that revision would write the mark as the URL: it is refused, and says why."""
    first = console.apply(config()).json()["revision"]
    second = console.apply(second_config())
    assert second.status_code == 201, second.text
    head = second.json()["revision"]["id"]
    tokened = f"{HOOK}?token=hunter22"
    with world.sessions() as session, session.begin():
        row = session.get(ConfigRevision, first["id"])
        assert row is not None
        session.execute(update(ConfigRevision).where(ConfigRevision.id == row.id).values(**{
            name: json.loads(json.dumps(getattr(row, name)).replace(HOOK, tokened))
            for name in ("config", "state", "ops")}))
    engine = make_engine(db_url)
    try:
        migrate.downgrade(engine, "0017")
        migrate.upgrade(engine)
    finally:
        engine.dispose()

    shown = console.call("GET", f"{P}/revisions/{first['id']}", f"{P}/revisions/{{revision}}")
    assert shown.status_code == 200 and "hunter22" not in shown.text
    assert shown.json()["revision"]["state"]["webhooks"][0]["url"] == f"{HOOK}?token={WITHHELD}"

    planned = console.call("POST", f"{P}/plan", f"{P}/plan", {"revision": first["id"]})
    rolled = console.call("POST", f"{P}/rollback", f"{P}/rollback", {
        "revision": first["id"], "baseRevision": head})
    for answer in (planned, rolled):
        assert answer.status_code == 422, answer.text
        error = answer.json()
        assert error["code"] == "config_revision_withheld"
        assert "Revision 1" in error["message"] and "withheld" in error["message"]
        assert [e["path"] for e in error["errors"]] == ["$.webhooks[0].url"]
    with world.sessions() as session:  # nothing was applied
        assert session.scalar(select(func.count()).select_from(ConfigRevision)) == 2
