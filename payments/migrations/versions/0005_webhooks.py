"""webhooks: endpoints, signing secrets, dispatch attempts

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

_OLD_STATUSES = ('pending', 'delivered', 'failed')
_NEW_STATUSES = ('pending', 'delivered', 'failed', 'skipped')


def _status_check(values: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    op.create_table('webhook_endpoints',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('status', sa.Enum('enabled', 'disabled', name='endpointstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('secret_sealed', sa.String(length=200), nullable=False),
    sa.Column('secret_preview', sa.String(length=40), nullable=False),
    sa.Column('secret_created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_webhook_endpoints_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_endpoints')),
    sa.UniqueConstraint('app_id', name=op.f('uq_webhook_endpoints_app_id'))
    )
    op.create_table('webhook_tries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('attempt_id', sa.String(length=48), nullable=False),
    sa.Column('endpoint_id', sa.String(length=48), nullable=True),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('error', sa.String(length=120), nullable=True),
    sa.Column('signed', sa.Boolean(), nullable=False),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['attempt_id'], ['webhook_attempts.id'], name=op.f('fk_webhook_tries_attempt_id_webhook_attempts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_tries'))
    )
    with op.batch_alter_table('webhook_tries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_tries_attempt_id'), ['attempt_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_tries_sent_at'), ['sent_at'], unique=False)

    # SQLite cannot alter a CHECK constraint: batch mode copies the table with the new one.
    with op.batch_alter_table('webhook_attempts', schema=None, recreate='auto') as batch_op:
        batch_op.add_column(sa.Column('claim_token', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('endpoint_id', sa.String(length=48), nullable=True))
        batch_op.add_column(sa.Column('last_error', sa.String(length=120), nullable=True))
        batch_op.add_column(sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.drop_constraint(op.f('ck_webhook_attempts_attemptstatus'), type_='check')
        batch_op.create_check_constraint('attemptstatus', _status_check(_NEW_STATUSES))
        batch_op.create_index('ix_webhook_attempts_due', ['next_attempt_at'], unique=False, sqlite_where=sa.text("status = 'pending'"), postgresql_where=sa.text("status = 'pending'"))


def downgrade() -> None:
    op.execute("UPDATE webhook_attempts SET status = 'failed' WHERE status = 'skipped'")
    with op.batch_alter_table('webhook_attempts', schema=None, recreate='auto') as batch_op:
        batch_op.drop_index('ix_webhook_attempts_due', sqlite_where=sa.text("status = 'pending'"), postgresql_where=sa.text("status = 'pending'"))
        batch_op.drop_constraint(op.f('ck_webhook_attempts_attemptstatus'), type_='check')
        batch_op.create_check_constraint('attemptstatus', _status_check(_OLD_STATUSES))
        batch_op.drop_column('delivered_at')
        batch_op.drop_column('last_error')
        batch_op.drop_column('endpoint_id')
        batch_op.drop_column('claim_token')

    with op.batch_alter_table('webhook_tries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_tries_sent_at'))
        batch_op.drop_index(batch_op.f('ix_webhook_tries_attempt_id'))

    op.drop_table('webhook_tries')
    op.drop_table('webhook_endpoints')
