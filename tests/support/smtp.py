"""A real SMTP server (aiosmtpd) on loopback that keeps what it receives.

Browser tests read developer verification codes from it with ``wait_for_message``.
"""

from __future__ import annotations

import email
import email.policy
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.support.services import free_port


class SmtpServer:
    """What the test sees: where to connect, and every message received, oldest first."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.messages: list[EmailMessage] = []
        # An SMTP reply to answer DATA with instead of accepting, e.g. "451 4.3.0 ...": the
        # mail server failing on our side, as the sender sees it.
        self.refuse_with: str | None = None
        self._arrived = threading.Condition()
        self._handed_out: set[int] = set()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.refuse_with is not None:
            return self.refuse_with
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        with self._arrived:
            self.messages.append(parsed)
            self._arrived.notify_all()
        return "250 Message accepted for delivery"

    def wait_for_message(self, to: str, timeout: float = 10.0) -> EmailMessage:
        """The oldest message to ``to`` not returned before; waits up to ``timeout`` seconds.

        Each message is handed out once, so after a resend the next call returns the new one.
        """
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                for index, message in enumerate(self.messages):
                    if index not in self._handed_out and _addressed_to(message, to):
                        self._handed_out.add(index)
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no new mail to {to} within {timeout} s")
                self._arrived.wait(remaining)


def _addressed_to(message: EmailMessage, to: str) -> bool:
    return any(address.addr_spec.lower() == to.lower()
               for address in message["To"].addresses)


@contextmanager
def smtp_server(**smtp_options: Any) -> Iterator[SmtpServer]:
    """Run an SMTP server on 127.0.0.1 and a free port.

    ``smtp_options`` go to ``aiosmtpd.smtp.SMTP`` (e.g. ``tls_context``, ``require_starttls``,
    ``authenticator``).
    """
    server = SmtpServer("127.0.0.1", free_port())
    controller = Controller(server, hostname=server.host, port=server.port, **smtp_options)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()
