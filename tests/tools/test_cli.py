"""The ``noria-py`` command's own behaviour: --version, help, bench without a name."""
from __future__ import annotations

import pytest

from noria_tools.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out.startswith("noria-py ")


def test_bench_without_a_name_lists_the_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    err = capsys.readouterr().err
    assert "vote" in err and "pg" in err and "adhoc" in err


@pytest.mark.parametrize("command", ["demo", "load", "repair", "worker", "logictest"])
def test_every_option_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "usage: noria-py" in out
