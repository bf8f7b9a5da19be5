"""operator actions: the two-step ownership handover

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

BudgetSpenderV2 became ``Ownable2Step``: ``operator_actions.action`` gains
``contract_ownership_offered`` (``svc-ops contract transfer-ownership``: the pending owner
named), ``contract_ownership_cancelled`` (``transfer-ownership --cancel``: the pending owner
cleared) and ``contract_ownership_accepted`` (``svc-ops contract accept-ownership``: the
owner changed), recorded like the other owner transactions (the column holds 32
characters, hence the short names).
``contract_ownership_transferred`` stays, for a spender deployed as plain ``Ownable``
(``transfer-ownership --one-step``).
"""

from __future__ import annotations

from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

_OLD_ACTIONS = ('domain_approved', 'domain_rejected', 'pay_to_approved', 'kill_switch_on',
                'kill_switch_off', 'review_approved', 'review_rejected',
                'developer_allowlisted', 'developer_unlisted', 'allowlist_add',
                'allowlist_remove', 'listing_approved', 'listing_rejected', 'relayer_add',
                'relayer_remove', 'contract_deployed', 'contract_ownership_transferred')
_ADDED = ('contract_ownership_offered', 'contract_ownership_cancelled',
          'contract_ownership_accepted')


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
    # keeps what they did: the OwnershipTransferStarted and OwnershipTransferred events,
    # owner() and pendingOwner()).
    op.execute("DELETE FROM operator_actions WHERE action IN "
               "('contract_ownership_offered', 'contract_ownership_cancelled', "
               "'contract_ownership_accepted')")
    _set_actions(_OLD_ACTIONS)
