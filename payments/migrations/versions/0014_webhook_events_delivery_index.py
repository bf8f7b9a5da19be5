"""webhook_events.delivery_id: a delivery's events are found by an index

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29

A delivery's events are looked up by its id: the dispatcher checks for the legacy
``delivery.created`` twin before writing it, and ``delivery.fulfilled`` follows the
delivery's fulfilment event. Without an index each lookup read every event of every app.
"""

from __future__ import annotations

from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_events_delivery_id'), ['delivery_id'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_events_delivery_id'))
