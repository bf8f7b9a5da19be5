"""indexes for the sweeps of dead wallet sessions and codes

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28

Each wallet proof deletes the portal's dead sessions, and each code issued deletes its
kind's codes past their retention (payments/sweeps.py). Without an index on what they
look for, each sweep read the whole table:

- ``ix_portal_wallet_sessions_expires_at``: expired sessions;
- ``ix_portal_wallet_sessions_ended``: ended sessions by when they were opened, partial
  (``revoked_at IS NOT NULL``), so it holds only the few ended rows and costs nothing on
  the insert of a session;
- ``ix_auth_codes_kind_expires_at``: a kind's codes expired before a time. Summary and
  payment codes keep their rows for different times, so the kind leads; the sweep was per
  budget through ``authorization_id`` before, which left the codes of a budget with no new
  return code, and every payment code, in place for good.

Plain ``CREATE INDEX``, as the earlier index migrations: it holds writes to the table
while it builds (a payment-code exchange waits), so on a large ``auth_codes`` run it at a
quiet time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None

ENDED = sa.text("revoked_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table('portal_wallet_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_portal_wallet_sessions_expires_at'),
                              ['expires_at'], unique=False)
        batch_op.create_index('ix_portal_wallet_sessions_ended', ['created_at'], unique=False,
                              sqlite_where=ENDED, postgresql_where=ENDED)
    with op.batch_alter_table('auth_codes', schema=None) as batch_op:
        batch_op.create_index('ix_auth_codes_kind_expires_at', ['kind', 'expires_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('auth_codes', schema=None) as batch_op:
        batch_op.drop_index('ix_auth_codes_kind_expires_at')
    with op.batch_alter_table('portal_wallet_sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_portal_wallet_sessions_ended', sqlite_where=ENDED,
                            postgresql_where=ENDED)
        batch_op.drop_index(batch_op.f('ix_portal_wallet_sessions_expires_at'))
