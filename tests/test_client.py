"""The Python API of shared/CONTRACT.md, end to end through SQL."""
from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

import noria_py


@pytest.fixture(params=[1, 4], ids=["shards1", "shards4"])
def db(request):
    d = noria_py.connect(shards=request.param)
    d.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    d.execute("CREATE VIEW votes_per_article AS SELECT article_id, COUNT(*) AS votes FROM vote "
              "WHERE article_id = ? GROUP BY article_id")
    yield d
    d.close()


def test_contract_example(db):
    db.execute("INSERT INTO vote VALUES (?, ?)", (1, 7))
    db.execute("INSERT INTO vote VALUES (?, ?)", (1, 8))
    db.execute("DELETE FROM vote WHERE article_id = ? AND user_id = ?", (1, 7))
    rows = db.execute("SELECT * FROM votes_per_article WHERE article_id = ?", (1,)).fetchall()
    assert rows == [(1, 1)]
    res = db.execute("SELECT article_id, COUNT(*) FROM vote GROUP BY article_id")
    assert res.columns[0] == "article_id"
    assert res.fetchone() == (1, 1)
    assert res.fetchone() is None
    table = db.execute("SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id").arrow()
    assert isinstance(table, pa.Table) and table.column("n").to_pylist() == [1]


def test_table_and_view_handles(db):
    t = db.table("vote")
    t.insert([(1, 7), (1, 8), (2, 9)])
    t.delete([(1, 8)])
    v = db.view("votes_per_article")
    assert v.columns == ["article_id", "votes"]
    assert v.lookup(1) == [(1, 1)]
    assert v.lookup(3) == []
    assert v.lookup_many([1, 2, 3]) == [[(1, 1)], [(2, 1)], []]
    assert sorted(v.all()) == [(1, 1), (2, 1)]
    with pytest.raises(noria_py.ArityError):
        v.lookup(1, 2)
    t.insert_arrow(pa.table({"article_id": [5, 5], "user_id": [1, 2]}))
    assert v.lookup(5) == [(5, 2)]


def test_empty_result_arrow_keeps_types(db):
    t = db.execute("SELECT article_id, user_id FROM vote WHERE user_id > 100").arrow()
    assert t.num_rows == 0 and t.schema.field("user_id").type == pa.int64()


def test_rejected_batch_changes_nothing(db):
    t = db.table("vote")
    t.insert([(1, 1)])
    with pytest.raises(noria_py.TypeMismatchError):
        t.insert([(1, 2), (1, "three")])
    with pytest.raises(noria_py.ArityError):
        t.insert([(1, 2), (1,)])
    with pytest.raises(noria_py.RowNotFoundError):
        t.delete([(1, 1), (9, 9)])
    db.wait()
    assert db.view("votes_per_article").lookup(1) == [(1, 1)]


def test_primary_keys(db):
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT NOT NULL, day DATE)")
    a = db.table("article")
    a.insert([(1, "one", datetime.date(2020, 1, 1)), (2, "two", None)])
    with pytest.raises(noria_py.DuplicateKeyError):
        a.insert([(3, "three", None), (1, "dup", None)])
    with pytest.raises(noria_py.TypeMismatchError):
        a.insert([(4, None, None)])
    a.delete_keys([2])
    with pytest.raises(noria_py.RowNotFoundError):
        a.delete_keys([2])
    rows = db.execute("SELECT id, title, day FROM article").fetchall()
    assert rows == [(1, "one", datetime.date(2020, 1, 1))]
    db.execute("UPDATE article SET title = 'uno' WHERE id = 1")
    assert db.execute("SELECT title FROM article WHERE id = ?", (1,)).fetchall() == [("uno",)]


