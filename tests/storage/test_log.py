from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noria_py.storage import CorruptionError, Recovered, Storage, StorageError
from noria_py.storage.log import LOG_HEADER_SIZE

from .helpers import typed

WAL1 = "wal-00000001.log"


def write_three_batches(s: Storage) -> list[int]:
    """Three batches; returns the log size after each (header included)."""
    sizes = []
    s.append("t", [(1, "a"), (2, "b"), (2, "b")], [])
    sizes.append(LOG_HEADER_SIZE + s.log_bytes())
    s.append("t", [(3, "c")], [(2, "b")])
    sizes.append(LOG_HEADER_SIZE + s.log_bytes())
    s.append("u", [(9.5, None, True)], [])
    sizes.append(LOG_HEADER_SIZE + s.log_bytes())
    return sizes


AFTER_2 = {"t": [(1, "a"), (2, "b"), (3, "c")]}
AFTER_3 = {**AFTER_2, "u": [(9.5, None, True)]}


def copy_dir(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / "LOCK").unlink(missing_ok=True)
    return dst


# -- basic behaviour ----------------------------------------------------------


def test_empty_directory(open_storage, tmp_path):
    rec = open_storage(tmp_path / "a" / "b").load()
    assert rec == Recovered(catalog=[], tables={}, lsn=0, report=[])
    assert (tmp_path / "a" / "b" / "LOCK").exists()


def test_lsns_count_batches(open_storage):
    s = open_storage()
    assert [s.append("t", [(i,)], []) for i in range(5)] == [1, 2, 3, 4, 5]
    assert s.append("t", [], []) == 6  # an empty batch is still a batch


def test_restart_recovers_exactly_with_fsync(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d, sync=True)
    write_three_batches(s)
    s.record_ddl("CREATE TABLE t (a INT, b TEXT)")
    s.record_ddl("CREATE TABLE u (x FLOAT, y INT, z BOOL)")
    s.close()
    rec = open_storage(d, sync=True).load()
    assert rec.tables == AFTER_3
    assert rec.lsn == 3
    assert rec.catalog == ["CREATE TABLE t (a INT, b TEXT)", "CREATE TABLE u (x FLOAT, y INT, z BOOL)"]
    assert rec.report == []


def test_random_workload_matches_a_model(open_storage, tmp_path):
    import random

    rnd = random.Random(5)
    model: dict[str, list] = {}
    s = open_storage()
    for _ in range(300):
        table = rnd.choice("abc")
        rows = model.setdefault(table, [])
        ins = [(rnd.randrange(20), rnd.choice([1, 1.0, True, "x", None])) for _ in range(rnd.randrange(4))]
        dels = rnd.sample(rows + ins, min(len(rows + ins), rnd.randrange(3)))
        s.append(table, ins, dels)
        rows.extend(ins)
        for r in dels:  # remove one typed-equal occurrence
            i = next(i for i, x in enumerate(rows) if x == r and list(map(type, x)) == list(map(type, r)))
            rows.pop(i)
        if rnd.random() < 0.03:
            s.close()
            s = open_storage()
            got = s.load()
            assert {k: typed(v) for k, v in got.tables.items()} == {k: typed(v) for k, v in model.items()}
    s.close()
    got = open_storage().load()
    assert {k: typed(v) for k, v in got.tables.items()} == {k: typed(v) for k, v in model.items()}
    assert got.lsn == 300 and got.report == []


def test_delete_removes_one_occurrence_and_unmatched_deletes_are_reported(open_storage):
    s = open_storage()
    s.append("t", [(1,), (1,), (1,), (2,)], [])
    s.append("t", [], [(1,), (1.0,), (7,)])  # 1.0 is not the int 1
    s.close()
    rec = open_storage().load()
    assert sorted(rec.tables["t"]) == [(1,), (1,), (2,)]
    assert any("2 deleted row(s) matched no stored row" in line for line in rec.report)


