"""Dev mode: the seeded ``demo`` app and its origin, all on loopback."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.apps import create_app_record, set_pay_to
from payments.db import transaction, utcnow
from payments.developer.models import Organization
from payments.models import (
    AllowlistStatus,
    App,
    AppType,
    DomainRequestStatus,
    HostedReviewStatus,
    ListingStatus,
    PayToStatus,
    RuntimeStatus,
)
from payments.products import create_product

DEMO_SLUG = "demo"
DEMO_ORGANIZATION = "svc-server dev"
# A well-known dev address (Hardhat's second default account); never a real recipient.
DEMO_PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

# The default templates of spec 2.3, Tip Creator (order-priced) aside.
DEMO_TEMPLATES = ("zent", "retry_continue", "unlock_level", "generate_once", "export_download")


def seed_demo(sessions: sessionmaker[Session], origin: str) -> str:
    """Create or refresh the ``demo`` app with an active runtime at ``origin``; return its id."""
    with transaction(sessions) as session:
        app = session.scalar(select(App).where(App.slug == DEMO_SLUG))
        if app is None:
            app = create_app_record(session, name="Demo", slug=DEMO_SLUG, app_type=AppType.GAME,
                                    headline="The seeded dev app: every flow, on loopback.",
                                    tags=["demo", "dev"])
        if app.organization_id is None:
            # API keys belong to an organization (spec 2.6); the dev app's own one has no
            # members, so no console account sees or changes the seeded app by accident.
            organization = Organization(name=DEMO_ORGANIZATION, created_at=utcnow())
            session.add(organization)
            session.flush()
            app.organization_id = organization.id
        if app.pay_to is None:
            set_pay_to(app, DEMO_PAY_TO)
        app.pay_to_status = PayToStatus.APPROVED
        # The in-process chain allowlists the demo recipient when it deploys.
        app.recipient_allowlist_status = AllowlistStatus.ALLOWED
        app.portal_listing_status = ListingStatus.LISTED
        app.runtime_origin = origin
        # Served as if verified and approved: the gate needs an active runtime and an
        # approved domain in dev too (spec 3.1). Its origin passes a real verification.
        app.runtime_status = RuntimeStatus.ACTIVE
        app.runtime_domain_request_status = DomainRequestStatus.APPROVED
        app.hosted_review_status = HostedReviewStatus.APPROVED
        existing = {p.template for p in app.products}
        for template in DEMO_TEMPLATES:
            if template not in existing:
                create_product(session, app, {"template": template})
        session.flush()
        return app.id
