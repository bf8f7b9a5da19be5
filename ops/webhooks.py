"""``svc-ops webhooks run|status``: the webhook dispatcher as its own process, and the outbox
at a glance.

``run`` is the same dispatcher the server runs in its lifespan; start any number of them
on one PostgreSQL database (claims skip each other's rows) and set
``SVCSRV_WEBHOOK_WORKERS=false`` on the web servers. On PostgreSQL those servers NOTIFY
``svc_webhooks`` when a transaction writes an event and ``run`` LISTENs, so events go out
at once; it also polls every ``SVCSRV_WEBHOOK_POLL_INTERVAL`` seconds (retries come due,
a lost LISTEN connection). SIGTERM or Ctrl-C stops claiming, lets requests in flight
finish for a moment and gives the rest back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import utcnow
from payments.ledger.models import AttemptStatus, WebhookAttempt
from payments.webhooks.listener import NotifyListener, libpq_url
from router.settings import Settings
from router.webhooks import make_dispatcher


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hooks = sub.add_parser("webhooks", help="the webhook dispatcher and its outbox")
    actions = hooks.add_subparsers(dest="action", required=True)
    actions.add_parser("run", help="run a dispatcher until interrupted")
    actions.add_parser("status", help="outbox rows by status, and how many are due now")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.action == "run":
        asyncio.run(_dispatch(settings, sessions))
        return 0
    _print_status(sessions)
    return 0


async def _dispatch(settings: Settings, sessions: sessionmaker[Session]) -> None:
    dispatcher = make_dispatcher(settings, sessions)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await dispatcher.start()
    url = libpq_url(settings.database_url)
    listener = NotifyListener(url, dispatcher.wake) if url else None
    if listener is not None:
        listener.start()  # servers with SVCSRV_WEBHOOK_WORKERS=false NOTIFY on commit
    print("webhook dispatcher running; Ctrl-C to stop", flush=True)
    try:
        await stop.wait()
    finally:
        if listener is not None:
            await listener.stop()
        await dispatcher.stop()


def _print_status(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        counts = dict(session.execute(select(WebhookAttempt.status, func.count())
                                      .group_by(WebhookAttempt.status)).tuples().all())
        due = session.scalar(select(func.count()).select_from(WebhookAttempt).where(
            WebhookAttempt.status == AttemptStatus.PENDING,
            WebhookAttempt.next_attempt_at <= utcnow()))
        in_flight = session.scalar(select(func.count()).select_from(WebhookAttempt).where(
            WebhookAttempt.claim_token.is_not(None)))
    for status in AttemptStatus:
        print(f"{status.value}\t{counts.get(status, 0)}")
    print(f"due\t{due}\nin_flight\t{in_flight}")
