"""``noria-py bench regimes`` at a tiny size: every regime and scenario runs, every
failure's views are checked (``failure`` asserts), and the table has a row each."""
from __future__ import annotations

import gc

import pytest

from noria_tools import regimesbench, regimescluster


def test_bench_regimes_prints_a_row_per_regime(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "6000", "--batch", "500",
                              "--rounds", "1", "--down", "300", "--barrier-every", "3",
                              "--steady-rounds", "1", "--load-seconds", "0.2",
                              "--scenarios", "steady,single,concurrent"]) == 0
    out = capsys.readouterr().out
    assert "votes/s offered: p50 / p99 propagation (achieved)" in out
    main, _, protocol = out.partition("\n\n")      # the uncoordinated regimes' own table after
    for table, regimes in [(main, list(regimesbench.BUILT)), (protocol, ["uncoordinated", "cic", "falkirk"])]:
        rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
        assert [r.split("|")[1].strip() for r in rows] == ["regime", *regimes]
        assert all(len(r.split("|")) == len(rows[0].split("|")) for r in rows)
    assert "causal: " in out and "determinant bytes piggybacked per message" in out
    clocks = {line.split(":")[0]: float(line.split()[1]) for line in out.splitlines()
              if "tree-clock bytes per message" in line}
    assert list(clocks) == ["treeclock"] and 2 < clocks["treeclock"] < 64


def test_the_quick_comparison_runs_every_regime_and_scenario(capsys, tmp_path):
    """``noria-py bench regimes --quick``, the whole comparison at its quick size (issue
    19: under 3 minutes, run in CI): every regime, every scenario, both plots. Each
    failure's views are checked against the bed (``failure`` and ``frequent`` assert)."""
    pattern = str(tmp_path / "regimes-*.png")
    assert regimesbench.main(["--quick", "--scenarios", "steady,single,concurrent,frequent",
                              "--plot", pattern]) == 0
    out = capsys.readouterr().out
    main, _, _ = out.partition("\n\n")
    rows = [line for line in main.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["regime", *regimesbench.BUILT]
    for r in rows[1:]:
        assert int(r.split("|")[-5].split(",")[0]) >= 1        # failures in "frequent"
    assert (tmp_path / "regimes-recovery.png").stat().st_size > 1000
    assert (tmp_path / "regimes-frequent.png").stat().st_size > 1000


def test_bench_regimes_runs_the_causal_standby(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "6000", "--batch", "500",
                              "--rounds", "1", "--down", "300", "--steady-rounds", "1",
                              "--regimes", "causal-standby", "--scenarios", "steady,single",
                              "--load", "0"]) == 0
    out = capsys.readouterr().out
    assert "offered" not in out
    assert "| causal-standby |" in out and "causal with standby, single: restoring" in out


