"""Damaged data directories (issue 24, part 2): a torn tail (what a crash leaves) is cut
and noted; any other damage is refused with a CorruptionError naming the file and the
byte offset, and ``noria-py repair`` says what it would drop before it drops it.

Every test here asks the same of each damaged directory: either opening is refused
(and the files are left as they were), or every record before the damage is there.
Never fewer rows without an error."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import noria_py
from noria_py.storage import CorruptionError, Storage, repair
from noria_py.storage.log import LOG_HEADER_SIZE
from noria_tools.cli import main as cli

WAL1 = "wal-00000001.log"
WAL2 = "wal-00000002.log"


def small_log(d: Path) -> tuple[list[int], list[dict]]:
    """Five batches into two tables (rows, a delete, a drop, columns); returns the record
    boundaries (the log's size after the header and after each record) and the tables
    after each batch."""
    import numpy as np
    s = Storage(d, sync=False)
    bounds = [LOG_HEADER_SIZE]
    states: list[dict] = [{}]
    steps = [
        lambda: s.append("t", [(1, "a"), (2, "b")], []),
        lambda: s.append("u", [(0.5, None, True)], []),
        lambda: s.append("t", [(3, "c")], [(1, "a")]),
        lambda: s.append_columns("v", [np.array([7, 8]), np.array([0.25, 1.5])]),
        lambda: s.append("u", [(1.5, "x", False)], []),
    ]
    for step in steps:
        step()
        bounds.append(LOG_HEADER_SIZE + s.log_bytes())
        states.append({k: sorted(v, key=repr) for k, v in s.load().tables.items()})
    s.close()
    assert (d / WAL1).stat().st_size == bounds[-1]
    return bounds, states


def digest(d: Path) -> dict[str, str]:
    """Every file's hash, the checkpoints' directory's too."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.name != "LOCK" and p.is_file()}


def fresh(tmp_path: Path, name: str, wal: bytes) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / WAL1).write_bytes(wal)
    return d


def opened_or_refused(d: Path, bounds: list[int], states: list[dict], pos: int) -> str:
    """Open a log damaged at byte ``pos``: a refusal must name the start of the record
    holding ``pos`` (0 for the header) and change nothing; an opening is allowed only
    when that record is the last (a torn tail) and must keep every record before it."""
    k = max(i for i, b in enumerate(bounds) if b <= pos) if pos >= LOG_HEADER_SIZE else -1
    start = bounds[k] if k >= 0 else 0
    before = digest(d)
    try:
        s = Storage(d, sync=False)
    except CorruptionError as exc:
        assert f"{WAL1}' is damaged at byte {start}:" in str(exc), (pos, str(exc))
        assert f"noria-py repair --data-dir {d}" in str(exc)
        assert digest(d) == before, pos
        return "refused"
    try:
        rec = s.load()
        assert k == len(bounds) - 2, f"damage at {pos}, in record {k + 1} of {len(bounds) - 1}, was cut silently"
        assert rec.lsn == k and {t: sorted(r, key=repr) for t, r in rec.tables.items()} == states[k], pos
        (note,) = rec.report
        assert f"torn tail at byte {start}" in note and f"recovered up to batch {k}" in note, note
        assert (d / WAL1).stat().st_size == start and s.log_bytes() == start - LOG_HEADER_SIZE
    finally:
        s.close()
    return "torn"


@pytest.mark.parametrize("mask", [0x01, 0x40, 0xFF])
def test_a_flipped_byte_at_every_offset_is_refused_or_a_torn_tail(tmp_path, mask):
    bounds, states = small_log(tmp_path / "src")
    good = (tmp_path / "src" / WAL1).read_bytes()
    outcomes = {"refused": 0, "torn": 0}
    for pos in range(len(good)):
        bad = bytearray(good)
        bad[pos] ^= mask
        d = fresh(tmp_path, f"flip{pos}", bytes(bad))
        outcomes[opened_or_refused(d, bounds, states, pos)] += 1
        shutil.rmtree(d)
    # everything before the last record is refused; the last record's damage may be
    # taken for a torn write (it cannot be told from one), and is cut where it starts
    assert outcomes["refused"] >= bounds[-2]
    assert outcomes["refused"] + outcomes["torn"] == len(good)


