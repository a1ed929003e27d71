"""``noria-py serve --regime coordinated`` (``runtime/cluster/epochs.py``): barriers
aligned in flight. The alignment itself (``coordinated.Aligner``, one code for both
runtimes), and a join whose two inputs' barriers come from different workers: one
worker stopped (SIGSTOP) between them, so the join holds the other input for real,
then SIGKILLed while the join is half-aligned. The SIGKILL differential tests of the
regime are test_cluster.py's ``_coordinated``."""
from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

import noria_py
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.coordinated import Aligner


def test_an_aligner_holds_an_input_whose_barrier_came_until_every_one_has():
    align: Aligner[str] = Aligner()
    assert not align.holds("j", "l", "m0")          # (no barrier yet: taken)
    assert align.arrive("j", "l", 2) is None        # aligning: r's barrier to come
    assert align.holds("j", "l", "m1") and align.holds("j", "l", "bar2")
    assert not align.holds("j", "r", "m2")          # (r: before its barrier, taken)
    assert align.arrive("j", "r", 2) == ["m1", "bar2"]   # aligned: what was held
    assert not align.arrive("j", "x", 1) and align.held == 2   # (one input: at once)
    assert not align.holds("j", "l", "m3") and not align.buffers
    align.arrive("k", "l", 2)
    align.drop("k")                                 # (a rollback: dropped)
    assert not align.holds("k", "l", "m4") and not align.arrived


def _join(rows: dict[str, list[tuple[int, int]]]) -> Counter:
    return Counter((k, x, y) for k, x in rows["a"] for k2, y in rows["b"] if k == k2)


@pytest.mark.slow
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_a_worker_lost_while_a_join_is_half_aligned(channels):
    """A join on worker A of tables ``a`` (on A) and ``b`` (on B), an epoch every 2
    writes. Phase 1: B stopped, a write to ``b`` accepted, then epoch k injected at a
    write to ``a``: the join has ``a``'s barrier and holds what ``a`` sends after it,
    while ``b``'s earlier write is still to come; B resumed, the join takes it, then
    ``b``'s barrier, and snapshots (without alignment it would have snapshotted at
    ``a``'s barrier, without ``b``'s write, which ``b``'s position in k covers).
    Phase 2: the same, and B SIGKILLed while the join is half-aligned on k + 1: every
    node rolls back to k (the join's buffer dropped), the bases resend, and the view
    has every acknowledged write once. Then epochs go on: a later loss rolls back to a
    later epoch."""
    with Cluster(workers=2, shards=1, channels=channels,
                 extra=("--regime", "coordinated", "--barrier-every", "2",
                        "--heartbeat-timeout", "10")) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE a (k INT, x INT)")
        db.execute("CREATE TABLE b (k INT, y INT)")
        db.execute("CREATE VIEW v AS SELECT a.k, x, y FROM a JOIN b ON a.k = b.k")
        graph = {n["id"]: n for n in db.graph()}
        join = next(n for n in graph.values() if n["kind"] == "join")
        bases = {graph[p]["pid"]: graph[p] for p in join["parents"]}
        assert len(bases) == 2 and join["pid"] in bases, graph   # (round robin)
        slow = next(pid for pid in bases if pid != join["pid"])
        slow_table, fast_table = ("b", "a") if bases[slow]["id"] == join["parents"][1] \
            else ("a", "b")
        rows: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}

        def write(table: str, new: list[tuple[int, int]]) -> None:
            db.table(table).insert(new)
            rows[table] += new

        write(fast_table, [(1, 10), (2, 20)])
        write(slow_table, [(1, 100)])
        write(fast_table, [(3, 30)])            # (epoch injected before it)
        db.wait()                               # (complete)
        for phase in (1, 2):
            os.kill(slow, signal.SIGSTOP)
            try:
                write(slow_table, [(2, 200 + phase), (3, 300 + phase)])  # (no epoch)
                write(fast_table, [(1, 11 + phase)])    # epoch injected before it
                time.sleep(0.5)                 # (the join has the fast barrier: holds
                                                # this write, not the slow one's)
            finally:
                os.kill(slow, signal.SIGCONT if phase == 1 else signal.SIGKILL)
            if phase == 1:
                db.wait()                       # (aligned: the epoch is complete)
                assert Counter(db.view("v").all()) == _join(rows)
        deadline = time.monotonic() + 60
        while not db.recoveries() and time.monotonic() < deadline:
            time.sleep(0.05)
        (report,) = db.recoveries()
        assert report.strategy == "coordinated" and report.checkpoint is not None, report
        assert set(report.rolled_back) == set(graph)
        write(fast_table, [(3, 99)])
        db.wait()
        assert Counter(db.view("v").all()) == _join(rows)
        # epochs go on after it (the one half-aligned was abandoned, not left in
        # flight): the next loss rolls back to a later one
        for i in range(4):
            write(slow_table if i % 2 else fast_table, [(i, 1000 + i)])
        db.wait()
        os.kill(next(n["pid"] for n in db.graph() if n["kind"] == "join"), signal.SIGKILL)
        while len(db.recoveries()) < 2 and time.monotonic() < deadline + 60:
            time.sleep(0.05)
        later = db.recoveries()[1]
        assert later.strategy == "coordinated", later
        assert later.checkpoint is not None and later.checkpoint > report.checkpoint
        db.wait()
        assert Counter(db.view("v").all()) == _join(rows)
        db.close()
