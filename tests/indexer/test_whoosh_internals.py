"""The Whoosh internals the indexer relies on, named and checked against the installed Whoosh.

The indexer writes Whoosh's posting blocks itself, reads them back without Whoosh's reader,
and subclasses its segment writer, posting pool, matchers and scorer, and reads column files
in place (see indexer/writer.py, indexer/vector.py, indexer/pairfilter.py and the others
below). None of that is Whoosh's documented API, so
pyproject.toml pins whoosh-reloaded exactly and :data:`INTERNALS` lists every private
attribute, private function and undocumented module-level object each indexer module uses.
After an upgrade these tests say which of them are gone and who uses them, instead of a
search failing with an ``AttributeError`` (or, worse, an override silently never called).

Attributes Whoosh sets in ``__init__`` are checked on real instances, built from the
package's known-answer index (:func:`tests.indexer.conftest.known`) or a fresh one.
:func:`test_every_private_name_the_indexer_uses_is_listed` keeps the list complete: a new
``_name`` used in indexer/ must be listed here or be one the project defines itself.

indexer/query.py, querylang.py, snippets.py and the rest use Whoosh's documented API only.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import io
import json
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import whoosh
from whoosh import formats, matching, scoring
from whoosh import index as whoosh_index
from whoosh.codec import whoosh3
from whoosh.filedb import filetables
from whoosh.filedb.structfile import StructFile
from whoosh.matching.wrappers import RequireMatcher
from whoosh.writing import SegmentWriter

from indexer import location
from indexer.location import IndexMissing
from indexer.query import Searcher
from indexer.schema import PAIRS_COLUMN, build_schema
from tests.indexer.conftest import Store
from tests.indexer.spaces import P

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = whoosh.versionstring()


@dataclass(frozen=True, slots=True)
class Internal:
    """One thing an indexer module relies on. ``kind``: ``module`` (``name`` is an object of
    module ``owner``), ``class`` (an attribute of class ``owner``), ``instance`` (set on
    instances of ``owner``) or ``parameter`` (of the callable ``owner``)."""

    user: str
    owner: str
    name: str
    kind: str = "class"

    @property
    def label(self) -> str:
        if self.kind == "parameter":
            return f"the parameter `{self.name}` of {self.owner}"
        return f"{self.owner}.{self.name}"


def _module(user: str, module: str, *names: str) -> list[Internal]:
    return [Internal(user, module, name, "module") for name in names]


def _class(user: str, owner: str, *names: str) -> list[Internal]:
    return [Internal(user, owner, name, "class") for name in names]


def _instance(user: str, owner: str, *names: str) -> list[Internal]:
    return [Internal(user, owner, name, "instance") for name in names]


def _parameters(user: str, owner: str, *names: str) -> list[Internal]:
    return [Internal(user, owner, name, "parameter") for name in names]


W3 = "whoosh.codec.whoosh3"
LEAF_MATCHER = f"{W3}.W3LeafMatcher"
POSTINGS_WRITER = f"{W3}.W3PostingsWriter"
SEGMENT_READER = "whoosh.reading.SegmentReader"
SEGMENT_WRITER = "whoosh.writing.SegmentWriter"
POOL = "whoosh.writing.PostingPool"
ORDERED_HASH = "whoosh.filedb.filetables.OrderedHashWriter"
STRUCT_FILE = "whoosh.filedb.structfile.StructFile"

INTERNALS: list[Internal] = [
    # indexer/postings.py: reads W3 posting blocks from the segment's buffer itself, and
    # opens Whoosh's matcher from the term table for inlined postings.
    *_module("indexer/postings.py", W3, "W3TermsReader", "WHOOSH3_HEADER_MAGIC"),
    *_module("indexer/postings.py", "whoosh.matching.wrappers", "FilterMatcher", "WrappingMatcher"),
    *_instance("indexer/postings.py", SEGMENT_READER, "_terms"),
    *_instance("indexer/postings.py", f"{W3}.W3TermsReader", "_codec", "_postfile"),
    *_instance("indexer/postings.py", "whoosh.filedb.structfile.BufferFile", "_buf"),
    *_parameters("indexer/postings.py", f"{W3}.W3Codec.postings_reader", "term"),
    *_instance("indexer/postings.py", "whoosh.matching.wrappers.WrappingMatcher", "child"),
    # indexer/vector.py: positions from the blocks holding phrase candidates.
    *_module("indexer/vector.py", W3, "W3LeafMatcher"),
    *_class("indexer/vector.py", LEAF_MATCHER, "_read_data", "_goto"),
    *_instance("indexer/vector.py", LEAF_MATCHER, "_data"),
    *_instance("indexer/vector.py", SEGMENT_READER, "deleted_docs_set"),
    *_instance("indexer/vector.py", "whoosh.scoring.BM25F", "_field_B"),
    # indexer/writer.py: a W3 postings writer with its own block layout, the codec making
    # it, and a segment writer that flushes through them and the pool of indexer/pool.py.
    *_module("indexer/writer.py", W3, "W3PostingsWriter", "W3Codec", "W3FieldWriter"),
    *_module("indexer/writer.py", W3, "WHOOSH3_HEADER_MAGIC", "LENGTHS_COLUMN", "_lenfield"),
    *_module("indexer/writer.py", "whoosh.util.numeric", "byte_to_length", "length_to_byte"),
    *_class("indexer/writer.py", POSTINGS_WRITER, "add_posting", "_write_block"),
    *_class("indexer/writer.py", POSTINGS_WRITER, "_new_block", "_mini_values"),
    *_parameters("indexer/writer.py", f"{POSTINGS_WRITER}.add_posting", "length"),
    *_parameters("indexer/writer.py", f"{POSTINGS_WRITER}._write_block", "last"),
    *_instance(
        "indexer/writer.py",
        POSTINGS_WRITER,
        "_ids",
        "_weights",
        "_values",
        "_blocklimit",
        "_maxweight",
        "_minlength",
        "_maxlength",
        "_blockcount",
        "_postfile",
        "_terminfo",
        "_compression",
    ),
    *_class("indexer/writer.py", f"{W3}.W3TermInfo", "add_block"),
    *_class("indexer/writer.py", f"{W3}.W3Codec", "postings_writer"),
    *_parameters("indexer/writer.py", f"{W3}.W3Codec.postings_writer", "byteids"),
    *_instance("indexer/writer.py", f"{W3}.W3Codec", "_blocklimit", "_compression", "_inlinelimit"),
    *_class("indexer/writer.py", f"{W3}.W3PerDocReader", "_cached_reader", "doc_field_length"),
    *_class(
        "indexer/writer.py",
        f"{W3}.W3FieldWriter",
        "add_postings",
        "start_field",
        "start_term",
        "finish_term",
        "finish_field",
    ),
    *_instance("indexer/writer.py", f"{W3}.W3FieldWriter", "_tindex", "_postwriter"),
    # ... its files rewrapped to keep their own position.
    *_class("indexer/writer.py", f"{W3}.W3FieldWriter", "_create_file"),
    *_module("indexer/writer.py", "whoosh.filedb.structfile", "StructFile"),
    *_class("indexer/writer.py", STRUCT_FILE, "write_array"),
    *_instance("indexer/writer.py", STRUCT_FILE, "file", "_name", "onclose"),
    # indexer/termtable.py: Whoosh's term-table writer with its pending entries in arrays.
    *_module("indexer/termtable.py", "whoosh.filedb", "filetables"),
    *_module("indexer/termtable.py", "whoosh.filedb.filetables", "OrderedHashWriter", "_lengths"),
    *_class("indexer/termtable.py", ORDERED_HASH, "add", "_write_hashes", "close"),
    *_instance(
        "indexer/termtable.py",
        ORDERED_HASH,
        "dbfile",
        "hashfn",
        "buckets",
        "directory",
        "index",
        "lastkey",
        "extras",
    ),
    # indexer/pool.py: a posting pool writing its own runs in Whoosh's temporary storage.
    *_module("indexer/pool.py", "whoosh.writing", "PostingPool"),
    *_class("indexer/pool.py", POOL, "_new_run", "_add_run", "_open_run", "_remove_run"),
    *_class("indexer/pool.py", POOL, "add", "save", "iter_postings", "cleanup"),
    *_parameters("indexer/pool.py", f"{POOL}.__init__", "limitmb"),
    *_instance("indexer/pool.py", POOL, "runs", "fieldnames"),
    *_class("indexer/writer.py", SEGMENT_WRITER, "_flush_segment", "per_document_reader"),
    # ... and its own add_document, which does what Whoosh's does through these.
    *_class(
        "indexer/writer.py",
        SEGMENT_WRITER,
        "add_document",
        "_check_state",
        "_check_fields",
        "_doc_boost",
        "_field_boost",
    ),
    *_instance("indexer/writer.py", SEGMENT_WRITER, "docnum", "_added"),
    *_parameters("indexer/writer.py", f"{SEGMENT_WRITER}.__init__", "_lk", "limitmb", "codec"),
    *_instance(
        "indexer/writer.py",
        SEGMENT_WRITER,
        "_tempstorage",
        "newsegment",
        "perdocwriter",
        "fieldwriter",
        "pool",
    ),
    # indexer/merging.py: a merge policy reading the segments it merges, as Whoosh's do.
    *_module("indexer/merging.py", "whoosh.reading", "SegmentReader"),
    # indexer/location.py: the indexer opens the index through a storage without memory maps.
    *_module("indexer/location.py", "whoosh.filedb.filestore", "FileStorage"),
    *_parameters(
        "indexer/location.py", "whoosh.filedb.filestore.FileStorage.__init__", "supports_mmap"
    ),
    # indexer/build.py: workers write uncommitted segments; the parent commits them in one TOC.
    *_class("indexer/build.py", SEGMENT_WRITER, "_finalize_segment", "_close_segment"),
    *_class("indexer/build.py", "whoosh.index.FileIndex", "_read_toc"),
    *_module("indexer/build.py", "whoosh.index", "TOC"),
    *_class("indexer/build.py", "whoosh.index.TOC", "write"),
    *_instance("indexer/build.py", "whoosh.index.TOC", "schema", "segments", "generation"),
    *_instance("indexer/build.py", "whoosh.index.FileIndex", "storage", "indexname"),
    # indexer/weighting.py: field lengths read from the segment's length column.
    *_instance("indexer/weighting.py", SEGMENT_READER, "_perdoc"),
    *_class("indexer/weighting.py", f"{W3}.W3PerDocReader", "_cached_reader"),
    *_module("indexer/weighting.py", W3, "_lenfield", "LENGTHS_COLUMN"),
    *_module("indexer/weighting.py", "whoosh.util.numeric", "byte_to_length"),
    *_instance("indexer/weighting.py", "whoosh.scoring.BM25FScorer", "dfl"),
    # indexer/columnread.py: a numeric column's bytes read in one call.
    *_instance(
        "indexer/columnread.py",
        "whoosh.columns.NumericColumn.Reader",
        "_doccount",
        "_reverse",
        "_count",
        "_dbfile",
        "_basepos",
        "_fixedlen",
        "_typecode",
        "_default",
    ),
    # indexer/sizefilter.py: a query node and a list matcher with a binary-search skip_to.
    *_module("indexer/sizefilter.py", "whoosh.query.qcore", "Query"),
    *_instance("indexer/sizefilter.py", "whoosh.matching.ListMatcher", "_ids", "_i"),
    *_parameters(
        "indexer/sizefilter.py", "whoosh.matching.ListMatcher.__init__", "position", "all_weights"
    ),
    *_instance("indexer/sizefilter.py", SEGMENT_READER, "deleted_docs_set"),
    # indexer/require.py: the fixed RequireMatcher realigns its inner intersection.
    *_module("indexer/require.py", "whoosh.matching.wrappers", "RequireMatcher"),
    *_instance("indexer/require.py", "whoosh.matching.wrappers.RequireMatcher", "a", "b", "child"),
    *_class("indexer/require.py", "whoosh.matching.binary.IntersectionMatcher", "_find_next"),
    # indexer/spelling.py: Levenshtein automata walked over our sorted vocabulary.
    *_module("indexer/spelling.py", "whoosh.automata.fsa", "find_all_matches"),
    *_module("indexer/spelling.py", "whoosh.automata.lev", "levenshtein_automaton"),
    *_class("indexer/spelling.py", "whoosh.automata.fsa.NFA", "to_dfa"),
    # indexer/analysis.py: Whoosh's Snowball stemmers, without its analyzer pipeline.
    *_module("indexer/analysis.py", "whoosh.lang", "stemmer_for_language"),
    # indexer/schema.py: field types set up by hand, posting values encoded by hand.
    *_module("indexer/schema.py", "whoosh.formats", "pack_uint", "Format"),
    # ... and a format without values (Weights): the writer keys on its size of 0.
    *_class("indexer/schema.py", "whoosh.formats.Format", "posting_size"),
    *_class("indexer/schema.py", "whoosh.formats.Format", "word_values", "fixed_value_size"),
    *_class(
        "indexer/schema.py",
        "whoosh.fields.FieldType",
        "format",
        "analyzer",
        "scorable",
        "stored",
        "unique",
        "vector",
        "column_type",
        "index",
        "self_parsing",
    ),
    # indexer/pairfilter.py: a segment's pair filters as one array over Whoosh's mapped file.
    *_instance(
        "indexer/pairfilter.py",
        "whoosh.columns.FixedBytesColumn.Reader",
        "_count",
        "_dbfile",
        "_basepos",
    ),
    *_instance("indexer/pairfilter.py", "whoosh.filedb.structfile.BufferFile", "_buf"),
    # indexer/mapped.py: the file class compound storage opens its files as, replaced.
    *_module("indexer/mapped.py", "whoosh.filedb", "compound"),
    *_module("indexer/mapped.py", "whoosh.filedb.compound", "BufferFile"),
    *_module("indexer/mapped.py", "whoosh.filedb.structfile", "BufferFile"),
    *_instance("indexer/mapped.py", "whoosh.filedb.structfile.BufferFile", "_buf", "_name"),
]


def _resolve(dotted: str) -> Any:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(dotted)


# --- real instances, for attributes set in __init__ ----------------------------------------


def _first_leaf(reader: Any) -> Any:
    return reader if reader.is_atomic() else next(iter(reader.leaf_readers()))[0]


@pytest.fixture(scope="module")
def instances(
    known: Searcher, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Callable[[], Any]]]:
    """Ways to get a real instance of each class whose instance attributes are checked,
    through public calls where Whoosh has them (so that one missing internal does not hide
    the others)."""
    fresh = whoosh_index.create_in(str(tmp_path_factory.mktemp("fresh")), build_schema())
    writers: list[SegmentWriter] = []

    @functools.cache
    def segment_writer() -> SegmentWriter:  # one: it holds the fresh index's write lock
        writers.append(SegmentWriter(fresh))
        return writers[-1]

    with known._use_snapshot() as snapshot:
        searcher = snapshot.searcher
        leaf = _first_leaf(searcher.reader())
        storage = snapshot.index.storage
        codec = whoosh3.W3Codec()
        fieldname = "text"
        term = next(iter(leaf.lexicon(fieldname)))

        def terms_reader() -> Any:
            segment = leaf.segment()
            files = segment.open_compound_file(storage) if segment.is_compound() else storage
            return codec.terms_reader(files, segment)

        def leaf_matcher() -> Any:
            matcher = leaf.postings(fieldname, term)
            return matcher.child if isinstance(matcher, matching.WrappingMatcher) else matcher

        def postings_writer() -> Any:
            writer = codec.postings_writer(StructFile(io.BytesIO()))
            writer.start_postings(formats.Frequency(), whoosh3.W3TermInfo())
            return writer

        def require_matcher() -> Any:
            return RequireMatcher(matching.ListMatcher([1, 2]), matching.ListMatcher([2]))

        yield {
            SEGMENT_READER: lambda: leaf,
            f"{W3}.W3TermsReader": terms_reader,
            LEAF_MATCHER: leaf_matcher,
            POSTINGS_WRITER: postings_writer,
            f"{W3}.W3Codec": lambda: codec,
            "whoosh.matching.wrappers.WrappingMatcher": require_matcher,
            "whoosh.matching.wrappers.RequireMatcher": require_matcher,
            "whoosh.scoring.BM25F": scoring.BM25F,
            "whoosh.scoring.BM25FScorer": lambda: scoring.BM25F().scorer(searcher, fieldname, term),
            "whoosh.columns.NumericColumn.Reader": lambda: leaf.column_reader(
                "key", translate=False
            ),
            "whoosh.columns.FixedBytesColumn.Reader": lambda: leaf.column_reader(
                PAIRS_COLUMN, translate=False
            ),
            # What a segment's column file is when Whoosh maps it (the fast path).
            "whoosh.filedb.structfile.BufferFile": lambda: (
                leaf.column_reader(PAIRS_COLUMN, translate=False)._dbfile
            ),
            "whoosh.matching.ListMatcher": lambda: matching.ListMatcher([1, 2, 3]),
            SEGMENT_WRITER: segment_writer,
            POOL: lambda: segment_writer().pool,
            f"{W3}.W3FieldWriter": lambda: segment_writer().fieldwriter,
            ORDERED_HASH: lambda: filetables.OrderedHashWriter(StructFile(io.BytesIO())),
            STRUCT_FILE: lambda: StructFile(io.BytesIO()),
            "whoosh.index.TOC": lambda: whoosh_index.TOC.read(fresh.storage, fresh.indexname),
            "whoosh.index.FileIndex": lambda: fresh,
        }
    for writer in writers:
        writer.cancel()


def _message(internal: Internal) -> str:
    return (
        f"{internal.user} relies on {internal.label}, which whoosh-reloaded {INSTALLED} "
        "no longer has: pin the version this was written for (see pyproject.toml) or port "
        "the code"
    )


@pytest.mark.parametrize(
    "internal", INTERNALS, ids=[f"{i.user}:{i.owner}.{i.name}" for i in INTERNALS]
)
def test_whoosh_still_has_what_the_indexer_relies_on(
    internal: Internal, instances: dict[str, Callable[[], Any]]
) -> None:
    try:
        owner = _resolve(internal.owner)
    except (ImportError, AttributeError):
        pytest.fail(f"{_message(internal)} ({internal.owner} itself is gone)")
    if internal.kind == "parameter":
        present = internal.name in inspect.signature(owner).parameters
    elif internal.kind == "instance":
        assert internal.owner in instances, f"no way to build a {internal.owner} to check"
        try:
            instance = instances[internal.owner]()
        except Exception as exc:  # whatever broke building it, report what was checked
            pytest.fail(f"{_message(internal)} (could not build one to check: {exc!r})")
        assert isinstance(instance, owner), f"built a {type(instance)}, not a {internal.owner}"
        present = hasattr(instance, internal.name)
    else:
        present = hasattr(owner, internal.name)
    assert present, _message(internal)


def test_the_installed_whoosh_is_the_pinned_one() -> None:
    """The pin in pyproject.toml is the release these internals were checked against."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pins = [dep for dep in project["project"]["dependencies"] if dep.startswith("whoosh")]
    assert pins == [f"whoosh-reloaded=={INSTALLED}"], (
        f"pyproject.toml says {pins}, the installed Whoosh is {INSTALLED}: the indexer relies "
        "on Whoosh internals, so pin exactly the release this code was written for"
    )


