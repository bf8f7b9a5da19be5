"""Creating and changing apps: the rules of spec 2.2 in one place."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from manifest.url_policy import UrlPolicy, UrlRefused, check_entry_url
from payments.errors import ApiError
from payments.ids import IdPrefix
from payments.models import AllowlistStatus, App, AppType, ListingStatus, PayToStatus
from payments.slugs import check_slug, slug_from_name

_ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
# Spec 2.2 names Web, PWA, a messaging-platform mini-app target, a social-platform mini-app
# target and Base; the two mini-app targets are spelled as below (docs/decisions.md). Review
# metadata only: none of them switches hosting on or off.
DISTRIBUTION_TARGETS = ("Web", "PWA", "Telegram Mini App", "Farcaster Mini App", "Base")


def app_by_ref(session: Session, ref: str) -> App | None:
    """The app whose id (``zapp_...``) or slug is ``ref``; who may see it is the caller's
    check."""
    column = App.id if ref.startswith(IdPrefix.APP.value) else App.slug
    return session.scalar(select(App).where(column == ref))


def check_pay_to(address: str) -> str:
    if not _ADDRESS_RE.match(address):
        raise ApiError("invalid_pay_to", 422, f"pay_to '{address}' is not a Base USDC address "
                       "(0x followed by 40 hex digits).")
    return address


def check_entry_url_field(url: str, policy: UrlPolicy, app_slug: str) -> str:
    """The Entry URL to store: blank (none), or an absolute URL the developer owns."""
    if not url.strip():
        return ""
    try:
        return check_entry_url(url, policy, app_slug=app_slug).url
    except UrlRefused as exc:
        raise ApiError(exc.code, 422, f"Entry URL refused: {exc.message}. It is your app's own "
                       "public https:// address, or blank.", field="entryUrl",
                       rule=exc.rule) from None


def check_distribution_targets(targets: list[str]) -> list[str]:
    unknown = [t for t in targets if t not in DISTRIBUTION_TARGETS]
    if unknown or len(set(targets)) != len(targets):
        raise ApiError("invalid_field", 422, "'distributionTargets' takes each of "
                       f"{', '.join(DISTRIBUTION_TARGETS)} at most once"
                       + (f"; not {unknown[0][:40]!r}." if unknown else "."),
                       field="distributionTargets")
    return targets


def create_app_record(
    session: Session,
    *,
    name: str,
    slug: str | None = None,
    app_type: AppType = AppType.GAME,
    headline: str = "",
    pay_to: str | None = None,
    tags: Iterable[str] = (),
) -> App:
    """Create an app; the slug comes from the name unless given, and is never reserved."""
    name = name.strip()
    if not name or len(name) > 120:
        raise ApiError("invalid_name", 422, "An app name is required (1-120 characters).")
    chosen = check_slug(slug) if slug is not None else slug_from_name(name)
    made_from = None if slug is not None else name
    if session.scalar(select(App.id).where(App.slug == chosen)) is not None:
        raise _slug_taken(chosen, made_from)
    app = App(name=name, slug=chosen, type=app_type, headline=headline,
              tags=[t.strip() for t in tags if t.strip()])
    if pay_to is not None:
        set_pay_to(app, pay_to)
    session.add(app)
    try:
        session.flush()
    except IntegrityError:  # a concurrent create won the race for the slug
        raise _slug_taken(chosen, made_from) from None
    return app


def _slug_taken(slug: str, made_from: str | None) -> ApiError:
    if made_from is None:
        return ApiError("slug_taken", 409, f"The slug '{slug}' is already taken.", slug=slug)
    return ApiError("slug_taken", 409, f"The slug '{slug}' made from the name '{made_from}' is "
                    "already taken; choose a slug or another name.", slug=slug)


def set_pay_to(app: App, address: str) -> None:
    """Binding or changing ``pay_to`` (re)starts the review for portal backing and public
    listing (spec 2.2): ``pay_to_status`` becomes ``testing`` and the listing
    ``pending_review``, a listed app included, until operators approve again
    (``svc-ops pay-to approve``, ``svc-ops listing approve``). A listing vouches for where
    users' money goes, so it does not carry over to an address nobody has reviewed.

    The allowlist status was about the old address, so it becomes ``unknown`` (no payment
    is accepted) until the chain worker reads the new one (payments.chain.allowlist)."""
    address = check_pay_to(address)
    if address != app.pay_to:
        app.pay_to = address
        app.pay_to_status = PayToStatus.TESTING
        app.portal_listing_status = ListingStatus.PENDING_REVIEW
        app.recipient_allowlist_status = AllowlistStatus.UNKNOWN
