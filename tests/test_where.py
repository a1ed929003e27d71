"""A DELETE's or an UPDATE's WHERE over columns (noria_py/where.py) against the row path
(``expression.compile_condition``), row for row: random tables with NULLs, NaN,
infinities, 64-bit edges and negative numbers, random expression trees."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py.batch import Batch
from noria_py.divzero import DIV0
from noria_py.errors import DivisionByZeroError
from noria_py.expression import compile_condition, pg_divides
from noria_py.where import _Chunk, _Fallback, matching
from sql_frontend.expr import Call, Col, Expr, Lit
from sql_frontend.types import INT_MAX, INT_MIN
from sql_frontend.types import SqlType as T

#: the table's columns: two INT, two FLOAT, one BOOL
TYPES = (T.INT, T.INT, T.FLOAT, T.FLOAT, T.BOOL)
INTS = st.one_of(st.just(0), st.integers(-3, 3), st.sampled_from([0, 1, -1, 2, -2, 3, 7, INT_MAX, INT_MIN, INT_MAX - 1,
                                  INT_MIN + 1, 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 32, 3037000500]),
                 st.integers(-50, 50), st.integers(INT_MIN, INT_MAX))
FLOATS = st.one_of(st.just(0.0), st.just(math.nan), st.integers(-3, 3).map(float), st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, math.nan, math.inf,
                                    -math.inf, 2.0 ** 53, 2.0 ** 63, -(2.0 ** 63), 1e300,
                                    9007199254740993.0, 3.0, 7.0]),
                   st.floats(-1e3, 1e3), st.floats(allow_nan=True))
VALUES = {T.INT: INTS, T.FLOAT: FLOATS, T.BOOL: st.booleans()}


@st.composite
def tables(draw) -> tuple[list[np.ndarray], list[tuple]]:
    """Columns as a base keeps them (int64/float64 without NULLs, objects with), and
    the same rows as tuples."""
    n = draw(st.integers(1, 12))
    cols = []
    for t in TYPES:
        nulls = draw(st.booleans()) or t is T.BOOL
        vals = [draw(st.none() | VALUES[t]) if nulls else draw(VALUES[t]) for _ in range(n)]
        if t is not T.BOOL and None not in vals:
            cols.append(np.array(vals, dtype=np.int64 if t is T.INT else np.float64))
        else:
            a = np.empty(n, dtype=object)
            a[:] = vals
            cols.append(a)
    rows = Batch.columnar(cols, np.ones(n, dtype=np.int64)).to_rows()
    return cols, rows


def numbers(pg: bool):
    """Numeric expressions: columns, literals, arithmetic (INT over INTs, else FLOAT)."""
    columns = st.sampled_from([Col(i, t) for i, t in enumerate(TYPES) if t is not T.BOOL])
    leaves = st.one_of(
        columns, columns, columns, INTS.map(lambda v: Lit(v, T.INT)), FLOATS.map(lambda v: Lit(v, T.FLOAT)),
        st.sampled_from([Lit(None, T.INT), Lit(None, T.FLOAT)]))
    ops = ["add", "sub", "mul"] + (["pgdiv", "pgmod"] if pg else ["div", "mod"]) * 2

    def grow(inner):
        def binary(op, a, b):
            return Call(op, (a, b), T.INT if a.type is T.INT and b.type is T.INT else T.FLOAT)
        return st.one_of(
            st.builds(binary, st.sampled_from(ops), inner, inner),
            st.builds(lambda op, a: Call(op, (a,), a.type), st.sampled_from(["neg", "abs"]),
                      inner))
    return st.recursive(leaves, grow, max_leaves=3)


def conditions(pg: bool):
    num = numbers(pg)
    leaves = st.one_of(
        st.builds(lambda op, a, b: Call(op, (a, b), T.BOOL),
                  st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), num, num),
        st.builds(lambda x, vs: Call("in", (x, *vs), T.BOOL), num, st.lists(num, min_size=1,
                                                                            max_size=3)),
        st.builds(lambda op, a: Call(op, (a,), T.BOOL), st.sampled_from(["is_null",
                                                                        "is_not_null"]), num),
        st.just(Col(4, T.BOOL)), st.sampled_from([Lit(True, T.BOOL), Lit(False, T.BOOL),
                                                  Lit(None, T.BOOL)]))

    def grow(inner):
        return st.one_of(
            st.builds(lambda op, args: Call(op, tuple(args), T.BOOL), st.sampled_from(["and", "or"]),
                      st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda a: Call("not", (a,), T.BOOL), inner),
            st.builds(lambda op, a: Call(op, (a,), T.BOOL), st.sampled_from(["is_null",
                                                                            "is_not_null"]), inner))
    return st.recursive(leaves, grow, max_leaves=6)


def row_answer(e: Expr, rows: list[tuple]) -> tuple[list[bool], bool]:
    test = compile_condition(e)
    got = [test(r) for r in rows]
    return [t is True for t in got], any(t is DIV0 for t in got)


FALLBACKS = {"n": 0}


def check(e: Expr, table) -> None:
    cols, rows = table
    want, want_div0 = row_answer(e, rows)
    try:
        with np.errstate(all="ignore"):
            true, div0 = _Chunk(tuple(cols), pg_divides(e)).where(e)
    except _Fallback:
        FALLBACKS["n"] += 1
        return
    assert div0 == want_div0, (e, rows)
    if not want_div0:
        assert true.tolist() == want, (e, rows)


def _differential(pg: bool, examples: int) -> None:
    @settings(max_examples=examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(conditions(pg), tables())
    def run(e, table):
        check(e, table)
    run()


@pytest.mark.parametrize("pg", [False, True], ids=["sqlite-division", "pg-division"])
def test_columns_match_the_row_path(pg):
    _differential(pg, 150)


@pytest.mark.slow
@pytest.mark.parametrize("pg", [False, True], ids=["sqlite-division", "pg-division"])
def test_columns_match_the_row_path_long(pg):
    _differential(pg, 5000)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda pg: st.tuples(conditions(pg), tables())))
def test_matching_on_columns_and_on_rows(case):
    """``matching`` over the columnar batch (cut in two parts) and over the same rows."""
    e, (cols, rows) = case
    n = len(rows)
    signs = np.arange(1, n + 1, dtype=np.int64) % 3 + 1        # (counts above 1 too)
    cut = n // 2
    parts = [Batch.columnar([c[:cut] for c in cols], signs[:cut]),
             Batch.columnar([c[cut:] for c in cols], signs[cut:])]
    assert matching(parts, e) == matching([Batch(rows, signs.tolist())], e)


def _rows_equal(a, b):
    key = repr
    assert sorted(a, key=key) == sorted(b, key=key)


@pytest.mark.parametrize("arith", [False, True])
def test_exact_edges(arith):
    """Hand-picked: int against float past 2**53, overflow, NaN order, truncation."""
    i = np.array([2 ** 53 + 1, INT_MAX, INT_MIN, -7, 7, 0], dtype=np.int64)
    f = np.array([2.0 ** 53, 2.0 ** 63, -(2.0 ** 63), math.nan, -2.0, math.inf])
    cols = (i, i[::-1].copy(), f, f[::-1].copy(), np.array([True] * 6, dtype=object))
    rows = list(zip(*[c.tolist() for c in cols]))
    a, b, x, y = Col(0, T.INT), Col(1, T.INT), Col(2, T.FLOAT), Col(3, T.FLOAT)
    exprs = [Call(op, (p, q), T.BOOL) for op in ("eq", "lt", "gt", "le", "ge", "ne")
             for p, q in ((a, x), (x, a), (x, y), (a, b), (x, x))]
    if arith:
        k = Lit(-1, T.INT)
        exprs = [Call("is_null", (Call(op, pq, T.INT),), T.BOOL)
                 for op in ("add", "sub", "mul", "div", "mod")
                 for pq in ((a, b), (a, k), (k, a))]
        exprs += [Call("lt", (Call("div", (a, Lit(-2, T.INT)), T.INT), Lit(0, T.INT)), T.BOOL),
                  Call("eq", (Call("mod", (x, y), T.FLOAT), Lit(0.0, T.FLOAT)), T.BOOL),
                  Call("eq", (Call("div", (a, Lit(2, T.INT)), T.INT), Lit(-3, T.INT)), T.BOOL),
                  Call("eq", (Call("mod", (a, Lit(2, T.INT)), T.INT), Lit(-1, T.INT)), T.BOOL),
                  Call("is_null", (Call("neg", (a,), T.INT),), T.BOOL)]
    for e in exprs:
        check(e, (list(cols), rows))


def test_falls_back_where_it_cannot():
    """Text and CASE take the row path, and still give the row path's answer."""
    t = np.empty(3, dtype=object)
    t[:] = ["a", "b", None]
    cols = [np.array([1, 2, 3], dtype=np.int64), t]
    e = Call("eq", (Col(1, T.TEXT), Lit("b", T.TEXT)), T.BOOL)
    with pytest.raises(_Fallback):
        _Chunk(tuple(cols), False).where(e)
    assert matching([Batch.columnar(cols, np.ones(3, dtype=np.int64))], e) == [(2, "b")]


