"""Partial readers in a real cluster (``noria-py serve --partial``,
``runtime/cluster/partial.py``): random writes, deletes and reads of random keys (held
and not, repeated in one ``lookup_many``, from two threads at once) against DuckDB,
with direct channels and the relay, under a memory limit that evicts, and with a
worker SIGKILLed in the middle (slow suite)."""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import duckdb
import pytest

import noria_py
from noria_py.partial import key_of, op_key
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.cluster.partial import chain, chain_and_ops, evict_path
from noria_py.runtime.cluster.reads import rows_found
from tests.differential.helpers import normalize

from .test_cluster import _differential_with_kill

DDL = ["CREATE TABLE t1 (a INT, b INT, c TEXT)", "CREATE TABLE t2 (a INT, d INT)"]
#: name -> SQL with one ? (the same text in DuckDB); each reader's chain ends at a base
#: (v_rows, v_filter, v_text; v_count, v_max and v_n through their aggregate, held
#: partial; v_join and v_left through their join, held partial, from both tables),
#: v_top through its TopK, held partial, a full join (v_vote: the vote view's shape),
#: or (v_distinct, v_dc) through their DISTINCT, held partial. v_vote's COUNT is
#: v_n's (one sub-plan): if v_n is made first, its aggregate is held partial, then
#: full again when v_vote comes to share it; else it is v_n's source (which of the two
#: comes first is the seed's), and v_vote's join, above a full COUNT, its source.
#: v_votes is the vote view with a COUNT of its own: its join and COUNT held partial
VIEWS = {
    "v_rows": "SELECT a, b, c FROM t1 WHERE a = ?",
    "v_filter": "SELECT b, c FROM t1 WHERE a = ? AND b > 2",
    "v_text": "SELECT a, b FROM t1 WHERE c = ?",
    "v_count": "SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t1 WHERE a = ? GROUP BY a",
    "v_max": "SELECT a, MAX(b) AS m FROM t1 WHERE a = ? GROUP BY a",
    "v_join": "SELECT t1.a, t1.b, t2.d FROM t1 JOIN t2 ON t1.a = t2.a WHERE t1.a = ?",
    "v_left": "SELECT t2.a, t2.d, t1.b FROM t2 LEFT JOIN t1 ON t2.a = t1.a WHERE t2.a = ?",
    "v_top": "SELECT a, b FROM t1 WHERE a = ? ORDER BY b DESC LIMIT 2",
    "v_distinct": "SELECT DISTINCT a, b FROM t1 WHERE a = ?",
    "v_dc": "SELECT DISTINCT a, c FROM t1 WHERE a = ? AND b > 4",
    "v_n": "SELECT a, COUNT(*) AS n FROM t1 WHERE a = ? GROUP BY a",
    "v_vote": "SELECT t2.a, t2.d, vc.n FROM t2 LEFT JOIN (SELECT a, COUNT(*) AS n FROM t1 "
              "GROUP BY a) AS vc ON t2.a = vc.a WHERE t2.a = ?",
    "v_votes": "SELECT t2.a, t2.d, vc.n FROM t2 LEFT JOIN (SELECT a, COUNT(b) AS n FROM t1 "
               "GROUP BY a) AS vc ON t2.a = vc.a WHERE t2.a = ?",
}
#: views that stay full with shards (a sharded DISTINCT is partitioned by all its
#: columns, then re-sharded by the key: it is not its reader's alone), read beside;
#: with one shard they are partial, their DISTINCT held with the reader
DISTINCTS = ("v_distinct", "v_dc")
#: a view that stays full (its key is part of a group only: no source answers for
#: it), read beside
FULL = {"v_ab": "SELECT a, b, COUNT(*) AS n FROM t1 WHERE a = ? GROUP BY a, b"}
KEYS = list(range(12))
TEXTS = ["x", "y", "zz", "w"]


def _written(db, rng: random.Random, keys: list[int],
             per_key: int) -> tuple[list[tuple], duckdb.DuckDBPyConnection]:
    """``per_key`` random rows of each key written to ``t (a INT, b INT, c TEXT)`` and
    waited for; the rows, and DuckDB holding them (the oracle)."""
    rows = [(a, rng.randint(0, 99), rng.choice(TEXTS)) for a in keys for _ in range(per_key)]
    db.table("t").insert(rows)
    db.wait()
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INT, b INT, c TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [list(r) for r in rows])
    return rows, con


def _key(rng: random.Random, view: str):
    return rng.choice(TEXTS) if view == "v_text" else rng.choice(KEYS)


def _write(rng: random.Random, db, model: dict[str, list[tuple]]) -> list:
    """A random insert or delete (in ``db`` and ``model``); the rows written."""
    k = rng.random()
    if k < 0.55:
        rows = [(rng.choice(KEYS), rng.randint(0, 9),
                 None if rng.random() < 0.1 else rng.choice(TEXTS))
                for _ in range(rng.randint(1, 5))]
        db.table("t1").insert(rows)
        model["t1"].extend(rows)
        return rows
    elif k < 0.7:
        rows = [(rng.choice(KEYS), rng.randint(0, 9)) for _ in range(rng.randint(1, 3))]
        db.table("t2").insert(rows)
        model["t2"].extend(rows)
        return rows
    else:
        name = "t1" if k < 0.9 else "t2"
        rows = model[name]
        if rows:
            picked = sorted({rng.randrange(len(rows)) for _ in range(rng.randint(1, 3))},
                            reverse=True)
            gone = [rows[i] for i in picked]
            db.table(name).delete(gone)
            for i in picked:
                del rows[i]
            return gone
    return []


