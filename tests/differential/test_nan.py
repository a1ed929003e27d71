"""FLOAT columns holding NaN, +-inf and -0.0, through the engine and through DuckDB.

DuckDB's NaN is PostgreSQL's, which the engine follows (noria_py/nan.py): NaN equals NaN
(it groups, deduplicates, joins and is looked up as one value) and sorts above every
other value. Random inserts and deletes, the deletes given *other* NaN objects (and
other NaN bit patterns) than the ones inserted, through every view shape that compares,
hashes or orders values, with 1 and 4 shards and through the dense form's array path.
"""
from __future__ import annotations

import math
import os
import struct
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning

from .helpers import Oracle, apply_model, in_two_parts, normal_row, normalize

DDL = ["CREATE TABLE f (a INT, x DOUBLE, y DOUBLE)",
       "CREATE TABLE g (x DOUBLE, z INT)"]

NAN = "CAST('NaN' AS DOUBLE)"
VIEWS = {
    "v_agg": "SELECT a, COUNT(*) AS n, MIN(x) AS lo, MAX(x) AS hi, SUM(y) AS s, AVG(y) AS m "
           "FROM f GROUP BY a",
    "v_group": "SELECT x, COUNT(*) AS n, MAX(y) AS hi FROM f GROUP BY x",
    "v_global": "SELECT MIN(x) AS lo, MAX(x) AS hi, COUNT(DISTINCT x) AS d, SUM(DISTINCT y) AS s "
              "FROM f",
    "v_distinct": "SELECT DISTINCT x, y FROM f",
    "v_join": "SELECT f.a, f.x, g.z FROM f JOIN g ON f.x = g.x",
    "v_left": "SELECT f.a, g.z FROM f LEFT JOIN g ON f.y = g.x",
    "v_join2": "SELECT f.a, g.z FROM f JOIN g ON f.x = g.x AND f.a = g.z",
    "v_where": "SELECT a, x, y FROM f WHERE x > 1.5 OR y <= x",
    "v_where_eq": f"SELECT a, y FROM f WHERE x = {NAN} OR y <> x",
    "v_in_list": f"SELECT a FROM f WHERE x IN (1.5, {NAN}) AND NULLIF(y, {NAN}) IS NOT NULL",
    "v_exprs": "SELECT a, x - y AS d, x * y AS p, ABS(x) AS ax, -y AS ny FROM f",
    "v_union": "SELECT x FROM f UNION SELECT x FROM g",
    "v_except": "SELECT x FROM f EXCEPT SELECT x FROM g",
    "v_intersect": "SELECT y FROM f INTERSECT SELECT x FROM g",
    "v_in_sub": "SELECT a, y FROM f WHERE x IN (SELECT x FROM g)",
    # one row a key on both sides: dense joins, their columns padded with NULLs
    "v_left_groups": "SELECT l.a, l.hi, r.lo FROM (SELECT a, MAX(x) AS hi FROM f GROUP BY a) "
                     "AS l LEFT JOIN (SELECT z, MIN(x) AS lo FROM g GROUP BY z) AS r "
                     "ON l.a = r.z",
}
#: ordered views: the engine's rows must come in DuckDB's order (ORDER BY covers every
#: column, so ties are equal rows)
ORDERED = {
    "v_top_asc": "SELECT x, a FROM f ORDER BY x ASC NULLS FIRST, a ASC NULLS FIRST LIMIT 4",
    "v_top_desc": "SELECT x, a FROM f ORDER BY x DESC NULLS LAST, a DESC NULLS LAST LIMIT 4",
    "v_sorted": "SELECT y, a FROM f ORDER BY y ASC NULLS LAST, a ASC NULLS LAST",
}
#: (engine view with ?, DuckDB query for one key)
KEYED = {
    "v_by_x": ("SELECT a, y FROM f WHERE x = ?", "SELECT a, y FROM f WHERE x = ?"),
    "v_count_by_x": ("SELECT x, COUNT(*) AS n FROM f WHERE x = ? GROUP BY x",
                   "SELECT x, COUNT(*) AS n FROM f WHERE x = ? GROUP BY x"),
}

#: NaNs with other bits than Python's float("nan"): negative, a payload, signalling
_NAN_BITS = [bytes.fromhex(h) for h in ("000000000000f87f", "000000000000f8ff",
                                        "010000000000f87f", "010000000000f07f")]


def fresh_nan(i: int = 0) -> float:
    """A new NaN object (never the engine's), of one of several bit patterns."""
    return struct.unpack("<d", _NAN_BITS[i % len(_NAN_BITS)])[0]


KEYS = [fresh_nan(1), math.inf, -math.inf, 1.5, 0.0, -0.0, 2.0, None]

floats = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, 2.0, -3.0, math.inf, -math.inf]),
                   st.integers(0, 3).map(fresh_nan))
