"""The console's webhook page: the endpoint made, changed and rotated there, the secret
shown once and never again, test events, retries and the resend of skipped events; bad
input answered on the page; other organizations' endpoints out of reach."""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.models import App
from payments.webhooks.models import WebhookEndpoint
from svc.webhooks import verify_webhook
from tests.factories import add_developer
from tests.ledger.flow import PayWorld
from tests.support.waits import wait_for_a_lock_wait
from tests.webhooks.kit import (
    all_settled,
    attempts,
    console,
    create_endpoint,
    developer_of,
    enqueue_events,
    pay,
    receiver,
    wait_until,
)


def test_console_webhook_page(world: PayWorld) -> None:
    with receiver(lambda n, event: "fail" if n == 0 else "ok") as hook, \
            console(world, developer_of(world)) as client:
        app_page = client.get("/apps/game")
        assert app_page.status_code == 200 and 'href="/apps/game/webhooks"' in app_page.text
        empty = client.get("/apps/game/webhooks")
        assert empty.status_code == 200 and "No webhook endpoint yet" in empty.text
        webhook, hook.secret = create_endpoint(client, "game", hook.url)
        pay(world, 2)
        wait_until(lambda: len(hook.ledger.grants()) == 2 and all_settled(world.sessions)(),
                   what="two deliveries")
        shown = client.get("/apps/game/webhooks")
        assert shown.status_code == 200
        text = shown.text
        assert webhook["id"] in text and hook.url in text and webhook["secretPreview"] in text
        assert text.count("payment.delivered") >= 2 and "<td>delivered</td>" in text
        assert "<td>2</td><td>200</td>" in text  # the first request got 503, the second 200
        assert hook.secret not in text and "sha256=" not in text
        other = client.get("/apps/nope/webhooks")
        assert other.status_code == 404
    with world.api() as anonymous:
        signed_out = anonymous.get("/apps/game/webhooks", headers={
            "host": f"console.localhost:{world.router.port}"})
        assert signed_out.status_code in (303, 302)


SECRET_RE = re.compile(r'id="secret" class="secret">(zwhsec_[0-9a-f]+)<')
PAGE = "/apps/game/webhooks"


def form(client: httpx.Client, path: str, data: dict[str, Any] | None = None,
         **kwargs: Any) -> httpx.Response:
    """A console form as the page sends it: the session's CSRF token in the ``csrf`` field."""
    return client.post(path, data={"csrf": client.headers["x-csrf-token"], **(data or {})},
                       **kwargs)


def secret_of(page: httpx.Response) -> str:
    found = SECRET_RE.search(page.text)
    assert found, page.text
    return found.group(1)


