"""The server runs the chain: in-process EVM at start, workers in the background, statusz."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from payments.db import make_engine, make_sessionmaker
from tests.ledger.flow import build_world, wallet
from tests.support.router import router_factory


def _eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("the chain workers did not get there in time")
        time.sleep(0.1)


def test_a_payment_settles_through_the_running_server(sqlite_template: Path,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "svc.db"
    path.write_bytes(sqlite_template.read_bytes())
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    start = router_factory(url)
    with start(chain_workers=True, chain_worker_interval=0.1,
               settlement_batch_age_seconds=0.0) as router:
        world = build_world(router, make_sessionmaker(engine))
        user = wallet(7)
        summary = world.authorize(user, 1_000_000)["code"]
        code = world.payment_code(summary, "legendary")
        with world.api(origin=world.audience) as api:
            paid = world.pay(api, user, "legendary", code, "wiring:1")
        assert paid.status_code == 201, paid.text
        assert paid.json()["status"] == "awaiting_settlement"  # settled_first
        charge = paid.json()["chargeId"]

        def receipt() -> dict[str, object]:
            with world.keyed() as backend:
                body: dict[str, object] = backend.get(f"/api/receipts/{charge}").json()["receipt"]
                return body

        _eventually(lambda: receipt()["settlementStatus"] == "settled")
        assert str(receipt()["settlementTxHash"]).startswith("0x")
        with world.keyed() as backend:
            delivery = backend.get(f"/api/deliveries/{paid.json()['deliveryId']}").json()
        assert delivery["delivery"]["status"] == "delivered"
        status = httpx.get(router.url + "/statusz",
                           headers={"host": f"api.localhost:{router.port}"}).json()
        assert status["checks"]["chain"]["status"] == "embedded"
        assert status["checks"]["chain"]["workers"] is True
    engine.dispose()
