"""Helpers shared by the storage tests (imported as ``from .helpers import ...``;
fixtures live in conftest.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def typed(rows) -> Counter:
    """Rows as a multiset where 1, 1.0 and True are different, as storage
    treats them."""
    return Counter((tuple(r), tuple(map(type, r))) for r in rows)


def wal_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("wal-*.log"))
