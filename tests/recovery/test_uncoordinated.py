"""The ``uncoordinated`` and ``cic`` regimes (issue 19) under the randomized
differential tests the coordinated regime passes (``test_coordinated.py``: random
writes, some left in flight, 1-4 nodes failed at once, writes while they are down,
``db.recover`` in any order, two rounds, 1 and 4 shards, every view against DuckDB),
with checkpoints as often as can be (every message), often (every 3) and as shipped
(cic's periodic ones every 5 writes, or as shipped).

And the pieces one by one: a failed node's orphaned children roll back (the domino
runs downstream, no further), a sibling branch is left alone, every checkpoint of cic
lies on a consistent line (the forced checkpoints' job), logs and checkpoints stay
bounded, a line with an orphan is refused, a view created while a node is down is
rebuilt."""
from __future__ import annotations

import random

import pytest

import noria_py
from noria_py import tuning
from noria_py.runtime import uncoordinated
from noria_py.runtime.uncoordinated import CICRuntime, Indexed, UncoordinatedRuntime
from tests.recovery import test_coordinated as coordinated_tests
from tests.recovery.test_coordinated import regime_failure_run

REGIMES = ("uncoordinated", "cic")
#: messages between a node's checkpoints, by seed: every one, every 3, as shipped
EVERY = (1, 3, tuning.CHECKPOINT_EVERY)


@pytest.fixture
def every(monkeypatch):
    """Set how many messages a node takes between its checkpoints."""
    def set_every(n: int) -> None:
        monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", n)
    return set_every


SEEDS = [(s, shards, order) for s in range(4) for shards, order in
         [(1, "random"), (4, "topological"), (4, "all")]]
SLOW = [(s, shards, order) for s in range(4, 100) for shards, order in
        [(1, "random"), (4, "random"), (1, "topological"), (4, "all")]]


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("seed,shards,order", SEEDS + [pytest.param(*c, marks=pytest.mark.slow)
                                                       for c in SLOW])
def test_concurrent_failures_match_duckdb(regime, seed, shards, order, every, monkeypatch):
    every(EVERY[seed % 3])
    if seed % 2:        # cic's periodic checkpoints every 5 writes (as shipped: none here)
        monkeypatch.setattr(uncoordinated, "PERIOD", 5)
    failed, bad, reports = regime_failure_run(regime, seed, shards, order, rounds=2)
    assert not bad, f"{regime}: failed {failed}: wrong views {bad}"
    assert {r.strategy for r in reports} == {regime}


CONFIGS = [(1, None), (4, None), (1, 5), (4, 9)]


@pytest.mark.slow
@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("shards,seed", CONFIGS, ids=[f"shards{s}-seed{d}" for s, d in CONFIGS])
def test_recovery_matches_duckdb(regime, shards, seed, every):
    """``test_coordinated.test_recovery_matches_duckdb`` (a node of every kind, alone
    or with a parent or a child) in these regimes, checkpoints every 2 messages."""
    every(2)
    coordinated_tests.test_recovery_matches_duckdb(shards, seed, regime)


# ---------------------------------------------------------------- the pieces

def _two_branches(regime, seed: int | None = None, shards: int = 1):
    """A table under two views: a COUNT (a branch) and a filter (another)."""
    db = noria_py.connect(regime=regime, seed=seed, shards=shards)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    db.execute("CREATE VIEW w AS SELECT a, b FROM t WHERE b > 2")
    return db


def _node(db, kind: str) -> str:
    return next(n["id"] for n in db.graph() if n["kind"] == kind)


def _check(db) -> None:
    db.wait()
    assert sorted(db.view("v").all()) == sorted(
        db.execute("SELECT a, COUNT(*) FROM t GROUP BY a").fetchall())
    assert sorted(db.view("w").all()) == sorted(
        db.execute("SELECT a, b FROM t WHERE b > 2").fetchall())


