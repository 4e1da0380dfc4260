"""Permanent redirects in a real SQLite store: chains, loops and the bounds on both lookups."""

from __future__ import annotations

from collections.abc import Iterator

import numpy
import pytest
from sqlalchemy import Engine, insert
from sqlalchemy.orm import Session

from indexer.rank import load_graph
from sextant.store import Capsule, Link, Page, utcnow
from sextant.store.migrate import open_store
from sextant.store.redirects import (
    MAX_HOPS,
    MAX_REDIRECTED,
    permanent_redirects,
    redirected_to,
)

BASE = "gemini://moved.test/"


@pytest.fixture
def engine(tmp_path) -> Iterator[Engine]:
    engine = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as conn:
        conn.execute(
            insert(Capsule).values(
                id=1,
                host="moved.test",
                port=1965,
                display_host="moved.test",
                first_seen_at=utcnow(),
            )
        )
    yield engine
    engine.dispose()


def add(engine: Engine, pages: dict[str, tuple[str, int | None, str | None]]) -> dict[str, int]:
    """Pages by path: (state, status, redirect target path)."""
    now = utcnow()
    rows = [
        {
            "url": BASE + path,
            "capsule_id": 1,
            "scope": "moved.test",
            "state": state,
            "status": status,
            "redirect_target": None if target is None else BASE + target,
            "discovered_at": now,
            "updated_at": now,
        }
        for path, (state, status, target) in pages.items()
    ]
    with engine.begin() as conn:
        result = conn.execute(insert(Page).returning(Page.id, Page.url), rows)
        return {url.removeprefix(BASE): page_id for page_id, url in result}


def moved(target: str) -> tuple[str, int, str]:
    return ("redirect", 31, target)


def test_chains_are_followed_to_their_end_and_loops_lead_nowhere(engine):
    chain_too_long = {f"far{n}": moved(f"far{n + 1}") for n in range(MAX_HOPS + 1)}
    ids = add(
        engine,
        {
            "home": ("ok", 20, None),
            "a": moved("b"),
            "b": moved("c"),
            "c": moved("home"),
            "temporary": ("redirect", 30, "home"),
            "nowhere": moved("never-seen"),
            "loop1": moved("loop2"),
            "loop2": moved("loop1"),
            **chain_too_long,
            f"far{MAX_HOPS + 1}": ("ok", 20, None),
        },
    )
    with engine.connect() as conn:
        found = permanent_redirects(conn)
    home = ids["home"]
    assert {page: found.target_of.get(ids[page]) for page in ("a", "b", "c")} == dict.fromkeys(
        "abc", home
    )
    assert found.sources_of[home] == (ids["a"], ids["b"], ids["c"])
    for page in ("temporary", "nowhere", "loop1", "loop2", "far0"):
        assert ids[page] not in found.target_of, page
    assert found.target_of[ids["far1"]] == ids[f"far{MAX_HOPS + 1}"]  # exactly MAX_HOPS
    assert found.resolve(home) == home

    with Session(engine) as session:
        assert sorted(redirected_to(session, BASE + "home")) == [BASE + p for p in "abc"]
        assert redirected_to(session, BASE + "loop1") == [BASE + "loop2"]


def test_links_through_a_chain_count_for_its_end_in_link_analysis(engine):
    ids = add(
        engine,
        {"home": ("ok", 20, None), "reader": ("ok", 20, None), "a": moved("b"), "b": moved("home")},
    )
    with engine.begin() as conn:
        conn.execute(
            insert(Link),
            [
                {
                    "source_id": ids["reader"],
                    "target_url": BASE + "a",
                    "target_id": ids["a"],
                    "target_scheme": "gemini",
                    "label": "old address",
                    "position": 0,
                    "cross_capsule": False,
                    "first_seen_at": utcnow(),
                }
            ],
        )
        graph = load_graph(conn)
    nodes = {int(page_id): node for node, page_id in enumerate(graph.page_ids)}
    edge = numpy.flatnonzero(
        (graph.sources == nodes[ids["reader"]]) & (graph.targets == nodes[ids["home"]])
    )
    assert len(edge) == 1


def test_a_url_redirected_to_from_everywhere_lists_a_bounded_number(engine):
    many = {f"old{n}": moved("home") for n in range(MAX_REDIRECTED + 50)}
    add(engine, {"home": ("ok", 20, None), **many, "older": moved("old0")})
    with Session(engine) as session:
        found = redirected_to(session, BASE + "home")
    assert len(found) == MAX_REDIRECTED
    assert len(set(found)) == MAX_REDIRECTED


def test_a_link_to_a_temporary_redirect_counts_for_the_page_it_leads_to(engine):
    ids = add(
        engine,
        {
            "home": ("ok", 20, None),
            "reader": ("ok", 20, None),
            "for-now": ("redirect", 30, "home"),
            "nowhere": ("redirect", 30, "not-crawled"),  # its target is no page: no credit
        },
    )
    now = utcnow()
    with engine.begin() as conn:
        conn.execute(
            insert(Link),
            [
                {
                    "source_id": ids["reader"],
                    "target_url": BASE + path,
                    "target_id": ids[path],
                    "target_scheme": "gemini",
                    "label": path,
                    "position": position,
                    "cross_capsule": False,
                    "first_seen_at": now,
                }
                for position, path in enumerate(("for-now", "nowhere"))
            ],
        )
        graph = load_graph(conn)
    nodes = {int(page_id): node for node, page_id in enumerate(graph.page_ids)}
    assert sorted(nodes) == sorted([ids["home"], ids["reader"]])  # redirects are no nodes
    sink = len(graph.page_ids)
    from_reader = graph.sources == nodes[ids["reader"]]
    assert sorted(graph.targets[from_reader].tolist()) == [nodes[ids["home"]], sink]