@pytest.fixture
def db():
    d = noria_py.connect()
    yield d
    d.close()


def test_delete_and_update_over_columns(db):
    """A DELETE's and an UPDATE's WHERE over a table kept in columns (NULLs too), against
    the same statements over a table kept as row batches."""
    rng = np.random.default_rng(7)
    n = 400
    a = rng.integers(-20, 20, n).tolist()
    b = rng.normal(0, 10, n).tolist()
    rows = [(a[i] if i % 7 else None, b[i] if i % 11 else (math.nan if i % 2 else None))
            for i in range(n)]
    db.execute("CREATE TABLE c (a INT, b FLOAT)")
    db.execute("CREATE TABLE r (a INT, b FLOAT)")
    db.table("c").insert(rows)                      # one batch: columns
    for lo in range(0, n, 10):
        db.table("r").insert(rows[lo:lo + 10])      # small batches: rows
    assert db.graph_[db._tables["c"].node].op.chunks[0].cols is not None
    for stmt in ("DELETE FROM {} WHERE a % 3 = 1 AND b > 0",
                 "UPDATE {} SET a = a + 100 WHERE b IS NULL OR a BETWEEN -5 AND 5",
                 "DELETE FROM {} WHERE b = 'NaN'::float OR a IN (2, 4, NULL)",
                 "DELETE FROM {} WHERE NOT (a * 2 < b)"):
        counts = [db.execute(stmt.format(t)).rowcount for t in ("c", "r")]
        assert counts[0] == counts[1]
        _rows_equal(db.table("c").rows(), db.table("r").rows())


def test_division_by_zero_fails_the_whole_write(db):
    db.execute("CREATE TABLE c (a INT, b INT)")
    db.table("c").insert_columns([np.arange(100, dtype=np.int64), np.arange(100) % 5])
    with pytest.raises(DivisionByZeroError):
        db.execute("DELETE FROM c WHERE PG_DIV(a, b) > 1")
    assert len(db.table("c")) == 100
    # PostgreSQL's order, cheapest first: a < 0 is FALSE before the division is made
    db.execute("DELETE FROM c WHERE PG_DIV(a, b) > 1 AND a < 0")
    assert len(db.table("c")) == 100
    db.execute("DELETE FROM c WHERE b = 0 OR PG_DIV(a, b) > 1")   # (b = 0 decides first)
    assert sorted(db.table("c").rows()) == [(i, i % 5) for i in range(100)
                                            if i % 5 != 0 and i // (i % 5) <= 1]
