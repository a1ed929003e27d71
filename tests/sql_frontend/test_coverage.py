"""SQL added for sqllogictest coverage: SELECT without FROM, EXCEPT/INTERSECT (SQLite's
left-to-right compound order), CREATE/DROP INDEX, INSERT ... SELECT, subqueries.

Plan-level checks here; ``test_subqueries_match_sqlite`` runs the engine against
SQLite (in the standard library) through random inserts and deletes.
"""
from __future__ import annotations

import random
import sqlite3

import pytest

import noria_py
from sql_frontend import (
    ArityError,
    InsertSelect,
    NoOp,
    SetOp,
    SqlError,
    TypeMismatchError,
    UnsupportedError,
    Values,
    parse,
)
from sql_frontend.plan import Distinct, Join, Project, Union_


def _rels(rel):
    out = [rel]
    for name in ("input", "left", "right"):
        x = getattr(rel, name, None)
        if x is not None:
            out += _rels(x)
    for x in getattr(rel, "inputs", ()) or ():
        out += _rels(x)
    return out


def test_select_without_from_reads_one_empty_row(cat):
    q = parse("SELECT 1, 2 + 3 AS five", cat).query
    assert q.names == ("1", "five")
    assert any(isinstance(r, Values) and r.rows == ((),) for r in _rels(q.root))


def test_compound_operators_apply_left_to_right(cat):
    # SQLite: (a UNION x) INTERSECT b -- sqlglot would bind INTERSECT tighter
    q = parse("SELECT a FROM t UNION SELECT x FROM u INTERSECT SELECT b FROM t", cat).query
    top = q.root
    assert isinstance(top, SetOp) and top.kind == "intersect"
    assert isinstance(top.left, Distinct) and isinstance(top.left.input, Union_)
    q = parse("SELECT a FROM t EXCEPT SELECT x FROM u UNION ALL SELECT b FROM t", cat).query
    assert isinstance(q.root, Union_) and isinstance(q.root.inputs[0], SetOp)
    with pytest.raises(UnsupportedError, match="EXCEPT ALL"):
        parse("SELECT a FROM t EXCEPT ALL SELECT x FROM u", cat)
    with pytest.raises(TypeMismatchError, match="compound SELECT column 1"):
        parse("SELECT a FROM t EXCEPT SELECT y FROM u", cat)


def test_index_statements_are_no_ops(cat):
    assert isinstance(parse("CREATE INDEX i ON t (a, b DESC)", cat), NoOp)
    assert isinstance(parse("DROP INDEX i", cat), NoOp)
    with pytest.raises(UnsupportedError, match="UNIQUE"):
        parse("CREATE UNIQUE INDEX i ON t (a)", cat)
    with pytest.raises(SqlError, match="no column named zz"):
        parse("CREATE INDEX i ON t (zz)", cat)
    with pytest.raises(SqlError, match="no such table"):
        parse("CREATE INDEX i ON nope (a)", cat)


def test_insert_select(cat):
    st = parse("INSERT INTO w (q, p) SELECT a, b FROM t WHERE a > 1", cat)
    assert isinstance(st, InsertSelect) and st.positions == (1, 0)
    with pytest.raises(ArityError):
        parse("INSERT INTO w (p) SELECT a, b FROM t", cat)
    with pytest.raises(TypeMismatchError):
        parse("INSERT INTO w (p) SELECT c FROM t", cat)


def test_subqueries_become_joins(cat):
    q = parse("SELECT a FROM t WHERE a IN (SELECT x FROM u)", cat).query
    assert any(isinstance(r, Join) and r.kind == "left" for r in _rels(q.root))
    q = parse("SELECT a, (SELECT COUNT(*) FROM u WHERE u.x < t.b) FROM t", cat).query
    assert q.names[0] == "a" and len(q.names) == 2
    assert isinstance(q.root, Project)


def test_subquery_limits(cat):
    cases = {
        "SELECT (SELECT x FROM u) FROM t": "may give several rows",
        "SELECT (SELECT x FROM u WHERE u.x = t.a) FROM t": "not an aggregate",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.x = t.a OR t.b IS NULL)":
            "can hold when it is NULL",
        "SELECT a, COUNT(*) FROM t GROUP BY a HAVING a IN (SELECT x FROM u)":
            r"IN \(subquery\) in HAVING",
        "SELECT a FROM t WHERE a IN (SELECT x FROM u WHERE u.x IN (SELECT b FROM t AS t2 "
        "WHERE t2.a = t.a))": "subquery inside a correlated subquery",
    }
    for sql, what in cases.items():
        with pytest.raises(UnsupportedError, match=what) as ei:
            parse(sql, cat)
        assert ei.value.position is not None, sql
    with pytest.raises(SqlError, match="2 columns"):
        parse("SELECT a FROM t WHERE a IN (SELECT x, x FROM u)", cat)
    with pytest.raises(TypeMismatchError):
        parse("SELECT a FROM t WHERE a IN (SELECT y FROM u)", cat)


