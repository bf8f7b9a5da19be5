"""The spender's recipient allowlist in the ledger (spec 1 item 5).

The backend only *reads* ``allowedRecipients(pay_to)`` into ``recipient_allowlist_status``;
owner transactions that change the list are operator commands (``svc-ops allowlist``,
:func:`payments.chain.allowed_recipients.set_allowed_recipient`), signed with the owner key
the operator supplies, never reachable from a developer's browser or client.
"""

from __future__ import annotations

from typing import Protocol

from eth_utils.address import to_checksum_address
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.addresses import is_hex_address
from payments.chain.in_process import InProcessChain
from payments.db import transaction
from payments.models import AllowlistStatus, App


class AllowlistReads(Protocol):
    """All a sync asks of the chain: a gateway, or a reader without the relayer key."""

    def allowed_recipient(self, recipient: str) -> bool: ...


def sync_allowlist(sessions: sessionmaker[Session], chain: AllowlistReads,
                   pay_to: str | None = None, *,
                   only_unknown: bool = False) -> dict[str, AllowlistStatus]:
    """Read the allowlist for every app with a valid ``pay_to`` (or only those paying
    ``pay_to``, or only those whose status is ``unknown``); returns app id -> status, and
    stores the statuses that changed.

    An app whose ``pay_to`` changed while the contract was being read keeps its (``unknown``)
    status: what was read is about the old address."""
    with sessions() as session:
        query = select(App.id, App.pay_to).where(App.pay_to.is_not(None))
        if only_unknown:
            query = query.where(App.recipient_allowlist_status == AllowlistStatus.UNKNOWN)
        apps = {app_id: address for app_id, address in session.execute(query)
                if address and is_hex_address(address)
                and (pay_to is None or address.lower() == pay_to.lower())}
    if not apps:
        return {}
    allowed = {address.lower(): chain.allowed_recipient(address)
               for address in set(apps.values())}
    statuses = {app_id: AllowlistStatus.ALLOWED if allowed[address.lower()]
                else AllowlistStatus.NOT_ALLOWED for app_id, address in apps.items()}
    with transaction(sessions) as session:
        for app in session.scalars(select(App).where(App.id.in_(statuses)).with_for_update()):
            if (app.pay_to or "").lower() != apps[app.id].lower():
                statuses.pop(app.id)
            elif app.recipient_allowlist_status != statuses[app.id]:
                app.recipient_allowlist_status = statuses[app.id]
    return statuses


def sync_new_recipients(sessions: sessionmaker[Session], chain: AllowlistReads) -> int:
    """Each chain cycle: read the allowlist for apps whose ``pay_to`` is new (status
    ``unknown``: a changed ``pay_to`` resets it, payments.apps.set_pay_to). Usually one
    SELECT that finds nothing."""
    return len(sync_allowlist(sessions, chain, only_unknown=True))


def ledger_allowed(sessions: sessionmaker[Session]) -> set[str]:
    """The ``pay_to`` of every app the ledger has as allowlisted (checksummed)."""
    return _ledger_pay_to(sessions, AllowlistStatus.ALLOWED)


def _ledger_pay_to(sessions: sessionmaker[Session], status: AllowlistStatus) -> set[str]:
    with sessions() as session:
        rows = session.scalars(select(App.pay_to).where(
            App.recipient_allowlist_status == status))
        return {to_checksum_address(a) for a in rows if a and is_hex_address(a)}


def mirror_to_dev_chain(sessions: sessionmaker[Session], chain: InProcessChain) -> int:
    """Dev only, the other direction: the ledger (seeded by dev tooling, and `svc-ops
    allowlist add|remove` in dev) decides the dev chain's allowlist, applied by the
    operator's owner transaction (``InProcessChain.set_allowed_recipient``): what it calls
    allowed is added, and what it calls not allowed (and no app calls allowed) is removed,
    which matters since ``svc-server dev`` keeps its chain between runs. Returns how many
    addresses changed."""
    allowed = ledger_allowed(sessions)
    changed = 0
    for address in sorted(allowed):
        if not chain.allowed_recipient(address):
            chain.set_allowed_recipient(address, True)
            changed += 1
    for address in sorted(_ledger_pay_to(sessions, AllowlistStatus.NOT_ALLOWED) - allowed):
        if chain.allowed_recipient(address):
            chain.set_allowed_recipient(address, False)
            changed += 1
    return changed