def test_inserts_apply_before_deletes_within_a_batch(open_storage):
    s = open_storage()
    s.append("t", [(1,)], [(1,)])
    s.close()
    rec = open_storage().load()
    assert rec.tables == {"t": []} and rec.report == []


def test_load_twice_rereads_and_sees_later_writes(open_storage):
    s = open_storage()
    s.append("t", [(1,)], [])
    assert s.load().tables == {"t": [(1,)]}
    s.append("t", [(2,)], [])
    s.drop_table("x")
    again = s.load()
    assert again.tables == {"t": [(1,), (2,)]} and again.lsn == 2


def test_catalog_round_trip_and_replace(open_storage, tmp_path):
    s = open_storage()
    s.record_ddl("CREATE TABLE a (x INT)")
    s.record_ddl("CREATE VIEW v AS SELECT x FROM a")
    s.set_catalog(["CREATE TABLE a (x INT)"])
    assert s.catalog == ["CREATE TABLE a (x INT)"]
    s.close()
    assert open_storage().load().catalog == ["CREATE TABLE a (x INT)"]
    assert not list((tmp_path / "data").glob("*.tmp"))


def test_damaged_catalog_is_an_error(open_storage, tmp_path):
    s = open_storage()
    s.record_ddl("CREATE TABLE a (x INT)")
    s.close()
    (tmp_path / "data" / "catalog.json").write_text('{"version": 1, "statem')
    with pytest.raises(StorageError, match="catalog"):
        open_storage()


def test_closed_storage_refuses_use(open_storage):
    s = open_storage()
    s.close()
    s.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        s.append("t", [(1,)], [])
    with pytest.raises(StorageError, match="closed"):
        s.load()


def test_context_manager_releases_the_lock(tmp_path):
    with Storage(tmp_path, sync=False) as s:
        s.append("t", [(1,)], [])
    with Storage(tmp_path, sync=False) as s:
        assert s.load().tables == {"t": [(1,)]}


def test_data_dir_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StorageError, match="cannot create data directory"):
        Storage(tmp_path / "f")


def test_forgotten_storage_releases_its_lock_when_collected(tmp_path):
    import gc

    Storage(tmp_path, sync=False).append("t", [(1,)], [])
    gc.collect()
    with Storage(tmp_path, sync=False) as s:
        assert s.load().tables == {"t": [(1,)]}


# -- locking --------------------------------------------------------------------


def test_second_opener_in_the_same_process_is_refused(open_storage, tmp_path):
    s = open_storage()
    with pytest.raises(StorageError, match="already in use"):
        Storage(tmp_path / "data")
    s.close()
    open_storage().close()  # free again after close


def test_second_opener_in_another_process_is_refused(open_storage, tmp_path):
    open_storage()
    code = (
        "import sys\n"
        "from noria_py.storage import Storage, StorageError\n"
        "try:\n    Storage(sys.argv[1])\nexcept StorageError as e:\n    print(e); sys.exit(3)\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert f"process {os.getpid()}" in p.stdout


# -- torn and corrupt tails -----------------------------------------------------------


def test_torn_tail_at_every_length_recovers_previous_batch(open_storage, tmp_path):
    src = tmp_path / "data"
    s = open_storage(src)
    sizes = write_three_batches(s)
    s.close()
    good = (src / WAL1).read_bytes()
    assert len(good) == sizes[2]
    for cut in range(sizes[1], sizes[2]):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / WAL1).write_bytes(good[:cut])
        s = open_storage(d)
        rec = s.load()
        assert rec.lsn == 2, cut
        assert rec.tables == AFTER_2, cut
        assert (d / WAL1).stat().st_size == sizes[1]
        if cut == sizes[1]:
            assert rec.report == []
        else:
            (line,) = rec.report
            assert f"torn tail at byte {sizes[1]}" in line and "recovered up to batch 2" in line
            assert f"{cut - sizes[1]} byte(s)" in line
            assert (d / f"{WAL1}.dropped-{sizes[1]}").read_bytes() == good[sizes[1] : cut]
        # the log is clean again: appends go after batch 2 and survive a restart
        assert s.append("u", [(0.5, None, False)], []) == 3
        s.close()
        rec = open_storage(d).load()
        assert rec.tables == {**AFTER_2, "u": [(0.5, None, False)]} and rec.lsn == 3 and rec.report == []
        shutil.rmtree(d)


