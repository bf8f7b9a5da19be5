"""chain workers: sent transactions, charge retries, operator findings, cursors;
the deadline of a signed revoke

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('chain_cursors',
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('block', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_chain_cursors'))
    )
    op.create_table('chain_findings',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('kind', sa.Enum('amount_mismatch', 'recipient_mismatch', 'payer_mismatch', 'token_mismatch', 'missing_event', 'unknown_charge', 'tx_mismatch', 'retries_exhausted', 'budget_drift', 'repaired', name='findingkind', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('fingerprint', sa.String(length=200), nullable=False),
    sa.Column('charge_seq', sa.BigInteger(), nullable=True),
    sa.Column('batch_id', sa.String(length=48), nullable=True),
    sa.Column('tx_hash', sa.String(length=66), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chain_findings')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_chain_findings_fingerprint'))
    )
    with op.batch_alter_table('chain_findings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chain_findings_kind'), ['kind'], unique=False)

    op.create_table('chain_transactions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('kind', sa.Enum('charge_batch', 'permit', 'revoke', name='txkind', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('status', sa.Enum('refused', 'pending', 'confirmed', 'reverted', 'dropped', name='txstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('sender', sa.String(length=42), nullable=True),
    sa.Column('nonce', sa.BigInteger(), nullable=True),
    sa.Column('tx_hash', sa.String(length=66), nullable=True),
    sa.Column('raw', sa.Text(), nullable=True),
    sa.Column('batch_id', sa.String(length=48), nullable=True),
    sa.Column('authorization_id', sa.String(length=48), nullable=True),
    sa.Column('error', sa.String(length=300), nullable=True),
    sa.Column('block_number', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['authorization_id'], ['authorizations.id'], name=op.f('fk_chain_transactions_authorization_id_authorizations')),
    sa.ForeignKeyConstraint(['batch_id'], ['settlement_batches.id'], name=op.f('fk_chain_transactions_batch_id_settlement_batches')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chain_transactions')),
    sa.UniqueConstraint('tx_hash', name=op.f('uq_chain_transactions_tx_hash'))
    )
    with op.batch_alter_table('chain_transactions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chain_transactions_authorization_id'), ['authorization_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_chain_transactions_batch_id'), ['batch_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_chain_transactions_status'), ['status'], unique=False)

    op.create_table('charge_settlement_retries',
    sa.Column('charge_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.String(length=300), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['charge_seq'], ['charges.seq'], name=op.f('fk_charge_settlement_retries_charge_seq_charges')),
    sa.PrimaryKeyConstraint('charge_seq', name=op.f('pk_charge_settlement_retries'))
    )
    with op.batch_alter_table('charge_settlement_retries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charge_settlement_retries_next_attempt_at'), ['next_attempt_at'], unique=False)

    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('revoke_deadline', sa.DateTime(timezone=True), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.drop_column('revoke_deadline')

    with op.batch_alter_table('charge_settlement_retries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_charge_settlement_retries_next_attempt_at'))

    op.drop_table('charge_settlement_retries')
    with op.batch_alter_table('chain_transactions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_chain_transactions_status'))
        batch_op.drop_index(batch_op.f('ix_chain_transactions_batch_id'))
        batch_op.drop_index(batch_op.f('ix_chain_transactions_authorization_id'))

    op.drop_table('chain_transactions')
    with op.batch_alter_table('chain_findings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_chain_findings_kind'))

    op.drop_table('chain_findings')
    op.drop_table('chain_cursors')
