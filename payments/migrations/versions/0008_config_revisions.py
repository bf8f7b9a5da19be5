"""config as code: config_revisions

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('config_revisions',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('mode', sa.String(length=8), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('ops', sa.JSON(), nullable=False),
    sa.Column('summary', sa.JSON(), nullable=False),
    sa.Column('applied_by', sa.String(length=48), nullable=False),
    sa.Column('via', sa.String(length=16), nullable=False),
    sa.Column('rollback_of', sa.String(length=48), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_config_revisions_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_config_revisions')),
    sa.UniqueConstraint('app_id', 'number', name=op.f('uq_config_revisions_app_id'))
    )
    with op.batch_alter_table('config_revisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_config_revisions_app_id'), ['app_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('config_revisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_config_revisions_app_id'))
    op.drop_table('config_revisions')
