"""The portal listing review of spec 2.2, end to end on SQLite and PostgreSQL: binding
``pay_to`` puts an app's listing under review, ``svc-ops listing approve`` (over an
approved ``pay_to``) lists it so its hosted entry ``{portal_url}/<app-slug>`` answers, and
changing ``pay_to`` takes a listed app back to review."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from payments.models import App, ListingStatus, PayToStatus
from payments.runtime.models import OperatorAction
from tests.manifest.origin import PAY_TO
from tests.runtime.world import World

SLUG = "star-game"
OTHER_PAY_TO = "0x" + "cd" * 20


def hosted_entry(world: World) -> int:
    """The status of ``GET {portal_url}/<app-slug>``, as a visitor's browser asks it."""
    return httpx.get(f"{world.url}/{SLUG}", timeout=30,
                     headers={"host": f"portal.localhost:{world.port}"}).status_code


def listing(world: World) -> tuple[ListingStatus, PayToStatus]:
    with world.sessions() as session:
        app = session.scalars(select(App).where(App.slug == SLUG)).one()
        return app.portal_listing_status, app.pay_to_status


def listing_actions(world: World) -> list[tuple[str, str, str, dict[str, Any]]]:
    with world.sessions() as session:
        return [(a.operator, a.action.value, a.subject, a.detail) for a in session.scalars(
            select(OperatorAction).where(OperatorAction.action.in_(
                ("listing_approved", "listing_rejected"))).order_by(OperatorAction.id))]


def test_binding_pay_to_starts_the_review_and_approval_opens_the_hosted_entry(
        world: World) -> None:
    with world.console() as console:
        created = console.post("/api/developer/apps", json={"name": "Star Game",
                                                             "payTo": PAY_TO})
        assert created.status_code == 201, created.text
        assert created.json()["app"]["portalListingStatus"] == "pending_review"
    assert hosted_entry(world) == 404
    code, out, _ = world.ops("listing", "list")
    assert code == 0 and out == f"{SLUG}\tStar Game\t{PAY_TO}\tpay_to=testing\n"

    # The listing backs the recipient in public: its pay_to is reviewed first.
    code, _, err = world.ops("listing", "approve", SLUG)
    assert code == 1 and f"approve it first (svc-ops pay-to approve {SLUG}" in err
    assert listing(world) == (ListingStatus.PENDING_REVIEW, PayToStatus.TESTING)
    assert hosted_entry(world) == 404 and listing_actions(world) == []
    assert world.ops("pay-to", "approve", SLUG, PAY_TO)[0] == 0
    assert hosted_entry(world) == 404  # pay_to approved, listing still in review

    code, out, err = world.ops("listing", "approve", SLUG, "--operator", "dora",
                               "--note", "profile and products checked")
    assert code == 0, err
    assert out.strip() == f"listing approved for {SLUG}; recorded for dora"
    assert listing(world) == (ListingStatus.LISTED, PayToStatus.APPROVED)
    assert hosted_entry(world) == 200
    assert world.ops("listing", "list")[1].strip() == "no listing waits for review"
    assert listing_actions(world) == [("dora", "listing_approved", SLUG, {
        "was": "pending_review", "payTo": PAY_TO, "note": "profile and products checked"})]
    code, _, err = world.ops("listing", "approve", SLUG)
    assert code == 1 and "cannot be approved from listed" in err

    # A new address nobody has reviewed takes the app off the portal until both reviews
    # are done again.
    with world.console() as console:
        changed = console.patch(f"/api/developer/apps/{SLUG}", json={"payTo": OTHER_PAY_TO})
        assert changed.status_code == 200, changed.text
        assert (changed.json()["app"]["payToStatus"],
                changed.json()["app"]["portalListingStatus"]) == ("testing", "pending_review")
        same = console.patch(f"/api/developer/apps/{SLUG}", json={"payTo": OTHER_PAY_TO})
        assert same.json()["app"]["portalListingStatus"] == "pending_review"
    assert hosted_entry(world) == 404
    assert world.ops("listing", "list")[1].startswith(f"{SLUG}\tStar Game\t{OTHER_PAY_TO}\t")
    assert world.ops("listing", "approve", SLUG)[0] == 1
    assert world.ops("pay-to", "approve", SLUG, OTHER_PAY_TO)[0] == 0
    assert world.ops("listing", "approve", SLUG)[0] == 0
    assert hosted_entry(world) == 200


def test_rejection_refuses_or_takes_a_listed_app_off_the_portal(world: World) -> None:
    with world.console() as console:
        assert console.post("/api/developer/apps", json={
            "name": "Star Game", "payTo": PAY_TO}).status_code == 201
    assert world.ops("listing", "reject", SLUG, "--reason", "gambling")[0] == 0
    assert listing(world)[0] is ListingStatus.REJECTED and hosted_entry(world) == 404
    code, _, err = world.ops("listing", "reject", SLUG, "--reason", "again")
    assert code == 1 and "cannot be rejected from rejected" in err
    # Operators may change their mind over a reviewed pay_to, and delist later.
    assert world.ops("pay-to", "approve", SLUG, PAY_TO)[0] == 0
    assert world.ops("listing", "approve", SLUG)[0] == 0 and hosted_entry(world) == 200
    assert world.ops("listing", "reject", SLUG, "--reason", "phishing report")[0] == 0
    assert hosted_entry(world) == 404
    assert [(a[1], a[3]["was"], a[3]["note"]) for a in listing_actions(world)] == [
        ("listing_rejected", "pending_review", "gambling"),
        ("listing_approved", "rejected", ""),
        ("listing_rejected", "listed", "phishing report")]


def test_the_console_shows_the_listing_where_it_shows_pay_to(world: World) -> None:
    with world.console() as console:
        assert console.post("/api/developer/apps", json={
            "name": "Star Game", "payTo": PAY_TO}).status_code == 201
        listed = console.get("/apps").text
        detail = console.get(f"/apps/{SLUG}").text
    assert "<th scope=\"col\">Listing</th>" in listed
    assert "<td>testing</td><td>pending_review</td>" in listed
    assert "<dt>Listing</dt><dd>pending_review</dd>" in detail
