"""Stateful nodes recover from their own checkpoints (issue 18): the same node failed
again and again, with writes between and checkpoints taken often, so that each
recovery starts from a checkpoint the previous one's replay contributed to; every view
is compared with DuckDB after each recovery."""
from __future__ import annotations

import random

import pytest

import noria_py
from tests.differential.helpers import DDL, Oracle, apply_model, normalize
from tests.recovery.test_concurrent_failures import KEYED, KEYS, VIEWS, _ops, checkpoint_regime


def _wrong(db, model) -> list[str]:
    db.wait()
    oracle = Oracle(DDL)
    oracle.load(model)
    bad = [n for n, sql in VIEWS.items() if normalize(db.view(n).all()) != oracle.query(sql)]
    return bad + [f"{n}[{k}]" for n, sql in KEYED.items() for k in KEYS
                  if normalize(db.view(n).lookup(k)) != oracle.query(sql, (k,))]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shards", [1, 4])
def test_a_node_failed_again_and_again_recovers_from_its_checkpoints(seed, shards):
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


@pytest.mark.parametrize("kind", ["aggregate", "join"])
def test_state_in_arrays_recovers_from_its_checkpoints(kind):
    """The vote view, whose COUNT and join hold their state in arrays (checkpointed as
    the keys changed, not copies): the node fails again and again between batches of
    votes, each time coming back from a checkpoint (built from deltas of keys changed,
    the articles' among them), and the view holds every article's count."""
    from noria_tools import workloads
    rng = random.Random(7)
    with checkpoint_regime("often"):
        db = noria_py.connect()
        workloads.setup(db, 300)
        node = next(n["id"] for n in db.graph() if n["kind"] == kind)
        op = db.runtime.domains[node].node.op
        counts = [0] * 300
        vote = db.table("vote")
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
