"""Which nodes a view becomes (noria_py/planner/build.py): shared sub-plans, the SELECT
list folded into the reader, no node for a projection that keeps every column, no node
with the same parent twice, and removal that keeps what other views still read."""
from __future__ import annotations

import pytest

import noria_py
from noria_py.ops import Project

from .helpers import Bare, connect, of_kind, readers, upstream

SHARDS = pytest.mark.parametrize("shards", [1, 4], ids=["shards1", "shards4"])


@SHARDS
def test_views_share_subplans_and_drop_cleans_up(shards):
    db = connect(shards)
    db.execute("CREATE VIEW a AS SELECT b FROM t WHERE a > 3")
    n1 = len(db.graph())
    db.execute("CREATE VIEW b AS SELECT b FROM t WHERE a > 3")
    # only a new reader (per shard): the filter and projection are shared
    assert len(db.graph()) == n1 + len(readers(db, "b"))
    db.table("t").insert([(4, 1, "x"), (2, 2, "y")])
    assert db.view("a").all() == db.view("b").all() == [(1,)]
    db.execute("DROP VIEW a")
    db.execute("DROP VIEW b")
    assert {n["kind"] for n in db.graph()} == {"base"}


@SHARDS
def test_dropping_one_view_keeps_what_another_reads(shards):
    db = connect(shards)
    db.execute("CREATE VIEW wide AS SELECT a, COUNT(*) AS n FROM t WHERE b > 0 GROUP BY a")
    db.execute("CREATE VIEW narrow AS SELECT a, COUNT(*) AS n FROM t WHERE b > 0 "
               "GROUP BY a HAVING COUNT(*) > 1")
    shared = upstream(db, "wide") & upstream(db, "narrow")
    assert {n["kind"] for n in db.graph() if n["id"] in shared} >= {"base", "filter", "aggregate"}
    keep = upstream(db, "wide")
    db.execute("DROP VIEW narrow")
    assert {n["id"] for n in db.graph()} == keep | {n["id"] for n in of_kind(db, "base")}
    db.table("t").insert([(1, 1, "x"), (1, 2, "y"), (2, 1, "z"), (3, 0, "w")])
    assert sorted(db.view("wide").all()) == [(1, 2), (2, 1)]


def test_a_subquery_shared_by_two_views_is_built_once():
    db = connect()
    sub = "(SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS s"
    db.execute(f"CREATE VIEW hi AS SELECT s.a FROM {sub} WHERE s.n > 1")
    db.execute(f"CREATE VIEW lo AS SELECT s.a FROM {sub} WHERE s.n = 1")
    assert len(of_kind(db, "aggregate")) == 1
    db.table("t").insert([(1, 0, "x"), (1, 1, "y"), (2, 0, "z")])
    assert (db.view("hi").all(), db.view("lo").all()) == ([(1,)], [(2,)])


def test_select_list_is_applied_by_the_reader():
    # unsharded, a view's SELECT list is applied by its reader (one hop less per write);
    # sharded, it stays a node (the reader's partition is on the projected columns)
    for shards in (1, 4):
        db = connect(shards)
        db.execute("CREATE VIEW v AS SELECT b + 1 AS b1, a FROM t WHERE c = 'x'")
        assert bool(of_kind(db, "project")) == (shards > 1)
        reader = db.graph_[readers(db, "v")[0]["id"]].op
        assert isinstance(reader.select, Project) == (shards == 1)
        db.table("t").insert([(1, 10, "x"), (2, 20, "y"), (3, None, "x")])
        assert sorted(db.view("v").all(), key=repr) == sorted([(11, 1), (None, 3)], key=repr)
        db.close()


def test_select_list_folded_into_the_workload_view():
    from noria_tools import workloads
    for shards in (1, 4):
        d = noria_py.connect(shards=shards)
        workloads.setup(d, 5)
        kinds = [n["kind"] for n in d.graph()]
        assert ("project" in kinds) == (shards > 1)
        d.table("vote").insert([(1, 10), (1, 11), (2, 10), (None, 3)])
        d.table("vote").delete([(1, 11)])
        view = d.view(workloads.VIEW_NAME)
        assert view.lookup(1) == [(1, "article 1", 1)]
        assert view.lookup(3) == [(3, "article 3", None)]
        d.close()


