"""What a developer does to a runtime, inside one unit of work each.

The caller has authenticated and loaded the app; these functions lock its row, apply the
transition of ``payments.runtime.states`` and write what goes with it. Network work
(fetching the manifest) happens before, outside any transaction: :func:`record_verification`
only stores a finished report, and refuses it if the runtime changed meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from manifest.rules import Expected
from manifest.verify import Report
from payments.developer.models import NotificationKind, OperatorNotification
from payments.errors import ApiError
from payments.models import App, DomainRequestStatus, HostedReviewStatus, RuntimeStatus
from payments.runtime.states import RuntimeEvent, next_status


@dataclass(frozen=True)
class Snapshot:
    """What a verification checks against, read before the network work."""

    app_id: str
    status: RuntimeStatus
    origin: str
    expected: Expected


def lock(session: Session, app: App) -> App:
    """Reload ``app`` under a row lock (PostgreSQL ``FOR UPDATE``; SQLite holds the write
    lock from ``BEGIN IMMEDIATE``)."""
    session.refresh(app, with_for_update=True)
    return app


def configure(session: Session, app: App, origin: str, app_path: str,
              entry_path: str) -> bool:
    """Save origin and paths; ``pending_verification`` unless nothing changed on an active
    runtime. Returns whether anything changed."""
    lock(session, app)
    same = (app.runtime_origin, app.runtime_app_path, app.runtime_entry_path) == (
        origin, app_path, entry_path)
    if same and app.runtime_status is RuntimeStatus.ACTIVE:
        return False
    app.runtime_status = next_status(app.runtime_status, RuntimeEvent.CONFIGURE)
    app.runtime_origin, app.runtime_app_path, app.runtime_entry_path = (
        origin, app_path, entry_path)
    if not same:
        app.runtime_checks = []  # a report about another origin would mislead
        app.runtime_checked_at = None
    return True


def snapshot(app: App) -> Snapshot:
    if app.runtime_status is RuntimeStatus.NOT_CONFIGURED or not app.runtime_origin:
        next_status(RuntimeStatus.NOT_CONFIGURED, RuntimeEvent.VERIFY_PASSED)  # raises
    assert app.runtime_origin is not None
    return Snapshot(app.id, app.runtime_status, app.runtime_origin, Expected(
        app_id=app.id, slug=app.slug, pay_to=app.pay_to, app_path=app.runtime_app_path,
        entry_path=app.runtime_entry_path, runtime_origin=app.runtime_origin))


def record_verification(session: Session, app: App, before: Snapshot, report: Report,
                        now: datetime) -> None:
    """Store the report and move the status; refused if the app changed while it ran."""
    lock(session, app)
    if snapshot(app) != before:
        raise ApiError("runtime_changed", 409, "The runtime or the app changed while it was "
                       "being verified; run `svc runtime verify` again.")
    event = RuntimeEvent.VERIFY_PASSED if report.passed else RuntimeEvent.VERIFY_FAILED
    app.runtime_status = next_status(app.runtime_status, event)
    app.runtime_checks = [c.as_dict() for c in report.checks]
    app.runtime_checked_at = now
    if report.passed:
        app.runtime_verified_at = now


def disable(session: Session, app: App) -> bool:
    """``disabled``; returns whether it changed."""
    lock(session, app)
    before = app.runtime_status
    app.runtime_status = next_status(before, RuntimeEvent.DISABLE)
    return app.runtime_status is not before


def request_domain(session: Session, app: App, hostname: str, developer_id: str,
                   now: datetime) -> bool:
    """Ask operators for ``hostname`` (spec 3.1): ``pending_manual_dns`` plus one internal
    ``runtime_domain_requested`` notification. A request already pending or approved is
    left as it is (no second notification); returns whether a request was filed."""
    lock(session, app)
    if app.runtime_status is not RuntimeStatus.ACTIVE:
        raise ApiError("runtime_not_active", 409, "Request the domain after the runtime is "
                       "active: run `svc runtime verify` until every check passes.",
                       runtimeStatus=app.runtime_status.value)
    if app.runtime_domain_request_status in (DomainRequestStatus.PENDING_MANUAL_DNS,
                                             DomainRequestStatus.APPROVED):
        return False
    app.runtime_domain_request_status = DomainRequestStatus.PENDING_MANUAL_DNS
    app.runtime_domain_requested_at = now
    if app.hosted_review_status is not HostedReviewStatus.APPROVED:
        # A service-hosted app enters the hosted-app review (spec 1.2 rule 4).
        app.hosted_review_status = HostedReviewStatus.PENDING
    session.add(OperatorNotification(
        kind=NotificationKind.RUNTIME_DOMAIN_REQUESTED, app_id=app.id,
        payload={"slug": app.slug, "hostname": hostname, "by": developer_id}))
    session.flush()
    return True