def test_a_log_truncated_at_every_length_is_refused_or_cut_at_a_record(tmp_path):
    bounds, states = small_log(tmp_path / "src")
    good = (tmp_path / "src" / WAL1).read_bytes()
    for cut in range(len(good) + 1):
        d = fresh(tmp_path, f"cut{cut}", good[:cut])
        if cut < LOG_HEADER_SIZE:
            with pytest.raises(CorruptionError, match=f"at byte 0: the file is {cut} bytes, shorter than"):
                Storage(d, sync=False)
            assert (d / WAL1).read_bytes() == good[:cut]
        else:
            k = max(i for i, b in enumerate(bounds) if b <= cut)
            with Storage(d, sync=False) as s:
                rec = s.load()
                assert rec.lsn == k and {t: sorted(r, key=repr) for t, r in rec.tables.items()} == states[k]
                assert (d / WAL1).stat().st_size == bounds[k]
                assert len(rec.report) == (cut != bounds[k]), cut
        shutil.rmtree(d)


def test_zeros_over_a_record_in_the_middle_are_refused(tmp_path):
    """Zero-filled bytes end a log only when nothing follows them."""
    bounds, _ = small_log(tmp_path / "src")
    good = bytearray((tmp_path / "src" / WAL1).read_bytes())
    good[bounds[1]:bounds[2]] = bytes(bounds[2] - bounds[1])
    d = fresh(tmp_path, "zeros", bytes(good))
    with pytest.raises(CorruptionError, match=f"at byte {bounds[1]}: zero-filled.*follows at byte {bounds[2]}"):
        Storage(d, sync=False)


# -- missing files --------------------------------------------------------------------


def test_a_missing_log_is_refused_when_the_catalog_lists_tables(tmp_path):
    d = tmp_path / "data"
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE t (a INT PRIMARY KEY)")
    db.table("t").insert([(i,) for i in range(10)])
    db.close()
    (d / WAL1).unlink()
    with pytest.raises(CorruptionError, match=f"{WAL1}' is missing.*catalog.json lists tables.*noria-py repair"):
        noria_py.connect(data_dir=str(d))
    assert not (d / WAL1).exists()


def test_a_missing_log_after_a_snapshot_is_refused_but_an_interrupted_snapshot_is_not(tmp_path):
    d = tmp_path / "data"
    with Storage(d, sync=False) as s:
        s.append("t", [(1,)], [])
        s.snapshot({"t": [(1,)]})
        s.append("t", [(2,)], [])
    shutil.copytree(d, tmp_path / "copy")
    (d / WAL2).unlink()
    with pytest.raises(CorruptionError, match=f"{WAL2}' is missing.*snapshot.bin covers batches up to 1"):
        Storage(d, sync=False)
    # a snapshot interrupted before its new log: the log it covers is still there
    d = tmp_path / "copy"
    (d / WAL2).unlink()
    (d / WAL1).write_bytes(b"anything: it is covered by the snapshot")
    with Storage(d, sync=False) as s:
        rec = s.load()
        assert rec.tables == {"t": [(1,)]} and rec.lsn == 1 and "covered by the snapshot" in rec.report[0]
    assert sorted(p.name for p in d.glob("wal-*")) == [WAL2]


def test_a_new_directory_opens_empty(tmp_path):
    with Storage(tmp_path / "new", sync=False) as s:
        assert s.load().tables == {} and s.lsn == 0


# -- the catalog against the data -----------------------------------------------------


def _table_with_rows(d: Path, n: int = 20) -> None:
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.table("t").insert([(i, i * 10) for i in range(n)])
    db.close()


def test_a_lost_catalog_is_refused_not_taken_for_an_empty_database(tmp_path):
    d = tmp_path / "data"
    _table_with_rows(d)
    (d / "catalog.json").unlink()
    with pytest.raises(CorruptionError, match="does not list table 't', which has 20 row"):
        noria_py.connect(data_dir=str(d))
    # refused, not half-open: the directory is not locked afterwards
    with pytest.raises(CorruptionError):
        noria_py.connect(data_dir=str(d))


