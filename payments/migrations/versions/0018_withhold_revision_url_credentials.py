"""config_revisions: credentials in URLs, recorded before the guard refused them, are withheld

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27

Since the secret guard finds credentials in URLs (a password in the user part, a signed or
secret query or fragment parameter), no revision records one; revisions recorded before may
hold them, in the config as sent, the state and the ops' keys and before/after values, and
the revision pages and API showed them. Each such credential is replaced by the mark
``[withheld: looks like a secret]`` (the whole user part; a parameter's value, its name
kept), found by the guard's own rule (``payments.config.document.withhold_url_credentials``
over ``url_credential``), so what this withholds and what the guard refuses cannot drift
apart. Everything else in a document is kept as it was, and a row holding none is not
written. The guard reads the mark as no credential, so running this again changes nothing.

config_revisions is the only table that records config documents: operator_actions and
operator_notifications hold an operator's own words and ids, webhook_events payment events
(docs/decisions.md).

Downgrade does nothing: a withheld credential is gone, and nothing can bring it back. A
rollback to a revision whose state (or, without one, config) now holds the mark is refused,
``422 config_revision_withheld`` (docs/config.md).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from payments.config.document import withhold_url_credentials

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

BATCH = 200  # rows read at a time, by id: a table of any size in bounded memory
COLUMNS = ("config", "state", "ops")  # summary holds counts only

revisions = sa.table("config_revisions", sa.column("id", sa.String()),
                     *(sa.column(name, sa.JSON()) for name in COLUMNS))


def upgrade() -> None:
    connection = op.get_bind()
    after = ""
    while True:
        rows = connection.execute(sa.select(revisions).where(revisions.c.id > after)
                                  .order_by(revisions.c.id).limit(BATCH)).all()
        for row in rows:
            withheld = _withheld(row._mapping)
            if withheld:
                connection.execute(revisions.update().where(revisions.c.id == row.id)
                                   .values(**withheld))
        if len(rows) < BATCH:
            return
        after = rows[-1].id


def _withheld(row: Any) -> dict[str, Any]:
    """The columns of ``row`` that hold a credential, with it withheld; only those are
    written, so the others keep their stored text exactly."""
    changed = {}
    for name in COLUMNS:
        if (value := row[name]) is not None:
            withheld = withhold_url_credentials(value)
            if withheld != value:
                changed[name] = withheld
    return changed


def downgrade() -> None:
    """Nothing: the credentials withheld are gone for good (see above)."""