def test_a_log_shorter_than_its_header_is_refused(open_storage, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / WAL1).write_bytes(b"NORIA")
    with pytest.raises(CorruptionError, match="at byte 0: the file is 5 bytes, shorter than its 32-byte header"):
        open_storage(d)
    assert (d / WAL1).read_bytes() == b"NORIA"  # left alone


def test_zero_filled_tail_is_dropped(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    sizes = write_three_batches(s)
    s.close()
    with open(d / WAL1, "ab") as f:
        f.write(b"\0" * 4096)
    s = open_storage(d)
    rec = s.load()
    assert rec.lsn == 3 and rec.tables == AFTER_3
    assert f"torn tail at byte {sizes[2]}" in rec.report[0] and "zero-filled" in rec.report[0]
    assert s.load().report == rec.report  # a later load still tells what opening did


def test_flipped_byte_anywhere_in_last_record_keeps_earlier_batches(open_storage, tmp_path):
    src = tmp_path / "data"
    s = open_storage(src)
    sizes = write_three_batches(s)
    s.close()
    good = (src / WAL1).read_bytes()
    for pos in range(sizes[1], sizes[2]):
        bad = bytearray(good)
        bad[pos] ^= 0x40
        d = tmp_path / f"flip{pos}"
        d.mkdir()
        (d / WAL1).write_bytes(bytes(bad))
        s = open_storage(d)
        rec = s.load()
        assert rec.lsn == 2 and rec.tables == AFTER_2, pos
        assert len(rec.report) == 1 and "recovered up to batch 2" in rec.report[0], pos
        assert s.append("t", [(4, "d")], []) == 3
        s.close()
        shutil.rmtree(d)


def test_corruption_in_the_middle_is_refused_and_says_where(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    sizes = write_three_batches(s)
    s.close()
    data = bytearray((d / WAL1).read_bytes())
    data[sizes[0] + 12] ^= 0xFF  # inside batch 2's payload
    (d / WAL1).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=f"{WAL1}' is damaged at byte {sizes[0]}: checksum mismatch "
                       rf"\(a valid record follows at byte {sizes[1]}\).*noria-py repair --data-dir"):
        open_storage(d)
    assert (d / WAL1).read_bytes() == bytes(data)  # left alone
    assert not list(d.glob("*.dropped-*"))


def test_out_of_sequence_record_is_refused(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(1,)], [])
    s.close()
    data = (d / WAL1).read_bytes()
    record = data[LOG_HEADER_SIZE:]
    (d / WAL1).write_bytes(data + record)  # batch 1 again where 2 belongs: last, but its CRC matches
    with pytest.raises(CorruptionError, match=f"at byte {len(data)}: batch lsn 1 out of sequence.*checksum matches"):
        open_storage(d)


def test_foreign_log_file_is_an_error_not_a_torn_tail(open_storage, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / WAL1).write_bytes(b"x" * 100)
    with pytest.raises(StorageError, match="not a noria_py log"):
        open_storage(d)
    assert (d / WAL1).read_bytes() == b"x" * 100  # left alone


def test_unexpected_log_generation_is_an_error(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(1,)], [])
    s.close()
    shutil.copy(d / WAL1, d / "wal-00000003.log")
    with pytest.raises(StorageError, match="unexpected log files"):
        open_storage(d)


# -- drop ---------------------------------------------------------------------------


