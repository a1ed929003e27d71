"""``noria-py serve --regime uncoordinated | cic`` (``runtime/cluster/lines.py``): a
worker SIGKILLed mid-load, every view checked against DuckDB, and what the recovery
line set back."""
from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import noria_py
from noria_py.batch import Batch
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.cluster.lines import Lines
from noria_py.runtime.messages import Indexed, Message
from tests.runtime.cluster.test_cluster import SEEDS, _differential_with_kill


def _lines(regime: str, seed: int, monkeypatch: pytest.MonkeyPatch, victims: int = 1) -> list:
    """The SIGKILL differential test (``_differential_with_kill``: random writes and
    SQL over two tables, views created before and during the load, 1 or 2 shards;
    odd seeds checkpoint at every message) in ``regime``, relay and direct channels;
    each lost worker's recovery a recovery line (lineage only when there is none: a
    view created while a node was down, which the report says)."""
    reports = _differential_with_kill(
        seed, monkeypatch, victims=victims, channels=("relay", "direct")[seed // 2 % 2],
        extra=("--regime", regime))
    assert {r.strategy for r in reports} <= {regime, "lineage"}, reports
    for r in reports:
        if r.strategy == "lineage":
            assert r.fallback and "recovery line" in r.fallback, r
    return reports


def test_a_cic_message_carries_its_index_on_the_wire():
    """cic's index travels as a seventh field (any other message keeps six); a bad
    one is a ProtocolError, as any malformed frame."""
    b = Batch([(1, "a")], [1])
    m = wire.decode_message(wire.encode_message(Indexed("n1", "n2", b, 3, None, 0, 7)))
    assert isinstance(m, Indexed) and (m.src, m.dst, m.time, m.index) == ("n1", "n2", 3, 7)
    assert list(m.batch.rows) == [(1, "a")]
    plain = wire.encode_message(Message("n1", "n2", b, 3))
    assert len(plain) == 6 and not isinstance(wire.decode_message(plain), Indexed)
    for bad in (-1, "7", 1.5):
        with pytest.raises(wire.ProtocolError, match="index"):
            wire.decode_message([*plain, bad])


def test_a_point_or_log_frame_is_checked():
    """What the controller takes from a worker for its lines is checked first."""
    lines = Lines(None, "uncoordinated")       # type: ignore[arg-type]  # (no runtime used)
    lines.on_point(["pt", "n2", 4, {"n1": 3}, 0, False])
    assert [(p.time, p.parent_times) for p in lines.points["n2"]] == [(4, {"n1": 3})]
    for bad in (["pt", "n2", "4", {}, 0, False], ["pt", "n2", 4, [], 0, False],
                ["pt", "n2", 4, {}, 0], ["pt", 2, 4, {}, 0, False]):
        with pytest.raises(wire.ProtocolError, match="point"):
            lines.on_point(bad)
    lines.on_log([["n2", "n3", [], 5, None, 0]])
    assert [t for t, _ in lines.logs[("n2", "n3")]] == [5]
    with pytest.raises(wire.ProtocolError, match="logged"):
        lines.on_log([["n2", "n3", [], "5", None, 0]])
    with pytest.raises(noria_py.Error, match="no recovery lines"):
        Lines(None, "coordinated")             # type: ignore[arg-type]


def test_uncoordinated_sigkill_matches_duckdb(monkeypatch):
    """Seed 0 (relay channels) in the default suite; the soak below runs the others."""
    _lines("uncoordinated", 0, monkeypatch)


@pytest.mark.slow
def test_cic_sigkill_matches_duckdb(monkeypatch):
    """Seed 2 (direct channels); the odd seeds of the soak checkpoint at every message
    (forced checkpoints too). Slow, for the default suite's time: it runs the
    uncoordinated regime's cluster test, and cic's index on the wire below."""
    _lines("cic", 2, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("victims", [1, 2])
@pytest.mark.parametrize("regime", ["uncoordinated", "cic"])
def test_lines_sigkill_soak(regime, seed, victims, monkeypatch):
    _lines(regime, seed, monkeypatch, victims)


@pytest.mark.slow
@pytest.mark.parametrize("regime", ["uncoordinated", "cic"])
def test_only_the_line_is_set_back(regime, monkeypatch):
    """A lost worker hosting the COUNT's shards: the line sets back those and the nodes
    below that took their output since their checkpoints, on the live worker too, but
    not the sharder above them; the writes acknowledged while the worker was lost are
    counted, and a subscription to the view set back ends."""
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=4")
    with Cluster(workers=2, shards=2, channels="direct", extra=("--regime", regime)) as cluster:
        db = noria_py.connect(cluster.url)
        assert db.regime == regime
        db.execute("CREATE TABLE t (a INT, b INT)")
        db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
        want = Counter()

        def write(n: int) -> None:
            rows = [(i % 5, i) for i in range(n)]
            db.table("t").insert(rows)
            want.update(a for a, _ in rows)

        for _ in range(10):
            write(10)
        db.wait()
        graph = {n["id"]: n for n in db.graph()}
        agg = next(n for n in graph.values() if n["kind"] == "aggregate")
        sharder = next(n for n in graph.values() if n["kind"] == "sharder")
        assert sharder["pid"] != agg["pid"]          # (neighbours apart: placement)
        sub = db.subscribe("v")
        next(sub)
        os.kill(agg["pid"], signal.SIGKILL)
        for _ in range(3):
            write(7)                                 # acknowledged while it is lost
        deadline = time.monotonic() + 30
        while not db.recoveries() and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recover(agg["id"])
        assert report.strategy == regime and report.automatic, report
        assert agg["id"] in report.rolled_back and report.checkpoint is not None
        assert sharder["id"] not in report.rolled_back
        live = {n for n, g in graph.items() if g["pid"] != agg["pid"]}
        assert live & set(report.rolled_back), report      # (the union below, set back)
        assert report.replayed_messages > 0
        write(5)
        db.wait()
        assert sorted(db.view("v").all()) == sorted(want.items())
        reader = next(n for n in graph if graph[n]["kind"] == "reader")
        if reader in report.rolled_back:
            with pytest.raises(noria_py.SubscriptionError):
                for _ in range(100):
                    next(sub)
        db.close()


@pytest.mark.slow
def test_cic_every_checkpoint_is_on_a_consistent_line(monkeypatch):
    """BCS's rule in a cluster (the controller in this process, its workers not): for
    every index ``i`` of a checkpoint, the first checkpoint of each node at ``i`` or
    above (a node with none: its state now) is a consistent line, so none is useless.
    The sharder takes every vote, each COUNT shard half: the sharder's indices run
    ahead, and only the forced checkpoints keep its children's lines consistent."""
    from noria_py.runtime.cluster.server import Server
    from noria_py.runtime.uncoordinated import orphan
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=2")
    server = Server(port=0, workers=2, shards=2, channels="direct", regime="cic")
    try:
        db = server.db
        db.execute("CREATE TABLE vote (a INT, u INT)")
        db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote GROUP BY a")
        for i in range(200):            # (one key a write: it goes to one shard)
            db.table("vote").insert([(i % 7, i)])
        db.wait()
        rt = server.runtime
        lines = rt.lines
        assert lines is not None and lines.forced > 0
        order = rt.graph.topological()
        parents = {n: rt.graph[n].parents for n in order}
        sources = {b: len(h) for b, h in rt.durable.items()}
        current = lines._current(set())
        with lines.lock:
            points = {n: list(p) for n, p in lines.points.items()}
        indices = sorted({p.index for ps in points.values() for p in ps})
        assert len(indices) > 3
        for i in indices:
            line = {n: next(p for p in points[n] if p.index >= i) for n in order
                    if any(p.index >= i for p in points.get(n, ()))}
            assert orphan(order, parents, line, sources, current) is None, (i, line)
        assert sorted(db.view("c").all()) == [(a, 29 if a < 4 else 28) for a in range(7)]
    finally:
        server.stopped.set()
        server.close()


def counted_writes(server: Any) -> tuple[Callable[[int], None], Counter[int]]:
    """Table ``t (a, b)`` and view ``v`` (its COUNT by ``a``) on an in-process
    ``Server``'s database; returns a writer of ``n`` rows ``(i % 5, i)`` and the counts
    the view should hold. Each write is under the server's lock, as the server takes
    every client's write: a recovery holds it, so no write lands inside one (``db``
    itself takes none)."""
    db = server.db
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    want: Counter[int] = Counter()

    def write(n: int) -> None:
        rows = [(i % 5, i) for i in range(n)]
        with server.lock:
            db.table("t").insert(rows)
        want.update(a for a, _ in rows)
    return write, want


@pytest.mark.slow
@pytest.mark.parametrize("channels", ["direct", "relay"])
def test_without_a_line_the_lost_nodes_are_rebuilt_by_lineage_and_it_says_so(channels, monkeypatch):
    """No line covering the graph (as after a view created while a node was down): the
    lost worker's nodes are rebuilt by lineage, the report's ``fallback`` says why, the
    views are right; every node then checkpoints at once, so the next loss has a line."""
    from noria_py.runtime.cluster.server import Server
    monkeypatch.setenv("NORIA_TUNING", "CHECKPOINT_EVERY=3")
    server = Server(port=0, workers=2, shards=2, channels=channels, regime="uncoordinated")
    try:
        db = server.db
        write, want = counted_writes(server)
        for _ in range(10):
            write(10)
        db.wait()
        lines = server.runtime.lines
        assert lines is not None and lines.covered
        lines.invalidate()
        agg = next(n for n in db.graph() if n["kind"] == "aggregate")
        db.fail(agg["id"])
        write(7)
        report = db.recover(agg["id"])
        assert report.strategy == "lineage", report
        assert report.fallback and "no uncoordinated recovery line" in report.fallback
        db.wait()
        assert sorted(db.view("v").all()) == sorted(want.items())
        assert lines.covered                       # (every node checkpointed after)
        write(5)
        agg = next(n for n in db.graph() if n["kind"] == "aggregate")
        db.fail(agg["id"])
        write(3)
        deadline = time.monotonic() + 30
        while len(db.recoveries()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        report = db.recover(agg["id"])
        assert report.strategy == "uncoordinated" and report.fallback is None, report
        db.wait()
        assert sorted(db.view("v").all()) == sorted(want.items())
    finally:
        server.stopped.set()
        server.close()
