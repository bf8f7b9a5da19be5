"""Operator decisions on apps: domains, ``pay_to``, the portal listing, the kill switch, the
hosted-app review.

Each function is one unit of work's content: it locks the app row, checks the state allows
the decision, applies it and writes an :class:`OperatorAction` naming who decided, when,
and what the decision rested on. Developers cannot reach any of this (spec 5.3 item 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from manifest.addresses import IPAddress
from payments.apps import app_by_ref
from payments.developer.models import (
    Developer,
    Membership,
    NotificationKind,
    OperatorNotification,
)
from payments.errors import ApiError
from payments.models import (
    App,
    DomainRequestStatus,
    HostedReviewStatus,
    ListingStatus,
    PayToStatus,
)
from payments.runtime.models import HostingAllowlist, OperatorAction, OperatorActionKind
from payments.runtime.operations import lock
from payments.runtime.review import check_approvable, check_categories

MAX_OPERATOR = 120


def check_operator(name: str | None) -> str:
    name = (name or "").strip()
    if not name or len(name) > MAX_OPERATOR:
        raise ApiError("operator_required", 422, "Name the operator: --operator NAME (or "
                       "$USER), at most 120 characters.")
    return name


def record(session: Session, operator: str, action: OperatorActionKind, app: App | None,
           subject: str, now: datetime, **detail: Any) -> OperatorAction:
    row = OperatorAction(operator=operator, action=action, app_id=app.id if app else None,
                         subject=subject[:255], detail=detail, created_at=now)
    session.add(row)
    session.flush()
    return row


def find_app(session: Session, ref: str) -> App:
    app = app_by_ref(session, ref)
    if app is None:
        raise ApiError("app_not_found", 404, f"No app '{ref}'.")
    return lock(session, app)


def domain_requests(session: Session, status: DomainRequestStatus | None) -> Sequence[App]:
    query = select(App).where(App.runtime_domain_request_status
                              != DomainRequestStatus.NOT_REQUESTED)
    if status is not None:
        query = query.where(App.runtime_domain_request_status == status)
    return session.scalars(query.order_by(App.runtime_domain_requested_at, App.slug)).all()


def approve_domain(session: Session, app: App, hostname: str, operator: str, now: datetime,
                   answers: list[IPAddress] | None) -> None:
    """``answers``: what DNS said for ``hostname`` (checked by the caller), or None when the
    check was skipped (dev only)."""
    if app.runtime_domain_request_status is not DomainRequestStatus.PENDING_MANUAL_DNS:
        raise ApiError("domain_not_pending", 409, f"{app.slug} has no pending domain request "
                       f"(status {app.runtime_domain_request_status.value}).")
    if app.hosted_review_status is not HostedReviewStatus.APPROVED:
        raise ApiError("review_not_approved", 409, f"{app.slug} is a service-hosted app: "
                       f"approve its hosted-app review first (svc-ops review approve "
                       f"{app.slug}).")
    app.runtime_domain_request_status = DomainRequestStatus.APPROVED
    _handled(session, app, now)
    record(session, operator, OperatorActionKind.DOMAIN_APPROVED, app, hostname, now,
           dns=None if answers is None else [str(a) for a in answers],
           dnsChecked=answers is not None, runtimeStatus=app.runtime_status.value)


def reject_domain(session: Session, app: App, hostname: str, operator: str, now: datetime,
                  reason: str) -> None:
    if app.runtime_domain_request_status not in (DomainRequestStatus.PENDING_MANUAL_DNS,
                                                 DomainRequestStatus.APPROVED):
        raise ApiError("domain_not_pending", 409, f"{app.slug} has no domain request to "
                       f"reject (status {app.runtime_domain_request_status.value}).")
    before = app.runtime_domain_request_status
    app.runtime_domain_request_status = DomainRequestStatus.REJECTED
    _handled(session, app, now)
    record(session, operator, OperatorActionKind.DOMAIN_REJECTED, app, hostname, now,
           reason=reason, was=before.value)


def set_kill_switch(session: Session, app: App, operator: str, now: datetime, *, on: bool,
                    reason: str) -> bool:
    """Returns whether it changed; an unchanged switch is not recorded again."""
    if app.kill_switch is on:
        return False
    app.kill_switch = on
    app.kill_switch_reason = reason if on else ""
    record(session, operator, OperatorActionKind.KILL_SWITCH_ON if on
           else OperatorActionKind.KILL_SWITCH_OFF, app, app.slug, now, reason=reason)
    return True


def approve_pay_to(session: Session, app: App, operator: str, now: datetime,
                   address: str) -> None:
    """``testing`` -> ``approved`` (spec 3.4) for exactly the address the operator saw: a
    pay_to changed since then starts a new review instead of inheriting this one."""
    if app.pay_to is None or app.pay_to_status is not PayToStatus.TESTING:
        raise ApiError("pay_to_not_in_review", 409, f"{app.slug} has no pay_to waiting for "
                       f"review (status {app.pay_to_status.value}).")
    if app.pay_to.lower() != address.lower():
        raise ApiError("pay_to_changed", 409, f"{app.slug}'s pay_to is {app.pay_to}, not "
                       f"{address}; review the current address.")
    app.pay_to_status = PayToStatus.APPROVED
    record(session, operator, OperatorActionKind.PAY_TO_APPROVED, app, app.pay_to, now)


# The listing review of spec 2.2, as decisions: from which states each may be taken, and
# where it leads. Entering the review is not a decision: binding or changing pay_to starts
# it (payments.apps.set_pay_to).
LISTING_DECISIONS: dict[bool, tuple[frozenset[ListingStatus], ListingStatus]] = {
    True: (frozenset({ListingStatus.PENDING_REVIEW, ListingStatus.REJECTED}),
           ListingStatus.LISTED),
    False: (frozenset({ListingStatus.PENDING_REVIEW, ListingStatus.LISTED}),
            ListingStatus.REJECTED),  # a listed app can be taken off the portal
}


def listing_queue(session: Session) -> Sequence[App]:
    """Apps whose listing waits for review, the longest waiting first."""
    return session.scalars(select(App).where(
        App.portal_listing_status == ListingStatus.PENDING_REVIEW)
        .order_by(App.updated_at, App.slug)).all()


def decide_listing(session: Session, app: App, operator: str, now: datetime, *,
                   approve: bool, note: str) -> None:
    """``pending_review`` -> ``listed`` or ``rejected`` (spec 2.2: a public portal entry
    requires ``listed``). Listing backs the app's recipient in public, so it is approved
    only over a ``pay_to`` that operators approved: a pay_to changed since then has put the
    listing back under review, and is refused here until its own review is done."""
    allowed, target = LISTING_DECISIONS[approve]
    was = app.portal_listing_status
    if was not in allowed:
        raise ApiError("listing_not_in_review", 409, f"{app.slug}'s listing cannot be "
                       f"{'approved' if approve else 'rejected'} from {was.value}.")
    if approve and (app.pay_to is None or app.pay_to_status is not PayToStatus.APPROVED):
        raise ApiError("pay_to_not_approved", 409, f"{app.slug}'s pay_to "
                       f"({app.pay_to or 'none'}) is {app.pay_to_status.value}: approve it "
                       f"first (svc-ops pay-to approve {app.slug} <address>).")
    app.portal_listing_status = target
    record(session, operator, OperatorActionKind.LISTING_APPROVED if approve
           else OperatorActionKind.LISTING_REJECTED, app, app.slug, now, was=was.value,
           payTo=app.pay_to, note=note[:500])


def review_queue(session: Session) -> list[tuple[App, bool]]:
    """Apps waiting for the hosted-app review, allowlisted developers first."""
    allowlisted = set(session.scalars(select(HostingAllowlist.organization_id)))
    apps = session.scalars(select(App).where(
        App.hosted_review_status == HostedReviewStatus.PENDING)
        .order_by(App.runtime_domain_requested_at, App.slug)).all()
    ordered = sorted(apps, key=lambda a: a.organization_id not in allowlisted)
    return [(a, a.organization_id in allowlisted) for a in ordered]


def review(session: Session, app: App, operator: str, now: datetime, *, approve: bool,
           categories: list[str], note: str) -> None:
    categories = check_categories(categories)
    if approve:
        check_approvable(categories, note)
    app.hosted_review_status = (HostedReviewStatus.APPROVED if approve
                                else HostedReviewStatus.REJECTED)
    app.hosted_review_categories = categories
    app.hosted_review_note = note[:500]
    record(session, operator, OperatorActionKind.REVIEW_APPROVED if approve
           else OperatorActionKind.REVIEW_REJECTED, app, app.slug, now,
           categories=categories, note=note[:500])
    if not approve and app.runtime_domain_request_status in (
            DomainRequestStatus.PENDING_MANUAL_DNS, DomainRequestStatus.APPROVED):
        # A rejected app is not served on our domain, whatever its request said.
        reject_domain(session, app, app.slug, operator, now, "hosted-app review rejected")


def allowlist_developer(session: Session, who: str, operator: str, now: datetime, *,
                        add: bool, note: str) -> str:
    """Add (or remove) the organizations of a developer (email or username)."""
    developer = session.scalar(select(Developer).where(
        or_(Developer.email == who.lower(), Developer.username == who.lower())))
    if developer is None:
        raise ApiError("developer_not_found", 404, f"No developer '{who}'.")
    orgs = list(session.scalars(select(Membership.organization_id).where(
        Membership.developer_id == developer.id)))
    for org in orgs:
        existing = session.get(HostingAllowlist, org)
        if add and existing is None:
            session.add(HostingAllowlist(organization_id=org, added_by=operator, note=note,
                                         created_at=now))
        elif not add and existing is not None:
            session.delete(existing)
    record(session, operator, OperatorActionKind.DEVELOPER_ALLOWLISTED if add
           else OperatorActionKind.DEVELOPER_UNLISTED, None, developer.username, now,
           organizations=orgs, note=note)
    return developer.username


def record_allowlist(session: Session, operator: str, now: datetime, *, address: str,
                     add: bool, tx_hash: str | None = None) -> None:
    """The recipient allowlist owner transaction (``svc-ops allowlist add|remove``)."""
    apps = session.scalars(select(App).where(App.pay_to.is_not(None))).all()
    matching = [a.id for a in apps if a.pay_to and a.pay_to.lower() == address.lower()]
    record(session, operator, OperatorActionKind.ALLOWLIST_ADD if add
           else OperatorActionKind.ALLOWLIST_REMOVE, None, address, now, apps=matching,
           txHash=tx_hash)


def record_relayer(session: Session, operator: str, now: datetime, *, address: str,
                   add: bool, tx_hash: str) -> None:
    """The spender's ``setRelayer`` owner transaction (``svc-ops relayer add|remove``)."""
    record(session, operator, OperatorActionKind.RELAYER_ADD if add
           else OperatorActionKind.RELAYER_REMOVE, None, address, now, txHash=tx_hash)


