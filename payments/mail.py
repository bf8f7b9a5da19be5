"""Outgoing mail (developer email verification codes) behind one small interface.

``SmtpMailer`` is the production side; ``CapturingMailer`` is the embedded dev side, which
keeps what it would have sent and may print it. Bodies carry verification codes, so neither
the body nor the SMTP password is ever logged or put in an error message.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    to: str
    subject: str
    text: str


class MailError(Exception):
    """A message could not be handed to the mail server; says where and why, never the body."""


class Mailer(Protocol):
    def send(self, message: Message) -> None:
        """Deliver ``message`` or raise ``MailError``. Blocking: async callers use a thread."""


class SmtpMailer:
    """Sends through an SMTP relay, optionally upgrading with STARTTLS and logging in."""

    def __init__(self, host: str, port: int, sender: str, username: str | None = None,
                 password: str | None = None, starttls: bool = False, timeout: float = 10,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.sender = sender
        self.username = username
        self._password = password
        self.starttls = starttls
        self.timeout = timeout
        # A custom context is for a private CA; the default verifies against the system store.
        self._ssl_context = ssl_context

    def __repr__(self) -> str:
        return f"SmtpMailer(host={self.host!r}, port={self.port}, sender={self.sender!r})"

    def send(self, message: Message) -> None:
        email = self._compose(message)
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                if self.starttls:
                    smtp.starttls(context=self._ssl_context or ssl.create_default_context())
                if self.username is not None:
                    smtp.login(self.username, self._password or "")
                smtp.send_message(email)
        except (smtplib.SMTPException, OSError) as exc:
            raise MailError(f"Could not send mail to {message.to} through "
                            f"{self.host}:{self.port}: {_reason(exc)}") from exc
        log.info("mail sent to %s: %s", message.to, message.subject)

    def _compose(self, message: Message) -> EmailMessage:
        email = EmailMessage()
        try:
            email["From"] = self.sender
            email["To"] = message.to
            email["Subject"] = message.subject
        except ValueError as exc:  # a CR/LF in a header value: refuse header injection
            raise MailError(f"Refused to send mail with an invalid header: {exc}") from exc
        email.set_content(message.text)
        return email


def _reason(exc: BaseException) -> str:
    """What went wrong, without echoing anything we sent (the server may quote it back)."""
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"the server refused the login (SMTP {exc.smtp_code})"
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"the server answered SMTP {exc.smtp_code}"
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return "the server refused the recipient"
    if isinstance(exc, smtplib.SMTPNotSupportedError | smtplib.SMTPServerDisconnected):
        return str(exc)  # smtplib's own sentence, e.g. "STARTTLS extension not supported"
    if isinstance(exc, TimeoutError):
        return "the connection timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return type(exc).__name__


class CapturingMailer:
    """Dev mode: keeps every message and, given ``echo``, prints it (codes included, on purpose)."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self._echo = echo
        self._lock = threading.Lock()
        self._messages: list[Message] = []

    @property
    def messages(self) -> list[Message]:
        """A snapshot, oldest first."""
        with self._lock:
            return list(self._messages)

    def send(self, message: Message) -> None:
        with self._lock:
            self._messages.append(message)
        if self._echo is not None:
            self._echo(f"[dev mail] to {message.to}: {message.subject}\n{message.text}")
