"""Random write sequences through the engine, compared with DuckDB running the same SQL.

Half the views exist before any data arrives (the incremental path), the other half
are created midway (the initialization path). Runs with 1 and 4 shards, in FIFO
order and with pseudo-random message interleavings.
"""
from __future__ import annotations

import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning

from .oracle import Oracle, normalize

DDL = [
    "CREATE TABLE t1 (a INT, b INT, c TEXT)",
    "CREATE TABLE t2 (x INT, y INT)",
]

# name -> SQL valid in both the engine and DuckDB (explicit NULLS FIRST/LAST where
# order matters, since the engine defaults to SQLite's order and DuckDB to its own)
VIEWS = {
    "v_filter": "SELECT a, b FROM t1 WHERE a > 2 OR c IS NULL",
    "v_agg": "SELECT a, COUNT(*) AS n, SUM(b) AS s, MIN(b) AS lo, MAX(b) AS hi FROM t1 GROUP BY a",
    "v_min_text": "SELECT a, MIN(c) AS m, MAX(c) AS mx FROM t1 GROUP BY a",
    "v_join": "SELECT t1.a, t1.b, t2.y FROM t1 JOIN t2 ON t1.a = t2.x",
    "v_left": "SELECT t1.a, t1.b, t2.y FROM t1 LEFT JOIN t2 ON t1.b = t2.x",
    "v_distinct": "SELECT DISTINCT a, c FROM t1",
    "v_union": "SELECT a FROM t1 UNION SELECT x FROM t2",
    "v_union_all": "SELECT a, b FROM t1 WHERE a < 3 UNION ALL SELECT x, y FROM t2",
    "v_global": "SELECT COUNT(*) AS n, SUM(a) AS s, AVG(b) AS m, COUNT(c) AS k FROM t1",
    "v_having": "SELECT a, COUNT(DISTINCT b) AS d FROM t1 GROUP BY a HAVING COUNT(*) > 1",
    "v_topk": "SELECT a, b, c FROM t1 ORDER BY a DESC NULLS LAST, b ASC NULLS FIRST, c ASC NULLS FIRST LIMIT 3",
    "v_join_agg": "SELECT t2.y, COUNT(*) AS n, SUM(t1.b) AS s FROM t1 JOIN t2 ON t1.a = t2.x GROUP BY t2.y",
    "v_exprs": "SELECT COALESCE(b, -1) + 1 AS b1, CASE WHEN a > 2 THEN 'hi' ELSE c END AS k, "
               "a * 2 - b AS d FROM t1 WHERE b BETWEEN 1 AND 4 OR a IN (0, 5)",
    "v_sub": "SELECT s.a, s.n FROM (SELECT a, COUNT(*) AS n FROM t1 GROUP BY a) AS s WHERE s.n > 1",
    "v_self": "SELECT p.a, q.c FROM t1 AS p JOIN t1 AS q ON p.a = q.b",
    "v_avg": "SELECT y, AVG(x) AS m, COUNT(x) AS k FROM t2 GROUP BY y",
    # subqueries, set operations and SELECT without FROM (issue 7)
    "v_in_sub": "SELECT a, b FROM t1 WHERE a IN (SELECT x FROM t2 WHERE y > 1)",
    "v_not_in": "SELECT a, b FROM t1 WHERE b NOT IN (SELECT y FROM t2)",
    "v_in_mark": "SELECT a, a IN (SELECT x FROM t2) AS m, b NOT IN (SELECT y FROM t2) AS n FROM t1",
    "v_exists_corr": "SELECT a FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.x = t1.a AND t2.y > t1.b)",
    "v_scalar_corr": "SELECT a, (SELECT COUNT(*) FROM t2 WHERE t2.x < t1.a) AS n FROM t1",
    "v_scalar": "SELECT a, (SELECT MAX(y) FROM t2) AS m FROM t1",
    "v_except": "SELECT a FROM t1 EXCEPT SELECT x FROM t2",
    "v_intersect": "SELECT a, b FROM t1 INTERSECT SELECT x, y FROM t2",
    "v_no_from": "SELECT 1 AS one, 2 + 3 AS five",
}
KEYED = {
    # name -> (engine SQL with ?, DuckDB SQL for one key value, key domain)
    "k_sum": ("SELECT a, SUM(b) AS s FROM t1 WHERE a = ? GROUP BY a",
              "SELECT a, SUM(b) AS s FROM t1 WHERE a = ? GROUP BY a"),
    "k_rows": ("SELECT b, c FROM t1 WHERE a = ?",
               "SELECT b, c FROM t1 WHERE a = ?"),
    "k_top": ("SELECT a, b FROM t1 WHERE a = ? ORDER BY b DESC NULLS LAST LIMIT 2",
              "SELECT a, b FROM t1 WHERE a = ? ORDER BY b DESC NULLS LAST LIMIT 2"),
}
KEYS = [None, 0, 1, 2, 3, 4, 5]

