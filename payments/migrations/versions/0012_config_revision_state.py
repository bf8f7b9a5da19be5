"""config_revisions.state: the app as each revision left it

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

A revision kept only the document as sent, and a rollback re-applied it: a field that
document left out (a product's trusted-charge switch turned on by a later revision) kept
today's value. Each revision now also records the state its apply left, every field
config-as-code manages, as an svc.config.v1 document, which a rollback restores
(docs/config.md). Revisions recorded before have none (NULL): a rollback to one re-applies
its document as sent, with a warning in the plan.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('config_revisions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('state', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('config_revisions', schema=None) as batch_op:
        batch_op.drop_column('state')
