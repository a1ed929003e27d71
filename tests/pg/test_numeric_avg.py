"""AVG of integers goes out as PostgreSQL's ``numeric`` (OID 1700), exact and at
PostgreSQL's display scale, in text and binary: checked against a real PostgreSQL 15 on
random data (negatives, sums past 2**63, one row, all NULL). The type described is the
expression's, with a value or without (no rows, all NULL, a statement described before
it runs), in the simple and the extended protocol."""
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


DESCRIBED = [  # AVG of integers is numeric, of floats double precision, with or without rows
    "SELECT AVG(x), AVG(f) FROM h WHERE id > $1",
    "SELECT k, AVG(x) AS m, AVG(f) AS mf FROM h WHERE k = $1 GROUP BY k",
    "SELECT k, m, mf FROM h_avg WHERE k = $1",
    "SELECT MIN(m), MAX(mf), COUNT(*) FROM h_avg WHERE k > $1",
    "SELECT k, m FROM h_avg WHERE k = $1 UNION SELECT k, m FROM h_avg WHERE k = 2",
]


def test_described_type_is_the_expressions(postgres: Any, served: Any) -> None:
    """Describe of a statement (asyncpg's ``prepare``, before any row), Describe of a
    portal and the simple protocol (psycopg, text and binary) say ``numeric`` for an
    AVG of integers and ``double precision`` for one of floats, as PostgreSQL does,
    whether the result has a value there or not (no row, no group, all NULL)."""
    asyncpg = pytest.importorskip("asyncpg")
    import asyncio
    pg_port = int(postgres.dsn.split("port=")[1].split()[0])
    setup = ["CREATE TABLE h (id BIGINT PRIMARY KEY, k BIGINT, x BIGINT, f FLOAT)",
             "CREATE VIEW h_avg AS SELECT k, AVG(x) AS m, AVG(f) AS mf FROM h GROUP BY k",
             "INSERT INTO h VALUES (1, 1, NULL, NULL), (2, 2, 3, 1.5), (3, 2, 4, NULL)"]

    async def described(port: int, user: str, db: str) -> list:
        c = await asyncpg.connect(host="127.0.0.1", port=port, user=user, database=db)
        try:
            if port == pg_port:
                await c.execute("DROP TABLE IF EXISTS h CASCADE")
            for sql in setup:
                await c.execute(sql)
            out = []
            for sql in DESCRIBED:
                st = await c.prepare(sql)
                out.append([a.type.name for a in st.get_attributes()])
                for key in (0, 1, 2, 9):        # (rows with values, all NULL, none)
                    out.append(sorted((tuple(r) for r in await st.fetch(key)), key=repr))
            return out
        finally:
            await c.close()

    want = asyncio.run(described(pg_port, "postgres", "postgres"))
    got = asyncio.run(described(served[1].port, "tester", "noria"))
    assert got == want
    assert ["numeric", "double precision"] != want[0] == ["numeric", "float8"]
    dsn = f"host=127.0.0.1 port={served[1].port} user=tester dbname=noria"
    with psycopg.connect(postgres.dsn, autocommit=True) as pg, \
            psycopg.connect(dsn, autocommit=True) as nc:
        for sql in DESCRIBED:
            sql = sql.replace("$1", "%s")
            for binary in (False, True):
                for key in (1, 9):
                    for prepare in (False, True):
                        a, b = pg.cursor(binary=binary), nc.cursor(binary=binary)
                        rows = sorted(a.execute(sql, (key,), prepare=prepare), key=repr)
                        assert sorted(b.execute(sql, (key,), prepare=prepare), key=repr) == rows
                        assert [d.type_code for d in b.description] == \
                            [d.type_code for d in a.description], (sql, binary, key)
                # the simple protocol (no parameters: the key written in)
                a, b = pg.cursor(binary=binary), nc.cursor(binary=binary)
                text = sql.replace("%s", "9")
                a.execute(text.encode())     # (bytes: psycopg sends the text as it is)
                b.execute(text.encode())
                assert [d.type_code for d in b.description] == \
                    [d.type_code for d in a.description], (text, binary)


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