def record_deploy(session: Session, operator: str, now: datetime, *, address: str,
                  tx_hash: str, chain_id: int, token: str, owner: str) -> None:
    """A BudgetSpenderV2 deployed by ``svc-ops contract deploy``."""
    record(session, operator, OperatorActionKind.CONTRACT_DEPLOYED, None, address, now,
           txHash=tx_hash, chainId=chain_id, token=token, owner=owner)


def record_ownership_transfer(session: Session, operator: str, now: datetime, *, spender: str,
                              previous: str, new: str, tx_hash: str, chain_id: int) -> None:
    """A one-step spender's ``transferOwnership`` (``svc-ops contract transfer-ownership
    --one-step``): the owner changed."""
    record(session, operator, OperatorActionKind.CONTRACT_OWNERSHIP_TRANSFERRED, None, spender,
           now, txHash=tx_hash, chainId=chain_id, previousOwner=previous, newOwner=new)


def record_ownership_step(session: Session, operator: str, now: datetime,
                          kind: OperatorActionKind, *, spender: str, tx_hash: str,
                          chain_id: int, **owners: str | None) -> None:
    """A step of the two-step handover (``svc-ops contract transfer-ownership [--cancel]``,
    ``accept-ownership``): ``kind`` is one of the three ``CONTRACT_OWNERSHIP_*`` steps,
    ``owners`` the addresses it involved (e.g. ``owner``, ``pendingOwner``)."""
    record(session, operator, kind, None, spender, now, txHash=tx_hash, chainId=chain_id,
           **owners)


def actions(session: Session, app: App | None, limit: int) -> Sequence[OperatorAction]:
    query = select(OperatorAction)
    if app is not None:
        query = query.where(OperatorAction.app_id == app.id)
    return session.scalars(query.order_by(OperatorAction.id.desc()).limit(limit)).all()


def notifications(session: Session, *, include_handled: bool) -> Sequence[OperatorNotification]:
    query = select(OperatorNotification)
    if not include_handled:
        query = query.where(OperatorNotification.handled_at.is_(None))
    return session.scalars(query.order_by(OperatorNotification.created_at)).all()


def _handled(session: Session, app: App, now: datetime) -> None:
    session.execute(update(OperatorNotification).where(
        OperatorNotification.app_id == app.id,
        OperatorNotification.kind == NotificationKind.RUNTIME_DOMAIN_REQUESTED,
        OperatorNotification.handled_at.is_(None)).values(handled_at=now))
