"""docs/treeclock.md shows real numbers: its example and size table come from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from treeclock import TreeClocks
from treeclock.example import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "treeclock.md"


@pytest.fixture(scope="module")
def doc() -> str:
    if not DOC.exists():
        pytest.skip("docs/treeclock.md is not in this checkout")
    return DOC.read_text(encoding="utf-8")


def test_worked_example_matches_the_script(doc):
    begin, end = "<!-- example:begin -->\n", "<!-- example:end -->"
    shown = doc[doc.index(begin) + len(begin) : doc.index(end)]
    assert shown == render(), "regenerate the example: python -m treeclock.example"


def layered(fan_in: int, depth: int) -> dict:
    """depth + 1 layers of fan_in nodes, each reading from every node of the layer above."""
    return {
        layer * fan_in + i: tuple((layer - 1) * fan_in + j for j in range(fan_in)) if layer else ()
        for layer in range(depth + 1)
        for i in range(fan_in)
    }


def test_size_table(doc):
    rows = re.findall(r"^\| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \|$", doc, re.M)
    assert len(rows) >= 6
    for f, d, entries, clock_bytes, diff_bytes in (tuple(map(int, r)) for r in rows):
        tc = TreeClocks(layered(f, d), d)
        leaf = d * f  # a node of the last layer
        assert (tc.size(leaf), tc.clock_nbytes(leaf), tc.diff_nbytes()) == (entries, clock_bytes, diff_bytes)