ints = st.one_of(st.none(), st.integers(0, 5))
texts = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "zz"]))
t1_rows = st.lists(st.tuples(ints, ints, texts), min_size=1, max_size=6)
t2_rows = st.lists(st.tuples(ints, ints), min_size=1, max_size=4)
ops = st.lists(st.one_of(
    st.tuples(st.just("ins1"), t1_rows),
    st.tuples(st.just("ins2"), t2_rows),
    st.tuples(st.just("del1"), st.lists(st.integers(0, 1000), min_size=1, max_size=3)),
    st.tuples(st.just("del2"), st.lists(st.integers(0, 1000), min_size=1, max_size=2)),
    st.tuples(st.just("sql"), st.sampled_from(range(4))),
), min_size=1, max_size=12)

# SQL writes, each with the same change written in Python for the model
SQL_WRITES = [
    ("UPDATE t1 SET b = b + 1 WHERE a = 1", "t1",
     lambda r: [(r[0], None if r[1] is None else r[1] + 1, r[2])] if r[0] == 1 else [r]),
    ("DELETE FROM t1 WHERE c = 'a'", "t1", lambda r: [] if r[2] == "a" else [r]),
    ("UPDATE t2 SET y = NULL WHERE x > 3", "t2",
     lambda r: [(r[0], None)] if r[0] is not None and r[0] > 3 else [r]),
    ("DELETE FROM t2 WHERE y IS NULL", "t2", lambda r: [] if r[1] is None else [r]),
]


def _apply_model(model: dict[str, list[tuple]], op, db) -> None:
    kind, arg = op
    if kind in ("ins1", "ins2"):
        name = "t1" if kind == "ins1" else "t2"
        db.table(name).insert(arg)
        model[name].extend(arg)
    elif kind in ("del1", "del2"):
        name = "t1" if kind == "del1" else "t2"
        rows = model[name]
        if not rows:
            return
        picked = sorted({i % len(rows) for i in arg}, reverse=True)
        victims = [rows[i] for i in picked]
        db.table(name).delete(victims)
        for i in picked:
            del rows[i]
    else:
        sql, name, change = SQL_WRITES[arg]
        db.execute(sql)
        model[name] = [new for r in model[name] for new in change(r)]


def _check(db, oracle: Oracle, model, views) -> None:
    db.wait()
    for name in model:
        assert normalize(_table_rows(db, name)) == normalize(model[name]), f"table {name}"
    for name in views:
        got = normalize(db.view(name).all())
        want = oracle.query(VIEWS[name])
        assert got == want, f"view {name}: engine {sorted(got.items(), key=repr)} != duckdb {sorted(want.items(), key=repr)}"
    for name, (_, duck_sql) in KEYED.items():
        v = db.view(name)
        for k in KEYS:
            got = normalize(v.lookup(k))
            want = oracle.query(duck_sql, (k,)) if k is not None else normalize([])
            assert got == want, f"view {name} key {k}: engine {got} != duckdb {want}"


def _table_rows(db, name: str) -> list[tuple]:
    return list(db.execute(f"SELECT * FROM {name}").fetchall())


# (shards, seed, DENSE_MIN): the last two run every batch through the dense form's
# array path (ops/dense.py), which real batches take from 32 rows up
CONFIGS = [(1, None, 32), (1, 3, 32), (4, None, 32), (4, 11, 32), (1, None, 1), (4, 11, 1)]


@pytest.mark.parametrize("shards,seed,dense_min", CONFIGS,
                         ids=[f"shards{s}-seed{d}-dense{m}" for s, d, m in CONFIGS])
@settings(max_examples=int(os.environ.get("NORIA_DIFF_EXAMPLES", "25")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=ops, second=ops, split=st.integers(0, len(VIEWS)))
def test_views_match_duckdb(shards, seed, dense_min, first, second, split):
    with mock.patch.object(tuning, "ARRAY_MIN", dense_min):
        _run(shards, seed, first, second, split)


def _run(shards, seed, first, second, split):
    db = noria_py.connect(shards=shards, seed=seed)
    for sql in DDL:
        db.execute(sql)
    names = list(VIEWS)
    early, late = names[:split], names[split:]
    for name in early:
        db.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
    for name, (sql, _) in KEYED.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    model = {"t1": [], "t2": []}
    oracle = Oracle(DDL)
    for op in first:
        _apply_model(model, op, db)
    for name in late:
        db.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
    for op in second:
        _apply_model(model, op, db)
    oracle.load(model)
    _check(db, oracle, model, names)
