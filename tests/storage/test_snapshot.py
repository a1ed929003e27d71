from __future__ import annotations

import shutil

import pytest

from noria_py.storage import StorageError
from noria_py.storage import snapshot as snapmod

from .helpers import wal_files


def fill(s, n=3):
    s.append("t", [(i, str(i)) for i in range(n)], [])
    s.append("t", [], [(0, "0")])
    s.append("u", [(1.5,)], [])
    return {"t": [(i, str(i)) for i in range(1, n)], "u": [(1.5,)]}


def test_snapshot_then_log_replay(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d, sync=True)
    state = fill(s)
    s.snapshot(state)
    assert wal_files(d) == ["wal-00000002.log"] and (d / "snapshot.bin").exists()
    assert s.log_bytes() == 0
    assert s.append("t", [(9, "9")], [(1, "1")]) == 4
    s.close()
    rec = open_storage(d).load()
    assert rec.lsn == 4 and rec.report == []
    assert sorted(rec.tables["t"]) == [(2, "2"), (9, "9")] and rec.tables["u"] == [(1.5,)]


def test_snapshot_keeps_empty_tables_and_large_tables(open_storage, tmp_path, monkeypatch):
    monkeypatch.setattr(snapmod, "CHUNK_ROWS", 7)  # several chunks per table
    s = open_storage()
    rows = [(i, i % 3 == 0) for i in range(50)]
    s.append("big", rows, [])
    s.snapshot({"big": iter(rows), "empty": []})
    s.close()
    rec = open_storage().load()
    assert rec.tables == {"big": rows, "empty": []} and rec.lsn == 1


