"""The ``coordinated`` and ``lineage`` regimes (issue 19) under the randomized
differential tests the tree-clock regime passes: random writes (some left in flight),
1-4 nodes failed at once, writes while they are down, ``db.recover`` with no strategy
(the regime's own), every view compared with DuckDB; 1 and 4 shards.

And the pieces of the coordinated regime one by one: a node with several parents
holds the inputs that delivered the barrier (alignment), a rollback sets every node
back and the bases replay from the epoch's positions, an epoch completes only when
every node has snapshotted it."""
from __future__ import annotations

import collections
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py.runtime.coordinated import CoordinatedRuntime
from tests.differential.helpers import DDL, apply_model, new_db, ops
from tests.recovery.test_concurrent_failures import (
    _apply,
    _ops,
    _wrong_views,
    pick_failures,
    views_then_data,
)
from tests.recovery.test_treeclock_recovery import EXAMPLES, KINDS, _assert_views

#: barriers as often as can be (every write), often, and as shipped
BARRIER_EVERY = (1, 3, None)


def _db(regime: str, shards: int, seed: int | None, every: int | None = None):
    options = {"barrier_every": every} if regime == "coordinated" else {}
    db = noria_py.connect(shards=shards, seed=seed, regime=regime, **options)
    for sql in DDL:
        db.execute(sql)
    return db


def regime_failure_run(regime: str, seed: int, shards: int, order: str,
                       rounds: int = 1) -> tuple[list[str], list[str], list]:
    """As ``test_concurrent_failures.concurrent_failure_run``, in ``regime``, each
    failed node recovered with ``db.recover(node)`` (``order``: "topological",
    "random", or "all": ``db.recover()``); returns (failed, wrong views, reports)."""
    rng = random.Random(seed)
    db = _db(regime, shards, seed, BARRIER_EVERY[seed % 3])
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    views_then_data(db, rng, model)
    for op in _ops(rng, rng.randint(1, 40)):
        _apply(db, model, op)
    all_failed, reports = [], []
    for _ in range(rounds):
        g = {n["id"]: n for n in db.graph()}       # (topological)
        failed = pick_failures(rng, db, 1)
        for f in failed:
            db.fail(f)
        bases = {db._tables[t].node: t for t in model}
        down = {bases[f] for f in failed if f in bases}
        for op in _ops(rng, rng.randint(0, 20)):
            _apply(db, model, op, down)
        if order == "all":
            reports += db.recover()
        else:
            todo = [n for n in g if n in failed]
            if order == "random":
                rng.shuffle(todo)
            for f in todo:
                reports.append(db.recover(f))
        assert all(db.runtime.alive(n) for n in g)
        all_failed += failed
        for op in _ops(rng, rng.randint(0, 10)):
            _apply(db, model, op)
    bad = _wrong_views(db, model)
    if isinstance(db.runtime, CoordinatedRuntime):     # quiet, all up: nothing held
        assert not db.runtime.align.buffers and not db.runtime.align.arrived
    return all_failed, bad, reports


SEEDS = [(s, shards, order) for s in range(12) for shards, order in
         [(1, "random"), (4, "topological"), (4, "all")]]
SLOW = [(s, shards, order) for s in range(12, 120) for shards, order in
        [(1, "random"), (4, "random"), (1, "topological"), (4, "all")]]


@pytest.mark.parametrize("regime", ["coordinated", "lineage"])
@pytest.mark.parametrize("seed,shards,order", SEEDS + [pytest.param(*c, marks=pytest.mark.slow)
                                                       for c in SLOW])
def test_concurrent_failures_match_duckdb(regime, seed, shards, order):
    failed, bad, reports = regime_failure_run(regime, seed, shards, order, rounds=2)
    assert not bad, f"{regime}: failed {failed}: wrong views {bad}"
    assert {r.strategy for r in reports} == {regime}


CONFIGS = [(1, None, "coordinated"), pytest.param(1, 5, "coordinated", marks=pytest.mark.slow),
           (4, None, "coordinated"), pytest.param(4, 9, "coordinated", marks=pytest.mark.slow),
           (1, 2, "lineage"), (4, 6, "lineage")]


def _config_id(c) -> str:
    s, d, k = c.values if hasattr(c, "values") else c
    return f"shards{s}-seed{d}-{k}"


@pytest.mark.parametrize("shards,seed,regime", CONFIGS, ids=[_config_id(c) for c in CONFIGS])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(early=ops, before=ops, during=ops, after=ops, pick=st.integers(0, 10_000),
       data=st.data(), flush=st.booleans(), late_views=st.booleans(),
       every=st.sampled_from([1, 2, 7]),
       adjacent=st.sampled_from([None, "child", "parent"]))
