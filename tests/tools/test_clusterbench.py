"""``noria-py bench cluster`` at a tiny size: the load (rows or Arrow tables) is checked
against the votes written before anything is timed further, and the figures come out."""
from __future__ import annotations

import pytest

from noria_tools import clusterbench


@pytest.mark.slow
@pytest.mark.parametrize("arrow", [False, True])
def test_bench_cluster_checks_its_load_and_reports(arrow):
    r = clusterbench.one_cluster(2, 200, 3000, 500, 5, 0, "treeclock", shards=2,
                                 many=100, arrow=arrow)
    assert r["tput"] > 0 and r["many"] > 0 and r["read_p50"] > 0 and len(r) >= 7
