"""The two calls the engine makes on each write: ``Storage.log_batch`` (before the
batch is applied) and ``Storage.maybe_snapshot`` (after)."""
from __future__ import annotations

import numpy as np
import pytest

from noria_py.batch import Batch
from noria_py.columns import ColumnChunk
from noria_py.errors import StorageError
from noria_py.storage import codec
from noria_py.storage import storage as storage_module
from noria_py.storage.log import (
    BATCH,
    COLUMNS,
    LOG_HEADER_SIZE,
    LOG_VERSION,
    TAGGED_LOG_VERSION,
    FrameScanner,
    encode_log_header,
    frame,
)

from .helpers import typed, wal_files


def _records(path) -> list[tuple]:
    """The decoded records of one log file."""
    buf = path.read_bytes()
    return [codec.unpackb(fr.payload) for fr in FrameScanner(buf, LOG_HEADER_SIZE)]


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.int64)


def test_log_batch_logs_deletions_as_deletions(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    assert s.log_batch("t", Batch.inserts([(1, "a"), (2, "b"), (2, "b")])) == 1
    # a write with deletions, as Base.prepare makes it: deletions first
    assert s.log_batch("t", Batch([(2, "b"), (1, "a"), (3, "c")], [-1, -1, 1])) == 2
    s.close()
    rec = _records(d / wal_files(d)[0])[1]
    assert rec[0] == BATCH and rec[3] == ((3, "c"),) and rec[4] == ((2, "b"), (1, "a"))
    assert typed(open_storage(d).load().tables["t"]) == typed([(2, "b"), (3, "c")])


def test_log_batch_counts_deletions_of_a_columnar_batch(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    s.log_batch("t", Batch.inserts([(1, 1.5), (2, 2.5)]))
    s.log_batch("t", Batch.columnar([np.array([1, 7]), np.array([1.5, 7.5])], np.array([-1, 1])))
    s.close()
    kinds = [r[0] for r in _records(d / wal_files(d)[0])]
    assert kinds == [BATCH, BATCH]            # signs other than +1: not a columns record
    assert typed(open_storage(d).load().tables["t"]) == typed([(2, 2.5), (7, 7.5)])


def test_log_batch_logs_a_numeric_insert_as_columns(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    s.log_batch("t", Batch.columnar([np.arange(40), np.arange(40) / 2], _ones(40)))
    text = np.empty(2, dtype=object)
    text[:] = ["x", "y"]
    s.log_batch("u", Batch.columnar([np.arange(2), text], _ones(2)))     # not all numeric
    s.close()
    kinds = [r[0] for r in _records(d / wal_files(d)[0])]
    assert kinds == [COLUMNS, BATCH]
    tables = open_storage(d).load().tables
    assert typed(tables["t"]) == typed([(i, i / 2) for i in range(40)])
    assert typed(tables["u"]) == typed([(0, "x"), (1, "y")])


def test_maybe_snapshot_reads_no_rows_until_one_is_due(open_storage):
    s = open_storage()                           # default thresholds: megabytes of log
    s.log_batch("t", Batch.inserts([(1,)]))

    def tables():
        raise AssertionError("rows read although no snapshot was due")

    assert s.maybe_snapshot(tables) is False
    assert s.log_bytes() > 0


def test_maybe_snapshot_snapshots_the_given_rows_when_due(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d, snapshot_min_bytes=0, snapshot_max_bytes=1)
    s.log_batch("t", Batch.inserts([(1,), (1,), (2,)]))
    s.log_batch("u", Batch.columnar([np.arange(3), np.arange(3) * 1.5], _ones(3)))
    calls = []

    def tables():
        calls.append(s.lsn)
        return {"t": iter([(1,), (1,), (2,)]),
                "u": iter([ColumnChunk([np.arange(3), np.arange(3) * 1.5])])}

    assert s.maybe_snapshot(tables) is True
    assert calls == [2]                          # read once, at the logged batches' time
    assert s.log_bytes() == 0 and wal_files(d) == ["wal-00000002.log"]
    assert s.maybe_snapshot(tables) is False     # an empty log is not due again
    s.close()
    rec = open_storage(d).load()
    assert rec.lsn == 2
    assert rec.tables == {"t": [(1,), (1,), (2,)], "u": [(0, 0.0), (1, 1.5), (2, 3.0)]}


def test_split_at_hands_over_the_rows_as_of_a_batch_and_the_batches_after(open_storage, tmp_path):
    """``Storage(split_at=L)`` (a reopen whose views' checkpoints stand for batch L):
    the rows as of L, then every later batch in order, rows and columns alike; where the
    directory cannot be split there (a snapshot after L, a drop at or after it, a log
    short of it) everything goes into the rows, as without it."""
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(1,), (2,)])                              # 1
    s.append("t", [(3,)], [(1,)])                            # 2
    s.log_batch("u", Batch.columnar([np.arange(40)], _ones(40)))   # 3, a columns record
    s.append("t", [(4,)], [(2,)])                            # 4
    crc2 = _crc_of(d, 2)
    s.close()
    s = open_storage(d)
    whole = s.load().tables
    s.close()
    for at in range(5):
        s2 = open_storage(d, split_at=at)
        rec = s2.load()
        s2.close()
        assert rec.later is not None and len(rec.later) == 4 - at
        rows = {t: typed(r) for t, r in rec.tables.items()}
        for table, ins, dels in rec.later:
            got = rows.setdefault(table, typed([]))
            got.update(typed(ins))
            got.subtract(typed(dels))
        assert {t: +c for t, c in rows.items()} == {t: typed(r) for t, r in whole.items()}
        if at == 2:
            assert rec.split_crc == crc2 and typed(rec.tables["t"]) == typed([(2,), (3,)])
    assert _split(open_storage, d, 5) is None                      # past the log
    s = open_storage(d)
    s.snapshot({"t": [(3,), (4,)], "u": [(i,) for i in range(40)]})
    s.append("t", [(5,)])                                          # 5
    s.drop_table("u")
    s.close()
    assert _split(open_storage, d, 3) is None                      # before the snapshot
    assert _split(open_storage, d, 4) is None                      # a drop after it
    assert _split(open_storage, d, 5) is None                      # a drop at it
    assert _split(open_storage, d, 2) is None


def _split(open_storage, d, at: int):
    s = open_storage(d, split_at=at)
    later = s.load().later
    s.close()
    return later


def _crc_of(d, lsn: int) -> int:
    from noria_py.storage.log import RECORD_HEADER
    buf = (d / wal_files(d)[0]).read_bytes()
    for fr in FrameScanner(buf, LOG_HEADER_SIZE):
        if codec.unpackb(fr.payload)[1] == lsn:
            return RECORD_HEADER.unpack_from(buf, fr.start)[1]
    raise AssertionError(lsn)


def test_reset_replaces_the_directory_with_rows_as_of_a_batch_and_the_batches_after(open_storage, tmp_path):
    """``Storage.reset`` (a base's log at a worker, made anew or trimmed): after it the
    directory holds the rows as of batch L and the given batches after it, numbered
    from L + 1; appends continue from there; one log file is left. ``log_batches``
    logs a group as one write, numbered in order."""
    d = tmp_path / "data"
    s = open_storage(d)
    s.log_batches("t", [Batch.inserts([(1,)]), Batch.inserts([(2,)])])
    assert s.lsn == 2
    s.reset("t", [(7,), (8,)], 10, [Batch([(7,), (9,)], [-1, 1])])
    assert s.lsn == 11 and len(wal_files(d)) == 1
    s.log_batches("t", [Batch.columnar([np.arange(3)], _ones(3))])
    s.close()
    for at, rows, later in ((10, [(7,), (8,)], 2), (11, [(8,), (9,)], 1)):
        s = open_storage(d, split_at=at)
        rec = s.load()
        s.close()
        assert rec.lsn == 12 and typed(rec.tables["t"]) == typed(rows)
        assert rec.later is not None and len(rec.later) == later
    s = open_storage(d, split_at=9)                 # (before the log's start: not split)
    rec = s.load()
    s.close()
    assert rec.later is None and typed(rec.tables["t"]) == typed([(8,), (9,), (0,), (1,), (2,)])


def test_a_reset_cut_short_before_its_snapshot_leaves_the_directory_as_before(open_storage, tmp_path,
                                                                             monkeypatch):
    """A crash after a reset put its log in place and before its snapshot (the only
    moment two logs are newer than the snapshot): opening deletes the new log, says
    so, and has what was there before the reset."""
    d = tmp_path / "data"
    s = open_storage(d)
    s.log_batches("t", [Batch.inserts([(1,)]), Batch.inserts([(2,)])])
    s.close()
    s = open_storage(d)
    before = wal_files(d)
    # (the reset's first step alone: its log, whole, beside the current one)
    monkeypatch.setattr(storage_module, "write_snapshot", _crash)
    with pytest.raises(StorageError, match="crashed here"):
        s.reset("t", [(5,)], 3, [Batch.inserts([(6,)])])
    monkeypatch.undo()
    s._closed = True                    # (the crash: nothing more of this process)
    s._release_lock()
    assert len(wal_files(d)) == 2
    s = open_storage(d)
    rec = s.load()
    assert rec.lsn == 2 and typed(rec.tables["t"]) == typed([(1,), (2,)])
    assert wal_files(d) == before and any("reset interrupted" in r for r in rec.report)


def _crash(*args, **kw):
    raise OSError("crashed here")


def test_a_tagged_log_keeps_each_writes_tag_in_its_own_record(open_storage, tmp_path):
    """``Storage(tagged=True)`` (a cluster worker's base log: runtime/cluster/writes.py):
    its logs are version 2 and each batch's record, rows or columns, ends in its
    write's tag (none: untagged), read back by write number, also after a split and
    a reset; a version-1 directory opens there, its records untagged, but takes no
    tag until its next log."""
    d = tmp_path / "data"
    s = open_storage(d, tagged=True)
    s.log_batches("t", [Batch.inserts([(1,)]), Batch.columnar([np.arange(3)], _ones(3)),
                        Batch.inserts([(5,)])], [7, 1 << 62, 0])
    s.log_batch("t", Batch([(1,)], [-1]))
    with pytest.raises(StorageError, match="tag"):
        s.log_batches("t", [Batch.inserts([(6,)])], [1, 2])        # (one per batch)
    s.close()
    recs = _records(d / wal_files(d)[0])
    assert [(r[0], r[1], r[5] if len(r) == 6 else None) for r in recs] == [
        (BATCH, 1, 7), (COLUMNS, 2, 1 << 62), (BATCH, 3, None), (BATCH, 4, None)]
    assert (d / wal_files(d)[0]).read_bytes()[8:12] == TAGGED_LOG_VERSION.to_bytes(4, "little")
    s = open_storage(d, tagged=True, split_at=1)
    rec = s.load()
    assert rec.tags == {1: 7, 2: 1 << 62} and rec.later is not None and len(rec.later) == 3
    assert typed(rec.tables["t"]) == typed([(1,)])
    s.reset("t", [(0,)], 9, [Batch.inserts([(2,)]), Batch.inserts([(3,)])], [0, 11])
    s.close()
    s = open_storage(d)                     # (an untagged Storage reads a tagged log)
    rec = s.load()
    assert rec.lsn == 11 and rec.tags == {11: 11}
    assert typed(rec.tables["t"]) == typed([(0,), (2,), (3,)])
    s.close()
    old = tmp_path / "old"                  # a version-1 log, as written before tags
    s = open_storage(old)
    s.log_batches("t", [Batch.inserts([(1,)]), Batch.columnar([np.arange(2)], _ones(2))])
    with pytest.raises(StorageError, match="tag"):
        s.log_batches("t", [Batch.inserts([(2,)])], [5])          # (untagged Storage)
    s.close()
    assert (old / wal_files(old)[0]).read_bytes()[8:12] == LOG_VERSION.to_bytes(4, "little")
    assert [len(r) for r in _records(old / wal_files(old)[0])] == [5, 5]
    s = open_storage(old, tagged=True)
    rec = s.load()
    assert rec.lsn == 2 and rec.tags == {} and typed(rec.tables["t"]) == typed([(1,), (0,), (1,)])
    with pytest.raises(StorageError, match="not tagged"):
        s.log_batches("t", [Batch.inserts([(2,)])], [5])          # (its log is version 1)
    s.log_batches("t", [Batch.inserts([(2,)])])                   # (untagged: as before)
    s.reset("t", [(1,)], 3, [Batch.inserts([(4,)])], [9])         # (its next log: tagged)
    s.close()
    s = open_storage(old)
    assert s.load().tags == {4: 9}


def test_a_tag_in_a_version_1_log_or_an_unknown_version_is_refused(open_storage, tmp_path):
    """A version-1 log cannot hold a tag (a record ending in one there is damage: its
    CRC matches, so not a torn write), a tag must be a positive int, and a log of a
    version this engine does not know is refused by its header."""
    for version, tag, problem in ((LOG_VERSION, 5, "untagged"),
                                  (TAGGED_LOG_VERSION, -1, "malformed tag"),
                                  (TAGGED_LOG_VERSION, "5", "malformed tag"),
                                  (3, 5, "version 3 is not supported")):
        d = tmp_path / f"v{version}-{tag}"
        d.mkdir()
        (d / storage_module._wal_name(1)).write_bytes(
            encode_log_header(1, 0, version)
            + frame(codec.packb((BATCH, 1, "t", ((1,),), ())))
            + frame(codec.packb((BATCH, 2, "t", ((2,),), (), tag))))
        with pytest.raises(StorageError, match=problem):
            open_storage(d)

