"""``noria-py serve --regime causal`` (``runtime/cluster/causal.py``): determinants on the
wire, a worker SIGKILLed mid-load with every view checked against DuckDB, only the lost
nodes brought back, and the lineage fallback when a lost node cannot be replayed."""
from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import pytest

import noria_py
from noria_py import tuning
from noria_py.batch import Batch
from noria_py.graph import Graph, Node
from noria_py.recovery.causal import plan_operator
from noria_py.runtime.causal import Determinants, DetLog, Mark, decode, encode
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.causal import Gathered
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.messages import CausalMessage, Indexed, Message
from noria_tools.causalgc import SCHEMA
from tests.runtime.cluster.test_cluster import SEEDS, _differential_with_kill
from tests.runtime.cluster.test_lines import counted_writes


def _causal(seed: int, monkeypatch: pytest.MonkeyPatch, victims: int = 1,
            more: tuple[str, ...] = ()) -> list:
    """The SIGKILL differential test (``_differential_with_kill``: random writes and SQL
    over two tables, views created before and during the load, 1 or 2 shards; odd seeds
    mark and checkpoint at every message) in the causal regime, relay and direct
    channels; each lost worker's recovery causal, lineage only when a lost node cannot
    be replayed, which the report says. ``more``: more options of ``serve``."""
    reports = _differential_with_kill(
        seed, monkeypatch, victims=victims, channels=("relay", "direct")[seed // 2 % 2],
        extra=("--regime", "causal", *more))
    assert {r.strategy for r in reports} <= {"causal", "lineage"}, reports
    for r in reports:
        if r.strategy == "lineage":
            assert r.fallback and r.fallback.startswith("no causal recovery"), r
    return reports


def test_determinants_travel_on_the_wire():
    """A causal message's determinants are a seventh field, bytes (never pickled); an
    integer there is cic's index; any other message keeps six fields."""
    dets = encode([(3, 0, [0, 1], [5, 2])])
    b = Batch([(1, "a")], [1])
    m = wire.decode_message(wire.encode_message(CausalMessage("n1", "n2", b, 3, dets)))
    assert isinstance(m, CausalMessage) and (m.src, m.dst, m.time) == ("n1", "n2", 3)
    assert decode(m.dets) == [(3, 0, [0, 1], [5, 2])] and list(m.batch.rows) == [(1, "a")]
    assert isinstance(wire.decode_message(wire.encode_message(
        Indexed("n1", "n2", b, 3, None, 0, 7))), Indexed)
    plain = wire.encode_message(Message("n1", "n2", b, 3))
    assert len(plain) == 6 and type(wire.decode_message(plain)) is Message


def _chain() -> Graph:
    """base -> a -> b -> reader (a's determinants held by b and the reader; only the
    shape matters here, never the operators)."""
    g = Graph()
    for nid, parents in (("s", []), ("a", ["s"]), ("b", ["a"]), ("r", ["b"])):
        g.add(Node(nid, None, parents=list(parents)))  # type: ignore[arg-type]
    return g


def test_a_lost_nodes_determinants_must_cover_what_live_nodes_took():
    """The cluster's plan reads what it gathered through the embedded regime's own
    ``plan_operator``: node ``a`` restarts from its mark at 2 (the newest at or below
    what its live child took, 6); its determinants for 3..6 must come from a live
    holder. With ``b`` holding them, the plan pins them in order; with them held only by
    a lost node, it refuses (the caller falls back on lineage)."""
    g = _chain()
    det = Determinants()
    det.plan(g)
    marks = {"a": [Mark(0, {}), Mark(2, {"s": 2}), Mark(7, {"s": 7})]}
    full = DetLog(0)
    full.ports, full.times = [0] * 6, [1, 2, 3, 4, 5, 6]
    view = Gathered(det, marks, {"a"}, {"b": {"a": 6}}, {"b": {"a": full}})
    plan = plan_operator(g, view, "a", {})
    assert plan.mark.time == 2 and plan.pinned == [(0, 3), (0, 4), (0, 5), (0, 6)]
    short = DetLog(0)
    short.ports, short.times = [0] * 4, [1, 2, 3, 4]
    view = Gathered(det, marks, {"a", "r"}, {"b": {"a": 6}}, {"b": {"a": short}})
    with pytest.raises(noria_py.RecoveryError, match=r"determinants of a for its times 5..6"):
        plan_operator(g, view, "a", {})


def test_causal_sigkill_matches_duckdb(monkeypatch):
    """Seed 0 (relay channels) in the default suite; the soak below runs the others."""
    _causal(0, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("victims", [1, 2])
def test_causal_sigkill_soak(seed, victims, monkeypatch):
    _causal(seed, monkeypatch, victims)


@pytest.mark.slow
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_only_the_lost_node_comes_back_in_the_determinants_order(channels, monkeypatch):
    """The worker hosting a UNION ALL of two tables is lost, its parents and reader are
    not. Writes to both tables land while it is lost (the recovery held back 3 s):
    the union comes back from a mark older than what the reader took and must take its
    inputs in the order its determinants (held by the reader) give up to there, then the
    new writes; in FIFO order per table it would put other rows under the times the
    reader has, and the view would be wrong (a plant of FIFO order fails it, both
channels, 4 runs of 4, once the writes are sure to come before the recovery). Only
the lost nodes are ``rolled_back``. Slow, for the default suite's time."""
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=16,RECOVERY_GATHER=3.0")
    with Cluster(workers=2, shards=1, channels=channels, extra=("--regime", "causal")) as cluster:
        db = noria_py.connect(cluster.url)
        assert db.regime == "causal"
        db.execute("CREATE TABLE t1 (a INT, b INT)")
        db.execute("CREATE TABLE t2 (a INT, b INT)")
        db.execute("CREATE VIEW u AS SELECT a FROM t2 UNION ALL SELECT a FROM t1")
        want: Counter = Counter()

        def write(i: int) -> None:
            table = ("t1", "t2")[i % 2 if i % 5 else 0]
            db.table(table).insert([(i, i)])
            want[(i,)] += 1

        for i in range(40):
            write(i)
            db.wait()                         # (the union takes the tables in turn)
        graph = {n["id"]: n for n in db.graph()}
        union = next(n for n in graph.values() if n["kind"] == "union")
        lost = {n for n, g in graph.items() if g["pid"] == union["pid"]}
        os.kill(union["pid"], signal.SIGKILL)
        for i in range(40, 46):
            write(i)                          # acknowledged while it is lost
        # (before the recovery, which holds the database's lock throughout: these writes
        # are in the logs and histories its union replays)
        assert not db.recoveries()
        deadline = time.monotonic() + 30
        while not db.recoveries() and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recover(union["id"])
        assert report.strategy == "causal" and report.automatic, report
        assert report.fallback is None and set(report.rolled_back) == lost, report
        assert report.replayed_messages > 6, report
        write(46)
        db.wait()
        assert Counter(db.view("u").all()) == want
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_a_lost_node_without_a_mark_is_rebuilt_by_lineage_and_it_says_so(channels, monkeypatch):
    """A lost node the controller has no mark of (as after a restart that kept the
    workers' nodes) cannot be replayed: the lost worker's nodes are rebuilt by lineage,
    the report's ``fallback`` says why, the views are right; the rebuilt nodes mark as
    they settle, so the next loss is causal's again."""
    from noria_py.runtime.cluster.server import Server
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=3")
    server = Server(port=0, workers=2, shards=2, channels=channels, regime="causal")
    try:
        db = server.db
        write, want = counted_writes(server)
        for _ in range(10):
            write(10)
        db.wait()
        causal = server.runtime.causal
        assert causal is not None and causal.taken > 0
        agg = next(n for n in db.graph() if n["kind"] == "aggregate")
        with causal.lock:
            causal.marks.pop(agg["id"])
        db.fail(agg["id"])
        write(7)
        report = db.recover(agg["id"])
        assert report.strategy == "lineage", report
        assert report.fallback and "no causal recovery" in report.fallback \
            and f"node {agg['id']} has no mark" in report.fallback, report
        db.wait()
        assert sorted(db.view("v").all()) == sorted(want.items())
        write(5)
        agg = next(n for n in db.graph() if n["kind"] == "aggregate")
        db.fail(agg["id"])
        write(3)
        deadline = time.monotonic() + 30
        while len(db.recoveries()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recover(agg["id"])
        assert report.strategy == "causal" and report.fallback is None, report
        db.wait()
        assert sorted(db.view("v").all()) == sorted(want.items())
    finally:
        server.stopped.set()
        server.close()


def _needs(server) -> dict[str, int]:
    """What the garbage collection holds (the controller's marks, checkpoint deltas and
    histories; every worker's in-flight logs and determinants), and a check that what a
    restart from each node's stable mark needs is all still there: its checkpoint, its
    parents' logs and histories after its parent-times, its determinants after it
    (wherever held). Returns the largest of each kind held."""
    rt = server.runtime
    causal = rt.causal
    with causal.lock:
        marks = {n: list(ms) for n, ms in causal.marks.items()}
    sizes: dict = {}
    with rt.lock:
        futs = [rt.request(w, "causal_sizes") for w in rt.workers.values() if w.alive]
    for fut in futs:
        sizes.update(fut.result(60))
    graph = rt.graph
    most = {"marks": 0, "deltas": 0, "history": 0, "inflight": 0, "determinants": 0}
    for n, ms in marks.items():
        most["marks"] = max(most["marks"], len(ms))
        stable = ms[0]
        with rt.store_lock:
            rows, deltas = rt.store.size(n)
            ck = rt.store.latest(n, stable.time)
        if rt.store.has(n):
            most["deltas"] = max(most["deltas"], deltas)
            assert ck is not None and ck.time == stable.time, (n, stable, ck)
        for p in dict.fromkeys(graph[n].parents):
            after = stable.parent_times.get(p, 0)
            if p in rt.durable:
                assert rt.durable[p].since(after)[0] == after, (p, n, after)
            elif p in sizes:
                log_from, _ = sizes[p][0][n]
                assert log_from <= after, (p, n, log_from, after)
    for b, h in rt.durable.items():
        most["history"] = max(most["history"], len(h.batches))
    for n, (inflight, dets) in sizes.items():
        for _, (_, held) in inflight.items():
            most["inflight"] = max(most["inflight"], held)
        for o, (start, count) in dets.items():
            most["determinants"] = max(most["determinants"], count)
            if marks.get(o):
                assert start <= marks[o][0].time, (n, o, start, marks[o][0])
    return most


def schema_writer(db: Any) -> tuple[Callable[[int], None], Counter, Counter]:
    """SCHEMA created in ``db``; ``write(i)``, the ``i``-th one-row write of a long run
    (two in three to ``t``, one to ``u``), and the rows it makes views ``v`` and ``w``
    hold (filled in as it writes)."""
    for sql in SCHEMA:
        db.execute(sql)
    want_v: Counter = Counter()
    want_w: Counter = Counter()

    def write(i: int) -> None:
        table = ("t", "u")[i % 3 == 0]
        row = (i % 7, i % 5)
        db.table(table).insert([row])
        if table == "t":
            want_v[row[0]] += 1
        if table == "u" or row[1] > 2:
            want_w[(row[0],)] += 1
    return write, want_v, want_w


@pytest.mark.parametrize("writes", [4000, pytest.param(20000, marks=pytest.mark.slow)])
def test_garbage_collection_keeps_the_logs_flat_and_what_recovery_needs(writes, monkeypatch):
    """A long run (4,000 writes, 20,000 in the slow suite; a mark every 4 messages) in
    a cluster: the controller's
    marks, checkpoint deltas and histories, and the workers' in-flight logs and
    determinants, stay under a bound far below the run's length (without the collection
    each grows with it); at two points, whatever a restart from each node's stable mark
    needs is still there (``_needs``); then the aggregate's worker is SIGKILLed and its
    nodes come back causally, the views right. Plants caught (each by the asserts in
    ``_needs``): an in-flight log trimmed one past the child's level, a held
    determinant dropped one past the stable mark, the store folded to the newest mark."""
    from noria_py.runtime.cluster.server import Server
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=4")
    # (the SIGKILL is seen by its dropped connection: heartbeats that the writes of this
    # process cannot starve into a false loss on a loaded machine)
    server = Server(port=0, workers=2, shards=1, channels="relay", regime="causal",
                    heartbeat_timeout=30)
    try:
        db = server.db
        write, want_v, want_w = schema_writer(db)
        bound = 120
        for i in range(writes):
            write(i)
            if i + 1 in (writes // 2, writes):
                db.wait()
                most = _needs(server)
                assert max(most.values()) < bound, most
        causal = server.runtime.causal
        assert causal.collections > 20
        agg = next(n for n in db.graph() if n["kind"] == "aggregate")
        db.fail(agg["id"])
        for i in range(writes, writes + 20):
            write(i)
        deadline = time.monotonic() + 30
        while not db.recoveries() and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recover(agg["id"])
        assert report.strategy == "causal" and report.fallback is None, report
        # (right after the restore, a live child's stable mark may still be older than
        # where its restored parent's log now starts: its newer mark, taken as the parent
        # restarted, becomes stable at a collection after)
        for i in range(writes + 20, writes + 420):
            write(i)
        db.wait()
        assert dict(db.view("v").all()) == dict(want_v)
        assert Counter(db.view("w").all()) == want_w
        assert max(_needs(server).values()) < bound
    finally:
        server.stopped.set()
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("depth", [1, 2])
def test_causal_sigkill_soak_with_a_determinant_depth(seed, depth, monkeypatch):
    """Two of three workers killed at once (a node and its child lost together, often)
    with ``--determinant-depth``: each recovery causal, or, where the lost determinants
    refuse it (depth 1, mostly), lineage, saying why; every view right either way."""
    _causal(seed, monkeypatch, 2, ("--determinant-depth", str(depth)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("victims", [1, 2])
def test_causal_sigkill_soak_with_standbys(seed, victims, monkeypatch):
    """``--standbys``: the lost stateful nodes taken over by their standbys where those
    are as of the recovery's marks (and on a live worker), every view right."""
    _causal(seed, monkeypatch, victims, ("--standbys",))


@contextmanager
def _join_server(monkeypatch: pytest.MonkeyPatch, **options):
    """An in-process ``serve --regime causal`` (3 workers, relay channels, a mark every
    16 messages, the recovery gathering for 0.5 s: two workers killed together are
    one recovery) with two tables into a join under a COUNT; 203 writes to each table,
    quiet. Yields (server, the graph by kind, a writer of n more rows to each table,
    the view's rows as they must be); closes the server after."""
    from noria_py.runtime.cluster.server import Server
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=16,RECOVERY_GATHER=0.5")
    server = Server(port=0, workers=3, shards=1, channels="relay", regime="causal",
                    **options)
    db = server.db
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE TABLE u (a INT, c INT)")
    db.execute("CREATE VIEW v AS SELECT t.a, COUNT(*) AS n FROM t JOIN u ON t.a = u.a "
               "GROUP BY t.a")
    written: dict[str, list] = {"t": [], "u": []}

    def write(n: int) -> None:
        for i in range(n):
            for name in ("t", "u"):
                row = (len(written[name]) * 7 % 5, i)
                db.table(name).insert([row])
                written[name].append(row)

    def want() -> list:
        per_a = Counter(a for a, _ in written["u"])
        return sorted((a, n * per_a[a]) for a, n in Counter(a for a, _ in written["t"]).items()
                      if per_a[a])
    try:
        write(203)
        db.wait()
        yield server, {n["kind"]: n for n in db.graph()}, write, want
    finally:
        server.stopped.set()
        server.close()


def _kill_and_wait(db, pids: set[int]) -> list:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not db.recoveries() and time.monotonic() < deadline:
        time.sleep(0.05)
    return db.recoveries()


@pytest.mark.slow
def test_a_join_lost_with_its_only_child_is_refused_at_depth_one(monkeypatch):
    """``serve --determinant-depth 1``: the workers of a join and of its only child (the
    COUNT) are SIGKILLed together, the reader's is not. The join restarts from a mark
    (one every 16 messages) below what the COUNT's own mark took of it: its times after
    the mark must replay in their first order, and at depth 1 only the COUNT held
    them. The causal plan refuses (the ``RecoveryError`` it raised is the report's
    ``fallback``) and lineage rebuilds, never a guessed order; the views right. (Slow,
    for the default suite's time; depth 2 is the next test.)"""
    with _join_server(monkeypatch, determinant_depth=1) as (server, kinds, write, want):
        db = server.db
        join, agg, reader = kinds["join"], kinds["aggregate"], kinds["reader"]
        assert join["pid"] != agg["pid"] and reader["pid"] not in (join["pid"], agg["pid"])
        (report,) = _kill_and_wait(db, {join["pid"], agg["pid"]})
        assert report.strategy == "lineage", report
        assert report.fallback and "determinants of " + join["id"] in report.fallback \
            and "were lost" in report.fallback and "depth 1" in report.fallback, report
        assert sorted(db.view("v").all()) == want()
        write(20)
        db.wait()
        assert sorted(db.view("v").all()) == want()


def test_depth_two_recovers_a_join_lost_with_its_child_and_standbys_take_over(monkeypatch):
    """``serve --determinant-depth 2 --standbys``. (1) The workers of a join and of its
    only child (the COUNT) are SIGKILLed together, the reader's is not: the join
    restarts from a mark below what the COUNT's mark took of it, and its times after
    the mark replay in their first order from the determinants the reader, two edges
    down, holds (at depth 1 this is refused: the test before). The COUNT, restarting
    from its newest checkpoint, is taken over by its standby on another worker (path
    ``standby``; the join's older mark comes from the controller's store). (2) A new
    standby is made for each node taken over, on a worker other than its own, and kept
    up: the COUNT's worker SIGKILLed next, its standby takes it over again. The views
    right throughout. Plants caught: determinants kept one hop short (refused in 1);
    the standby not updated after a checkpoint (path ``checkpoint``: not as of the
    mark); updated in its time but not its state (the view wrong)."""
    monkeypatch.setattr(tuning, "STANDBY_DELAY", 0.0)       # (this process's controller)
    with _join_server(monkeypatch, determinant_depth=2, standbys=True) as (server, kinds,
                                                                           write, want):
        db = server.db
        rt = server.runtime
        causal = rt.causal
        join, agg, reader = kinds["join"], kinds["aggregate"], kinds["reader"]
        assert join["pid"] != agg["pid"] and reader["pid"] not in (join["pid"], agg["pid"])
        assert causal.det.depth == 2
        a = agg["id"]

        def standby_kept() -> str:
            causal.wait_standbys()      # (made on a thread of its own)
            with rt.lock:
                host, live = rt.placement[a], {w.name for w in rt.active if w.alive}
            with rt.store_lock:
                standby = causal.standby_of[a]
                assert standby != host and standby in live and a in causal.in_sync
                assert causal.standby_time[a] == causal.marks[a][-1].time
            return standby

        standby = standby_kept()
        (report,) = _kill_and_wait(db, {join["pid"], agg["pid"]})
        assert report.strategy == "causal" and report.fallback is None, report
        assert {join["id"], a} <= set(report.rolled_back) and report.replayed_messages, report
        assert report.paths[a] == "standby", report
        with rt.lock:
            assert rt.placement[a] == standby
        assert sorted(db.view("v").all()) == want()
        write(40)
        db.wait()
        assert sorted(db.view("v").all()) == want()
        standby = standby_kept()
        host = next(n["pid"] for n in db.graph() if n["id"] == a)
        os.kill(host, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len(db.recoveries()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recoveries()[-1]
        assert report.strategy == "causal" and report.paths[a] == "standby", report
        write(20)
        db.wait()
        assert sorted(db.view("v").all()) == want()


def test_serve_takes_a_determinant_depth_for_the_causal_regime_only():
    from noria_py.runtime.cluster.server import Server
    with pytest.raises(noria_py.ArgumentError, match="causal regime"):
        Server(port=0, workers=1, spawn=False, determinant_depth=2)
    with pytest.raises(noria_py.ArgumentError, match="causal regime"):
        Server(port=0, workers=1, spawn=False, regime="lineage", standbys=True)
    with pytest.raises(noria_py.ArgumentError, match="determinant_depth"):
        Server(port=0, workers=1, spawn=False, regime="causal", determinant_depth=0)
