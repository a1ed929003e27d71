"""db.memory(): bytes per node shard, held to tracemalloc's growth within a factor of 2."""
from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import noria_py
from noria_py.memory import deep_size
from noria_py.ops.dense import DenseRows
from noria_tools import workloads

FACTOR = 2.0


def _grown(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", ["count", "rows", "partial"])
def test_memory_within_factor_of_tracemalloc(shape):
    """The views' nodes' estimate (bases left out) against what loading them allocated:
    the tables are loaded first, then the view is created and (partial) read."""
    db = noria_py.connect(partial=shape == "partial", clocks=False)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT)")
    db.table("t").insert([(i, i % 5000, f"text {i}") for i in range(20000)])
    if shape == "count":
        sql = "SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a"
    else:
        sql = "SELECT id, b, a + 1 AS c FROM t WHERE a = ?"    # rows of their own

    def load():
        db.execute(f"CREATE VIEW v AS {sql}")
        if shape == "partial":
            db.view("v").lookup_many(list(range(0, 5000, 2)))

    before = sum(db.memory().values())
    grown = _grown(load)
    # every node's growth: a partial view's first upquery builds an index on the base
    views = sum(db.memory().values()) - before
    assert grown / FACTOR <= views <= grown * FACTOR, (views, grown)
    if shape == "partial":
        # what eviction accounts stays near the measure too
        held = db._partial.held_bytes()
        assert grown / FACTOR <= held <= grown * FACTOR, (held, grown)


def test_memory_lists_bases_apart():
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    db.execute("CREATE VIEW v AS SELECT id FROM t WHERE a = ?")
    db.table("t").insert([(i, i) for i in range(100)])
    kinds = {n["id"]: n["kind"] for n in db.graph()}
    every, views = db.memory(), db.memory(bases=False)
    assert {kinds[n] for n in every} == {"base", "reader"}
    assert {kinds[n] for n in views} == {"reader"}
    assert all(type(b) is int and b > 0 for b in every.values())


def test_partial_reader_fills_within_factor_of_tracemalloc():
    """The fills alone (the base's index already built): the reader's own growth."""
    db = noria_py.connect(partial=True, clocks=False)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.table("t").insert([(i, i % 5000, i * 1000) for i in range(20000)])
    db.execute("CREATE VIEW v AS SELECT id, b * 3 AS c FROM t WHERE a = ?")
    v = db.view("v")
    v.lookup(1)
    (reader,) = db._views["v"].readers
    before = db.memory()[reader]
    grown = _grown(lambda: v.lookup_many(list(range(2, 5000, 2))))
    views = db.memory()[reader] - before
    assert grown / FACTOR <= views <= grown * FACTOR, (views, grown)


def test_partial_path_fills_within_factor_of_tracemalloc():
    """The vote view's fills (its reader, and the partial join and COUNT above it; the
    bases' indexes already built): what eviction accounts, against the growth."""
    db = noria_py.connect(partial=True, clocks=False)
    workloads.setup(db, 20000)
    db.table("vote").insert([(i * 7919 % 20000, i) for i in range(100000)])
    v = db.view(workloads.VIEW_NAME)
    v.lookup(1)
    assert {n["kind"] for n in db.graph() if n["partial"]} == {"aggregate", "join", "reader"}
    before = db._partial.held_bytes()
    grown = _grown(lambda: v.lookup_many(list(range(2, 20000, 2))))
    held = db._partial.held_bytes() - before
    assert grown / FACTOR <= held <= grown * FACTOR, (held, grown)


@pytest.mark.parametrize("view", [
    "SELECT id, b FROM t WHERE a = ? ORDER BY b DESC, id LIMIT 3",     # a partial TopK
    "SELECT DISTINCT a, b FROM t WHERE a = ?",                         # a partial DISTINCT
])
def test_partial_topk_and_distinct_fills_within_factor_of_tracemalloc(view):
    """A partial TopK's or DISTINCT's fills with its reader's (the base's index already
    built): what eviction accounts, against the growth."""
    db = noria_py.connect(partial=True, clocks=False)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.table("t").insert([(i, i % 300, i % 7) for i in range(3000)])
    db.execute(f"CREATE VIEW v AS {view}")
    v = db.view("v")
    v.lookup(1)
    assert {n["kind"] for n in db.graph() if n["partial"]} in ({"topk", "reader"},
                                                              {"distinct", "reader"})
    before = db._partial.held_bytes()
    grown = _grown(lambda: v.lookup_many(list(range(2, 300, 2))))
    held = db._partial.held_bytes() - before
    assert grown / FACTOR <= held <= grown * FACTOR, (held, grown)


def test_array_views_count_once():
    """A view of an array (a slice, its bits as another dtype, ``DenseRows._bits``)
    counts its base once: the memory is the base's."""
    a = np.arange(100_000, dtype=np.int64)
    assert deep_size([a, a.view(np.uint64), a[10:]]) < a.nbytes + 1000
    assert deep_size([a[10:]]) >= a.nbytes          # (a view alone keeps its base alive)
    d = DenseRows(2)
    keys = np.arange(100_000, dtype=np.int64)
    d.apply(keys, [keys, keys * 2], np.ones(100_000, dtype=np.int64))
    arrays = d.present.nbytes + sum(p.nbytes for p in d.parts)
    assert arrays <= deep_size(d) < arrays + 5000, (deep_size(d), arrays)