ARITHMETIC = [  # arithmetic on an AVG of integers is numeric; a cast to float8 is not
    "SELECT k, AVG(x) * 2 FROM a GROUP BY k",
    "SELECT k, AVG(x) + 1 FROM a GROUP BY k",
    "SELECT k, AVG(x) / 3 FROM a GROUP BY k",
    "SELECT k, 7 / AVG(x) FROM a WHERE x <> 0 GROUP BY k",
    "SELECT k, AVG(x) - k, -AVG(x) FROM a GROUP BY k",
    "SELECT k, 1 - AVG(x) * k FROM a GROUP BY k",
    "SELECT k, AVG(x) * AVG(y), AVG(x) + AVG(y) / 7 FROM a GROUP BY k",
    "SELECT k, ABS(AVG(x) - 5) FROM a GROUP BY k",
    "SELECT k, AVG(x) * AVG(y) / 7 FROM a GROUP BY k",         # (/: the operand's scale)
    "SELECT k, AVG(x)::float8, CAST(AVG(y) AS DOUBLE PRECISION) * 2 FROM a GROUP BY k",
    "SELECT k, AVG(x) + AVG(f), AVG(f) * AVG(x) FROM a GROUP BY k",
    "SELECT k, m * 2, m::float8, m / k FROM a_avg",
    "SELECT k, m2 FROM a_calc",
]


def _typed(cur: Any, sql: str, params: tuple = ()) -> tuple:
    """The column types and rows (each value as text, as the client reads it), or the
    error's SQLSTATE."""
    try:
        cur.execute(sql, params or None)
    except psycopg.Error as err:
        return err.sqlstate
    return ([d.type_code for d in cur.description],
            sorted((tuple(map(str, r)) for r in cur.fetchall()), key=repr))


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_arithmetic_on_an_avg_is_postgres_numeric(seed: int, postgres: Any,
                                                  conninfo: str) -> None:
    """``AVG(x) * 2``, ``+ 1``, ``/ 3``, with a column, with another AVG: ``numeric``
    at PostgreSQL's display scale (noria_py/numeric.py); with a float, and a cast to
    float8: ``double precision``, of the numeric's value. Text and binary, the simple
    protocol and a prepared statement (Describe of the portal), rows or none."""
    rng = random.Random(seed)
    rows = [(i, rng.randint(1, 8), _value(rng), rng.choice([None, 1, 3, -2]),
             rng.choice([None, 0.5, 2.0])) for i in range(80)]
    rows += [(1000, 50, 5, 1, 1.0), (1001, 51, None, None, None)]     # one row; all NULL
    with psycopg.connect(postgres.dsn, autocommit=True) as pg, \
            psycopg.connect(conninfo, autocommit=True) as nc:
        for c in (pg, nc):
            c.execute("DROP TABLE IF EXISTS a CASCADE" if c is pg else "SELECT 1")
            c.execute("CREATE TABLE a (id BIGINT PRIMARY KEY, k BIGINT, x BIGINT, y BIGINT, "
                      "f FLOAT)")
            c.execute("CREATE VIEW a_avg AS SELECT k, AVG(x) AS m FROM a GROUP BY k")
            c.execute("CREATE VIEW a_calc AS SELECT k, AVG(y) * 3 + 1 AS m2 FROM a GROUP BY k")
            c.cursor().executemany("INSERT INTO a VALUES (%s, %s, %s, %s, %s)", rows)
        seen = set()
        for sql in ARITHMETIC:
            for binary in (False, True):
                want = _typed(pg.cursor(binary=binary), sql)
                assert _typed(nc.cursor(binary=binary), sql) == want, (sql, binary)
                seen.update(want[0] if isinstance(want, tuple) else ())
            for k in (50, 51, 99):          # prepared (Describe of the portal), by key
                keyed = sql.replace("GROUP BY", "WHERE k = %s GROUP BY") if "GROUP" in sql \
                    else sql + " WHERE k = %s"
                for binary in (False, True):
                    want = _typed(pg.cursor(binary=binary), keyed, (k,))
                    got = _typed(nc.cursor(binary=binary), keyed, (k,))
                    assert got == want, (keyed, k, binary)
        assert {T.NUMERIC, T.FLOAT8} <= seen


