"""noria-py bench partial, tiny: it runs, partial mode holds less in its views, and a
wrong answer (the bench's record of the rows planted wrong) fails the run."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from noria_tools import partialbench
from noria_tools.bench import BENCHES
from noria_tools.partialbench import baselines, limit_run, one_run, rss_run


def test_bench_partial_is_listed_and_partial_holds_less():
    assert "partial" in BENCHES
    for view in ("rows", "count", "vote"):
        full = one_run(False, 2000, 200, 0.05, 200, view, 100, 0)
        part = one_run(True, 2000, 200, 0.05, 200, view, 100, 0)
        assert part["views_bytes"] < full["views_bytes"]
        assert set(part) == set(full)


def test_bench_partial_prints_a_row_per_mode(capsys):
    assert BENCHES["partial"](["--rows", "1000", "--keys", "100", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[2:]] == ["full", "partial"]


def test_read_order_draws_zipf_reads_and_marks_repeats():
    u = partialbench.read_order(1000, 300, 4)
    assert len(set(u.tolist())) == 300          # uniform: distinct keys, the draw of before
    assert u.tolist() == np.random.default_rng(4).choice(1000, 300, replace=False).tolist()
    z = partialbench.read_order(1000, 20_000, 4, "zipf", 1.15)
    assert z.tolist() == partialbench.read_order(1000, 20_000, 4, "zipf", 1.15).tolist()
    assert 0 <= z.min() and z.max() < 1000
    top = np.bincount(z, minlength=1000).max() / len(z)     # the key of rank 1
    want = 1 / (1 / np.arange(1, 1001) ** 1.15).sum()
    assert abs(top - want) < 0.1 * want
    rep = partialbench.repeats(z)
    seen: set[int] = set()
    for k, r in zip(z.tolist(), rep.tolist()):
        assert r == (k in seen)
        seen.add(k)
    assert not partialbench.repeats(u).any()


def test_one_run_with_zipf_reads_counts_distinct_keys_and_hits(monkeypatch):
    out = one_run(True, 2000, 200, 0.5, 200, "vote", 100, 0, dist="zipf")
    order = partialbench.read_order(200, 100, 0, "zipf")
    assert out["distinct"] == len(set(order.tolist())) < 100
    assert out["hit_share"] == 1 - out["distinct"] / 100
    line = partialbench._dist_line(argparse.Namespace(dist="zipf", keys=200, read=0.5,
                                                      repeat=1, zipf_s=1.15))
    assert f"100 reads a run: {out['distinct']} distinct keys" in line
    assert f"hit share {out['hit_share']:.3f}" in line
    _corrupt(monkeypatch, int(np.bincount(order).argmax()))     # the hottest key
    with pytest.raises(AssertionError, match="wrong answer for key"):
        one_run(True, 2000, 200, 0.5, 200, "vote", 100, 0, dist="zipf")


def test_sweep_memory_grows_with_the_keys_read(monkeypatch, tmp_path, capsys):
    shares = [0.1, 0.5, 1.0]
    part = partialbench.sweep(True, 2000, 200, "vote", 100, 0, shares)
    full = partialbench.sweep(False, 2000, 200, "vote", 100, 0, shares)
    zipf = partialbench.sweep(True, 2000, 200, "vote", 100, 0, shares, "zipf")
    assert [part[s][0] for s in shares] == shares            # uniform: distinct keys
    assert part[0.1][1] < part[0.5][1] < part[1.0][1] and part[0.5][1] < full[0.5][1]
    assert len({b for _, b in full.values()}) == 1            # full: whatever is read
    assert all(zipf[s][0] < s for s in shares) and zipf[0.1][1] < zipf[1.0][1]
    path = tmp_path / "mem.png"
    assert partialbench.main(["--rows", "2000", "--keys", "200", "--view", "vote",
                              "--plot", str(path), "--shares", "0.1,1"]) == 0
    assert path.stat().st_size > 0
    assert f"plot written to {path}" in capsys.readouterr().out
    _corrupt(monkeypatch, int(partialbench.read_order(200, 20, 0)[3]))
    with pytest.raises(AssertionError, match="wrong answer for key"):
        partialbench.sweep(True, 2000, 200, "vote", 100, 0, [0.1])


@pytest.mark.parametrize("argv", [["--zipf-s", "0"], ["--plot", "x.png", "--shares", "0"],
                                  ["--plot", "x.png", "--shares", "a"]])
def test_bench_partial_refuses_bad_read_options(argv):
    with pytest.raises(SystemExit):
        partialbench.main(argv)


def _corrupt(monkeypatch, key: int) -> None:
    """The bench's own record of the rows written says one row more for ``key``."""
    real = partialbench.expected_counts

    def wrong(data, keys):
        counts = real(data, keys)
        counts[key] += 1
        return counts
    monkeypatch.setattr(partialbench, "expected_counts", wrong)


