"""``svc keys create`` sends one key request, however often it must retry.

Every run sends an idempotency key (``--idempotency``, else a new random one), so a retry
after a lost answer (a timeout, a dropped connection, a gateway's 502/503/504) makes no
second key. What is retried, and how long to wait, is the SDK's policy
(``svc.backend_errors``): also 429 and ``service_unavailable``, waiting what the service
asks (Retry-After) up to its cap. The service never shows a secret twice: when the key was
made by an attempt whose answer was lost, the retry learns which key
(``key_already_created``) and the run says so, with the command that revokes it; it never
prints a secret it did not receive.
"""

from __future__ import annotations

import shlex
import time
import uuid
from typing import Any

import httpx

from svc.backend_errors import RetryPolicy, is_retryable, retryable_transport_error
from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.target import app_path
from svc.errors import CliError, ExitCode

# The SDK's own (svc.backend.BackendClient's default): 2 retries, 0.2 s then 0.4 s, or what
# Retry-After asks, never more than 5 s. Safe here for the reason it is there: one
# idempotency key for every attempt.
POLICY = RetryPolicy()


def new_idempotency_key() -> str:
    return f"svc-cli:keys:{uuid.uuid4()}"


def create_once(client: DeveloperClient, slug: str, body: dict[str, Any],
                policy: RetryPolicy = POLICY) -> dict[str, Any]:
    """POST the new key; retried under ``body``'s idempotency key, never twice made."""
    attempt = 0
    while True:
        try:
            return client.call("POST", app_path(slug, "keys"), body)
        except ServiceUnreachable as lost:
            if attempt >= policy.retries or not _may_retry(lost):
                raise _unreachable(lost, slug, body, attempt + 1) from None
            asked = None
        except ApiFailure as answer:
            if answer.code == "key_already_created":
                raise _already_created(answer, slug, retried=attempt > 0) from None
            if attempt >= policy.retries or not is_retryable(answer.status, answer.code):
                raise
            asked = answer.retry_after
        time.sleep(policy.wait(attempt, asked))
        attempt += 1


def _may_retry(lost: ServiceUnreachable) -> bool:
    cause = lost.__cause__
    return not isinstance(cause, httpx.TransportError) or retryable_transport_error(cause)


def _already_created(answer: ApiFailure, slug: str, *, retried: bool) -> CliError:
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


def _unreachable(lost: ServiceUnreachable, slug: str, body: dict[str, Any],
                 attempts: int) -> CliError:
    rerun = ["svc", "keys", "create", "--app", slug, "--label", body["label"],
             "--env", body["environment"]]
    if "scopes" in body:
        rerun += ["--scopes", ",".join(body["scopes"])]
    tries = f"{attempts} attempt{'' if attempts == 1 else 's'}"
    return CliError(
        f"{lost}, after {tries}. The key may have been created all the same: rerun with the "
        "same idempotency key to find out without making a second one (check the API URL "
        "and your network first).", ExitCode.NETWORK,
        code="unreachable",
        command=shlex.join([*rerun, "--idempotency", body["idempotencyKey"]]))
