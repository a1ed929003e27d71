"""Range parameters (docs/sql.md, "Ad-hoc queries"; ops/reader.py) against DuckDB.

Views with ``col > ?``, ``BETWEEN ? AND ?`` and the like, with and without an equality
key and ORDER BY, and ad-hoc SELECTs whose range constants are lifted (each shape one
view), read with random bounds between random inserts, deletes and updates: ints
(bounds ints and floats), floats with NaN and infinities, text, NULLs, equal bounds,
empty and crossed ranges. DuckDB's NaN is PostgreSQL's, which the engine follows.
"""
from __future__ import annotations

import datetime
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py

from .helpers import Oracle, normal_row, normalize

DDL = ["CREATE TABLE r (id INT PRIMARY KEY, a INT, f DOUBLE, s TEXT, g INT)"]

#: name -> (engine view, DuckDB query with the same ?, which column's values bind them)
VIEWS = {
    "v_gt": ("SELECT id, a FROM r WHERE a > ?", "a"),
    "v_between": ("SELECT id, f FROM r WHERE f BETWEEN ? AND ?", "ff"),
    "v_lt_ge": ("SELECT id FROM r WHERE f < ? AND ? <= f", "ff"),
    "v_key_text": ("SELECT id, s FROM r WHERE g = ? AND s <= ? ORDER BY id DESC", "gs"),
    "v_key_int": ("SELECT id FROM r WHERE a >= ? AND g = ? AND a < ?", "aga"),
}
#: views whose rows come in an order (compared as lists)
ORDERED = {"v_key_text"}
#: ad-hoc SELECT shapes: the constants lifted, one view a shape
ADHOC = [
    ("SELECT id, a FROM r WHERE a > {}", "a"),
    ("SELECT id FROM r WHERE a BETWEEN {} AND {}", "aa"),
    ("SELECT id, f FROM r WHERE f <= {} AND g = {}", "fg"),
    ("SELECT id FROM r WHERE {} < a AND a <= {} ORDER BY id", "aa"),
    ("SELECT id, s FROM r WHERE s > {}", "s"),
]

ints = st.one_of(st.none(), st.integers(-2, 4))
floats = st.one_of(st.none(), st.sampled_from([-1.0, 0.0, 1.5, 2.0, math.inf, -math.inf]),
                   st.just(float("nan")))
texts = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "ba", "c"]))
rows = st.tuples(st.integers(0, 7), ints, floats, texts, st.one_of(st.none(), st.integers(0, 2)))
#: bound values by the column they are compared with (g: an equality key)
BOUNDS = {
    "a": st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 2.5]), st.none()),
    "f": st.one_of(st.sampled_from([-1.0, 0.0, 1.5, 2.0, math.inf, -math.inf, 3]),
                   st.just(float("nan")), st.none()),
    "s": st.one_of(st.sampled_from(["", "a", "ab", "b", "bb", "c"]), st.none()),
    "g": st.one_of(st.integers(0, 2), st.none()),
}
LITERALS = {
    "a": st.integers(-3, 5),
    "f": st.sampled_from(["-1.0", "0", "1.5", "2.0", "3"]),
    "g": st.integers(0, 2),
    "s": st.sampled_from(["''", "'a'", "'ab'", "'b'", "'c'"]),
}

writes = st.tuples(st.sampled_from(["insert", "insert", "delete", "update"]), rows)
reads = st.one_of(
    st.tuples(st.just("view"), st.sampled_from(sorted(VIEWS)), st.data()),
    st.tuples(st.just("adhoc"), st.integers(0, len(ADHOC) - 1), st.data()),
)


def _duck(sql: str) -> str:
    return sql.replace("?", "$1", 0)


programs = st.lists(st.one_of(writes, reads), min_size=5, max_size=30)
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=6, deadline=None, suppress_health_check=_HEALTH)
@given(programs)
def test_range_reads_match_duckdb(steps):
    _run(steps)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=_HEALTH)
@given(programs)
def test_range_reads_match_duckdb_long(steps):
    _run(steps)


def _run(steps) -> None:
    run_program(noria_py.connect(), steps)


def run_program(db, steps) -> None:
    """``steps`` on ``db`` (embedded, or a cluster's client: tests/runtime/cluster/
    test_ranges.py), every read checked against DuckDB; the table and views made
    are dropped after, so that the next program may run on the same ``db``."""
    oracle = Oracle(DDL)
    try:
        for sql in DDL:
            db.execute(sql.replace("DOUBLE", "FLOAT"))
        for name, (sql, _) in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        _steps(db, oracle, {}, steps)
    finally:
        db.drop_query()
        for name in VIEWS:
            db.execute(f"DROP VIEW IF EXISTS {name}")
        db.execute("DROP TABLE IF EXISTS r")


