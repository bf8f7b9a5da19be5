"""webhook_attempts.queued_behind: skipped events resent one at a time, oldest first

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28

Events that came due while an app's endpoint was disabled are ``skipped``. Resending them
(``POST .../webhooks/<id>/resend-skipped``) makes them pending again, each queued behind
the one created before it: the dispatcher claims a queued row only once the row it waits
for has had its request answered (docs/webhooks.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

_WHERE = sa.text("queued_behind IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('queued_behind', sa.String(length=48), nullable=True))
        batch_op.create_index('ix_webhook_attempts_queued_behind', ['queued_behind'],
                              unique=False, sqlite_where=_WHERE, postgresql_where=_WHERE)


def downgrade() -> None:
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_attempts_queued_behind', sqlite_where=_WHERE,
                            postgresql_where=_WHERE)
        batch_op.drop_column('queued_behind')
