"""``/healthz`` (the process is up) and ``/statusz`` (its dependencies are ready)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse

from payments import migrate
from router.resources import Resources
from router.settings import Settings


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
        chain = self._resources.chain
        backend = self._settings.chain_backend
        if chain is None:
            return {"status": "down", "backend": backend,
                    "detail": "no relayer key: nothing is relayed or settled"}
        try:
            readiness = await asyncio.wait_for(asyncio.to_thread(chain.readiness), timeout=3)
        except Exception as exc:
            return {"status": "down", "backend": backend, "detail": type(exc).__name__}
        status = readiness.status
        if status == "ok" and backend == "in_process":
            status = "embedded"  # a real EVM, inside this process: nothing to reach
        return {"status": status, "backend": backend,
                "workers": self._settings.chain_workers, **readiness.detail}
