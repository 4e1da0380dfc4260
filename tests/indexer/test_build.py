"""Building the index: incremental runs follow the store, rebuilds swap in atomically."""

from __future__ import annotations

import gc
import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import select, update

from indexer import location
from indexer.location import IndexBusy, IndexMissing
from indexer.rank import RANK_FILE
from indexer.spelling import VOCABULARY_FILE
from sextant.store import Link, Page, Run, session_factory
from tests.indexer.conftest import Store
from tests.indexer.spaces import P

A = "gemini://a.example"
B = "gemini://b.example"


def small_space(store: Store) -> None:
    store.space.add(
        {
            f"{A}/": P("# A home\nWelcome. Gardening notes.\n=> /tomatoes.gmi Tomatoes"),
            f"{A}/tomatoes.gmi": P("# Tomatoes\nTomatoes need sun and daily water."),
            f"{B}/": P("# B home\nRecipes for soup."),
            f"{B}/peppers.gmi": P("# Peppers\nHot peppers dry well in autumn."),
        }
    )


def urls(store: Store, query: str) -> list[str]:
    with store.searcher() as searcher:
        return [hit.url for hit in searcher.search(query).hits]


def test_first_run_builds_everything_and_records_the_run(store: Store) -> None:
    small_space(store)
    report = store.index()
    assert report.mode == "full"
    assert report.indexed == report.documents == 4
    assert report.index_bytes > 0
    assert store.index_dir.is_symlink()
    generation = store.index_dir.resolve()
    for name in (RANK_FILE, VOCABULARY_FILE, location.STATE_FILE):
        assert (generation / name).exists(), name
    with session_factory(store.engine)() as session:
        run = session.scalars(select(Run).where(Run.kind == "index")).one()
    assert run.finished_at is not None
    assert json.loads(run.stats or "{}")["indexed"] == 4


def test_a_second_run_with_no_changes_indexes_nothing(store: Store) -> None:
    small_space(store)
    store.index()
    report = store.index()
    assert report.mode == "incremental"
    assert (report.indexed, report.deleted, report.documents) == (0, 0, 4)


def test_changed_page_is_reindexed_without_a_rebuild(store: Store) -> None:
    small_space(store)
    store.index()
    generation = store.index_dir.resolve()
    store.space.change(f"{B}/peppers.gmi", body="# Chillies\nChillies and paprika, smoked.")
    report = store.index()
    assert report.mode == "incremental"
    assert report.indexed == 1
    assert store.index_dir.resolve() == generation  # same directory: no rebuild
    assert urls(store, "paprika") == [f"{B}/peppers.gmi"]
    assert urls(store, "autumn") == []
    assert report.documents == 4


def test_an_open_searcher_sees_every_index_run(store: Store) -> None:
    """The searcher looks at the index again only when the state file that every run
    rewrites has changed: each run must still show up in the next search."""
    small_space(store)
    store.index()
    with store.searcher() as searcher:
        assert searcher.search("paprika").total == 0
        store.space.change(f"{B}/peppers.gmi", body="# Chillies\nChillies and paprika.")
        store.index()
        assert [hit.url for hit in searcher.search("paprika").hits] == [f"{B}/peppers.gmi"]
        store.space.change(f"{B}/peppers.gmi", body="# Chillies\nSmoked, not sweet.")
        store.index()
        assert searcher.search("paprika").total == 0
        store.index(rebuild=True)
        assert searcher.search("smoked").total == 1


@pytest.mark.parametrize("state", ["gone", "excluded", "disallowed", "error", "redirect"])
def test_pages_leaving_the_indexable_states_are_removed(store: Store, state: str) -> None:
    small_space(store)
    store.index()
    store.space.change(f"{B}/peppers.gmi", state=state)
    report = store.index()
    assert report.deleted == 1
    assert report.documents == 3
    assert urls(store, "peppers") == []


def test_rows_deleted_from_the_store_are_removed(store: Store) -> None:
    small_space(store)
    store.index()
    store.space.delete(f"{B}/peppers.gmi")
    report = store.index()
    assert (report.deleted, report.documents) == (1, 3)
    assert urls(store, "peppers") == []


def test_state_change_without_a_timestamp_is_caught_by_the_id_check(store: Store) -> None:
    small_space(store)
    store.index()
    with session_factory(store.engine)() as session, session.begin():
        session.execute(update(Page).where(Page.url == f"{B}/peppers.gmi").values(state="gone"))
    assert store.index().deleted == 1
    assert urls(store, "peppers") == []


