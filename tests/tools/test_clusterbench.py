"""``noria-py bench cluster`` at a tiny size: the load (rows or Arrow tables) is checked
against the votes written before anything is timed further, and the figures come out."""
from __future__ import annotations

import os

import pytest

from noria_tools import clusterbench


@pytest.mark.slow
@pytest.mark.parametrize("arrow", [False, True])
def test_bench_cluster_checks_its_load_and_reports(arrow):
    r = clusterbench.one_cluster(2, 200, 3000, 500, 5, 0, "treeclock", shards=2,
                                 many=100, arrow=arrow)
    assert r["tput"] > 0 and r["many"] > 0 and r["read_p50"] > 0 and len(r) >= 7
    assert 0 < r["ctrl_share_ns"] < 1 and r["ctrl_ms"] > 0      # (threads' ns on a CPU)
    # (serve's default, --writes auto: at the workers on direct channels)
    assert r["writes"] == ("controller" if os.environ.get("NORIA_CHANNELS") == "relay"
                           else "worker")


@pytest.mark.slow
def test_bench_cluster_kills_the_worker_of_the_kind_named():
    """``--kill-kind join``: the recovery reports of each kill name a join, and the
    view is right after it (the bench waits for the vote it writes)."""
    r = clusterbench.one_cluster(2, 200, 3000, 500, 5, 1, "treeclock", shards=2,
                                 many=100, kill_kind="join")
    (detect, recover, total, strategies, _, kinds), = r["recovery"]
    assert strategies == "treeclock" and 0 < recover and detect < total, r["recovery"]
    assert "join" in kinds and "aggregate" not in kinds, kinds


def test_write_steps_reports_each_step_both_ways(capsys):
    clusterbench.write_steps(batch=40, articles=50, writes=5)
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[-2:] == ["rows", "columns"]
    steps = out[2:-1]
    assert len(steps) == 6 and steps[-1].startswith("total")
    for line in steps + out[-1:]:
        assert all(float(x.replace(",", "")) >= 0 for x in line.split()[-2:]), line
