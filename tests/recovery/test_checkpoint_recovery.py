"""Stateful nodes recover from their own checkpoints (issue 18): the same node failed
again and again, with writes between and checkpoints taken often, so that each
recovery starts from a checkpoint the previous one's replay contributed to; every view
is compared with DuckDB after each recovery.

Readers too, of every shape: dense (one row per int key), general (several rows a key,
or no key), applying their view's SELECT list themselves, with hidden key columns and
an ORDER BY. A reader's recovery starts from its newest checkpoint and catches up from
its parent's payload log; when its parent was restarted while it was down (which may
renumber the parent's output), it is rebuilt from its parent instead. A live child of
a restarted parent, whose log to it now starts at the restart, checkpoints then, so
that it still comes back from a checkpoint. (These tests turn off
``tuning.REBUILT_FROM_PARENTS``, under which a reader over stateful parents, and a join
over stateful parents or bases, takes no checkpoints at all:
tests/recovery/test_rebuilt_from_parents.py. A cluster's readers and joins, and those
over stateless parents, checkpoint as here.)"""
from __future__ import annotations

import random

import pytest

import noria_py
from noria_py import tuning
from noria_py.ops.reader import Reader
from tests.differential.helpers import DDL, Oracle, apply_model, normalize
from tests.recovery.test_concurrent_failures import KEYED, KEYS, VIEWS, _ops, checkpoint_regime

#: keyed views whose readers take the other shapes: dense (a group per int key), and a
#: SELECT list applied by the reader (one shard) with a computed column, a hidden key
#: column and an ORDER BY
READER_KEYED = {
    "k_count": "SELECT x, COUNT(*) AS n, SUM(y) AS s FROM t2 WHERE x IS NOT NULL AND x = ? "
               "GROUP BY x",
    "k_sel": "SELECT b + 1 AS b1, c FROM t1 WHERE a = ? ORDER BY c DESC NULLS LAST",
}


@pytest.fixture
def all_checkpoint(monkeypatch):
    """Every reader and join checkpoints, as a cluster's do."""
    monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", False)


def _wrong(db, model, keyed=KEYED) -> list[str]:
    db.wait()
    oracle = Oracle(DDL)
    oracle.load(model)
    bad = [n for n, sql in VIEWS.items() if normalize(db.view(n).all()) != oracle.query(sql)]
    return bad + [f"{n}[{k}]" for n, sql in keyed.items() for k in KEYS
                  if normalize(db.view(n).lookup(k)) != oracle.query(sql, (k,))]


def _reader_db(shards: int, seed: int):
    db = noria_py.connect(shards=shards, seed=seed)
    for sql in DDL:
        db.execute(sql)
    for n, sql in {**VIEWS, **KEYED, **READER_KEYED}.items():
        db.execute(f"CREATE VIEW {n} AS {sql}")
    return db


def _readers(db) -> dict[str, Reader]:
    return {n["id"]: db.runtime.domains[n["id"]].node.op for n in db.graph()
            if n["kind"] == "reader"}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shards", [1, 4])
def test_a_node_failed_again_and_again_recovers_from_its_checkpoints(seed, shards,
                                                                    all_checkpoint):
    rng = random.Random(seed)
    with checkpoint_regime("often"):
        db = noria_py.connect(shards=shards, seed=seed)
        for sql in DDL:
            db.execute(sql)
        for n, sql in {**VIEWS, **KEYED}.items():
            db.execute(f"CREATE VIEW {n} AS {sql}")
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        stateful = [n["id"] for n in db.graph()
                    if n["kind"] in ("aggregate", "extremum", "join", "topk", "distinct")]
        node = rng.choice(stateful)
        from_checkpoint = 0
        for _ in range(8):
            for op in _ops(rng, rng.randint(5, 25)):
                apply_model(model, op, db)
            db.fail(node)
            for op in _ops(rng, rng.randint(0, 5)):
                apply_model(model, op, db)
            report = db.recover(node, strategy="treeclock")
            # its neighbours are alive: their logs reach back to its stable checkpoint
            assert report.checkpoint is not None, report
            from_checkpoint += report.checkpoint > 0
            assert not _wrong(db, model), (node, report)
    assert from_checkpoint > 0, "no recovery started from a checkpoint taken after creation"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shards", [1, 4])