def test_arithmetic_on_an_avg_described_before_it_runs(postgres: Any, served: Any) -> None:
    """Describe of a statement (asyncpg's ``prepare``) says ``numeric`` for arithmetic
    on an AVG of integers and ``float8`` for its cast, as PostgreSQL does."""
    asyncpg = pytest.importorskip("asyncpg")
    import asyncio
    pg_port = int(postgres.dsn.split("port=")[1].split()[0])
    statements = ["SELECT AVG(x) * 2, AVG(x) + 1, AVG(x) / 3, AVG(x)::float8, AVG(x) + AVG(f) "
                  "FROM b WHERE id > $1",
                  "SELECT k, m * 2 - k, -m, m::float8 FROM b_avg WHERE k = $1"]

    async def described(port: int, user: str, db: str) -> list:
        c = await asyncpg.connect(host="127.0.0.1", port=port, user=user, database=db)
        try:
            if port == pg_port:
                await c.execute("DROP TABLE IF EXISTS b CASCADE")
            await c.execute("CREATE TABLE b (id BIGINT PRIMARY KEY, k BIGINT, x BIGINT, "
                            "f FLOAT)")
            await c.execute("CREATE VIEW b_avg AS SELECT k, AVG(x) AS m FROM b GROUP BY k")
            await c.execute("INSERT INTO b VALUES (1, 1, 1, 0.5), (2, 1, 2, NULL), "
                            "(3, 2, NULL, 1.0)")
            out = []
            for sql in statements:
                st = await c.prepare(sql)
                out.append([a.type.name for a in st.get_attributes()])
                for key in (0, 1, 2, 9):
                    out.append(sorted((tuple(map(str, r)) for r in await st.fetch(key)),
                                      key=repr))
            return out
        finally:
            await c.close()

    want = asyncio.run(described(pg_port, "postgres", "postgres"))
    assert asyncio.run(described(served[1].port, "tester", "noria")) == want
    assert want[0] == ["numeric", "numeric", "numeric", "float8", "float8"]


def test_numeric_arithmetic_scales() -> None:
    """PostgreSQL's display scales: + and - the larger, * the sum, / select_div_scale
    (checked on PostgreSQL 15 by hand: ``SELECT 1.5000000000000000 / 3``)."""
    from noria_py.numeric import PgNumeric, divide
    a = ExactAvg(3, 2)                          # 1.5000000000000000
    assert T.numeric_text(a * 2) == "3.0000000000000000"
    assert T.numeric_text(a + 1) == "2.5000000000000000"
    assert T.numeric_text(a / 3) == "0.50000000000000000000"
    assert T.numeric_text(a * a) == "2.25000000000000000000000000000000"
    assert T.numeric_text(-a) == "-1.5000000000000000" and T.numeric_text(1 - a) == "-0.5000000000000000"
    assert type(a * 2.0) is float and type(a + 0.5) is float and a * 2.0 == 3.0
    assert divide(-7, 0, 2, 0) == (-35000000000000000, 16)           # half away from zero
    assert divide(2, 0, 3, 0) == (66666666666666666667, 20)
    assert PgNumeric(15, 1) == 1.5 and T.numeric_text(PgNumeric(-5, 2)) == "-0.05"
    # a cast to float8 is of the numeric (the quotient at its scale: here an integer),
    # as PostgreSQL's, not the float nearest the exact quotient (they differ here)
    big = ExactAvg(2913396727825104577, 3)
    assert T.numeric_text(big) == "971132242608368192"
    assert float(big) != float("971132242608368192")
    from noria_py.expression import _cast_float
    assert _cast_float(big) == float("971132242608368192") and type(_cast_float(big)) is float
