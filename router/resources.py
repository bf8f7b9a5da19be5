"""What the lifespan opens and closes, handed to the hosts that need it."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.gateway import ChainReads
from payments.chain.workers import BackgroundWorkers
from payments.ratelimit import RateLimiter
from router.app_directory import AppDirectory
from router.invalidation import ChangeBus
from router.webhooks import WebhookWorkers


class NotStarted(RuntimeError):
    """A resource was used before the lifespan opened it."""


@dataclass
class Resources:
    engine: Engine | None = None
    sessions: sessionmaker[Session] | None = None
    redis: aioredis.Redis | None = None
    http: aiohttp.ClientSession | None = None
    bus: ChangeBus | None = None
    directory: AppDirectory | None = None
    limiter: RateLimiter | None = None
    # The chain as every request reads it (the portal's wallet reads, /statusz): typed as
    # reads, which need no key, so no request reaches a signer through it. The gateway goes
    # to the chain workers alone (router/chain.py).
    chain: ChainReads | None = None
    workers: BackgroundWorkers | None = None
    relayer: str | None = None  # the address this process's chain workers sign for
    # Whose certificates developer origins must present (proxy and runtime verification);
    # None: the system trust store. Tests set their own CA.
    origin_tls: ssl.SSLContext | None = None
    webhooks: WebhookWorkers | None = None
    # svc-server dev's file for its in-process chain (router/dev_chain.py); None elsewhere.
    dev_chain_state: Path | None = None
    closers: list[object] = field(default_factory=list)

    def session_factory(self) -> sessionmaker[Session]:
        if self.sessions is None:
            raise NotStarted("database")
        return self.sessions

    def http_session(self) -> aiohttp.ClientSession:
        if self.http is None:
            raise NotStarted("http client")
        return self.http

    def app_directory(self) -> AppDirectory:
        if self.directory is None:
            raise NotStarted("app directory")
        return self.directory

    def rate_limiter(self) -> RateLimiter:
        if self.limiter is None:
            raise NotStarted("rate limiter")
        return self.limiter

    def change_bus(self) -> ChangeBus:
        if self.bus is None:
            raise NotStarted("change bus")
        return self.bus
