"""api_keys.idempotency_key: a create-key request retried under its idempotency key makes one key

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

A script that retried creating an API key after a timeout made a second key, and the first
key's secret was lost. The JSON API now takes an optional idempotency key; the key made
under it keeps it, with the hash of what that request asked for, unique per organization,
so a retry (even one arriving with the first) finds that key instead of making another
(docs/decisions.md). Keys made before, and without one, have none (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('idempotency_key', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('idempotency_request_hash', sa.String(length=64),
                                      nullable=True))
        batch_op.create_unique_constraint('uq_api_keys_organization_idempotency_key',
                                          ['organization_id', 'idempotency_key'])


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint('uq_api_keys_organization_idempotency_key', type_='unique')
        batch_op.drop_column('idempotency_request_hash')
        batch_op.drop_column('idempotency_key')