def test_repeated_snapshots(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    rows = []
    for k in range(5):
        s.append("t", [(k,)], [])
        rows.append((k,))
        s.snapshot({"t": list(rows)})
        s.append("t", [(k, "post")], [])
        rows.append((k, "post"))
    assert wal_files(d) == ["wal-00000006.log"]
    s.close()
    rec = open_storage(d).load()
    assert rec.tables == {"t": rows} and rec.lsn == 10


def test_crash_after_snapshot_rename_before_new_log(open_storage, tmp_path):
    """Snapshot durable, old log still there, new log not yet created."""
    d = tmp_path / "data"
    s = open_storage(d)
    state = fill(s)
    old_log = (d / "wal-00000001.log").read_bytes()
    s.snapshot(state)
    s.close()
    (d / "wal-00000002.log").unlink()
    (d / "wal-00000001.log").write_bytes(old_log)
    s = open_storage(d)
    rec = s.load()
    assert rec.tables == state and rec.lsn == 3
    assert any("covered by the snapshot" in line for line in rec.report)
    assert wal_files(d) == ["wal-00000002.log"]
    assert s.append("t", [(7, "7")], []) == 4
    s.close()
    assert open_storage(d).load().tables["t"] == state["t"] + [(7, "7")]


def test_crash_after_new_log_before_old_log_deleted(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    state = fill(s)
    old_log = (d / "wal-00000001.log").read_bytes()
    s.snapshot(state)
    s.append("u", [(2.5,)], [])
    s.close()
    (d / "wal-00000001.log").write_bytes(old_log)
    rec = open_storage(d).load()
    assert rec.tables == {**state, "u": [(1.5,), (2.5,)]} and rec.lsn == 4
    assert wal_files(d) == ["wal-00000002.log"]


def test_crash_while_writing_snapshot_uses_old_state(open_storage, tmp_path):
    """The temp file is half written; snapshot.bin was never replaced."""
    d = tmp_path / "data"
    s = open_storage(d)
    state = fill(s)
    s.close()
    (d / "snapshot.bin.tmp").write_bytes(b"NORIASNP\x01\x00")
    rec = open_storage(d).load()
    assert rec.tables == state and rec.lsn == 3
    assert not (d / "snapshot.bin.tmp").exists()
    assert any("snapshot.bin.tmp" in line for line in rec.report)


def test_crash_while_writing_second_snapshot(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    state = fill(s)
    s.snapshot(state)
    s.append("t", [(5, "5")], [])
    s.close()
    good = (d / "snapshot.bin").read_bytes()
    (d / "snapshot.bin.tmp").write_bytes(good[: len(good) // 2])
    rec = open_storage(d).load()
    assert rec.tables["t"] == state["t"] + [(5, "5")] and rec.lsn == 4


def test_failed_snapshot_leaves_log_in_use(open_storage, tmp_path):
    d = tmp_path / "data"
    s = open_storage(d)
    fill(s)
    with pytest.raises(StorageError, match="snapshot"):
        s.snapshot({"t": [({"not": "storable"},)]})
    assert not (d / "snapshot.bin").exists() and not list(d.glob("*.tmp"))
    assert s.append("u", [(3.5,)], []) == 4
    s.close()
    assert open_storage(d).load().tables["u"] == [(1.5,), (3.5,)]


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic"])
def test_damaged_snapshot_is_an_error(open_storage, tmp_path, damage):
    d = tmp_path / "data"
    s = open_storage(d)
    s.snapshot(fill(s))
    s.close()
    data = bytearray((d / "snapshot.bin").read_bytes())
    if damage == "truncate":
        data = data[:-3]
    elif damage == "flip":
        data[len(data) // 2] ^= 1
    else:
        data[0:8] = b"GARBAGE!"
    (d / "snapshot.bin").write_bytes(bytes(data))
    with pytest.raises(StorageError, match="snapshot is unreadable"):
        open_storage(d)


def test_should_snapshot_thresholds(open_storage, tmp_path):
    s = open_storage(snapshot_min_bytes=10_000, snapshot_max_bytes=1_000_000)
    assert not s.should_snapshot()
    rows = [(i, i) for i in range(500)]
    while not s.should_snapshot():
        s.append("t", rows, [])
    assert 10_000 < s.log_bytes() < 20_000
    s.snapshot({"t": rows * (s.lsn)})
    assert not s.should_snapshot()
    snap_size = (tmp_path / "data" / "snapshot.bin").stat().st_size
    while not s.should_snapshot():  # now the snapshot is the bar
        s.append("t", rows, [])
    assert snap_size < s.log_bytes() < snap_size + 10_000

    small = open_storage(tmp_path / "small", snapshot_min_bytes=0, snapshot_max_bytes=3_000)
    small.snapshot({"t": rows * 50})  # big snapshot, but the hard cap still applies
    while not small.should_snapshot():
        small.append("t", rows[:10], [])
    assert small.log_bytes() >= 3_000


def test_snapshot_directory_copy_recovers(open_storage, tmp_path):
    """A copy of a live directory (no LOCK held) opens cleanly."""
    d = tmp_path / "data"
    s = open_storage(d)
    state = fill(s)
    s.snapshot(state)
    shutil.copytree(d, tmp_path / "copy")
    assert open_storage(tmp_path / "copy").load().tables == state


def test_snapshot_of_columns(open_storage, tmp_path, monkeypatch):
    """A table given as column chunks (a base kept as columns) is stored as bytes,
    mixed with plain rows, and read back as rows."""
    import numpy as np

    from noria_py.columns import ColumnChunk
    monkeypatch.setattr(snapmod, "CHUNK_COLUMN_ROWS", 4)        # several records
    d = tmp_path / "data"
    s = open_storage(d)
    s.append("t", [(0, 0.0)], [])
    cols = [np.arange(10), np.arange(10) / 2]
    s.snapshot({"t": iter([(0, 0.0), ColumnChunk(cols), (99, 9.5)]), "e": []})
    s.close()
    rec = open_storage(d).load()
    assert rec.tables["t"] == [(0, 0.0)] + [(i, i / 2) for i in range(10)] + [(99, 9.5)]
    assert rec.tables.get("e", []) == []
