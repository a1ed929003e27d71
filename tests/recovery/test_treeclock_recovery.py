"""Tree-clock recovery, checked differentially: random writes, a node failed at a random
point (often with messages in flight), recovered, and every view compared with DuckDB.
Also: each edge delivers each message once, logs stay bounded, and the cases the
protocol refuses are refused clearly."""
from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning
from tests.differential.helpers import DDL, VIEWS, Oracle, apply_model, check_views, new_db, ops

EXAMPLES = int(os.environ.get("NORIA_RECOVERY_EXAMPLES", "20"))


def _build(shards, seed, model=None, early_ops=()):
    """The differential test's tables and views; ``early_ops`` are written before the
    views exist, so the views start from data (initialized, not fed message by message)."""
    db = new_db(shards, seed, model=model, early=early_ops)
    db.runtime.trace = []
    return db


def _assert_views(db, model):
    oracle = Oracle(DDL)
    oracle.load(model)
    check_views(db, oracle, VIEWS)


def _assert_exactly_once(db, failed: set[str]):
    per_edge = defaultdict(list)
    for src, dst, t in db.runtime.trace:
        if dst not in failed:
            per_edge[(src, dst)].append(t)
    for (src, dst), times in per_edge.items():
        assert len(times) == len(set(times)), f"edge {src}->{dst} delivered a message twice"
        assert times == sorted(times), f"edge {src}->{dst} out of order"
        if src not in failed:
            assert times == list(range(times[0], times[0] + len(times))), f"edge {src}->{dst} skipped"


KINDS = ["sharder", "filter", "project", "union", "aggregate", "extremum", "join", "setop",
         "distinct", "topk", "reader", "base", "values"]


CONFIGS = [(1, None, "treeclock"), (1, 5, "treeclock"), (4, None, "treeclock"),
           pytest.param(4, 9, "treeclock", marks=pytest.mark.slow),     # (CI time)
           (1, 2, "lineage"), (4, 6, "lineage")]


def _config_id(c) -> str:
    s, d, k = c.values if hasattr(c, "values") else c
    return f"shards{s}-seed{d}-{k}"


@pytest.mark.parametrize("shards,seed,strategy", CONFIGS, ids=[_config_id(c) for c in CONFIGS])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(early=ops, before=ops, during=ops, after=ops, pick=st.integers(0, 10_000),
       data=st.data(), flush=st.booleans(), late_views=st.booleans(),
       adjacent=st.sampled_from([None, "child", "parent"]))
def test_recovery_matches_duckdb(shards, seed, strategy, early, before, during, after, pick,
                                 data, flush, late_views, adjacent):
    model = {"t1": [], "t2": []}
    db = _build(shards, seed, model, early if late_views else ())
    for op in before:
        apply_model(model, op, db)
    if flush:
        db.wait()
    # the kind of node to fail, among those this graph has (one shard: no sharders),
    # so that every example fails and recovers one
    present = {n["kind"] for n in db.graph()}
    assert present <= set(KINDS), f"add {present - set(KINDS)} to KINDS"
    kind = data.draw(st.sampled_from([k for k in KINDS if k in present]), label="kind")
    candidates = [n["id"] for n in db.graph() if n["kind"] == kind]
    victim = candidates[pick % len(candidates)]
    failed = [victim]
    g = {n["id"]: n for n in db.graph()}
    if adjacent == "child":                  # a second failure just below, if it has children
        below = [c for c in g[victim]["children"] if g[c]["children"]]
        if below:
            failed.append(below[pick % len(below)])
    elif adjacent == "parent" and g[victim]["parents"]:
        failed.append(g[victim]["parents"][pick % len(g[victim]["parents"])])
    for node in failed:
        db.fail(node)
    if "base" not in {g[n]["kind"] for n in failed}:   # writes go on while nodes are down
        for op in during:
            apply_model(model, op, db)
    for node in failed:
        if not db.runtime.domains[node].alive:
            report = db.recover(node, strategy=strategy)
            assert report.strategy == strategy
    for op in after:
        apply_model(model, op, db)
    _assert_views(db, model)
    if strategy == "treeclock":          # lineage resets the purged nodes' times
        _assert_exactly_once(db, set(failed))


def test_failure_during_recovery_of_node_and_parent():
    db = _build(4, 3)
    model = {"t1": [], "t2": []}
    rows = [(i % 6, i % 5, "abc"[i % 3]) for i in range(40)]
    for i in range(0, 40, 4):
        apply_model(model, ("ins1", rows[i:i + 4]), db)
    sharder = next(n for n in db.graph() if n["kind"] == "sharder")
    db.fail(sharder["id"])
    apply_model(model, ("ins1", [(1, 1, "a"), (2, 2, None)]), db)
    db.recover(sharder["id"], strategy="treeclock")
    # the replayed output is still in flight: the recovered node fails again
    db.fail(sharder["id"])
    db.recover(sharder["id"], strategy="treeclock")
    # and now its parent, the base table, with the sharder's output in flight
    parent = sharder["parents"][0]
    apply_model(model, ("ins1", [(3, 3, "b")]), db)
    db.fail(parent)
    db.fail(sharder["id"])
    db.recover(sharder["id"], strategy="treeclock")     # recovers the base first
    apply_model(model, ("del1", [0, 1]), db)
    _assert_views(db, model)