def test_readers_of_every_shape_recover_from_their_checkpoints(seed, shards, all_checkpoint):
    """Random readers failed one after another, writes before, while they are down (some
    still in flight to them at the failure) and after: each comes back from its newest
    checkpoint and its parent's log, right. Checkpoints as shipped (even seeds: the one
    taken at creation, a long catch-up) or as often as they can be (odd)."""
    rng = random.Random(seed)
    keyed = {**KEYED, **READER_KEYED}
    with checkpoint_regime("often" if seed % 2 else "default"):
        db = _reader_db(shards, seed)
        model: dict[str, list[tuple]] = {"t1": [], "t2": []}
        readers = _readers(db)
        shapes = {(r.state.form if r.key else "no key", r.select is not None, r.trim,
                   r.sort is not None) for r in readers.values()}
        later = 0
        for _ in range(10):
            for op in _ops(rng, rng.randint(5, 25)):
                apply_model(model, op, db)
            shapes |= {(r.state.form if r.key else "no key", r.select is not None, r.trim,
                        r.sort is not None) for r in readers.values()}
            node = rng.choice(sorted(readers))
            db.fail(node)
            for op in _ops(rng, rng.randint(0, 5)):
                apply_model(model, op, db)
            report = db.recover(node, strategy="treeclock")
            assert report.checkpoint is not None, report
            later += report.checkpoint > 0
            assert not _wrong(db, model, keyed), (node, report)
        assert later > 0 or seed % 2 == 0
    assert {s[0] for s in shapes} == {"dense", "general", "no key"}
    assert any(s[1] and s[2] and s[3] for s in shapes) == (shards == 1)   # select, hidden, sorted


def _count_view(seed: int):
    db = noria_py.connect(shards=1, seed=seed)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    g = {n["id"]: n for n in db.graph()}
    reader = next(n for n in g if g[n]["kind"] == "reader")
    return db, reader, g[reader]["parents"][0]


def _check_counts(db, written: list[tuple]) -> None:
    db.wait()
    counts: dict = {}
    for a, _ in written:
        counts[a] = counts.get(a, 0) + 1
    for k in range(8):
        assert db.view("c").lookup(k) == ([(k, counts[k])] if k in counts else [])


@pytest.mark.parametrize("regime", ["default", "often"])
def test_a_reader_whose_parent_restarted_checkpoints_then(regime, all_checkpoint):
    """The aggregate above the reader failed and came back (its payload log now starts
    at its restart). A reader checkpoint older than that (as shipped: the one taken at
    creation) could no longer be caught up from the log, so the reader checkpoints at
    the aggregate's restart, and fails later to come back from that checkpoint, right;
    one recent enough (often) is kept."""
    with checkpoint_regime(regime):
        db, reader, agg = _count_view(seed=1)
        written: list[tuple] = []
        for i in range(300):
            rows = [(i % 8, i), ((i * 3) % 8, i)]
            db.table("vote").insert(rows)
            written += rows
        db.wait()
        ck_parent_time = db.runtime.domains[reader].ck_stable.get(agg, 0)
        reader_time = db.runtime.info(reader).time
        t_min = db.runtime.info(reader).last_seen[agg]
        db.fail(agg)
        assert db.recover(agg, strategy="treeclock").checkpoint is not None
        assert not db.runtime.domains[agg].payload.get(reader)   # (its log restarts here)
        assert db.runtime.domains[reader].ck_stable[agg] >= t_min
        db.fail(reader)
        rows = [(1, 1000)]
        db.table("vote").insert(rows)
        written += rows
        report = db.recover(reader, strategy="treeclock")
        assert report.checkpoint is not None
        if ck_parent_time < t_min:        # (as shipped) the one taken at the restart
            assert regime == "default" and report.checkpoint == reader_time
        _check_counts(db, written)


