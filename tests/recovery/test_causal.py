"""The ``causal`` regime (issue 19; Clonos, seed 004) under the randomized differential
tests the other regimes pass: random writes (some left in flight), 1-4 nodes failed at
once, writes while they are down, ``db.recover``, every view compared with DuckDB; 1 and
4 shards, the determinant sharing depth 1, 2 and whole, checkpoints as shipped and as
often as can be. What the regime refuses (determinants lost with their holders) must
raise a ``RecoveryError`` and leave the node failed; lineage then rebuilds it.

And the pieces one by one: a single failure never refuses and replays in the
determinants' order, the determinants' bytes round-trip, depth 1 loses a node's
determinants when it fails with its only child (refused), the standby is taken over,
and the logs stay bounded in a long run."""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from contextlib import contextmanager
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning
from noria_py.runtime.causal import CausalRuntime, DetLog, decode, encode
from tests.differential.helpers import DDL, apply_model, new_db, ops
from tests.recovery.test_concurrent_failures import (
    KEYED,
    VIEWS,
    _apply,
    _ops,
    _wrong_views,
    pick_failures,
    views_then_data,
)
from tests.recovery.test_treeclock_recovery import EXAMPLES, KINDS, _assert_views

#: determinant sharing depths: whole, children only, two levels
DEPTHS = (None, 1, 2)


@contextmanager
def often(on: bool) -> Iterator[None]:
    """Checkpoints and reports as often as can be (long chains, logs trimmed up to them)."""
    saved = tuning.ACK_EVERY, tuning.CHECKPOINT_EVERY
    if on:
        tuning.ACK_EVERY, tuning.CHECKPOINT_EVERY = 2, 3
    try:
        yield
    finally:
        tuning.ACK_EVERY, tuning.CHECKPOINT_EVERY = saved


def _assert_once_in_order(db, failed: set[str]) -> None:
    """No edge into a node that never failed delivered a message twice or out of order."""
    per_edge = defaultdict(list)
    for src, dst, t in db.runtime.trace:
        if dst not in failed:
            per_edge[(src, dst)].append(t)
    for (src, dst), times in per_edge.items():
        assert len(times) == len(set(times)), f"edge {src}->{dst} delivered a message twice"
        assert times == sorted(times), f"edge {src}->{dst} out of order"


def causal_failure_run(seed: int, shards: int, order: str, at_least: int = 1,
                       rounds: int = 2) -> tuple[list[list[str]], list[str], list[str]]:
    """Random writes, ``at_least``-4 nodes failed at once, writes while they are down,
    causal recovery of each in ``order`` ("topological", "random" or "all"), lineage for
    what it refuses, ``rounds`` times; returns (failed per round, outcomes, wrong views)."""
    rng = random.Random(seed)
    depth = DEPTHS[seed % 3]
    with often(seed % 2 == 1):
        db = noria_py.connect(shards=shards, seed=seed, regime="causal",
                              determinant_depth=depth)
        db.runtime.trace = []
        for sql in DDL:
            db.execute(sql)
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        views_then_data(db, rng, model)
        for op in _ops(rng, rng.randint(1, 40)):
            _apply(db, model, op)
        all_failed, outcomes = [], []
        ever: set[str] = set()
        for _ in range(rounds):
            g = [n["id"] for n in db.graph()]           # (topological)
            failed = pick_failures(rng, db, at_least)
            ever.update(failed)
            for f in failed:
                db.fail(f)
            bases = {db._tables[t].node: t for t in model}
            down = {bases[f] for f in failed if f in bases}
            for op in _ops(rng, rng.randint(0, 20)):
                _apply(db, model, op, down)
            outcome = "ok"
            todo = [n for n in g if n in failed]
            if order == "random":
                rng.shuffle(todo)
            try:
                if order == "all":
                    reports = db.recover()
                    assert {r.strategy for r in reports} <= {"causal"}
                else:
                    for f in todo:
                        assert db.recover(f).strategy == "causal"
            except noria_py.RecoveryError:
                outcome = "refused"
                assert not all(db.runtime.alive(f) for f in failed)
                for f in todo:
                    if not db.runtime.alive(f):
                        db.recover(f, strategy="lineage")
            assert all(db.runtime.alive(n) for n in g)
            outcomes.append(outcome)
            all_failed.append(failed)
            for op in _ops(rng, rng.randint(0, 10)):
                _apply(db, model, op)
        bad = _wrong_views(db, model)
        if all(o == "ok" for o in outcomes):
            _assert_once_in_order(db, ever)
        return all_failed, outcomes, bad


SEEDS = [(s, shards, order) for s in range(8) for shards, order in
         [(1, "random"), (4, "topological"), (4, "all")]]
SLOW = [(s, shards, order) for s in range(8, 150) for shards, order in
        [(1, "random"), (4, "random"), (1, "topological"), (4, "all")]]


@pytest.mark.parametrize("seed,shards,order", SEEDS + [pytest.param(*c, marks=pytest.mark.slow)
                                                       for c in SLOW])