def _steps(db, oracle: Oracle, held: dict[int, tuple], steps) -> None:
    for step in steps:
        if step[0] in ("insert", "delete", "update"):
            write(db, oracle, held, step[0], step[1])
            continue
        db.wait()           # (a cluster's reads at the workers: after the writes)
        kind, which, data = step
        if kind == "view":
            sql, cols = VIEWS[which]
            params = [data.draw(BOUNDS[c[0]]) for c in cols]
            got = db.view(which).lookup(*params)
        else:
            shape, cols = ADHOC[which]
            params = [data.draw(LITERALS[c]) for c in cols]
            sql = shape.format(*params)
            got = db.execute(sql).fetchall()
            params = []
        want = oracle.con.execute(sql, params).fetchall()
        if kind == "view" and which in ORDERED or "ORDER BY" in sql:
            assert list(map(normal_row, got)) == list(map(normal_row, want)), (sql, params)
        else:
            assert normalize(got) == normalize(want), (sql, params)
    # each ad-hoc shape (lifted) is one view, however many constants were read
    assert len(db.queries()) <= len(ADHOC)


def write(db, oracle: Oracle, held: dict[int, tuple], kind: str, row: tuple) -> None:
    key = row[0]
    if kind == "insert":
        if key in held:
            return
        held[key] = row
        db.table("r").insert([row])
        oracle.con.execute("INSERT INTO r VALUES (?, ?, ?, ?, ?)", list(row))
    elif kind == "delete":
        db.execute("DELETE FROM r WHERE id = ?", (key,))
        oracle.con.execute("DELETE FROM r WHERE id = ?", [key])
        held.pop(key, None)
    else:
        db.execute("UPDATE r SET a = ?, f = ?, s = ? WHERE id = ?", (row[1], row[2], row[3], key))
        oracle.con.execute("UPDATE r SET a = ?, f = ?, s = ? WHERE id = ?",
                           [row[1], row[2], row[3], key])


def test_range_parameters_through_the_dbapi_and_prepare():
    """``?`` in a range place of an ad-hoc SELECT is a range parameter too: every
    bound one view, prepared or not."""
    db = noria_py.connect()
    db.execute("CREATE TABLE r (id INT PRIMARY KEY, a INT, f FLOAT)")
    db.table("r").insert([(i, i % 7, float(i) if i % 5 else math.nan) for i in range(40)])
    cur = db.cursor()
    for b in range(-1, 8):
        cur.execute("SELECT id FROM r WHERE a > ? AND a <= ?", (b, b + 2))
        assert sorted(cur.fetchall()) == [(i,) for i in range(40) if b < i % 7 <= b + 2]
    p = db.prepare("SELECT id FROM r WHERE f >= ?")
    assert sorted(p.run((math.nan,)).fetchall()) == [(i,) for i in range(0, 40, 5)]
    assert len(p.run((30.5,)).fetchall()) == 8 + 8          # 31..39 but 35, and the NaNs
    assert len(db.queries()) == 2


def test_range_parameters_of_a_view_refuse_what_does_not_compare():
    db = noria_py.connect()
    db.execute("CREATE TABLE r (id INT PRIMARY KEY, a INT, d DATE)")
    db.execute("CREATE VIEW v AS SELECT id FROM r WHERE a > ?")
    db.execute("CREATE VIEW w AS SELECT id FROM r WHERE d BETWEEN ? AND ?")
    db.table("r").insert([(1, 1, datetime.date(2026, 1, 2)), (2, 5, datetime.date(2026, 3, 4))])
    with pytest.raises(noria_py.TypeMismatchError, match="range parameter"):
        db.view("v").lookup("x")
    with pytest.raises(noria_py.ArityError):
        db.view("v").lookup(1, 2)
    assert db.view("w").lookup("2026-01-01", "2026-02-01") == [(1,)]     # ISO text, as a filter
    with pytest.raises(noria_py.TypeMismatchError, match="not a DATE"):
        db.view("w").lookup("soon", "2026-02-01")
    with pytest.raises(noria_py.NotSupportedError, match="range parameters"):
        db.subscribe("v", key=1)
