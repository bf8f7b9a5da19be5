"""Signing in: start an auth request, show its code, poll until the console answers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.errors import CliError, ExitCode
from svc.grant_store import StoredGrant

SLOW_DOWN_STEP = 5  # seconds added on `slow_down`, as in RFC 8628
TRANSIENT_FAILURES = 3  # consecutive unreachable polls tolerated before giving up


@dataclass(frozen=True)
class PendingSignIn:
    device_code: str  # the CLI's secret; never printed
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int
    app: str | None
    scopes: tuple[str, ...]
    ttl_seconds: int

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> PendingSignIn:
        return cls(device_code=body["deviceCode"], user_code=body["userCode"],
                   verification_uri=body["verificationUri"],
                   verification_uri_complete=body["verificationUriComplete"],
                   expires_in=int(body["expiresIn"]), interval=int(body["interval"]),
                   app=body.get("app"), scopes=tuple(body.get("scopes") or ()),
                   ttl_seconds=int(body["ttlSeconds"]))

    def public(self) -> dict[str, Any]:
        return {"userCode": self.user_code, "verificationUri": self.verification_uri,
                "verificationUriComplete": self.verification_uri_complete,
                "expiresIn": self.expires_in, "interval": self.interval, "app": self.app,
                "scopes": list(self.scopes), "ttlSeconds": self.ttl_seconds}


def wait_for_grant(client: DeveloperClient, pending: PendingSignIn, *,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> StoredGrant:
    """Poll ``cli/token`` every ``interval`` seconds until approved, denied or expired."""
    deadline = clock() + pending.expires_in
    interval = max(1, pending.interval)
    unreachable = 0
    while clock() < deadline:
        sleep(interval)
        try:
            issued = client.redeem(pending.device_code)
        except ServiceUnreachable:
            unreachable += 1
            if unreachable >= TRANSIENT_FAILURES:
                raise
            continue
        except ApiFailure as failure:
            unreachable = 0
            if failure.code == "slow_down":
                interval += SLOW_DOWN_STEP
            elif failure.code != "authorization_pending":
                raise _sign_in_failure(failure, pending.app) from failure
            continue
        return stored_grant(client.api_url, issued)
    raise _expired()


def stored_grant(api_url: str, issued: dict[str, Any]) -> StoredGrant:
    grant = issued["grant"]
    return StoredGrant(token=issued["token"], api_url=api_url, app=grant["app"],
                       scopes=tuple(grant["scopes"]), expires_at=grant["expiresAt"],
                       grant_id=grant.get("id", ""))


def _sign_in_failure(failure: ApiFailure, app: str | None) -> Exception:
    if failure.code == "access_denied":
        # The console offers only Deny for an app the organization does not have; the
        # service does not say why a request was denied, so name the likely reason here.
        hint = "" if app is None else (
            f" If the console said there is no app '{app}' in your organization, run the "
            "command again with --app set to one of the apps it listed.")
        return CliError(f"The sign-in was denied in the console; nothing was stored.{hint}",
                        code="access_denied")
    if failure.code == "expired_token":
        return _expired()
    return failure


def _expired() -> CliError:
    return CliError("The sign-in request expired before it was approved; run the command "
                    "again.", ExitCode.FAILED, code="expired_token")
