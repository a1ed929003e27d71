"""docs/postgres.md's examples run: the psql commands and the psycopg and subscription
snippets, against a server on a free port."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

DOC = (Path(__file__).resolve().parents[2] / "docs" / "postgres.md").read_text()
psycopg = pytest.importorskip("psycopg")


def _blocks(lang: str) -> list[str]:
    """The fenced blocks of the doc opened with ```lang (lang "" for plain ones)."""
    blocks, current, inside = [], [], None
    for line in DOC.splitlines():
        if line.startswith("```"):
            if inside is None:
                inside, current = line[3:].strip(), []
            else:
                if inside == lang:
                    blocks.append("\n".join(current) + "\n")
                inside = None
        elif inside is not None:
            current.append(line)
    return blocks


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_the_documented_session_runs(served: Any) -> None:
    port = str(served[1].port)
    session = next(b for b in _blocks("") if "CREATE TABLE vote" in b)
    psql_lines = [line for line in session.splitlines() if line.startswith("psql ")]
    assert len(psql_lines) == 3
    for line in psql_lines:
        cmd = line.replace("5433", port)
        out = subprocess.run(cmd + " -X -q", shell=True, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, (cmd, out.stderr)
    connect, subscribe = [b for b in _blocks("python") if "psycopg" in b or "SUBSCRIBE" in b]
    scope: dict[str, Any] = {}
    exec(connect.replace("5433", port), scope)
    with psycopg.connect(f"host=127.0.0.1 port={port} user=me dbname=noria",
                         autocommit=True) as conn:
        assert conn.execute("SELECT n FROM votes WHERE article_id = 1").fetchone() == (2,)
        lines: list[str] = []
        code = subscribe.replace("print(progress, diff, article_id, n)",
                                 "lines.append((diff, article_id, n)); "
                                 "conn.cancel_safe() if len(lines) == 2 else None")
        with pytest.raises(psycopg.errors.QueryCanceled):
            exec(code, {"conn": conn, "lines": lines})
        assert sorted(lines) == [("1", "1", "2"), ("1", "2", "1")]
