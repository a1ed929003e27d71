"""Ad-hoc SELECTs (client.py's ``_select_view``): queries that differ only in the
constants of top-level ``col = constant`` conjuncts share one unnamed view, read with
different keys, and answer what DuckDB answers; unnamed views are bounded in number and
in idle time, listed by ``db.queries()`` and dropped by ``db.drop_query()``."""
from __future__ import annotations

import datetime
import random

import pytest

import noria_py
from noria_py import tuning
from noria_py.errors import UnknownViewError

from .differential.helpers import Oracle

DDL = ["CREATE TABLE t (id INT, a INT, f FLOAT, s TEXT, d DATE)",
       "CREATE TABLE u (a INT, w INT)"]

# {a}, {f}, {s}, {d} are filled with constants, some that match rows and some not
SHAPES = [
    "SELECT id, s FROM t WHERE a = {a}",
    "SELECT id FROM t WHERE {a} = a AND s = '{s}'",
    "SELECT id FROM t WHERE a = {a} AND id > 5",
    "SELECT id FROM t WHERE f = {f}",
    "SELECT id FROM t WHERE f = {a}",
    "SELECT id FROM t WHERE d = DATE '{d}'",
    "SELECT id FROM t WHERE d = '{d}'",
    "SELECT COUNT(*) AS n FROM t WHERE a = {a}",
    "SELECT SUM(id) AS n, MAX(f) AS m FROM t WHERE s = '{s}'",
    "SELECT s, COUNT(*) AS n FROM t WHERE a = {a} GROUP BY s",
    "SELECT a, COUNT(*) AS n FROM t WHERE s = '{s}' GROUP BY a HAVING COUNT(*) > 1",
    "SELECT DISTINCT s FROM t WHERE a = {a}",
    "SELECT t.id, u.w FROM t JOIN u ON t.a = u.a WHERE u.w = {a}",
    "SELECT t.id, u.w FROM t LEFT JOIN u ON t.a = u.a WHERE t.a = {a}",
    "SELECT id FROM t WHERE a = {a} OR s = '{s}'",
    "SELECT id FROM t WHERE a = -{a}",
    "SELECT id FROM t WHERE a = {a} UNION SELECT a FROM u WHERE w = {a}",
    "SELECT COUNT(*) AS n FROM t WHERE a = {a} HAVING COUNT(*) < 3",
]
ORDERED = [
    "SELECT id, f FROM t WHERE a = {a} ORDER BY f DESC NULLS LAST, id LIMIT 2",
    "SELECT id FROM t WHERE s = '{s}' ORDER BY id LIMIT 3 OFFSET 1",
]


def rows_of(rng: random.Random, n: int) -> list[tuple]:
    return [(i, rng.randrange(6), rng.choice([0.5, 1.0, 2.0, None]),
             rng.choice(["x", "y", "z", None]),
             rng.choice([datetime.date(2026, 1, day) for day in (1, 2, 3)] + [None]))
            for i in range(n)]


def constants(rng: random.Random) -> dict[str, object]:
    return {"a": rng.randrange(8), "f": rng.choice([0.5, 1.0, 2, 3.5]),
            "s": rng.choice("xyzw"), "d": f"2026-01-0{rng.randrange(1, 5)}"}


#: the shapes whose constants are all lifted to keys: one view, whatever the constants
#: (an aggregate without GROUP BY: two, the second answering a key without rows)
SHARED = {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 7: 2, 8: 2, 9: 1, 10: 1, 11: 1, 12: 1, 13: 1, 15: 1,
          18: 1, 19: 1}


@pytest.mark.parametrize("shards", [1, 4])
def test_ad_hoc_queries_share_views_and_match_duckdb(shards: int, monkeypatch) -> None:
    monkeypatch.setattr(tuning, "ADHOC_VIEWS", 1000)
    rng = random.Random(shards)
    db = noria_py.connect(shards=shards)
    oracle = Oracle(DDL)
    for sql in DDL:
        db.execute(sql)
    t_rows, u_rows = rows_of(rng, 60), [(rng.randrange(8), rng.randrange(8)) for _ in range(10)]
    db.table("t").insert(t_rows)
    db.table("u").insert(u_rows)
    for round_ in range(3):
        if round_:                          # the views are kept up to date meanwhile
            gone = rng.sample(t_rows, 15)
            db.table("t").delete(gone)
            for r in gone:
                t_rows.remove(r)
            more = rows_of(rng, 75)[60:]
            db.table("t").insert(more)
            t_rows += more
        oracle.load({"t": t_rows, "u": u_rows})
        for i, shape in enumerate(SHAPES + ORDERED):
            before = len(db.queries())
            for _ in range(4):
                sql = shape.format(**constants(rng))
                got = db.execute(sql).fetchall()
                want = oracle.con.execute(sql).fetchall()
                if shape in ORDERED:
                    assert got == want, sql
                else:
                    assert sorted(got, key=repr) == sorted(want, key=repr), sql
            if i in SHARED:
                assert len(db.queries()) - before <= (0 if round_ else SHARED[i]), shape


