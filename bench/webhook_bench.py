"""Webhook deliveries per second and charge-to-receipt latency, in dev mode.

    .venv/bin/python bench/webhook_bench.py [--events 4000] [--charges 300] [--rounds 3]
                                            [--dry-run]

Everything runs on 127.0.0.1, started and stopped (by pid) by this script:

- ``svc-server serve`` with the dev settings of ``bench/ledger_bench.py`` on a SQLite file
  (the embedded default of ``svc-server dev``), chain workers off, the webhook dispatcher in
  the server (defaults: 256 requests in flight, claims of 200, poll 1 s).
- a loopback receiver (aiohttp on uvloop, its own thread) that checks each request's HMAC
  and answers 200, recording when each event arrived;
- an endpoint for the bench app pointing at it (written straight into the database).

Throughput: ``--events`` events are written into the outbox in one transaction (the rows
the ledger writes per payment), and the rate is events over the time from the first to the
last arrival. The reference, run in the same session right before each round: the same
receiver driven by an aiohttp client (256 concurrent keep-alive requests, the same signed
bodies): what one Python sender on this machine can push through this receiver at all.
The figure that matters is the ratio.

Latency: ``--charges`` real payments through ``POST /api/pay/bench/unlock-level`` (payment
codes pre-issued, one request at a time); for each, from the moment the request is sent to
the moment its ``payment.delivered`` reaches the receiver. The pay answer's own latency is
reported beside it.

Results go to stdout and, unless --dry-run, to the "Webhook delivery" section of
docs/BENCHMARKS.md (that section only). Targets: 500 deliveries/s, p50 under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ledger_bench import (  # bench/ is on sys.path when run as a script
    APP_SLUG,
    ROOT,
    command_output,
    free_port,
    issue_codes,
    percentile,
    seed_world,
    start_router,
)
from report import write_section

sys.path.insert(0, str(ROOT))

HEADING = "## Webhook delivery (bench/webhook_bench.py)"
TARGET_RATE = 500.0
TARGET_P50_MS = 50.0
SECRET = "zwhsec_" + "b" * 64
CONCURRENCY = 256


@dataclass
class Receiver:
    """Counts arrivals; answers 200 to requests whose signature checks out."""

    arrivals: dict[str, float] = field(default_factory=dict)  # event id -> perf_counter
    by_delivery: dict[str, float] = field(default_factory=dict)
    bad: int = 0
    port: int = 0
    loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        import uvloop
        from aiohttp import web

        from svc.webhooks import WebhookVerificationError, verify_signature

        async def handle(request: web.Request) -> web.Response:
            body = await request.read()
            try:
                verify_signature(body, request.headers["x-svc-timestamp"],
                                 request.headers["x-svc-signature"], SECRET)
            except (KeyError, WebhookVerificationError):
                self.bad += 1
                return web.Response(status=401)
            now = time.perf_counter()
            self.arrivals.setdefault(request.headers.get("x-svc-event-id", ""), now)
            self.by_delivery.setdefault(request.headers.get("x-svc-delivery-id", ""), now)
            return web.Response(status=200, text="ok")

        self.loop = uvloop.new_event_loop()
        self.port = free_port()
        app = web.Application()
        app.router.add_post("/hook", handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        ready = threading.Event()

        def run() -> None:
            assert self.loop is not None
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(runner.setup())
            self.loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port,
                                                     backlog=1024).start())
            ready.set()
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def reset(self) -> None:
        self.arrivals.clear()
        self.by_delivery.clear()


def add_endpoint(database_url: str, app_id: str, url: str) -> None:
    from payments.db import make_engine, make_sessionmaker, transaction, utcnow
    from payments.ids import IdPrefix, new_id
    from payments.webhooks.models import WebhookEndpoint
    from payments.webhooks.signing_secrets import SecretBox
    from router.settings import DEV_SECRET_KEY

    engine = make_engine(database_url)
    with transaction(make_sessionmaker(engine)) as session:
        endpoint_id = new_id(IdPrefix.WEBHOOK)
        session.add(WebhookEndpoint(
            id=endpoint_id, app_id=app_id, url=url, events=["payment.delivered"],
            secret_sealed=SecretBox(DEV_SECRET_KEY).seal(SECRET, endpoint_id),
            secret_preview="zwhsec_…bbbb",  # noqa: S106  (a masked preview)
            secret_created_at=utcnow()))
    engine.dispose()


def enqueue(database_url: str, app_id: str, count: int) -> list[str]:
    from payments.db import make_engine, make_sessionmaker, transaction, utcnow
    from payments.ids import IdPrefix, new_id
    from payments.webhooks import outbox

    engine = make_engine(database_url)
    ids = []
    with transaction(make_sessionmaker(engine)) as session:
        now = utcnow()
        for _ in range(count):
            event_id = new_id(IdPrefix.EVENT)
            outbox.enqueue(session, app_id, "payment.delivered", sample_event(event_id, app_id),
                           None, now)
            ids.append(event_id)
    engine.dispose()
    return ids


def sample_event(event_id: str, app_id: str) -> dict[str, object]:
    """About the size of a real payment.delivered body (1.3 KB)."""
    return {
        "id": event_id, "type": "payment.delivered", "test": False,
        "createdAt": "2026-11-22T10:00:00Z",
        "app": {"id": app_id, "slug": APP_SLUG, "name": "Bench", "environment": "test",
                "payTo": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"},
        "product": {"id": "zprod_bench", "slug": "unlock-level", "name": "Unlock Level",
                    "priceAtomic": "30000", "currency": "USDC", "network": "local",
                    "paymentPath": "product_route"},
        "payment": {"mode": "budget-spender", "simulated": True, "settlementStatus": "queued",
                    "traceId": None, "budgetSpender": "0x" + "5" * 40,
                    "payTo": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"},
        "delivery": {"deliveryId": "ztdlv_" + event_id[5:], "idempotencyKey": "svc:" + event_id,
                     "status": "delivered", "fulfilled": False, "chargeId": "0x" + "0" * 64,
                     "appId": app_id, "productId": "zprod_bench", "itemId": "unlock-level",
                     "developerUserId": "user-1", "walletAddress": "0x" + "1" * 40,
                     "paymentMode": "budget-spender", "network": "local", "amount": "30000",
                     "payTo": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
                     "settlementStatus": "queued", "settlementTxHash": None,
                     "deliveredAt": "2026-11-22T10:00:00Z"},
    }


def wait_for(receiver: Receiver, ids: list[str], limit: float) -> float:
    """Seconds from the first to the last arrival of ``ids``."""
    deadline = time.monotonic() + limit
    while not all(i in receiver.arrivals for i in ids):
        if time.monotonic() > deadline:
            missing = sum(1 for i in ids if i not in receiver.arrivals)
            raise RuntimeError(f"{missing} of {len(ids)} events did not arrive in {limit} s")
        time.sleep(0.01)
    times = [receiver.arrivals[i] for i in ids]
    return max(times) - min(times)


async def reference(receiver: Receiver, count: int) -> float:
    """The same receiver, the same signed bodies, pushed by one aiohttp client."""
    import aiohttp

    from payments.db import utcnow
    from payments.webhooks.signing import event_body, request_headers

    items = []
    for i in range(count):
        payload = sample_event(f"zevt_ref{i:08d}", "zapp_ref")
        body = event_body(payload)
        items.append((body, request_headers(payload, body, SECRET, utcnow())))
    queue = list(reversed(items))
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as client:
        async def worker() -> None:
            while queue:
                body, headers = queue.pop()
                async with client.post(receiver.url, data=body, headers=headers) as answer:
                    await answer.read()
                    assert answer.status == 200
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - began


def run_reference(receiver: Receiver, count: int) -> float:
    """The reference client on its own thread and loop, as the dispatcher has its own
    process: the receiver's thread serves both the same way."""
    import uvloop

    result: list[float] = []
    thread = threading.Thread(target=lambda: result.append(uvloop.run(reference(receiver,
                                                                                 count))))
    thread.start()
    thread.join(300)
    return result[0]


