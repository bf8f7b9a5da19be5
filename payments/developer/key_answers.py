"""The answers of the API-key routes, app keys (``payments.developer.api``) and organization
keys (``payments.developer.org_key_api``) alike: none may be kept by a cache.

The creation's answer holds the ``zpk_`` secret, the one answer that ever does; the others
name keys (id, masked preview, scopes, label), the 409 ``key_already_created`` of a replay
too. ``Cache-Control: no-store`` on each of them, not on the secret's alone: a replay answers
the request whose first answer held the secret, and a console session's GET of the list is
a cookie-authenticated page of credentials a browser would otherwise keep.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from starlette.responses import JSONResponse, Response

from payments.developer.keys import KeyAlreadyCreated
from payments.errors import error_response

NO_STORE = {"cache-control": "no-store"}


def key_answer(body: dict[str, Any]) -> JSONResponse:
    """A list, change or revocation answer: keys by id and preview, never a secret."""
    return JSONResponse(body, headers=NO_STORE)


async def created_answer(creating: Awaitable[dict[str, Any]]) -> Response:
    """201 with the new key and its secret, or the 409 naming the key a replay made."""
    try:
        created = await creating
    except KeyAlreadyCreated as made:
        return error_response(made, NO_STORE)
    return JSONResponse(created, status_code=201, headers=NO_STORE)
