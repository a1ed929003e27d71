"""``Database.prepare``: a statement parsed once and run many times, checked against
``execute`` of the same SQL and values."""
from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import ArityError, TypeMismatchError, UnknownTableError
from sql_frontend.types import SqlType


@pytest.fixture
def db() -> noria_py.Database:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT, d DATE)")
    db.execute("CREATE VIEW by_a AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    db.table("t").insert([(i, i % 5, str(i), None) for i in range(50)])
    return db


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.integers(-2, 7), min_size=1, max_size=10))
def test_a_prepared_lookup_answers_what_execute_answers(keys: list[int]) -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    db.table("t").insert([(i, i % 5) for i in range(20)])
    queries = ["SELECT COUNT(*) FROM t WHERE a = ?", "SELECT id FROM t WHERE a = ? ORDER BY id",
               "SELECT a, COUNT(*) FROM t WHERE a = ? GROUP BY a"]
    prepared = [db.prepare(sql) for sql in queries]
    for n, k in enumerate(keys):
        db.table("t").insert([(100 + n, k)])          # writes between the runs
        for sql, p in zip(queries, prepared):
            assert p.run((k,)).fetchall() == db.execute(sql, (k,)).fetchall()


def test_a_keyed_select_is_planned_once(db: noria_py.Database) -> None:
    p = db.prepare("SELECT n FROM by_a WHERE a = ?")
    assert (p.columns, p.types, p.param_types) == (["n"], [SqlType.INT], [SqlType.INT])
    for k in range(5):
        assert p.run((k,)).fetchall() == [(10,)]
    assert len(db.queries()) == 1
    db.drop_query()                                  # its view goes: planned again
    assert p.run((1,)).fetchall() == [(10,)]
    with pytest.raises(ArityError):
        p.run(())


def test_its_view_is_kept_while_it_is_open(db: noria_py.Database,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noria_py.tuning, "ADHOC_VIEWS", 2)
    p = db.prepare("SELECT id FROM t WHERE a = ? ORDER BY id")
    for i in range(5):                               # other ad-hoc queries come and go
        db.execute(f"SELECT id FROM t WHERE b = '{i}' AND id > {i}")
    assert p.sql in [q["sql"] for q in db.queries()]
    p.close()
    db.execute("SELECT id FROM t WHERE id > 40")
    db.execute("SELECT id FROM t WHERE id > 41")
    assert p.sql not in [q["sql"] for q in db.queries()]


def test_values_elsewhere_are_bound_at_each_run(db: noria_py.Database) -> None:
    p = db.prepare("SELECT id FROM t WHERE a > ? AND id < ? ORDER BY id")
    assert p.param_types == [SqlType.INT, SqlType.INT]
    assert p.run((3, 10)).fetchall() == [(4,), (9,)]
    assert p.run((0, 5)).fetchall() == [(1,), (2,), (3,), (4,)]


def test_a_prepared_insert_binds_without_parsing(db: noria_py.Database) -> None:
    p = db.prepare("INSERT INTO t (id, d, a) VALUES (?, ?, ?), (?, ?, ?)")
    assert p.param_types == [SqlType.INT, SqlType.DATE, SqlType.INT] * 2
    assert p.count((1, None, 1, 2, None, 2)) == 2
    res = p.run((100, "2024-02-29", 7, 101, datetime.date(2024, 3, 1), 7))
    assert res.rowcount == 2
    assert sorted(r for r in db.table("t").rows() if r[0] >= 100) == [
        (100, 7, None, datetime.date(2024, 2, 29)), (101, 7, None, datetime.date(2024, 3, 1))]
    assert db.view("by_a").all().count((7, 2)) == 1
    with pytest.raises(TypeMismatchError):
        p.run((102, "not a date", 7, 103, None, 7))
    with pytest.raises(TypeMismatchError):
        p.run(("x", None, 7, 103, None, 7))
    with pytest.raises(noria_py.DuplicateKeyError):
        p.run((100, None, 7, 104, None, 7))
    assert len(db.table("t")) == 52                  # a refused run changed nothing


def test_a_prepared_insert_follows_its_table(db: noria_py.Database) -> None:
    p = db.prepare("INSERT INTO t VALUES (?, ?, ?, ?)")
    db.execute("DROP VIEW by_a")
    db.execute("DROP TABLE t")
    with pytest.raises(UnknownTableError):
        p.run((1, 1, "x", None))
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a TEXT, b TEXT, d DATE)")
    p.run((1, "now text", "x", None))
    assert db.table("t").rows() == [(1, "now text", "x", None)]


def test_after_ddl_a_prepared_statement_is_planned_again(db: noria_py.Database) -> None:
    q = db.prepare("SELECT n FROM by_a WHERE a = ?")
    assert q.run((1,)).fetchall() == [(10,)]
    db.execute("DROP VIEW by_a")
    db.execute("CREATE VIEW by_a AS SELECT a, MAX(id) AS n FROM t GROUP BY a")
    assert q.run((1,)).fetchall() == [(46,)]
    db.execute("DROP VIEW by_a")
    with pytest.raises(noria_py.UnknownTableError):
        q.run((1,))
    db.execute("CREATE VIEW by_a AS SELECT a, MIN(id) AS n FROM t GROUP BY a")
    assert q.run((1,)).fetchall() == [(1,)]


def test_execute_keeps_keyed_reads_and_inserts_prepared(db: noria_py.Database) -> None:
    for k in range(5):
        assert db.execute("SELECT n FROM by_a WHERE a = ?", (k,)).fetchall() == [(10,)]
    assert db.execute("SELECT n FROM by_a WHERE a = 3").fetchall() == [(10,)]
    db.execute("INSERT INTO t (id, a) VALUES (?, ?)", (100, 3))
    db.execute("INSERT INTO t (id, a) VALUES (?, ?)", (101, 3))
    assert set(db._prepared) == {"SELECT n FROM by_a WHERE a = ?", "SELECT n FROM by_a WHERE a = 3",
                                 "INSERT INTO t (id, a) VALUES (?, ?)"}
    assert db.execute("SELECT n FROM by_a WHERE a = 3").fetchall() == [(12,)]
    db.execute("DROP VIEW by_a")                      # the same text means another view now
    db.execute("CREATE VIEW by_a AS SELECT a, MAX(id) AS n FROM t GROUP BY a")
    assert db.execute("SELECT n FROM by_a WHERE a = ?", (3,)).fetchall() == [(101,)]
    db.execute("DROP VIEW by_a")
    db.execute("DROP TABLE t")                        # and another table
    db.execute("CREATE TABLE t (id TEXT PRIMARY KEY, a TEXT)")
    db.execute("INSERT INTO t (id, a) VALUES (?, ?)", ("x", "y"))
    assert db.table("t").rows() == [("x", "y")]
    with pytest.raises(noria_py.TypeMismatchError):
        db.execute("INSERT INTO t (id, a) VALUES (?, ?)", (1, "y"))
