"""listing review: operator decisions on portal listing, and apps waiting for one

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

``operator_actions.action`` gains ``listing_approved`` and ``listing_rejected`` (spec 2.2:
binding or changing ``pay_to`` starts a review for public listing; ``svc-ops listing``
decides it). Apps that already have a ``pay_to`` but were never reviewed for listing (no
build before this one could start that review) enter the queue as ``pending_review``.
"""

from __future__ import annotations

from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_OLD_ACTIONS = ('domain_approved', 'domain_rejected', 'pay_to_approved', 'kill_switch_on',
                'kill_switch_off', 'review_approved', 'review_rejected',
                'developer_allowlisted', 'developer_unlisted', 'allowlist_add',
                'allowlist_remove')
_NEW_ACTIONS = (*_OLD_ACTIONS, 'listing_approved', 'listing_rejected')


def _action_check(values: tuple[str, ...]) -> str:
    return "action IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _set_actions(values: tuple[str, ...]) -> None:
    # SQLite cannot alter a CHECK constraint: batch mode copies the table with the new one.
    with op.batch_alter_table('operator_actions', schema=None, recreate='auto') as batch_op:
        batch_op.drop_constraint(op.f('ck_operator_actions_operatoractionkind'), type_='check')
        batch_op.create_check_constraint('operatoractionkind', _action_check(values))


def upgrade() -> None:
    _set_actions(_NEW_ACTIONS)
    op.execute("UPDATE apps SET portal_listing_status = 'pending_review' "
               "WHERE pay_to IS NOT NULL AND portal_listing_status = 'unlisted'")


def downgrade() -> None:
    # The old constraint cannot hold these decisions, so a downgrade loses them; the apps
    # keep their listing status.
    op.execute("DELETE FROM operator_actions "
               "WHERE action IN ('listing_approved', 'listing_rejected')")
    _set_actions(_OLD_ACTIONS)
