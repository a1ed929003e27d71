"""Recovery of a failed sharder in front of 8 aggregate shards (issue 4; the seed's
Figure 2), tree clocks against lineage, with writes in flight at the failure.

Run: .venv/bin/python -m pytest bench/test_recovery.py --benchmark-only
Sizes: NORIA_BENCH_RECOVERY_SIZES (default "100000,1000000"; add 10000000 for the
full figure: it needs a few GB and several minutes to load).
"""
from __future__ import annotations

import os
import random

import pytest

from noria_tools import bench

SIZES = [int(float(s)) for s in os.environ.get("NORIA_BENCH_RECOVERY_SIZES", "100000,1000000").split(",")]


@pytest.fixture(scope="module", params=SIZES, ids=[f"{s:.0e}votes" for s in SIZES])
def loaded(request):
    db, sharder = bench.recovery_db(request.param, shards=8)
    yield db, sharder
    db.close()


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
def test_recover_sharder(benchmark, loaded, strategy):
    db, sharder = loaded
    rng = random.Random(7)

    def setup():
        bench.fail_with_writes_in_flight(db, sharder, rng)
        return (), {}

    def recover():
        db.recover(sharder, strategy=strategy)
        db.wait()

    benchmark.pedantic(recover, setup=setup, rounds=5)
