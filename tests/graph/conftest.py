"""A small Geminispace with a known link graph, written to a real store through the models.

``SPEC`` is the single description: the store is built from it, and the tests build their
expected answers (with networkx) from it too, never from the code under test.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import networkx as nx
import pytest
from sqlalchemy import update

from sextant.store import Capsule, Link, Page, make_engine, session_factory
from sextant.store.migrate import open_store, upgrade

NOW = datetime(2024, 6, 1, 12, 0, 0)

# capsule -> port
CAPSULES = {"alpha.test": 1965, "beta.test": 1965, "gamma.test": 1965, "delta.test": 1966}

# url -> (state, status, mime, title, depth)
PAGES = {
    "gemini://alpha.test/": ("ok", 20, "text/gemini", "Alpha home", 0),
    "gemini://alpha.test/1": ("ok", 20, "text/gemini", 'Quotes " and <tags> & ampersands', 1),
    "gemini://alpha.test/2": ("ok", 20, "text/gemini", "Ctrl\x01char, tab\tnew\nline \\ 🚀", 1),
    "gemini://beta.test/": ("ok", 20, "text/gemini", "Beta", 1),
    "gemini://beta.test/x": ("ok", 20, "text/plain", None, 2),
    "gemini://gamma.test/": ("new", None, None, None, 2),
    "gemini://delta.test:1966/": ("redirect", 31, None, None, 3),
}

# (source, target url, scheme); duplicates and a self-link on purpose
LINKS = [
    ("gemini://alpha.test/", "gemini://alpha.test/1", "gemini"),
    ("gemini://alpha.test/", "gemini://alpha.test/2", "gemini"),
    ("gemini://alpha.test/1", "gemini://alpha.test/", "gemini"),
    ("gemini://alpha.test/", "gemini://beta.test/", "gemini"),
    ("gemini://alpha.test/", "gemini://beta.test/", "gemini"),
    ("gemini://beta.test/", "gemini://beta.test/x", "gemini"),
    ("gemini://beta.test/x", "gemini://alpha.test/", "gemini"),
    ("gemini://beta.test/", "gemini://gamma.test/", "gemini"),
    ("gemini://alpha.test/2", "gemini://alpha.test/2", "gemini"),
    ("gemini://delta.test:1966/", "gemini://alpha.test/", "gemini"),
    ("gemini://alpha.test/1", "https://example.org/", "https"),
]
SEEDS = ["gemini://alpha.test/"]  # the only depth-0 page

# robots.txt files for the tests of what the researcher may study (host -> status, text)
ROBOTS = {
    # indexer's rule is not the researcher's: /1 stays, /2 goes.
    "alpha.test": (20, "User-agent: researcher\nDisallow: /2\n\nUser-agent: indexer\nDisallow: /1"),
    # An Allow for researcher does not reopen what "*" closes.
    "beta.test": (20, "User-agent: *\nDisallow: /x\n\nUser-agent: researcher\nAllow: /x\n"),
    # Closed as a whole: the capsule and its page go.
    "gamma.test": (20, "User-agent: researcher\nDisallow: /\n"),
    # No robots.txt (51): nothing forbidden.
    "delta.test": (51, None),
}
LEFT_OUT = {"gemini://alpha.test/2", "gemini://beta.test/x", "gemini://gamma.test/"}


def write_robots(store, files=ROBOTS) -> None:
    """Store robots.txt files as the crawler keeps them: status and text per capsule."""
    with store.sessions.begin() as session:
        for host, (status, text) in files.items():
            session.execute(
                update(Capsule)
                .where(Capsule.id == store.capsule_id[host])
                .values(robots_status=status, robots_txt=text, robots_fetched_at=NOW)
            )


def capsule_of(url: str) -> str:
    return url.split("/")[2].split(":")[0]


def capsule_label(host: str) -> str:
    """How the graph names a capsule: the host, with its port when it is not 1965."""
    return host if CAPSULES[host] == 1965 else f"{host}:{CAPSULES[host]}"


@dataclass
class Store:
    sessions: object
    page_id: dict[str, int]
    capsule_id: dict[str, int]


def expected_page_graph() -> nx.DiGraph:
    """The page-level graph the store holds: weights count duplicate links, no self-links."""
    graph = nx.DiGraph()
    graph.add_nodes_from(PAGES)
    for source, target, scheme in LINKS:
        if scheme != "gemini" or source == target:
            continue
        if graph.has_edge(source, target):
            graph[source][target]["weight"] += 1
        else:
            graph.add_edge(source, target, weight=1)
    return graph


def expected_capsule_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(CAPSULES)
    for source, target, data in expected_page_graph().edges(data=True):
        a, b = capsule_of(source), capsule_of(target)
        if a == b:
            continue
        if graph.has_edge(a, b):
            graph[a][b]["weight"] += data["weight"]
        else:
            graph.add_edge(a, b, weight=data["weight"])
    return graph


def fill(sessions) -> Store:
    with sessions.begin() as session:
        capsules = {
            host: Capsule(host=host, port=port, display_host=host, first_seen_at=NOW)
            for host, port in CAPSULES.items()
        }
        pages = {}
        for url, (state, status, mime, title, depth) in PAGES.items():
            pages[url] = Page(
                url=url,
                capsule=capsules[capsule_of(url)],
                scope=url.split("/")[2],
                depth=depth,
                state=state,
                status=status,
                mime=mime,
                title=title,
                discovered_at=NOW,
                updated_at=NOW,
            )
        session.add_all([*capsules.values(), *pages.values()])
        session.flush()
        for position, (source, target, scheme) in enumerate(LINKS):
            target_page = pages.get(target)
            session.add(
                Link(
                    source_id=pages[source].id,
                    target_url=target,
                    target_id=target_page.id if target_page else None,
                    target_scheme=scheme,
                    position=position,
                    cross_capsule=bool(
                        target_page and target_page.capsule is not pages[source].capsule
                    ),
                    first_seen_at=NOW,
                )
            )
        return Store(
            sessions=sessions,
            page_id={url: page.id for url, page in pages.items()},
            capsule_id={host: capsule.id for host, capsule in capsules.items()},
        )


@pytest.fixture
def graph_store(db_url) -> Store:
    migrator = make_engine(db_url)
    upgrade(migrator)
    migrator.dispose()
    engine = open_store(db_url)
    yield fill(session_factory(engine))
    engine.dispose()


@pytest.fixture
def sqlite_graph_store(tmp_path) -> Store:
    engine = open_store(f"sqlite:///{tmp_path / 'graph.db'}")
    yield fill(session_factory(engine))
    engine.dispose()
