"""Rate limits on sign-up, log-in and verification, and the 60 s resend cooldown: hit, then
lifted once the window has passed (a fake clock drives the services and the limiter)."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from payments.developer.services import Limits
from payments.ratelimit import Limit
from tests.portal.conftest import (
    CODE_RE,
    PASSWORD,
    Console,
    ConsoleFactory,
    FakeClock,
    form_post,
)
from tests.support.browser import BrowserSession, screenshot

SMALL = Limits(signup=Limit("signup", 2, 3600), login=Limit("login", 3, 60),
               verify=Limit("verify", 2, 120))


def _retry_after(response: httpx.Response) -> int:
    value = int(response.headers["retry-after"])
    assert value >= 1
    return value


@pytest.mark.usefixtures("developer")
def test_log_in_failures_until_429_then_lifted(start_console: ConsoleFactory,
                                              chrome: BrowserSession,
                                              request: pytest.FixtureRequest) -> None:
    clock = FakeClock()
    with start_console(limits=SMALL, clock=clock) as console, console.client() as client:
        wrong = {"login": "dev1", "password": "not the password"}
        for _ in range(3):
            failed = form_post(client, "/login", wrong, "/login")
            assert failed.status_code == 401 and "Wrong email/username or password" in failed.text
        limited = form_post(client, "/login", wrong, "/login")
        assert limited.status_code == 429 and _retry_after(limited) <= 60
        assert "Retry in" in limited.text and "rate_limited" in limited.text
        right = {"login": "dev1", "password": PASSWORD}
        assert form_post(client, "/login", right, "/login").status_code == 429
        other = form_post(client, "/login", {"login": "someone", "password": "x" * 12}, "/login")
        assert other.status_code == 401  # the limit is per address and login name

        if request.node.callspec.params.get("db_url") == "sqlite":
            page = chrome.new_page()
            page.goto(f"{console.origin}/login")
            page.get_by_label("Email or username").fill("dev1")
            page.get_by_label("Password").fill("not the password")
            with page.expect_response(lambda r: r.request.method == "POST") as answered:
                page.get_by_role("button", name="Log in").click()
            assert answered.value.status == 429
            assert "Retry in" in page.get_by_role("alert").inner_text()
            screenshot(page, "console-429")

        clock.advance(61)
        assert form_post(client, "/login", right, "/login").status_code == 303


def _sign_up(client: httpx.Client, email: str, username: str) -> int:
    response = form_post(client, "/signup", {"email": email, "username": username,
                                             "password": PASSWORD}, "/signup")
    return response.status_code


def _code(console: Console, email: str) -> str:
    found = CODE_RE.search(console.smtp.wait_for_message(email).get_content())
    assert found
    return found.group(1)


def test_resend_cooldown_verify_and_sign_up_limits(start_console: ConsoleFactory) -> None:
    clock = FakeClock()
    email = "ada@example.com"
    with start_console(limits=SMALL, clock=clock) as console, console.client() as client:
        assert _sign_up(client, email, "ada") == 303
        first = _code(console, email)
        page = f"/verify?email={email}"

        # The clock is real time plus the test's offset: on a loaded box a second or two
        # may pass between the sign-up and a resend.
        resend = form_post(client, "/verify/resend", {"email": email}, page)
        wait = _retry_after(resend)
        assert resend.status_code == 429 and 57 <= wait <= 60
        assert f"in {wait} s" in resend.text
        clock.advance(45)
        resend = form_post(client, "/verify/resend", {"email": email}, page)
        wait = _retry_after(resend)
        assert resend.status_code == 429 and 12 <= wait <= 15
        assert f"in {wait} s" in resend.text
        clock.advance(16)
        resend = form_post(client, "/verify/resend", {"email": email}, page)
        assert resend.status_code == 303
        latest = _code(console, email)

        wrong = "000000" if latest != "000000" else "111111"
        for _ in range(2):
            bad = form_post(client, "/verify", {"email": email, "code": wrong}, page)
            assert bad.status_code == 422 and "verification_code_invalid" in bad.text
        limited = form_post(client, "/verify", {"email": email, "code": latest}, page)
        assert limited.status_code == 429 and _retry_after(limited) <= 120
        clock.advance(121)
        if first != latest:  # the resend replaced the first code
            stale = form_post(client, "/verify", {"email": email, "code": first}, page)
            assert stale.status_code == 422
            clock.advance(121)
        verified = form_post(client, "/verify", {"email": email, "code": latest}, page)
        assert verified.status_code == 303 and verified.headers["location"] == "/apps"
        assert client.get("/apps").status_code == 200

        assert _sign_up(client, "bob@example.com", "bob") == 303  # second from here
        refused = form_post(client, "/signup", {"email": "cy@example.com", "username": "cyd",
                                                "password": PASSWORD}, "/signup")
        assert refused.status_code == 429 and _retry_after(refused) > 3000
        assert 'value="cy@example.com"' in refused.text  # the form keeps what was typed
        clock.advance(3601)
        assert _sign_up(client, "cy@example.com", "cyd") == 303


PROXY = "127.0.0.2"  # a loopback address of its own, named in SVCSRV_TRUSTED_PROXIES


def _wrong_login(client: httpx.Client, forwarded_for: str) -> int:
    return form_post(client, "/login", {"login": "dev1", "password": "not the password"},
                     "/login", headers={"x-forwarded-for": forwarded_for}).status_code


@pytest.mark.usefixtures("developer")
def test_clients_behind_a_trusted_proxy_get_a_bucket_each(
        start_console: ConsoleFactory) -> None:
    # Behind nginx every peer is nginx: keyed on the peer, one attacker's wrong passwords
    # locked every client out of a name, and ten sign-ups an hour were the whole
    # service's (deploy walk 25, finding 2). The rightmost untrusted X-Forwarded-For entry
    # is the client.
    trusted = (ipaddress.ip_network(f"{PROXY}/32"),)
    with start_console(limits=SMALL, clock=FakeClock(), trusted_proxies=trusted) as console, \
            console.client(transport=httpx.HTTPTransport(local_address=PROXY)) as proxy, \
            console.client() as direct:
        attacker, victim = "198.51.100.7", "203.0.113.9"
        assert [_wrong_login(proxy, attacker) for _ in range(3)] == [401] * 3
        assert _wrong_login(proxy, attacker) == 429
        # What the attacker writes left of the proxy's entry is not believed either.
        assert _wrong_login(proxy, f"{victim}, {attacker}") == 429
        right = {"login": "dev1", "password": PASSWORD}
        victim_login = form_post(proxy, "/login", right, "/login",
                                 headers={"x-forwarded-for": victim})
        assert victim_login.status_code == 303

        # A peer we do not trust is keyed on itself, whatever it claims.
        assert [_wrong_login(direct, f"192.0.2.{n}") for n in range(3)] == [401] * 3
        assert _wrong_login(direct, "192.0.2.99") == 429

    with start_console(limits=SMALL, clock=FakeClock(), trusted_proxies=trusted) as console, \
            console.client(transport=httpx.HTTPTransport(local_address=PROXY)) as proxy:
        def sign_up(forwarded_for: str, name: str) -> int:
            return form_post(proxy, "/signup", {"email": f"{name}@example.com",
                                                "username": name, "password": PASSWORD},
                             "/signup", headers={"x-forwarded-for": forwarded_for}
                             ).status_code

        assert [sign_up(attacker, "ann"), sign_up(attacker, "abe")] == [303, 303]
        assert sign_up(attacker, "amy") == 429
        assert sign_up(victim, "vic") == 303


@pytest.mark.usefixtures("developer")
def test_an_ipv6_client_is_limited_per_64(start_console: ConsoleFactory) -> None:
    # One IPv6 client holds a /64 (2^64 addresses): keyed per address, it rotated through
    # them and no per-address limit ever applied. Here the trusted proxy is ::1, the server
    # listening there, and X-Forwarded-For names the clients.
    trusted = (ipaddress.ip_network("::1/128"),)
    with start_console(limits=SMALL, clock=FakeClock(), trusted_proxies=trusted,
                       bind_host="::1") as console, \
            httpx.Client(base_url=f"http://[::1]:{console.port}", timeout=15,
                         headers={"host": console.host("console")}) as proxy:
        def sign_up(forwarded_for: str, name: str) -> int:
            return form_post(proxy, "/signup", {"email": f"{name}@example.com",
                                                "username": name, "password": PASSWORD},
                             "/signup", headers={"x-forwarded-for": forwarded_for}
                             ).status_code

        assert [sign_up("2001:db8:1:2::1", "ann"), sign_up("2001:db8:1:2::2", "abe")] \
            == [303, 303]
        # another address of the same /64, however written: the same bucket
        assert sign_up("2001:DB8:1:2:ffff:ffff:ffff:fffe", "amy") == 429
        assert sign_up("2001:db8:1:3::1", "ned") == 303  # the neighbouring /64 is another

        # An IPv4 client seen through an IPv6 socket is that IPv4 address, not a /64 of
        # ::ffff:0:0 shared with every other IPv4 client.
        assert [_wrong_login(proxy, "198.51.100.7") for _ in range(3)] == [401] * 3
        assert _wrong_login(proxy, "::ffff:198.51.100.7") == 429
        assert _wrong_login(proxy, "::ffff:198.51.100.8") == 401
        # log-in too: rotating through the /64 does not reset the count
        assert [_wrong_login(proxy, f"2001:db8:5:6::{n}") for n in range(1, 4)] == [401] * 3
        assert _wrong_login(proxy, "2001:db8:5:6::99") == 429


def test_a_failed_verification_mail_spends_no_sign_up(start_console: ConsoleFactory) -> None:
    # A send our mail server refused is our failure: it gives the sign-up back, so a person
    # who retries through an outage still has their hour's sign-ups. Every attempt counts
    # against a wider limit of its own, so failing sends (a recipient our relay refuses,
    # say) cannot be repeated without bound.
    limits = Limits(signup=Limit("signup", 2, 3600),
                    signup_attempt=Limit("signup-attempt", 6, 3600))
    clock = FakeClock()
    with start_console(limits=limits, clock=clock) as console, console.client() as client:
        def sign_up(name: str) -> httpx.Response:
            return form_post(client, "/signup", {"email": f"{name}@example.com",
                                                 "username": name, "password": PASSWORD},
                             "/signup")

        console.smtp.refuse_with = "451 4.3.0 Temporary local problem"
        for name in ("ann", "abe", "amy"):
            failed = sign_up(name)
            assert failed.status_code == 502 and "mail_failed" in failed.text
        console.smtp.refuse_with = None
        assert [sign_up(name).status_code for name in ("ann", "abe")] == [303, 303]
        assert _code(console, "ann@example.com") and _code(console, "abe@example.com")
        refused = sign_up("amy")  # the sixth attempt: the sign-up limit's third
        assert refused.status_code == 429 and "Too many signup requests" in refused.text

        clock.advance(3601)
        console.smtp.refuse_with = "451 4.3.0 Temporary local problem"
        assert [sign_up(f"user{n}").status_code for n in range(6)] == [502] * 6
        capped = sign_up("user6")
        assert capped.status_code == 429 and "Too many signup-attempt requests" in capped.text
        assert _retry_after(capped) > 3000


def test_resending_the_code_counts_as_a_sign_up_attempt(start_console: ConsoleFactory) -> None:
    # The account's resend cooldown is set only by a send that worked: while our mail
    # server fails, resends were unbounded. Each counts against signup-attempt now.
    limits = Limits(signup_attempt=Limit("signup-attempt", 3, 3600))
    clock = FakeClock()
    with start_console(limits=limits, clock=clock) as console, console.client() as client:
        signed_up = form_post(client, "/signup", {"email": "ann@example.com",
                                                  "username": "ann", "password": PASSWORD},
                              "/signup")
        assert signed_up.status_code == 303, signed_up.text
        clock.advance(61)  # past the resend cooldown the first mail set

        def resend() -> httpx.Response:
            return form_post(client, "/verify/resend", {"email": "ann@example.com"},
                             "/verify?email=ann%40example.com")

        console.smtp.refuse_with = "451 4.3.0 Temporary local problem"
        assert [resend().status_code for _ in range(2)] == [502, 502]
        capped = resend()
        assert capped.status_code == 429 and "Too many signup-attempt requests" in capped.text
        console.smtp.refuse_with = None
        assert resend().status_code == 429  # the hour's attempts are spent, sent or not
        clock.advance(3601)
        assert resend().status_code == 303