def test_concurrent_failures_match_duckdb(seed, shards, order):
    failed, outcomes, bad = causal_failure_run(seed, shards, order)
    assert not bad, f"failed {failed}, causal {outcomes}: wrong views {bad}"


@pytest.mark.parametrize("seed", [*range(6), *(pytest.param(s, marks=pytest.mark.slow)
                                                for s in range(6, 40))])
def test_a_single_failure_never_refuses(seed):
    """One node failed at a time, at any depth: always recovered causally, right."""
    rng = random.Random(seed)
    depth = DEPTHS[seed % 3]
    with often(seed % 2 == 1):
        db = noria_py.connect(shards=1 + 3 * (seed % 2), seed=seed, regime="causal",
                              determinant_depth=depth)
        for sql in DDL:
            db.execute(sql)
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        for n, sql in {**VIEWS, **KEYED}.items():
            db.execute(f"CREATE VIEW {n} AS {sql}")
        for op in _ops(rng, 30):
            _apply(db, model, op)
        nodes = [n["id"] for n in db.graph()]
        for victim in rng.sample(nodes, 6):
            db.fail(victim)
            base = victim in {db._tables[t].node for t in model}
            for op in _ops(rng, rng.randint(0, 8)):
                _apply(db, model, op, {t for t in model if db._tables[t].node == victim}
                       if base else frozenset())
            report = db.recover(victim)
            assert report.strategy == "causal" and report.rolled_back == []
            for op in _ops(rng, rng.randint(0, 8)):
                _apply(db, model, op)
        assert not _wrong_views(db, model)


CONFIGS = [(1, None, None), (1, 5, None), (4, None, 2), (4, 9, None), (1, 2, 1), (4, 6, 1)]


@pytest.mark.slow
@pytest.mark.parametrize("shards,seed,depth", CONFIGS,
                         ids=[f"shards{s}-seed{d}-depth{k}" for s, d, k in CONFIGS])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(early=ops, before=ops, during=ops, after=ops, pick=st.integers(0, 10_000),
       data=st.data(), flush=st.booleans(), late_views=st.booleans(),
       adjacent=st.sampled_from([None, "child", "parent"]))
def test_recovery_matches_duckdb(shards, seed, depth, early, before, during, after, pick,
                                 data, flush, late_views, adjacent):
    """``test_treeclock_recovery.test_recovery_matches_duckdb`` in the causal regime: a
    node of every kind, alone or with a parent or child. With a whole sharing depth,
    or a node failed alone, it never refuses; at depth 1 a node failed with its child may
    be refused (its determinants lost with the child), and lineage rebuilds it."""
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    db = new_db(shards, seed, model=model, early=early if late_views else (),
                regime="causal", determinant_depth=depth)
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
            try:
                assert db.recover(node).strategy == "causal"
            except noria_py.RecoveryError:
                assert len(failed) > 1 and depth is not None, "refused a recovery it can do"
                assert not db.runtime.alive(node)
                db.recover(node, strategy="lineage")
    for op in after:
        apply_model(model, op, db)
    _assert_views(db, model)


# ---------------------------------------------------------------- the pieces

def _join_db(seed: int | None, **options):
    """Two tables into a join (a node with two parents) under a COUNT; the rows written
    are kept beside it (``_want``)."""
    db = noria_py.connect(regime="causal", seed=seed, **options)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE TABLE u (a INT, c INT)")
    db.execute("CREATE VIEW v AS SELECT t.a, COUNT(*) AS n FROM t JOIN u ON t.a = u.a "
               "GROUP BY t.a")
    db.written = {"t": [], "u": []}
    return db


def _want(db) -> list[tuple]:
    """The view computed in Python from the rows written (an ad-hoc SELECT of the same
    query would read the view's own aggregate, which the engine shares)."""
    per_a = Counter(a for a, _ in db.written["u"])
    counts = Counter()
    for a, _ in db.written["t"]:
        if per_a[a]:
            counts[a] += per_a[a]
    return sorted(counts.items())


def _write_both(db, rng: random.Random, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        for name in ("t", "u"):
            row = (rng.randrange(5), i)
            db.table(name).insert([row])
            db.written[name].append(row)


def _kind(db, kind: str) -> str:
    return next(n["id"] for n in db.graph() if n["kind"] == kind)


@pytest.mark.parametrize("seed", range(10))
def test_the_join_replays_in_its_determinants_order(seed):
    """The join (two parents, messages in flight in a random order) fails; its
    children hold its determinants, and the replay follows them: every view right, the
    replay pinned by determinants from the aggregate below."""
    rng = random.Random(seed)
    db = _join_db(seed)
    _write_both(db, rng, 30)        # (some left in flight: the aggregate lags)
    join = _kind(db, "join")
    agg = _kind(db, "aggregate")
    db.fail(join)
    _write_both(db, rng, 5, 100)
    report = db.recover(join)
    done = db.runtime.last_recovery[join]
    _write_both(db, rng, 5, 200)
    db.wait()
    assert sorted(db.view("v").all()) == _want(db)
    assert done["pinned"] > 0 and agg in done["determinants_from"]
    assert sum(done["replayed"].values()) == report.replayed_messages > 0


@pytest.mark.parametrize("seed", range(6))
def test_the_restart_mark_is_at_or_below_what_the_children_took(seed):
    """With a mark at every message, the join's newest mark is past what the lagging
    aggregate took: the join must restart from an older one (restarting from the newest
    would skip outputs the aggregate never had)."""
    rng = random.Random(seed)
    with often(True):
        tuning.CHECKPOINT_EVERY = 1
        db = _join_db(seed)
        _write_both(db, rng, 30)
        join, agg = _kind(db, "join"), _kind(db, "aggregate")
        rt = db.runtime
        rt.drain({join})                            # the join takes all, the aggregate lags
        took = rt.domains[agg].last_seen[join]
        assert rt.marks[join][-1].time > took
        db.fail(join)
        db.recover(join)
        _write_both(db, rng, 5, 200)
        db.wait()
        assert sorted(db.view("v").all()) == _want(db)
        assert rt.last_recovery[join]["mark"] <= took


@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 2**40),
                          st.lists(st.tuples(st.integers(0, 300), st.integers(0, 2**40)),
                                   max_size=20)), max_size=5))
