"""A read by key finds the row whose WHERE divided by zero (noria_py/planner/poison.py):
the filter under a keyed reader keeps the key's columns in its row of markers, where
that cannot make a read silently wrong. PostgreSQL's answers are checked over the wire
in tests/pg/test_division.py; here, the engine and the plans' shape."""
from __future__ import annotations

import pytest

import noria_py
from noria_py.divzero import DIV0

from .helpers import Bare

VIEW = "CREATE VIEW w AS SELECT id, b FROM t WHERE PG_DIV(10, b) > 1"


@pytest.mark.parametrize("shards,partial", [(1, False), (2, False), (1, True)])
def test_a_read_by_key_finds_its_poisoned_row(shards: int, partial: bool) -> None:
    db = noria_py.connect(shards=shards, partial=partial)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, b INT)")
    db.execute(VIEW)
    db.execute("CREATE VIEW k AS SELECT b FROM t WHERE PG_DIV(10, b) > 1 AND id = ?")
    db.table("t").insert([(1, 2), (2, 0), (3, 1), (4, 20)])
    db.wait()
    read = db.prepare("SELECT b FROM w WHERE id = ?")
    for key, want in [(1, [(2,)]), (2, [(DIV0,)]), (3, [(1,)]), (4, []), (5, [])]:
        assert read.run((key,)).fetchall() == want, key
        assert db.view("k").lookup(key) == want, key
    assert (DIV0, DIV0) in db.view("w").all()           # a whole read still holds it
    db.table("t").delete([(2, 0)])
    db.wait()
    assert read.run((2,)).fetchall() == [] and db.view("k").lookup(2) == []
    db.close()


@pytest.mark.parametrize("shards,partial", [(1, False), (2, False), (1, True)])
def test_a_read_by_key_through_an_aggregate_fails_for_that_key(shards: int,
                                                               partial: bool) -> None:
    """An aggregate grouped by the read's key takes the kept row into its key's group,
    whose COUNT(*), COUNT(x) and SUM are then the marker; other keys count as usual."""
    db = noria_py.connect(shards=shards, partial=partial)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute("CREATE VIEW g AS SELECT a, COUNT(*) AS n, COUNT(b) AS nb, SUM(b) AS s FROM t "
               "WHERE PG_DIV(10, b) > 1 AND a = ? GROUP BY a")
    db.table("t").insert([(1, 7, 2), (2, 7, 0), (3, 5, 1), (4, 5, 2), (5, 9, 20)])
    db.wait()
    for key, want in [(7, [(7, DIV0, DIV0, DIV0)]), (5, [(5, 2, 2, 3)]), (9, []), (8, [])]:
        assert db.view("g").lookup(key) == want, key
    db.table("t").delete([(2, 7, 0)])
    db.wait()
    assert db.view("g").lookup(7) == [(7, 1, 1, 2)]
    db.close()


def _filters(bare: Bare, sql: str) -> list:
    bare.add_view(sql)
    return [bare.graph[n].op for n in bare.planner.take_fresh() if bare.graph[n].kind == "filter"]


def test_kept_only_where_a_read_cannot_go_wrong() -> None:
    bare = Bare()
    keeps = lambda sql: [f.keep for f in _filters(bare, sql)]  # noqa: E731
    assert keeps("CREATE VIEW v1 AS SELECT a, b FROM t WHERE PG_DIV(10, b) > 1 AND a = ?") \
        == [(0,)]
    # filters over filters keep it too
    assert keeps("CREATE VIEW v2 AS SELECT a, c FROM t WHERE PG_DIV(10, b) > 1 "
                 "AND c <> 'x' AND a = ?") == [(0,)]
    # the engine's own / never gives the marker: the node is shared, unchanged
    assert keeps("CREATE VIEW v3 AS SELECT a, b FROM t WHERE 10 / b > 1 AND a = ?") == [()]
    # read whole: nothing to keep
    assert keeps("CREATE VIEW v4 AS SELECT a, b FROM t WHERE PG_DIV(10, b) > 2") == [()]
    # only the key is read: a hidden column carries the marker to the reader
    # (its probe: ops/reader.py)
    assert keeps("CREATE VIEW v5 AS SELECT a FROM t WHERE PG_DIV(10, b) > 3 AND a = ?") == [(0,)]
    # through an aggregate grouped by the key: its COUNT(*) is the marker while the
    # kept row is in its group (probed by a column not the key: ops/aggregate.py)
    assert keeps("CREATE VIEW v6 AS SELECT a, COUNT(*) FROM t WHERE PG_DIV(10, b) > 4 "
                 "AND a = ? GROUP BY a") == [(0,)]
    # ... but not where no column of the aggregated row would carry it: COUNT of the
    # key alone, or a row whose only column is the key
    assert keeps("CREATE VIEW v7 AS SELECT a, COUNT(a) FROM t WHERE PG_DIV(10, b) > 5 "
                 "AND a = ? GROUP BY a") == [()]
    assert keeps("CREATE VIEW v8 AS SELECT a, COUNT(*) FROM (SELECT a FROM t "
                 "WHERE PG_DIV(10, a) > 6) s WHERE a = ? GROUP BY a") == [()]


