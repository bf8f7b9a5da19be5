"""``/healthz`` (the process is up) and ``/statusz`` (its dependencies are ready)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse

from payments import migrate
from payments.chain.heartbeat import Heartbeat, heartbeats, stale_after
from payments.db import utcnow
from router.resources import Resources
from router.settings import ENV_PREFIX, Settings


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


class Status:
    def __init__(self, settings: Settings, resources: Resources) -> None:
        self._settings = settings
        self._resources = resources

    async def endpoint(self, request: Request) -> JSONResponse:
        checks = {
            "database": await self._database(),
            "redis": await self._redis(),
            "chain": await self._chain(),
        }
        if not self._settings.chain_workers:  # `svc-ops chain run` does the chain's work
            checks["chainWorker"] = await self._chain_worker()
        ok = all(c["status"] in ("ok", "embedded") for c in checks.values()
                 if c.get("required", True))
        return JSONResponse({"status": "ok" if ok else "degraded", "mode": self._settings.mode,
                             "checks": checks}, status_code=200 if ok else 503)

    async def _database(self) -> dict[str, Any]:
        engine = self._resources.engine
        if engine is None:
            return {"status": "down", "detail": "not started"}

        def probe() -> dict[str, Any]:
            started = time.perf_counter()
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            schema = migrate.schema_of(engine)
            # Ahead is a newer version's migration (a rolling upgrade, a rollback): fine.
            status = "ok" if schema.usable else schema.state.value
            found: dict[str, Any] = {
                "status": status, "backend": engine.dialect.name, "revision": schema.current,
                "head": schema.head, "schema": schema.state.value,
                "latencyMs": round((time.perf_counter() - started) * 1000, 2)}
            if schema.state is not migrate.SchemaState.CURRENT:
                found["detail"] = schema.describe()
            return found

        try:
            return await asyncio.wait_for(asyncio.to_thread(probe), timeout=3)
        except Exception as exc:  # any failure is "down"; the type says why, no secrets
            return {"status": "down", "detail": type(exc).__name__}

    async def _redis(self) -> dict[str, Any]:
        client = self._resources.redis
        if client is None:
            return {"status": "embedded", "detail": "in-process cache and invalidation"}
        try:
            started = time.perf_counter()
            await asyncio.wait_for(client.ping(), timeout=2)
            return {"status": "ok", "latencyMs": round((time.perf_counter() - started) * 1000, 2)}
        except Exception as exc:
            return {"status": "down", "detail": type(exc).__name__}

    async def _chain(self) -> dict[str, Any]:
        """The chain's reads (a server needs no key for them), and what this process's
        chain workers need to sign when it runs them. Servers without chain workers sign
        nothing: the relayer is `svc-ops chain run`'s (chainWorker tells of it)."""
        reads, relayer = self._resources.chain, self._resources.relayer
        backend = self._settings.chain_backend
        keyless = backend == "json_rpc" and not self._settings.relayer_key
        found: dict[str, Any] = {"status": "down", "backend": backend,
                                 "workers": self._settings.chain_workers}
        if backend == "json_rpc":
            found["relayerKey"] = "not_configured" if keyless else "configured"
        if reads is None:
            return {**found, "detail": "not started"}
        try:
            readiness = await asyncio.wait_for(asyncio.to_thread(
                lambda: reads.readiness_of(relayer, named="the relayer key")), timeout=3)
        except Exception as exc:
            return {**found, "detail": type(exc).__name__}
        found.update(status=readiness.status, **readiness.detail)
        if readiness.status == "ok" and backend == "in_process":
            found["status"] = "embedded"  # a real EVM, inside this process: nothing to reach
        if readiness.status == "ok" and keyless:
            found.update(self._without_key())
        return found

    def _without_key(self) -> dict[str, str]:
        """A JSON-RPC chain that answers, and no relayer key: a server with chain workers
        relays and settles nothing (``not_configured``, required); one without them needs
        none, its reads (the portal's wallet reads too) ask the node with no key."""
        if self._settings.chain_workers:
            return {"status": "not_configured", "detail": (
                f"the node answers, but {ENV_PREFIX}RELAYER_KEY is unset and this server runs "
                "the chain workers: nothing is relayed or settled")}
        return {"detail": (f"the node answers; {ENV_PREFIX}RELAYER_KEY is unset: this server "
                           "signs nothing (`svc-ops chain run` relays and settles) and reads "
                           "the chain without a key")}

    async def _chain_worker(self) -> dict[str, Any]:
        """The age of the chain workers' heartbeats (payments/chain/heartbeat.py). Required
        once one has ever beaten in this database: before, nothing says one should run
        (dev, tests, a server set up before any worker)."""
        sessions = self._resources.sessions
        if sessions is None:
            return {"status": "down", "required": False, "detail": "not started"}

        def read() -> list[Heartbeat]:
            with sessions() as session:
                return heartbeats(session)

        try:
            beats = await asyncio.wait_for(asyncio.to_thread(read), timeout=3)
        except Exception as exc:  # the database check says why
            return {"status": "unknown", "required": False, "detail": type(exc).__name__}
        if not beats:
            return {"status": "not_seen", "required": False,
                    "detail": "no `svc-ops chain run` has written a heartbeat here yet"}
        now, limit = utcnow(), stale_after(self._settings.chain_worker_interval)
        workers = [{"relayer": b.relayer, "ageSeconds": round(b.age(now), 1),
                    "cycles": b.cycles, "stale": b.age(now) > limit.total_seconds()}
                   for b in beats]
        fresh = not workers[0]["stale"]  # the newest: is any worker alive
        found: dict[str, Any] = {"status": "ok" if fresh else "stale",
                                 "staleAfterSeconds": limit.total_seconds(),
                                 "workers": workers}
        if not fresh:
            found["detail"] = ("no chain worker has finished a cycle for "
                               f"{workers[0]['ageSeconds']} s: nothing is relayed or settled")
        return found
