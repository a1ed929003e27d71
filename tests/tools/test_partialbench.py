"""noria-py bench partial, tiny: it runs, partial mode holds less in its views, and a
wrong answer (the bench's record of the rows planted wrong) fails the run."""
from __future__ import annotations

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


def test_the_headline_baseline_is_the_tables_with_the_kernels_without_the_index():
    """Issue 20's "the same process with the tables only" holds the engine's kernels
    (code) but not the upquery index (the views'); the other readings move each."""
    t = {"bare": 100, "code": 150, "tables": 1000, "indexed": 1024, "rewarmed": 1025}
    assert baselines(t) == {"code": 1000, "code+index": 1024, "none": 950, "index": 974}


def test_rss_run_reports_each_reading_against_its_baseline(monkeypatch):
    monkeypatch.setattr(partialbench, "in_child", lambda fn, *args: fn(*args))
    r = rss_run(True, 2000, 200, 0.5, 200, "vote", 100, 0)
    assert r["views_rss"] == r["rss"] - r["tables_rss"]
    assert r["views_rss_code+index"] == r["views_rss"] - r["index_rss"]
    assert r["views_rss_none"] == r["views_rss"] + r["kernels_rss"]
    assert r["views_rss_index"] == r["views_rss"] + r["kernels_rss"] - r["index_rss"]


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