def test_recovery_matches_duckdb(shards, seed, regime, early, before, during, after, pick,
                                 data, flush, late_views, every, adjacent):
    """``test_treeclock_recovery.test_recovery_matches_duckdb`` in another regime."""
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    options = {"barrier_every": every} if regime == "coordinated" else {}
    db = new_db(shards, seed, model=model, early=early if late_views else (),
                regime=regime, **options)
    for op in before:
        apply_model(model, op, db)
    if flush:
        db.wait()
    present = {n["kind"] for n in db.graph()}
    kind = data.draw(st.sampled_from([k for k in KINDS if k in present]), label="kind")
    candidates = [n["id"] for n in db.graph() if n["kind"] == kind]
    victim = candidates[pick % len(candidates)]
    failed = [victim]
    g = {n["id"]: n for n in db.graph()}
    if adjacent == "child":
        below = [c for c in g[victim]["children"] if g[c]["children"]]
        if below:
            failed.append(below[pick % len(below)])
    elif adjacent == "parent" and g[victim]["parents"]:
        failed.append(g[victim]["parents"][pick % len(g[victim]["parents"])])
    for node in failed:
        db.fail(node)
    if "base" not in {g[n]["kind"] for n in failed}:
        for op in during:
            apply_model(model, op, db)
    for node in failed:
        if not db.runtime.alive(node):
            assert db.recover(node).strategy == regime
    for op in after:
        apply_model(model, op, db)
    _assert_views(db, model)


# ---------------------------------------------------------------- the pieces

def _join_db(seed: int | None, every: int = 1):
    """Two tables into a join (a node with two parents) under a COUNT."""
    db = noria_py.connect(regime="coordinated", seed=seed, barrier_every=every)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE TABLE u (a INT, c INT)")
    db.execute("CREATE VIEW v AS SELECT t.a, COUNT(*) AS n FROM t JOIN u ON t.a = u.a "
               "GROUP BY t.a")
    _WRITTEN[id(db)] = {"t": [], "u": []}       # (a new database may reuse a dead one's id)
    return db


#: the rows ``_write_both`` wrote, per database (by id): what ``_want`` computes from.
#: (Not a SELECT through the engine: an ad-hoc query of the view's own SQL reuses the
#: view's nodes, so it would agree with the view whatever the view held.)
_WRITTEN: dict[int, dict[str, list[tuple]]] = {}


def _want(db) -> list[tuple]:
    """The view ``v`` (COUNT of t JOIN u per a) computed in Python from the rows written."""
    rows = _WRITTEN.get(id(db), {"t": [], "u": []})
    t = collections.Counter(a for a, _ in rows["t"])
    u = collections.Counter(a for a, _ in rows["u"])
    return sorted((a, t[a] * u[a]) for a in t if u[a])


def _write_both(db, rng: random.Random, n: int, start: int = 0) -> None:
    written = _WRITTEN.setdefault(id(db), {"t": [], "u": []})
    for i in range(start, start + n):
        for name in ("t", "u"):
            row = (rng.randrange(5), i)
            db.table(name).insert([row])
            written[name].append(row)


@pytest.mark.parametrize("seed", range(8))
def test_alignment_holds_inputs_and_rollback_is_right(seed):
    """With messages in flight (a seed), the join holds the input that delivered the
    barrier first; failing any node and recovering gives the view a run without the
    failure gives."""
    rng = random.Random(seed)
    db = _join_db(seed, every=rng.choice([1, 2, 3]))
    rt = db.runtime
    assert isinstance(rt, CoordinatedRuntime)
    _write_both(db, rng, 40)
    assert rt.align.held > 0, "no input was ever held by an alignment"
    assert rt.complete is not None
    g = [n["id"] for n in db.graph()]
    for node in rng.sample(g, rng.randint(1, 3)):
        db.fail(node)
    if all(rt.alive(n) for n in g if db.graph_[n].kind == "base"):
        _write_both(db, rng, 5, 100)
    reports = db.recover()
    assert reports[0].rolled_back == g and reports[0].checkpoint is not None
    _write_both(db, rng, 10, 200)
    db.wait()
    assert sorted(db.view("v").all()) == _want(db)


def test_no_epoch_completes_while_a_node_is_down():
    db = _join_db(None, every=1)
    rt = db.runtime
    _write_both(db, random.Random(0), 5)
    done = rt.complete
    agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
    db.fail(agg)
    _write_both(db, random.Random(1), 5, 10)
    assert rt.complete == done
    report = db.recover(agg)
    assert report.checkpoint == done
    # the writes since the epoch: the bases resend them (one message per write, one child)
    assert report.replayed_messages == 10
    db.wait()
    assert sorted(db.view("v").all()) == _want(db)


def test_a_view_created_while_a_node_is_down_is_rebuilt():
    """No complete epoch covers the new view's nodes: the recovery rebuilds every
    operator from the tables (checkpoint None), and epochs resume."""
    db = _join_db(None, every=1)
    _write_both(db, random.Random(0), 5)
    agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
    db.fail(agg)
    db.execute("CREATE VIEW w AS SELECT a, b FROM t WHERE a > 1")
    assert db.runtime.complete is None
    assert db.recover(agg).checkpoint is None
    assert db.runtime.complete is not None        # settle took a whole epoch
    _write_both(db, random.Random(1), 5, 10)
    db.wait()
    assert sorted(db.view("v").all()) == _want(db)
    assert sorted(db.view("w").all()) == sorted(r for r in _WRITTEN[id(db)]["t"] if r[0] > 1)


def test_barrier_seconds():
    db = noria_py.connect(regime="coordinated", barrier_seconds=1e-9)
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    before = db.runtime.epoch
    for i in range(3):
        db.table("t").insert([(i,)])
    assert db.runtime.epoch == before + 3
