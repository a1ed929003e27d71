"""The ``falkirk`` regime (issue 19, seed 000) under the randomized differential tests
the other regimes pass (``test_coordinated.regime_failure_run``: random writes, some
left in flight, 1-4 nodes failed at once, writes while they are down, ``db.recover`` in
any order, two rounds, 1 and 4 shards, every view against DuckDB), with each node's
policy drawn at random (seeded per node id) or every node on one policy, and
checkpoints every message, every 3 and as shipped. A falkirk recovery never refuses
here: every node keeps a span the low watermark reaches.

And the pieces: the frontier needs several passes where an unlogged edge pulls a
sender back and its other children with it; an eager node rolls back alone; names and
policies are checked; logs, spans and checkpoints stay bounded under steady writes; a
frontier that cannot be found is a ``RecoveryError`` leaving the nodes failed."""
from __future__ import annotations

import random

import pytest

import noria_py
from noria_py import regimes, tuning
from noria_py.graph import Node
from noria_py.runtime.falkirk import POLICIES, TOP, FalkirkRuntime
from tests.recovery import test_coordinated as coordinated_tests
from tests.recovery.test_coordinated import regime_failure_run
from tests.recovery.test_uncoordinated import _check, _two_branches

#: messages between a lazy node's checkpoints, by seed: every one, every 3, as shipped
EVERY = (1, 3, tuning.CHECKPOINT_EVERY)
#: how the nodes' policies are chosen, by seed: each its own at random, or all one
MIXES = ("random", "default", *POLICIES)


@pytest.fixture
def policies(monkeypatch):
    """Choose every node's policy: ``"random"`` (seeded by the run's seed and the node
    id), ``"default"`` (the regime's own), or one policy for all."""
    def choose(mix: str, seed: int) -> None:
        def pick(self: FalkirkRuntime, node: Node) -> str:
            if mix == "default":
                return original(self, node)
            if mix == "random":
                return random.Random(f"{seed}/{node.id}").choice(list(POLICIES))
            return mix
        original = FalkirkRuntime.choose
        monkeypatch.setattr(FalkirkRuntime, "choose", pick)
    return choose


def _every(monkeypatch, n: int) -> None:
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", n)


#: the default suite: seeds 0-3 (random policies, the regime's own, random, all
#: ephemeral), one and four shards, every recovery order; the rest in the slow suite
SEEDS = [(0, 1, "random"), (0, 4, "all"), (1, 4, "topological"), (1, 1, "random"),
         (2, 4, "all"), (3, 4, "topological")]
SLOW = [c for c in [(s, shards, order) for s in range(4) for shards, order in
                    [(1, "random"), (4, "topological"), (4, "all")]] if c not in SEEDS] + [
    (s, shards, order) for s in range(4, 120) for shards, order in
    [(1, "random"), (4, "random"), (1, "topological"), (4, "all")]]


@pytest.mark.parametrize("seed,shards,order", SEEDS + [pytest.param(*c, marks=pytest.mark.slow)
                                                       for c in SLOW])
def test_concurrent_failures_match_duckdb(seed, shards, order, policies, monkeypatch):
    _every(monkeypatch, EVERY[seed % 3])
    mix = MIXES[seed % len(MIXES)] if seed >= 4 else ("random", "default", "random", "ephemeral")[seed]
    policies(mix, seed)
    failed, bad, reports = regime_failure_run("falkirk", seed, shards, order, rounds=2)
    assert not bad, f"falkirk ({mix}): failed {failed}: wrong views {bad}"
    assert {r.strategy for r in reports} == {"falkirk"}


CONFIGS = [(1, None), (4, None), (1, 5), (4, 9)]


@pytest.mark.slow
@pytest.mark.parametrize("shards,seed", CONFIGS, ids=[f"shards{s}-seed{d}" for s, d in CONFIGS])
def test_recovery_matches_duckdb(shards, seed, policies, monkeypatch):
    """``test_coordinated.test_recovery_matches_duckdb`` (a node of every kind, alone
    or with a parent or a child), policies at random, lazy checkpoints every 2."""
    _every(monkeypatch, 2)
    policies("random", 0 if seed is None else seed)
    coordinated_tests.test_recovery_matches_duckdb(shards, seed, "falkirk")


