"""A range view's reader failed and recovered with tree clocks (docs/recovery.md): its
sorted index (ops/reader.py, range parameters) is derived state, built again from the
rows it comes back with, so range reads after the recovery answer as before the
failure plus the writes since, with and without checkpoints."""
from __future__ import annotations

import pytest

import noria_py


def _want(held: dict[int, int], lo: int, hi: int) -> list[tuple]:
    return sorted((i, a) for i, a in held.items() if a is not None and lo < a <= hi)


@pytest.mark.parametrize("checkpoints", [False, True])
def test_a_range_views_reader_recovers_and_reads_by_range(checkpoints):
    db = noria_py.connect(shards=1, seed=5, checkpoints=checkpoints)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    db.execute("CREATE VIEW v AS SELECT id, a FROM t WHERE a > ? AND a <= ? ORDER BY id")
    t = db.table("t")
    held: dict[int, int] = {}

    def write(rows):
        t.insert(rows)
        held.update(rows)

    write([(i, i % 9 if i % 7 else None) for i in range(60)])
    db.wait()
    assert db.view("v").lookup(2, 5) == _want(held, 2, 5)          # the index built
    reader = next(n for n in db.graph() if n["kind"] == "reader")
    write([(i, i % 4) for i in range(60, 80)])
    db.fail(reader["id"])
    write([(i, 8) for i in range(80, 90)])
    db.execute("DELETE FROM t WHERE id < 10")
    for i in range(10):
        held.pop(i)
    report = db.recover(reader["id"], strategy="treeclock")
    assert report.strategy == "treeclock"
    assert (report.checkpoint is not None) == checkpoints
    db.wait()
    for lo, hi in [(2, 5), (-1, 8), (7, 8), (8, 8), (3, 2)]:
        assert db.view("v").lookup(lo, hi) == _want(held, lo, hi), (lo, hi)
    db.execute("DELETE FROM t WHERE a = 8")
    held = {i: a for i, a in held.items() if a != 8}
    db.wait()
    assert db.view("v").lookup(-1, 8) == _want(held, -1, 8)