def test_empty_in_list_is_false_even_for_null(cat):
    db = noria_py.connect()
    db.execute("CREATE TABLE e (a INT)")
    db.execute("INSERT INTO e VALUES (NULL), (1)")
    assert sorted(db.execute("SELECT a NOT IN (), a IN () FROM e").fetchall(),
                  key=repr) == [(True, False), (True, False)]


VIEWS = [
    "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.b<t1.b) FROM t1",
    "SELECT a FROM t1 WHERE EXISTS(SELECT 1 FROM t1 AS x WHERE x.b<t1.b)",
    "SELECT a, (SELECT avg(c) FROM t1) FROM t1",
    "SELECT a FROM t1 WHERE a IN (SELECT x FROM t2)",
    "SELECT a FROM t1 WHERE a NOT IN (SELECT x FROM t2)",
    "SELECT a, a IN (SELECT x FROM t2), a NOT IN (SELECT x FROM t2 WHERE y > 1) FROM t1",
    "SELECT a, b NOT IN (SELECT x FROM t2 WHERE t2.y = t1.a) FROM t1",
    ("SELECT a, EXISTS (SELECT 1 FROM t2 WHERE t2.y = t1.a), "
     "NOT EXISTS (SELECT * FROM t2 WHERE x > t1.b) FROM t1"),
    "SELECT a, (SELECT SUM(y) + COUNT(*) FROM t2 WHERE t2.x = t1.a) FROM t1",
    "SELECT a, (SELECT count(*) FROM t1 AS x WHERE x.c>t1.c AND x.b<t1.b) FROM t1",
    "SELECT (SELECT MAX(x) FROM t2), 5",
    "SELECT a FROM t1 WHERE b > (SELECT AVG(y) FROM t2 WHERE t2.x <> t1.a)",
    "SELECT a FROM t1 EXCEPT SELECT x FROM t2",
    "SELECT a, b FROM t1 INTERSECT SELECT x, y FROM t2 UNION SELECT 9, 9",
    "SELECT t1.a, t2.y, t3.c FROM t1, t1 AS t3, t2 WHERE t2.x = t3.a AND t1.b = t2.y",
]


def _norm(rows):
    out = []
    for r in rows:
        out.append(repr(tuple(int(v) if isinstance(v, bool) else
                              (round(v, 6) if isinstance(v, float) else v) for v in r)))
    return sorted(out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_subqueries_match_sqlite(seed):
    """Views created before the data; random inserts and deletes; SQLite as oracle."""
    db = noria_py.connect(clocks=False)
    lite = sqlite3.connect(":memory:")
    for ddl in ("CREATE TABLE t1(a INTEGER, b INTEGER, c INTEGER)",
                "CREATE TABLE t2(x INTEGER, y INTEGER)"):
        db.execute(ddl)
        lite.execute(ddl)
    for i, v in enumerate(VIEWS):
        db.execute(f"CREATE VIEW v{i} AS {v}")
    rng = random.Random(seed)
    rows: dict[str, list] = {"t1": [], "t2": []}
    cols = {"t1": ["a", "b", "c"], "t2": ["x", "y"]}
    for step in range(160):
        t = rng.choice(["t1", "t2"])
        if rows[t] and rng.random() < 0.35:
            r = rng.choice(rows[t])
            rows[t].remove(r)
            db.table(t).delete([r])
            cond = " AND ".join(f"{c} IS ?" for c in cols[t])
            lite.execute(f"DELETE FROM {t} WHERE rowid IN "
                         f"(SELECT rowid FROM {t} WHERE {cond} LIMIT 1)", r)
        else:
            r = tuple(rng.choice([None, 0, 1, 2, 3]) for _ in cols[t])
            rows[t].append(r)
            db.table(t).insert([r])
            lite.execute(f"INSERT INTO {t} VALUES ({', '.join('?' * len(r))})", r)
        if step % 16 == 15:
            db.wait()
            for i, v in enumerate(VIEWS):
                assert _norm(db.view(f"v{i}").all()) == _norm(lite.execute(v).fetchall()), v
    # and views created after the data (the initialization path) agree too
    for i, v in enumerate(VIEWS):
        db.execute(f"CREATE VIEW late{i} AS {v}")
        assert _norm(db.view(f"late{i}").all()) == _norm(lite.execute(v).fetchall()), v
