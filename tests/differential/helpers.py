"""Differential testing support: the tables, views and random writes both the engine and
DuckDB run, the DuckDB side, and result normalization. Also the workload of the
recovery, cluster and Spark tests."""
from __future__ import annotations

import decimal
from collections import Counter

import duckdb
from hypothesis import strategies as st

import noria_py

#: what a NaN normalizes to: one value that equals itself (NaN objects are unequal)
NAN = "<NaN>"


def normal_row(r) -> tuple:
    """A row with floats rounded so that summation order does not matter, integral ones
    as ints, -0.0 as 0 and any NaN as ``NAN``."""
    vals = []
    for v in r:
        if isinstance(v, decimal.Decimal):
            v = float(v)
        if isinstance(v, float):
            if v != v:
                vals.append(NAN)
                continue
            v = round(v, 6) + 0.0
            if v.is_integer():
                v = int(v)
        vals.append(v)
    return tuple(vals)


def normalize(rows) -> Counter:
    """A multiset of rows (``normal_row``)."""
    return Counter(map(normal_row, rows))


class Oracle:
    """DuckDB holding the same rows as the engine's tables."""

    def __init__(self, ddl: list[str]) -> None:
        self.con = duckdb.connect()
        for sql in ddl:
            self.con.execute(sql)

    def load(self, tables: dict[str, list[tuple]]) -> None:
        for name, rows in tables.items():
            self.con.execute(f"DELETE FROM {name}")
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                self.con.executemany(f"INSERT INTO {name} VALUES ({marks})", [list(r) for r in rows])

    def query(self, sql: str, params=()) -> Counter:
        return normalize(self.con.execute(sql, list(params)).fetchall())


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


def new_db(shards: int, seed=None, views=VIEWS, model=None, early=(),
           **options) -> noria_py.Database:
    """The tables, ``early`` ops written to them (and to ``model``), then ``views`` and
    every keyed view created; ``options`` go to ``connect`` (a ``regime``, ...)."""
    db = noria_py.connect(shards=shards, seed=seed, **options)
    for sql in DDL:
        db.execute(sql)
    for op in early:
        apply_model(model, op, db)
    for name in views:
        db.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
    for name, (sql, _) in KEYED.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    return db


def apply_model(model: dict[str, list[tuple]], op, db, *, renew=None, writes=SQL_WRITES,
                prefix: str = "t") -> None:
    """Write ``op`` to ``db`` and to ``model``: ``("insX", rows)`` inserts into table
    ``prefix + X`` (t1, t2), ``("delX", picks)`` deletes its rows at those positions
    (modulo its size), ``("sql", i)`` runs ``writes[i]`` (SQL, its table, the same
    change in Python). A delete hands the engine ``renew(row, i)`` for the model's row
    at ``i`` (default: that row), e.g. the same values in new objects."""
    kind, arg = op
    if kind == "sql":
        sql, name, change = writes[arg]
        db.execute(sql)
        model[name] = [new for r in model[name] for new in change(r)]
        return
    name = prefix + kind[3:]
    if kind.startswith("ins"):
        db.table(name).insert(arg)
        model[name].extend(arg)
    elif kind.startswith("del"):
        rows = model[name]
        if not rows:
            return
        picked = sorted({i % len(rows) for i in arg}, reverse=True)
        db.table(name).delete([rows[i] if renew is None else renew(rows[i], i) for i in picked])
        for i in picked:
            del rows[i]
    else:
        raise ValueError(f"unknown op {kind!r}")


def in_two_parts(db, apply, first, second, later_views: dict[str, str]) -> None:
    """Apply the ops ``first``, create ``later_views`` (name: SELECT), then apply
    ``second``: views made before the data follow it, the later ones start from it."""
    for op in first:
        apply(op)
    for name, sql in later_views.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    for op in second:
        apply(op)


def check(db, oracle: Oracle, model, views) -> None:
    """The engine's tables hold the model's rows, and ``views`` (and every keyed view)
    answer as DuckDB does over them (``oracle`` loaded with the model)."""
    db.wait()
    for name in model:
        assert normalize(table_rows(db, name)) == normalize(model[name]), f"table {name}"
    check_views(db, oracle, views)


def check_views(db, oracle: Oracle, views) -> None:
    """``views`` (and every keyed view) answer as DuckDB does (``oracle`` loaded)."""
    db.wait()
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


def table_rows(db, name: str) -> list[tuple]:
    return list(db.execute(f"SELECT * FROM {name}").fetchall())
