"""Where the index lives on disk, how a rebuilt one is swapped in, and who may write it.

``Settings.index_dir`` (``DATA_DIR/index``) is a symbolic link to a *generation* directory
beside it (``DATA_DIR/index-20240105T101500-3f2a``). A rebuild writes a fresh generation and
then replaces the link with ``os.replace``, which is atomic on POSIX: a searcher resolves the
link either before the swap (old, complete index) or after (new, complete index), never in
between. The previous generation is kept until the next rebuild, so a query already running
on it finishes; older ones are deleted.

Each generation holds the Whoosh files plus our own small files: the link scores
(:data:`indexer.rank.RANK_FILE`), the spelling vocabulary and :data:`STATE_FILE`, whose
watermark says up to when the store has been indexed. The watermark lives with the index it
describes, so deleting the index directory can never leave a watermark that skips pages.
The state also records our format (:data:`STATE_VERSION`) and the Whoosh release that wrote
the index: the indexer writes Whoosh's posting blocks itself and reads them back without
Whoosh's reader (:mod:`indexer.writer`, :mod:`indexer.vector`), so an index is only read by
the release that wrote it. Either one differing, the next `sextant index` rebuilds and
searchers refuse the index until then.

Only one ``sextant index`` may run at a time (an advisory ``flock`` on a file beside the
index); a second one stops with a clear message instead of corrupting the first one's work.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import whoosh
from whoosh.filedb.filestore import FileStorage
from whoosh.index import FileIndex

from sextant.errors import StoreError
from sextant.store import utcnow

STATE_FILE = "sextant-index.json"
LOCK_FILE = ".index.lock"
#: Bumped whenever the schema or the analysis changes what is in an index: an index of another
#: version is rebuilt by the next `sextant index` and refused by searchers until then.
STATE_VERSION = 6  # 6: no frequency values in text postings (schema.Weights)
#: The Whoosh release this process runs (pinned exactly in pyproject.toml).
WHOOSH_VERSION = whoosh.versionstring()


class IndexMissing(StoreError):
    """There is no index to search yet."""


class IndexBusy(StoreError):
    """Another ``sextant index`` holds the index."""


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the index covers: pages changed after ``watermark`` still need indexing."""

    watermark: datetime
    built_at: datetime
    version: int = STATE_VERSION
    whoosh: str = WHOOSH_VERSION

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "whoosh": self.whoosh,
                "watermark": self.watermark.isoformat(),
                "built_at": self.built_at.isoformat(),
            }
        )

    def is_current(self) -> bool:
        """Whether this process can read and extend the index: same format, same Whoosh."""
        return not self.mismatch()

    def mismatch(self) -> str:
        """Why the index cannot be used as it is, for a user (empty when it can)."""
        if self.version != STATE_VERSION:
            return (
                f"was built by another version of sextant (index format {self.version}, "
                f"this is {STATE_VERSION})"
            )
        if self.whoosh != WHOOSH_VERSION:
            return f"was built with Whoosh {self.whoosh or 'unknown'}, this is {WHOOSH_VERSION}"
        return ""

    @classmethod
    def from_json(cls, text: str) -> IndexState:
        data = json.loads(text)
        return cls(
            watermark=datetime.fromisoformat(data["watermark"]),
            built_at=datetime.fromisoformat(data["built_at"]),
            version=int(data.get("version", 0)),
            whoosh=str(data.get("whoosh", "")),
        )


def live_generation(index_dir: Path) -> Path | None:
    """The directory the live index is in, or None when there is no complete index."""
    try:
        target = index_dir.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        return None
    if not (target / STATE_FILE).exists():
        return None
    return target


def open_for_writing(generation: Path) -> FileIndex:
    """The Whoosh index of ``generation`` read through ``read()`` calls, not memory maps.

    Whoosh maps every segment file whole, and pages of a mapping that are read stay in the
    process's RSS; the searcher and the writer of an incremental run each map every segment
    again. On the 20,000-page store (two 120 MB segments) an incremental run of 198 pages
    peaked at 706 MB RSS of which ~300-460 MB were mapped index, growing with the index
    (page cache, not the process's own memory, but counted in its RSS and PSS). Indexing
    reads little of the existing segments (page ids, deletions), so reading them through
    the page cache instead costs it nothing measurable; searchers keep their maps
    (:mod:`indexer.query`).
    """
    index: FileIndex = FileStorage(str(generation), supports_mmap=False).open_index()
    return index


def read_any_state(generation: Path) -> IndexState | None:
    """The generation's state as recorded, current or not; None when unreadable."""
    try:
        return IndexState.from_json((generation / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None


def read_state(generation: Path) -> IndexState | None:
    """The generation's state when this process can use the index as it is, else None."""
    state = read_any_state(generation)
    return state if state is not None and state.is_current() else None


def require_current(index_dir: Path, generation: Path) -> IndexState:
    """The generation's state; raises :class:`IndexMissing` saying why when this process
    cannot search the index as it is."""
    state = read_any_state(generation)
    why = "has no readable state file" if state is None else state.mismatch()
    if why:
        raise IndexMissing(f"the index at {index_dir} {why}: run `sextant index --rebuild`")
    assert state is not None
    return state


def write_state(generation: Path, state: IndexState) -> None:
    write_atomically(generation / STATE_FILE, state.to_json())


def write_atomically(path: Path, text: str) -> None:
    """Write a file so that readers see the old content or the new, never a torn mix."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def new_generation(index_dir: Path) -> Path:
    """A fresh, empty directory for a rebuild, beside the live link."""
    stamp = utcnow().strftime("%Y%m%dT%H%M%S")
    path = index_dir.parent / f"{index_dir.name}-{stamp}-{secrets.token_hex(3)}"
    path.mkdir(parents=True)
    return path


def swap_in(index_dir: Path, generation: Path) -> Path | None:
    """Point ``index_dir`` at ``generation`` atomically; return the generation it replaced.

    An ``index_dir`` that is a real directory (made by hand, or an older layout) cannot be
    replaced atomically by a link; it is moved aside first, the only non-atomic case.
    """
    previous: Path | None = None
    if index_dir.is_symlink():
        previous = index_dir.resolve()
    elif index_dir.exists():
        previous = index_dir.parent / f"{index_dir.name}-legacy-{secrets.token_hex(3)}"
        index_dir.rename(previous)
    link = index_dir.parent / f".{index_dir.name}-link-{secrets.token_hex(3)}"
    os.symlink(generation.name, link)
    os.replace(link, index_dir)
    return previous


def remove_old_generations(index_dir: Path, keep: set[Path]) -> list[Path]:
    """Delete generations other than ``keep`` (the live one and the one just replaced)."""
    removed: list[Path] = []
    keep_resolved = {path.resolve() for path in keep}
    for path in index_dir.parent.glob(f"{index_dir.name}-*"):
        if path.is_dir() and not path.is_symlink() and path.resolve() not in keep_resolved:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextlib.contextmanager
def exclusive(index_dir: Path) -> Iterator[None]:
    """Hold the one-writer lock for the duration of an index run."""
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = index_dir.parent / LOCK_FILE
    with open(lock_path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise IndexBusy(
                f"another `sextant index` is running on {index_dir}; "
                "wait for it to finish (or stop it) and try again."
            ) from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def directory_size(path: Path) -> int:
    """Bytes used by the files of one generation."""
    return sum(entry.stat().st_size for entry in path.iterdir() if entry.is_file())