def test_new_inbound_link_updates_anchor_text_and_counts(store: Store) -> None:
    small_space(store)
    store.index()
    assert urls(store, "chilli") == []
    # Another capsule starts linking to the peppers page with words the page never uses.
    store.space.add(
        {"gemini://c.example/": P("# C\n=> gemini://b.example/peppers.gmi Chilli guide")}
    )
    report = store.index()
    assert report.mode == "incremental"
    assert report.indexed == 2  # the new page and the target whose inbound links changed
    with store.searcher() as searcher:
        hits = searcher.search("chilli").hits
        # The linking page has the words too, but the target is what they are about.
        assert [hit.url for hit in hits] == [f"{B}/peppers.gmi", "gemini://c.example/"]
        assert hits[0].inbound == 1
    # The link goes away again: so do the anchor text and the count.
    store.space.change("gemini://c.example/", body="# C\nNothing to see.")
    store.index()
    assert urls(store, "chilli") == []


def test_link_scores_are_recomputed_on_every_run(store: Store) -> None:
    small_space(store)
    store.index()
    with store.searcher() as searcher:
        before = searcher.search("peppers").hits[0].rank
        linkers = {
            f"gemini://fan{i}.example/": P(f"# Fan {i}\n=> gemini://b.example/peppers.gmi Peppers")
            for i in range(4)
        }
        store.space.add(linkers)
        store.index()
        after = searcher.search("peppers").hits[0].rank
    assert after > before


def test_input_pages_are_found_by_prompt_and_type(store: Store) -> None:
    store.space.add({f"{A}/ask": P(None, state="input", meta="What is your favourite colour?")})
    store.index()
    with store.searcher() as searcher:
        hit = searcher.search("favourite colour").hits[0]
        assert hit.url == f"{A}/ask"
        assert hit.title == "What is your favourite colour?"
        assert "**colour**" in hit.snippet
        assert [h.url for h in searcher.search("type:input").hits] == [f"{A}/ask"]


def test_rebuild_swaps_atomically_while_a_searcher_is_open(store: Store) -> None:
    small_space(store)
    store.index()
    first = store.index_dir.resolve()
    with store.searcher() as searcher:
        assert searcher.search("tomatoes").total == 2
        store.space.change(f"{A}/tomatoes.gmi", body="# Courgettes\nCourgettes grow fast.")
        # Queries keep being answered from a complete index while the rebuild runs.
        stop = threading.Event()
        answers: list[int] = []
        errors: list[BaseException] = []

        def keep_searching() -> None:
            while not stop.is_set():
                try:
                    answers.append(searcher.search("gardening OR courgettes").total)
                except BaseException as exc:
                    errors.append(exc)
                    return

        thread = threading.Thread(target=keep_searching)
        thread.start()
        try:
            report = store.index(rebuild=True)
        finally:
            stop.set()
            thread.join()
        assert errors == []
        assert answers
        assert report.mode == "full"
        second = store.index_dir.resolve()
        assert second != first
        assert first.exists()  # kept for queries still running on it
        assert [hit.url for hit in searcher.search("courgettes").hits] == [f"{A}/tomatoes.gmi"]
    # A further rebuild removes the generation before last.
    store.index(rebuild=True)
    assert not first.exists()
    assert second.exists()


def test_an_interrupted_rebuild_leaves_the_live_index_alone(store: Store) -> None:
    small_space(store)
    store.index()
    live = store.index_dir.resolve()
    siblings_before = set(store.index_dir.parent.iterdir())

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C in the middle of the build

    with pytest.raises(KeyboardInterrupt):
        store.index(rebuild=True, progress=interrupt)
    assert store.index_dir.resolve() == live
    assert set(store.index_dir.parent.iterdir()) == siblings_before  # no half-built leftovers
    assert urls(store, "tomatoes")


def test_a_real_directory_at_the_index_path_is_replaced_by_the_link(store: Store) -> None:
    small_space(store)
    store.index_dir.mkdir(parents=True)
    (store.index_dir / "stray").write_text("left by hand")
    store.index()
    assert store.index_dir.is_symlink()
    assert urls(store, "tomatoes")


def test_a_second_writer_is_refused(store: Store) -> None:
    small_space(store)
    store.index()
    with location.exclusive(store.index_dir), pytest.raises(IndexBusy, match="another"):
        store.index()


