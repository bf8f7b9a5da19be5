"""payment ledger

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('authorizations',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('owner_wallet', sa.String(length=42), nullable=False),
    sa.Column('spender', sa.String(length=42), nullable=False),
    sa.Column('token', sa.String(length=42), nullable=False),
    sa.Column('chain_id', sa.BigInteger(), nullable=False),
    sa.Column('value_atomic', sa.BigInteger(), nullable=False),
    sa.Column('spent_atomic', sa.BigInteger(), nullable=False),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=False),
    sa.Column('nonce', sa.BigInteger(), nullable=False),
    sa.Column('signature', sa.String(length=132), nullable=False),
    sa.Column('status', sa.Enum('active', 'revoked', 'expired', 'superseded', name='authorizationstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('relay_status', sa.Enum('pending', 'relayed', 'failed', name='relaystatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('relay_tx_hash', sa.String(length=66), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoke_nonce', sa.BigInteger(), nullable=True),
    sa.Column('revoke_signature', sa.String(length=132), nullable=True),
    sa.Column('revoke_relay_status', sa.Enum('pending', 'relayed', 'failed', name='revokerelaystatus', native_enum=False, create_constraint=True, length=32), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_authorizations'))
    )
    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_authorizations_owner_wallet'), ['owner_wallet'], unique=False)
        batch_op.create_index('uq_authorizations_active_owner_spender', ['owner_wallet', 'spender'], unique=True, sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))

    op.create_table('settlement_batches',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('status', sa.Enum('queued', 'settling', 'settled', 'failed', name='settlementstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('tx_hash', sa.String(length=66), nullable=True),
    sa.Column('tx_nonce', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('settled_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_settlement_batches'))
    )
    op.create_table('account_connections',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('merchant_user_hash', sa.String(length=64), nullable=False),
    sa.Column('owner_wallet', sa.String(length=42), nullable=False),
    sa.Column('game_account_label', sa.String(length=120), nullable=False),
    sa.Column('status', sa.Enum('active', 'unlinked', name='connectionstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('bound_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_account_connections_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_account_connections'))
    )
    with op.batch_alter_table('account_connections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_account_connections_app_id'), ['app_id'], unique=False)
        batch_op.create_index('uq_account_connections_active', ['app_id', 'merchant_user_hash'], unique=True, sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))

    op.create_table('idempotency_records',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('scope', sa.String(length=40), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('request_hash', sa.String(length=64), nullable=False),
    sa.Column('response_status', sa.Integer(), nullable=False),
    sa.Column('response_body', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_idempotency_records_app_id_apps'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotency_records')),
    sa.UniqueConstraint('app_id', 'scope', 'key', name='uq_idempotency_records_app_scope_key')
    )
    op.create_table('charges',
    sa.Column('seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('product_id', sa.String(length=40), nullable=False),
    sa.Column('order_id', sa.String(length=48), nullable=True),
    sa.Column('authorization_id', sa.String(length=48), nullable=False),
    sa.Column('owner_wallet', sa.String(length=42), nullable=False),
    sa.Column('pay_to', sa.String(length=42), nullable=False),
    sa.Column('amount_atomic', sa.BigInteger(), nullable=False),
    sa.Column('settlement_status', sa.Enum('queued', 'settling', 'settled', 'failed', name='settlementstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('batch_id', sa.String(length=48), nullable=True),
    sa.Column('settlement_tx_hash', sa.String(length=66), nullable=True),
    sa.Column('source', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('settled_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_charges_app_id_apps')),
    sa.ForeignKeyConstraint(['authorization_id'], ['authorizations.id'], name=op.f('fk_charges_authorization_id_authorizations')),
    sa.ForeignKeyConstraint(['batch_id'], ['settlement_batches.id'], name=op.f('fk_charges_batch_id_settlement_batches')),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'], name=op.f('fk_charges_product_id_products')),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_charges'))
    )
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charges_app_id'), ['app_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_authorization_id'), ['authorization_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_batch_id'), ['batch_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_settlement_status'), ['settlement_status'], unique=False)

    op.create_table('deliveries',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('product_id', sa.String(length=40), nullable=False),
    sa.Column('order_id', sa.String(length=48), nullable=True),
    sa.Column('charge_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('idempotency_key', sa.String(length=260), nullable=False),
    sa.Column('developer_user_id', sa.String(length=200), nullable=True),
    sa.Column('wallet_address', sa.String(length=42), nullable=False),
    sa.Column('status', sa.Enum('delivered', 'awaiting_settlement', 'failed', name='deliverystatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('fulfilled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_deliveries_app_id_apps')),
    sa.ForeignKeyConstraint(['charge_seq'], ['charges.seq'], name=op.f('fk_deliveries_charge_seq_charges')),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'], name=op.f('fk_deliveries_product_id_products')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deliveries')),
    sa.UniqueConstraint('app_id', 'idempotency_key', name='uq_deliveries_app_idempotency_key'),
    sa.UniqueConstraint('charge_seq', name=op.f('uq_deliveries_charge_seq'))
    )
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_deliveries_app_id'), ['app_id'], unique=False)

    op.create_table('orders',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('product_id', sa.String(length=40), nullable=False),
    sa.Column('amount_atomic', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.Enum('created', 'paid', name='orderstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('developer_user_id', sa.String(length=200), nullable=False),
    sa.Column('idempotency_key', sa.String(length=200), nullable=False),
    sa.Column('charge_seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('paid_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_orders_app_id_apps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['charge_seq'], ['charges.seq'], name=op.f('fk_orders_charge_seq_charges')),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'], name=op.f('fk_orders_product_id_products')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_orders')),
    sa.UniqueConstraint('app_id', 'idempotency_key', name='uq_orders_app_idempotency_key')
    )
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_orders_app_id'), ['app_id'], unique=False)

    op.create_table('auth_codes',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('kind', sa.Enum('summary', 'payment', name='codekind', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('authorization_id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('audience', sa.String(length=300), nullable=False),
    sa.Column('return_url', sa.String(length=2048), nullable=False),
    sa.Column('product_id', sa.String(length=40), nullable=True),
    sa.Column('order_id', sa.String(length=48), nullable=True),
    sa.Column('connection_id', sa.String(length=48), nullable=True),
    sa.Column('developer_user_id', sa.String(length=200), nullable=True),
    sa.Column('idempotency_key', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('consumed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_auth_codes_app_id_apps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['authorization_id'], ['authorizations.id'], name=op.f('fk_auth_codes_authorization_id_authorizations')),
    sa.ForeignKeyConstraint(['connection_id'], ['account_connections.id'], name=op.f('fk_auth_codes_connection_id_account_connections')),
    sa.ForeignKeyConstraint(['order_id'], ['orders.id'], name=op.f('fk_auth_codes_order_id_orders')),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'], name=op.f('fk_auth_codes_product_id_products')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_auth_codes')),
    sa.UniqueConstraint('code_hash', name=op.f('uq_auth_codes_code_hash'))
    )
    with op.batch_alter_table('auth_codes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_auth_codes_authorization_id'), ['authorization_id'], unique=False)

    op.create_table('webhook_events',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('app_id', sa.String(length=40), nullable=False),
    sa.Column('type', sa.String(length=40), nullable=False),
    sa.Column('delivery_id', sa.String(length=48), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['app_id'], ['apps.id'], name=op.f('fk_webhook_events_app_id_apps')),
    sa.ForeignKeyConstraint(['delivery_id'], ['deliveries.id'], name=op.f('fk_webhook_events_delivery_id_deliveries')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_events'))
    )
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_events_app_id'), ['app_id'], unique=False)

    op.create_table('webhook_attempts',
    sa.Column('id', sa.String(length=48), nullable=False),
    sa.Column('event_id', sa.String(length=48), nullable=False),
    sa.Column('status', sa.Enum('pending', 'delivered', 'failed', name='attemptstatus', native_enum=False, create_constraint=True, length=32), nullable=False),
    sa.Column('attempt_count', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('signed', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['webhook_events.id'], name=op.f('fk_webhook_attempts_event_id_webhook_events')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts')),
    sa.UniqueConstraint('event_id', name=op.f('uq_webhook_attempts_event_id'))
    )
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_attempts_status'), ['status'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_attempts_status'))

    op.drop_table('webhook_attempts')
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_events_app_id'))

    op.drop_table('webhook_events')
    with op.batch_alter_table('auth_codes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_auth_codes_authorization_id'))

    op.drop_table('auth_codes')
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_orders_app_id'))

    op.drop_table('orders')
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deliveries_app_id'))

    op.drop_table('deliveries')
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_charges_settlement_status'))
        batch_op.drop_index(batch_op.f('ix_charges_batch_id'))
        batch_op.drop_index(batch_op.f('ix_charges_authorization_id'))
        batch_op.drop_index(batch_op.f('ix_charges_app_id'))

    op.drop_table('charges')
    op.drop_table('idempotency_records')
    with op.batch_alter_table('account_connections', schema=None) as batch_op:
        batch_op.drop_index('uq_account_connections_active', sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))
        batch_op.drop_index(batch_op.f('ix_account_connections_app_id'))

    op.drop_table('account_connections')
    op.drop_table('settlement_batches')
    with op.batch_alter_table('authorizations', schema=None) as batch_op:
        batch_op.drop_index('uq_authorizations_active_owner_spender', sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))
        batch_op.drop_index(batch_op.f('ix_authorizations_owner_wallet'))

    op.drop_table('authorizations')
