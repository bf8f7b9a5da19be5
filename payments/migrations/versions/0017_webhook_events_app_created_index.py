"""webhook_events (app_id, created_at, id): the attempts list reads its pages from an index

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

The webhook-attempts list pages an app's events newest first by (created_at, event id)
(the cursor of docs/webhooks.md). With only an index on app_id, every page read all of the
app's events and sorted them to return fifty. This index gives the order itself, so a page
is a walk of limit + 1 entries from the cursor. It starts with app_id, so it serves every
lookup by app_id alone and the single-column index on app_id is dropped.
"""

from __future__ import annotations

from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_events_app_created', ['app_id', 'created_at', 'id'],
                              unique=False)
        batch_op.drop_index('ix_webhook_events_app_id')


def downgrade() -> None:
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_events_app_id', ['app_id'], unique=False)
        batch_op.drop_index('ix_webhook_events_app_created')