def test_constants_that_a_lookup_would_not_match_stay_constants() -> None:
    """A key column whose type would take the constant other than as it is (a DATE
    given as text, an INT given 1.5) keeps it a filter: each is its own view."""
    db = noria_py.connect()
    db.execute(DDL[0])
    db.table("t").insert([(1, 1, 1.0, "x", datetime.date(2026, 1, 2))])
    assert db.execute("SELECT id FROM t WHERE d = '2026-01-02'").fetchall() == [(1,)]
    assert db.execute("SELECT id FROM t WHERE a = 1.0").fetchall() == [(1,)]
    assert db.execute("SELECT id FROM t WHERE f = 1").fetchall() == [(1,)]
    assert db.execute("SELECT COUNT(*) FROM t WHERE a = 7").fetchall() == [(0,)]


def test_unnamed_views_are_bounded_least_recently_read_first(monkeypatch) -> None:
    monkeypatch.setattr(tuning, "ADHOC_VIEWS", 3)
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT, a INT)")
    db.table("t").insert([(i, i % 10) for i in range(100)])
    db.execute("CREATE VIEW named AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    base_nodes = len(db.graph())
    for i in range(3):
        db.execute(f"SELECT id FROM t WHERE a + 0 > {i}")
    first = db.queries()[0]["name"]
    db.execute("SELECT id FROM t WHERE a + 0 > 0")            # read again: now the most recent
    assert db.queries()[-1]["name"] == first
    db.execute("SELECT id FROM t WHERE a + 0 > 7")            # a fourth: the least recent goes
    names = [q["name"] for q in db.queries()]
    assert len(names) == 3 and first in names
    for i in range(40):
        assert db.execute(f"SELECT COUNT(*) FROM t WHERE a > {i % 12}").fetchall() == \
            [(sum(1 for j in range(100) if j % 10 > i % 12),)]
    assert len(db.queries()) == 3
    assert len(db.graph()) <= base_nodes + 3 * 4
    db.table("t").insert([(100, 9)])                      # writes go on, named view right
    assert dict(db.view("named").all())[9] == 11


def test_idle_unnamed_views_go_when_the_next_is_made(monkeypatch) -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT, a INT)")
    db.execute("SELECT id FROM t WHERE a + 0 > 1")
    db.execute("SELECT id FROM t WHERE a + 0 > 2")
    assert len(db.queries()) == 2
    monkeypatch.setattr(tuning, "ADHOC_IDLE", -1.0)       # every view counts as idle
    db.execute("SELECT id FROM t WHERE a + 0 > 3")
    assert [q["sql"] for q in db.queries()] == ["SELECT id FROM t WHERE a + 0 > 3"]


def test_queries_are_listed_and_dropped() -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT, a INT)")
    db.table("t").insert([(1, 1), (2, 2)])
    nodes = len(db.graph())
    db.execute("SELECT id FROM t WHERE a = 1")
    db.execute("SELECT id FROM t WHERE a > 1")
    (q1, q2) = db.queries()
    assert q1["sql"] == "SELECT id FROM t WHERE a = 1" and q1["nodes"] >= 1
    assert q1["idle"] >= 0 and q2["name"] != q1["name"]
    db.drop_query(q1["name"])
    assert [q["name"] for q in db.queries()] == [q2["name"]]
    with pytest.raises(UnknownViewError):
        db.drop_query(q1["name"])
    db.drop_query()
    assert db.queries() == [] and len(db.graph()) == nodes
    assert db.execute("SELECT id FROM t WHERE a = 2").fetchall() == [(2,)]   # made again
    assert db.views() == []