def test_drop_then_recreate_does_not_resurrect_rows(open_storage):
    s = open_storage()
    s.append("t", [(1,), (2,)], [])
    s.append("keep", [(0,)], [])
    s.drop_table("t")
    s.append("t", [(3,)], [])
    s.close()
    rec = open_storage().load()
    assert rec.tables == {"t": [(3,)], "keep": [(0,)]} and rec.lsn == 3


def test_drop_without_recreate_removes_the_table(open_storage):
    s = open_storage()
    s.append("t", [(1,)], [])
    s.drop_table("t")
    s.close()
    assert open_storage().load().tables == {}


def test_drop_after_a_snapshot_removes_snapshot_rows(open_storage):
    s = open_storage()
    s.append("t", [(1,)], [])
    s.snapshot({"t": [(1,)]})
    s.drop_table("t")  # same lsn as the snapshot: must still apply
    s.close()
    rec = open_storage().load()
    assert rec.tables == {} and rec.lsn == 1


def test_drop_then_snapshot_then_recreate(open_storage):
    s = open_storage()
    s.append("t", [(1,)], [])
    s.drop_table("t")
    s.snapshot({})
    s.append("t", [(2,)], [])
    s.close()
    assert open_storage().load().tables == {"t": [(2,)]}


# -- columns records ------------------------------------------------------------

def test_columns_record_round_trips_as_rows(open_storage, tmp_path):
    import numpy as np
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(1, 0.5)], [])
    assert s.append_columns("t", [np.array([2, -3, 2**62]), np.array([1.5, -0.0, 1e300])]) == 2
    s.append("t", [], [(2, 1.5)])                  # a row from the columns record
    s.close()
    rec = open_storage(d).load()
    assert rec.lsn == 3 and rec.report == []
    assert typed(rec.tables["t"]) == typed([(1, 0.5), (-3, -0.0), (2**62, 1e300)])
    assert {type(v) for r in rec.tables["t"] for v in r} == {int, float}


def test_columns_record_refuses_what_it_cannot_store(open_storage):
    import numpy as np
    s = open_storage()
    for bad in ([], [np.array(["a"], dtype=object)], [np.array([1, 2]), np.array([1.0])],
                [np.array([[1]])], [[1, 2]], [np.array([1], dtype=np.int32)]):
        with pytest.raises(StorageError, match="cannot log columns"):
            s.append_columns("t", bad)
    assert s.lsn == 0 and s.log_bytes() == 0


def test_torn_columns_record_recovers_previous_batch(open_storage, tmp_path):
    import numpy as np
    src = tmp_path / "data"
    s = open_storage(src)
    s.append("t", [(1, 1.0)], [])
    before = LOG_HEADER_SIZE + s.log_bytes()
    s.append_columns("t", [np.arange(50), np.arange(50, dtype=np.float64)])
    s.close()
    good = (src / WAL1).read_bytes()
    for cut in (before + 1, before + 8, before + 30, len(good) - 1):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / WAL1).write_bytes(good[:cut])
        rec = open_storage(d).load()
        assert rec.lsn == 1 and rec.tables == {"t": [(1, 1.0)]}, cut
        assert "recovered up to batch 1" in rec.report[0]


def test_malformed_columns_record_is_refused(open_storage, tmp_path):
    """A columns record whose byte lengths do not match its row count (well framed,
    checksummed: a bug's, not a torn write's) is damage, even as the last record."""
    from noria_py.storage import codec
    from noria_py.storage.log import COLUMNS, frame
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(1, 1.0)], [])
    s.close()
    size = (d / WAL1).stat().st_size
    with open(d / WAL1, "ab") as fh:
        fh.write(frame(codec.packb((COLUMNS, 2, "t", 3, (("<i8", b"\0" * 16),)))))
    with pytest.raises(CorruptionError, match=f"at byte {size}: malformed columns"):
        open_storage(d)
