"""Several dispatchers on one PostgreSQL database: claims never overlap, so no attempt is
sent by two of them at the same time, and with a receiver that always answers 200 each
event is sent exactly once."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from manifest.url_policy import DnsResolver, UrlPolicy
from payments.db import make_engine, make_sessionmaker, transaction, utcnow
from payments.ids import IdPrefix, new_id
from payments.ledger.models import AttemptStatus
from payments.models import App
from payments.webhooks.dispatcher import Dispatcher, DispatchPolicy
from payments.webhooks.endpoints import UrlChecks
from payments.webhooks.models import WebhookEndpoint
from payments.webhooks.schedule import RetrySchedule
from payments.webhooks.sender import Sender
from payments.webhooks.signing_secrets import SecretBox
from router.settings import Settings
from tests.conftest import fresh_pg_database
from tests.webhooks.kit import FaultyReceiver, attempts, enqueue_events, receiver, wait_until

EVENTS = 400
SECRET = "zwhsec_" + "5" * 64
BOX = SecretBox("test-server-secret-" + "x" * 20)


@pytest.fixture
def pg_sessions(pg_admin_url: str, pg_template: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(fresh_pg_database(pg_admin_url, pg_template))
    yield make_sessionmaker(engine)
    engine.dispose()


class Running:
    """A dispatcher with its own engine (connection pool) on its own thread and loop."""

    def __init__(self, url: str, batch: int) -> None:
        self.engine = make_engine(url)
        checks = UrlChecks(UrlPolicy.from_settings(Settings()), DnsResolver())
        self.dispatcher = Dispatcher(
            make_sessionmaker(self.engine), Sender(checks, timeout=5.0), BOX,
            RetrySchedule((0.05,) * 7),
            DispatchPolicy(poll_interval=0.02, batch_size=batch, lease=30.0))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.dispatcher.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.dispatcher.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        self.engine.dispose()


def _endpoint(sessions: sessionmaker[Session], hook: FaultyReceiver) -> App:
    with transaction(sessions) as session:
        app = App(name="Race", slug="race")
        session.add(app)
        session.flush()
        endpoint_id = new_id(IdPrefix.WEBHOOK)
        session.add(WebhookEndpoint(id=endpoint_id, app_id=app.id, url=hook.url,
                                    events=["payment.delivered"],
                                    secret_sealed=BOX.seal(SECRET, endpoint_id),
                                    secret_preview="zwhsec_…5555", secret_created_at=utcnow()))
        return app


def test_two_dispatchers_never_send_one_attempt_at_once(
        pg_sessions: sessionmaker[Session]) -> None:
    url = pg_sessions.kw["bind"].url.render_as_string(hide_password=False)
    with receiver() as hook:
        hook.delay = 0.01  # long enough for two senders to overlap if they could
        hook.secret = SECRET
        app = _endpoint(pg_sessions, hook)
        ids = enqueue_events(pg_sessions, app, EVENTS)
        with Running(url, batch=25) as one, Running(url, batch=25) as two, \
                Running(url, batch=25):
            wait_until(lambda: len(hook.delivered_ids()) == EVENTS, timeout=60,
                       what="every event delivered")
            wait_until(lambda: all(a.status == AttemptStatus.DELIVERED
                                   for a in attempts(pg_sessions).values()), what="recorded")
            del one, two
    sent = Counter(r.event_id for r in hook.requests)
    assert hook.overlaps == []
    assert set(sent) == set(ids)
    assert set(sent.values()) == {1}  # no lease ran out, so nothing was sent twice
    assert len(hook.ledger.grants()) == EVENTS
    assert all(a.attempt_count == 1 for a in attempts(pg_sessions).values())


def test_a_stopped_dispatcher_gives_its_claims_back(pg_sessions: sessionmaker[Session]) -> None:
    """Stopping mid-send: requests still running after the grace are cancelled and their
    claims released at once (not after the lease), so the next dispatcher sends them."""
    url = pg_sessions.kw["bind"].url.render_as_string(hide_password=False)
    with receiver(lambda n, e: "hang", hang_seconds=3.0) as hook:
        hook.secret = SECRET
        app = _endpoint(pg_sessions, hook)
        enqueue_events(pg_sessions, app, 5)
        with Running(url, batch=10) as first:
            wait_until(lambda: len({r for r in hook._active}) == 5, what="five in flight")
            asyncio.run_coroutine_threadsafe(first.dispatcher.stop(grace=0.1),
                                             first.loop).result(10)
            first.dispatcher.stop = _noop  # type: ignore[method-assign]
        rows = attempts(pg_sessions)
        assert all(a.claim_token is None and a.status == AttemptStatus.PENDING
                   and a.next_attempt_at <= utcnow() + timedelta(seconds=1)
                   for a in rows.values())
        hook.plan = lambda n, e: "ok"
        with Running(url, batch=10):
            wait_until(lambda: all(a.status == AttemptStatus.DELIVERED
                                   for a in attempts(pg_sessions).values()), what="sent again")


async def _noop(grace: float = 0.0) -> None:
    return None
