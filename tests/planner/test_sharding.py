"""With ``connect(shards=N)`` (noria_py/planner/sharding.py and build.py): a stateful
operator with a key is split into N shards fed by a sharder on that key, unless its
input is already partitioned on it; a stateless one follows its input's sharding; one
without a key, and the reader of an unkeyed view, sit behind a merging union."""
from __future__ import annotations

import pytest

from noria_py.graph import Graph
from noria_py.planner.sharding import ANY, Exchanges, Stream

from .helpers import connect

N = 4


def _by_id(db) -> dict[str, dict]:
    return {n["id"]: n for n in db.graph()}


def _feeders(db, node: dict) -> list[dict]:
    g = _by_id(db)
    return [g[p] for p in node["parents"]]


@pytest.mark.parametrize("sql, kind, keys", [
    ("SELECT b, COUNT(*) AS n FROM t GROUP BY b", "aggregate", [(1,)]),
    ("SELECT c, b, SUM(a) AS s FROM t GROUP BY c, b", "aggregate", [(2, 1)]),
    ("SELECT b, MIN(a) AS m, MAX(c) AS x FROM t GROUP BY b", "extremum", [(1,)]),
    ("SELECT t.a, u.y FROM t JOIN u ON t.b = u.x", "join", [(1,), (0,)]),
    ("SELECT t.c, u.x FROM t LEFT JOIN u ON t.a = u.y", "join", [(0,), (1,)]),
    ("SELECT DISTINCT c, a FROM t", "distinct", [(0, 1)]),
    ("SELECT a, b FROM t WHERE a = ? ORDER BY b DESC LIMIT 2", "topk", [(0,)]),
    ("SELECT c, a FROM t WHERE b = ?", "reader", None),
], ids=["count", "count-2-keys", "min-max", "join", "left-join", "distinct", "topk", "reader"])
def test_a_stateful_operator_is_sharded_by_its_key(sql, kind, keys):
    db = connect(N, rows=True)
    db.execute(f"CREATE VIEW v AS {sql}")
    nodes = [n for n in db.graph() if n["kind"] == kind]
    assert sorted(n["shard"] for n in nodes) == list(range(N))
    sharders = set()
    for node in nodes:
        feeders = _feeders(db, node)
        assert [f["kind"] for f in feeders] == ["sharder"] * len(feeders)
        ops = [db.graph_[f["id"]].op for f in feeders]
        if keys is not None:
            assert [op.key for op in ops] == keys
        assert all(op.shards == N for op in ops)
        sharders.add(tuple(f["id"] for f in feeders))
    assert len(sharders) == 1                 # every shard behind the same sharder(s)
    # the split is right: the same answers as unsharded
    one = connect(1, rows=True)
    one.execute(f"CREATE VIEW v AS {sql}")
    if kind in ("reader", "topk"):
        for k in (None, 0, 1, 2, 3):
            assert sorted(db.view("v").lookup(k), key=repr) == sorted(one.view("v").lookup(k), key=repr)
    else:
        assert sorted(db.view("v").all(), key=repr) == sorted(one.view("v").all(), key=repr)


def test_the_reader_is_sharded_on_the_view_key_through_the_select_list():
    db = connect(N, rows=True)
    db.execute("CREATE VIEW v AS SELECT c, a FROM t WHERE b = ?")
    sharder = {db.graph_[f["id"]].op.key
               for r in db.graph() if r["kind"] == "reader" for f in _feeders(db, r)}
    assert len(sharder) == 1 and db.graph_[[n for n in db.graph() if n["kind"] == "reader"][0]
                                           ["id"]].op.key == sharder.pop()


def test_a_stateless_operator_follows_its_input():
    db = connect(N, rows=True)
    db.execute("CREATE VIEW h AS SELECT b, COUNT(*) AS n FROM t GROUP BY b HAVING COUNT(*) > 10")
    db.execute("CREATE VIEW f AS SELECT a, c FROM t WHERE b > 0")
    g = _by_id(db)
    filters = [n for n in db.graph() if n["kind"] == "filter"]
    behind_agg = [n for n in filters if g[n["parents"][0]]["kind"] == "aggregate"]
    # behind the sharded aggregate: one filter a shard, each on its own shard's output
    assert sorted(n["shard"] for n in behind_agg) == list(range(N))
    assert all(g[n["parents"][0]]["shard"] == n["shard"] for n in behind_agg)
    # on the unsharded base table: one filter, unsharded, with no sharder before it
    rest = [n for n in filters if n not in behind_agg]
    assert [(n["shard"], g[n["parents"][0]]["kind"]) for n in rest] == [(None, "base")]
    assert db.view("h").all() == [(1, 11)]


