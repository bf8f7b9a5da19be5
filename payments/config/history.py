"""Reading an app's config revisions: the list, newest first, and one revision with the
ops, config and state it recorded. The API and the console's pages answer from these
functions, so both show a revision in the same JSON shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from payments.config.models import ConfigRevision
from payments.config.rollback import rollback_withheld
from payments.developer.models import Developer
from payments.digits import parse_digits
from payments.errors import ApiError

MAX_NUMBER = 2**31 - 1  # revision numbers are an INTEGER column


@dataclass(frozen=True)
class RevisionPage:
    revisions: list[dict[str, Any]]  # revision_view shapes, newest first
    older: int | None  # the ``before`` that lists the next, older page; None: no more


def revision_cursor(raw: str | None, *, status: int = 422) -> int | None:
    """A list's ``before`` as the query string has it (None: absent), for the API and the
    console alike: 1 to MAX_NUMBER in at most 10 ASCII digits, leading zeros allowed (as the
    API has always read it). Anything else is ``invalid_field`` with ``status``: the API
    answers 422, as for ``limit``; a console page 400, a bad address."""
    if raw is None:
        return None
    number = parse_digits(raw, 10)
    if number is None or not 1 <= number <= MAX_NUMBER:
        raise ApiError("invalid_field", status, "'before' must be a revision number, 1 or "
                       "more: the revisions numbered below it are listed.", field="before")
    return number


def revisions_of(session: Session, app_id: str, *, before: int | None = None,
                 limit: int | None = None) -> RevisionPage:
    """The app's revisions numbered below ``before`` (all without it), newest first, at
    most ``limit``. Pages are keyed by number, not offset: an apply landing between two
    page views shifts nothing on the older pages."""
    query = (select(ConfigRevision).where(ConfigRevision.app_id == app_id)
             .order_by(ConfigRevision.number.desc()))
    if before is not None:
        query = query.where(ConfigRevision.number < before)
    if limit is not None:
        query = query.limit(limit + 1)  # one more says whether an older page exists
    found = list(session.scalars(query))
    more = limit is not None and len(found) > limit
    shown = found[:limit] if more else found
    names = developer_names(session, {r.applied_by for r in shown})
    return RevisionPage([revision_view(r, names) for r in shown],
                        shown[-1].number if more else None)


def revision_of(session: Session, app_id: str, revision_id: str) -> ConfigRevision | None:
    """The revision ``revision_id`` if it is one of this app's; None for any other id, so
    that another app's revision cannot be told from one that does not exist."""
    return session.scalar(select(ConfigRevision).where(ConfigRevision.id == revision_id,
                                                       ConfigRevision.app_id == app_id))


def revision_detail(session: Session, revision: ConfigRevision) -> dict[str, Any]:
    """One revision as the API shows it: its view plus the config (as sent), the state it
    left (None when it recorded none) and the ops it recorded."""
    names = developer_names(session, {revision.applied_by})
    return {**revision_view(revision, names), "config": revision.config,
            "state": revision.state, "ops": revision.ops}


def revision_numbers(session: Session, app_id: str, ids: set[str]) -> dict[str, int]:
    """Revision id -> number, for this app's revisions among ``ids`` (what a rollback
    points at may sit on another page)."""
    if not ids:
        return {}
    rows = session.execute(select(ConfigRevision.id, ConfigRevision.number).where(
        ConfigRevision.app_id == app_id, ConfigRevision.id.in_(ids))).all()
    return {revision_id: number for revision_id, number in rows}


def developer_names(session: Session, ids: set[str]) -> dict[str, str]:
    if not ids:
        return {}
    return dict(session.execute(select(Developer.id, Developer.username)
                                .where(Developer.id.in_(ids))).all())


def revision_view(revision: ConfigRevision,
                  names: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": revision.id, "number": revision.number, "appId": revision.app_id,
            "mode": revision.mode, "summary": revision.summary,
            "appliedBy": {"developerId": revision.applied_by,
                          "username": (names or {}).get(revision.applied_by)},
            "via": revision.via, "rollbackOf": revision.rollback_of,
            "createdAt": revision.created_at.isoformat(),
            # Where what a rollback to it restores holds a withheld secret (migrations 0018,
            # 0021): a rollback is refused, and the list and page say so up front.
            "withheldPaths": rollback_withheld(revision.config, revision.state)}
