"""apps and products

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('apps',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('slug', sa.String(length=63), nullable=False),
    sa.Column('type', sa.Enum('Game', 'Application', name='apptype', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('headline', sa.String(length=200), nullable=False),
    sa.Column('entry_url', sa.String(length=2048), nullable=False),
    sa.Column('environment', sa.String(length=32), nullable=False),
    sa.Column('pay_to', sa.String(length=42), nullable=True),
    sa.Column('pay_to_status', sa.Enum('unbound', 'testing', 'approved', name='paytostatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('portal_listing_status', sa.Enum('unlisted', 'pending_review', 'listed', 'rejected', name='listingstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('status', sa.Enum('active', 'suspended', name='appstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('recipient_allowlist_status', sa.Enum('unknown', 'allowed', 'not_allowed', name='allowliststatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('distribution_targets', sa.JSON(), nullable=False),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('runtime_origin', sa.String(length=2048), nullable=True),
    sa.Column('runtime_status', sa.Enum('not_configured', 'pending_verification', 'active', 'disabled', name='runtimestatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('runtime_app_path', sa.String(length=512), nullable=False),
    sa.Column('runtime_entry_path', sa.String(length=512), nullable=False),
    sa.Column('runtime_domain_request_status', sa.Enum('not_requested', 'pending_manual_dns', 'approved', 'rejected', name='domainrequeststatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('runtime_checks', sa.JSON(), nullable=False),
    sa.Column('kill_switch', sa.Boolean(), nullable=False),
    sa.Column('kill_switch_reason', sa.String(length=500), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_apps')),
    sa.UniqueConstraint('slug', name=op.f('uq_apps_slug'))
    )
    op.create_table('products',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('slug', sa.String(length=63), nullable=False),
    sa.Column('sku', sa.String(length=120), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('price_atomic', sa.BigInteger(), nullable=False),
    sa.Column('template', sa.String(length=64), nullable=False),
    sa.Column('risk_mode', sa.Enum('optimistic', 'settled_first', name='riskmode', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('trusted_charge_enabled', sa.Boolean(), nullable=False),
    sa.Column('trusted_charge_proof_required', sa.Boolean(), nullable=False),
    sa.Column('trusted_charge_max_atomic', sa.BigInteger(), nullable=True),
    sa.Column('fulfillment_adapter', sa.String(length=64), nullable=False),
    sa.Column('fulfillment_config', sa.JSON(), nullable=False),
    sa.Column('pricing', sa.Enum('fixed', 'dynamic_order', name='pricing', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('min_amount_atomic', sa.BigInteger(), nullable=True),
    sa.Column('max_amount_atomic', sa.BigInteger(), nullable=True),
    sa.Column('status', sa.Enum('active', 'disabled', name='productstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_products_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_products')),
    sa.UniqueConstraint('app_id', 'sku', name='uq_products_app_sku'),
    sa.UniqueConstraint('app_id', 'slug', name='uq_products_app_slug')
    )
    with op.batch_alter_table('products', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_products_app_id'), ['app_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('products', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_products_app_id'))

    op.drop_table('products')
    op.drop_table('apps')