# ---------------------------------------------------------------- the pieces

def _db(choice, shards: int = 2, seed: int | None = None):
    return _two_branches(choice, seed, shards)


def _of(db, kind: str) -> list[str]:
    return [n["id"] for n in db.graph() if n["kind"] == kind]


def test_the_frontier_needs_more_than_one_pass(monkeypatch):
    """The COUNT's sharder is ephemeral (its output not logged), its two shards lazy.
    Shard 0 fails and goes back to its checkpoint: what the sharder sent it since is
    gone, so the sharder goes back to what shard 0 had taken; shard 1 took more of the
    sharder than that, so it goes back to its checkpoint, older (taken by hand earlier):
    the sharder further back, and shard 0 with it, on a later pass. One pass in
    topological order leaves an inconsistent frontier."""
    _every(monkeypatch, 10_000)
    db = _db({"default": "lazy", "n2": "ephemeral"})
    rt = db.runtime
    assert isinstance(rt, FalkirkRuntime)
    sharder = next(n for n in _of(db, "sharder") if db.graph_[n].children[0].startswith("n3"))
    agg0, agg1 = db.graph_[sharder].children
    assert rt.policy[sharder] == "ephemeral" and rt.policy[agg0] == "lazy"
    for i in range(4):
        db.table("t").insert([(0, i), (1, i)])
    rt.take(rt.domains[agg1])
    for i in range(4):
        db.table("t").insert([(0, i), (1, i)])
    rt.take(rt.domains[agg0])
    for i in range(4):
        db.table("t").insert([(0, i), (1, i)])
    db.fail(agg0)
    db.table("t").insert([(0, 9), (1, 9)])
    report = db.recover(agg0)
    assert rt.last_frontier["passes"] >= 3
    assert {sharder, agg0, agg1} <= set(report.rolled_back)
    _check(db)
    db.table("t").insert([(2, 5)])
    _check(db)


def test_an_eager_node_rolls_back_alone():
    """A checkpoint after every message: its newest span is where it failed, so no
    child took an orphan and nothing else moves; a lazy one takes its reader with it."""
    for policy, alone in [("eager", True), ("lazy", False)]:
        db = _db({"default": "lazy", "n2": policy}, shards=1)
        agg = _of(db, "aggregate")[0]
        for i in range(20):
            db.table("t").insert([(i % 3, i)])
        db.fail(agg)
        db.table("t").insert([(1, 50)])
        report = db.recover(agg)
        assert (report.rolled_back == [agg]) == alone, (policy, report.rolled_back)
        _check(db)


def test_names_choose_the_policies():
    db = _db({"default": "checkpoint", "v": "eager", "n6": "log", "n2": "stateless"})
    rt = db.runtime
    assert db.regime == "falkirk"
    g = db.graph_
    reader_v = next(n for n in g.nodes.values() if n.view == "v").id
    assert rt.policy[reader_v] == "eager"               # a view: its reader
    assert rt.policy["n6"] == "batch"                   # a node id, aliases resolved
    assert {rt.policy[n] for n in g.nodes if n.startswith("n2")} == {"ephemeral"}
    assert rt.policy[_of(db, "aggregate")[0]] == "lazy"   # the default
    plain = _db("falkirk").runtime
    assert isinstance(plain, FalkirkRuntime)
    assert {plain.policy[n] for n in plain.graph.nodes
            if plain.graph[n].op.checkpoint_form is None and plain.graph[n].parents} == {"batch"}
    assert {plain.policy[n] for n in plain.graph.nodes
            if plain.graph[n].op.checkpoint_form is not None} == {"lazy"}


@pytest.mark.parametrize("choice,says", [
    ({"default": "often"}, "unknown falkirk policy 'often'"),
    ({"v": 3}, "unknown falkirk policy 3"),
    ({"": "lazy"}, "names a node, a view"),
    ({"default": "coordinated"}, "'coordinated' .* is a regime of the whole database"),
    ({"default": "treeclock"}, "not a per-node policy")])
