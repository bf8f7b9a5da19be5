"""chain_cursors.position: where a job that walks rows, not blocks, stopped

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('chain_cursors', schema=None) as batch_op:
        batch_op.add_column(sa.Column('position', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('chain_cursors', schema=None) as batch_op:
        batch_op.drop_column('position')
