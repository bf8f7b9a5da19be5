"""A console form makes one API key, however often it is sent.

Reloading the page that shows a new key's secret sends its form again (Chromium asks
first). Each create-key form carries a one-time token, made when the form is shown
(``key_views.key_form``); the key it makes keeps the token's hash under a unique
constraint (``payments.developer.keys.create_key``), so a second sending finds that key
instead of making another, and is answered with a page saying so, never with the secret.
The token only tells sendings of one form apart: who may create keys is the session's,
and its CSRF token's, business as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlalchemy.orm import Session

from payments.developer.auth import Principal
from payments.developer.keys import CreatedKey, KeyAlreadyCreated
from payments.developer.models import ApiKey, Organization
from payments.developer.views import key_view
from payments.errors import ApiError
from payments.models import App
from portal.console.forms import Form
from portal.console.key_views import FORM_TOKEN_FIELD, KeyOwner, NewKey

_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,128}")


def form_token(form: Form) -> str:
    """The form's one-time token; a form without one was not shown by this console."""
    token = form.get(FORM_TOKEN_FIELD)
    if not _TOKEN.fullmatch(token):
        raise ApiError("form_token_required", 400, "This form is out of date, so nothing was "
                       "created: create the key with the form below.")
    return token


def create_once(session: Session, who: Principal, make: Callable[[], CreatedKey]) -> NewKey:
    """``make`` the key, or the key this form made already (without its secret)."""
    try:
        created = make()
    except KeyAlreadyCreated as made:
        if made.key.organization_id not in who.organization_ids:
            # Another developer's form token: say nothing about the key it made.
            raise ApiError("key_already_created", 409, "This form was used already; create "
                           "the key with the form below.") from None
        return NewKey(owner_of(session, made.key), key_view(made.key), None)
    return NewKey(owner_of(session, created.key), key_view(created.key), created.secret)


def owner_of(session: Session, key: ApiKey) -> KeyOwner:
    """Whose key it is, as its pages name it, and the list it is shown in."""
    if key.app_id is None:
        organization = session.get(Organization, key.organization_id)
        assert organization is not None
        return KeyOwner("Organization", organization.name, "/keys#keys")
    app = session.get(App, key.app_id)
    assert app is not None
    return KeyOwner("App", app.name, f"/apps/{app.slug}#keys")