def test_the_writers_temporary_directory_is_where_the_build_removes_it(tmp_path: Path) -> None:
    """indexer/build.py removes ``<indexname>.tmp`` after the workers' writers, which all
    share it and never remove it themselves."""
    ix = whoosh_index.create_in(str(tmp_path), build_schema())
    writer = SegmentWriter(ix)
    try:
        assert Path(writer._tempstorage.folder) == tmp_path / f"{ix.indexname}.tmp"
    finally:
        writer.cancel()


# --- the list stays complete ---------------------------------------------------------------

#: What the indexer imports from Whoosh's documented API; everything else it imports or
#: reaches through a Whoosh module must be in INTERNALS.
DOCUMENTED = {
    "whoosh",
    "whoosh.versionstring",
    "whoosh.query",
    "whoosh.index",
    "whoosh.index.FileIndex",
    "whoosh.index.create_in",
    "whoosh.index.open_dir",
    "whoosh.reading.TermNotFound",
    "whoosh.searching.Searcher",
    "whoosh.fields",
    "whoosh.formats",
    "whoosh.columns",
    "whoosh.scoring",
    "whoosh.matching",
    "whoosh.codec.whoosh3",
    "whoosh.matching.wrappers",
    "whoosh.writing.SegmentWriter",
    "whoosh.columns.NumericColumn",
    "whoosh.scoring.BM25F",
    "whoosh.scoring.WeightLengthScorer",
    "whoosh.matching.ListMatcher",
    "whoosh.matching.NullMatcher",
    "whoosh.matching.ReadTooFar",
}
DOCUMENTED_MODULE_OBJECTS = {
    "whoosh.fields": {"FieldType", "Schema", "ID", "STORED", "COLUMN"},
    "whoosh.formats": {"Positions", "Frequency", "Existence"},
    "whoosh.columns": {"NumericColumn", "VarBytesColumn", "FixedBytesColumn"},
}