def test_errors_are_noria_errors(db):
    with pytest.raises(noria_py.UnknownTableError):
        db.execute("SELECT * FROM nope")
    with pytest.raises(noria_py.UnknownColumnError):
        db.execute("SELECT nope FROM vote")
    with pytest.raises(noria_py.ParseError):
        db.execute("SELEC 1")
    with pytest.raises(noria_py.AlreadyExistsError):
        db.execute("CREATE TABLE vote (a INT)")
    with pytest.raises(noria_py.UnknownViewError):
        db.view("nope")
    with pytest.raises(noria_py.UnknownTableError):
        db.table("nope")
    with pytest.raises(noria_py.UnknownNodeError):
        db.fail("no-such-node")


def test_queries_install_reused_unnamed_views(db):
    before = len(db.graph())
    db.execute("SELECT user_id FROM vote WHERE article_id = ?", (1,))
    after_first = len(db.graph())
    db.execute("SELECT user_id FROM vote WHERE article_id = ?", (2,))
    assert len(db.graph()) == after_first > before


def test_graph_introspection(db):
    g = db.graph()
    ids = {n["id"] for n in g}
    for n in g:
        assert set(n) >= {"id", "kind", "shard", "stateful", "parents", "children", "view"}
        assert set(n["parents"]) <= ids and set(n["children"]) <= ids
    readers = [n for n in g if n["kind"] == "reader"]
    assert readers and all(n["view"] == "votes_per_article" for n in readers)
    if db.shards > 1:
        assert any(n["kind"] == "sharder" for n in g)
        assert {n["shard"] for n in g if n["kind"] == "aggregate"} == set(range(db.shards))


def test_lineage_recovery_restores_views(db):
    db.table("vote").insert([(1, 1), (2, 2), (2, 3)])
    node = next(n for n in db.graph() if n["kind"] in ("aggregate", "sharder"))["id"]
    db.fail(node)
    db.table("vote").insert([(2, 4)])          # lost by the failed node, rebuilt by lineage
    report = db.recover(node, strategy="lineage")
    db.wait()
    assert report.strategy == "lineage" and report.seconds >= 0
    assert db.view("votes_per_article").lookup(2) == [(2, 3)]
    assert db.recoveries() == [report]
    with pytest.raises(noria_py.RecoveryError):
        db.recover(node, strategy="bogus")


def test_closed_handle(db):
    db.close()
    with pytest.raises(noria_py.ClosedError):
        db.execute("SELECT * FROM vote")


def test_insert_arrow_numeric_columns_go_in_as_arrays(db):
    """int32/uint16 columns go in as columns (no Python rows); NULLs, a text value or a
    table already indexed take the row path, with the same checks as insert()."""
    from noria_py.errors import TypeMismatchError
    db.execute("CREATE TABLE m (a INT, x FLOAT)")
    db.execute("CREATE VIEW ms AS SELECT a, COUNT(*) AS n, SUM(x) AS s FROM m GROUP BY a")
    t = db.table("m")
    t.insert_arrow(pa.table({"x": pa.array([1, 2, 3], pa.int64()),
                             "a": pa.array([7, 7, 8], pa.int32())}))
    base = db.graph_[db._tables["m"].node].op
    assert base._rows is None and base.chunks[-1].cols[0].dtype.name == "int64"
    t.insert_arrow(pa.table({"a": pa.array([8], pa.uint16()), "x": pa.array([0.5])}))
    with pytest.raises(TypeMismatchError):
        t.insert_arrow(pa.table({"a": ["9"], "x": [1.0]}))
    with pytest.raises(TypeMismatchError):
        t.insert_arrow(pa.table({"a": pa.array([2**63], pa.uint64()), "x": [1.0]}))
    t.insert_arrow(pa.table({"a": pa.array([None, 8], pa.int64()), "x": [1.0, None]}))
    t.insert_arrow(pa.table({"a": pa.array([], pa.int64()), "x": pa.array([], pa.float64())}))
    assert sorted(db.view("ms").all(), key=repr) == sorted(
        [(7, 2, 3.0), (8, 3, 3.5), (None, 1, 1.0)], key=repr)
    t.delete([(7, 1.0)])                     # indexed from here on
    t.insert_arrow(pa.table({"a": pa.array([7], pa.int32()), "x": [4.0]}))
    assert base.chunks == [] and len(t) == 6
    assert sorted(db.view("ms").all(), key=repr) == sorted(
        [(7, 2, 6.0), (8, 3, 3.5), (None, 1, 1.0)], key=repr)


