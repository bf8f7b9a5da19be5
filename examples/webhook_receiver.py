"""The reference webhook receiver of a developer backend (spec 1.4, 4.9, 6).

    POST /api/svc/webhook   verify the signature over the raw body (401 if not genuine),
                            then fulfil ONCE per delivery idempotency key, then answer 200

The fulfilment ledger is a SQLite table whose primary key is the delivery's idempotency key:
``INSERT ... ON CONFLICT DO NOTHING`` makes a retry, a manual retry, a legacy
``delivery.created`` twin or two concurrent deliveries of one payment grant exactly once,
without a check-then-write race. Test events (``test: true``) are acknowledged and grant
nothing; ``payment.settled`` records the settlement. A backend that cannot write its ledger
answers 5xx, and the service retries.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from svc.webhooks import WebhookEvent, WebhookVerificationError, verify_webhook

WEBHOOK_PATH = "/api/svc/webhook"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS grants (
    idempotency_key TEXT PRIMARY KEY,
    delivery_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    product_id TEXT NOT NULL,
    developer_user_id TEXT,
    amount_atomic INTEGER
);
CREATE TABLE IF NOT EXISTS settlements (
    delivery_id TEXT PRIMARY KEY,
    tx_hash TEXT
);
"""


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, object]


class FulfilmentLedger:
    """Grants keyed by the delivery's idempotency key; durable across restarts."""

    def __init__(self, path: Path | str = ":memory:") -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def grant_once(self, event: WebhookEvent) -> bool:
        """True if this call granted; False if the key was granted before."""
        d = event.delivery
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO grants VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (d.idempotency_key, d.delivery_id, event.id, event.product.id,
                 d.developer_user_id, d.amount_atomic))
            return cursor.rowcount == 1

    def record_settlement(self, event: WebhookEvent) -> None:
        with self._lock:
            self._db.execute("INSERT INTO settlements VALUES (?, ?) ON CONFLICT DO NOTHING",
                             (event.delivery.delivery_id, event.delivery.settlement_tx_hash))

    def grants(self) -> list[tuple[str, str]]:
        """(idempotency key, delivery id) of every grant."""
        with self._lock:
            return [(k, d) for k, d in self._db.execute(
                "SELECT idempotency_key, delivery_id FROM grants ORDER BY rowid")]


class WebhookReceiver:
    """Framework-free: give it the raw body and the headers, send back its answer."""

    def __init__(self, signing_secret: str, ledger: FulfilmentLedger) -> None:
        self.signing_secret = signing_secret
        self.ledger = ledger

    def handle(self, raw_body: bytes, headers: Mapping[str, str]) -> Answer:
        try:
            event = verify_webhook(raw_body, headers.get("x-svc-timestamp", ""),
                                   headers.get("x-svc-signature", ""), self.signing_secret)
        except WebhookVerificationError as exc:
            return Answer(401, {"error": str(exc)})
        if event.test:
            return Answer(200, {"ok": True, "test": True})
        if event.type in ("payment.delivered", "delivery.created"):
            granted = self.ledger.grant_once(event)
            return Answer(200, {"ok": True, "granted": granted})
        self.ledger.record_settlement(event)
        return Answer(200, {"ok": True})


def receiver_app(receiver: WebhookReceiver) -> Starlette:
    async def webhook(request: Request) -> JSONResponse:
        answer = receiver.handle(await request.body(), request.headers)
        return JSONResponse(answer.body, status_code=answer.status)
    return Starlette(routes=[Route(WEBHOOK_PATH, webhook, methods=["POST"])])
