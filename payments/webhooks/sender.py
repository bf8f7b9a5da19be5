"""One webhook request: the URL checked again, the name resolved again and the connection
pinned to a checked address, the signed POST, the answer's status. No redirects followed.

Pinning: the aiohttp connector never resolves a name itself. Before each request the
sender runs the URL policy (``check_webhook_url`` then ``resolve_checked``, dnspython) and
hands the checked addresses to the connector's resolver, which only returns those. A new
connection therefore goes to an address checked for this very request; a pooled keep-alive
connection goes to one checked when it was opened. ``Host`` and TLS SNI (and the
certificate check) use the name, as always.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from datetime import datetime

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from manifest.url_policy import CheckedUrl, UrlRefused, check_webhook_url, resolve_checked
from payments.webhooks.endpoints import UrlChecks
from payments.webhooks.outbox import Job
from payments.webhooks.schedule import UNREACHABLE, Outcome
from payments.webhooks.signing import event_body, request_headers

# What we read of an answer: enough to keep the connection for the next request; the body
# itself is never stored (it may hold anything).
_DRAIN_LIMIT = 64 * 1024


class _PinnedResolver(AbstractResolver):
    """Returns the addresses the sender checked for a name; never asks DNS itself."""

    def __init__(self) -> None:
        self.pins: dict[str, list[str]] = {}

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = self.pins.get(host)
        if not addresses:
            raise OSError(f"{host} was not checked before connecting")
        return [ResolveResult(hostname=host, host=a, port=port,
                              family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for a in addresses]

    async def close(self) -> None:
        return None


class Sender:
    """Call :meth:`open` inside the running loop, :meth:`close` when done."""

    def __init__(self, checks: UrlChecks, *, timeout: float = 15.0,
                 ssl_context: ssl.SSLContext | None = None,
                 max_connections: int = 512) -> None:
        self.checks = checks
        self.timeout = timeout
        self._ssl = ssl_context
        self._max_connections = max_connections
        self._resolver = _PinnedResolver()
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(
            resolver=self._resolver, use_dns_cache=False, limit=self._max_connections,
            limit_per_host=0, ssl=self._ssl if self._ssl is not None else True,
            keepalive_timeout=30)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout),
            auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def check(self, job: Job) -> CheckedUrl:
        """The URL rules again, now: the policy, the runtime's state and DNS may have
        changed since registration. Raises ``UrlRefused``."""
        checked = check_webhook_url(job.url, self.checks.policy, app_slug=job.app_slug,
                                    runtime_active=job.runtime_active)
        if checked.ip_literal:
            resolve_checked(checked, self.checks.policy, self.checks.resolver)
            return checked
        addresses = await asyncio.to_thread(resolve_checked, checked, self.checks.policy,
                                            self.checks.resolver)
        self._resolver.pins[checked.host] = [str(a) for a in addresses]
        return checked

    async def send(self, job: Job, now: datetime) -> tuple[Outcome, bool]:
        """The outcome, and whether a signed request left (the attempt's ``signed``)."""
        assert self._session is not None, "Sender.open() first"
        if job.secret is None:
            return Outcome(None, "secret_unreadable", contacted=False), False
        try:
            checked = await self.check(job)
        except UrlRefused as exc:
            error = "dns_unavailable" if exc.transient else f"url_refused:{exc.rule}"
            return Outcome(None, error[:120], contacted=False), False
        body = event_body(job.payload)
        headers = request_headers(job.payload, body, job.secret, now)
        url = URL(f"{checked.scheme}://{checked.host_header}{checked.path}", encoded=True)
        try:
            async with self._session.post(url, data=body, headers=headers,
                                          allow_redirects=False) as response:
                status = response.status
                # The status decided it; a body cut short afterwards changes nothing.
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    await _drain(response)
        except TimeoutError:
            return Outcome(UNREACHABLE, "timeout"), True
        except aiohttp.ClientSSLError:
            return Outcome(UNREACHABLE, "tls_failed"), True
        except aiohttp.ClientConnectorError:
            return Outcome(UNREACHABLE, "connect_failed"), True
        except aiohttp.ServerDisconnectedError:
            return Outcome(UNREACHABLE, "disconnected"), True
        except aiohttp.ClientResponseError:
            return Outcome(UNREACHABLE, "bad_response"), True
        except (aiohttp.ClientError, OSError):
            return Outcome(UNREACHABLE, "request_failed"), True
        return Outcome(status), True


async def _drain(response: aiohttp.ClientResponse) -> None:
    read = 0
    while read <= _DRAIN_LIMIT:
        chunk = await response.content.readany()
        if not chunk:
            return
        read += len(chunk)
    response.close()  # a large answer: drop the connection rather than read it all


def elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