def latency_run(router_port: int, codes: list[tuple[str, int]], receiver: Receiver,
                spender: str, wallets: list[str]) -> tuple[list[float], list[float]]:
    import http.client

    to_receipt, answered = [], []
    conn = http.client.HTTPConnection("127.0.0.1", router_port, timeout=30)
    for i, (code, owner) in enumerate(codes):
        body = json.dumps({"authorizationCode": code, "idempotencyKey": f"lat-{i}-{code[-8:]}",
                           "developerUserId": "user-1"})
        start = time.perf_counter()
        conn.request("POST", f"/api/pay/{APP_SLUG}/unlock-level", body=body, headers={
            "Host": f"api.localhost:{router_port}", "content-type": "application/json",
            "x-wallet-address": wallets[owner], "x-svc-budget-spender": spender})
        response = conn.getresponse()
        payload = json.loads(response.read())
        answered.append(time.perf_counter() - start)
        if response.status != 201:
            raise RuntimeError(f"pay answered {response.status}: {payload}")
        delivery = payload["deliveryId"]
        deadline = time.monotonic() + 10
        while delivery not in receiver.by_delivery:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no webhook for {delivery} within 10 s")
            time.sleep(0.0005)
        to_receipt.append(receiver.by_delivery[delivery] - start)
    conn.close()
    return to_receipt, answered


