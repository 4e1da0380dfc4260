"""Alembic migrations; a package so they ship inside the wheel."""