def test_create_views_initializes_once_and_hands_back_errors(db, monkeypatch):
    from noria_py import client
    from sql_frontend import plan as lp
    passes = []
    real = client.initialize
    monkeypatch.setattr(client, "initialize",
                        lambda g, fresh, *rest: passes.append(fresh) or real(g, fresh, *rest))
    db.table("vote").insert([(1, 1), (1, 2), (3, 3), (3, 3)])
    by_user = db.parse("CREATE VIEW by_user AS SELECT user_id, COUNT(*) AS n FROM vote "
                       "GROUP BY user_id")
    assert isinstance(by_user, lp.CreateView) and by_user.query.order == ()
    made = db.create_views([
        "CREATE VIEW counts AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id",
        "CREATE VIEW counts AS SELECT user_id FROM vote",      # taken by the one before
        "SELECT * FROM vote",                                  # not a CREATE VIEW
        "CREATE VIEW nope AS SELECT * FROM missing",
        by_user,
    ], keep_going=True)
    assert len(passes) == 1                                    # one migration for both
    assert [type(m).__name__ for m in made] == [
        "View", "AlreadyExistsError", "Error", "UnknownTableError", "View"]
    assert sorted(made[0].all()) == [(1, 2), (3, 2)]
    assert sorted(db.view("by_user").all()) == [(1, 1), (2, 1), (3, 2)]
    assert {"counts", "by_user"} <= set(db.views()) and "nope" not in db.views()
    db.table("vote").insert([(3, 4)])
    db.wait()
    assert sorted(made[0].all()) == [(1, 2), (3, 3)]
    # by default the first error is raised; the views before it exist, those after do not
    with pytest.raises(noria_py.UnknownTableError):
        db.create_views(["CREATE VIEW a1 AS SELECT user_id FROM vote",
                         "CREATE VIEW a2 AS SELECT * FROM missing",
                         "CREATE VIEW a3 AS SELECT article_id FROM vote"])
    assert "a1" in db.views() and "a2" not in db.views() and "a3" not in db.views()
    assert db.create_views([]) == []


def test_table_rows_keep_duplicates(db):
    vote = db.table("vote")
    assert vote.rows() == []
    vote.insert([(1, 1), (2, 2), (1, 1)])
    vote.delete([(2, 2)])
    assert sorted(vote.rows()) == [(1, 1), (1, 1)]


@pytest.mark.parametrize("shards", [1, 4])
def test_nan_keys_through_the_api(shards):
    """A NaN primary key is one key (PostgreSQL): delete_keys and a view's lookup find it
    whatever NaN object is handed over, on whichever shard it lives (noria_py/nan.py)."""
    import math
    import struct
    other = struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]
    db = noria_py.connect(shards=shards)
    db.execute("CREATE TABLE p (k DOUBLE PRIMARY KEY, v INT)")
    db.execute("CREATE VIEW by_k AS SELECT v FROM p WHERE k = ?")
    t = db.table("p")
    t.insert([(float("nan"), 1), (math.inf, 2), (-math.inf, 3)])
    with pytest.raises(noria_py.DuplicateKeyError):
        t.insert([(other, 9)])
    assert db.view("by_k").lookup(other) == [(1,)]
    assert db.view("by_k").lookup_many([float("nan"), math.inf, 0.0]) == [[(1,)], [(2,)], []]
    assert db.execute("SELECT v FROM p WHERE k = CAST('NaN' AS DOUBLE)").fetchall() == [(1,)]
    assert sorted(db.execute("SELECT v FROM p WHERE k > 0").fetchall()) == [(1,), (2,)]
    t.delete_keys([other])
    assert db.view("by_k").lookup(float("nan")) == [] and len(t) == 2
    db.execute("INSERT INTO p VALUES (CAST('nan' AS DOUBLE), 4)")
    db.execute("UPDATE p SET v = 5 WHERE k = CAST('NaN' AS DOUBLE)")
    assert db.view("by_k").lookup(float("nan")) == [(5,)]
    db.close()


