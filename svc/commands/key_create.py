"""``svc keys create`` sends one key request, however often it must retry.

Every run sends an idempotency key (``--idempotency``, else a new random one), so a retry
after a lost answer (a timeout, a dropped connection, a gateway's 502/503/504) makes no
second key. The service never shows a secret twice: when the key was made by an attempt
whose answer was lost, the retry learns which key (``key_already_created``) and the run
says so, with the command that revokes it; it never prints a secret it did not receive.
"""

from __future__ import annotations

import shlex
import time
import uuid
from typing import Any

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.target import app_path
from svc.errors import CliError, ExitCode

RETRY_DELAYS = (0.5, 1.0)  # seconds before the second and the third attempt
RETRYABLE_STATUSES = (502, 503, 504)  # the service, or a gateway, asks for a retry


def new_idempotency_key() -> str:
    return f"svc-cli:keys:{uuid.uuid4()}"


def create_once(client: DeveloperClient, slug: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST the new key; retried under ``body``'s idempotency key, never twice made."""
    retried = False
    for delay in (*RETRY_DELAYS, None):
        try:
            return client.call("POST", app_path(slug, "keys"), body)
        except ServiceUnreachable as lost:
            if delay is None:
                raise _unreachable(lost, slug, body) from None
        except ApiFailure as answer:
            if answer.code == "key_already_created":
                raise _already_created(answer, slug, retried) from None
            if delay is None or answer.status not in RETRYABLE_STATUSES:
                raise
        retried = True
        time.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _already_created(answer: ApiFailure, slug: str, retried: bool) -> CliError:
    found = answer.body.get("key")
    key: dict[str, Any] = found if isinstance(found, dict) else {}
    key_id = str(answer.body.get("keyId") or key.get("id") or "")
    by = ("by an earlier attempt of this run, whose answer was lost" if retried
          else "by an earlier run with this --idempotency key")
    return CliError(
        f"The API key {key_id} ({key.get('preview', 'zpk_…')}) was already created {by}. "
        "Its secret is shown once, in the answer to the request that made the key, so it "
        "cannot be shown again and no second key was made. If you do not have that secret, "
        "revoke this key and create another.", ExitCode.FAILED, code=answer.code,
        command=shlex.join(["svc", "keys", "revoke", key_id, "--app", slug, "--yes"]))


def _unreachable(lost: ServiceUnreachable, slug: str, body: dict[str, Any]) -> CliError:
    rerun = ["svc", "keys", "create", "--app", slug, "--label", body["label"],
             "--env", body["environment"]]
    if "scopes" in body:
        rerun += ["--scopes", ",".join(body["scopes"])]
    return CliError(
        f"{lost}, after {len(RETRY_DELAYS) + 1} attempts. The key may have been created all "
        "the same: rerun with the same idempotency key to find out without making a second "
        "one (check the API URL and your network first).", ExitCode.NETWORK,
        code="unreachable",
        command=shlex.join([*rerun, "--idempotency", body["idempotencyKey"]]))
