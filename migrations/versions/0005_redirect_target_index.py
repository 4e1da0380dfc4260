"""redirect target index

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05 03:15:00.000000
"""
from collections.abc import Sequence

from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The pages that moved to a URL (sextant.store.redirects.redirected_to, asked by every
    # backlinks page): without it each hop read every redirect row of the store.
    with op.batch_alter_table('pages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pages_redirect_target'), ['redirect_target'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('pages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pages_redirect_target'))
