"""used_owner_proofs: an owner proof counts once

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

An owner proof (a wallet's signature bound to app, return URL, spender, budget and issue
time) was accepted any number of times in its 300 s window. It now counts once, as a
permit does (docs/payments.md): the hash of each exchanged proof (its owner and signed
text) is kept until the proof would have expired anyway.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('used_owner_proofs',
    sa.Column('proof_hash', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('proof_hash', name=op.f('pk_used_owner_proofs'))
    )
    with op.batch_alter_table('used_owner_proofs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_used_owner_proofs_expires_at'), ['expires_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('used_owner_proofs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_used_owner_proofs_expires_at'))
    op.drop_table('used_owner_proofs')
