"""Checkpoints on disk (noria_py/runtime/ondisk.py): a database reopened from its data
directory restores its views from them and replays only the log written since, and
its views equal DuckDB's over its tables; after a clean close, after a writer process
is SIGKILLed at random points, and with checkpoint files damaged (detected, that view
recomputed from the tables, never loaded wrong)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import noria_py
from noria_py import tuning
from noria_py.runtime import ondisk
from noria_tools.cli import main as cli
from tests.differential.helpers import DDL, KEYED, KEYS, VIEWS, Oracle, apply_model, normalize

ROOT = Path(__file__).resolve().parents[2]
#: the views of the differential tests but those without a stateful node (nothing to
#: checkpoint) and a few kinds more
NAMES = ["v_agg", "v_min_text", "v_join", "v_left", "v_distinct", "v_union", "v_union_all",
         "v_global", "v_having", "v_topk", "v_join_agg", "v_self", "v_avg", "v_in_sub",
         "v_except", "v_intersect", "v_filter"]


@pytest.fixture
def often(monkeypatch):
    """Cuts every ~2 KB of log, in-memory checkpoints every 4 messages: long chains of
    deltas on disk, and compactions."""
    monkeypatch.setattr(tuning, "DISK_CHECKPOINT_BYTES", 2000)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 4)
    monkeypatch.setattr(tuning, "ACK_EVERY", 4)
    monkeypatch.setattr(ondisk, "COMPACT_MIN", 20)


def _ops(rng: random.Random, n: int) -> list:
    v = lambda: rng.choice([None, 0, 1, 2, 3, 4, 5])    # noqa: E731
    out: list = []
    for _ in range(n):
        k = rng.randrange(6)
        if k in (0, 1):
            out.append(("ins1", [(v(), v(), rng.choice([None, "a", "b", "zz"]))
                                 for _ in range(rng.randint(1, 6))]))
        elif k == 2:
            out.append(("ins2", [(v(), v()) for _ in range(rng.randint(1, 4))]))
        elif k in (3, 4):
            out.append(("del1" if k == 3 else "del2", [rng.randrange(1000) for _ in range(2)]))
        else:
            out.append(("sql", rng.randrange(4)))
    return out


def _create(db) -> None:
    for sql in DDL:
        db.execute(sql)
    for n in NAMES:
        db.execute(f"CREATE VIEW {n} AS {VIEWS[n]}")
    for n, (sql, _) in KEYED.items():
        db.execute(f"CREATE VIEW {n} AS {sql}")


def _tables(db) -> dict[str, list[tuple]]:
    return {"t1": list(db.table("t1").rows()), "t2": list(db.table("t2").rows())}


def wrong_views(db, model=None) -> list[str]:
    """The views that differ from DuckDB's answer over ``model`` (default: the tables)."""
    db.wait()
    oracle = Oracle(DDL)
    oracle.load(model if model is not None else _tables(db))
    bad = [n for n in NAMES if normalize(db.view(n).all()) != oracle.query(VIEWS[n])]
    bad += [f"{n}[{k}]" for n, (_, sql) in KEYED.items() for k in KEYS
            if normalize(db.view(n).lookup(k)) != oracle.query(sql, (k,))]
    return bad


def _all_views() -> list[str]:
    return sorted(NAMES + list(KEYED))


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("seed", range(3))
def test_reopen_after_a_clean_close_restores_every_view(tmp_path, often, shards, seed):
    rng = random.Random(seed)
    d = str(tmp_path / "data")
    db = noria_py.connect(data_dir=d, shards=shards)
    _create(db)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    for round_ in range(3):
        for op in _ops(rng, rng.randint(20, 60)):
            apply_model(model, op, db)
        assert wrong_views(db, model) == []
        db.close()
        db = noria_py.connect(data_dir=d, shards=shards)
        assert sorted(db.reopened["from_checkpoints"]) == _all_views(), db.reopened
        assert db.reopened["batches_replayed"] == 0 and db.recovery_notes == []
        assert wrong_views(db, model) == [], round_
    db.close()