def test_rss_run_checks_every_answer(monkeypatch):
    for view in ("rows", "count", "vote"):
        out = one_run(True, 2000, 200, 0.5, 200, view, 100, 0, measure_rss=True)
        assert out["rss"] > 0
    read = np.random.default_rng(0).choice(200, 100, replace=False).tolist()  # one_run's
    _corrupt(monkeypatch, read[7])
    with pytest.raises(AssertionError, match=f"wrong answer for key {read[7]}"):
        one_run(True, 2000, 200, 0.5, 200, "vote", 100, 0, measure_rss=True)


def test_limit_run_reads_every_key_right(monkeypatch):
    out = limit_run(2000, 200, "vote", 100, 0, 5000, 20)
    assert out["reads"] == 200 and out["samples"] == 10
    assert out["max_rss"] >= out["start_rss"] > 0
    _corrupt(monkeypatch, 123)
    with pytest.raises(AssertionError, match="wrong answer for key 123"):
        limit_run(2000, 200, "vote", 100, 0, 5000, 20)


def test_the_headline_baseline_is_the_tables_with_their_index_and_the_kernels():
    """Issue 20's "the same process with the tables only" holds the engine's kernels
    (code) and the upquery index (the issue's: base tables keep the indexes upqueries
    need); the other readings move each."""
    t = {"bare": 100, "code": 150, "tables": 1000, "indexed": 1024, "rewarmed": 1025}
    assert baselines(t) == {"code": 1000, "code+index": 1024, "none": 950, "index": 974}


def test_rss_run_reports_each_reading_against_its_baseline(monkeypatch):
    monkeypatch.setattr(partialbench, "in_child", lambda fn, *args: fn(*args))
    r = rss_run(True, 2000, 200, 0.5, 200, "vote", 100, 0)
    assert r["views_rss"] == r["rss"] - r["tables_rss"] - r["index_rss"]
    assert r["views_rss_code"] == r["views_rss"] + r["index_rss"]
    assert r["views_rss_none"] == r["views_rss"] + r["index_rss"] + r["kernels_rss"]
    assert r["views_rss_index"] == r["views_rss"] + r["kernels_rss"]


@pytest.mark.slow
def test_bench_partial_rss_and_memory_limit_print_their_verdicts(capsys):
    """The options end to end (fresh processes: a few seconds each)."""
    assert BENCHES["partial"](["--rows", "1000", "--keys", "100", "--view", "vote",
                               "--memory-limit", "20000", "--every", "10"]) == 0
    out = capsys.readouterr().out
    assert "reads 100 (every key once, each answer right)" in out
    assert "max RSS over the tables-only process, against the limit" in out
    assert "(headline)" in out
    assert BENCHES["partial"](["--rows", "1000", "--keys", "100", "--view", "vote",
                               "--repeat", "1", "--rss"]) == 0
    out = capsys.readouterr().out
    assert "views' RSS (RSS after the reads less the tables-only process)" in out
    assert "kernels the views', index the tables'" in out
