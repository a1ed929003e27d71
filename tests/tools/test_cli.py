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


def test_every_option_has_help() -> None:
    """Each subcommand's arguments say what they are (argparse's parsers, walked)."""
    import argparse

    from noria_tools import cli
    parsers: list[argparse.ArgumentParser] = []
    real = argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> object:
        parsers.append(self)
        raise SystemExit(0)
    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    try:
        with pytest.raises(SystemExit):
            cli.main(["demo"])
    finally:
        argparse.ArgumentParser.parse_known_args = real  # type: ignore[method-assign]
    top = parsers[0]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {a.dest}" for name, p in sub.choices.items() if p.add_help
               for a in p._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []
