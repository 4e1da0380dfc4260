"""Shared fixtures; ``tests.databases`` provides ``db_url`` (SQLite, and PostgreSQL if set up)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from tests.gemini_server import RunningCapsules, ScriptedCapsule, start_capsules

pytest_plugins = ["tests.databases"]


@pytest.fixture
async def capsules(nursery: trio.Nursery) -> Callable[..., Awaitable[RunningCapsules]]:
    """Start scripted capsules that live until the test ends: ``running = await capsules(a, b)``.

    See ``tests/gemini_server.py`` for scripting routes and hostile behaviours.
    """

    async def start(*scripted: ScriptedCapsule) -> RunningCapsules:
        return await start_capsules(nursery, scripted)

    return start
