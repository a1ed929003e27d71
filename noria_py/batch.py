"""The delta format that flows along every dataflow edge.

A batch is two parallel lists: rows (tuples of Python values) and their signs
(+n adds n copies of the row, -n removes n copies). Parallel lists rather than a list
of pairs let hot operators zip, slice and index without building a tuple per entry,
and make a batch cheap to keep by reference in a log: a batch is never mutated after
it has been sent.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Iterator


class Batch:
    __slots__ = ("rows", "signs")

    def __init__(self, rows: list[tuple] | None = None, signs: list[int] | None = None) -> None:
        self.rows: list[tuple] = rows if rows is not None else []
        self.signs: list[int] = signs if signs is not None else [1] * len(self.rows)

    @classmethod
    def inserts(cls, rows: Iterable[tuple]) -> "Batch":
        rows = list(rows)
        return cls(rows, [1] * len(rows))

    @classmethod
    def deletes(cls, rows: Iterable[tuple]) -> "Batch":
        rows = list(rows)
        return cls(rows, [-1] * len(rows))

    def add(self, row: tuple, sign: int = 1) -> None:
        self.rows.append(row)
        self.signs.append(sign)

    def extend(self, other: "Batch") -> None:
        self.rows.extend(other.rows)
        self.signs.extend(other.signs)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __iter__(self) -> Iterator[tuple[tuple, int]]:
        return zip(self.rows, self.signs)

    def __repr__(self) -> str:
        body = ", ".join(f"{'+' if s > 0 else ''}{s}{r}" for r, s in self)
        return f"Batch[{body}]"

    def consolidated(self) -> "Batch":
        """Equal rows merged, zero-sum rows dropped; first-seen order kept (deterministic)."""
        acc: dict[tuple, int] = defaultdict(int)
        for r, s in zip(self.rows, self.signs):
            acc[r] += s
        out = Batch()
        for r, s in acc.items():
            if s:
                out.rows.append(r)
                out.signs.append(s)
        return out

    def multiset(self) -> dict[tuple, int]:
        """Row -> net count; what a batch of only insertions describes as a relation."""
        acc: dict[tuple, int] = defaultdict(int)
        for r, s in zip(self.rows, self.signs):
            acc[r] += s
        return {r: c for r, c in acc.items() if c}

    def negated(self) -> "Batch":
        return Batch(list(self.rows), [-s for s in self.signs])


EMPTY = Batch()