small = st.one_of(st.none(), st.integers(0, 3))
f_rows = st.lists(st.tuples(small, floats, floats), min_size=1, max_size=6)
g_rows = st.lists(st.tuples(floats, small), min_size=1, max_size=4)
ops = st.lists(st.one_of(
    st.tuples(st.just("insf"), f_rows),
    st.tuples(st.just("insg"), g_rows),
    st.tuples(st.just("arrowf"), f_rows),
    st.tuples(st.just("delf"), st.lists(st.integers(0, 1000), min_size=1, max_size=3)),
    st.tuples(st.just("delg"), st.lists(st.integers(0, 1000), min_size=1, max_size=2)),
    st.tuples(st.just("sql"), st.integers(0, 2)),
), min_size=1, max_size=10)


def _is_nan(v) -> bool:
    return v is not None and v != v


#: SQL writes, each with the same change in Python for the model
SQL_WRITES = [
    (f"DELETE FROM f WHERE x = {NAN}", "f", lambda r: [] if _is_nan(r[1]) else [r]),
    ("UPDATE f SET y = x - x WHERE a = 1", "f",
     lambda r: [(r[0], r[1], None if r[1] is None else r[1] - r[1])] if r[0] == 1 else [r]),
    ("DELETE FROM g WHERE x >= 2.0", "g",
     lambda r: [] if r[0] is not None and (_is_nan(r[0]) or r[0] >= 2.0) else [r]),
]


def renewed(row: tuple, i: int) -> tuple:
    """``row`` with each NaN a new NaN object of other bits: what a user deleting a row
    read back, or typed again, hands over."""
    return tuple(fresh_nan(i + 1) if _is_nan(v) else v for v in row)


def apply(model: dict[str, list[tuple]], op, db) -> None:
    """``apply_model``'s writes on f and g, deletes given ``renewed`` rows; and
    ``arrowf``, an insert into f through ``insert_arrow``."""
    kind, arg = op
    if kind == "arrowf":
        cols = list(zip(*arg))
        db.table("f").insert_arrow(pa.table({"a": pa.array(cols[0], pa.int64()),
                                             "x": pa.array(cols[1], pa.float64()),
                                             "y": pa.array(cols[2], pa.float64())}))
        model["f"].extend(arg)
    else:
        apply_model(model, op, db, renew=renewed, writes=SQL_WRITES, prefix="")


def new_db(shards: int, seed, views) -> noria_py.Database:
    db = noria_py.connect(shards=shards, seed=seed)
    for sql in DDL:
        db.execute(sql)
    for name in views:
        db.execute(f"CREATE VIEW {name} AS {ALL[name]}")
    return db


ALL = {**VIEWS, **ORDERED}


def check(db, model, oracle: Oracle) -> None:
    db.wait()
    oracle.load(model)
    for name in model:
        got = normalize(db.execute(f"SELECT * FROM {name}").fetchall())
        assert got == normalize(model[name]), f"table {name}"
    for name, sql in VIEWS.items():
        got, want = normalize(db.view(name).all()), oracle.query(sql)
        assert got == want, f"view {name}: engine {sorted(got.items(), key=repr)} != duckdb {sorted(want.items(), key=repr)}"
    for name, sql in ORDERED.items():
        got = [normal_row(r) for r in db.view(name).all()]
        want = [normal_row(r) for r in oracle.con.execute(sql).fetchall()]
        assert got == want, f"view {name}: engine {got} != duckdb {want}"
    for name, (_, duck_sql) in KEYED.items():
        for k in KEYS:
            got = normalize(db.view(name).lookup(k))
            want = oracle.query(duck_sql, (k,)) if k is not None else normalize([])
            assert got == want, f"view {name} key {k}: engine {got} != duckdb {want}"


CONFIGS = [(1, None, 32), (4, None, 32), (1, 5, 1), (4, 11, 1)]


@pytest.mark.parametrize("shards,seed,dense_min", CONFIGS,
                         ids=[f"shards{s}-seed{d}-dense{m}" for s, d, m in CONFIGS])
@settings(max_examples=int(os.environ.get("NORIA_DIFF_EXAMPLES", "10")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(first=ops, second=ops, split=st.integers(0, len(ALL)))
def test_nan_views_match_duckdb(shards, seed, dense_min, first, second, split):
    with mock.patch.object(tuning, "ARRAY_MIN", dense_min):
        names = list(ALL)
        db = new_db(shards, seed, names[:split])
        for name, (sql, _) in KEYED.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        model: dict[str, list[tuple]] = {"f": [], "g": []}
        in_two_parts(db, lambda op: apply(model, op, db), first, second,
                     {name: ALL[name] for name in names[split:]})
        check(db, model, Oracle(DDL))
        db.close()