def test_refused_cases_are_clear():
    db = _build(1, None)
    with pytest.raises(noria_py.RecoveryError, match="not failed"):
        db.recover(next(n["id"] for n in db.graph() if n["kind"] == "filter"))
    g = {n["id"]: n for n in db.graph()}
    chain = next([f, c, gc] for f in g for c in g[f]["children"] for gc in g[c]["children"]
                 if g[f]["kind"] == "filter")
    for node in chain:                       # three failed in a row: beyond depth 3
        db.fail(node)
    with pytest.raises(noria_py.RecoveryError, match="lineage"):
        db.recover(chain[0], strategy="treeclock")
    off = noria_py.connect(clocks=False)
    off.execute("CREATE TABLE t (a INT)")
    off.execute("CREATE VIEW v AS SELECT a FROM t WHERE a > 1")
    node = next(n["id"] for n in off.graph() if n["kind"] == "filter")
    off.fail(node)
    with pytest.raises(noria_py.RecoveryError, match="clocks"):
        off.recover(node, strategy="treeclock")
    assert off.recover(node, strategy="lineage").strategy == "lineage"


def _log_sizes(db):
    payload = sum(d.payload_size() for d in db.runtime.domains.values())
    diffs = sum(len(d.diffs) for d in db.runtime.domains.values() if d.diffs is not None)
    return payload, diffs


@pytest.mark.parametrize("messages", [20_000, pytest.param(1_000_000, marks=pytest.mark.slow)])
def test_logs_stay_bounded(messages):
    db = noria_py.connect(shards=4)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    db.execute("CREATE VIEW f AS SELECT user_id FROM vote WHERE user_id > 5")
    vote = db.table("vote")
    per_write = len(db.graph()) - 1          # messages one write causes, about
    writes = messages // per_write
    sizes = []
    for i in range(writes):
        vote.insert([(i % 50, i % 10)])
        if i % max(1, writes // 10) == 0:
            sizes.append(_log_sizes(db))
    sizes.append(_log_sizes(db))
    assert db.runtime.delivered >= messages * 0.9
    # flat: bounded by a constant of the graph, however many messages went through.
    # A diff log is compacted when it reaches COMPACT_AT (or twice what the last
    # compaction kept), down to the sender's low mark, or its stable checkpoint if
    # older (taken every CHECKPOINT_EVERY messages, times the node's spacing:
    # ``checkpoints.interval``); a
    # payload log is trimmed at each acknowledgement, every ACK_EVERY messages of the
    # child, and no further back than a stateful child's stable checkpoint (or a
    # stateful grandchild's, through a stateless child).
    from noria_py.runtime.checkpoints import interval
    from noria_py.tuning import ACK_EVERY, COMPACT_AT, FLUSH_EVERY
    every = max(interval(d.node.op)[0] for d in db.runtime.domains.values())
    nodes = db.graph()
    edges = sum(len(n["children"]) for n in nodes)
    assert max(p for p, _ in sizes) <= (3 * ACK_EVERY + every) * edges, sizes
    # (compacted again once it has doubled since: twice what a compaction keeps)
    per_log = 2 * (COMPACT_AT + every + 2 * ACK_EVERY + FLUSH_EVERY)
    assert max(d for _, d in sizes) <= per_log * len(nodes), sizes
    assert db.view("c").lookup(7) == [(7, len(range(7, writes, 50)))]


def test_recovery_of_node_created_over_existing_data():
    """A sharder filled at view creation (no messages yet) fails before its children
    have received anything from it: recovery resumes from the creation point."""
    db = noria_py.connect(shards=4, seed=0)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    vote = db.table("vote")
    vote.insert([(i % 7, i) for i in range(50)])
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    db.runtime.seed = 0
    sharder = next(n["id"] for n in db.graph() if n["kind"] == "sharder")
    db.runtime.run = lambda max_steps=None, _run=db.runtime.run: _run(0 if max_steps is not None else None)
    vote.insert([(1, 100), (2, 101)])        # stays in flight: no step runs
    db.fail(sharder)
    vote.insert([(1, 102)])
    db.recover(sharder, strategy="treeclock")
    db.wait()
    expect = {k: sum(1 for i in range(50) if i % 7 == k) for k in range(7)}
    expect[1] += 2
    expect[2] += 1
    for k, n in expect.items():
        assert db.view("c").lookup(k) == [(k, n)]


@pytest.mark.parametrize("checkpoints", [False, True])
def test_payload_log_to_a_reader_only_with_checkpoints_and_a_failed_reader_recovers(
        checkpoints, monkeypatch):
    """Without checkpoints recovery rebuilds a reader from its parent's state, so nothing
    is logged for it; with them (and readers checkpointing, as a cluster's: not
    ``tuning.REBUILT_FROM_PARENTS``) the parent logs what it sends the reader, from the
    reader's newest checkpoint on, and the reader comes back from that checkpoint."""
    monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", False)
    db = noria_py.connect(shards=1, seed=3, checkpoints=checkpoints)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    vote = db.table("vote")
    written = []

    def write(rows):
        vote.insert(rows)
        written.extend(rows)

    for i in range(40):
        write([(i % 5, i), (i % 3, i)])
    reader = next(n for n in db.graph() if n["kind"] == "reader")
    parent = db.runtime.domains[reader["parents"][0]]
    assert bool(parent.payload.get(reader["id"])) == checkpoints
    assert sum(d.payload_size() for d in db.runtime.domains.values()) > 0   # others are
    write([(1, 100), (2, 101)])
    assert db.runtime.pending()                 # some of it still in flight (seeded)
    db.fail(reader["id"])
    write([(1, 102), (None, 103)])
    report = db.recover(reader["id"], strategy="treeclock")
    assert report.strategy == "treeclock"
    assert (report.checkpoint is not None) == checkpoints
    db.wait()
    for k, n in Counter(a for a, _ in written if a is not None).items():
        assert db.view("c").lookup(k) == [(k, n)]
