"""operator actions: the contract's ownership transferred

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27

``operator_actions.action`` gains ``contract_ownership_transferred`` (``svc-ops contract
transfer-ownership``: the spender's ``transferOwnership`` owner transaction), recorded like
the other owner transactions.
"""

from __future__ import annotations

from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None

_OLD_ACTIONS = ('domain_approved', 'domain_rejected', 'pay_to_approved', 'kill_switch_on',
                'kill_switch_off', 'review_approved', 'review_rejected',
                'developer_allowlisted', 'developer_unlisted', 'allowlist_add',
                'allowlist_remove', 'listing_approved', 'listing_rejected', 'relayer_add',
                'relayer_remove', 'contract_deployed')
_ADDED = ('contract_ownership_transferred',)


def _action_check(values: tuple[str, ...]) -> str:
    return "action IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _set_actions(values: tuple[str, ...]) -> None:
    # SQLite cannot alter a CHECK constraint: batch mode copies the table with the new one.
    with op.batch_alter_table('operator_actions', schema=None, recreate='auto') as batch_op:
        batch_op.drop_constraint(op.f('ck_operator_actions_operatoractionkind'), type_='check')
        batch_op.create_check_constraint('operatoractionkind', _action_check(values))


def upgrade() -> None:
    _set_actions((*_OLD_ACTIONS, *_ADDED))


def downgrade() -> None:
    # The old constraint cannot hold these records, so a downgrade loses them (the chain
    # keeps what they did: the OwnershipTransferred events, and owner() itself).
    op.execute("DELETE FROM operator_actions WHERE action = 'contract_ownership_transferred'")
    _set_actions(_OLD_ACTIONS)
