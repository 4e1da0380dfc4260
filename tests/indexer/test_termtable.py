"""The compact term table writes Whoosh's file byte for byte, and holds no tuple per term."""

from __future__ import annotations

import io
import random
import tracemalloc

import pytest
from whoosh.filedb import filetables
from whoosh.filedb.structfile import StructFile

from indexer.termtable import _SLOT, CompactTermTable


def _keys(count: int) -> list[tuple[bytes, bytes]]:
    # Sorted, of uneven length, with empty values too: the shapes a segment's terms take.
    rng = random.Random(3)
    keys = sorted({rng.randbytes(rng.randint(1, 24)) for _ in range(count)})
    return [(key, rng.randbytes(rng.choice((0, 4, 17)))) for key in keys]


class _Kept(io.BytesIO):
    """A file that keeps what was written when the writer closes it."""

    value = b""

    def close(self) -> None:
        self.value = self.getvalue()
        super().close()


def _written(items: list[tuple[bytes, bytes]], *, compact: bool) -> bytes:
    buffer = _Kept()
    dbfile = StructFile(buffer)
    writer: filetables.OrderedHashWriter = filetables.OrderedHashWriter(dbfile)
    if compact:
        writer = CompactTermTable(writer)
    writer.extras["fieldmap"] = {"text": 0}
    for key, value in items:
        writer.add(key, value)
    writer.close()
    return buffer.value


@pytest.mark.parametrize("count", [0, 1, 300, 20_000])
def test_the_file_is_the_one_whoosh_writes(count: int) -> None:
    # 20,000 keys fill every one of the 256 buckets with enough entries to collide.
    items = _keys(count)
    assert _written(items, compact=True) == _written(items, compact=False)


def test_whoosh_reads_every_key_back() -> None:
    items = _keys(5_000)
    reader = filetables.OrderedHashReader(StructFile(io.BytesIO(_written(items, compact=True))))
    assert [reader[key] for key, _ in items] == [value for _, value in items]
    assert reader.closest_key(items[10][0][:-1] + b"\x00") is not None


def test_keys_out_of_order_are_refused() -> None:
    writer = CompactTermTable(filetables.OrderedHashWriter(StructFile(io.BytesIO())))
    writer.add(b"b", b"")
    with pytest.raises(ValueError, match="Keys must increase"):
        writer.add(b"a", b"")


def test_a_writer_already_in_use_cannot_be_taken_over() -> None:
    fresh = filetables.OrderedHashWriter(StructFile(io.BytesIO()))
    fresh.add(b"a", b"")
    with pytest.raises(ValueError, match="before its first key"):
        CompactTermTable(fresh)


def test_pending_entries_take_under_a_third_of_whooshs_memory() -> None:
    items = [(b"%09d" % i, b"") for i in range(50_000)]

    def pending(compact: bool) -> int:
        writer: filetables.OrderedHashWriter = filetables.OrderedHashWriter(
            StructFile(io.BytesIO())
        )
        if compact:
            writer = CompactTermTable(writer)
        tracemalloc.start()
        try:
            for key, value in items:
                writer.add(key, value)
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    # The BytesIO holding the file is the same in both; the entries are what differs.
    assert pending(compact=True) * 3 < pending(compact=False)


def test_a_slot_is_whooshs_pointer() -> None:
    assert _SLOT.itemsize == filetables._pointer.size
    assert filetables._pointer.format in ("!Iq", b"!Iq")
