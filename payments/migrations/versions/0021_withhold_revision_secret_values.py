"""config_revisions: values that look like secrets, recorded before the guard refused them, are withheld

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27

Migration 0018 withheld the credentials riding in URLs. Revisions recorded before the guard
refused other values that look like secrets may hold those too, in the config as sent, the
state and the ops: above all an op's before value set outside config (a product's
``fulfillmentConfig`` ``apiKey``, written through the product API before it refused
secrets), recorded before ops withheld them, and whatever a rule the guard gained since
would refuse. Each such value is replaced, whole, by ``[withheld: looks like a secret]``,
as a plan's diff shows it today: found by the guard's own rule
(``payments.config.document.withhold_secrets`` over ``looks_like_secret``: our prefixed
secrets, a raw or PEM private key, a bearer token, a URL carrying a credential, any
non-empty string under a key named like a credential, and an object with a key that looks
like one, whole), so what this withholds, what the guard refuses and what a plan shows
cannot drift apart. Everything else is kept as it was, and a row holding none is not
written. The mark is no secret to that rule (a URL whose credential 0018 withheld keeps
the rest of its text), so running this again changes nothing.

Like 0018 it reads ``config_revisions`` only (docs/decisions.md), 200 rows at a time by id,
on SQLite and PostgreSQL alike; its loop is its own rather than shared with 0018's, so
neither migration changes when the other's file or a helper module would.

Downgrade does nothing: a withheld value is gone, and nothing can bring it back. A rollback
to a revision whose state (or, without one, config) now holds the mark is refused,
``422 config_revision_withheld`` (docs/config.md).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from payments.config.document import withhold_secrets

revision = '0021'
down_revision = '0020'
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
    """The columns of ``row`` that hold a value looking like a secret, with it withheld;
    only those are written, so the others keep their stored text exactly."""
    changed = {}
    for name in COLUMNS:
        if (value := row[name]) is not None:
            withheld = withhold_secrets(value)
            if withheld != value:
                changed[name] = withheld
    return changed


def downgrade() -> None:
    """Nothing: the values withheld are gone for good (see above)."""
