"""api_keys.form_token_hash: a console create-key form makes one key, however often sent

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

Reloading the console's page that shows a new key's secret sent its form again and made a
second key. Each create-key form now carries a one-time token; the key it makes keeps the
token's hash under a unique constraint, so a second sending of the same form (even at the
same moment) finds the key already made instead of making another (docs/decisions.md).
Keys made before, and by the API, have none (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('form_token_hash', sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint(batch_op.f('uq_api_keys_form_token_hash'),
                                          ['form_token_hash'])


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_api_keys_form_token_hash'), type_='unique')
        batch_op.drop_column('form_token_hash')