def _indexer_modules() -> list[Path]:
    return sorted((ROOT / "indexer").glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _names_used(tree: ast.AST) -> set[str]:
    """Private attribute names read or written, including through getattr and hasattr."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            used.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            used.add(node.args[1].value)
    return used


def _names_defined(tree: ast.AST) -> set[str]:
    """Private names the project defines itself: functions, methods, ``self._x`` attributes
    it assigns, ``__slots__`` entries, module and class level names."""
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                elif (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    # Assigning Whoosh's own fields (the postings writer's running maxima)
                    # does not make them ours: only first assignments in __init__ count.
                    and _in_init(tree, node)
                ):
                    defined.add(target.attr)
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                defined.update(
                    elt.value
                    for elt in ast.walk(node.value)
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
                )
    return defined


def _in_init(tree: ast.AST, target: ast.AST) -> bool:
    return any(
        isinstance(node, ast.FunctionDef)
        and node.name == "__init__"
        and any(child is target for child in ast.walk(node))
        for node in ast.walk(tree)
    )


def test_every_private_name_the_indexer_uses_is_listed() -> None:
    """A private name used in indexer/ is either the project's own or a listed internal, so
    nobody adds a new reliance on Whoosh's internals without it being checked here. (A name
    the project also defines could still hide a Whoosh one: the list was made by reading.)"""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in _indexer_modules()}
    ours = set().union(*(_names_defined(tree) for tree in trees.values()))
    listed = {internal.name for internal in INTERNALS}
    unexplained = {
        f"{path.relative_to(ROOT)}: {name}"
        for path, tree in trees.items()
        for name in _names_used(tree) - ours - listed
    }
    assert not unexplained, (
        "private names used in indexer/ that the project does not define and "
        f"tests/indexer/test_whoosh_internals.py does not list: {sorted(unexplained)}"
    )


def _whoosh_references(tree: ast.AST) -> set[str]:
    """Dotted names the module takes from Whoosh: its imports, and attributes of imported
    Whoosh modules (``whoosh3.W3LeafMatcher``)."""
    aliases: dict[str, str] = {}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("whoosh"):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                found.add(dotted)
                aliases[alias.asname or alias.name] = dotted
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("whoosh"):
                    found.add(alias.name)
                    aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and inspect.ismodule(_resolve(aliases[node.value.id]))
        ):
            found.add(f"{aliases[node.value.id]}.{node.attr}")
    return found


def _documented(dotted: str) -> bool:
    if dotted in DOCUMENTED:
        return True
    module, _, name = dotted.rpartition(".")
    if module == "whoosh.query":  # the query classes, documented as whoosh.query.X
        return not _private(name)
    return name in DOCUMENTED_MODULE_OBJECTS.get(module, set())


def test_every_undocumented_whoosh_object_the_indexer_uses_is_listed() -> None:
    listed = {f"{i.owner}.{i.name}" for i in INTERNALS if i.kind == "module"}
    unexplained = {
        f"{path.relative_to(ROOT)}: {dotted}"
        for path in _indexer_modules()
        for dotted in _whoosh_references(ast.parse(path.read_text(encoding="utf-8")))
        if not _documented(dotted) and dotted not in listed
    }
    assert not unexplained, (
        "undocumented Whoosh objects used in indexer/ that "
        f"tests/indexer/test_whoosh_internals.py does not list: {sorted(unexplained)}"
    )


# --- an index written by another Whoosh -----------------------------------------------------


def _built_with_another_whoosh(store: Store) -> Path:
    store.space.add(
        {
            "gemini://a.example/": P("# Home\nTomatoes and peppers."),
            "gemini://a.example/soup.gmi": P("# Soup\nTomato soup recipes."),
        }
    )
    store.index()
    generation = store.index_dir.resolve()
    state = json.loads((generation / location.STATE_FILE).read_text(encoding="utf-8"))
    assert state["whoosh"] == INSTALLED
    state["whoosh"] = "2.7.4"
    (generation / location.STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    return generation


def test_an_index_built_with_another_whoosh_is_refused_with_both_versions(store: Store) -> None:
    _built_with_another_whoosh(store)
    with store.searcher() as searcher:
        with pytest.raises(IndexMissing) as refused:
            searcher.search("tomatoes")
    assert str(refused.value) == (
        f"the index at {store.index_dir} was built with Whoosh 2.7.4, this is {INSTALLED}: "
        "run `sextant index --rebuild`"
    )


def test_an_index_built_with_another_whoosh_is_rebuilt_by_the_next_run(store: Store) -> None:
    old = _built_with_another_whoosh(store)
    report = store.index()
    assert report.mode == "full"
    assert store.index_dir.resolve() != old
    state = location.read_state(store.index_dir.resolve())
    assert state is not None
    assert state.whoosh == INSTALLED
    with store.searcher() as searcher:
        assert searcher.search("tomatoes").total == 1


def test_a_state_without_a_whoosh_version_is_an_index_to_rebuild(store: Store) -> None:
    """Indexes written before the version was recorded are not trusted to match."""
    generation = _built_with_another_whoosh(store)
    state = json.loads((generation / location.STATE_FILE).read_text(encoding="utf-8"))
    del state["whoosh"]
    (generation / location.STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    with store.searcher() as searcher, pytest.raises(IndexMissing, match="Whoosh unknown"):
        searcher.search("tomatoes")
    assert store.index().mode == "full"


def test_an_unreadable_state_is_refused_then_rebuilt(store: Store) -> None:
    generation = _built_with_another_whoosh(store)
    (generation / location.STATE_FILE).write_bytes(b'{"version": 4, "whoosh": \xff')
    with store.searcher() as searcher, pytest.raises(IndexMissing, match="no readable state"):
        searcher.search("tomatoes")
    assert store.index().mode == "full"
    with store.searcher() as searcher:
        assert searcher.search("tomatoes").total == 1