def test_determinants_round_trip(records):
    rec = [(num, start, [p for p, _ in dets], [t for _, t in dets])
           for num, start, dets in records]
    assert decode(encode(rec)) == rec


def test_a_det_log_takes_each_time_once_and_truncates():
    log = DetLog(3)
    log.extend(3, [0, 1], [10, 11])          # times 4, 5
    log.extend(4, [1, 0, 1], [11, 12, 13])   # 5 again, then 6, 7
    assert (log.start, log.end, log.ports, log.times) == (3, 7, [0, 1, 0, 1], [10, 11, 12, 13])
    log.truncate(5)
    assert (log.start, log.ports) == (5, [0, 1])
    log.extend(9, [0], [20])                 # after a gap the sender dropped: replaced
    assert (log.start, log.end) == (9, 10)


def test_depth_one_refuses_when_a_node_fails_with_its_only_child():
    """At depth 1 only the join's child (the aggregate) holds the join's determinants:
    both failed, they are lost, and the join is refused, not replayed in a guessed
    order; lineage rebuilds both. At depth 2 the reader below holds them too."""
    for depth, refused in [(1, True), (2, False)]:
        rng = random.Random(4)
        db = _join_db(4, determinant_depth=depth)
        _write_both(db, rng, 30)
        join, agg = _kind(db, "join"), _kind(db, "aggregate")
        db.wait()
        db.fail(join)
        db.fail(agg)
        if refused:
            with pytest.raises(noria_py.RecoveryError, match="determinants of .* were lost"):
                db.recover(join)
            assert not db.runtime.alive(join)
            db.recover(join, strategy="lineage")
        else:
            assert db.recover(join).strategy == "causal"
            assert db.recover(agg).strategy == "causal"
        _write_both(db, rng, 5, 100)
        db.wait()
        assert sorted(db.view("v").all()) == _want(db)


def test_settings_that_do_not_fit_are_refused():
    with pytest.raises(noria_py.ArgumentError, match="causal regime"):
        noria_py.connect(standby=True)
    with pytest.raises(noria_py.ArgumentError, match="causal regime"):
        noria_py.connect(regime="coordinated", determinant_depth=2)
    with pytest.raises(noria_py.ArgumentError, match="determinant_depth"):
        noria_py.connect(regime="causal", determinant_depth=0)
    with pytest.raises(noria_py.ArgumentError, match="standby"):
        noria_py.connect(regime="causal", standby="yes")
    with pytest.raises(noria_py.ArgumentError, match="server's settings"):
        noria_py.connect("noria://127.0.0.1:1", standby=True)


def test_standby_is_taken_over_and_views_match():
    with often(True):
        db = _join_db(None, standby=True)
        rng = random.Random(1)
        _write_both(db, rng, 40)
        agg = _kind(db, "aggregate")
        rt = db.runtime
        assert isinstance(rt, CausalRuntime) and agg in rt.standbys
        db.fail(agg)
        _write_both(db, rng, 2, 100)
        report = db.recover(agg)
        assert rt.last_recovery[agg]["standby"] and report.checkpoint is not None
        _write_both(db, rng, 10, 200)
        db.wait()
        assert agg in rt.standbys
        assert sorted(db.view("v").all()) == _want(db)


def test_logs_stay_bounded_in_a_long_run():
    """In-flight logs, held determinants, marks and write histories are trimmed as the
    nodes report: after 7x the writes they hold about what they held before."""
    db = _join_db(None)
    rng = random.Random(2)
    rt = db.runtime

    def held() -> tuple[int, int, int, int]:
        return (rt.inflight_messages(), rt.held_bytes(),
                sum(len(m) for m in rt.marks.values()),
                sum(len(h.batches) for h in rt.durable.values()))
    with often(True):
        _write_both(db, rng, 100)
        before = held()
        _write_both(db, rng, 600, 100)
        after = held()
    assert all(a <= 2 * b + 16 for a, b in zip(after, before)), (before, after)
    assert sorted(db.view("v").all()) == _want(db)
