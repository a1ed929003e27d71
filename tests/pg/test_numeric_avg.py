"""AVG of integers goes out as PostgreSQL's ``numeric`` (OID 1700), exact and at
PostgreSQL's display scale, in text and binary: checked against a real PostgreSQL 15 on
random data (negatives, sums past 2**63, one row, all NULL)."""
from __future__ import annotations

import random
import struct
from decimal import Decimal, localcontext
from typing import Any

import pytest

import noria_py
from noria_py.ops.accumulators import ExactAvg
from noria_py.pg import types as T

psycopg = pytest.importorskip("psycopg")

BIG = 1 << 62


def _value(rng: random.Random) -> int | None:
    return rng.choice([None, 0, 1, -1, 2, 7, -13, 10_000, 99_999_999, -BIG, BIG,
                       (1 << 63) - 1, -(1 << 63), rng.randint(-10**6, 10**6),
                       rng.randint(-BIG, BIG)])


def _answers(cur: Any, sql: str) -> list[tuple]:
    cur.execute(sql)
    rows = cur.fetchall()
    if any(r[1] is not None for r in rows):   # (without a value: double precision here)
        assert [c.type_code for c in cur.description][-1] == T.NUMERIC
    # as text (the display scale) and as the Decimal each reads back as
    return sorted(((r[0], str(r[1]), r[1]) for r in rows), key=repr)


@pytest.mark.parametrize("seed", range(2))
def test_avg_of_integers_is_postgres_numeric(seed: int, postgres: Any, conninfo: str) -> None:
    rng = random.Random(seed)
    rows = [(i, rng.randint(0, 12), _value(rng)) for i in range(150)]
    rows += [(1000, 50, 5), (1001, 51, None), (1002, 51, None)]    # one row; all NULL
    with psycopg.connect(postgres.dsn, autocommit=True) as pg, \
            psycopg.connect(conninfo, autocommit=True) as nc:
        for c in (pg, nc):
            c.execute("DROP TABLE IF EXISTS g CASCADE" if c is pg else "SELECT 1")
            c.execute("CREATE TABLE g (id BIGINT PRIMARY KEY, k BIGINT, x BIGINT)")
            c.execute("CREATE VIEW g_avg AS SELECT k, AVG(x) AS m FROM g GROUP BY k")
            c.cursor().executemany("INSERT INTO g VALUES (%s, %s, %s)", rows)
        for binary in (False, True):
            for sql in ["SELECT k, AVG(x) FROM g GROUP BY k", "SELECT * FROM g_avg",
                        "SELECT k, m FROM g_avg WHERE k = 51", "SELECT 0, AVG(x) FROM g"]:
                want = _answers(pg.cursor(binary=binary), sql)
                assert _answers(nc.cursor(binary=binary), sql) == want, (sql, binary)
            for k in (3, 50, 51, 99):       # a prepared read by key (the reader's path)
                sql = "SELECT k, m FROM g_avg WHERE k = %s"
                want = pg.cursor(binary=binary).execute(sql, (k,), prepare=True).fetchall()
                got = nc.cursor(binary=binary).execute(sql, (k,), prepare=True).fetchall()
                assert [(a, str(b)) for a, b in got] == [(a, str(b)) for a, b in want], k


def _from_binary(data: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", data)
    digits = struct.unpack_from(f"!{ndigits}H", data, 8)
    with localcontext() as ctx:
        ctx.prec = 2000
        value = sum((Decimal(d) * Decimal(10000) ** (weight - i)
                     for i, d in enumerate(digits)), Decimal(0))
        value = -value if sign == 0x4000 else value
        return value.quantize(Decimal(10) ** -dscale)


def test_numeric_formats_agree() -> None:
    """The binary form is the text's value at the same display scale; both are the
    exact quotient rounded at that scale (at least 16 significant digits)."""
    rng = random.Random(3)
    for _ in range(2000):
        count = rng.choice([1, 2, 3, 7, 10_000, rng.randint(1, 10**9)])
        total = rng.choice([0, rng.randint(-10**30, 10**30), rng.randint(-100, 100)])
        v = ExactAvg(total, count)
        text = T.numeric_text(v)
        assert format(_from_binary(T.numeric_binary(v)), "f") == text
        with localcontext() as ctx:
            ctx.prec = 2000
            exact = Decimal(total) / Decimal(count)
            assert abs(Decimal(text) - exact) <= Decimal(10) ** -16 * max(1, abs(exact))
    assert T.numeric_text(ExactAvg(3, 2)) == "1.5000000000000000"
    assert T.numeric_text(ExactAvg(1, 1)) == "1.00000000000000000000"


def test_python_api_keeps_a_float() -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (k INT, x INT)")
    db.table("t").insert([(1, 1), (1, 2)])
    (m,) = db.execute("SELECT AVG(x) FROM t").fetchone()
    assert type(m) is float and m == 1.5      # (not an ExactAvg: only the front end's)
    db.close()
