"""A real 503: the service's PostgreSQL database refuses connections (as during a
restart), the service answers ``service_unavailable`` with Retry-After, and the client
waits that long and tries again with the same request. PostgreSQL only: the fault is the
database's."""

from __future__ import annotations

import json
import time

import psycopg
import pytest
from sqlalchemy import func, select

from payments.ledger.models import Order
from tests.conftest import fresh_pg_database
from tests.sdk.conftest import Connect, SdkWorld
from tests.sdk.proxy import running_proxy


@pytest.fixture
def db_url(pg_admin_url: str, pg_template: str) -> str:
    """Overrides the SQLite/PostgreSQL pair of tests/conftest.py with PostgreSQL alone."""
    return fresh_pg_database(pg_admin_url, pg_template)


class Database:
    """Turns the test database's connections off and on from the server's side."""

    def __init__(self, admin_url: str, db_url: str) -> None:
        self.admin_url = admin_url
        self.name = db_url.rsplit("/", 1)[1]

    def down(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s", (self.name,))

    def up(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')


def test_a_503_is_retried_after_retry_after_and_then_succeeds(
        world: SdkWorld, backend: Connect, pg_admin_url: str, db_url: str) -> None:
    database = Database(pg_admin_url, db_url)

    def recover(n: int, request: bytes, response: bytes) -> bytes:
        if b" 503 " in response.split(b"\r\n", 1)[0]:
            assert b"retry-after: 2" in response.lower()
            database.up()  # the restart is over by the time the client hears of it
        return response

    with running_proxy(world.router.port, recover) as proxy:
        client = backend(url=proxy.url)
        database.down()
        started = time.monotonic()
        order = client.create_order(product_id=world.products["retry"].id,
                                    developer_user_id="user-1")
        waited = time.monotonic() - started
        database.down()
        read = client.get_order(order.id)
    assert proxy.statuses == [503, 201, 503, 200]
    assert waited >= 1.9  # the service's Retry-After, not the 0.2 s backoff
    first, second = (json.loads(body) for body in proxy.bodies[:2])
    assert first == second and first["idempotencyKey"] == order.idempotency_key
    assert read.id == order.id
    with world.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Order)) == 1
