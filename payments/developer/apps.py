"""A developer creating an app: one unit of work shared by the JSON API and the console."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from payments.apps import create_app_record
from payments.developer.auth import Principal
from payments.developer.models import NotificationKind, OperatorNotification
from payments.models import App, AppType


def create_developer_app(session: Session, who: Principal, *, name: str, slug: str | None,
                         app_type: AppType, headline: str, pay_to: str | None,
                         tags: Iterable[str] = ()) -> App:
    """The app exists at once, owned by the caller's organization; operators are told."""
    who.require_session("Creating an app")
    app = create_app_record(session, name=name, slug=slug, app_type=app_type,
                            headline=headline, pay_to=pay_to, tags=tags)
    app.organization_id = who.organization_ids[0]
    # Creation is a technical step; operators hear about it (spec 1.2, 6).
    session.add(OperatorNotification(kind=NotificationKind.DEVELOPER_APP_REQUESTED,
                                     app_id=app.id, payload={"slug": app.slug,
                                                             "by": who.developer_id}))
    session.flush()
    return app
