"""Runtime status transitions (spec 3.1): one table of what is allowed, one function.

The spec names configure (-> ``pending_verification``), a passing verification (->
``active``) and disable (-> ``disabled``). Where it is silent we chose:

- configure from any state saves the origin and paths and waits for a new verification,
  so a changed origin is never served unverified;
- a verification that fails takes an ``active`` runtime back to ``pending_verification``
  (what is deployed no longer matches the app, so it stops being served); a disabled
  runtime stays disabled until a verification passes, which is how it is turned back on.
"""

from __future__ import annotations

from enum import StrEnum

from payments.errors import ApiError
from payments.models import RuntimeStatus

NOT_CONFIGURED = RuntimeStatus.NOT_CONFIGURED
PENDING = RuntimeStatus.PENDING_VERIFICATION
ACTIVE = RuntimeStatus.ACTIVE
DISABLED = RuntimeStatus.DISABLED


class RuntimeEvent(StrEnum):
    CONFIGURE = "configure"
    VERIFY_PASSED = "verify_passed"
    VERIFY_FAILED = "verify_failed"
    DISABLE = "disable"


TRANSITIONS: dict[tuple[RuntimeStatus, RuntimeEvent], RuntimeStatus] = {
    (NOT_CONFIGURED, RuntimeEvent.CONFIGURE): PENDING,
    (PENDING, RuntimeEvent.CONFIGURE): PENDING,
    (ACTIVE, RuntimeEvent.CONFIGURE): PENDING,
    (DISABLED, RuntimeEvent.CONFIGURE): PENDING,
    (PENDING, RuntimeEvent.VERIFY_PASSED): ACTIVE,
    (ACTIVE, RuntimeEvent.VERIFY_PASSED): ACTIVE,
    (DISABLED, RuntimeEvent.VERIFY_PASSED): ACTIVE,
    (PENDING, RuntimeEvent.VERIFY_FAILED): PENDING,
    (ACTIVE, RuntimeEvent.VERIFY_FAILED): PENDING,
    (DISABLED, RuntimeEvent.VERIFY_FAILED): DISABLED,
    (PENDING, RuntimeEvent.DISABLE): DISABLED,
    (ACTIVE, RuntimeEvent.DISABLE): DISABLED,
    (DISABLED, RuntimeEvent.DISABLE): DISABLED,
}


def next_status(current: RuntimeStatus, event: RuntimeEvent) -> RuntimeStatus:
    """The status after ``event``, or the 409 a client can act on."""
    found = TRANSITIONS.get((current, event))
    if found is not None:
        return found
    if current is NOT_CONFIGURED:
        raise ApiError("runtime_not_configured", 409, "The runtime has no origin yet: run "
                       "`svc runtime configure --origin https://<your domain>` first.",
                       runtimeStatus=current.value)
    raise ApiError("runtime_state_conflict", 409, f"A runtime in status {current.value} "
                   f"cannot {event.value.replace('_', ' ')}.", runtimeStatus=current.value)