def test_a_date_meeting_a_timestamp_is_its_midnight_as_in_duckdb():
    """d < t, d = t, t IN (d), COALESCE(d, t) and CASE over a DATE and a TIMESTAMP: the
    DATE is promoted (a Python date and datetime do not compare: this raised TypeError)."""
    import duckdb
    rows = [(1, datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 5)),
            (2, datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1)),
            (3, None, datetime.datetime(2023, 1, 1)), (4, datetime.date(2025, 1, 1), None)]
    db = noria_py.connect()
    db.execute("CREATE TABLE x (id INT PRIMARY KEY, d DATE, t TIMESTAMP)")
    db.table("x").insert(rows)
    duck = duckdb.connect()
    duck.execute("CREATE TABLE x (id BIGINT, d DATE, t TIMESTAMP)")
    duck.executemany("INSERT INTO x VALUES (?, ?, ?)", rows)
    for sql in ["SELECT id, d < t, d >= t FROM x", "SELECT id FROM x WHERE d = t",
                "SELECT id FROM x WHERE t IN (d, TIMESTAMP '2023-01-01 00:00:00')",
                "SELECT id, COALESCE(d, t) FROM x",
                "SELECT id, CASE WHEN id < 3 THEN d ELSE t END FROM x",
                "SELECT MAX(COALESCE(t, d)) FROM x"]:
        assert sorted(db.execute(sql).fetchall(), key=repr) == \
            sorted(duck.execute(sql).fetchall(), key=repr), sql


def test_insert_columns_adds_the_rows_insert_would() -> None:
    """``Table.insert_columns``: one array per column, as arrays where the table takes
    them (int64/float64), else row by row; the same rows as ``insert``,
    the same errors, all or nothing."""
    import numpy as np

    from noria_py.errors import ArgumentError, ArityError, DuplicateKeyError, TypeMismatchError
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, x FLOAT, s TEXT)")
    db.execute("CREATE TABLE n (a INT, b FLOAT)")
    db.execute("CREATE VIEW c AS SELECT COUNT(*) AS k, SUM(a) AS sa FROM n")
    n = db.table("n")
    n.insert_columns([np.arange(5, dtype=np.int64), np.linspace(0, 1, 5)])
    n.insert_columns([[7, 8], [float("nan"), 2]])             # (lists: arrays too)
    n.insert_columns([np.zeros(0, np.int64), np.zeros(0)])
    assert sorted(map(repr, n.rows())) == sorted(map(repr, (
        [(i, float(v)) for i, v in zip(range(5), np.linspace(0, 1, 5))]
        + [(7, float("nan")), (8, 2.0)])))
    assert db.view("c").all() == [(7, 25)]
    t = db.table("t")
    t.insert_columns([np.array([1, 2]), np.array([0.5, 1.5]), np.array(["a", "b"])])
    before = sorted(t.rows())
    with pytest.raises(DuplicateKeyError):
        t.insert_columns([np.array([3, 1]), np.array([0.0, 0.0]), np.array(["c", "d"])])
    with pytest.raises(TypeMismatchError):
        t.insert_columns([np.array([4]), np.array(["x"]), np.array(["e"])])
    with pytest.raises(ArityError):
        t.insert_columns([np.array([4]), np.array([0.0])])
    with pytest.raises(ArgumentError):
        t.insert_columns([np.array([4, 5]), np.array([0.0]), np.array(["e"])])
    assert sorted(t.rows()) == before