def test_a_catalog_whose_column_type_changed_is_refused(tmp_path):
    d = tmp_path / "data"
    _table_with_rows(d)
    path = d / "catalog.json"
    doc = json.loads(path.read_text())
    doc["statements"] = [s.replace("v INT", "v TEXT") for s in doc["statements"]]
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptionError, match="stored rows of table 't' do not match its definition"):
        noria_py.connect(data_dir=str(d))
    # repair drops the rows the catalog refuses, after saying so
    before = digest(d)
    assert cli(["repair", "--data-dir", str(d)]) == 1
    assert digest(d) == before
    assert cli(["repair", "--data-dir", str(d), "--yes"]) == 0
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT COUNT(*) FROM t").rows == [(0,)]
    db.execute("INSERT INTO t VALUES (1, 'one')")
    db.close()
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT k, v FROM t").rows == [(1, "one")]
    db.close()


# -- repair ---------------------------------------------------------------------------


def _votes(d: Path, n: int = 1000) -> None:
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE vote (id INT PRIMARY KEY, article INT)")
    for i in range(n):
        db.table("vote").insert([(i, i % 7)])
    db.close()


def test_a_flipped_byte_in_the_middle_is_refused_and_repair_says_what_it_drops(tmp_path, capsys):
    """The issue's case: one byte flipped in the middle of a 1,000-row log."""
    d = tmp_path / "data"
    _votes(d)
    wal = d / WAL1
    data = bytearray(wal.read_bytes())
    mid = len(data) // 2
    data[mid] ^= 0x40
    wal.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=f"{WAL1}' is damaged at byte") as err:
        noria_py.connect(data_dir=str(d))
    offset = int(str(err.value).split("damaged at byte ")[1].split(":")[0])
    assert mid - 64 < offset <= mid
    before = digest(d)

    assert cli(["repair", "--data-dir", str(d)]) == 1        # a dry run: nothing changes
    out = capsys.readouterr().out
    assert digest(d) == before
    assert f"would drop: {WAL1}: bytes {offset}..{len(data)}" in out
    kept = int(out.split("kept up to batch ")[1].split(";")[0])
    assert f"table 'vote': {999 - kept} record(s), {999 - kept} row(s) inserted, 0 deleted" in out
    assert "nothing changed; run again with --yes" in out

    assert cli(["repair", "--data-dir", str(d), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"dropped: {WAL1}: bytes {offset}..{len(data)}" in out and f"now stands at batch {kept}" in out
    (backup,) = d.glob(f"{WAL1}.damaged-*")
    assert backup.read_bytes() == bytes(data)
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT COUNT(*) FROM vote").rows == [(kept,)]
    assert sorted(db.execute("SELECT id FROM vote").rows) == [(i,) for i in range(kept)]
    db.table("vote").insert([(5000, 1)])
    db.close()
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT COUNT(*) FROM vote").rows == [(kept + 1,)]
    assert db.recovery_notes == []
    db.close()
    assert cli(["repair", "--data-dir", str(d)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_repair_of_a_missing_log_keeps_the_snapshot(tmp_path):
    d = tmp_path / "data"
    with Storage(d, sync=False) as s:
        s.append("t", [(1,), (2,)], [])
        s.snapshot({"t": [(1,), (2,)]})
        s.append("t", [(3,)], [])
    (d / WAL2).unlink()
    plan = repair(d, sync=False)
    assert not plan.applied and plan.lines()[0].startswith(f"would drop: {WAL2}: the log is missing")
    assert repair(d, apply=True, sync=False).applied
    with Storage(d, sync=False) as s:
        assert sorted(s.load().tables["t"]) == [(1,), (2,)] and s.lsn == 1


def test_repair_leaves_a_torn_tail_to_opening(tmp_path):
    bounds, _ = small_log(tmp_path / "data")
    d = tmp_path / "data"
    with open(d / WAL1, "r+b") as f:
        f.truncate(bounds[-1] - 3)
    before = digest(d)
    plan = repair(d, apply=True, sync=False)
    assert not plan.needed and not plan.applied
    out = "\n".join(plan.lines())
    assert f"not damage: {WAL1}: torn tail at byte {bounds[-2]}" in out and "nothing to repair" in out
    assert digest(d) == before


def test_repair_of_a_lost_catalog_drops_the_unlisted_tables_rows_after_saying_so(tmp_path, capsys):
    d = tmp_path / "data"
    _table_with_rows(d)
    (d / "catalog.json").unlink()
    before = digest(d)
    assert cli(["repair", "--data-dir", str(d)]) == 1
    assert "would drop: table 't': 20 of its 20 row(s): catalog.json does not list this table" in capsys.readouterr().out
    assert digest(d) == before
    assert cli(["repair", "--data-dir", str(d), "--yes"]) == 0
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")     # the old rows do not come back
    db.table("t").insert([(0, 1)])
    db.close()
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT k, v FROM t").rows == [(0, 1)]
    db.close()


def test_repair_refuses_a_directory_in_use(tmp_path, capsys):
    d = tmp_path / "data"
    with Storage(d, sync=False):
        assert cli(["repair", "--data-dir", str(d)]) == 2
        assert "already in use" in capsys.readouterr().err


# -- restart after repair (issue 24, part 7) --------------------------------------------


@pytest.mark.parametrize("short", [1, 3, 9, 20])
def test_an_append_after_a_torn_tail_is_cut_survives_the_next_restart(tmp_path, short):
    """The cut must be at the torn record's start: cut anywhere later, the next append
    lands after leftover bytes, and the restart after it loses (or refuses) it."""
    bounds, states = small_log(tmp_path / "data")
    d = tmp_path / "data"
    with open(d / WAL1, "r+b") as f:
        f.truncate(bounds[-1] - short)           # the last batch is torn
    s = Storage(d, sync=False)
    rec = s.load()
    assert rec.lsn == 4
    (note,) = rec.report
    torn = bounds[-1] - short - bounds[-2]
    assert f"torn tail at byte {bounds[-2]}" in note and f"{torn} byte(s)" in note
    assert (d / WAL1).stat().st_size == bounds[-2]
    assert s.log_bytes() == bounds[-2] - LOG_HEADER_SIZE
    assert s.append("w", [("after",)], []) == 5
    size = LOG_HEADER_SIZE + s.log_bytes()
    s.close()
    assert (d / WAL1).stat().st_size == size
    with Storage(d, sync=False) as s:
        rec = s.load()
        assert rec.report == [] and rec.lsn == 5
        assert rec.tables["w"] == [("after",)]
        assert {t: sorted(r, key=repr) for t, r in rec.tables.items() if t != "w"} == states[4]
        assert s.log_bytes() == size - LOG_HEADER_SIZE


def test_an_append_after_a_torn_tail_is_cut_survives_through_the_engine(tmp_path):
    d = tmp_path / "data"
    _votes(d, 10)
    wal = d / WAL1
    wal.write_bytes(wal.read_bytes()[:-2])
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT COUNT(*) FROM vote").rows == [(9,)]
    assert len(db.recovery_notes) == 1 and "torn tail" in db.recovery_notes[0]
    db.table("vote").insert([(9, 2)])
    db.close()
    db = noria_py.connect(data_dir=str(d))
    assert db.execute("SELECT COUNT(*) FROM vote").rows == [(10,)] and db.recovery_notes == []
    db.close()


def test_a_damaged_header_is_refused_and_repair_lists_the_records_behind_it(tmp_path):
    bounds, _ = small_log(tmp_path / "data")
    d = tmp_path / "data"
    data = bytearray((d / WAL1).read_bytes())
    data[12] ^= 0x01                                # the generation: the header's CRC fails
    (d / WAL1).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="at byte 0: bad header: log header checksum mismatch") as err:
        Storage(d, sync=False)
    assert isinstance(err.value, noria_py.StorageError) and isinstance(err.value, noria_py.Error)
    plan = repair(d, sync=False)
    assert plan.lines()[0] == (
        f"would drop: {WAL1}: bytes 0..{bounds[-1]} ({bounds[-1]} bytes): bad header: log header checksum "
        f"mismatch; kept up to batch 0; the dropped bytes hold valid-looking records: "
        f"table 't': 2 record(s), 3 row(s) inserted, 1 deleted; table 'u': 2 record(s), 2 row(s) inserted, "
        f"0 deleted; table 'v': 1 record(s), 2 row(s) inserted, 0 deleted")
    assert (d / WAL1).read_bytes() == bytes(data)
    assert repair(d, apply=True, sync=False).applied
    with Storage(d, sync=False) as s:
        assert s.load().tables == {} and s.lsn == 0
        assert s.append("t", [(1, "a")], []) == 1
    with Storage(d, sync=False) as s:
        assert s.load().tables == {"t": [(1, "a")]}
