"""census indexes

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 20:20:00.000000
"""
from collections.abc import Sequence

from alembic import op


revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The census counted pages and links by reading every row, bodies included: 5.9 s of
    # its queries at 553,014 pages (62 s with a cold page cache). These indexes cover the
    # columns it counts, so it reads only them (0.8 s).
    with op.batch_alter_table('pages', schema=None) as batch_op:
        batch_op.drop_index('ix_pages_status')
        batch_op.create_index('ix_pages_status', ['status', 'fetched_at'], unique=False)
        batch_op.create_index(
            'ix_pages_census', ['state', 'mime', 'lang', 'charset', 'size'], unique=False
        )
    with op.batch_alter_table('links', schema=None) as batch_op:
        batch_op.create_index('ix_links_kind', ['target_scheme', 'cross_capsule'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('links', schema=None) as batch_op:
        batch_op.drop_index('ix_links_kind')
    with op.batch_alter_table('pages', schema=None) as batch_op:
        batch_op.drop_index('ix_pages_census')
        batch_op.drop_index('ix_pages_status')
        batch_op.create_index('ix_pages_status', ['status'], unique=False)
