"""A create-key form makes one key, however often it is sent. Reloading the page that shows
a new key's secret sends its form again; that sending is answered with the key the form
made (by its preview), never with its secret, and no second key is made. The same holds
for two sendings at the same moment."""

from __future__ import annotations

import threading

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.models import ApiKey
from tests.factories import add_owned_app
from tests.portal.conftest import FORM_TOKEN_RE, Console, key_form_of, log_in

# kind: (the page with the form, the form's target, the list the answers link to, owner)
FORMS = {"app": ("/apps/game", "/apps/game/keys", "/apps/game#keys", "App"),
         "organization": ("/keys", "/keys/new", "/keys#keys", "Organization")}
FIELDS = {"label": "ci", "environment": "test", "scope": ["orders:read"]}


def _secret(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    return answer.text.split('id="secret" class="secret">')[1].split("<")[0]


def _keys(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(ApiKey)) or 0


@pytest.mark.parametrize("kind", list(FORMS))
def test_a_form_sent_again_makes_no_second_key_and_shows_no_secret(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session],
        kind: str) -> None:
    add_owned_app(sessions, developer[1], "game")
    page, target, back, owner = FORMS[kind]
    with console.client() as client:
        log_in(client)
        form = {**key_form_of(client.get(page)), **FIELDS}
        secret = _secret(client.post(target, data=form))

        again = client.post(target, data=form)  # what a reload of the secret page sends
        assert again.status_code == 409, again.text
        assert again.headers["cache-control"] == "no-store"
        assert secret not in again.text and 'id="secret"' not in again.text
        assert f"<code>zpk_test_…{secret[-4:]}</code>" in again.text
        assert "This key was already created" in again.text
        assert "shown once" in again.text and "key_already_created" in again.text
        assert f"<dt>{owner}</dt>" in again.text and f'href="{back}"' in again.text
        assert _keys(sessions) == 1

        # The form shown anew (the list the answer links to) has a token of its own.
        fresh = client.post(target, data={**form, **key_form_of(client.get(page))})
        assert secret not in _secret(fresh)
        assert _keys(sessions) == 2

        # A form without its token was not shown by this console: nothing is made, and the
        # page it lands on has a form that works.
        stale = client.post(target, data={k: v for k, v in form.items() if k != "formToken"})
        assert stale.status_code == 400 and "form_token_required" in stale.text
        assert FORM_TOKEN_RE.search(stale.text)
        assert _keys(sessions) == 2


@pytest.mark.parametrize("kind", list(FORMS))
def test_two_sendings_of_one_form_at_once_make_one_key(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session],
        kind: str) -> None:
    add_owned_app(sessions, developer[1], "game")
    page, target, _, _ = FORMS[kind]
    with console.client() as client:
        log_in(client)
        form = {**key_form_of(client.get(page)), **FIELDS}
        cookies = httpx.Cookies(client.cookies)
    start = threading.Barrier(2)
    answers: list[httpx.Response] = []

    def send() -> None:
        with console.client(cookies=cookies) as sender:
            start.wait(10)
            answers.append(sender.post(target, data=form))
    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    made, refused = sorted(answers, key=lambda a: a.status_code)
    secret = _secret(made)
    assert secret not in refused.text and f"zpk_test_…{secret[-4:]}" in refused.text
    assert _keys(sessions) == 1
