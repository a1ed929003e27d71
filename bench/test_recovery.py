"""Recovery of a failed sharder in front of 8 aggregate shards (issue 4; the seed's
Figure 2), tree clocks against lineage, with writes in flight at the failure; and
(issue 18) of one shard of each node kind on the vote view (``noria_tools/recoverybench.py``:
20,000 articles, 4 shards, the view ``top3`` beside ArticleWithVoteCount for the TopK
node). Every round's result is checked: the views' counts against the votes counted in
Python.

Run: .venv/bin/python -m pytest bench/test_recovery.py --benchmark-only
Sizes: NORIA_BENCH_RECOVERY_SIZES (default "100000,1000000" for the sharder, "100000"
for the node kinds; add 10000000 for the full figure: it needs a few GB and several
minutes to load).
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

from noria_tools import bench, recoverybench, workloads

_SIZES = os.environ.get("NORIA_BENCH_RECOVERY_SIZES")
SIZES = [int(float(s)) for s in (_SIZES or "100000,1000000").split(",")]
NODE_SIZES = [int(float(s)) for s in (_SIZES or "100000").split(",")]
ARTICLES = 10_000              # bench.recovery_db's


@pytest.fixture(scope="module", params=SIZES, ids=[f"{s:.0e}votes" for s in SIZES])
def loaded(request):
    """The database, its sharder, and the votes per article (kept up to date)."""
    db, sharder = bench.recovery_db(request.param, shards=8, articles=ARTICLES)
    counts = np.bincount(workloads.votes(request.param, ARTICLES)[:, 0], minlength=ARTICLES)
    yield db, sharder, counts
    db.close()


def _check_counts(db, counts: np.ndarray) -> None:
    """Every article's count in the view ``counts`` (no row: no votes)."""
    keys = list(range(ARTICLES))
    want = [[(k, int(c))] if c else [] for k, c in zip(keys, counts)]
    assert db.view("counts").lookup_many(keys) == want


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
def test_recover_sharder(benchmark, loaded, strategy):
    db, sharder, counts = loaded
    rng = random.Random(7)

    def setup():
        _check_counts(db, counts)              # the previous round's result
        written = bench.fail_with_writes_in_flight(db, sharder, rng, articles=ARTICLES)
        np.add.at(counts, [a for a, _ in written], 1)
        return (), {}

    def recover():
        db.recover(sharder, strategy=strategy)
        db.wait()

    benchmark.pedantic(recover, setup=setup, rounds=5)
    _check_counts(db, counts)


@pytest.fixture(scope="module", params=NODE_SIZES, ids=[f"{s:.0e}votes" for s in NODE_SIZES])
def vote_bed(request):
    bed = recoverybench.vote_bed(request.param, articles=20_000, shards=4, top="topk")
    yield bed
    bed.db.close()


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
@pytest.mark.parametrize("kind", ["aggregate", "join", "reader", "topk"])
def test_recover_node(benchmark, vote_bed, kind, strategy):
    node = recoverybench.pick_node(vote_bed.db.graph(), kind)

    def setup():
        recoverybench.check(vote_bed, sample=None)    # the previous round's result
        recoverybench.fail_with_votes(vote_bed, node)
        return (), {}

    def recover():
        vote_bed.db.recover(node, strategy=strategy)
        vote_bed.db.wait()

    benchmark.pedantic(recover, setup=setup, rounds=5)
    recoverybench.check(vote_bed, sample=None)        # every article
