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

import duckdb
import pytest

import noria_py
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.cluster.partial import chain
from noria_py.runtime.cluster.reads import rows_found
from tests.differential.helpers import normalize

from .test_cluster import _differential_with_kill

DDL = ["CREATE TABLE t1 (a INT, b INT, c TEXT)", "CREATE TABLE t2 (a INT, d INT)"]
#: name -> SQL with one ? (the same text in DuckDB); each reader's chain ends at a base
#: (v_rows, v_filter, v_text), an aggregate (v_count, v_max), a join (v_join, v_left)
#: or a TopK (v_top)
VIEWS = {
    "v_rows": "SELECT a, b, c FROM t1 WHERE a = ?",
    "v_filter": "SELECT b, c FROM t1 WHERE a = ? AND b > 2",
    "v_text": "SELECT a, b FROM t1 WHERE c = ?",
    "v_count": "SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t1 WHERE a = ? GROUP BY a",
    "v_max": "SELECT a, MAX(b) AS m FROM t1 WHERE a = ? GROUP BY a",
    "v_join": "SELECT t1.a, t1.b, t2.d FROM t1 JOIN t2 ON t1.a = t2.a WHERE t1.a = ?",
    "v_left": "SELECT t2.a, t2.d, t1.b FROM t2 LEFT JOIN t1 ON t2.a = t1.a WHERE t2.a = ?",
    "v_top": "SELECT a, b FROM t1 WHERE a = ? ORDER BY b DESC LIMIT 2",
}
#: a view that stays full (its key cannot be followed to one source): read beside
FULL = {"v_distinct": "SELECT DISTINCT a, b FROM t1 WHERE a = ?"}
KEYS = list(range(12))
TEXTS = ["x", "y", "zz", "w"]


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


def _run(seed: int, shards: int, channels: str | None, limit: int | None = None,
         kill: bool = False, ops: int = 60) -> None:
    rng = random.Random(seed)
    extra = ("--partial",) + (("--memory-limit", str(limit)) if limit is not None else ())
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
                partial = {n["view"]: n["partial"] for n in db.graph() if n["kind"] == "reader"}
                assert partial == {**dict.fromkeys(VIEWS, True), **dict.fromkeys(FULL, False)}
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
        got = normalize(db.view("v_rows").all())
        if got != normalize(con.execute("SELECT a, b, c FROM t1").fetchall()):
            wrong.append(("v_rows", "all()", got))
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
    """A limit of about three keys' rows a worker: keys are evicted and filled again."""
    _run(seed, shards=2, channels="direct", limit=4000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_partial_cluster_with_a_worker_killed(seed):
    """A worker SIGKILLed mid-load: its partial readers come back all holes on the
    spare, upqueries in flight are sent again once their path is up, and every read
    after ``wait()`` is still DuckDB's."""
    _run(seed, shards=1 + seed % 2, channels="direct" if seed < 3 else "relay", kill=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_the_cluster_differential_with_partial_readers(seed, monkeypatch):
    """The cluster's own SIGKILL differential test (full views beside keyed ones)
    served with --partial."""
    _differential_with_kill(seed, monkeypatch, extra=("--partial",))


def test_chains_of_partial_readers():
    """Which readers a cluster makes partial: those whose key leads up through filters,
    projections and sharders to one base, aggregate, join or TopK on the key."""
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
                if name in VIEWS:
                    assert found is not None, (shards, name)
                    path, cols = found
                    assert path[-1] == r and db.graph_[path[0]].kind in (
                        "base", "aggregate", "extremum", "join", "topk")
                else:
                    assert found is None, (shards, name)
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

def _worker_with(sqls: list[str]):
    """A direct-channels worker (w1) hosting every node of ``sqls`` (CREATE TABLE and
    CREATE VIEW), its controller the returned connection's other end, and the ids of
    the nodes each view made."""
    import socket

    from noria_py.graph import Graph
    from noria_py.planner import Planner
    from noria_py.runtime.cluster import wire
    from noria_py.runtime.cluster.worker import Worker
    from sql_frontend import plan as lp
    from sql_frontend import wire as plan_wire

    ours, theirs = socket.socketpair()
    w = Worker(wire.Connection(ours), "w1", 1, clocks=False, channels="direct")
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


def test_a_fill_at_an_operator_is_computed_from_its_state_in_order_with_its_output():
    from noria_py.batch import Batch

    w, ctl, views = _worker_with([
        "CREATE TABLE t (a INT, b INT)",
        "CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a"])
    (reader,) = views["c"]
    agg = w.graph[reader].parents[0]
    base = w.graph[agg].parents[0]
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


def test_a_subscription_under_a_memory_limit_is_refused_by_the_controller():
    from noria_py.graph import Graph
    from noria_py.runtime.cluster.partial import ClusterPartial

    manager = ClusterPartial(Graph(), None, 1 << 20)    # type: ignore[arg-type]
    with pytest.raises(noria_py.NotSupportedError, match="memory-limit"):
        manager.pin(None, 1)                             # type: ignore[arg-type]
    ClusterPartial(Graph(), None, None).pin(None, 1)     # type: ignore[arg-type]
