"""portal: wallet-ownership proof sessions of the account page

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('portal_wallet_sessions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('challenge_nonce', sa.String(length=64), nullable=False),
    sa.Column('wallet', sa.String(length=42), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_portal_wallet_sessions')),
    sa.UniqueConstraint('challenge_nonce', name=op.f('uq_portal_wallet_sessions_challenge_nonce')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_portal_wallet_sessions_token_hash'))
    )
    with op.batch_alter_table('portal_wallet_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_portal_wallet_sessions_wallet'), ['wallet'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('portal_wallet_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_portal_wallet_sessions_wallet'))

    op.drop_table('portal_wallet_sessions')