def machine() -> dict[str, str]:
    from importlib.metadata import version

    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "uname -m": platform.machine(), "nproc": command_output(["nproc"]),
            "python": platform.python_version(),
            "libraries": ", ".join(f"{n} {version(n)}" for n in
                                   ("aiohttp", "sqlalchemy", "uvicorn", "uvloop")),
            "load": command_output(["cat", "/proc/loadavg"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--charges", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dry-run", action="store_true")
    options = parser.parse_args()
    from payments.chain.params import in_process_params
    from tests.ledger.flow import wallet

    tmp = Path(tempfile.mkdtemp(prefix="webhook-bench-"))
    database_url = f"sqlite:///{tmp / 'svc.db'}"
    world = seed_world(database_url, 1)
    receiver = Receiver()
    receiver.start()
    add_endpoint(database_url, world.app_id, receiver.url)
    router = start_router(database_url, tmp, webhook_workers=True)  # the subject
    rounds: list[tuple[float, float]] = []
    try:
        enqueue(database_url, world.app_id, 200)  # warm-up: connections, caches
        time.sleep(3)
        for r in range(options.rounds):
            receiver.reset()
            ref_rate = options.events / run_reference(receiver, options.events)
            receiver.reset()
            ids = enqueue(database_url, world.app_id, options.events)
            rate = options.events / wait_for(receiver, ids, 300)
            rounds.append((rate, ref_rate))
            print(f"round {r + 1}: dispatcher {rate:,.0f}/s, reference {ref_rate:,.0f}/s "
                  f"({rate / ref_rate:.2f})", flush=True)
        codes = issue_codes(database_url, world, options.charges,
                            audience=f"http://portal.localhost:{router.port}")
        time.sleep(2)  # let the last round's outcomes be recorded
        receipts, answers = latency_run(router.port, codes, receiver,
                                        in_process_params().spender, [wallet(0).address])
    finally:
        router.stop()
    if receiver.bad:
        raise RuntimeError(f"{receiver.bad} requests failed the signature check")
    ms = [1e3 * x for x in receipts]
    pay_ms = [1e3 * x for x in answers]
    rate = statistics.median(r for r, _ in rounds)
    ref = statistics.median(f for _, f in rounds)
    p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
    print(f"deliveries/s {rate:,.0f} (reference {ref:,.0f}); charge-to-receipt p50 {p50:.1f} ms "
          f"p99 {p99:.1f} ms; pay answer p50 {percentile(pay_ms, 0.5):.1f} ms")
    section = render(machine(), options, rounds, ms, pay_ms)
    print(section)
    if not options.dry_run:
        write_section(HEADING, section)
    return 0 if rate >= TARGET_RATE and p50 < TARGET_P50_MS else 1


def render(info: dict[str, str], options: argparse.Namespace, rounds: list[tuple[float, float]],
           ms: list[float], pay_ms: list[float]) -> str:
    rate = statistics.median(r for r, _ in rounds)
    ref = statistics.median(f for _, f in rounds)
    p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
    lines = [
        HEADING, "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + ".", "",
        f"Dev mode (`svc-server serve`, SQLite, dispatcher in the server, defaults). "
        f"Throughput: {options.events:,} events written into the outbox at once, per round; "
        "rate = events / (last arrival - first arrival) at a loopback receiver that checks "
        "every HMAC. Reference, same session, right before each round: the same receiver "
        f"and bodies pushed by one aiohttp client (own thread and loop) with {CONCURRENCY} "
        "concurrent keep-alive requests: what one Python sender with nothing else to do gets "
        "through this receiver. The dispatcher also claims every row and records every "
        "outcome in the database, so the ratio is the price of durability.", "",
        "| Round | Dispatcher deliveries/s | Reference requests/s | Ratio |",
        "|---|---|---|---|",
        *(f"| {i + 1} | {r:,.0f} | {f:,.0f} | {r / f:.2f} |" for i, (r, f) in enumerate(rounds)),
        f"| **median** | **{rate:,.0f}** | **{ref:,.0f}** | **{rate / ref:.2f}** |", "",
        f"Charge-to-receipt: {len(ms)} payments through `POST /api/pay/{APP_SLUG}/unlock-level`, "
        "one at a time; from sending the request to the `payment.delivered` arriving at the "
        "receiver (the dispatcher is woken by the payment's commit).", "",
        "| | p50 | p90 | p99 | max |", "|---|---|---|---|---|",
        f"| charge to receipt | {p50:.1f} ms | {percentile(ms, 0.9):.1f} ms | {p99:.1f} ms | "
        f"{max(ms):.1f} ms |",
        f"| pay answer alone | {percentile(pay_ms, 0.5):.1f} ms | {percentile(pay_ms, 0.9):.1f} "
        f"ms | {percentile(pay_ms, 0.99):.1f} ms | {max(pay_ms):.1f} ms |", "",
        f"Targets: {TARGET_RATE:,.0f} deliveries/s ({'met' if rate >= TARGET_RATE else 'MISSED'})"
        f", p50 under {TARGET_P50_MS:.0f} ms ({'met' if p50 < TARGET_P50_MS else 'MISSED'}).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
