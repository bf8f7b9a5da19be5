"""Creating an API key with an idempotency key (``idempotencyKey``, or the
``Idempotency-Key`` header) through a real router: a script that retries after a timeout
makes one key, and its retry learns which key (by id and preview), never the secret."""

from __future__ import annotations

import threading
from datetime import timedelta

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer.keys import CreatedKey, KeyAlreadyCreated, create_key
from payments.developer.models import ApiKey
from tests.developer.test_api import World
from tests.factories import add_developer, add_owned_app
from tests.support.waits import wait_for_a_lock_wait

KEYS = "/api/developer/apps/game/keys"
BODY = {"label": "ci", "scopes": ["orders:create", "orders:read"], "environment": "test"}
RETRY = "deploy-2026-11-27-run-42"


def _keys(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(ApiKey)) or 0


def test_a_retry_with_the_same_key_makes_no_second_key_and_shows_no_secret(
        world: World) -> None:
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api:
        created = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY})
        assert created.status_code == 201, created.text
        key, secret = created.json()["key"], created.json()["secret"]

        # The retry of a script whose first answer was lost: scopes in another order and
        # the label's blanks make the same key, so it is the same request.
        again = api.post(KEYS, json={**BODY, "scopes": ["orders:read", "orders:create"],
                                     "label": " ci ", "idempotencyKey": RETRY})
        assert again.status_code == 409, again.text
        body = again.json()
        assert body["code"] == "key_already_created"
        assert body["keyId"] == key["id"] and body["key"] == key
        assert body["key"]["preview"] == f"zpk_test_…{secret[-4:]}"
        assert RETRY in body["message"] and "shown once" in body["message"]
        assert secret not in again.text and secret[4:] not in again.text
        assert "secret" not in body
        assert _keys(world.sessions) == 1

        # The same idempotency key for another key is a mistake the caller must see.
        for other in ({**BODY, "label": "other"}, {**BODY, "scopes": ["orders:read"]},
                      {**BODY, "environment": "live"}):
            reused = api.post(KEYS, json={**other, "idempotencyKey": RETRY})
            assert reused.status_code == 409, reused.text
            assert reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
            assert key["id"] not in reused.text and secret not in reused.text
        assert _keys(world.sessions) == 1

        # The key stays the one made even once renamed or revoked.
        api.patch(f"{KEYS}/{key['id']}", json={"label": "renamed"})
        api.post(f"{KEYS}/{key['id']}/revoke")
        revoked = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY}).json()
        assert revoked["code"] == "key_already_created"
        assert revoked["key"]["revokedAt"] is not None

        # Without an idempotency key, each request is a new key, as before.
        assert api.post(KEYS, json=BODY).status_code == 201
        assert api.post(KEYS, json=BODY).status_code == 201
        assert _keys(world.sessions) == 3


def test_the_header_is_the_same_key_as_the_field(world: World) -> None:
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api:
        created = api.post(KEYS, json=BODY, headers={"idempotency-key": RETRY})
        assert created.status_code == 201, created.text
        again = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY})
        assert again.json()["keyId"] == created.json()["key"]["id"]
        both = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY},
                        headers={"idempotency-key": RETRY})
        assert both.json()["code"] == "key_already_created"  # the same one twice is fine
        differ = api.post(KEYS, json={**BODY, "idempotencyKey": "a"},
                          headers={"idempotency-key": "b"})
        assert (differ.status_code, differ.json()["code"]) == (422, "invalid_idempotency_key")
        for bad in ("", " ", "x" * 201, 42):
            refused = api.post(KEYS, json={**BODY, "idempotencyKey": bad})
            assert (refused.status_code, refused.json()["code"]) == \
                (422, "invalid_idempotency_key"), bad
    assert _keys(world.sessions) == 1


