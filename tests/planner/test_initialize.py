"""A view created over tables that already hold rows is filled from the existing state
(noria_py/planner/initialize.py): it answers as if it had existed before the writes,
and the views whose nodes it shares are not disturbed."""
from __future__ import annotations

import pytest

from noria_py.planner import initialize

from .helpers import T_ROWS, U_ROWS, Bare, connect

VIEWS = {
    "filter": "SELECT a, c FROM t WHERE b > 0",
    "count": "SELECT b, COUNT(*) AS n, SUM(a) AS s FROM t GROUP BY b",
    "minmax": "SELECT b, MIN(a) AS lo, MAX(c) AS hi FROM t GROUP BY b",
    "join": "SELECT t.a, t.c, u.y FROM t JOIN u ON t.a = u.x",
    "distinct": "SELECT DISTINCT b, c FROM t",
    "topk": "SELECT a, b, c FROM t ORDER BY a DESC, b, c LIMIT 4",
    "keyed": "SELECT b, c FROM t WHERE a = ?",
    "having": "SELECT a, COUNT(*) AS n FROM t GROUP BY a HAVING COUNT(*) > 6",
}


def _answers(view) -> list:
    if view.key_arity:
        return [sorted(view.lookup(k), key=repr) for k in (None, 0, 1, 2, 3, 4, 5)]
    return sorted(view.all(), key=repr)


@pytest.mark.parametrize("shards", [1, 4], ids=["shards1", "shards4"])
@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_created_after_the_writes_answers_as_one_created_before(name, shards):
    sql = VIEWS[name]
    before = connect(shards)
    before.execute(f"CREATE VIEW v AS {sql}")
    before.table("t").insert(T_ROWS)
    before.table("u").insert(U_ROWS)
    after = connect(shards, rows=True)
    after.execute(f"CREATE VIEW v AS {sql}")
    want = _answers(before.view("v"))
    assert want and _answers(after.view("v")) == want
    # a second view over the same sub-plan: its nodes are kept (their state read, not
    # fed again), only its reader is new; neither view counts a row twice
    after.execute(f"CREATE VIEW w AS {sql}")
    assert _answers(after.view("w")) == want and _answers(after.view("v")) == want
    after.table("t").insert([(1, 1, "n")])
    before.table("t").insert([(1, 1, "n")])
    want = _answers(before.view("v"))
    assert _answers(after.view("v")) == _answers(after.view("w")) == want


def test_a_new_view_over_a_kept_stateless_node_recomputes_through_it():
    db = connect(rows=True)
    db.execute("CREATE VIEW f AS SELECT a, b FROM t WHERE c = 'a'")
    db.execute("CREATE VIEW g AS SELECT a, COUNT(*) AS n FROM t WHERE c = 'a' GROUP BY a")
    assert sorted(db.view("g").all()) == [(0, 2), (1, 2), (2, 2), (3, 2), (4, 2)]


@pytest.mark.parametrize("shards", [1, 4], ids=["shards1", "shards4"])
def test_initialize_on_a_bare_planner_fills_only_the_fresh_nodes(shards):
    bare = Bare(shards)
    bare.write("t", T_ROWS)
    readers = bare.add_view("CREATE VIEW v AS SELECT b, COUNT(*) AS n FROM t WHERE b = ? GROUP BY b")
    initialize(bare.graph, bare.planner.take_fresh())
    got = [r for nid in readers for r in bare.graph[nid].op.all()]
    assert sorted(got, key=repr) == sorted([(None, 1), (0, 10), (1, 11), (2, 10)], key=repr)
    if shards > 1:            # a sharder hands each reader only its own shard's rows
        per = [bare.graph[nid].op.all() for nid in readers]
        assert len(readers) == shards and sum(map(len, per)) == 4
    base = bare.graph[bare.base["t"]].op
    assert sorted(base.all_rows(), key=repr) == sorted(T_ROWS, key=repr)   # read, not refilled
    more = bare.add_view("CREATE VIEW w AS SELECT b, COUNT(*) AS n FROM t WHERE b = ? GROUP BY b")
    initialize(bare.graph, bare.planner.take_fresh())
    assert sorted((r for nid in more for r in bare.graph[nid].op.all()), key=repr) == sorted(got, key=repr)
    assert sorted((r for nid in readers for r in bare.graph[nid].op.all()), key=repr) == sorted(got, key=repr)
