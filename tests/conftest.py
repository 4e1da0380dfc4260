"""Shared fixtures; ``tests.databases`` provides ``db_url`` (SQLite, and PostgreSQL if set up)."""

pytest_plugins = ["tests.databases"]
