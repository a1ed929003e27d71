"""The fault-tolerance regimes side by side (issue 19; ``noria_tools/regimesbench.py``,
``noria-py bench regimes``): per regime, the vote workload's propagation of a batch of
1,000 votes, and the recovery of one failed COUNT shard until every view is right.
Every round's result is checked against the votes per article counted in Python.

Run: .venv/bin/python -m pytest bench/test_regimes.py --benchmark-only
Sizes: NORIA_BENCH_ARTICLES (default 10000), NORIA_BENCH_VOTES (default 100000).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from noria_tools import recoverybench, regimesbench

ARTICLES = int(os.environ.get("NORIA_BENCH_ARTICLES", "10000"))
VOTES = int(os.environ.get("NORIA_BENCH_VOTES", "100000"))
REGIMES = ["treeclock", "lineage", "coordinated"]


@pytest.fixture(scope="module", params=REGIMES)
def bed(request):
    bed, _ = regimesbench.steady(request.param, ARTICLES, VOTES, 1000, 4, 16)
    yield bed
    bed.db.close()


def test_propagation_batch_of_1000(benchmark, bed):
    def write():
        recoverybench.write_votes(bed, 1000, 1000)
    benchmark.pedantic(write, rounds=20)
    recoverybench.check(bed, sample=None)


def test_recover_one_count_shard(benchmark, bed):
    node = regimesbench.stateful_shards(bed.db, "single")[0]

    def setup():
        recoverybench.check(bed, sample=200)       # the previous round's result
        recoverybench.fail_with_votes(bed, node)
        return (), {}

    def recover():
        bed.db.recover()
        bed.db.wait()

    benchmark.pedantic(recover, setup=setup, rounds=5)
    recoverybench.check(bed, sample=None)
    assert int(np.sum(bed.counts)) == sum(len(w) for w in bed.written)