@pytest.mark.parametrize("sql", [
    "SELECT t.a, COUNT(*) AS n FROM t JOIN u ON t.a = u.x GROUP BY t.a",
    "SELECT t.a, t.b, COUNT(*) AS n FROM t JOIN u ON t.a = u.x GROUP BY t.a, t.b",
], ids=["same-key", "key-within-group"])
def test_a_stream_partitioned_on_the_key_gets_no_sharder(sql):
    db = connect(N, rows=True)
    db.execute(f"CREATE VIEW v AS {sql}")
    g = _by_id(db)
    for agg in (n for n in db.graph() if n["kind"] == "aggregate"):
        assert [g[p]["kind"] for p in agg["parents"]] == ["join"]
        assert g[agg["parents"][0]]["shard"] == agg["shard"]
    assert len([n for n in db.graph() if n["kind"] == "sharder"]) == 2      # the join's
    one = connect(1, rows=True)
    one.execute(f"CREATE VIEW v AS {sql}")
    assert sorted(db.view("v").all(), key=repr) == sorted(one.view("v").all(), key=repr)


def test_a_keyed_view_over_its_key_reads_the_shards_directly():
    db = connect(N)
    db.execute("CREATE VIEW v AS SELECT b, COUNT(*) AS n FROM t WHERE b = ? GROUP BY b")
    g = _by_id(db)
    readers = [n for n in db.graph() if n["kind"] == "reader"]
    assert len(readers) == N
    assert all([g[p]["kind"] for p in r["parents"]] == ["aggregate"] for r in readers)


def test_one_sharder_serves_every_operator_keyed_alike():
    db = connect(N)
    db.execute("CREATE VIEW c AS SELECT b, COUNT(*) AS n FROM t GROUP BY b")
    db.execute("CREATE VIEW m AS SELECT b, MAX(a) AS m FROM t GROUP BY b")
    db.execute("CREATE VIEW j AS SELECT t.a, u.y FROM t JOIN u ON t.b = u.x")
    g = _by_id(db)
    on_t = [n for n in db.graph() if n["kind"] == "sharder" and g[n["parents"][0]]["kind"] == "base"
            and db.graph_[n["parents"][0]].table == "t"]
    assert len(on_t) == 1 and len(on_t[0]["children"]) == 3 * N


def test_a_union_of_streams_partitioned_alike_stays_sharded():
    db = connect(N, rows=True)
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a "
               "UNION ALL SELECT x, COUNT(*) AS n FROM u GROUP BY x")
    g = _by_id(db)
    unions = [n for n in db.graph() if n["kind"] == "union" and
              {g[p]["kind"] for p in n["parents"]} == {"aggregate"}]
    assert sorted(n["shard"] for n in unions) == list(range(N))
    assert all({g[p]["shard"] for p in n["parents"]} == {n["shard"]} for n in unions)
    one = connect(1, rows=True)
    one.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a "
                "UNION ALL SELECT x, COUNT(*) AS n FROM u GROUP BY x")
    assert sorted(db.view("v").all(), key=repr) == sorted(one.view("v").all(), key=repr)


@pytest.mark.parametrize("sql, kind", [
    ("SELECT COUNT(*) AS n, SUM(b) AS s FROM t", "aggregate"),
    ("SELECT a, b FROM t ORDER BY a DESC LIMIT 3", "topk"),
    ("SELECT t.a, u.y FROM t CROSS JOIN u", "join"),
], ids=["global-aggregate", "global-topk", "cross-join"])
def test_an_operator_without_a_key_is_not_sharded(sql, kind):
    db = connect(N, rows=True)
    db.execute(f"CREATE VIEW v AS {sql}")
    nodes = [n for n in db.graph() if n["kind"] == kind]
    assert [n["shard"] for n in nodes] == [None]
    readers = [n for n in db.graph() if n["kind"] == "reader"]
    assert [r["shard"] for r in readers] == [None]
    assert "sharder" not in {n["kind"] for n in db.graph()}


# ---------------------------------------------------------------- Exchanges on its own

class _Made:
    """A stand-in for Planner.new_node: numbers the nodes and records what each was."""

    def __init__(self) -> None:
        self.ops: list = []

    def __call__(self, op, parents_per_shard, sharded=None, **attrs):
        self.ops.append((type(op).__name__, parents_per_shard))
        return [f"x{len(self.ops)}"]


def test_exchanges_gather_partition_and_memoize():
    made = _Made()
    ex = Exchanges(Graph(), 3, made)
    plain = Stream(("b",), None, 2)
    assert ex.gather(plain) is plain and made.ops == []
    on0 = ex.partition(plain, (0,))
    assert on0 == Stream(("x1",) * 3, (0,), 2) and made.ops == [("Sharder", [["b"]])]
    assert ex.partition(plain, (0,)) is on0 and len(made.ops) == 1          # shared
    assert ex.partition(on0, (0,)) is on0                                   # already so
    assert ex.partition(Stream(("p", "q", "r"), (0,), 2), (0, 1), subset_ok=True).partition == (0,)
    on1 = ex.partition(on0, (1,))        # another key: merged first, then split again
    assert made.ops[1:] == [("Union", [["x1"]]), ("Sharder", [["x2"]])]
    assert on1.partition == (1,)
    unknown = Stream(("p", "q", "r"), ANY, 2)
    assert ex.partition(unknown, (0,)).sources == ("x5",) * 3
    assert made.ops[3] == ("Union", [["p", "q", "r"]])
    ex.forget({"x1"})
    ex.partition(plain, (0,))
    assert made.ops[-1] == ("Sharder", [["b"]]) and len(made.ops) == 6