def test_a_bad_choice_is_refused_at_connect(choice, says):
    with pytest.raises(noria_py.RegimeError, match=says):
        noria_py.connect(regime=choice)


@pytest.mark.parametrize("name,says", [("nope", "no view or node"), ("n99", "no view or node"),
                                       ("t", "names the table")])
def test_an_unknown_name_is_refused_when_a_node_fails(name, says):
    db = _db({"default": "lazy", name: "eager"})
    agg = _of(db, "aggregate")[0]
    with pytest.raises(noria_py.RegimeError, match=says):
        db.fail(agg)
    assert db.runtime.alive(agg)


def test_a_cluster_takes_falkirk_set_at_the_server():
    """A cluster offers falkirk (``tests/runtime/cluster/test_falkirk.py``); its policies
    are the server's, not a client's."""
    for regime in ("falkirk", {"default": "lazy"}):
        assert regimes.check(regime, cluster=True) == "falkirk"
    with pytest.raises(noria_py.ArgumentError, match="server's settings"):
        noria_py.connect("noria://127.0.0.1:1", regime={"default": "lazy"})


def _sizes(rt: FalkirkRuntime) -> tuple[int, int, int, int]:
    return (sum(map(len, rt.logs.values())) + sum(map(len, rt.sent.values())),
            max(len(p) for p in rt.points.values()),
            max(len(h.batches) for h in rt.durable.values()),
            max((len(c.deltas) for c in rt.ckpts._chains.values()), default=0))


@pytest.mark.parametrize("choice", [
    "falkirk", {"default": "lazy", "n2": "batch", "n6": "ephemeral"},
    pytest.param({"default": "lazy"}, marks=pytest.mark.slow),
    pytest.param({"default": "eager"}, marks=pytest.mark.slow)])
def test_logs_spans_and_checkpoints_stay_bounded(choice, monkeypatch):
    """Under steady writes the low watermark rises: what the logs, the unlogged edges'
    times, the spans, the checkpoint chains and the write histories hold stays about
    one checkpoint interval, however long the run."""
    _every(monkeypatch, 8)
    db = _db(choice)
    rt = db.runtime
    rng = random.Random(0)
    sizes = []
    for _ in range(4):
        for _ in range(300):
            db.table("t").insert([(rng.randrange(5), rng.randrange(6))])
        sizes.append(_sizes(rt))
    held, spans, history, deltas = sizes[-1]
    assert held < 800 and spans < 250 and history < 300 and deltas < 40, sizes
    _check(db)
    agg = _of(db, "aggregate")[0]
    db.fail(agg)
    db.recover(agg)
    _check(db)


def test_a_stateful_batch_node_keeps_its_inputs_from_creation():
    """No checkpoint: its only span is its creation, so what its parent sent it since
    stays logged (the seed's "grows without bound"), and it recovers from there."""
    db = _db({"default": "lazy", "n2": "batch"}, shards=1)
    rt = db.runtime
    agg = _of(db, "aggregate")[0]
    parent = db.graph_[agg].parents[0]
    for i in range(300):
        db.table("t").insert([(i % 4, i)])
    assert len(rt.logs[(parent, agg)]) == 300
    assert [p.time for p in rt.points[agg]] == [0]
    db.fail(agg)
    report = db.recover(agg)
    assert report.checkpoint == 0 and report.replayed_messages >= 300
    _check(db)


def test_a_frontier_that_cannot_be_found_is_refused_and_the_node_stays_failed(monkeypatch):
    _every(monkeypatch, 4)
    db = _db({"default": "lazy"}, shards=1)
    rt = db.runtime
    for i in range(20):
        db.table("t").insert([(i % 4, i)])
    agg = _of(db, "aggregate")[0]
    db.fail(agg)
    monkeypatch.setattr(rt, "points", {**rt.points, agg: []})
    with pytest.raises(noria_py.RecoveryError, match=f"node {agg} has no span"):
        db.recover(agg)
    assert not rt.alive(agg)
    monkeypatch.undo()
    assert db.recover(agg, strategy="lineage").strategy == "lineage"
    _check(db)