def test_console_creates_changes_rotates_tests_and_retries(
        world: PayWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    later: list[str] = []  # every answer after a secret page: none may hold a secret
    with receiver() as hook, console(world, developer_of(world)) as client:
        # Bad input is the page again with the spec's error, never a 500, nothing saved.
        refused = client.post(PAGE, data={"url": hook.url, "event": "payment.delivered"})
        assert refused.status_code == 403 and "csrf_failed" in refused.text
        xss = 'https://169.254.169.254/"><script>alert(1)</script>'
        bad_url = form(client, PAGE, {"url": xss, "event": "payment.delivered"})
        assert bad_url.status_code == 422 and "webhook_url_invalid" in bad_url.text
        assert "must be public HTTPS (spec 5.5)" in bad_url.text
        assert "<script>alert(1)</script>" not in bad_url.text
        assert 'value="https://169.254.169.254/&quot;&gt;&lt;script&gt;' in bad_url.text
        for events, code in ((["payment.delivered", "payment.refunded"], "invalid_events"),
                             ([], "invalid_events")):
            wrong = form(client, PAGE, {"url": hook.url, "event": events})
            assert wrong.status_code == 422 and code in wrong.text, events
        blank = form(client, PAGE, {"url": " ", "event": "payment.delivered"})
        assert blank.status_code == 422 and "missing_field" in blank.text
        assert "No webhook endpoint yet" in client.get(PAGE).text

        # Created: the secret once, on a no-store page with its one copy script.
        created = form(client, PAGE, {"url": hook.url, "event": ["payment.delivered"]})
        assert created.status_code == 200, created.text
        assert created.headers["cache-control"] == "no-store"
        assert "default-src 'none'; script-src 'sha256-" in created.headers[
            "content-security-policy"]
        secret = secret_of(created)
        hook.secret = secret
        with world.sessions() as session:
            endpoint = session.scalars(select(WebhookEndpoint)).one()
        assert endpoint.secret_preview == f"zwhsec_…{secret[-4:]}"
        hid = endpoint.id
        shown = client.get(PAGE)
        later.append(shown.text)
        assert endpoint.secret_preview in shown.text and hook.url in shown.text
        # The secret page's target opened as a page, or the form sent again: no secret.
        for target in (f"{PAGE}/{hid}", f"{PAGE}/{hid}/rotate", f"{PAGE}/{hid}/test",
                       f"{PAGE}/{hid}/resend-skipped", "/apps/game/webhook-attempts/x/retry"):
            opened = client.get(target)
            assert (opened.status_code, opened.headers["location"]) == (303, PAGE), target
        again = form(client, PAGE, {"url": hook.url, "event": ["payment.delivered"]})
        assert again.status_code == 409 and "webhook_exists" in again.text
        later.append(again.text)

        # Rotated: a new secret, once; the same form sent twice does not rotate twice.
        since = re.search(r'name="secretCreatedAt" value="([^"]+)"', shown.text)
        assert since
        rotated = form(client, f"{PAGE}/{hid}/rotate", {"secretCreatedAt": since.group(1)})
        assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
        new_secret = secret_of(rotated)
        assert new_secret != secret and "Every request from now on" in rotated.text
        replayed = form(client, f"{PAGE}/{hid}/rotate", {"secretCreatedAt": since.group(1)})
        assert replayed.status_code == 409 and "webhook_secret_changed" in replayed.text
        later.append(replayed.text)
        hook.secret = new_secret
        with world.sessions() as session:
            row = session.get(WebhookEndpoint, hid)
            assert row is not None and row.secret_preview == f"zwhsec_…{new_secret[-4:]}"

        # Changed: events and a refused URL, shown beside the change form.
        both = ["payment.delivered", "payment.settled"]
        saved = form(client, f"{PAGE}/{hid}", {"url": hook.url, "event": both})
        assert (saved.status_code, saved.headers["location"]) == (
            303, f"{PAGE}?done=saved#endpoint")
        bad_change = form(client, f"{PAGE}/{hid}", {"url": "http://[::1", "event": both})
        assert bad_change.status_code == 422 and "webhook_url_invalid" in bad_change.text
        assert 'id="change-h">Change the endpoint</h2><div class="alert"' in bad_change.text
        with world.sessions() as session:
            row = session.get(WebhookEndpoint, hid)
            assert row is not None and row.events == both and row.url == hook.url

        # Test webhook: queued, sent, signed with the rotated secret.
        tested = form(client, f"{PAGE}/{hid}/test")
        assert (tested.status_code, tested.headers["location"]) == (
            303, f"{PAGE}?done=test-queued#deliveries")
        wait_until(lambda: len(hook.delivered_ids()) == 1, what="the test event")
        r = hook.requests[0]
        event = verify_webhook(r.body, r.headers["x-svc-timestamp"],
                               r.headers["x-svc-signature"], new_secret)
        assert event.test is True

        # Disabled: a purchase is skipped, the page says so; enabled: one button resends.
        off = form(client, f"{PAGE}/{hid}", {"enabled": "false"})
        assert off.headers["location"] == f"{PAGE}?done=disabled#endpoint"
        (delivery,) = pay(world, 1)
        wait_until(all_settled(world.sessions), what="skipped")
        disabled_page = client.get(PAGE).text
        assert "1 event came due while this endpoint was disabled" in disabled_page
        assert "Enable the endpoint to resend it" in disabled_page
        assert "resend-skipped" not in disabled_page
        on = form(client, f"{PAGE}/{hid}", {"enabled": "true"})
        assert on.headers["location"] == f"{PAGE}?done=enabled#endpoint"
        enabled_page = client.get(PAGE).text
        assert "Resend 1 skipped event</button>" in enabled_page
        assert form(client, f"{PAGE}/{hid}", {"enabled": "maybe"}).status_code == 422
        resent = form(client, f"{PAGE}/{hid}/resend-skipped")
        assert resent.headers["location"] == f"{PAGE}?done=resent#deliveries"
        wait_until(lambda: len(hook.ledger.grants()) == 1, what="the resent purchase")
        assert [d for _, d in hook.ledger.grants()] == [delivery]
        assert "came due while" not in client.get(PAGE).text
        nothing = form(client, f"{PAGE}/{hid}/resend-skipped")
        assert nothing.headers["location"] == f"{PAGE}?done=nothing-to-resend#deliveries"

        # Retry: a failed event gets a Retry button; it sends the same event id again.
        hook.plan = lambda n, event: "fail"
        form(client, f"{PAGE}/{hid}/test")
        wait_until(lambda: any(a.status.value == "failed"
                               for a in attempts(world.sessions).values()),
                   what="the schedule used up")
        (failed,) = [a for a in attempts(world.sessions).values() if a.status.value == "failed"]
        listed = client.get(PAGE).text
        assert f'aria-label="Retry event {failed.event_id}"' in listed
        assert listed.count(">Retry</button>") == 1  # delivered rows have none
        hook.plan = lambda n, event: "ok"
        retried = form(client, f"/apps/game/webhook-attempts/{failed.id}/retry")
        assert retried.headers["location"] == f"{PAGE}?done=retried#deliveries"
        wait_until(lambda: attempts(world.sessions)[failed.event_id].status.value
                   == "delivered", what="the retry")
        assert hook.requests[-1].event_id == failed.event_id
        missing = form(client, "/apps/game/webhook-attempts/zwha_nope/retry")
        assert missing.status_code == 404 and "webhook_attempt_not_found" in missing.text
        final = client.get(PAGE)
        later.append(final.text)
        assert "Retry queued" not in final.text
        later.append(client.get(f"{PAGE}?done=retried").text)
        later.append(client.get(f"/api/developer/apps/game/webhooks/{hid}").text)
    for page in later:
        assert secret not in page and new_secret not in page
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in logged and new_secret not in logged


def test_console_webhook_actions_stay_in_their_organization(
        world: PayWorld, sessions: sessionmaker[Session]) -> None:
    with receiver() as hook, console(world, developer_of(world)) as owner:
        created = form(owner, PAGE, {"url": hook.url, "event": "payment.delivered"})
        hook_secret = secret_of(created)
        with sessions() as session:
            hid = session.scalars(select(WebhookEndpoint.id)).one()
    stranger_id, _ = add_developer(sessions, "stranger")
    with console(world, stranger_id) as stranger:
        for path, data in ((PAGE, {"url": "https://example.org/x"}),
                           (f"{PAGE}/{hid}/rotate", {}), (f"{PAGE}/{hid}/test", {}),
                           (f"{PAGE}/{hid}", {"enabled": "false"})):
            answer = form(stranger, path, data)
            assert answer.status_code == 404 and "app_not_found" in answer.text, path
            assert hook_secret not in answer.text
        assert stranger.get(PAGE).status_code == 404
    with sessions() as session:
        row = session.get(WebhookEndpoint, hid)
        assert row is not None and row.status.value == "enabled"
        assert row.secret_preview == f"zwhsec_…{hook_secret[-4:]}"


def test_console_and_api_share_the_webhook_limits(world: PayWorld) -> None:
    """Test events: 10 a minute per developer, through the console or the API alike; the
    11th is the page again with the limit's error beside the button, not a 500."""
    with receiver() as hook, console(world, developer_of(world)) as client:
        form(client, PAGE, {"url": hook.url, "event": "payment.delivered"})
        with world.sessions() as session:
            hid = session.scalars(select(WebhookEndpoint.id)).one()
        api = client.post(f"/api/developer/apps/game/webhooks/{hid}/test")
        assert api.status_code == 202
        pages = [form(client, f"{PAGE}/{hid}/test") for _ in range(10)]
        assert [p.status_code for p in pages] == [303] * 9 + [429]
        limited = pages[-1]
        assert int(limited.headers["retry-after"]) > 0 and "rate_limited" in limited.text
        assert 'id="test-h">Test</h2><div class="alert" role="alert">' in limited.text
        again = client.post(f"/api/developer/apps/game/webhooks/{hid}/test")
        assert (again.status_code, again.json()["code"]) == (429, "rate_limited")


EVENT_CELL = re.compile(r"<tr><td><code>(zevt_[0-9a-f]+)</code></td>")
OLDER_LINK = re.compile(r'<a href="(/apps/game/webhooks\?before=[A-Za-z0-9_-]+)#deliveries" '
                        r'rel="next">Older events</a>')


def test_console_pages_older_events_without_skipping_those_sharing_a_time(
        world: PayWorld) -> None:
    """51 events written in one transaction (one created_at, as a settlement batch's are):
    the newest 50, then *Older events* to the 51st, each once; the older page links back to
    the newest and offers no further page. A ``before`` the API refuses is a 400 page."""
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
    written = enqueue_events(world.sessions, app, 51)
    with console(world, developer_of(world)) as client:
        first = client.get(PAGE)
        assert first.status_code == 200
        newest = EVENT_CELL.findall(first.text)
        link = OLDER_LINK.search(first.text)
        assert len(newest) == 50 and link is not None and "Newest events" not in first.text
        second = client.get(link.group(1))
        assert second.status_code == 200, second.text
        rest = EVENT_CELL.findall(second.text)
        assert len(rest) == 1 and sorted(newest + rest) == sorted(written)
        assert 'href="/apps/game/webhooks#deliveries">Newest events</a>' in second.text
        assert OLDER_LINK.search(second.text) is None and "Older events, newest" in second.text
        bad = client.get(PAGE, params={"before": "yesterday"})
        assert bad.status_code == 400 and "invalid_field" in bad.text
        assert client.get("/apps/nope/webhooks", params={"before": "x"}).status_code == 404


RETRY_FORM = re.compile(r'<form method="post" action="(/apps/game/webhook-attempts/zwha_[0-9a-f]+'
                        r'/retry)">(.*?)</form>')
RESEND_FORM = re.compile(r'<form method="post" action="(/apps/game/webhooks/zwh_[0-9a-f]+'
                         r'/resend-skipped)">(.*?)</form>')
HIDDEN = re.compile(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">')


def sent_form(client: httpx.Client, page: str, pattern: re.Pattern[str]) -> httpx.Response:
    """The first form ``pattern`` finds on ``page``, sent as the browser sends it: to its
    action, with its hidden fields (the CSRF token, and the page's place in the list)."""
    found = pattern.search(page)
    assert found, page
    return client.post(found.group(1), data=dict(HIDDEN.findall(found.group(2))))


def test_retry_and_resend_go_back_to_the_page_they_were_sent_from(world: PayWorld) -> None:
    """A purchase and 51 more events skipped while the endpoint was disabled: Retry on the
    older page, and the Resend button shown there, come back to that page (its ``before``
    carried through the form and the redirect), with their notice; from the newest page, to
    the newest page. A refusal is shown on the page it came from too; a ``before`` the list
    would not read lands on the newest page, the action done all the same."""
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == "game")).one()
    with receiver() as hook, console(world, developer_of(world)) as client:
        created = form(client, PAGE, {"url": hook.url, "event": "payment.delivered"})
        hook.secret = secret_of(created)
        with world.sessions() as session:
            hid = session.scalars(select(WebhookEndpoint.id)).one()
        form(client, f"{PAGE}/{hid}", {"enabled": "false"})
        enqueue_events(world.sessions, app, 51)
        pay(world, 1)  # the newest event, and the one a resend sends
        wait_until(all_settled(world.sessions), what="the events skipped")
        form(client, f"{PAGE}/{hid}", {"enabled": "true"})
        link = OLDER_LINK.search(client.get(PAGE).text)
        assert link is not None
        older = link.group(1)
        cursor = older.split("?before=", 1)[1]
        back = f"{PAGE}?before={cursor}"

        second = client.get(older).text
        assert "Resend 1 skipped event" in second and EVENT_CELL.findall(second)
        retried = sent_form(client, second, RETRY_FORM)
        assert (retried.status_code, retried.headers["location"]) == (
            303, f"{back}&done=retried#deliveries")
        landed = client.get(retried.headers["location"])
        assert "Retry queued" in landed.text and "Newest events</a>" in landed.text
        assert EVENT_CELL.findall(landed.text) == EVENT_CELL.findall(second)

        # A refusal (the endpoint disabled since the page was shown) is that page again.
        form(client, f"{PAGE}/{hid}", {"enabled": "false"})
        refused = sent_form(client, second, RESEND_FORM)
        assert refused.status_code == 409 and "webhook_disabled" in refused.text
        assert "Older events, newest first" in refused.text
        assert EVENT_CELL.findall(refused.text) == EVENT_CELL.findall(second)
        form(client, f"{PAGE}/{hid}", {"enabled": "true"})
        resent = sent_form(client, second, RESEND_FORM)
        assert (resent.status_code, resent.headers["location"]) == (
            303, f"{back}&done=resent#deliveries")

        # From the newest page, the newest page, as before.
        newest = client.get(PAGE).text
        assert 'name="before"' not in newest
        again = sent_form(client, newest, RETRY_FORM)
        assert again.headers["location"] == f"{PAGE}?done=retried#deliveries"
        others = RETRY_FORM.findall(newest)[1:3]  # each retried once: none is in flight
        assert len(others) == 2
        for bad, (action, hidden) in zip(("yesterday", "x" * 300), others, strict=True):
            lost = client.post(action, data={**dict(HIDDEN.findall(hidden)), "before": bad})
            assert lost.headers["location"] == f"{PAGE}?done=retried#deliveries", bad