@pytest.mark.parametrize("clocked", [True, False])
@pytest.mark.parametrize("regime", ["default", "often"])
def test_a_reader_down_while_its_parent_restarts(regime, clocked, all_checkpoint):
    """The reader fails, then its aggregate, the reader's only parent (so no witness),
    is recovered while the reader is still down, with writes between. The reader's
    newest checkpoint holds its clock, whose (reader, aggregate, base) entry says which
    base message the aggregate had taken at the aggregate-time the checkpoint reflects:
    the aggregate restarts there (from its own checkpoint at or below it), and the
    reader comes back from its checkpoint, right. Without that clock (``clocked``
    False: a store that keeps none, as a cluster's), the aggregate comes back from its
    newest checkpoint numbering its output afresh, so the reader's checkpoints, which
    name its old times, are dropped and the reader is rebuilt from the aggregate,
    right; it then checkpoints the rebuilt state, so that its next failure comes back
    from a checkpoint."""
    with checkpoint_regime(regime):
        db, reader, agg = _count_view(seed=2)
        written: list[tuple] = []

        def write(n: int, start: int) -> None:
            for i in range(start, start + n):
                rows = [(i % 8, i), ((i * 5) % 8, i)]
                db.table("vote").insert(rows)
                written.extend(rows)

        write(300, 0)
        db.fail(reader)
        write(40, 300)
        db.fail(agg)
        write(40, 340)
        if not clocked:
            db.runtime.store._chains[reader].clocks.clear()
        assert db.recover(agg, strategy="treeclock").checkpoint is not None
        write(300, 380)
        report = db.recover(reader, strategy="treeclock")
        assert report.paths == {reader: "checkpoint" if clocked else "rebuilt"}, report
        assert (report.checkpoint is not None) == clocked
        _check_counts(db, written)
        # either way it has a checkpoint now: the next failure restores it
        write(20, 680)
        db.fail(reader)
        write(20, 700)
        assert db.recover(reader, strategy="treeclock").checkpoint is not None
        _check_counts(db, written)


@pytest.mark.parametrize("voted", [False, True])
@pytest.mark.parametrize("kind", ["aggregate", "join"])
def test_state_in_arrays_recovers_from_its_checkpoints(kind, voted, all_checkpoint):
    """The vote view, whose COUNT and join hold their state in arrays (checkpointed as
    the keys changed, not copies): the node fails again and again between batches of
    votes, each time coming back from a checkpoint (built from deltas of keys changed,
    the articles' among them), and the view holds every article's count. ``voted``:
    every article has a vote first, so that the join's deltas after it are rewrites in
    place, without a mask (``RowsDelta.present`` None), as at Figure 3's 80% point."""
    from noria_tools import workloads
    rng = random.Random(7)
    with checkpoint_regime("often"):
        db = noria_py.connect()
        workloads.setup(db, 300)
        node = next(n["id"] for n in db.graph() if n["kind"] == kind)
        op = db.runtime.domains[node].node.op
        counts = [0] * 300
        vote = db.table("vote")
        if voted:
            for a in range(0, 300, 60):
                vote.insert([(k, 0) for k in range(a, a + 60)])
            counts = [1] * 300
        used = []
        for _ in range(6):
            for _ in range(rng.randint(3, 8)):
                rows = [(rng.randrange(300), rng.randrange(1000)) for _ in range(rng.choice([5, 60]))]
                vote.insert(rows)
                for a, _u in rows:
                    counts[a] += 1
            assert (op.counts.form if kind == "aggregate"
                    else {s.form for s in op.sides}) in ("dense", {"dense"})
            db.fail(node)
            vote.insert([(1, 1)])
            counts[1] += 1
            report = db.recover(node, strategy="treeclock")
            assert report.checkpoint is not None, report
            used.append(report.checkpoint)
            db.wait()
            view = db.view(workloads.VIEW_NAME)
            assert [view.lookup(a) for a in range(300)] == [
                [(a, f"article {a}", counts[a] or None)] for a in range(300)]
    assert max(used) > 1, used          # (1: the articles' message)


def _pairs(db, rng: random.Random) -> list[tuple[str, str]]:
    """(parent, child): a checkpointing child and one of its parents, one pair for
    each pair of their kinds (chosen by ``rng``), in topological order."""
    domains = db.runtime.domains
    kinds: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for n in db.graph():
        if domains[n["id"]].store is not None:
            for p in n["parents"]:
                kinds.setdefault((domains[p].node.kind, n["kind"]), []).append((p, n["id"]))
    return [rng.choice(pairs) for pairs in kinds.values()]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shards", [1, 4])