def test_the_final_check_refuses_a_frontier_that_loses_a_message(monkeypatch):
    """The sharder is ephemeral: a frontier that leaves it at ⊤ while its failed child
    goes back loses what it sent since; the check refuses it before touching a node."""
    _every(monkeypatch, 4)
    db = _db({"default": "lazy", "n2": "ephemeral"}, shards=2)
    rt = db.runtime
    for i in range(21):
        db.table("t").insert([(i % 4, i)])
    agg = _of(db, "aggregate")[0]
    db.fail(agg)
    monkeypatch.setattr(rt, "frontier", lambda down, live=True: (
        {n: (rt.points[n][-1] if n == agg else TOP) for n in rt.order()
         if db.graph_[n].parents}, 1))
    with pytest.raises(noria_py.RecoveryError, match="lost message"):
        db.recover(agg)
    assert not rt.alive(agg)
    monkeypatch.undo()
    db.recover(agg)
    _check(db)


def test_a_view_created_while_a_node_is_down_is_rebuilt(monkeypatch):
    _every(monkeypatch, 2)
    db = _db("falkirk")
    for i in range(8):
        db.table("t").insert([(i % 3, i)])
    agg = _of(db, "aggregate")[0]
    db.fail(agg)
    db.execute("CREATE VIEW x AS SELECT a, COUNT(*) AS n FROM t WHERE b < 5 GROUP BY a")
    report = db.recover(agg)
    assert report.checkpoint is None and report.rolled_back == []
    db.table("t").insert([(1, 1)])
    _check(db)
    assert sorted(db.view("x").all()) == sorted(
        db.execute("SELECT a, COUNT(*) FROM t WHERE b < 5 GROUP BY a").fetchall())


def test_newest_span_is_a_binary_search_over_a_prefix():
    """``_newest``: the newest of the first ``top`` spans that the test holds for, when
    it holds for a prefix of them (a node's parent-times only grow span by span), in
    about log2(top) tests."""
    from noria_py.runtime import falkirk
    for n in range(0, 40):
        pts = list(range(n))
        for top in range(n + 1):
            for cut in range(n + 1):
                asked: list[int] = []
                got = falkirk._newest(pts, top, lambda x: asked.append(x) or x < cut)
                want = next((x for x in reversed(pts[:top]) if x < cut), None)
                assert got == want, (n, top, cut)
                assert len(asked) <= max(1, top).bit_length() + 1, (n, top, asked)


def test_the_low_watermark_reads_few_of_a_stateless_nodes_many_spans(monkeypatch):
    """The regime's defaults (stateful nodes lazy, stateless ones a span at every
    message): with the lazy nodes' checkpoints far apart, the stateless nodes hold
    hundreds of spans above the low watermark. Finding it (every few spans, as writes
    go on) tests a few of them per node, not all (a linear search from the newest made
    it half of a write's time), and it is the frontier the linear search finds."""
    from noria_py.runtime import falkirk
    from noria_tools import workloads
    _every(monkeypatch, 10_000)
    db = noria_py.connect(regime="falkirk", shards=2)
    workloads.setup(db, 50)
    rt = db.runtime
    assert isinstance(rt, FalkirkRuntime)
    rng = random.Random(4)
    counts = [0] * 50
    for i in range(300):
        rows = [(rng.randrange(50), i * 10 + j) for j in range(4)]
        db.table("vote").insert(rows)
        for a, _ in rows:
            counts[a] += 1
    spans = max(len(p) for p in rt.points.values())
    assert spans >= 250, {n: len(p) for n, p in rt.points.items()}
    calls = 0
    no_orphan = falkirk.Spans.no_orphan

    def counted(self, nid, x, s):
        nonlocal calls
        calls += 1
        return no_orphan(self, nid, x, s)
    monkeypatch.setattr(falkirk.Spans, "no_orphan", counted)
    line = rt.lowest_line()
    assert line is not None and calls < spans, (calls, spans)

    def linear(pts, top, ok):
        return next((pts[i] for i in range(top - 1, -1, -1) if ok(pts[i])), None)
    monkeypatch.setattr(falkirk, "_newest", linear)
    assert rt.lowest_line() == line
    view = db.view(workloads.VIEW_NAME)
    assert [view.lookup(a)[0][2] for a in range(50)] == [c or None for c in counts]