@pytest.mark.parametrize("seed", range(3))
def test_reopen_with_messages_in_flight_and_recovered_nodes(tmp_path, often, seed):
    """A seeded runtime leaves messages in flight between writes (a cut waits for a
    quiet point), and a stateful node recovered by tree clocks from a checkpoint taken
    after the last cut forgets the checkpoints after it (its chain on disk is then
    written afresh: for a DISTINCT or EXCEPT, whose deltas are the rows taken, carrying
    the old chain on would count rows twice)."""
    rng = random.Random(seed)
    d = str(tmp_path / "data")
    db = noria_py.connect(data_dir=d, shards=2, seed=seed)
    _create(db)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    for op in _ops(rng, 40):
        apply_model(model, op, db)
    kinds = ("distinct", "setop", "join", "aggregate", "extremum", "topk", "reader")
    picked = [n["id"] for n in db.graph() if n["kind"] in kinds]
    rng.shuffle(picked)
    for node in picked[:12]:
        for op in _ops(rng, 6):             # (past the last cut, some left in flight)
            apply_model(model, op, db)
        db.fail(node)
        for op in _ops(rng, 3):
            apply_model(model, op, db)
        db.recover(node)
    for op in _ops(rng, 20):
        apply_model(model, op, db)
    db._disk = None                 # a crash: the last cut is the last quiet one
    db.close()
    db = noria_py.connect(data_dir=d, shards=2, seed=seed)
    assert sorted(db.reopened["from_checkpoints"]) == _all_views()
    assert wrong_views(db, model) == []
    for op in _ops(rng, 20):
        apply_model(model, op, db)
    assert wrong_views(db, model) == []
    db.close()                      # (waits, then cuts)
    db = noria_py.connect(data_dir=d, shards=2, seed=seed)
    assert db.reopened["batches_replayed"] == 0
    assert wrong_views(db, model) == []
    db.close()


_WRITER = """
import os, random, sys
sys.path.insert(0, sys.argv[1])
import noria_py
from tests.runtime.test_ondisk import _create, _ops
from tests.differential.helpers import apply_model
d, seed, shards = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
db = noria_py.connect(data_dir=d, shards=shards)
if not db.tables():
    _create(db)
model = {"t1": list(db.table("t1").rows()), "t2": list(db.table("t2").rows())}
print("ready", flush=True)
while True:
    for op in _ops(rng, 50):
        apply_model(model, op, db)
    if rng.random() < 0.1:
        db.close()
        db = noria_py.connect(data_dir=d, shards=shards)
"""


def _kill_a_writer(d: str, seed: int, shards: int, after: float) -> None:
    env = dict(os.environ, NORIA_TUNING="DISK_CHECKPOINT_BYTES=3000,CHECKPOINT_EVERY=8,ACK_EVERY=4")
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(ROOT), d, str(seed), str(shards)],
                         stdout=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        time.sleep(after)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