def test_orphans_roll_back_downstream_and_a_sibling_branch_stays(every):
    """The COUNT checkpoints every 4 messages, its reader after every one: failed after
    two writes its checkpoint does not hold, the COUNT goes back to its checkpoint, and
    its reader, which took the orphaned output, to its newest checkpoint that depends
    on no more of the COUNT than that (older than its newest: the domino, one step);
    the filter's branch is not touched. What the COUNT's parent sent after the COUNT's
    checkpoint is resent, nothing else (the COUNT sends its output anew)."""
    db = _two_branches("uncoordinated")
    rt = db.runtime
    assert isinstance(rt, UncoordinatedRuntime)
    agg = _node(db, "aggregate")
    reader = db.graph_[agg].children[0]
    parent = db.graph_[agg].parents[0]
    every(4)
    for i in range(6):
        db.table("t").insert([(i % 2, i)])
        rt.take(rt.domains[reader])
    agg_pt = rt.points[agg][-1]
    assert (agg_pt.time, rt.domains[agg].time) == (4, 6)   # 2 messages since its checkpoint
    assert rt.points[reader][-1].parent_times[agg] == 6    # the reader depends on them
    db.fail(agg)
    report = db.recover(agg)
    assert report.checkpoint == agg_pt.time
    assert report.rolled_back == [agg, reader]             # not the filter's branch
    assert rt.points[reader][-1].parent_times[agg] == 4
    # what the COUNT sent after its checkpoint is forgotten: it sends it anew
    assert all(m.time <= 4 for m in rt.logs[(agg, reader)])
    assert report.replayed_messages == rt.domains[parent].time - agg_pt.parent_times[parent] == 2
    _check(db)
    db.table("t").insert([(5, 5)])
    _check(db)


@pytest.mark.parametrize("regime", REGIMES)
def test_a_failed_leaf_rolls_back_alone(regime, every):
    every(3)
    db = _two_branches(regime)
    for i in range(10):
        db.table("t").insert([(i % 3, i)])
    reader = next(n["id"] for n in db.graph() if n["kind"] == "reader" and n["view"] == "w")
    db.fail(reader)
    db.table("t").insert([(1, 7)])
    report = db.recover(reader)
    assert report.rolled_back == [reader]
    _check(db)


#: a join of two operators (a filter of t, a COUNT of u) under a COUNT: nodes with
#: several parents whose every dependency matters
CHAIN = ("SELECT t.a, COUNT(*) AS n FROM t JOIN (SELECT a, COUNT(*) AS k FROM u GROUP BY a) "
         "AS s ON t.a = s.a WHERE t.b > 0 GROUP BY t.a")


def _chain_db(regime: str, seed: int | None):
    db = noria_py.connect(regime=regime, seed=seed)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE TABLE u (a INT, c INT)")
    db.execute(f"CREATE VIEW v AS {CHAIN}")
    return db


def _write(db, rng: random.Random, n: int) -> None:
    for i in range(n):
        db.table(rng.choice("tu")).insert([(rng.randrange(4), rng.randrange(3))])


def _want(db) -> list[tuple]:
    return sorted(db.execute(CHAIN).fetchall())


@pytest.mark.parametrize("seed", range(6))
def test_cic_every_checkpoint_is_on_a_consistent_line(seed, every):
    """The index rule: for every index, the first checkpoint of each node at or above
    it (a node without one: its current state) is a consistent line; messages carry
    their sender's index; checkpoints are forced."""
    rng = random.Random(seed)
    every(rng.choice([1, 2, 5]))
    db = _chain_db("cic", seed)
    rt = db.runtime
    assert isinstance(rt, CICRuntime)
    _write(db, rng, 60)
    assert rt.forced > 0
    assert rt.pending() == 0 or all(isinstance(m, Indexed) for q in rt.edges.values() for m in q)
    assert all(isinstance(m, Indexed) for log in rt.logs.values() for m in log)
    ops = [n for n in rt.order() if db.graph_[n].parents]
    indices = {q.index for n in ops for q in rt.points[n]}
    for i in sorted(indices):
        line = {n: pt for n in ops
                if (pt := next((q for q in rt.points[n] if q.index >= i), None)) is not None}
        assert rt.consistent(line) is None, f"index {i}"
    for down in [{n} for n in ops] + [{n, m} for n in ops for m in ops if n < m]:
        line, _ = rt.recovery_line(down)
        assert rt.consistent(line) is None and down <= line.keys(), down


