"""Wiring webhooks: URL checks, the secret box, the API's services and the in-server
dispatcher with its commit hook (docs/webhooks.md)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from manifest.url_policy import DnsResolver, UrlPolicy
from payments.chain.params import ChainParams
from payments.developer.services import DeveloperServices
from payments.webhooks.dispatcher import Dispatcher, DispatchPolicy
from payments.webhooks.endpoints import UrlChecks
from payments.webhooks.schedule import RetrySchedule
from payments.webhooks.sender import Sender
from payments.webhooks.services import WebhookServices
from payments.webhooks.signing_secrets import SecretBox
from payments.webhooks.wakeup import CommitWakeup, NotifyOnCommit
from router.settings import Settings


def url_checks(settings: Settings) -> UrlChecks:
    nameserver, port = settings.dns_nameserver or (None, 53)
    return UrlChecks(UrlPolicy.from_settings(settings), DnsResolver(nameserver, port))


def webhook_services(settings: Settings, developer: DeveloperServices,
                     params: ChainParams) -> WebhookServices:
    return WebhookServices(developer=developer, checks=url_checks(settings),
                           box=SecretBox(settings.secret_key), params=params)


def make_dispatcher(settings: Settings, sessions: sessionmaker[Session],
                    ssl_context: ssl.SSLContext | None = None) -> Dispatcher:
    sender = Sender(url_checks(settings), timeout=settings.webhook_timeout,
                    ssl_context=ssl_context, max_connections=settings.webhook_max_in_flight)
    policy = DispatchPolicy(poll_interval=settings.webhook_poll_interval,
                            max_in_flight=settings.webhook_max_in_flight,
                            lease=settings.webhook_lease_seconds,
                            retention=timedelta(days=30))
    return Dispatcher(sessions, sender, SecretBox(settings.secret_key),
                      RetrySchedule(settings.webhook_retry_delays), policy)


@dataclass
class WebhookWorkers:
    """This process's dispatcher and the hook that wakes it after commits; or, when
    ``svc-ops webhooks run`` processes dispatch instead, on PostgreSQL, the hook that
    NOTIFYs them."""

    dispatcher: Dispatcher | None
    hook: CommitWakeup | NotifyOnCommit | None
    engine: Engine
    sessions: sessionmaker[Session]

    @classmethod
    async def start(cls, settings: Settings, engine: Engine,
                    sessions: sessionmaker[Session]) -> WebhookWorkers:
        if not settings.webhook_workers:
            notify = NotifyOnCommit() if engine.dialect.name == "postgresql" else None
            if notify is not None:
                notify.install(engine, sessions)
            return cls(None, notify, engine, sessions)
        dispatcher = make_dispatcher(settings, sessions)
        wakeup = CommitWakeup(dispatcher.wake)
        wakeup.install(engine, sessions)
        await dispatcher.start()
        return cls(dispatcher, wakeup, engine, sessions)

    async def stop(self) -> None:
        if self.hook is not None:
            self.hook.remove(self.engine, self.sessions)
        if self.dispatcher is not None:
            await self.dispatcher.stop()
