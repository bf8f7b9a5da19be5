"""developer accounts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('developers',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('email', sa.String(length=254), nullable=False),
    sa.Column('username', sa.String(length=40), nullable=False),
    sa.Column('password_hash', sa.String(length=200), nullable=False),
    sa.Column('email_verified_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_developers')),
    sa.UniqueConstraint('email', name=op.f('uq_developers_email')),
    sa.UniqueConstraint('username', name=op.f('uq_developers_username'))
    )
    op.create_table('organizations',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_organizations'))
    )
    op.create_table('console_sessions',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('developer_id', sa.String(length=48), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['developer_id'], ['developers.id'], name=op.f('fk_console_sessions_developer_id_developers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_console_sessions')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_console_sessions_token_hash'))
    )
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_console_sessions_developer_id'), ['developer_id'], unique=False)

    op.create_table('email_verifications',
    sa.Column('developer_id', sa.String(length=48), nullable=False),
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_sent_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('failed_attempts', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['developer_id'], ['developers.id'], name=op.f('fk_email_verifications_developer_id_developers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('developer_id', name=op.f('pk_email_verifications'))
    )
    op.create_table('memberships',
    sa.Column('organization_id', sa.String(length=48), nullable=False),
    sa.Column('developer_id', sa.String(length=48), nullable=False),
    sa.Column('role', sa.Enum('owner', 'member', name='role', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['developer_id'], ['developers.id'], name=op.f('fk_memberships_developer_id_developers'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_memberships_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('organization_id', 'developer_id', name=op.f('pk_memberships'))
    )
    with op.batch_alter_table('memberships', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_memberships_developer_id'), ['developer_id'], unique=False)

    op.create_table('api_keys',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('organization_id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=True),
    sa.Column('label', sa.String(length=120), nullable=False),
    sa.Column('environment', sa.String(length=32), nullable=False),
    sa.Column('scopes', sa.JSON(), nullable=False),
    sa.Column('secret_hash', sa.String(length=64), nullable=False),
    sa.Column('preview', sa.String(length=40), nullable=False),
    sa.Column('created_by', sa.String(length=48), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_api_keys_app_id_apps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['created_by'], ['developers.id'], name=op.f('fk_api_keys_created_by_developers'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_api_keys_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('secret_hash', name=op.f('uq_api_keys_secret_hash'))
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_app_id'), ['app_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_api_keys_organization_id'), ['organization_id'], unique=False)

    op.create_table('cli_auth_requests',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('device_code_hash', sa.String(length=64), nullable=False),
    sa.Column('user_code', sa.String(length=16), nullable=False),
    sa.Column('app_slug', sa.String(length=63), nullable=True),
    sa.Column('scopes', sa.JSON(), nullable=False),
    sa.Column('ttl_seconds', sa.Integer(), nullable=False),
    sa.Column('status', sa.Enum('pending', 'approved', 'denied', 'issued', name='authrequeststatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('approved_by', sa.String(length=48), nullable=True),
    sa.Column('approved_app_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['approved_app_id'], ['apps.id'], name=op.f('fk_cli_auth_requests_approved_app_id_apps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['approved_by'], ['developers.id'], name=op.f('fk_cli_auth_requests_approved_by_developers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cli_auth_requests')),
    sa.UniqueConstraint('device_code_hash', name=op.f('uq_cli_auth_requests_device_code_hash')),
    sa.UniqueConstraint('user_code', name=op.f('uq_cli_auth_requests_user_code'))
    )
    op.create_table('cli_grants',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('developer_id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('scopes', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_cli_grants_app_id_apps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['developer_id'], ['developers.id'], name=op.f('fk_cli_grants_developer_id_developers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cli_grants')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_cli_grants_token_hash'))
    )
    with op.batch_alter_table('cli_grants', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_cli_grants_app_id'), ['app_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_cli_grants_developer_id'), ['developer_id'], unique=False)

    op.create_table('operator_notifications',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('kind', sa.Enum('developer_app_requested', 'runtime_domain_requested', name='notificationkind', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('handled_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_operator_notifications_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_operator_notifications'))
    )
    with op.batch_alter_table('operator_notifications', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_operator_notifications_app_id'), ['app_id'], unique=False)

    with op.batch_alter_table('apps', schema=None) as batch_op:
        batch_op.add_column(sa.Column('organization_id', sa.String(length=48), nullable=True))
        batch_op.create_index(batch_op.f('ix_apps_organization_id'), ['organization_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_apps_organization_id_organizations'), 'organizations', ['organization_id'], ['id'], ondelete='SET NULL')



def downgrade() -> None:
    with op.batch_alter_table('apps', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_apps_organization_id_organizations'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_apps_organization_id'))
        batch_op.drop_column('organization_id')

    with op.batch_alter_table('operator_notifications', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_operator_notifications_app_id'))

    op.drop_table('operator_notifications')
    with op.batch_alter_table('cli_grants', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_cli_grants_developer_id'))
        batch_op.drop_index(batch_op.f('ix_cli_grants_app_id'))

    op.drop_table('cli_grants')
    op.drop_table('cli_auth_requests')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_organization_id'))
        batch_op.drop_index(batch_op.f('ix_api_keys_app_id'))

    op.drop_table('api_keys')
    with op.batch_alter_table('memberships', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_memberships_developer_id'))

    op.drop_table('memberships')
    op.drop_table('email_verifications')
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_console_sessions_developer_id'))

    op.drop_table('console_sessions')
    op.drop_table('organizations')
    op.drop_table('developers')