def _oracle(model: dict[str, list[tuple]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for sql in DDL:
        con.execute(sql)
    for name, rows in model.items():
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", [list(r) for r in rows])
    return con


def _check(db, model, rng: random.Random, views: dict[str, str], wrong: list,
           every: bool = False) -> None:
    """After ``wait``: a random part of each view's keys (some held, some not; every
    key with ``every``), read one at a time and in a ``lookup_many`` that repeats
    keys, as DuckDB answers."""
    db.wait()
    con = _oracle(model)
    for name, sql in views.items():
        v = db.view(name)
        keys = ((TEXTS if name == "v_text" else KEYS) if every
                else [_key(rng, name) for _ in range(rng.randint(1, 4))])
        keys += keys[:2]                               # (repeated: one fill, not two)
        many = v.lookup_many(keys)
        for k, got_many in zip(keys, many):
            want = normalize(con.execute(sql, [k]).fetchall())
            got = normalize(v.lookup(k))
            if got != want or normalize(got_many) != want:
                wrong.append((name, k, got, normalize(got_many), want))


def _check_memory(db) -> None:
    """``memory()`` in a cluster: the embedded shape (node id -> bytes), every stateful
    node shard of every worker (bases measured by the controller); ``bases=False``
    leaves the tables out."""
    graph = db.graph()
    stateful = {n["id"] for n in graph if n["stateful"]}
    bases = {n["id"] for n in graph if n["kind"] == "base"}
    mem = db.memory()
    assert set(mem) == stateful, sorted(set(mem) ^ stateful)
    assert all(type(b) is int and b > 0 for b in mem.values())
    assert set(db.memory(bases=False)) == stateful - bases
    assert len({n["worker"] for n in graph if n["id"] in stateful - bases}) == 2
    with pytest.raises(noria_py.ArgumentError, match="bases"):
        db.memory(bases="no")


def _run(seed: int, shards: int, channels: str | None, limit: int | None = None,
         kill: bool = False, ops: int = 60, writes: str = "controller") -> None:
    """``writes``: ``serve --writes`` (``worker``: a base's fills computed at its
    worker, in order with the writes it takes)."""
    rng = random.Random(seed)
    extra = ("--partial", "--writes", writes) + (
        ("--memory-limit", str(limit)) if limit is not None else ())
    with Cluster(workers=2, shards=shards, extra=extra, channels=channels) as cluster:
        db = noria_py.connect(cluster.url)
        for sql in DDL:
            db.execute(sql)
        # some views over data already written (their readers start all holes)
        names = list({**VIEWS, **FULL})
        later = set(rng.sample(names, len(names) // 2))
        made = [n for n in names if n not in later]
        for name in made:
            db.execute(f"CREATE VIEW {name} AS {VIEWS.get(name) or FULL[name]}")
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        wrong: list = []
        kill_at = rng.randrange(ops // 4, ops) if kill else -1
        for i in range(ops):
            if i == ops // 4:
                for name in sorted(later):
                    db.execute(f"CREATE VIEW {name} AS {VIEWS.get(name) or FULL[name]}")
                made = names
                graph = db.graph()
                partial = {n["view"]: n["partial"] for n in graph if n["kind"] == "reader"}
                assert partial == {**dict.fromkeys(VIEWS, True), **dict.fromkeys(FULL, False),
                                   **dict.fromkeys(DISTINCTS, shards == 1)}
                # (each TopK and DISTINCT shard held partial with its reader, where it is)
                held = {(n["kind"], n["partial"]) for n in graph
                        if n["kind"] in ("topk", "distinct")}
                assert held == {("topk", True), ("distinct", shards == 1)}, held
            if i == kill_at:
                os.kill(rng.choice(cluster.worker_pids(db)), signal.SIGKILL)
            written = _write(rng, db, model)
            if rng.random() < 0.6:      # reads racing the writes in flight (unchecked),
                name = rng.choice([n for n in made if n in VIEWS])
                key = _key(rng, name)   # often of a key just written (a hole, maybe)
                if written and name != "v_text" and rng.random() < 0.7:
                    key = rng.choice(written)[0]
                if rng.random() < 0.3:  # two upqueries of one key at once
                    ts = [threading.Thread(target=db.view(name).lookup, args=(key,))
                          for _ in range(2)]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                else:
                    db.view(name).lookup_many([key, _key(rng, name), key])
            if i % 10 == 9:
                _check(db, model, rng, {n: VIEWS.get(n) or FULL[n] for n in made}, wrong)
        _check(db, model, rng, {**VIEWS, **FULL}, wrong, every=True)
        con = _oracle(model)
        for name, sql in (("v_rows", "SELECT a, b, c FROM t1"),      # (through a
                          ("v_count", "SELECT a, COUNT(*), SUM(b) FROM t1 GROUP BY a"),
                          ("v_votes", VIEWS["v_votes"].replace(" WHERE t2.a = ?", ""))):
            got = normalize(db.view(name).all())    # partial aggregate; join and COUNT)
            if got != normalize(con.execute(sql).fetchall()):
                wrong.append((name, "all()", got))
        _check_memory(db)
        recoveries = db.recoveries()
        if kill:
            assert recoveries and all(r.automatic for r in recoveries)
        db.close()
        assert not wrong, (wrong[:5], [(r.node, r.strategy) for r in recoveries])


def test_partial_cluster_matches_duckdb():
    """Two shards, direct channels, a memory limit that evicts (a key evicted has rows
    a later write to it must not be kept without): every read answers as DuckDB does."""
    _run(0, shards=2, channels="direct", limit=6000, ops=30)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_partial_cluster_soak(seed, channels):
    _run(seed, shards=1 + seed % 2, channels=channels)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_partial_cluster_under_a_memory_limit(seed):
    """A limit of a few keys' rows for both workers together (their shares): keys are
    evicted and filled again."""
    _run(seed, shards=2, channels="direct", limit=4000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_partial_cluster_with_a_worker_killed(seed):
    """A worker SIGKILLed mid-load: its partial readers come back all holes on the
    spare, upqueries in flight are sent again once their path is up, and every read
    after ``wait()`` is still DuckDB's."""
    _run(seed, shards=1 + seed % 2, channels="direct" if seed < 3 else "relay", kill=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_partial_cluster_with_writes_at_the_worker(seed):
    """``--writes worker``: the clients write at the bases' workers, which compute the
    bases' fills (leaving out the writes whose output waits for the log replica);
    seeds 2-5 with a worker SIGKILLed mid-load; every read answers as DuckDB does."""
    _run(seed + 20, shards=1 + seed % 2, channels="direct", limit=(None, 4000)[seed % 2],
         kill=seed >= 2, writes="worker")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_partial_cluster_under_a_memory_limit_with_a_worker_killed(seed):
    """The lost worker's share goes back to the pool, the spare starts at none and
    takes one at its first fill: answers stay DuckDB's."""
    _run(seed + 10, shards=2, channels="direct", limit=4000, kill=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_the_cluster_differential_with_partial_readers(seed, monkeypatch):
    """The cluster's own SIGKILL differential test (full views beside keyed ones)
    served with --partial, writes at the controller (at the worker: below)."""
    _differential_with_kill(seed, monkeypatch, extra=("--partial", "--writes", "controller"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_the_cluster_differential_with_partial_readers_and_writes_at_the_worker(
        seed, monkeypatch):
    _differential_with_kill(seed, monkeypatch, extra=("--partial", "--writes", "worker"),
                            channels="direct")


def test_chains_of_partial_readers():
    """Which readers a cluster makes partial: those whose key leads up through filters,
    projections and sharders to one base, aggregate, join or TopK on the key, or to a
    DISTINCT held with them (with one shard: a sharded DISTINCT is re-sharded)."""
    for shards in (1, 2):
        db = noria_py.connect(shards=shards)
        for sql in DDL:
            db.execute(sql)
        for name, sql in {**VIEWS, **FULL}.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        db.execute("CREATE VIEW v_all AS SELECT a, COUNT(*) AS n FROM t1 GROUP BY a")
        for name in [*VIEWS, *FULL, "v_all"]:
            for r in db._views[name].readers:
                found = chain(db.graph_, r)
                held = chain_and_ops(db.graph_, r, set(db.graph_.nodes))
                for nid, cols in (held[1] if held is not None else ()):
                    op = db.graph_[nid].op  # (a held key's bytes reach its reader's worker
                    for key in [(3,), (None,)]:     # under the reader's key: key_of)
                        assert key_of(op, cols, op_key(op, cols, key)) == key, (name, nid)
                if name in DISTINCTS:       # (never a source: held, with one shard)
                    assert found is None
                    if shards == 2:
                        assert held is None, name
                        continue
                    assert held is not None and len(held[0]) == 1, name
                    assert [db.graph_[n].kind for n, _ in held[1]] == ["distinct"]
                    assert db.graph_[held[0][0][0][0]].kind == "base"
                    assert evict_path(*held)[0] == held[1][0][0]
                elif name in VIEWS:
                    assert found is not None, (shards, name)
                    path, cols = found
                    assert path[-1] == r and db.graph_[path[0]].kind in (
                        "base", "aggregate", "extremum", "join", "topk")
                else:
                    assert found is None, (shards, name)
                if name in ("v_count", "v_max", "v_top"):   # (held partial, if new; v_n
                    assert held is not None and len(held[1]) == 1, (shards, name)  # shares
                    assert [db.graph_[p[0]].kind for p, _ in held[0]] == ["base"]  # its)
                    assert db.graph_[held[1][0][0]].kind in ("aggregate", "extremum", "topk")
                elif name in ("v_join", "v_left", "v_votes"):   # (held: two chains meet)
                    assert held is not None and len(held[0]) == 2, (shards, name)
                    assert [db.graph_[n].kind for n, _ in held[1]] == (
                        ["aggregate", "join"] if name == "v_votes" else ["join"])
                    join = held[1][-1][0]
                    top = evict_path(*held)     # (evictions start at the topmost held)
                    assert top[0] == held[1][0][0] and top[-1] == r
                    assert [held[1][0][0] in p for p, _ in held[0]] == (
                        [False, True] if name == "v_votes" else [True, True])
                    for p, _ in held[0]:
                        assert db.graph_[p[0]].kind == "base" and join in p and p[-1] == r
                elif found is not None:     # (v_vote: its COUNT is v_n's, full, its source)
                    assert held is not None and held[0] == [found] and not held[1]
        db.close()


def test_a_hole_in_a_read_answer_is_none():
    """A worker answers a key its partial reader does not hold as None (the client
    then asks the controller), and rows as rows."""
    assert rows_found(((), None, ((1, "a"),))) == [[], None, [(1, "a")]]


def test_serve_refuses_a_memory_limit_without_partial_or_below_zero():
    from noria_py.runtime.cluster.server import Server

    with pytest.raises(noria_py.ArgumentError, match="--partial"):
        Server(port=0, memory_limit=1 << 20)
    with pytest.raises(noria_py.ArgumentError, match="number of bytes"):
        Server(port=0, partial=True, memory_limit=-1)


# ---------------------------------------------------------------- a worker in this process

def _worker_with(sqls: list[str], writes: str = "controller", clocks: bool = False):
    """A direct-channels worker (w1) hosting every node of ``sqls`` (CREATE TABLE and
    CREATE VIEW), its controller the returned connection's other end, and the ids of
    the nodes each view made. ``writes``: ``serve --writes``; ``clocks``: tree clocks."""
    import socket

    from noria_py.graph import Graph
    from noria_py.planner import Planner
    from noria_py.runtime.cluster import wire
    from noria_py.runtime.cluster.worker import Worker
    from sql_frontend import plan as lp
    from sql_frontend import wire as plan_wire

    ours, theirs = socket.socketpair()
    w = Worker(wire.Connection(ours), "w1", 1, clocks=clocks, channels="direct", writes=writes)
    parser = noria_py.connect()
    made: list = []
    shadow = Planner(Graph(), 1, made.append)       # (the controller's, numbering alike)
    views = {}
    for sql in sqls:
        stmt = parser.parse(sql)
        made.clear()
        if isinstance(stmt, lp.CreateTable):
            parser.execute(sql)
            shadow.add_table(stmt.schema)
            change = ["table", plan_wire.to_data(stmt.schema)]
        else:
            views[stmt.name] = shadow.add_view(stmt.name, stmt.query)
            change = ["view", stmt.name, plan_wire.to_data(stmt.query)]
        shadow.take_fresh()
        w.ddl(change, {n.id: "w1" for n in made})
    parser.close()
    return w, wire.Connection(theirs), views


def _pump(w) -> None:
    """Handle what the worker sent itself (every node is on it), until nothing is left."""
    import queue

    while True:
        try:
            src, f = w.inbox.get_nowait()
        except queue.Empty:
            return
        w.frame(f, src)


def _fill_frame(node: str, rid: int, path: list[str], keys: list, cols: list, rows):
    from noria_py.batch import Batch
    from noria_py.runtime.cluster.wire import encode_batch

    batches = None if rows is None else [encode_batch(Batch(r)) for r in rows]
    return ["fill", node, ["", rid, path, [[k] for k in keys], cols, batches]]


def test_a_fill_at_a_worker_fills_a_hole_once_and_writes_to_holes_are_dropped():
    from noria_py.batch import Batch

    w, ctl, views = _worker_with(["CREATE TABLE t (a INT, b INT)",
                                  "CREATE VIEW v AS SELECT a, b FROM t WHERE a = ?"])
    (reader,) = views["v"]
    base = w.graph[reader].parents[0]
    w.make_partial(reader, None)
    op = w.graph[reader].op
    w.write(base, Batch([(1, 10), (2, 20)]))
    _pump(w)
    assert op.lookup(1) is None and op.lookup(2) is None       # dropped at the holes
    path = [base, reader]
    w.frame(_fill_frame(base, 7, path, [1], [0], [[(1, 10)]]))  # (a base's: rows given)
    _pump(w)
    assert ctl.recv() == ("rep", 7, (((1, 10),),))
    w.frame(_fill_frame(base, 8, path, [1, 1], [0], [[(1, 10)], [(1, 10)]]))
    _pump(w)                                                    # held: not applied again
    assert ctl.recv() == ("rep", 8, (((1, 10),), ((1, 10),)))
    w.write(base, Batch([(1, 11), (2, 21)]))
    _pump(w)
    assert sorted(op.lookup(1)) == [(1, 10), (1, 11)] and op.lookup(2) is None
    ctl.close()


def test_a_fill_of_a_base_at_its_worker_leaves_out_the_writes_whose_output_waits():
    """``--writes worker``: a base's fill (no rows given) is computed at its worker
    from the rows it holds, but a write applied there whose output waits for its log
    (here its log replica's answer, given by the test) is left out of it; its output, sent
    once the log has it, behind the fill, is applied to the key once."""
    w, ctl, views = _worker_with(["CREATE TABLE t (a INT, b INT)",
                                  "CREATE VIEW v AS SELECT a, b FROM t WHERE a = ?"],
                                 writes="worker")
    (reader,) = views["v"]
    base = w.graph[reader].parents[0]
    w.make_partial(reader, None)
    op = w.graph[reader].op
    w.replica_of[base] = "r"            # (its log replica: answered here, never dialed)
    w.links.broken.add("r")
    answers: list = []
    w.accept(base, "insert", [[(1, 10), (2, 20)]], answers.append)
    w.replica_frame(["rdur", base, 1], "r")             # (its output: dropped at holes)
    _pump(w)
    w.accept(base, "insert", [[(1, 11), (1, 10)]], answers.append)
    assert answers == [[]]                              # (held: not durable yet)
    w.frame(_fill_frame(base, 7, [base, reader], [1, 2], [0], None))
    _pump(w)
    assert ctl.recv() == ("rep", 7, (((1, 10),), ((2, 20),)))
    w.replica_frame(["rdur", base, 1], "r")
    _pump(w)
    assert answers == [[], []]
    assert sorted(op.lookup(1)) == [(1, 10), (1, 10), (1, 11)] and op.lookup(2) == [(2, 20)]
    ctl.close()


def _count_worker():
    """A worker hosting ``t -> COUNT by a -> reader`` (nothing partial yet): (worker,
    controller's end, base, aggregate, reader)."""
    w, ctl, views = _worker_with([
        "CREATE TABLE t (a INT, b INT)",
        "CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a"])
    (reader,) = views["c"]
    agg = w.graph[reader].parents[0]
    return w, ctl, w.graph[agg].parents[0], agg, reader


def test_a_fill_at_an_operator_is_computed_from_its_state_in_order_with_its_output():
    from noria_py.batch import Batch

    w, ctl, base, agg, reader = _count_worker()
    w.make_partial(reader, None)
    op = w.graph[reader].op
    w.write(base, Batch([(1, 10), (1, 20)]))
    # the aggregate has counted the write, its new count still on its way to the
    # reader (in the inbox): the fill computed now follows it, which is dropped
    w.deliver(w.inbox.get_nowait()[1][2])           # (the base's message to the COUNT)
    w.frame(_fill_frame(agg, 3, [agg, reader], [1], [0], None))
    w.write(base, Batch([(1, 30)]))                 # after the fill: applied to it
    _pump(w)
    assert ctl.recv() == ("rep", 3, (((1, 2),),))
    assert op.lookup(1) == [(1, 3)]
    ctl.close()


def test_a_fill_for_a_reader_being_recovered_is_dropped_not_held():
    """Its upquery failed with the loss (and is sent again): a fill held and released
    after the reader was restored would land behind what the restore put in place."""
    from noria_py.batch import Batch

    w, ctl, views = _worker_with(["CREATE TABLE t (a INT, b INT)",
                                  "CREATE VIEW v AS SELECT a, b FROM t WHERE a = ?"])
    (reader,) = views["v"]
    base = w.graph[reader].parents[0]
    w.make_partial(reader, None)
    op = w.graph[reader].op
    w.holding[reader] = []                          # (as ``host`` leaves it)
    w.frame(_fill_frame(base, 5, [base, reader], [1], [0], [[(1, 10)]]))
    w.write(base, Batch([(1, 11)]))                 # behind the fill: held
    _pump(w)
    assert len(w.holding[reader]) == 1
    w.release([reader])
    assert op.lookup(1) is None                     # (the write: at the hole, dropped)
    w.frame(_fill_frame(base, 6, [base, reader], [1], [0], [[(1, 10), (1, 11)]]))
    _pump(w)                                        # the upquery sent again
    assert ctl.recv() == ("rep", 6, (((1, 10), (1, 11)),))
    ctl.close()


def test_a_runtime_without_upqueries_refuses_partial_state():
    from noria_py.client import Database
    from noria_py.graph import Graph
    from noria_py.runtime.embedded import EmbeddedRuntime

    with pytest.raises(noria_py.NotSupportedError, match="serve --partial"):
        Database(runtime=EmbeddedRuntime(Graph()), partial=True)


@pytest.mark.slow
def test_a_subscription_to_a_key_of_a_partial_view_in_a_cluster():
    """The key is filled by the snapshot's read, and every later write to it reaches
    the subscriber; a whole partial view cannot be subscribed to."""
    import time

    with Cluster(workers=2, shards=2, extra=("--partial",)) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE t (a INT, b INT)")
        db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a")
        db.table("t").insert([(1, 1), (2, 2), (1, 3)])
        with pytest.raises(noria_py.NotSupportedError, match="partial"):
            db.subscribe("c")
        sub = db.subscribe("c", 1)
        first = sub.poll(10)
        assert first is not None and first.rows == [((1, 2), 1)]
        state = {(1, 2): 1}
        for i in range(10):
            db.table("t").insert([(1, i), (2, i)])
        db.wait()
        deadline = time.monotonic() + 30
        while state != {(1, 12): 1} and time.monotonic() < deadline:
            change = sub.poll(1)
            for row, diff in change.rows if change is not None else ():
                state[row] = state.get(row, 0) + diff
                if not state[row]:
                    del state[row]
        assert state == {(1, 12): 1}
        sub.close()
        db.close()




# ---------------------------------------------------------------- one memory limit

def _poll_until(sub, state: dict, want: dict, seconds: float) -> dict:
    """Apply the subscription's changes to ``state`` until it is ``want`` (or time is up)."""
    import time

    deadline = time.monotonic() + seconds
    while state != want and time.monotonic() < deadline:
        change = sub.poll(0.2)
        for row, diff in change.rows if change is not None else ():
            state[row] = state.get(row, 0) + diff
            if not state[row]:
                del state[row]
    return state


def _read_every_key(db, con, sql: dict[str, str], keys: list[int], rng: random.Random,
                    sample) -> tuple[list, list[int]]:
    """Every key of each view of ``sql`` read once, in a random order: the answers that
    are not DuckDB's, and ``sample()`` after every fifth read and the last."""
    order = [(name, k) for name in sql for k in keys]
    rng.shuffle(order)
    wrong, samples = [], []
    for i, (name, k) in enumerate(order):
        got = normalize(db.view(name).lookup(k))
        if got != normalize(con.execute(sql[name], [k]).fetchall()):
            wrong.append((name, k, got))
        if i % 5 == 0 or i == len(order) - 1:
            samples.append(sample())
    return wrong, samples


@pytest.mark.slow
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_memory_and_one_limit_across_the_workers_and_a_pinned_key(channels):
    """A real cluster (its controller in this process, so that the workers' shares can be
    asked): ``memory()`` has every stateful node shard, from every worker; every key of
    two partial views read once in a random order keeps the workers' bytes together
    within one ``--memory-limit`` (no slack: nothing pinned), answers as DuckDB does;
    then a subscribed key stays held while every other key is read again, and its
    writes reach the subscriber; a whole partial view is refused, saying what to do."""
    from noria_py.runtime.cluster.server import Server

    limit = 12000
    server = Server(port=0, workers=2, shards=2, channels=channels, partial=True,
                    memory_limit=limit)
    try:
        db = noria_py.connect(f"noria://127.0.0.1:{server.address[1]}")
        db.execute("CREATE TABLE t (a INT, b INT, c TEXT)")
        db.execute("CREATE VIEW v_rows AS SELECT a, b, c FROM t WHERE a = ?")
        db.execute("CREATE VIEW v_count AS SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t "
                   "WHERE a = ? GROUP BY a")
        keys = list(range(150))
        rng = random.Random(5)
        rows, con = _written(db, rng, keys, 3)
        sql = {"v_rows": "SELECT a, b, c FROM t WHERE a = ?",
               "v_count": "SELECT a, COUNT(*), SUM(b) FROM t WHERE a = ? GROUP BY a"}

        # memory(): the embedded shape, every stateful node shard, measured where it is
        graph = db.graph()
        stateful = {n["id"] for n in graph if n["stateful"]}
        bases = {n["id"] for n in graph if n["kind"] == "base"}
        mem = db.memory()
        assert set(mem) == stateful and all(type(b) is int and b > 0 for b in mem.values())
        assert set(db.memory(bases=False)) == stateful - bases
        readers = {n["id"]: n["worker"] for n in graph if n["kind"] == "reader"}
        assert len(set(readers.values())) == 2          # (both workers measured)
        with pytest.raises(noria_py.ArgumentError, match="bases"):
            db.memory(bases="no")

        # one limit: every key of both views read once, in a random order
        manager = server.db._partial
        wrong, totals = _read_every_key(db, con, sql, keys, rng, lambda: sum(
            u[0] for u in manager.usage().values()))
        assert not wrong, wrong[:5]
        assert max(totals) <= limit, (max(totals), limit)
        usage = manager.usage()
        assert sum(u[3] for u in usage.values()) > 0            # (the limit did bind)
        assert sum(1 for u in usage.values() if u[0] > 0) == 2  # (held on both workers)
        assert sum(u[2] for u in usage.values()) <= limit       # (the shares' sum)
        after = db.memory(bases=False)
        assert sum(after[r] for r in readers) > sum(mem[r] for r in readers)

        # a subscribed key is never evicted; its writes reach the subscriber
        with pytest.raises(noria_py.NotSupportedError, match="without \\?"):
            db.subscribe("v_count")
        sub = db.subscribe("v_count", 7)
        state = _poll_until(sub, {}, {(7, 3, sum(r[1] for r in rows if r[0] == 7)): 1}, 10)
        assert len(state) == 1
        reader = [r for r in readers if r in {n["id"] for n in graph
                                              if n["view"] == "v_count"}]
        again = [k for k in keys if k != 7]
        rng.shuffle(again)
        for k in again:
            db.view("v_count").lookup(k)
        held = [server.runtime.call(r, "lookup", [7])[0] for r in reader]
        assert any(h is not None for h in held)             # (still held, not a hole)
        db.table("t").insert([(7, 1000, "x")])
        db.wait()
        ((_, n, s),) = state
        want = {(7, n + 1, s + 1000): 1}
        assert _poll_until(sub, state, want, 10) == want
        sub.close()
        assert max(sum(u[0] for u in manager.usage().values()), 0) <= limit
        db.close()
    finally:
        server.stopped.set()
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 2])
def test_held_operators_bytes_count_against_the_limit(shards):
    """The operators held partial (a TopK keeping every row of a key, a DISTINCT with
    one shard, a COUNT) count against ``--memory-limit`` with their readers: every
    key of each view read once in a random order, the partial nodes of both workers
    together hold at most the limit (each by its own accounting, once the evictions
    chosen have landed), the operators' part of it counted; answers as DuckDB's; and
    ``memory()`` has each held operator shard."""
    import time

    from noria_py.runtime.cluster.server import Server

    limit = 20000
    server = Server(port=0, workers=2, shards=shards, partial=True, memory_limit=limit)
    try:
        db = noria_py.connect(f"noria://127.0.0.1:{server.address[1]}")
        db.execute("CREATE TABLE t (a INT, b INT, c TEXT)")
        sql = {"v_top": "SELECT a, b FROM t WHERE a = ? ORDER BY b DESC LIMIT 2",
               "v_count": "SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a"}
        if shards == 1:
            sql["v_distinct"] = "SELECT DISTINCT a, c FROM t WHERE a = ?"
        for name, q in sql.items():
            db.execute(f"CREATE VIEW {name} AS {q}")
        keys = list(range(120))
        rng = random.Random(shards)
        _, con = _written(db, rng, keys, 8)
        graph = db.graph()
        held = {n["id"] for n in graph if n["kind"] in ("topk", "distinct", "aggregate")}
        assert held and all(n["partial"] for n in graph if n["id"] in held)
        manager = server.db._partial

        def hosted() -> int:
            deadline = time.monotonic() + 10
            usage = manager.usage()
            while any(u[5] for u in usage.values()) and time.monotonic() < deadline:
                usage = manager.usage()     # (evictions chosen, on their way)
            return sum(u[4] for u in usage.values())

        wrong, totals = _read_every_key(db, con, sql, keys, rng, hosted)
        assert not wrong, wrong[:5]
        assert max(totals) <= limit, (max(totals), limit)
        usage = manager.usage()
        assert sum(u[3] for u in usage.values()) > 0            # (the limit did bind)
        assert sum(u[2] for u in usage.values()) <= limit       # (the shares' sum)
        mem = db.memory(bases=False)
        assert held <= set(mem) and all(mem[n] > 0 for n in held)
        db.close()
    finally:
        server.stopped.set()


def test_a_worker_evicts_down_to_its_share_and_passes_over_pinned_keys():
    """A worker's partial readers hold nothing until the controller gives the worker a
    share of the limit (``req_share``); a fill reports the bytes held and filled
    (``mem``) before its answer; a lower share evicts down to it before answering,
    except keys a subscription pinned (``req_pin``)."""
    from noria_py.batch import Batch

    w, ctl, views = _worker_with(["CREATE TABLE t (a INT, b INT)",
                                  "CREATE VIEW v AS SELECT a, b FROM t WHERE a = ?"])
    (reader,) = views["v"]
    base = w.graph[reader].parents[0]
    w.make_partial(reader, 1 << 20)                 # (the cluster's limit)
    op = w.graph[reader].op
    path = [base, reader]

    def fill(rid: int, keys: list) -> None:
        w.frame(_fill_frame(base, rid, path, keys, [0], [[(k, 10 * k)] for k in keys]))
        _pump(w)

    fill(1, [1])                                    # share 0: answered, then evicted
    mem, rep = ctl.recv(), ctl.recv()
    assert mem[:3] == ("mem", 0, 0) and mem[3] > 0 and rep == ("rep", 1, (((1, 10),),))
    assert op.lookup(1) is None
    each = mem[3]
    assert w.req_share(10 * each)[2] == 10 * each
    fill(2, [1, 2, 3, 4, 5])
    assert ctl.recv()[:3] == ("mem", 5 * each, 5) and ctl.recv()[0] == "rep"
    assert all(op.lookup(k) == [(k, 10 * k)] for k in range(1, 6))
    w.req_pin(reader, 3, True)
    held, keys, share, evicted = w.req_share(each * 2)[:4]
    assert (held, keys, share) == (2 * each, 2, 2 * each) and evicted == 4
    assert op.lookup(3) == [(3, 30)] and op.lookup(1) is None and op.lookup(2) is None
    assert w.req_share(0)[:2] == [each, 1]          # (the pinned key stays: the slack)
    assert op.lookup(3) == [(3, 30)]
    w.write(base, Batch([(3, 31), (4, 41)]))        # (a write to it still reaches it)
    _pump(w)
    assert sorted(op.lookup(3)) == [(3, 30), (3, 31)] and op.lookup(4) is None
    w.req_pin(reader, 3, False)
    assert w.req_share(0)[:2] == [0, 0] and op.lookup(3) is None
    ctl.close()


class _Donor:
    """A worker as ``ClusterPartial._grant`` sees it (name, alive) and its partial
    readers' state: the share it evicts down to and the bytes it holds."""

    def __init__(self, name: str) -> None:
        self.name, self.alive = name, True
        self.share = self.held = 0


class _SharesRuntime:
    """The controller's calls ``_grant`` makes, on ``_Donor``s: a lowered share evicts at
    once (``ask``), a raised one applies when sent (``request``); after each, the
    workers' shares together must fit the limit."""

    def __init__(self, limit: int, names: list[str]) -> None:
        import threading

        self.limit = limit
        self.workers = {n: _Donor(n) for n in names}
        self.lock = threading.RLock()
        self.calls: list[tuple[str, str, int]] = []
        self.worst = 0

    def _apply(self, w: _Donor, share: int) -> list[int]:
        w.share = share
        w.held = min(w.held, share) // 100 * 100        # (keys of 100 bytes)
        self.worst = max(self.worst, sum(x.share for x in self.workers.values() if x.alive))
        return [w.held, w.held // 100, share, 0]

    def ask(self, w: _Donor, method: str, share: int, timeout: float = 0) -> list[int]:
        self.calls.append(("ask", w.name, share))
        return self._apply(w, share)

    def request(self, w: _Donor, method: str, share: int) -> None:
        self.calls.append(("request", w.name, share))
        self._apply(w, share)


def test_one_limit_is_shared_by_the_workers_and_follows_their_reads():
    """``ClusterPartial._grant``: the workers' shares never add up to more than the limit
    at any moment (a donor is lowered, and evicts, before the taker is raised); a
    worker that reads takes the pool first, then other workers' unused bytes, then
    half the difference from a larger share; a lost worker's share goes back."""
    from noria_py.graph import Graph
    from noria_py.runtime.cluster.partial import ClusterPartial

    limit = 64_050
    rt = _SharesRuntime(limit, ["w1", "w2", "w3"])
    manager = ClusterPartial(Graph(), rt, limit)        # type: ignore[arg-type]
    w1, w2, w3 = (rt.workers[n] for n in ("w1", "w2", "w3"))

    def read(w: _Donor, n: int = 1) -> None:
        """An upquery of ``n`` keys of 100 bytes at ``w``, which then holds them."""
        manager._grant(w, n)                            # type: ignore[arg-type]
        w.held = min(w.share, w.held + 100 * n) // 100 * 100
        manager.reported(w.name, w.held, w.held // 100, 100 * n)
        assert sum(manager.shares.values()) <= limit

    for _ in range(800):                # w1 alone reads: it takes the whole pool
        read(w1)
    assert manager.shares == {"w1": limit} and w1.held == limit // 100 * 100
    for _ in range(400):                # then w2 alone: half of w1's, step by step
        read(w2, 2)
    assert abs(manager.shares["w1"] - manager.shares["w2"]) <= 2 * (limit // 64)
    assert rt.worst <= limit and manager.moves > 0
    moves = manager.moves               # both read alike now: the shares stay put
    for i in range(400):                # (a round trip per miss would double its cost)
        read(w1 if i % 2 else w2)
    assert manager.moves - moves <= 8, manager.moves - moves
    # a donor is always lowered (asked, and answered) before the taker is raised
    for i, (how, name, share) in enumerate(rt.calls):
        if how == "request" and i and rt.calls[i - 1][0] == "ask":
            assert rt.calls[i - 1][1] != name
    w1.held = 0                         # (w1's keys deleted: its share is unused)
    manager.reported("w1", 0, 0, 0)
    for _ in range(200):
        read(w2, 2)
    assert manager.shares["w2"] > limit * 3 // 4 and rt.worst <= limit
    w2.alive = False
    manager.worker_lost("w2")           # its share is back in the pool, for w3
    for _ in range(300):
        read(w3, 2)
    assert manager.shares["w3"] >= limit // 2 and rt.worst <= limit
    assert sum(manager.shares.values()) <= limit


# ---------------------------------------------------------------- a partial aggregate

def _held_count_worker(limit: int | None):
    """``_count_worker``, the COUNT held partial with the reader (as
    ``ClusterPartial.install`` announces it)."""
    w, ctl, base, agg, reader = _count_worker()
    w.make_partial(reader, limit, [[agg, [0]]], [base, agg, reader])
    return w, ctl, base, agg, reader


def _ready(ctl) -> bool:
    """Whether a frame from the worker waits (buffered, or on the socket)."""
    import select

    return ctl._start != ctl._end or bool(select.select([ctl.sock], [], [], 0)[0])


def _handle_some(w, ctl, rng: random.Random, each: int | None) -> int | None:
    """A few of the frames the worker sent itself handled (the rest wait), then what it
    sent the controller read: ``each``, or the bytes its first fill's keys took."""
    import queue

    for _ in range(rng.randint(0, 6)):
        try:
            src, f = w.inbox.get_nowait()
        except queue.Empty:
            break
        w.frame(f, src)
    while _ready(ctl):
        f = ctl.recv()
        if f[0] == "mem" and f[3]:
            each = each or f[3]
    return each


def test_a_partial_aggregate_on_a_worker_is_filled_on_the_way_and_drops_writes_to_holes():
    """A write to a key the aggregate does not hold sends nothing on (the reader's
    domain never sees it); a fill from the base fills the aggregate, then the reader;
    a second fill of a key held (two upqueries at once) is answered from the
    aggregate's state, not counted again; writes after are counted once."""
    from noria_py.batch import Batch

    w, ctl, base, agg, reader = _held_count_worker(None)
    op, rop = w.graph[agg].op, w.graph[reader].op
    before = w.domains[reader].time
    w.write(base, Batch([(1, 10), (2, 20)]))
    _pump(w)
    assert op.holes.n == 0 and w.domains[reader].time == before    # (dropped at the COUNT)
    path = [base, agg, reader]
    w.frame(_fill_frame(base, 7, path, [1], [0], [[(1, 10)]]))
    _pump(w)
    assert ctl.recv() == ("rep", 7, (((1, 1),),))
    assert 1 in op.holes and 2 not in op.holes
    w.frame(_fill_frame(base, 8, path, [1], [0], [[(1, 10)]]))     # (held: not counted)
    _pump(w)
    assert ctl.recv() == ("rep", 8, (((1, 1),),))
    w.write(base, Batch([(1, 11), (2, 21)]))
    _pump(w)
    assert rop.lookup(1) == [(1, 2)] and rop.lookup(2) is None and 2 not in op.holes
    ctl.close()


def test_an_eviction_goes_up_to_the_aggregate_and_down_behind_its_output():
    """Random writes, fills and shares on one worker, its frames handled a few at a time
    (the fills, the evictions going up and coming down, the writes interleaved): after
    each step the reader holds only keys the aggregate holds (else a write to one
    would stop at the aggregate) or is letting go (their eviction on its way down,
    behind the aggregate's output), and once every frame is handled each key held
    has the count of every row written to it; a share of 0 empties both; the view
    dropped, nothing of the pair is left."""

    from noria_py.batch import Batch

    w, ctl, base, agg, reader = _held_count_worker(1 << 20)
    op, rop = w.graph[agg].op, w.graph[reader].op
    path = [base, agg, reader]
    rng = random.Random(3)
    rows: dict[int, int] = {}
    each = None
    for i in range(300):
        r = rng.random()
        if r < 0.4:
            k = rng.randrange(8)
            w.write(base, Batch([(k, i)]))
            rows[k] = rows.get(k, 0) + 1
        elif r < 0.7:
            k = rng.randrange(8)
            w.frame(_fill_frame(base, i + 1, path, [k], [0], [[(k, 0)] * rows.get(k, 0)]))
        elif r < 0.85 and each:
            w.req_share(each * rng.randint(0, 4))
        each = _handle_some(w, ctl, rng, each)
        held = set(rop.filled)          # (the aggregate's evictions on their way down
        leaving = set(w.partial.leaving.get(reader, {}))        # to it: keys leaving)
        assert held - set(op.holes.keys()) <= leaving, (i, held, set(op.holes.keys()))
        if i % 25 == 24:                # (everything handled: every count right)
            _pump(w)
            assert set(rop.filled) <= set(op.holes.keys())
            assert all(rop.lookup(k) == ([(k, rows[k])] if rows.get(k) else [])
                       for k in rop.filled), i
    _pump(w)
    w.req_share(0)
    _pump(w)
    assert not set(rop.filled) and op.holes.n == 0 and w.partial.total == 0
    w.req_share(1 << 20)
    for k in range(8):                  # (every count right once filled again)
        w.frame(_fill_frame(base, 1000 + k, path, [k], [0], [[(k, 0)] * rows.get(k, 0)]))
        _pump(w)
        assert rop.lookup(k) == ([(k, rows[k])] if rows.get(k) else [])
    w.ddl(["remove", [reader]], {})     # (the view dropped: its reader and COUNT go)
    assert agg not in w.graph.nodes and not w.partial.upstream and not w.held_cols
    w.req_share(0)
    w.write(base, Batch([(1, 1)]))
    _pump(w)
    ctl.close()


def test_a_lost_partial_aggregate_empties_its_reader():
    """``req_partial_clear`` (the controller, when the aggregate's worker is lost): the
    reader's keys become holes, its leaving keys' bytes given back."""
    w, ctl, base, agg, reader = _held_count_worker(None)
    rop = w.graph[reader].op
    w.frame(_fill_frame(base, 1, [base, agg, reader], [1, 2], [0], [[(1, 0)], [(2, 0)]]))
    _pump(w)
    assert rop.lookup(1) == [(1, 1)]
    w.req_partial_clear(reader)
    assert rop.lookup(1) is None and rop.lookup(2) is None
    ctl.close()


#: a TopK partitioned by the key and a DISTINCT, each held partial with its reader,
#: and what the view answers for a key from its rows (a multiset of (a, b))
KEYED_VIEWS = {
    "topk": ("SELECT a, b FROM t WHERE a = ? ORDER BY b DESC LIMIT 2",
             lambda rows: sorted(rows, reverse=True)[:2]),
    "distinct": ("SELECT DISTINCT a, b FROM t WHERE a = ?", lambda rows: sorted(set(rows))),
}


@pytest.mark.parametrize("kind", sorted(KEYED_VIEWS))
def test_a_held_topk_or_distinct_on_a_worker_drops_writes_to_holes_and_evicts_in_order(kind):
    """A TopK or DISTINCT held partial with its reader (as ``ClusterPartial.install``
    announces it): random inserts, deletes, fills (a key held already: answered from
    its state) and shares, the worker's frames handled a few at a time. After each
    step the reader holds only keys the operator holds or is letting go; once every
    frame is handled each key held answers from every row written (a write to a hole
    counted again at the fill would show here); a share of 0 empties both; and the
    operator's bytes count against the share (``WorkerPartial.total``)."""
    from noria_py.batch import Batch

    sql, answer = KEYED_VIEWS[kind]
    w, ctl, views = _worker_with(["CREATE TABLE t (a INT, b INT)", f"CREATE VIEW v AS {sql}"])
    (reader,) = views["v"]
    chains, held = chain_and_ops(w.graph, reader, set(w.graph.nodes))
    assert [w.graph[h].kind for h, _ in held] == [kind]
    path = evict_path(chains, held)
    w.make_partial(reader, 1 << 20, [[h, list(c)] for h, c in held], path)
    (op_id, _), = held
    op, rop = w.graph[op_id].op, w.graph[reader].op
    base = chains[0][0][0]
    fill_path = chains[0][0]
    rng = random.Random(5)
    rows: dict[int, list[tuple]] = {}
    each = None
    for i in range(300):
        r = rng.random()
        k = rng.randrange(6)
        if r < 0.35:
            row = (k, rng.randrange(4))
            w.write(base, Batch([row]))
            rows.setdefault(k, []).append(row)
        elif r < 0.5 and rows.get(k):
            row = rows[k].pop(rng.randrange(len(rows[k])))
            w.write(base, Batch([row], [-1]))
        elif r < 0.8:
            w.frame(_fill_frame(base, i + 1, fill_path, [k], [0], [list(rows.get(k, []))]))
        elif each:
            w.req_share(each * rng.randint(0, 4))
        each = _handle_some(w, ctl, rng, each)
        leaving = set(w.partial.leaving.get(reader, {}))
        assert set(rop.filled) - set(op.holes.keys()) <= leaving, i
        if i % 25 == 24:                # (everything handled, every key filled: right)
            _counted(w)
            assert set(rop.filled) <= set(op.holes.keys())
            w.req_share(1 << 20)
            w.frame(_fill_frame(base, 1000 + i, fill_path, list(range(6)), [0],
                                [list(rows.get(k, [])) for k in range(6)]))
            _pump(w)
            for k in range(6):
                assert sorted(rop.lookup(k)) == sorted(answer(rows.get(k, []))), (i, k)
            for k in range(6):          # (writes to held keys: the operator's grow)
                row = (k, rng.randrange(4))
                w.write(base, Batch([row]))
                rows.setdefault(k, []).append(row)
            assert _counted(w) > w.partial.hosted([])   # (the operator's too)
    _pump(w)
    w.req_share(0)
    _pump(w)
    assert not set(rop.filled) and op.holes.n == 0 and w.partial.total == 0
    ctl.close()


def _counted(w) -> int:
    """Once every frame is handled and no key is leaving: the bytes the worker counts
    against its share are those its partial reader and the operators held with it
    hold (``SIZES``; every key a write touched measured again), within the share;
    those bytes."""
    _pump(w)
    counted, _, share, _, hosted, leaving = w.req_share(None)
    while leaving:                      # (an eviction just chosen: let it land)
        _pump(w)
        counted, _, share, _, hosted, leaving = w.req_share(None)
    for nid in w.held_reader:           # (a key not measured since a write: now)
        w.graph[nid].op.settle()
    hosted = w.partial.hosted(list(w.held_reader))
    assert counted == hosted and counted <= share, (counted, hosted, share)
    return hosted


@pytest.mark.slow
def test_a_shared_partial_aggregate_becomes_full_again_in_a_cluster():
    """A view created later whose plan shares the aggregate of a partial view (an
    identical sub-plan): the aggregate is full again (``graph()``), filled from the
    table, and both views answer right, before and after more writes."""
    with Cluster(workers=2, shards=2, extra=("--partial",)) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE t (a INT, b INT)")
        db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t "
                   "WHERE a = ? GROUP BY a")
        db.table("t").insert([(i % 20, i) for i in range(200)])
        assert db.view("v").lookup(3) == [(3, 10, sum(range(3, 200, 20)))]
        aggs = [n for n in db.graph() if n["kind"] == "aggregate"]
        assert aggs and all(n["partial"] for n in aggs)
        db.execute("CREATE VIEW w AS SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t GROUP BY a")
        assert not any(n["partial"] for n in db.graph() if n["kind"] == "aggregate")
        db.table("t").insert([(k, 1) for k in range(20)])
        db.wait()
        want = [(k, 11, sum(range(k, 200, 20)) + 1) for k in range(20)]
        assert sorted(db.view("w").all()) == want
        assert [db.view("v").lookup(k)[0] for k in range(20)] == want
        db.close()


# ---------------------------------------------------------------- a partial join

VOTE = ("CREATE VIEW vv AS SELECT article.id, article.title, vc.n FROM article LEFT JOIN "
        "(SELECT aid, COUNT(*) AS n FROM vote GROUP BY aid) AS vc ON article.id = vc.aid "
        "WHERE article.id = ?")


def _vote_worker(limit: int | None):
    """A worker hosting the vote view, its join and COUNT held partial with its reader
    (as ``ClusterPartial.install`` announces them): (worker, controller's end, the
    article chain, the vote chain, COUNT, join, reader)."""
    w, ctl, views = _worker_with(["CREATE TABLE article (id INT, title TEXT)",
                                  "CREATE TABLE vote (aid INT, u INT)", VOTE])
    (reader,) = views["vv"]
    found = chain_and_ops(w.graph, reader, set(w.graph.nodes))
    assert found is not None
    chains, held = found
    w.make_partial(reader, limit, [[h, list(c)] for h, c in held], evict_path(chains, held))
    (left, _), (right, _) = chains
    return w, ctl, left, right, held[0][0], held[1][0], reader


def _fill_both(w, rid: int, left: list[str], right: list[str], keys: list[int],
               articles: dict[int, list], votes: dict[int, int], first: int = 0) -> list:
    """The two fill frames of one upquery of ``keys`` (each chain's, from its table's rows
    as of now, as the controller sends them), the chain ``first`` first."""
    frames = [_fill_frame(left[0], rid, left, keys, [0],
                          [[(k, t) for t in articles.get(k, [])] for k in keys]),
              _fill_frame(right[0], rid, right, keys, [0],
                          [[(k, 0)] * votes.get(k, 0) for k in keys])]
    return frames if first == 0 else frames[::-1]


def _votes_of(k: int, articles: dict[int, list], votes: dict[int, int]) -> list:
    return sorted((k, t, votes.get(k) or None) for t in articles.get(k, []))


def test_a_partial_join_on_a_worker_waits_for_both_sides_and_drops_writes_to_holes():
    """A write to a key the join does not hold stops there (the reader's domain never
    sees it; a vote stops at the COUNT); a fill's first side waits at the join (no
    answer) for the other's, a write arriving meanwhile on the side that came first
    being added to its rows (it is after that side's fill); a second fill of a key
    held answers from the join's state, not joined again; writes after are joined."""
    from noria_py.batch import Batch

    w, ctl, left, right, count, join, reader = _vote_worker(None)
    cop, jop, rop = w.graph[count].op, w.graph[join].op, w.graph[reader].op
    before = w.domains[reader].time
    w.write(left[0], Batch([(1, "a"), (2, "b")]))
    w.write(right[0], Batch([(1, 10), (2, 20)]))
    _pump(w)
    assert jop.holes.n == 0 and cop.holes.n == 0 and w.domains[reader].time == before
    articles, votes = {1: ["a"], 2: ["b"]}, {1: 1, 2: 1}
    lf, rf = _fill_both(w, 7, left, right, [1], articles, votes)
    w.frame(lf)
    _pump(w)
    assert not _ready(ctl) and 1 not in jop.holes      # (the join waits for the votes)
    w.write(left[0], Batch([(1, "c")]))                 # (after the article side's fill)
    articles[1].append("c")
    _pump(w)
    w.frame(rf)
    _pump(w)
    assert ctl.recv() == ("rep", 7, (((1, "a", 1), (1, "c", 1)),))
    assert 1 in jop.holes and 1 in cop.holes and not jop.waiting
    for f in _fill_both(w, 8, left, right, [1], articles, votes, first=1):
        w.frame(f)                                      # (held: answered from state)
    _pump(w)
    assert ctl.recv() == ("rep", 8, (((1, "a", 1), (1, "c", 1)),))
    w.write(right[0], Batch([(1, 11), (2, 21)]))
    w.write(left[0], Batch([(2, "d")]))
    _pump(w)
    assert sorted(rop.lookup(1)) == [(1, "a", 2), (1, "c", 2)] and rop.lookup(2) is None
    assert 2 not in jop.holes and 2 not in cop.holes
    ctl.close()


def test_an_eviction_starts_at_the_count_and_goes_down_through_the_join():
    """The vote view's COUNT above its join above its reader, all held: random writes to
    both tables, upqueries (both chains' fills, either first), shares, the frames
    handled a few at a time. The order an eviction takes: chosen at the reader, sent up
    to the COUNT (the topmost held), which makes the keys holes and sends it down
    behind its output to the join, which does the same to the reader. So after every
    step the reader holds only keys the join holds or is letting go; once everything
    is handled the join holds only keys the COUNT holds, the reader only keys the join
    holds, each with every row written to it; a share of 0 empties all three."""

    from noria_py.batch import Batch

    w, ctl, left, right, count, join, reader = _vote_worker(1 << 20)
    cop, jop, rop = w.graph[count].op, w.graph[join].op, w.graph[reader].op
    assert w.partial.upstream[reader] == (count, [count, join, reader])
    rng = random.Random(5)
    articles: dict[int, list] = {}
    votes: dict[int, int] = {}
    each = None
    evicted = 0
    for i in range(400):
        r = rng.random()
        k = rng.randrange(8)
        if r < 0.25:
            t = f"t{i}"
            w.write(left[0], Batch([(k, t)]))
            articles.setdefault(k, []).append(t)
        elif r < 0.32 and articles.get(k):      # (a delete: its sign -1 is netted)
            t = articles[k].pop(rng.randrange(len(articles[k])))
            w.write(left[0], Batch([(k, t)], [-1]))
        elif r < 0.45:
            w.write(right[0], Batch([(k, i)]))
            votes[k] = votes.get(k, 0) + 1
        elif r < 0.75:
            for f in _fill_both(w, i + 1, left, right, [k, rng.randrange(8)], articles,
                                votes, first=rng.randrange(2)):
                w.frame(f)
        elif each:
            w.req_share(each * rng.randint(0, 4))
        each = _handle_some(w, ctl, rng, each)
        held = set(rop.filled)
        leaving = set(w.partial.leaving.get(reader, {}))
        assert held - set(jop.holes.keys()) <= leaving, (i, held, set(jop.holes.keys()))
        evicted = max(evicted, len(leaving))
        if i % 25 == 24:                # (everything handled: every row right)
            _pump(w)
            while _ready(ctl):
                ctl.recv()
            assert set(rop.filled) <= set(jop.holes.keys()) <= set(cop.holes.keys()), i
            assert not jop.waiting
            _counted(w)                 # (the COUNT's and the join's bytes counted)
            for key in rop.filled:
                assert sorted(rop.lookup(key)) == _votes_of(key, articles, votes), (i, key)
    assert evicted                      # (evictions were on their way at some step)
    _pump(w)
    w.req_share(0)
    _pump(w)
    assert not set(rop.filled) and jop.holes.n == 0 and cop.holes.n == 0
    w.req_share(1 << 20)
    for k in range(8):                  # (every row right once filled again)
        for f in _fill_both(w, 1000 + k, left, right, [k], articles, votes):
            w.frame(f)
        _pump(w)
        assert sorted(rop.lookup(k)) == _votes_of(k, articles, votes)
    ctl.close()


def test_a_lost_partial_join_empties_its_reader_and_a_lost_count_the_join():
    """``req_partial_clear`` (the controller, when a worker hosting a held operator is
    lost): the join, the COUNT and the reader hosted here all become holes, the
    waiting fills with them; the next fills fill them again, right. A worker lost
    anywhere drops the fills waiting at the join (``lose``)."""
    w, ctl, left, right, count, join, reader = _vote_worker(None)
    cop, jop, rop = w.graph[count].op, w.graph[join].op, w.graph[reader].op
    articles, votes = {1: ["a"], 2: ["b"]}, {1: 2}
    for f in _fill_both(w, 1, left, right, [1, 2], articles, votes):
        w.frame(f)
    w.frame(_fill_both(w, 2, left, right, [3], articles, votes)[0])     # (one side)
    _pump(w)
    assert rop.lookup(1) == [(1, "a", 2)] and rop.lookup(2) == [(2, "b", None)]
    assert jop.waiting
    w.req_partial_clear(reader)
    assert rop.lookup(1) is None and jop.holes.n == 0 and cop.holes.n == 0
    assert not jop.waiting
    for f in _fill_both(w, 3, left, right, [2, 1], articles, votes, first=1):
        w.frame(f)
    _pump(w)
    assert rop.lookup(1) == [(1, "a", 2)] and rop.lookup(2) == [(2, "b", None)]
    w.frame(_fill_both(w, 4, left, right, [3], articles, votes)[1])     # (one side)
    _pump(w)
    assert jop.waiting
    w.lose("w2")                # (another worker lost: its upquery failed, asked again)
    assert not jop.waiting
    ctl.close()


@pytest.mark.slow
def test_a_shared_partial_join_becomes_full_again_in_a_cluster():
    """A view created later whose plan shares the join (and so the COUNT above it) of a
    partial vote view: both are full again (``graph()``), filled from the tables, and
    both views answer right, before and after more writes."""
    with Cluster(workers=2, shards=2, extra=("--partial",)) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE article (id INT, title TEXT)")
        db.execute("CREATE TABLE vote (aid INT, u INT)")
        db.execute(VOTE)
        db.table("article").insert([(i, f"t{i}") for i in range(20)])
        db.table("vote").insert([(i % 10, i) for i in range(100)])
        assert db.view("vv").lookup(3) == [(3, "t3", 10)]
        held = [n for n in db.graph() if n["kind"] in ("aggregate", "join")]
        assert len(held) == 4 and all(n["partial"] for n in held)
        db.execute(VOTE.replace("vv", "ww").replace(" WHERE article.id = ?", ""))
        assert not any(n["partial"] for n in db.graph() if n["kind"] in ("aggregate", "join"))
        db.table("vote").insert([(k, 1) for k in range(20)])
        db.wait()
        want = [(k, f"t{k}", 11 if k < 10 else 1) for k in range(20)]
        assert sorted(db.view("ww").all()) == want
        assert [db.view("vv").lookup(k)[0] for k in range(20)] == want
        db.close()


# ---------------------------------------------------------------- a miss without the controller

def _direct_ready(worker, reader_id: str, seconds: float = 10) -> None:
    """Wait until the controller's last upquery of ``reader_id`` has told its worker
    that its chains are up (``direct_ok``): its next miss is its own upquery."""
    deadline = time.monotonic() + seconds
    while reader_id not in worker.direct_ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader_id in worker.direct_ready


def test_a_direct_miss_at_another_worker_holds_a_write_at_the_base_once(monkeypatch):
    """``--writes worker``: a miss read at the reader's worker is upqueried by that
    worker itself (``Worker.direct_miss``), its fill sent straight to the base's
    worker, another process's. A write applied at the base's worker whose output
    waits for its log replica when the fill arrives is left out of the fill and
    applied to the key after it (key 1); a fill held at the base's worker until that
    write is acknowledged (its output has left, and was dropped at the hole) is
    computed after it, and holds it (key 2): either way the key's rows hold the write
    once. The first miss of the reader goes through the controller (it says the
    chain is up), the next ones do not."""
    from noria_py.runtime.cluster import worker as worker_mod
    from noria_py.runtime.cluster.partial import is_direct
    from noria_py.runtime.cluster.worker import SELF

    from .test_writes import _in_process, _tracked_workers
    workers = _tracked_workers(monkeypatch)
    gate, aside = threading.Event(), []         # (the replica's log frames, set aside)
    gate.set()
    hold, held_fills = threading.Event(), []    # (direct fills at the base, set aside)
    replica_frame, fill = worker_mod.Worker.replica_frame, worker_mod.Worker._fill

    def held_frame(self, f, src):
        if f[0] == "rlog" and not gate.is_set():
            aside.append((self, f, src))
            return
        replica_frame(self, f, src)

    def held_fill(self, m):
        if hold.is_set() and is_direct(m.body[1]) and self.graph[m.dst].kind == "base":
            held_fills.append((self, m))
            return
        fill(self, m)

    def until(cond, seconds=10):
        deadline = time.monotonic() + seconds
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cond()

    def open_gate():
        gate.set()
        for worker, f, src in aside:
            worker.inbox.put((src, f))

    def write_then_miss(row: tuple) -> tuple[threading.Thread, threading.Thread]:
        """``row`` written, applied at the base's worker and held for its replica; then
        a miss of its key, read in a thread (its rows appended to ``got``)."""
        aside.clear()
        gate.clear()
        writer = threading.Thread(target=lambda: t.insert([row]))
        writer.start()
        until(lambda: aside)
        miss = threading.Thread(target=lambda: got.append(view.lookup(row[0])))
        miss.start()
        return writer, miss
    got: list = []
    monkeypatch.setattr(worker_mod.Worker, "replica_frame", held_frame)
    monkeypatch.setattr(worker_mod.Worker, "_fill", held_fill)
    with _in_process(partial=True) as db:
        try:
            db.execute("CREATE TABLE t (k INT, n INT)")
            db.execute("CREATE VIEW by_k AS SELECT k, n FROM t WHERE k = ?")
            t, view = db.table("t"), db.view("by_k")
            t.insert([(1, 10), (2, 20), (3, 30)])
            db.wait()
            graph = db.graph()
            base = next(n for n in graph if n["kind"] == "base")
            reader = next(n for n in graph if n["kind"] == "reader")
            assert reader["worker"] != base["worker"]
            at = next(w for w in workers if w.name == reader["worker"])
            assert view.lookup(3) == [(3, 30)]          # (through the controller)
            _direct_ready(at, reader["id"])

            # key 1: the write applied at the base, its output held for the replica
            writer, miss = write_then_miss((1, 11))
            miss.join(30)
            assert got == [[(1, 10)]] and at.direct_fills == 1
            open_gate()
            writer.join(30)
            db.wait()
            assert sorted(view.lookup(1)) == [(1, 10), (1, 11)]

            # key 2: the fill held at the base until the write's output has left
            hold.set()
            writer, miss = write_then_miss((2, 21))
            until(lambda: held_fills)
            open_gate()
            writer.join(30)                 # (acknowledged: its output has left)
            assert not writer.is_alive() and miss.is_alive()
            hold.clear()
            for worker, m in held_fills:
                worker.inbox.put((SELF, ["fill", m.dst, m.body]))
            miss.join(30)
            assert sorted(got[1]) == [(2, 20), (2, 21)] and at.direct_fills == 2
            db.wait()
            assert sorted(view.lookup(2)) == [(2, 20), (2, 21)]
        finally:
            hold.clear()
            open_gate()


#: the views of the direct misses' differential run: a base's rows, a COUNT and the vote
#: view (a join and a COUNT held partial: two chains, from two bases) and a TopK
DIRECT_VIEWS = ("v_rows", "v_count", "v_votes", "v_top")


def _direct_run(seed: int, shards: int, ops: int, monkeypatch) -> None:
    """Random inserts and deletes of both tables, each followed now and then by a miss
    or a hit racing it (unchecked), and after ``wait()`` every few writes, keys read by
    ``lookup`` (most never read before: misses, upqueried by the readers' workers
    themselves) as DuckDB answers them, by ``lookup`` and ``lookup_many``; then every
    key. Most misses are direct."""
    from .test_writes import _in_process, _tracked_workers
    workers = _tracked_workers(monkeypatch)
    rng = random.Random(seed)
    keys = list(range(80))
    with _in_process(partial=True, shards=shards) as db:
        for sql in DDL:
            db.execute(sql)
        for name in DIRECT_VIEWS:
            db.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        wrong: list = []

        def check(ks: list[int]) -> None:
            """Every other view's keys read first by ``lookup_many`` (a key repeated),
            the others' by ``lookup``, then again the other way."""
            db.wait()
            con = _oracle(model)
            for j, name in enumerate(DIRECT_VIEWS):
                v = db.view(name)
                want = [normalize(con.execute(VIEWS[name], [k]).fetchall()) for k in ks]
                for way in ((0, 1) if j % 2 else (1, 0)):
                    got = ([normalize(v.lookup(k)) for k in ks] if way else
                           [normalize(r) for r in v.lookup_many(ks + ks[:1])][:len(ks)])
                    for k, g, w in zip(ks, got, want):
                        if g != w:
                            wrong.append((name, "lookup" if way else "lookup_many", k, g, w))
        for i in range(ops):
            table = "t1" if rng.random() < 0.7 else "t2"
            rows = model[table]
            if rows and rng.random() < 0.3:
                gone = [rows.pop(rng.randrange(len(rows))) for _ in range(rng.randint(1, 2))
                        if rows]
                db.table(table).delete(gone)
            else:
                new = [(rng.choice(keys), rng.randint(0, 9), rng.choice(TEXTS))[:3 if table == "t1"
                                                                                 else 2]
                       for _ in range(rng.randint(1, 4))]
                db.table(table).insert(new)
                rows.extend(new)
            if rng.random() < 0.5:      # (racing the write in flight: unchecked)
                db.view(rng.choice(DIRECT_VIEWS)).lookup(rng.choice(keys))
            if i % 6 == 5:
                check(rng.sample(keys, 3))
        check(keys)
        # (the last check's reads are misses but for the keys read before, each the
        # worker's own but each reader shard's first)
        before = ops // 6 * 3 * len(DIRECT_VIEWS) + ops
        misses = len(keys) * len(DIRECT_VIEWS) - before - shards * len(DIRECT_VIEWS)
        direct = sum(w.direct_fills for w in workers)
        assert not wrong, wrong[:5]
        assert direct >= misses, (direct, misses)


def test_direct_misses_with_writes_and_deletes_match_duckdb(monkeypatch):
    """``--writes worker``, one shard (two, in the slow suite)."""
    _direct_run(1, 1, 36, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_direct_misses_with_writes_and_deletes_match_duckdb_sharded(seed, monkeypatch):
    _direct_run(seed + 2, 2, 60, monkeypatch)


@pytest.mark.slow
def test_a_worker_lost_during_a_direct_miss_answers_through_the_controller(monkeypatch):
    """The base's worker stopped while a miss's own fill (its reader's worker's, not
    the controller's) is on its way to it, then SIGKILLed: the reader's worker fails
    its upquery at the loss (the hole), the client asks the controller, which waits
    for the base's recovery and upqueries again; the rows are right, and so are the
    misses after (direct again once the controller's next upquery says the chain is
    up)."""
    from noria_py.runtime.cluster.server import Server

    monkeypatch.setenv("NORIA_TUNING", "DIRECT_MISS_TIMEOUT=600")   # (the workers')
    server = Server(port=0, workers=2, shards=1, channels="direct", partial=True,
                    writes="worker")
    try:
        db = noria_py.connect(f"noria://127.0.0.1:{server.address[1]}")
        db.execute("CREATE TABLE t (k INT, n INT)")
        db.execute("CREATE VIEW by_k AS SELECT k, n FROM t WHERE k = ?")
        t, view = db.table("t"), db.view("by_k")
        t.insert([(k, k * 10) for k in range(50)])
        db.wait()
        manager = server.db._partial
        graph = db.graph()
        base = next(n for n in graph if n["kind"] == "base")
        reader = next(n for n in graph if n["kind"] == "reader")
        assert reader["worker"] != base["worker"]
        k = 0
        while True:                     # (until a miss is the reader's worker's own)
            sent = manager.upqueries
            assert view.lookup(k) == [(k, k * 10)]
            k += 1
            if manager.upqueries == sent:
                break
            assert k < 20
        sent, got = manager.upqueries, []
        os.kill(base["pid"], signal.SIGSTOP)
        try:
            miss = threading.Thread(target=lambda: got.append(view.lookup(40)))
            miss.start()
            miss.join(0.5)
            assert miss.is_alive() and manager.upqueries == sent    # (its own fill)
        finally:
            os.kill(base["pid"], signal.SIGKILL)
        miss.join(60)                   # (never the worker's give-up: NORIA_TUNING)
        assert got == [[(40, 400)]]
        assert manager.upqueries > sent                  # (through the controller)
        t.insert([(41, 1), (40, 2)])
        db.wait()
        assert sorted(view.lookup(40)) == [(40, 2), (40, 400)]
        assert sorted(view.lookup(41)) == [(41, 1), (41, 410)]
        sent = manager.upqueries
        assert [view.lookup(j) for j in range(42, 46)] == [[(j, j * 10)] for j in range(42, 46)]
        assert manager.upqueries - sent < 4             # (direct again)
        assert db.recoveries()
        db.close()
    finally:
        server.stopped.set()
        server.close()
