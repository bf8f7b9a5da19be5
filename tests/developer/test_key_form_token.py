"""``create_key`` with a console form's one-time token: one key per token. The unique token
decides between two sendings of one form even when the second checks for a used token
before the first has committed (on PostgreSQL it then waits on the unique index, and finds
the first's key once that commits); the loser learns which key the form made."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.developer.keys import CreatedKey, KeyAlreadyCreated, create_key
from payments.developer.models import ApiKey
from tests.factories import add_developer
from tests.support.waits import wait_for_a_lock_wait

TOKEN = "form-token-" + "x" * 32


def _create(session: Session, organization_id: str, token: str | None) -> CreatedKey:
    return create_key(session, organization_id=organization_id, app_id=None, label="ci",
                      scopes=["orders:read"], environment="test", created_by=None,
                      now=utcnow(), form_token=token)




def test_a_second_creation_with_the_token_finds_the_first_key(
        sessions: sessionmaker[Session], db_url: str) -> None:
    _, organization_id = add_developer(sessions)
    found: list[str] = []
    failed: list[BaseException] = []

    def second() -> None:
        try:
            with sessions() as session, session.begin():
                _create(session, organization_id, TOKEN)
        except KeyAlreadyCreated as already:
            found.append(already.extra["keyId"])
        except BaseException as other:  # reported by the assertion below
            failed.append(other)

    with sessions() as first:
        first.begin()
        made = _create(first, organization_id, TOKEN).key.id  # not committed yet
        thread = threading.Thread(target=second)
        thread.start()
        wait_for_a_lock_wait(sessions, db_url)
        first.commit()
    thread.join(30)
    assert failed == [] and found == [made]
    with sessions() as session, session.begin():
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 1
        # Later sendings are refused by the check alone, in a transaction that stays usable.
        with pytest.raises(KeyAlreadyCreated):
            _create(session, organization_id, TOKEN)
        assert _create(session, organization_id, None).key.form_token_hash is None  # API's
