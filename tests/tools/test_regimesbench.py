"""``noria-py bench regimes`` at a tiny size: every regime and scenario runs, every
failure's views are checked (``failure`` asserts), and the table has a row each."""
from __future__ import annotations

import pytest

from noria_tools import regimesbench


def test_bench_regimes_prints_a_row_per_regime(capsys):
    assert regimesbench.main(["--articles", "300", "--votes", "6000", "--batch", "500",
                              "--rounds", "1", "--down", "300", "--barrier-every", "3"]) == 0
    out = capsys.readouterr().out
    main, _, protocol = out.partition("\n\n")      # the uncoordinated regimes' own table after
    for table, regimes in [(main, list(regimesbench.BUILT)), (protocol, ["uncoordinated", "cic"])]:
        rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
        assert [r.split("|")[1].strip() for r in rows] == ["regime", *regimes]
        assert all(len(r.split("|")) == len(rows[0].split("|")) for r in rows)


def test_bench_regimes_refuses_what_it_does_not_run(capsys):
    with pytest.raises(SystemExit):
        regimesbench.main(["--scenarios", "frequent"])
    assert "not built yet" in capsys.readouterr().err
    assert regimesbench.main(["--regimes", "causal", "--votes", "1000"]) == 2
    assert "not built yet" in capsys.readouterr().out