@pytest.mark.slow
def test_bench_regimes_on_nexmark_with_frequent_failures_and_plots(capsys, tmp_path):
    """Every scenario on the NEXMark-shaped workload: the views are checked against
    DuckDB after each failure (``failure`` and ``frequent`` assert), and both plots are
    written."""
    pattern = str(tmp_path / "regimes-*.png")
    assert regimesbench.main(["--workload", "nexmark", "--votes", "1500", "--batch", "250",
                              "--regimes", "treeclock,lineage", "--rounds", "1",
                              "--steady-rounds", "1", "--down", "100",
                              "--scenarios", "steady,single,concurrent,frequent",
                              "--frequent-seconds", "1", "--every", "0.4",
                              "--plot", pattern]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["regime", "treeclock", "lineage"]
    assert "events/s" in rows[0] and "frequent: failures" in rows[0]
    for r in rows[1:]:
        failures = int(r.split("|")[-5].split(",")[0])
        assert failures >= 1
        assert r.split("|")[-2].strip().endswith("%")      # reads answered, NEXMark too
    assert (tmp_path / "regimes-recovery.png").stat().st_size > 1000
    assert (tmp_path / "regimes-frequent.png").stat().st_size > 1000


def test_the_load_point_writes_every_row_it_offers_and_the_views_stay_right():
    """The open loop at a fixed rate: every row offered is written (and counted by the
    bed), the latencies are of rows, and the views are right after it."""
    bed, _ = regimesbench.steady("treeclock", 200, 2000, 500, 2, None)
    before = int(bed.counts.sum())
    offered, achieved, p50, p99 = regimesbench.at_load(bed, 4000.0, 0.3)
    assert offered == 4000.0 and achieved > 0 and 0 < p50 <= p99
    assert int(bed.counts.sum()) - before == 1200
    regimesbench._check(bed)
    bed.db.close()


def test_frequent_failures_recover_every_time_and_the_plots_are_drawn(tmp_path):
    """The frequent scenario on a small vote database: a shard fails every 0.2 s, each
    is recovered, the views are right at the end (``frequent`` checks them); then both
    plots from its result."""
    bed, res = regimesbench.steady("treeclock", 200, 4000, 500, 2, None)
    res.frequent = regimesbench.frequent(bed, 0.8, 0.2, 100)
    bed.db.close()
    assert res.frequent.failures >= 2 and len(res.frequent.failed_at) == res.frequent.failures
    assert res.frequent.series and res.frequent.recovery_s > 0
    assert 0.0 <= res.frequent.reads <= 1.0
    res.failures["single"] = (0.02, 1, 3, 1.0)
    written = regimesbench.plot([res], ["steady", "single", "frequent"],
                                str(tmp_path / "r-*.png"), "test")
    assert [p.rsplit("/", 1)[1] for p in written] == ["r-recovery.png", "r-frequent.png"]


def test_the_nexmark_check_finds_a_wrong_view():
    import noria_py
    from noria_tools import nexmark
    db = noria_py.connect()
    nexmark.setup(db)
    bed = nexmark.bed(db, 2000, 500)
    bed.check()
    bed.bids[-1] = bed.bids[-1][:-1]     # a bid written but not remembered
    with pytest.raises(AssertionError, match="view "):
        bed.check()
    db.close()


def test_bench_regimes_refuses_what_it_does_not_run(capsys):
    with pytest.raises(SystemExit):
        regimesbench.main(["--scenarios", "sometimes"])
    assert "unknown scenario" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        regimesbench.main(["--plot", "no-star.png"])
    assert "with a *" in capsys.readouterr().err
    assert regimesbench.main(["--regimes", "flink", "--votes", "1000"]) == 2
    assert "unknown regime 'flink'" in capsys.readouterr().out


def test_the_read_probe_counts_only_the_time_reads_were_held_back_in_the_spans():
    """A read issued at 0.0 and answered at 0.5 leaves 0.48 s unanswered (the first
    20 ms count as answered); only the spans' time counts."""
    probe = regimesbench.ReadProbe(lambda rng: None, every=60.0)
    probe.stop()
    probe.done[:] = [(0.0, 0.5), (2.0, 2.01)]
    assert probe.share([(0.0, 1.0)]) == pytest.approx(0.52)
    assert probe.share([(0.0, 1.0), (2.0, 3.0)]) == pytest.approx(0.76)
    assert probe.share([(0.6, 1.0)]) == 1.0
    assert probe.share([]) != probe.share([])          # NaN: no recovery, nothing to say


def test_bench_regimes_on_a_cluster_lists_what_a_cluster_does_not_offer(capsys, monkeypatch):
    """``--cluster``: a regime built for the embedded engine only (none is now: one
    made so here) is listed as such (no cluster started), an unknown name refused."""
    monkeypatch.setattr(regimescluster, "EMBEDDED_ONLY", ("falkirk",))
    assert regimesbench.main(["--cluster", "--regimes", "falkirk"]) == 0
    out = capsys.readouterr().out
    assert "falkirk      (built for the embedded engine only)" in out
    assert regimesbench.main(["--cluster", "--regimes", "flink"]) == 2
    assert "unknown regime 'flink'" in capsys.readouterr().out


@pytest.mark.slow
def test_bench_regimes_on_a_cluster_kills_a_worker_per_round(capsys):
    assert regimesbench.main(["--cluster", "--regimes", "coordinated", "--articles", "200",
                              "--votes", "2000", "--batch", "500", "--rounds", "1",
                              "--down", "100", "--shards", "2", "--barrier-every", "3"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("coordinated "))
    assert row.endswith("coordinated") and len(row.split()) == 9     # (with the standby column)


def test_tune_gc_is_called_first_and_said(capsys, monkeypatch):
    """``--tune-gc``: ``noria_py.tune_gc()`` before any regime runs, and the header
    says so (the figures of a run depend on it: docs/regimes.md, "The same on
    NEXMark")."""
    called: list[int] = []
    monkeypatch.setattr(regimesbench, "tune_gc", lambda: called.append(len(called)))
    argv = ["--articles", "300", "--votes", "3000", "--batch", "500", "--rounds", "1",
            "--down", "300", "--steady-rounds", "1", "--load", "0",
            "--regimes", "treeclock", "--scenarios", "steady,single"]
    assert regimesbench.main([*argv, "--tune-gc"]) == 0
    assert called == [0] and "tune_gc()" in capsys.readouterr().out
    assert regimesbench.main(argv) == 0
    assert called == [0] and "tune_gc()" not in capsys.readouterr().out


@pytest.mark.parametrize("workload", ["vote", "nexmark"])
def test_paired_steady_writes_every_insert_to_every_database(workload):
    """``--paired``: every regime's database takes every insert (the views right in
    each, against the bed's own counts or DuckDB), a latency each, and the beds go on
    to the failure scenarios."""
    regimes = ["treeclock", "lineage", "cic"]
    beds, results = regimesbench.steady_paired(regimes, 200, 3000, 500, 2, 8, workload)
    assert gc.isenabled()                   # (off only while the inserts are timed)
    assert [r.regime for r in results] == regimes and list(beds) == regimes
    for res in results:
        assert res.votes_per_s > 0 and 0 < res.p50_ms <= res.p99_ms
    for bed in beds.values():
        if workload == "nexmark":
            bed.check()
        else:
            regimesbench._check(bed)
        bed.db.close()


def test_bench_regimes_paired_prints_a_row_per_regime(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "3000", "--batch", "500",
                              "--regimes", "treeclock,lineage", "--paired", "--load", "0",
                              "--rounds", "1", "--down", "100",
                              "--scenarios", "steady,single"]) == 0
    out = capsys.readouterr().out
    assert "the databases side by side, each insert to each in turn" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["regime", "treeclock", "lineage"]
