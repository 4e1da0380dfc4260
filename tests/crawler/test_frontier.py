"""The frontier in a real database: claims, leases, admission caps, recrawl intervals.

Runs on SQLite and, when ``SEXTANT_TEST_PG_URL`` is set, on PostgreSQL too (the claim is
the crawler's one piece of dialect-specific SQL).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, select, update

from crawler.admission import ADMITTED, EXCLUDED, OUTSIDE, Admission, load_exclusions
from crawler.frontier import FRONTIER, MAX_RECRAWL, MIN_RECRAWL, Frontier, recrawl_interval
from crawler.options import AllowedHosts, CrawlOptions, HostPattern
from crawler.seeds import enqueue_seeds, read_seeds_file
from crawler.url_rows import CapsuleIds, Enqueue, NewPage, enqueue, insert_pages
from sextant.errors import ConfigError
from sextant.store import FrontierEntry, Page, utcnow
from sextant.store.migrate import open_store
from sextant.urls import parse


def add_urls(store, urls, *, due=None, priority=0):
    """Pages with frontier rows, all due at ``due`` (default: a minute ago)."""
    due = due or utcnow() - timedelta(minutes=1)
    capsules = CapsuleIds()
    with store.begin() as conn:
        refs = insert_pages(conn, [NewPage(parse(url), 0) for url in urls], capsules, due)
        enqueue(
            conn,
            [Enqueue(ref.id, ref.capsule_id, 0, priority=priority) for ref in refs.values()],
            due,
        )
    return refs


def capsule_urls(host, count):
    return [f"gemini://{host}/page{i}" for i in range(count)]


def test_claim_leases_due_rows_with_their_capsules(store):
    add_urls(store, capsule_urls("a.test", 3))
    frontier = Frontier(store, "me")
    claim = frontier.claim(10)
    assert sorted(item.url for item in claim.items) == sorted(capsule_urls("a.test", 3))
    (capsule,) = claim.capsules.values()
    assert (capsule.host, capsule.port) == ("a.test", 1965)
    with store.connect() as conn:
        owners = conn.execute(select(FRONTIER.c.lease_owner, FRONTIER.c.leased_until)).all()
    assert {owner for owner, _ in owners} == {"me"}
    assert all(until > utcnow() for _, until in owners)
    # Leased rows are not handed out again, to us or anyone.
    assert frontier.claim(10).items == ()


def test_claim_caps_rows_per_capsule_so_the_window_stays_broad(store):
    add_urls(store, capsule_urls("big.test", 50))
    add_urls(store, capsule_urls("small.test", 2), due=utcnow() - timedelta(seconds=1))
    claim = Frontier(store, "me").claim(20, per_capsule=4)
    hosts = [claim.capsules[item.capsule_id].host for item in claim.items]
    assert hosts.count("big.test") == 4
    assert hosts.count("small.test") == 2


def test_claim_skips_excluded_capsules_and_rows_not_due(store):
    refs = add_urls(store, capsule_urls("a.test", 2))
    add_urls(store, capsule_urls("b.test", 2))
    add_urls(store, capsule_urls("later.test", 2), due=utcnow() + timedelta(hours=1))
    a_capsule = next(iter(refs.values())).capsule_id
    claim = Frontier(store, "me").claim(10, exclude={a_capsule})
    assert {claim.capsules[i.capsule_id].host for i in claim.items} == {"b.test"}


def test_claim_order_is_due_time_then_priority(store):
    now = utcnow()
    add_urls(store, ["gemini://x.test/late"], due=now - timedelta(seconds=10))
    add_urls(store, ["gemini://y.test/early"], due=now - timedelta(seconds=60))
    add_urls(store, ["gemini://z.test/seed"], due=now - timedelta(seconds=10), priority=-10)
    claim = Frontier(store, "me").claim(10)
    assert [item.url for item in claim.items] == [
        "gemini://y.test/early",
        "gemini://z.test/seed",
        "gemini://x.test/late",
    ]


def test_capsule_worked_on_by_another_owner_is_left_alone(store):
    add_urls(store, capsule_urls("shared.test", 6))
    add_urls(store, capsule_urls("other.test", 2))
    first = Frontier(store, "worker-1").claim(1, per_capsule=1)
    taken_host = first.capsules[first.items[0].capsule_id].host
    second = Frontier(store, "worker-2").claim(10)
    hosts = {second.capsules[i.capsule_id].host for i in second.items}
    # Politeness across processes: one capsule, one worker at a time.
    assert taken_host not in hosts
    assert hosts


def test_expired_leases_come_back_and_release_stale_clears_all(store):
    add_urls(store, capsule_urls("a.test", 2))
    dead = Frontier(store, "dead-worker", lease_seconds=60)
    assert len(dead.claim(10).items) == 2
    alive = Frontier(store, "alive")
    assert alive.claim(10).items == ()
    with store.begin() as conn:
        conn.execute(update(FRONTIER).values(leased_until=utcnow() - timedelta(seconds=1)))
    assert len(alive.claim(10).items) == 2
    assert alive.release_stale() == 2
    assert len(Frontier(store, "third").claim(10).items) == 2


def test_renew_release_and_release_all(store):
    add_urls(store, capsule_urls("a.test", 3))
    frontier = Frontier(store, "me", lease_seconds=5)
    items = frontier.claim(10).items
    with store.connect() as conn:
        before = conn.execute(select(FRONTIER.c.leased_until)).scalars().all()
    frontier.lease_seconds = 600
    assert frontier.renew() == 3
    with store.connect() as conn:
        after = conn.execute(select(FRONTIER.c.leased_until)).scalars().all()
    assert min(after) > max(before)
    assert Frontier(store, "other").release([items[0].id]) == 0  # not theirs to give
    assert frontier.release([items[0].id]) == 1
    # Still ours: we hold the capsule's other rows, so nobody else may work on it...
    assert Frontier(store, "other").claim(10).items == ()
    # ...but we may take the released row again.
    assert [item.id for item in frontier.claim(10).items] == [items[0].id]
    assert frontier.release_all() == 3
    assert len(Frontier(store, "other").claim(10).items) == 3
    assert frontier.size() == 3
    assert frontier.due_count() == 3


def test_concurrent_claims_never_hand_out_a_row_twice(store):
    add_urls(store, [url for n in range(20) for url in capsule_urls(f"c{n}.test", 5)])
    results: dict[str, list[int]] = {}

    def claim(owner):
        frontier = Frontier(store, owner)
        got: list[int] = []
        for _ in range(10):
            got += [item.id for item in frontier.claim(7, per_capsule=2).items]
        results[owner] = got

    threads = [threading.Thread(target=claim, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [row for rows in results.values() for row in rows]
    assert len(every) == len(set(every))
    assert len(every) > 0


def _claim_steps(path: Path, urls: int) -> int:
    """SQLite virtual-machine steps (in hundreds) of one 50-row claim on a frontier of
    ``urls`` due rows over 500 capsules: a count of work that the machine's load cannot
    change, unlike a time."""
    store = open_store(f"sqlite:///{path}")
    add_urls(store, [f"gemini://h{n % 500}.test/{n}" for n in range(urls)])
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    def count_steps(dbapi_connection, record, proxy) -> None:
        dbapi_connection.set_progress_handler(step, 100)

    event.listen(store, "checkout", count_steps)
    try:
        assert len(Frontier(store, "me").claim(50).items) == 50
    finally:
        event.remove(store, "checkout", count_steps)
        store.dispose()
    return steps


def test_claim_cost_does_not_grow_with_the_frontier(db_url, tmp_path):
    """Candidates come from a bounded prefix of the due index: a claim on 20,000 rows does
    the work of one on 2,000 (without the bound, 8 times as much). The time it takes on a
    million rows is printed by bench/bench_crawl.py."""
    if not db_url.startswith("sqlite"):
        pytest.skip("work counted with SQLite's progress handler")
    small = _claim_steps(tmp_path / "small.db", 2_000)
    large = _claim_steps(tmp_path / "large.db", 20_000)
    assert large < 1.2 * small, (small, large)


def test_recrawl_interval_halves_after_change_and_doubles_otherwise():
    assert recrawl_interval(None, changed=False) == MIN_RECRAWL
    assert recrawl_interval(timedelta(days=4), changed=True) == timedelta(days=2)
    assert recrawl_interval(timedelta(days=4), changed=False) == timedelta(days=8)
    assert recrawl_interval(timedelta(days=20), changed=False) == MAX_RECRAWL
    assert recrawl_interval(timedelta(days=1), changed=True) == MIN_RECRAWL


# --- admission ----------------------------------------------------------------------------


def admission(**options):
    opts = CrawlOptions(**options)
    return Admission(opts, load_exclusions(opts))


def test_host_patterns():
    allowed = AllowedHosts.parse(["*.example.org", "solo.test:1966", "[::1]"])
    assert allowed.allows("a.example.org", 1965)
    assert allowed.allows("deep.a.example.org", 1965)
    assert not allowed.allows("example.org", 1965)
    assert allowed.allows("solo.test", 1966)
    assert not allowed.allows("solo.test", 1965)
    assert allowed.allows("::1", 1965)
    assert AllowedHosts().allows("anything.test", 1)
    assert HostPattern.parse("BÜCHER.test").host == "xn--bcher-kva.test"
    for bad in ["", "*.", "a/b", "*x.org", "host:port"]:
        with pytest.raises(ConfigError):
            HostPattern.parse(bad)


def test_static_checks(tmp_path):
    rules = tmp_path / "exclude.txt"
    rules.write_text("gemini://a.test/private/ my diary\n")
    gate = admission(allow_hosts=AllowedHosts.parse(["a.test"]), max_depth=3, exclude_file=rules)
    assert gate.static(parse("gemini://a.test/x"), 3).kind == ADMITTED
    assert gate.static(parse("gemini://b.test/x"), 0).kind == OUTSIDE
    verdict = gate.static(parse("gemini://a.test/x"), 4)
    assert (verdict.kind, verdict.reason.split(":")[0]) == (EXCLUDED, "depth cap")
    verdict = gate.static(parse("gemini://a.test/private/today"), 0)
    assert verdict.kind == EXCLUDED
    assert "my diary" in verdict.reason
    verdict = gate.static(parse("gemini://a.test/a/b/a/b/a/b/a/b"), 0)
    assert verdict.kind == EXCLUDED
    assert "trap" in verdict.reason


def test_page_cap_counts_per_scope_and_pubnix_users_separately(store):
    gate = admission(max_pages_per_capsule=3)
    with store.begin() as conn:
        insert_pages(
            conn, [NewPage(parse("gemini://pub.test/~ann/old"), 0)], CapsuleIds(), utcnow()
        )
        ann = [gate.judge(conn, parse(f"gemini://pub.test/~ann/{n}"), 1).kind for n in range(4)]
        bob = [gate.judge(conn, parse(f"gemini://pub.test/~bob/{n}"), 1).kind for n in range(4)]
        host = [gate.judge(conn, parse(f"gemini://pub.test/{n}"), 1).kind for n in range(4)]
    # ann already had one page in the store.
    assert ann == [ADMITTED, ADMITTED, EXCLUDED, EXCLUDED]
    assert bob == [ADMITTED, ADMITTED, ADMITTED, EXCLUDED]
    assert host == bob


def test_query_cap_per_path(store):
    gate = admission(max_query_urls_per_path=2)
    with store.begin() as conn:
        kinds = [gate.judge(conn, parse(f"gemini://q.test/list?{n}"), 1).kind for n in range(3)]
        other = gate.judge(conn, parse("gemini://q.test/other?1"), 1).kind
        plain = gate.judge(conn, parse("gemini://q.test/list"), 1).kind
    assert kinds == [ADMITTED, ADMITTED, EXCLUDED]
    assert other == plain == ADMITTED


# --- seeds --------------------------------------------------------------------------------


def test_seeds_file_errors_name_the_line(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# comment\n\ngemini://A.test/\nhttps://web.test/\n")
    with pytest.raises(ConfigError, match=r"seeds.txt:4"):
        read_seeds_file(seeds)
    seeds.write_text("gemini://A.test/\n  gemini://b.test  \n")
    assert read_seeds_file(seeds) == ["gemini://a.test/", "gemini://b.test/"]
    with pytest.raises(ConfigError, match="does not exist"):
        read_seeds_file(tmp_path / "missing.txt")


def test_seeds_are_queued_once_and_never_refetched(store):
    gate = admission(allow_hosts=AllowedHosts.parse(["a.test"]))
    capsules = CapsuleIds()
    now = utcnow()
    seeds = ["gemini://a.test/", "gemini://b.test/", "gemini://a.test/"]
    with store.begin() as conn:
        first = enqueue_seeds(conn, seeds, gate, capsules, now)
    assert [(o.url, o.outcome.split(":")[0]) for o in first] == [
        ("gemini://a.test/", "queued"),
        ("gemini://b.test/", "outside"),
    ]
    with store.begin() as conn:
        again = enqueue_seeds(conn, seeds, gate, capsules, now)
        assert again[0].outcome == "already queued"
        conn.execute(update(Page.__table__).values(fetched_at=now, state="ok"))
        conn.execute(FrontierEntry.__table__.delete())
        assert enqueue_seeds(conn, seeds, gate, capsules, now)[0].outcome == "already crawled"
    with store.connect() as conn:
        pages = conn.execute(select(Page.url)).scalars().all()
    assert sorted(pages) == ["gemini://a.test/", "gemini://b.test/"]


def test_open_store_migrates_a_fresh_file(tmp_path: Path):
    engine = open_store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert Frontier(engine, "me").size() == 0
    engine.dispose()
