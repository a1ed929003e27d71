"""noria-py bench partial, tiny: it runs, and partial mode holds less in its views."""
from __future__ import annotations

from noria_tools.bench import BENCHES
from noria_tools.partialbench import one_run


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
