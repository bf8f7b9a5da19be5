"""Values that look like secrets, beyond credentials in URLs, that revisions recorded before
the secret guard refused them (docs/config.md, "No secrets, ever"): withheld whole by
migration 0021 with the guard's own rule, on SQLite and PostgreSQL, everything else kept
byte for byte; the revision views list where a rollback would meet the mark
(``withheldPaths``), and such a rollback is refused, over HTTP."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, func, select, update

from payments import migrate
from payments.config.document import WITHHELD, secret_problems, withhold_secrets
from payments.config.models import ConfigRevision
from payments.db import make_engine, make_sessionmaker, transaction, utcnow
from payments.models import App
from tests.config.test_config_api import PAY_TO, Api, P, config, console
from tests.config.test_config_rollback import second_config
from tests.config.test_withheld_credentials import FIRST, LAST, stored, strings
from tests.developer.test_api import World
from tests.svc.test_config_guard import PLAIN_URLS

__all__ = ["console"]  # the fixture, used by name

# A URL as migration 0018 left it: the mark is no secret, and the rest of the URL stays.
HOOKED = f"https://hooks.example.com/in?token={WITHHELD}&v=2"
# Nothing here looks like a secret to the guard: addresses, ids, URLs without a credential,
# words that only contain a credential's name, empty credentials, the text of 0018's mark
# inside a URL, numbers and non-ASCII text.
ORDINARY: dict[str, Any] = {
    "payTo": PAY_TO, "contract": "0x" + "Cd" * 20, "product": "zprod_" + "1a" * 15,
    "revision": "zcfgrev_" + "2b" * 15, "urls": PLAIN_URLS, "hook": HOOKED,
    "words": {"passthrough": "yes", "maxTokens": "5", "tokenizer": "bpe", "keyword": "k"},
    "empty": {"password": "", "apiKey": "  ", "token": None},
    "numbers": [1, 2.5, -3, None, True, False, "250000"], "text": "Arcade \u2713 \u00e9t\u00e9",
    "hex": "0x" + "ab" * 31, "long": "deadbeef" * 9, "prefixes": "zpk_ zwhsec_ zcli_",
    "bearer": "Bearer", "note": "keys go in the environment, not here",
}


def old_documents() -> dict[str, Any]:
    """What a server before the guard refused them could record: a product's
    ``fulfillmentConfig`` ``apiKey`` (in the state and in an op's before value, which ops
    did not withhold then), and other values the guard now finds, beside ordinary ones."""
    document = config(metadata={
        **ORDINARY, "deployer": "0x" + "1f" * 32, "note": "zpk_hunter22a",
        "auth": "Bearer hunter22b.e30.x", "pem": "-----BEGIN PRIVATE KEY-----\nhunter22c",
        "dbPassword": "hunter22d", "mirrors": {"zwhsec_hunter22e": 1, "kept": 2}})
    document["products"][1]["fulfillmentConfig"] = {"item": "skin", "apiKey": "hunter22f"}
    state = {key: document[key] for key in ("schemaVersion", "app", "products", "webhooks")}
    ops = [{"op": "update", "resource": "product", "key": "skin", "id": "zprod_1",
            "changes": [{"field": "fulfillmentConfig",
                         "before": {"item": "skin", "apiKey": "hunter22g"},
                         "after": {"item": "skin", "apiKey": "hunter22f"}},
                        {"field": "name", "before": "Skin zwhsec_hunter22h", "after": "Skin"}]},
           {"op": "update", "resource": "webhook", "key": HOOKED, "id": "zwh_1",
            "changes": [{"field": "events", "before": ["payment.delivered"],
                         "after": ["payment.delivered", "payment.settled"]}]}]
    return {"config": document, "state": state, "ops": ops}


def withheld_documents() -> dict[str, Any]:
    """``old_documents`` as migration 0021 leaves them, written out: each secret replaced
    whole, an object with a key that looks like one whole, the rest as it was."""
    documents = old_documents()
    metadata = documents["config"]["metadata"]
    for key in ("deployer", "note", "auth", "pem", "dbPassword", "mirrors"):
        metadata[key] = WITHHELD
    for document in (documents["config"], documents["state"]):
        document["products"][1]["fulfillmentConfig"]["apiKey"] = WITHHELD
    changes = documents["ops"][0]["changes"]
    changes[0]["before"]["apiKey"] = changes[0]["after"]["apiKey"] = WITHHELD
    changes[1]["before"] = WITHHELD
    return documents


def test_the_rule_is_the_guards_and_the_mark_is_no_secret() -> None:
    """Withholding replaces what the guard refuses, nothing else; the mark is refused by the
    guard (it stands for a value not there) but is no secret, so 0018's URLs keep their
    text and a second pass changes nothing."""
    assert withhold_secrets(ORDINARY) == ORDINARY
    assert secret_problems(config(metadata={k: v for k, v in ORDINARY.items() if k != "hook"}
                                  )) == []
    old, withheld = old_documents(), withheld_documents()
    assert withhold_secrets(old) == withheld
    assert withhold_secrets(withheld) == withheld
    refused = {p.path for p in secret_problems(old["config"])}
    assert {"$.metadata.deployer", "$.metadata.note", "$.metadata.auth", "$.metadata.pem",
            "$.metadata.dbPassword", "$.metadata.mirrors", "$.metadata.hook",
            "$.products[1].fulfillmentConfig.apiKey"} == refused
    # An object key that looks like a secret takes its object with it, as in plans.
    assert withhold_secrets({"m": {"zpk_hunter22": 1}, "n": 2}) == {"m": WITHHELD, "n": 2}
    # A credential after the mark in the same URL is still a secret.
    assert withhold_secrets(f"{HOOKED}&sig=hunter22") == WITHHELD


def test_migration_0021_withholds_what_old_revisions_recorded(db_url: str) -> None:
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with transaction(sessions) as session:
            app = App(name="Arcade", slug="arcade")
            session.add(app)
            session.flush()
            old, ordinary = old_documents(), config(metadata=ORDINARY)
            ordinary_state = {key: ordinary[key] for key in ("app", "products", "webhooks")}

            def revision(number: int, id_: str | None, **documents: Any) -> ConfigRevision:
                return ConfigRevision(
                    **({"id": id_} if id_ else {}), app_id=app.id, number=number,
                    mode="merge", summary={"update": 2}, applied_by="zdev_x", via="cli",
                    created_at=utcnow(), **documents)
            # Two revisions holding secrets, read in the first and the last batch, and more
            # than a batch of ordinary ones between them (one recorded no state, one has
            # ops that 0018 left holding the mark).
            session.add_all([revision(1, FIRST, **old), revision(2, LAST, **{
                **old, "state": None}), revision(3, None, config=ordinary, state=None, ops=[]),
                revision(4, None, config=ordinary, state=ordinary_state,
                         ops=old_documents()["ops"][1:])])
            session.add_all([revision(n, None, config=ordinary, state=ordinary_state, ops=[])
                             for n in range(5, 206)])
        before = stored(engine)
        assert all("hunter22" in str(column) for column in before[FIRST][:3])

        migrate.downgrade(engine, "0020")  # 0021 is data only: its downgrade changes nothing
        assert stored(engine) == before
        migrate.upgrade(engine)
        after = stored(engine)
        assert "hunter22" not in str(after)
        for id_, columns in before.items():  # the ordinary rows, byte for byte
            if id_ not in (FIRST, LAST):
                assert after[id_] == columns, id_
        assert after[LAST][1] is None and after[FIRST][3] == before[FIRST][3]  # summary
        expected = withheld_documents()
        with transaction(sessions) as session:
            for id_ in (FIRST, LAST):
                row = session.get(ConfigRevision, id_)
                assert row is not None
                assert (row.config, row.ops) == (expected["config"], expected["ops"])
                assert row.state == (expected["state"] if id_ == FIRST else None)
            for row in session.scalars(select(ConfigRevision)):
                assert withhold_secrets([row.config, row.state, row.ops]) == [
                    row.config, row.state, row.ops]
                assert HOOKED in strings(row.config)  # 0018's withholding is kept as it was
            assert session.scalar(select(func.count()).select_from(ConfigRevision)) == 205

        migrate.downgrade(engine, "0020")  # and again: nothing left to withhold
        migrate.upgrade(engine)
        assert stored(engine) == after
    finally:
        engine.dispose()


def rerun_0021(db_url: str) -> None:
    engine: Engine = make_engine(db_url)
    try:
        migrate.downgrade(engine, "0020")
        migrate.upgrade(engine)
    finally:
        engine.dispose()


def test_revisions_list_where_a_secret_was_withheld_and_a_rollback_there_is_refused(
        world: World, console: Api, db_url: str) -> None:
    """A product's fulfillmentConfig apiKey, recorded by a server before the guard refused
    one (the product API took it, and a state read it back): after 0021 it reads WITHHELD,
    the revision's view lists the path, and a rollback to it, which would write the mark
    into the product, is refused; the other revisions list none."""
    first = console.apply(config()).json()["revision"]
    assert first["withheldPaths"] == []
    second = console.apply(second_config())
    assert second.status_code == 201, second.text
    head = second.json()["revision"]["id"]
    with world.sessions() as session, session.begin():
        row = session.get(ConfigRevision, first["id"])
        assert row is not None and row.state is not None
        keyed = {"item": "skin", "apiKey": "hunter22"}
        values = {name: json.loads(json.dumps(getattr(row, name)).replace(
            '{"item": "skin"}', json.dumps(keyed))) for name in ("config", "state", "ops")}
        assert all("hunter22" in json.dumps(value) for value in values.values())
        session.execute(update(ConfigRevision).where(ConfigRevision.id == row.id)
                        .values(**values))
    rerun_0021(db_url)

    path = "$.products[1].fulfillmentConfig.apiKey"
    shown = console.call("GET", f"{P}/revisions/{first['id']}", f"{P}/revisions/{{revision}}")
    assert shown.status_code == 200 and "hunter22" not in shown.text
    revision = shown.json()["revision"]
    assert revision["state"]["products"][1]["fulfillmentConfig"] == {
        "item": "skin", "apiKey": WITHHELD}
    assert revision["withheldPaths"] == [path]
    assert [(r["number"], r["withheldPaths"]) for r in console.revisions("arcade")] == [
        (2, []), (1, [path])]

    planned = console.call("POST", f"{P}/plan", f"{P}/plan", {"revision": first["id"]})
    rolled = console.call("POST", f"{P}/rollback", f"{P}/rollback", {
        "revision": first["id"], "baseRevision": head})
    for answer in (planned, rolled):
        assert answer.status_code == 422, answer.text
        error = answer.json()
        assert error["code"] == "config_revision_withheld" and "Revision 1" in error["message"]
        assert "look like secrets" in error["message"]
        assert [e["path"] for e in error["errors"]] == [path]
    with world.sessions() as session:  # nothing was applied
        assert session.scalar(select(func.count()).select_from(ConfigRevision)) == 2
