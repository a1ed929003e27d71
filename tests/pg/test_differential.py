"""The same randomized schema, writes and queries through psycopg to a real PostgreSQL 15
and to ``PgServer``: every answer must match (``answers_match``).

Queries are drawn from shapes the engine supports with PostgreSQL's meaning (filters,
GROUP BY aggregates, joins, DISTINCT, ORDER BY ... LIMIT on a unique order, views read by
key with a prepared parameter); values from small domains so that groups, joins and
duplicates happen. A division by zero and AVG's ``numeric`` have tests of their own
(test_division.py, test_numeric_avg.py); here AVG's values are compared as floats.
"""
from __future__ import annotations

import math
import random
from decimal import Decimal
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

TABLES = """
CREATE TABLE p (id INT PRIMARY KEY, a INT, b INT, c TEXT, f FLOAT);
CREATE TABLE q (id INT PRIMARY KEY, pid INT, w INT, s TEXT)
"""
VIEWS = [
    "CREATE VIEW v_count AS SELECT a, COUNT(*) AS n, SUM(b) AS sb FROM p GROUP BY a",
    "CREATE VIEW v_join AS SELECT p.id, p.a, q.w FROM p JOIN q ON p.id = q.pid",
    "CREATE VIEW v_left AS SELECT p.id, p.c, q.s FROM p LEFT JOIN q ON p.id = q.pid",
    "CREATE VIEW v_minmax AS SELECT c, MIN(f) AS lo, MAX(b) AS hi FROM p GROUP BY c",
    "CREATE VIEW v_distinct AS SELECT DISTINCT a, c FROM p",
]
LOOKUPS = [  # (sql with %s, the key's domain)
    ("SELECT a, n, sb FROM v_count WHERE a = %s", "a"),
    ("SELECT id, w FROM v_join WHERE a = %s", "a"),
    ("SELECT c, lo, hi FROM v_minmax WHERE c = %s", "c"),
    ("SELECT id, c FROM p WHERE b = %s", "b"),
    ("SELECT COUNT(*), SUM(w) FROM q WHERE pid = %s", "id"),
]
QUERIES = [
    "SELECT * FROM v_count",
    "SELECT * FROM v_join",
    "SELECT * FROM v_left",
    "SELECT * FROM v_minmax",
    "SELECT * FROM v_distinct",
    "SELECT id, a + b, a * 2 - b, b / 3, b % 4 FROM p WHERE f > 0.5",
    "SELECT c, COUNT(*) FROM p WHERE a <> 2 GROUP BY c HAVING COUNT(*) > 1",
    "SELECT id, c FROM p WHERE c IN ('x', 'y') OR b BETWEEN 2 AND 4",
    "SELECT id FROM p ORDER BY b DESC, id LIMIT 5",
    "SELECT p.c, COUNT(q.id) FROM p LEFT JOIN q ON q.pid = p.id GROUP BY p.c",
    "SELECT a FROM p UNION SELECT w FROM q",
    "SELECT id, COALESCE(c, 'none'), CASE WHEN b > 2 THEN 'big' ELSE 'small' END FROM p",
    "SELECT id FROM p WHERE c IS NULL AND f IS NOT NULL",
    "SELECT CAST(a AS TEXT) || '-' || c, b::float / 2 FROM p WHERE id < 20",
    "SELECT pid, MAX(w), MIN(s) FROM q GROUP BY pid",
    "SELECT a, AVG(b), SUM(f) FROM p GROUP BY a",
    "SELECT c, b FROM p WHERE a = 1 ORDER BY c DESC, b, id",
    "SELECT id FROM p WHERE b > (SELECT MIN(w) FROM q)",
    "SELECT id, f FROM p WHERE a = '3' OR f < '0.5' OR b IN ('1', '2')",
]


def _domain(rng: random.Random, what: str) -> Any:
    return {"a": rng.randint(0, 4), "b": rng.randint(0, 6), "c": rng.choice(["x", "y", "z", None]),
            "id": rng.randint(0, 40)}[what]


def _p_row(rng: random.Random, i: int) -> tuple:
    f = rng.choice([0.0, 0.25, 1.5, -2.0, 1e10, None, rng.random()])
    return (i, rng.randint(0, 4), rng.choice([None, *range(7)]), _domain(rng, "c"), f)


def _q_row(rng: random.Random, i: int) -> tuple:
    return (i, rng.randint(0, 40), rng.randint(-3, 3), rng.choice(["k", "l", None]))


def _norm(v: Any) -> Any:
    if isinstance(v, Decimal):
        v = float(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else round(v, 9)
    return v


def _rows(cur: Any, sql: str, params: tuple = ()) -> list:
    cur.execute(sql, params or None)
    rows = [tuple(_norm(v) for v in r) for r in cur.fetchall()]
    return rows if "ORDER BY" in sql else sorted(rows, key=repr)


def answers_match(ours: Any, theirs: Any, sql: str, params: tuple = ()) -> None:
    want = _rows(theirs, sql, params)
    got = _rows(ours, sql, params)
    assert got == want, f"{sql} {params}: PostgreSQL {want[:8]} noria-py {got[:8]}"
    names = [c.name for c in ours.description]
    assert names == [c.name for c in theirs.description], f"{sql}: column names {names}"


@pytest.mark.parametrize("seed", range(3))
def test_answers_match_postgres(seed: int, postgres: Any, conninfo: str) -> None:
    rng = random.Random(seed)
    with psycopg.connect(postgres.dsn, autocommit=True) as pg, \
            psycopg.connect(conninfo, autocommit=True) as nc:
        pgc, ncc = pg.cursor(), nc.cursor()
        pgc.execute("DROP VIEW IF EXISTS " + ", ".join(v.split()[2] for v in VIEWS))
        pgc.execute("DROP TABLE IF EXISTS p, q")
        for stmt in TABLES.strip().split(";\n") + VIEWS:
            pgc.execute(stmt)
            ncc.execute(stmt)
        next_p, next_q = 0, 0
        for step in range(6):
            # writes: inserts, then deletes and updates of random rows
            ps = [_p_row(rng, next_p + i) for i in range(rng.randint(3, 12))]
            qs = [_q_row(rng, next_q + i) for i in range(rng.randint(3, 12))]
            next_p, next_q = next_p + len(ps), next_q + len(qs)
            for cur in (pgc, ncc):
                cur.executemany("INSERT INTO p VALUES (%s, %s, %s, %s, %s)", ps)
                cur.executemany("INSERT INTO q VALUES (%s, %s, %s, %s)", qs)
            victim, new_b = rng.randint(0, next_p), rng.randint(0, 6)
            for cur in (pgc, ncc):
                cur.execute("DELETE FROM q WHERE w = %s", (step % 7 - 3,))
                cur.execute("UPDATE p SET b = %s WHERE id = %s", (new_b, victim))
                cur.execute("DELETE FROM p WHERE id = %s", (victim + 1,))
            for sql in QUERIES:
                answers_match(ncc, pgc, sql)
            for sql, what in LOOKUPS:
                for _ in range(3):
                    answers_match(ncc, pgc, sql, (_domain(rng, what),))