@SHARDS
def test_a_projection_keeping_every_column_adds_no_node(shards):
    db = connect(shards)
    db.execute("CREATE VIEW v AS SELECT a AS p, b AS q, c AS r FROM t WHERE a > 1")
    db.execute("CREATE VIEW s AS SELECT z.x, z.y FROM (SELECT x, y FROM u) AS z WHERE z.y > 2")
    assert of_kind(db, "project") == []
    for name in ("v", "s"):
        assert all(db.graph_[r["id"]].op.select is None for r in readers(db, name))
    db.table("t").insert([(2, 1, "x"), (1, 1, "y")])
    db.table("u").insert([(1, 3), (2, 2)])
    assert db.view("v").all() == [(2, 1, "x")] and db.view("v").columns == ["p", "q", "r"]
    assert db.view("s").all() == [(1, 3)]


@SHARDS
@pytest.mark.parametrize("sql, rows", [
    ("SELECT p.a, q.c FROM t AS p JOIN t AS q ON p.a = q.b", [(1, "x")]),
    ("SELECT a FROM t UNION ALL SELECT a FROM t", [(1,), (1,), (2,), (2,)]),
], ids=["self-join", "union-all-of-itself"])
def test_no_node_has_the_same_parent_twice(shards, sql, rows):
    db = connect(shards)
    db.execute(f"CREATE VIEW v AS {sql}")
    for n in db.graph():
        assert len(n["parents"]) == len(set(n["parents"])), n
    db.table("t").insert([(1, 1, "x"), (2, 5, "y")])
    assert sorted(db.view("v").all()) == rows


def test_a_bare_planner_memoizes_relations_and_forgets_removed_ones():
    bare = Bare()
    first = bare.add_view("CREATE VIEW v1 AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    made = bare.planner.take_fresh()
    second = bare.add_view("CREATE VIEW v2 AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    assert bare.planner.take_fresh() == set(second)         # the reader alone
    assert bare.graph[first[0]].parents == bare.graph[second[0]].parents
    removed: list[str] = []
    assert bare.planner.owned(first) == first                # and changes nothing
    bare.planner.remove(first, removed.append)
    assert removed == first                                  # v2 still reads the rest
    assert set(bare.planner.owned(second)) == made - set(first) | set(second)
    bare.planner.remove(second, removed.append)
    assert set(removed) == made | set(second)
    assert list(bare.graph.nodes) == [bare.base["t"], bare.base["u"]]
    third = bare.add_view("CREATE VIEW v3 AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    assert len(bare.planner.take_fresh()) == len(made) and third[0] in bare.graph


@SHARDS
def test_owned_is_what_remove_removes_children_first(shards):
    """``Planner.owned`` (what ``db.queries()`` counts) is the walk ``remove`` makes:
    the same nodes, each after all its children, the graph untouched; a node another
    view still reads is not among them."""
    bare = Bare(shards)
    keep = bare.add_view("CREATE VIEW k AS SELECT a, COUNT(*) AS n FROM t WHERE b > 0 GROUP BY a")
    views = [bare.add_view(sql) for sql in (
        "CREATE VIEW j AS SELECT t.a, u.y FROM t JOIN u ON t.a = u.x WHERE t.b > 0",
        "CREATE VIEW s AS SELECT a, COUNT(*) AS n FROM t WHERE b > 0 GROUP BY a HAVING COUNT(*) > 1",
        "CREATE VIEW x AS SELECT a FROM t WHERE b > 0 UNION ALL SELECT a FROM t WHERE b > 0")]
    for readers_ in views:
        before = {n: list(node.children) for n, node in bare.graph.nodes.items()}
        own = bare.planner.owned(readers_)
        assert {n: list(node.children) for n, node in bare.graph.nodes.items()} == before
        assert set(readers_) <= set(own) and not set(own) & set(keep)
        for i, n in enumerate(own):
            assert set(bare.graph[n].children) <= set(own[:i]), (n, own)
        removed: list[str] = []
        bare.planner.remove(readers_, removed.append)
        assert removed == own
    assert all(r in bare.graph for r in keep)
