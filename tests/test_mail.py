"""Mail reaches a real SMTP server on loopback; failures are a clear MailError."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from payments.mail import CapturingMailer, MailError, Message, SmtpMailer
from tests.support.services import free_port
from tests.support.smtp import SmtpServer, smtp_server

CODE_MESSAGE = Message(to="dev@example.com", subject="Your verification code",
                       text="Your code is 493817. It expires in 10 minutes.")


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


def test_smtp_mailer_delivers_subject_recipient_and_text(smtp: SmtpServer) -> None:
    mailer = SmtpMailer(smtp.host, smtp.port, sender="Payments <no-reply@svc.example>")
    mailer.send(CODE_MESSAGE)
    received = smtp.wait_for_message("dev@example.com", timeout=5)
    assert received["Subject"] == "Your verification code"
    assert received["To"] == "dev@example.com"
    assert received["From"].addresses[0].addr_spec == "no-reply@svc.example"
    assert received.get_content().strip() == CODE_MESSAGE.text


def test_wait_for_message_hands_out_each_message_once(smtp: SmtpServer) -> None:
    mailer = SmtpMailer(smtp.host, smtp.port, sender="no-reply@svc.example")
    mailer.send(Message("dev@example.com", "Code", "first 111111"))
    mailer.send(Message("other@example.com", "Code", "not yours"))
    mailer.send(Message("dev@example.com", "Code", "second 222222"))
    assert "111111" in smtp.wait_for_message("dev@example.com", 5).get_content()
    assert "222222" in smtp.wait_for_message("DEV@example.com", 5).get_content()
    with pytest.raises(TimeoutError):
        smtp.wait_for_message("dev@example.com", timeout=0.2)
    assert len(smtp.messages) == 3


def test_unreachable_server_is_a_mail_error() -> None:
    port = free_port()  # nothing listens here
    mailer = SmtpMailer("127.0.0.1", port, sender="no-reply@svc.example", timeout=2)
    with pytest.raises(MailError, match=f"127.0.0.1:{port}") as caught:
        mailer.send(CODE_MESSAGE)
    assert "dev@example.com" in str(caught.value)
    assert "493817" not in str(caught.value)


def test_header_injection_is_refused_before_connecting() -> None:
    mailer = SmtpMailer("127.0.0.1", free_port(), sender="no-reply@svc.example")
    with pytest.raises(MailError, match="invalid header"):
        mailer.send(Message("dev@example.com\r\nBcc: victim@example.com", "Code", "x"))


@pytest.fixture
def tls_smtp() -> Iterator[tuple[SmtpServer, ssl.SSLContext]]:
    """STARTTLS required, then AUTH as user "mailer" with password "s3cret-pass"."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    def authenticate(server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                     auth_data: Any) -> AuthResult:
        ok = (isinstance(auth_data, LoginPassword)
              and auth_data == (b"mailer", b"s3cret-pass"))
        return AuthResult(success=ok, handled=False)

    with smtp_server(tls_context=server_context, require_starttls=True,
                     authenticator=authenticate, auth_required=True) as server:
        yield server, client_context


def test_starttls_and_login(tls_smtp: tuple[SmtpServer, ssl.SSLContext]) -> None:
    server, client_context = tls_smtp
    mailer = SmtpMailer(server.host, server.port, sender="no-reply@svc.example",
                        username="mailer", password="s3cret-pass", starttls=True,
                        ssl_context=client_context)
    mailer.send(CODE_MESSAGE)
    assert "493817" in server.wait_for_message("dev@example.com", 5).get_content()


def test_wrong_password_is_a_mail_error_without_the_password(
    tls_smtp: tuple[SmtpServer, ssl.SSLContext], caplog: pytest.LogCaptureFixture,
) -> None:
    server, client_context = tls_smtp
    mailer = SmtpMailer(server.host, server.port, sender="no-reply@svc.example",
                        username="mailer", password="wrong-pass", starttls=True,
                        ssl_context=client_context)
    with caplog.at_level(logging.DEBUG, logger="payments"), \
            pytest.raises(MailError, match="refused the login") as caught:
        mailer.send(CODE_MESSAGE)
    assert "wrong-pass" not in caplog.text + str(caught.value) + repr(mailer)
    assert server.messages == []


def test_missing_starttls_is_a_mail_error(smtp: SmtpServer) -> None:
    mailer = SmtpMailer(smtp.host, smtp.port, sender="no-reply@svc.example", starttls=True)
    with pytest.raises(MailError, match="STARTTLS"):
        mailer.send(CODE_MESSAGE)


def test_smtp_mailer_never_logs_the_body(
    smtp: SmtpServer, caplog: pytest.LogCaptureFixture,
) -> None:
    mailer = SmtpMailer(smtp.host, smtp.port, sender="no-reply@svc.example")
    with caplog.at_level(logging.DEBUG, logger="payments"):
        mailer.send(CODE_MESSAGE)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("payments"))
    assert "dev@example.com" in ours  # the server's own debug log quotes DATA; not ours
    assert "493817" not in ours


def test_capturing_mailer_keeps_and_echoes() -> None:
    printed: list[str] = []
    mailer = CapturingMailer(echo=printed.append)
    mailer.send(CODE_MESSAGE)
    assert mailer.messages == [CODE_MESSAGE]
    assert printed == ["[dev mail] to dev@example.com: Your verification code\n"
                       "Your code is 493817. It expires in 10 minutes."]


def test_capturing_mailer_is_thread_safe() -> None:
    mailer = CapturingMailer()

    def send_many(worker: int) -> None:
        for n in range(200):
            mailer.send(Message(f"w{worker}@example.com", "Code", str(n)))

    threads = [threading.Thread(target=send_many, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = mailer.messages
    assert len(messages) == 1600
    for worker in range(8):
        mine = [m.text for m in messages if m.to == f"w{worker}@example.com"]
        assert mine == [str(n) for n in range(200)]