@pytest.mark.parametrize("seed", range(6))
def test_uncoordinated_lines_are_consistent_and_newest(seed, every):
    """With any node or two failed, the line found has no orphan, and no node of it
    could take a newer checkpoint and stay consistent (every checkpoint kept: no
    garbage collection, so that old lines are candidates too)."""
    rng = random.Random(seed)
    every(rng.choice([3, 5, 7]))
    db = _chain_db("uncoordinated", seed)
    rt = db.runtime
    rt._gc = lambda: None
    _write(db, rng, 60)
    ops = [n for n in rt.order() if db.graph_[n].parents]
    assert any(len([p for p in db.graph_[n].parents if db.graph_[p].parents]) > 1 for n in ops)
    for down in [{n} for n in ops] + [{n, m} for n in ops for m in ops if n < m]:
        line, _ = rt.recovery_line(down)
        assert rt.consistent(line) is None, down
        assert down <= line.keys()
        for m, pt in line.items():
            newer = rt.points[m][rt.points[m].index(pt) + 1:]
            for q in newer:
                assert rt.consistent({**line, m: q}) is not None, f"{m} could stay newer"


@pytest.mark.parametrize("regime", REGIMES)
def test_logs_and_checkpoints_stay_bounded(regime, every):
    """Checkpoints below the lowest line are folded, logs and write histories trimmed
    to it: a long run holds about what one checkpoint interval holds."""
    every(8)
    db = _chain_db(regime, None)
    rt = db.runtime
    rng = random.Random(0)
    sizes = []
    for _ in range(4):
        _write(db, rng, 300)
        sizes.append((sum(map(len, rt.logs.values())),
                      max(len(p) for p in rt.points.values()),
                      max(len(h.batches) for h in rt.durable.values())))
    db.wait()
    logs, points, history = sizes[-1]
    assert logs < 200 and points < 12 and history < 300, sizes
    assert sorted(db.view("v").all()) == _want(db)


@pytest.mark.parametrize("period", [32, 10_000])
def test_cic_a_quiet_table_does_not_hold_the_line_back(period, every, monkeypatch):
    """u is written once, t all along: u's nodes take no message, and without the
    periodic checkpoints (``period`` 10,000: none in this run) their index stays at
    their creation's, so the join's line (at the smallest index above it) and its logs
    stay there too; with them, the logs hold about a period's messages."""
    monkeypatch.setattr(uncoordinated, "PERIOD", period)
    every(8)
    db = _chain_db("cic", None)
    rt = db.runtime
    db.table("u").insert([(a, 0) for a in range(4)])
    for i in range(200):
        db.table("t").insert([(i % 4, 1)])
    held = sum(map(len, rt.logs.values()))
    assert (held < 120) == (period == 32), held
    assert sorted(db.view("v").all()) == _want(db)


@pytest.mark.parametrize("regime", REGIMES)
def test_a_line_with_an_orphan_is_refused_and_the_node_stays_failed(regime, every, monkeypatch):
    every(2)
    db = _chain_db(regime, None)
    rng = random.Random(1)
    _write(db, rng, 20)
    rt = db.runtime
    agg = _node(db, "aggregate")
    db.fail(agg)
    monkeypatch.setattr(rt, "recovery_line", lambda down: ({agg: rt.points[agg][0]}, None))
    with pytest.raises(noria_py.RecoveryError, match="orphan"):
        db.recover(agg)
    assert not rt.alive(agg)
    monkeypatch.undo()
    every(2)
    assert db.recover(agg, strategy="lineage").strategy == "lineage"
    _write(db, rng, 10)
    db.wait()
    assert sorted(db.view("v").all()) == _want(db)


@pytest.mark.parametrize("regime", REGIMES)
def test_a_view_created_while_a_node_is_down_is_rebuilt(regime, every):
    every(2)
    db = _two_branches(regime)
    for i in range(8):
        db.table("t").insert([(i % 3, i)])
    agg = _node(db, "aggregate")
    db.fail(agg)
    db.execute("CREATE VIEW x AS SELECT a, COUNT(*) AS n FROM t WHERE b < 5 GROUP BY a")
    report = db.recover(agg)
    assert report.checkpoint is None and report.rolled_back == []
    assert db.runtime.covered
    db.table("t").insert([(1, 1)])
    _check(db)
    assert sorted(db.view("x").all()) == sorted(
        db.execute("SELECT a, COUNT(*) FROM t WHERE b < 5 GROUP BY a").fetchall())