@pytest.mark.parametrize("shards,partial", [(1, False), (2, False), (1, True)])
def test_a_read_by_key_through_a_join_fails_for_that_key(shards: int, partial: bool) -> None:
    """A join passes the kept row on with its key (ops/join.py), matched or not: a
    read of that key fails, other keys read as usual, a read naming only the key too."""
    db = noria_py.connect(shards=shards, partial=partial)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute("CREATE TABLE e (a INT PRIMARY KEY, x TEXT)")
    db.execute("CREATE VIEW j AS SELECT t.id, e.x FROM t JOIN e ON t.a = e.a "
               "WHERE PG_DIV(10, b) > 1")
    db.execute("CREATE VIEW wj AS SELECT w.id, e.x FROM (SELECT id, a FROM t "
               "WHERE PG_DIV(10, b) > 1) w JOIN e ON w.a = e.a")
    db.table("e").insert([(7, "p"), (8, "q")])
    db.table("t").insert([(1, 7, 2), (2, 7, 0), (3, 8, 1), (4, 9, 0)])
    db.wait()
    for sql in ["SELECT x FROM wj WHERE id = ?", "SELECT id FROM wj WHERE id = ?"]:
        read = db.prepare(sql)
        for key, ok in [(1, True), (2, False), (3, True), (4, False), (5, True)]:
            rows = read.run((key,)).fetchall()
            assert (DIV0 not in sum(rows, ())) == ok, (sql, key, rows)
    db.table("t").delete([(2, 7, 0), (4, 9, 0)])
    db.wait()
    assert db.prepare("SELECT x FROM wj WHERE id = ?").run((2,)).fetchall() == []
    db.close()


@pytest.mark.parametrize("shards,partial", [(1, False), (2, False), (1, True)])
def test_a_key_that_is_the_marker_fails_every_read(shards: int, partial: bool) -> None:
    """A row whose key could not be known without the division (an aggregate's value,
    a computed key) fails every read by key while it is held (ops/reader.py)."""
    db = noria_py.connect(shards=shards, partial=partial)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute("CREATE VIEW n AS SELECT a, COUNT(*) AS n FROM t WHERE PG_DIV(10, b) > 1 "
               "GROUP BY a")
    db.execute("CREATE VIEW q AS SELECT id, PG_DIV(a, b) AS q FROM t")
    db.table("t").insert([(1, 7, 2), (2, 8, 1), (3, 9, 20)])
    db.wait()
    by_n, by_q = db.prepare("SELECT a FROM n WHERE n = ?"), db.prepare("SELECT id FROM q WHERE q = ?")
    assert sorted(by_n.run((1,)).fetchall()) == [(7,), (8,)]
    assert by_q.run((3,)).fetchall() == [(1,)]
    db.table("t").insert([(4, 6, 0)])
    db.wait()
    for read, key in [(by_n, k) for k in range(6)] + [(by_q, k) for k in range(6)]:
        assert DIV0 in sum(read.run((key,)).fetchall(), ()), key     # (every shard)
    db.table("t").delete([(4, 6, 0)])
    db.wait()
    assert sorted(by_n.run((1,)).fetchall()) == [(7,), (8,)] and by_q.run((99,)).fetchall() == []
    db.close()


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
def test_a_recovered_reader_fails_the_same_reads(strategy: str) -> None:
    """A reader brought back from its checkpoint or rebuilt counts its failing keys
    again (``Reader.poisoned``): the same reads fail after as before."""
    db = noria_py.connect(checkpoints=True)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, b INT)")
    db.execute("CREATE VIEW w AS SELECT id FROM t WHERE PG_DIV(10, b) > 1 AND id = ?")
    db.execute("CREATE VIEW q AS SELECT id, PG_DIV(10, b) AS q FROM t")
    db.execute("CREATE VIEW by_q AS SELECT id FROM q WHERE q = ?")
    db.table("t").insert([(1, 2), (2, 0), (3, 1)])
    db.wait()

    def reads() -> list:
        return [db.view("w").lookup(2), db.view("w").lookup(1), db.view("by_q").lookup(7)]
    assert reads() == [[(DIV0,)], [(1,)], [(DIV0,)]]
    for node in db.graph():
        if node["kind"] == "reader":
            db.fail(node["id"])
            db.recover(node["id"], strategy=strategy)
    db.wait()
    assert reads() == [[(DIV0,)], [(1,)], [(DIV0,)]]
    db.close()