def test_a_child_of_a_restored_parent_comes_back_from_its_checkpoint(seed, shards,
                                                                     all_checkpoint):
    """A parent of a stateful node (readers included; one pair for each pair of
    kinds) fails and comes back, then the stateful node fails: it comes back from its own checkpoint plus its parents'
    logs, not rebuilt from its parents. (The restored parent's payload log starts at its
    restart, after the parent-time of the child's checkpoint taken at creation: without
    ``Domain.parent_restarted``, a checkpoint of the child at the parent's restart, that
    log no longer reached back to it and the child was rebuilt, until its next
    checkpoint was due.) Checkpoints as shipped, so none is due in between; writes in
    flight at each failure (seeded delivery); every view checked against DuckDB after
    each recovery."""
    from tests.recovery.test_concurrent_failures import _apply
    rng = random.Random(seed)
    db = _reader_db(shards, seed)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    bases = {db._tables[t].node: t for t in model}
    keyed = {**KEYED, **READER_KEYED}
    pairs = _pairs(db, rng)
    kinds = {db.runtime.domains[c].node.kind for _, c in pairs}
    assert {"aggregate", "join", "distinct", "topk", "reader"} <= kinds, kinds
    assert any(p in bases for p, _ in pairs) and any(p not in bases for p, _ in pairs)
    for parent, child in pairs:
        for op in _ops(rng, rng.randint(3, 15)):
            apply_model(model, op, db)
        db.fail(parent)
        down = {bases[parent]} if parent in bases else set()
        for op in _ops(rng, rng.randint(0, 5)):
            _apply(db, model, op, down)
        db.recover(parent, strategy="treeclock")
        db.wait()                       # (the child's children have taken its output)
        for op in _ops(rng, rng.randint(3, 15)):
            apply_model(model, op, db)
        db.fail(child)
        for op in _ops(rng, rng.randint(0, 5)):
            apply_model(model, op, db)
        report = db.recover(child, strategy="treeclock")
        assert report.checkpoint is not None, (parent, child, report)
        assert not _wrong(db, model, keyed), (parent, child, report)


def test_a_parents_log_short_of_the_resume_time_is_refused_not_taken_short():
    """``_since_checkpoint``: a parent whose log ends before the time B is to resume
    at (its time said more than it had sent: a base's held write, in a cluster) is a
    ``RecoveryError``, never a restore with the missing messages left out."""
    from types import SimpleNamespace

    from noria_py.batch import Batch
    from noria_py.errors import RecoveryError
    from noria_py.recovery import treeclock
    msg = SimpleNamespace(time=15, batch=Batch.inserts([(1,)]))
    rt = SimpleNamespace(payload_after=lambda a, b, since: ([msg], 15))
    ck = SimpleNamespace(parent_times={"n1": 14})
    with pytest.raises(RecoveryError, match="short of the 16"):
        treeclock._since_checkpoint(rt, "n25", ck, {"n1": 16}, {})
    buffers: dict = {}
    assert treeclock._since_checkpoint(rt, "n25", ck, {"n1": 15}, buffers) == [(0, msg.batch)]
    assert buffers == {"n1": []}


def test_an_aggregate_back_from_its_checkpoint_takes_what_came_since_in_one_call(monkeypatch):
    """A COUNT restarting from its checkpoint takes its parent's messages since then
    joined into one batch (``Operator.inputs_join``, ``Domain.restore_state``), not one
    call each, and its groups come out as the messages one by one left them."""
    from noria_py.ops.aggregate import Aggregate
    monkeypatch.setattr(tuning, "ACK_EVERY", 4)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 8)
    db = noria_py.connect()
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
    vote = db.table("vote")
    rng = random.Random(3)
    written = [(rng.randrange(30), i) for i in range(400)]
    for i in range(0, 200, 10):                 # checkpoints every 8 messages
        vote.insert(written[i:i + 10])
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 10**6)
    for i in range(200, 360, 4):                # 40 messages, none checkpointed
        vote.insert(written[i:i + 4])
    agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
    db.fail(agg)
    vote.insert(written[360:])
    calls: list[int] = []
    process = Aggregate.process
    monkeypatch.setattr(Aggregate, "process",
                        lambda self, port, batch: calls.append(len(batch)) or process(self, port, batch))
    report = db.recover(agg, strategy="treeclock")
    assert report.checkpoint is not None and report.checkpoint >= 16, report
    db.wait()
    assert calls[0] >= 160 and len(calls) <= 3, calls     # joined; then the replay's
    counts: dict[int, int] = {}
    for a, _ in written:
        counts[a] = counts.get(a, 0) + 1
    assert sorted(db.view("c").all()) == sorted(counts.items())