@pytest.mark.parametrize("shards", [pytest.param(1, marks=pytest.mark.slow), 3])
def test_reopen_after_a_writer_is_sigkilled_at_random_points(tmp_path, shards):
    """The writer logs, cuts and reopens; it is killed at random instants (in the middle
    of a write, of a cut, of a reopen), then the database is opened and every view is
    compared with DuckDB's over its tables, five times over on the same directory."""
    d = str(tmp_path / "data")
    rng = random.Random(shards)
    used = replayed = 0
    for i in range(5):
        _kill_a_writer(d, 100 * shards + i, shards, rng.uniform(0.3, 2.0))
        db = noria_py.connect(data_dir=d, shards=shards)
        used += db.reopened["checkpoint_lsn"] is not None
        replayed += db.reopened["batches_replayed"] > 0
        assert wrong_views(db) == [], (i, db.reopened)
        db._disk = None                 # (no cut at this close: the next kill's writer reopens)
        db.close()
    assert used >= 3 and replayed >= 2, (used, replayed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_sigkill_soak(tmp_path, seed):
    d = str(tmp_path / "data")
    rng = random.Random(seed)
    for i in range(10):
        _kill_a_writer(d, 1000 * seed + i, 1 + seed % 4, rng.uniform(0.1, 3.0))
        db = noria_py.connect(data_dir=d, shards=1 + seed % 4)
        assert wrong_views(db) == [], (i, db.reopened)
        db._disk = None
        db.close()


def _closed_db(d: str, seed: int = 0) -> dict[str, list[tuple]]:
    rng = random.Random(seed)
    db = noria_py.connect(data_dir=d)
    _create(db)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    for op in _ops(rng, 60):
        apply_model(model, op, db)
    db.close()
    return model


def _files(d: str) -> list[Path]:
    return sorted((Path(d) / "checkpoints").glob("ck-*.bin"))


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("damage", ["truncated", "bit flipped", "zeroed tail", "deleted"])
def test_a_damaged_checkpoint_file_is_detected_and_its_view_recomputed(tmp_path, damage, every):
    d = str(tmp_path / "data")
    model = _closed_db(d)
    rng = random.Random(damage)
    for path in _files(d) if every else rng.sample(_files(d), 6):
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[:rng.randrange(len(data))]
        elif damage == "bit flipped":
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif damage == "zeroed tail":
            cut = rng.randrange(8, len(data))
            data[cut:] = bytes(len(data) - cut)
        keep = path.read_bytes()
        if damage == "deleted":
            path.unlink()
        else:
            path.write_bytes(bytes(data))
        db = noria_py.connect(data_dir=d)
        assert len(db.reopened["recomputed"]) == 1, (path.name, db.reopened)
        assert any(path.name in note for note in db.recovery_notes), db.recovery_notes
        assert wrong_views(db, model) == []
        db._disk = None                 # (leave the directory as it is for the next file)
        db.close()
        path.write_bytes(keep)


def test_every_flipped_byte_of_a_checkpoint_file_is_caught(tmp_path):
    """A COUNT's file (its reader, over it, keeps none: a reopen fills it from the
    COUNT), one bit flipped at every offset: every opening finds the damage and
    recomputes the view (never loads it wrong)."""
    d = str(tmp_path / "data")
    db = noria_py.connect(data_dir=d)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t GROUP BY a")
    db.table("t").insert([(i % 7, i) for i in range(100)])
    db.close()
    paths = _files(d)
    assert len(paths) == 1
    db = noria_py.connect(data_dir=d)
    assert db.reopened["from_checkpoints"] == ["c"] and db.reopened["recomputed"] == []
    assert sorted(db.view("c").all()) == [
        (a, len(range(a, 100, 7)), sum(range(a, 100, 7))) for a in range(7)]
    db.close()
    for path in paths:
        good = path.read_bytes()
        caught = 0
        for at in range(len(good)):
            bad = bytearray(good)
            bad[at] ^= 0x10
            path.write_bytes(bytes(bad))
            db = noria_py.connect(data_dir=d)
            caught += db.reopened["recomputed"] == ["c"]
            assert sorted(db.view("c").all()) == [
                (a, len(range(a, 100, 7)), sum(range(a, 100, 7))) for a in range(7)], at
            db._disk = None
            db.close()
        path.write_bytes(good)
        assert caught == len(good), path.name


def test_a_damaged_manifest_is_not_used(tmp_path):
    d = str(tmp_path / "data")
    model = _closed_db(d)
    path = Path(d) / "checkpoints" / "MANIFEST.json"
    text = path.read_text()
    lsn = noria_py.runtime.ondisk.DiskCheckpoints(Path(d)).read_manifest().lsn  # type: ignore[union-attr]
    path.write_text(text.replace(f'"lsn": {lsn}', f'"lsn": {lsn - 1}'))
    db = noria_py.connect(data_dir=d)
    assert db.reopened["checkpoint_lsn"] is None
    assert any("MANIFEST.json: damaged" in n for n in db.recovery_notes)
    assert wrong_views(db, model) == []
    db.close()


def test_checkpoints_of_another_catalog_are_not_used(tmp_path):
    """A view dropped and made again with other SQL under its name plans to the same
    shape: only the catalog tells the old checkpoints from the new ones."""
    d = str(tmp_path / "data")
    db = noria_py.connect(data_dir=d)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t WHERE b > 5 GROUP BY a")
    db.table("t").insert([(i % 3, i) for i in range(20)])
    db.close()
    old = {p.name: p.read_bytes() for p in (Path(d) / "checkpoints").iterdir()}
    db = noria_py.connect(data_dir=d)
    db.execute("DROP VIEW v")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t WHERE b > 6 GROUP BY a")
    db.close()
    for p in (Path(d) / "checkpoints").iterdir():   # a crash put the old ones back
        p.unlink()
    for name, data in old.items():
        (Path(d) / "checkpoints" / name).write_bytes(data)
    db = noria_py.connect(data_dir=d)
    assert db.reopened["unused_because"] == "the catalog changed since"
    assert sorted(db.view("v").all()) == [(0, 4), (1, 5), (2, 4)]   # (b > 5: 5, 5, 4)
    db.close()


def test_checkpoints_of_another_history_are_not_used(tmp_path):
    """Two directories with the same catalog whose batch L differs: the checkpoints of
    one are not taken for the other (the manifest names batch L's CRC)."""
    def make(d: str, last: tuple) -> None:
        db = noria_py.connect(data_dir=d)
        db.execute("CREATE TABLE t (a INT, b INT)")
        db.execute("CREATE VIEW v AS SELECT a, SUM(b) AS s FROM t GROUP BY a")
        db.table("t").insert([(1, 1), (2, 2)])
        db.table("t").insert([last])
        db.close()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    make(a, (1, 10))
    make(b, (1, 20))
    for p in (Path(b) / "checkpoints").iterdir():
        p.unlink()
    for p in (Path(a) / "checkpoints").iterdir():
        (Path(b) / "checkpoints" / p.name).write_bytes(p.read_bytes())
    db = noria_py.connect(data_dir=b)
    assert "is not the one the checkpoints saw" in db.reopened["unused_because"]
    assert sorted(db.view("v").all()) == [(1, 21), (2, 2)]
    db.close()


def test_other_shards_or_engine_versions_rebuild(tmp_path, monkeypatch):
    d = str(tmp_path / "data")
    model = _closed_db(d)
    db = noria_py.connect(data_dir=d, shards=2)
    assert "shards=1" in db.reopened["unused_because"] and wrong_views(db, model) == []
    db.close()                          # (a cut with shards=2)
    monkeypatch.setattr(ondisk, "engine_version", lambda: "99")
    db = noria_py.connect(data_dir=d, shards=2)
    assert "this is 99" in db.reopened["unused_because"] and wrong_views(db, model) == []
    db.close()


def test_a_repair_that_drops_batches_drops_the_checkpoints(tmp_path):
    d = tmp_path / "data"
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    for i in range(30):
        db.table("t").insert([(i % 3, i)])
    db.close()
    (wal,) = d.glob("wal-*.log")
    data = bytearray(wal.read_bytes())
    data[len(data) // 2] ^= 0xFF                   # damage in the middle: refused
    wal.write_bytes(bytes(data))
    with pytest.raises(noria_py.CorruptionError):
        noria_py.connect(data_dir=str(d))
    assert cli(["repair", "--data-dir", str(d)]) == 1
    assert (d / "checkpoints" / "MANIFEST.json").exists()
    assert cli(["repair", "--data-dir", str(d), "--yes"]) == 0
    assert not (d / "checkpoints").exists()
    db = noria_py.connect(data_dir=str(d))
    kept = db.table("t").rows()
    for i in range(30, 60):                        # past the batch the checkpoints saw
        db.table("t").insert([(i % 3, i)])
    db.wait()
    want = sorted((a, n) for a, n in
                  __import__("collections").Counter(r[0] for r in kept + [(i % 3, i) for i in range(30, 60)]).items())
    assert sorted(db.view("v").all()) == want
    db._disk = None                                # as a crash before any cut
    db.close()
    db = noria_py.connect(data_dir=str(d))
    assert sorted(db.view("v").all()) == want
    db.close()


@pytest.mark.parametrize("seed", range(30))
def test_the_chain_on_disk_is_the_stores_after_any_puts_restores_and_drops(tmp_path, seed):
    """Random puts of deltas (rows taken, and keyed entries), restores to an older
    checkpoint (``keep_upto``), drops and whole states, with cuts between: after each
    cut, every shard's file folds to the store's newest checkpoint of it."""
    from noria_py.batch import Batch
    from noria_py.runtime.checkpoints import CheckpointStore
    rng = random.Random(seed)
    store = CheckpointStore()
    store.journal = {}
    disk = ondisk.DiskCheckpoints(tmp_path, sync=False)
    forms = {"a": "input", "b": "keyed"}
    times = {"a": 0, "b": 0}

    def delta(form: str):
        if form == "input":
            return [(0, Batch([(rng.randrange(4),) for _ in range(3)], [rng.choice([1, 1, -1])
                                                                        for _ in range(3)]))]
        return {rng.randrange(6): rng.choice([None, (rng.randrange(9),)]) for _ in range(2)}

    for step in range(60):
        nid = rng.choice("ab")
        form, r = forms[nid], rng.random()
        times[nid] += 1
        if r < 0.1 or not store.has(nid):
            store.put(nid, times[nid], {}, form, delta(form) if form == "keyed" else
                      [(0, Batch([(1,)], [1]))], True, 0)
        elif r < 0.2:
            store.keep_upto(nid, rng.randrange(times[nid]))
        elif r < 0.25:
            store.drop(nid)
            times[nid] = 0
            continue
        else:
            store.put(nid, times[nid], {}, form, delta(form), False, rng.randrange(times[nid]))
        if rng.random() < 0.3:
            nodes = {f"v/{n}": (n, forms[n]) for n in "ab" if store.has(n)}
            disk.write_cut(step, None, [], 1, {}, nodes, store)
            cut = disk.read_manifest()
            assert cut is not None
            for key, (n, _) in nodes.items():
                got, want = disk.load(cut, key), store.latest(n, ondisk.EVER)
                assert got is not None and want is not None
                assert (got.inputs, got.entries) == (want.inputs, want.entries), (step, n)


def test_a_cut_that_fails_leaves_the_write_done_and_the_last_cut_in_force(tmp_path, often,
                                                                          monkeypatch):
    d = str(tmp_path / "data")
    db = noria_py.connect(data_dir=d)
    _create(db)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    rng = random.Random(5)
    for op in _ops(rng, 30):
        apply_model(model, op, db)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ondisk.DiskCheckpoints, "write_cut", full)
    for op in _ops(rng, 120):                   # cuts due, and failing
        apply_model(model, op, db)
    assert any("No space left" in n for n in db.recovery_notes)
    assert wrong_views(db, model) == []
    db.close()
    monkeypatch.undo()
    db = noria_py.connect(data_dir=d)
    assert db.reopened["batches_replayed"] > 0
    assert wrong_views(db, model) == []
    db.close()
