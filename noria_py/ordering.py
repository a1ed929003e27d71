"""Total orders over rows that may hold NULLs, for ORDER BY, TopK and deterministic output.

Python cannot compare None with a number, and a TopK must break ties the same way in
every run (replay depends on it), so every sort goes through these keys.
"""
from __future__ import annotations

from typing import Callable, Sequence

from sql_frontend.plan import OrderKey


class _Desc:
    """Wraps a value so that it sorts in reverse."""
    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return other.v < self.v

    def __gt__(self, other: "_Desc") -> bool:
        return other.v > self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.v == self.v

    def __hash__(self) -> int:
        return hash(self.v)


def row_key(row: tuple) -> tuple:
    """Any row's position in one fixed total order (NULLs first)."""
    return tuple((0, 0) if v is None else (1, v) for v in row)


def order_key(order: Sequence[OrderKey]) -> Callable[[tuple], tuple]:
    """Sort key for ORDER BY ``order``, ties broken by the whole row."""
    spec = [(o.column, o.descending, 0 if o.nulls_first else 2) for o in order]

    def key(row: tuple) -> tuple:
        parts: list[tuple] = []
        for col, desc, null_rank in spec:
            v = row[col]
            if v is None:
                parts.append((null_rank, 0))
            else:
                parts.append((1, _Desc(v) if desc else v))
        parts.append(row_key(row))
        return tuple(parts)

    return key
