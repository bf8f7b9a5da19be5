"""runtime lifecycle: verification reports, domain requests, operator actions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

Apps gain the times of the last verification, activation and domain request, and the
hosted-app review (status, categories, note). ``operator_actions`` records every operator
decision with who and when; ``hosting_allowlist`` holds the organizations reviewed first.
Existing apps get the defaults through server defaults.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

ACTIONS = ('domain_approved', 'domain_rejected', 'pay_to_approved', 'kill_switch_on',
           'kill_switch_off', 'review_approved', 'review_rejected', 'developer_allowlisted',
           'developer_unlisted', 'allowlist_add', 'allowlist_remove')
REVIEW = ('not_requested', 'pending', 'approved', 'rejected')


def upgrade() -> None:
    op.create_table('hosting_allowlist',
    sa.Column('organization_id', sa.String(length=48), nullable=False),
    sa.Column('added_by', sa.String(length=120), nullable=False),
    sa.Column('note', sa.String(length=500), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_hosting_allowlist_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('organization_id', name=op.f('pk_hosting_allowlist'))
    )
    op.create_table('operator_actions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('operator', sa.String(length=120), nullable=False),
    sa.Column('action', sa.Enum(*ACTIONS, name='operatoractionkind', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=True),
    sa.Column('subject', sa.String(length=255), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_operator_actions_app_id_apps'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_operator_actions'))
    )
    with op.batch_alter_table('operator_actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_operator_actions_app_id'), ['app_id'], unique=False)

    with op.batch_alter_table('apps', schema=None) as batch_op:
        batch_op.add_column(sa.Column('runtime_checked_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('runtime_verified_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('runtime_domain_requested_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('hosted_review_status', sa.Enum(*REVIEW, name='hostedreviewstatus', native_enum=False, create_constraint=True, length=32), nullable=False, server_default='not_requested'))
        batch_op.add_column(sa.Column('hosted_review_categories', sa.JSON(), nullable=False, server_default=sa.text("'[]'")))
        batch_op.add_column(sa.Column('hosted_review_note', sa.String(length=500), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('apps', schema=None) as batch_op:
        batch_op.drop_column('hosted_review_note')
        batch_op.drop_column('hosted_review_categories')
        # SQLite's batch copy would otherwise keep the CHECK that names the column.
        batch_op.drop_constraint(op.f('ck_apps_hostedreviewstatus'), type_='check')
        batch_op.drop_column('hosted_review_status')
        batch_op.drop_column('runtime_domain_requested_at')
        batch_op.drop_column('runtime_verified_at')
        batch_op.drop_column('runtime_checked_at')

    with op.batch_alter_table('operator_actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_operator_actions_app_id'))

    op.drop_table('operator_actions')
    op.drop_table('hosting_allowlist')
