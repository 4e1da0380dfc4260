"""A real search capsule on loopback: real TLS, a real SQLite store, a real Whoosh index.

The store and index are built once per module (building is synchronous and takes a
fraction of a second); each test starts its own server on a free port, so no test can
see another's throttle, cache or connections.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from gemserve.server import ServerLimits
from indexer.budget import PATIENT_SECONDS
from indexer.build import run_index
from search_capsule.app import CapsuleApp
from search_capsule.server import build_app, run_capsule
from search_capsule.services import CapsuleLimits
from sextant.config import Settings
from sextant.store.migrate import open_store
from sextant.tls import make_self_signed, server_context_from_pem
from tests.search_capsule import space
from tests.search_capsule.client import Client

HOST = "127.0.0.1"
HOSTNAME = "search.test"
NOTES = 25  # pages matching space.NOTES_WORD: three pages of ten

#: Tests run many requests from one address; the throttle has tests of its own. The search
#: budget is the library's patient one: on a loaded CI machine a cold search of a test index
#: can pass 0.25 s and come back partial (test_fairness and indexer/test_budget test it).
UNTHROTTLED = CapsuleLimits(rate_per_client=None, search_budget=PATIENT_SECONDS)
FAST_SERVER = ServerLimits(request_timeout=1.0, max_connections=512, send_timeout=2.0)


@pytest.fixture(scope="session")
def tls_context() -> ssl.SSLContext:
    return server_context_from_pem(*make_self_signed([HOSTNAME, HOST]))


def settings_in(directory: Path) -> Settings:
    return Settings.load(data_dir=directory, db_url=f"sqlite:///{directory / 'sextant.db'}")


@pytest.fixture(scope="module")
def full_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The test space plus a capsule of notes, crawled (written) and indexed."""
    settings = settings_in(tmp_path_factory.mktemp("full"))
    engine = open_store(settings.db_url)
    space.populate(engine)
    space.add_notes(engine, NOTES)
    engine.dispose()
    run_index(settings.index_dir, settings.db_url, procs=1)
    return settings


@pytest.fixture
def empty_settings(tmp_path: Path) -> Settings:
    """A data directory where nothing has happened yet: no store, no index."""
    return settings_in(tmp_path / "empty")


@dataclass
class Running:
    client: Client
    app: CapsuleApp
    address: tuple[str, int]


async def start_capsule(
    nursery,
    settings: Settings,
    tls_context: ssl.SSLContext,
    *,
    limits: CapsuleLimits = UNTHROTTLED,
    server_limits: ServerLimits = FAST_SERVER,
    hostnames: list[str] | None = None,
) -> Running:
    app = build_app(settings, limits)
    port = await nursery.start(
        partial(
            run_capsule,
            app,
            host=HOST,
            port=0,
            ssl_context=tls_context,
            hostnames=hostnames if hostnames is not None else [HOSTNAME, HOST],
            limits=server_limits,
        )
    )
    return Running(Client((HOST, port)), app, (HOST, port))


@pytest.fixture
async def capsule(nursery, full_settings, tls_context):
    running = await start_capsule(nursery, full_settings, tls_context)
    yield running
    running.app.close()


@pytest.fixture
async def empty_capsule(nursery, empty_settings, tls_context):
    running = await start_capsule(nursery, empty_settings, tls_context)
    yield running
    running.app.close()