def test_searching_without_an_index_says_what_to_do(store: Store) -> None:
    with store.searcher() as searcher, pytest.raises(IndexMissing, match="sextant index"):
        searcher.search("anything")


def test_parallel_build_matches_the_single_process_build(store: Store, tmp_path: Path) -> None:
    pages = {
        f"gemini://p{i % 7}.example/{i}.gmi": P(
            f"# Page {i}\nWords {i} alpha beta.\n"
            f"=> gemini://p{(i + 1) % 7}.example/{i + 1}.gmi next"
        )
        for i in range(60)
    }
    store.space.add(pages)
    serial = store.index(procs=1)
    with store.searcher() as searcher:
        expected = [(hit.url, round(hit.score, 6)) for hit in searcher.search("alpha").hits]
        expected_total = searcher.search("alpha").total
    parallel = store.index(rebuild=True, procs=2)
    assert parallel.documents == serial.documents == 60
    assert gc.get_freeze_count() == 0  # frozen for the fork only: the parent collects again
    with store.searcher() as searcher:
        results = searcher.search("alpha")
        assert results.total == expected_total
        assert [(hit.url, round(hit.score, 6)) for hit in results.hits] == expected
        assert searcher.search('"words 17 alpha"').hits[0].url == "gemini://p3.example/17.gmi"
    assert not (store.index_dir.resolve() / "MAIN.tmp").exists()


def test_links_from_other_schemes_and_unknown_pages_do_not_break_the_graph(store: Store) -> None:
    store.space.add(
        {
            f"{A}/": P(
                "# A\n=> https://example.com/ web\n=> gopher://g.example/ hole\n"
                "=> gemini://nowhere.example/ missing\n=> /self.gmi me"
            ),
            f"{A}/self.gmi": P("# Self\n=> /self.gmi myself"),
        }
    )
    store.index()
    with session_factory(store.engine)() as session:
        assert session.scalar(select(Link).where(Link.target_id.is_(None)).limit(1))
    assert urls(store, "self")[0] == f"{A}/self.gmi"


def test_an_index_of_another_version_is_rebuilt_and_refused_until_then(store: Store) -> None:
    small_space(store)
    store.index()
    generation = store.index_dir.resolve()
    state = json.loads((generation / location.STATE_FILE).read_text())
    state["version"] = location.STATE_VERSION - 1
    (generation / location.STATE_FILE).write_text(json.dumps(state))
    with store.searcher() as searcher, pytest.raises(IndexMissing, match="--rebuild"):
        searcher.search("tomatoes")
    assert store.index().mode == "full"
    assert urls(store, "tomatoes")


def test_size_filter_follows_changes_deletions_and_segments(store: Store) -> None:
    store.space.add(
        {
            f"{A}/big.gmi": P("# Big\nLarge page.", size=50_000),
            f"{A}/small.gmi": P("# Small\nSmall page.", size=100),
            f"{B}/big.gmi": P("# Big too\nAnother large page.", size=60_000),
        }
    )
    store.index(procs=2)  # two segments
    assert set(urls(store, "size:>10K")) == {f"{A}/big.gmi", f"{B}/big.gmi"}
    assert urls(store, "size:>10K another") == [f"{B}/big.gmi"]
    store.space.change(f"{B}/big.gmi", size=10)
    store.space.change(f"{A}/big.gmi", state="gone")
    store.index()
    assert urls(store, "size:>10K") == []
    assert set(urls(store, "size:<1K")) == {f"{A}/small.gmi", f"{B}/big.gmi"}


def test_the_indexer_reads_the_index_without_mapping_it(store: Store) -> None:
    # Whoosh maps whole segments and read pages stay in the process's RSS: 300-460 MB of an
    # incremental run's 706 MB peak at 20,000 pages, growing with the index.
    small_space(store)
    store.index()
    generation = store.index_dir.resolve()
    segments = [path.name for path in generation.glob("*.seg")]
    assert segments
    ix = location.open_for_writing(generation)
    with ix.searcher() as searcher:
        assert {int(term) for term in searcher.reader().field_terms("pid")}
        assert searcher.document_number(pid="1") is not None
        maps = Path("/proc/self/maps").read_text()
        assert not [name for name in segments if name in maps]
    with store.searcher() as searcher:  # searchers keep their maps, for speed
        assert searcher.search("tomatoes").hits
