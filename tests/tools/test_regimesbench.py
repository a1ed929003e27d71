"""``noria-py bench regimes`` at a tiny size: every regime and scenario runs, every
failure's views are checked (``failure`` asserts), and the table has a row each."""
from __future__ import annotations

import pytest

from noria_tools import regimesbench


def test_bench_regimes_prints_a_row_per_regime(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "6000", "--batch", "500",
                              "--rounds", "1", "--down", "300", "--barrier-every", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["regime", "treeclock", "lineage",
                                                       "coordinated", "causal"]
    assert all(len(r.split("|")) == len(rows[0].split("|")) for r in rows)
    assert "causal: " in out and "determinant bytes piggybacked per message" in out


def test_bench_regimes_runs_the_causal_standby(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "6000", "--batch", "500",
                              "--rounds", "1", "--down", "300", "--steady-rounds", "1",
                              "--regimes", "causal-standby"]) == 0
    out = capsys.readouterr().out
    assert "| causal-standby |" in out and "causal with standby, single: restoring" in out


def test_bench_regimes_refuses_what_it_does_not_run(capsys):
    with pytest.raises(SystemExit):
        regimesbench.main(["--scenarios", "frequent"])
    assert "not built yet" in capsys.readouterr().err
    assert regimesbench.main(["--regimes", "falkirk", "--votes", "1000"]) == 2
    assert "not built yet" in capsys.readouterr().out
