"""The README's Python blocks run, in order, as one session (those that need a server,
Spark or a PostgreSQL client are run by their own tests: tests/pg/test_docs.py, and the
cluster and Spark suites)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
ELSEWHERE = ("psycopg", "noria://", "register(spark)", "PgServer")


def python_blocks(text: str) -> list[str]:
    blocks, current, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(current) + "\n")
            inside = line.strip() == "```python" and not inside
            current = []
        elif inside:
            current.append(line)
    return blocks


def test_the_readme_python_blocks_run() -> None:
    blocks = [b for b in python_blocks(README.read_text())
              if not any(word in b for word in ELSEWHERE)]
    assert len(blocks) >= 3
    scope: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), scope)
    db = scope["db"]
    assert db.view("votes_per_article").lookup(1) == [(1, 2)]
    assert scope["report"].node == scope["node"]
