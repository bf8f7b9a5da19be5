"""portal: wallet-ownership proofs and account links

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22

Reserved in advance so that parallel work keeps one linear history; a revision with
nothing to do stays a no-op.
"""

from __future__ import annotations

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