def test_a_rotation_sent_while_another_commits_does_not_rotate_again(
        world: PayWorld, db_url: str) -> None:
    """The rotate form carries the ``secretCreatedAt`` its page showed. A second sending that
    arrives while the first is still committing must wait for it and see its secret, not
    compare with the row as it was and replace the secret the first just showed."""
    with receiver() as hook, console(world, developer_of(world)) as client:
        created = form(client, PAGE, {"url": hook.url, "event": ["payment.delivered"]})
        assert created.status_code == 200, created.text
        since = re.search(r'name="secretCreatedAt" value="([^"]+)"', client.get(PAGE).text)
        assert since
        with world.sessions() as session:
            hid = session.scalars(select(WebhookEndpoint.id)).one()
        answers: list[httpx.Response] = []
        other = threading.Thread(target=lambda: answers.append(
            form(client, f"{PAGE}/{hid}/rotate", {"secretCreatedAt": since.group(1)})))
        with world.sessions() as first:
            first.begin()
            row = first.get(WebhookEndpoint, hid)
            assert row is not None
            # The first rotation, written and not committed yet.
            row.secret_created_at = row.secret_created_at + timedelta(seconds=1)
            row.secret_preview = "zwhsec_…abcd"
            first.flush()
            other.start()
            wait_for_a_lock_wait(world.sessions, db_url)
            first.commit()
        other.join(30)
    assert [a.status_code for a in answers] == [409], [a.text[:300] for a in answers]
    assert "webhook_secret_changed" in answers[0].text
    with world.sessions() as session:
        kept = session.get(WebhookEndpoint, hid)
        assert kept is not None and kept.secret_preview == "zwhsec_…abcd"  # not replaced