def test_the_key_is_kept_thirty_days_per_organization(world: World) -> None:
    _, other_org = add_developer(world.sessions, "dev2")
    add_owned_app(world.sessions, other_org, "theirs")
    add_owned_app(world.sessions, world.org_id, "second")
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api:
        first = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY}).json()["key"]
    # Another app of the organization under the same key is another request.
    with world.console() as console:
        other_app = console.post("/api/developer/apps/second/keys",
                                 json={**BODY, "idempotencyKey": RETRY})
        assert other_app.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
        organization_key = console.post("/api/developer/keys",
                                        json={**BODY, "idempotencyKey": RETRY})
        assert organization_key.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    # Another organization's keys are its own business: the same string is free there.
    stranger = World(world.router, world.sessions, *add_developer(world.sessions, "dev3"))
    with stranger.console() as console:
        assert console.post("/api/developer/keys", json={**BODY, "idempotencyKey": RETRY}
                            ).status_code == 201
    # After the retention window the key may be used afresh.
    with transaction(world.sessions) as session:
        session.execute(update(ApiKey).where(ApiKey.id == first["id"]).values(
            created_at=utcnow() - timedelta(days=30, seconds=1)))
    with world.api(token) as api:
        fresh = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY})
        assert fresh.status_code == 201, fresh.text
        assert fresh.json()["key"]["id"] != first["id"]
        replay = api.post(KEYS, json={**BODY, "idempotencyKey": RETRY}).json()
        assert replay["keyId"] == fresh.json()["key"]["id"]


def test_organization_keys_take_the_key_too(world: World) -> None:
    with world.console() as console:
        created = console.post("/api/developer/keys", json={**BODY, "idempotencyKey": RETRY})
        assert created.status_code == 201, created.text
        secret = created.json()["secret"]
        again = console.post("/api/developer/keys", headers={"idempotency-key": RETRY},
                             json=BODY)
        assert again.status_code == 409 and again.json()["code"] == "key_already_created"
        assert again.json()["keyId"] == created.json()["key"]["id"]
        assert secret not in again.text
    assert _keys(world.sessions) == 1


def test_every_answer_that_names_a_key_is_no_store(world: World) -> None:
    """The 201 holds the secret; the replay's 409 answers that same request, and the list,
    change and revocation name keys: no cache keeps any of them, app or organization key."""
    token = world.grant("game", ["apps:read", "keys:create"])
    with world.api(token) as api, world.console() as console:
        for client, keys in ((api, KEYS), (console, "/api/developer/keys")):
            retry = {**BODY, "idempotencyKey": f"{RETRY}:{keys}"}  # one per owner
            answers = [client.post(keys, json=retry), client.post(keys, json=retry)]
            key_id = answers[0].json()["key"]["id"]
            answers += [client.get(keys),
                        client.patch(f"{keys}/{key_id}", json={"label": "renamed"}),
                        client.post(f"{keys}/{key_id}/revoke")]
            assert [(a.status_code, a.json().get("code")) for a in answers] == [
                (201, None), (409, "key_already_created"), (200, None), (200, None),
                (200, None)], keys
            assert [a.headers.get("cache-control") for a in answers] == ["no-store"] * 5, keys


def test_two_sends_at_once_make_one_key(world: World) -> None:
    """Real parallel clients; which request wins is the database's business."""
    token = world.grant("game", ["apps:read", "keys:create"])
    start = threading.Barrier(4)
    answers: list[httpx.Response] = []

    def send() -> None:
        with world.api(token) as api:
            start.wait(10)
            answers.append(api.post(KEYS, json={**BODY, "idempotencyKey": RETRY}))
    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a.status_code for a in answers) == [201, 409, 409, 409], \
        [a.text for a in answers]
    made = next(a for a in answers if a.status_code == 201).json()
    for refused in (a for a in answers if a.status_code == 409):
        assert refused.json()["keyId"] == made["key"]["id"]
        assert made["secret"] not in refused.text
    assert _keys(world.sessions) == 1



def test_a_retry_before_the_first_commits_waits_and_finds_its_key(
        sessions: sessionmaker[Session], db_url: str) -> None:
    """The unique constraint decides, not the lookup: the retry looks before the first
    request has committed, finds nothing, and (PostgreSQL) waits on the index until the
    first commits; then it answers with the first's key instead of making a second."""
    _, organization_id = add_developer(sessions)
    found: list[str] = []
    failed: list[BaseException] = []

    def create(session: Session) -> CreatedKey:
        return create_key(session, organization_id=organization_id, app_id=None, label="ci",
                          scopes=["orders:read"], environment="test", created_by=None,
                          now=utcnow(), idempotency_key=RETRY)

    def retry() -> None:
        try:
            with sessions() as session, session.begin():
                create(session)
        except KeyAlreadyCreated as already:
            found.append(already.extra["keyId"])
        except BaseException as other:  # reported by the assertion below
            failed.append(other)

    with sessions() as first:
        first.begin()
        made = create(first).key.id  # not committed yet
        thread = threading.Thread(target=retry)
        thread.start()
        wait_for_a_lock_wait(sessions, db_url)
        first.commit()
    thread.join(30)
    assert failed == [] and found == [made]
    assert _keys(sessions) == 1
