"""The delta format that flows along every dataflow edge.

A batch is two parallel lists: rows (tuples of Python values) and their signs
(+n adds n copies of the row, -n removes n copies). Parallel lists rather than a list
of pairs let hot operators zip, slice and index without building a tuple per entry,
and make a batch cheap to keep by reference in a log: a batch is never mutated after
it has been sent.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Iterator, Sequence, cast

import numpy as np

from .nan import column_list, concat


class Batch:
    """Rows and signs, held as two lists or as columns.

    A columnar batch (``Batch.columnar``) holds one numpy array per column and an int64
    array of signs; operators with a vectorized path (the base, COUNT) read ``cols`` and
    ``sign_array`` directly, and every other reader of ``rows``/``signs`` gets Python
    values built from the arrays on first use (``tolist``, so ints are ints, and each NaN
    the one NaN: ``nan.column_list``)."""

    __slots__ = ("_rows", "_signs", "cols", "sign_array")

    def __init__(self, rows: list[tuple] | None = None, signs: list[int] | None = None) -> None:
        self._rows: list[tuple] | None = rows if rows is not None else []
        self._signs: list[int] | None = signs if signs is not None else [1] * len(self._rows)
        self.cols: tuple[np.ndarray, ...] | None = None
        self.sign_array: np.ndarray | None = None

    @classmethod
    def columnar(cls, cols: Sequence[np.ndarray], signs: np.ndarray) -> "Batch":
        b = cls.__new__(cls)
        b._rows = None
        b._signs = None
        b.cols = tuple(cols)
        b.sign_array = signs
        return b

    @property
    def rows(self) -> list[tuple]:
        rows = self._rows
        if rows is None:
            if self.cols:
                rows = self._rows = self.to_rows()
            else:                                   # zero columns: n empty rows
                rows = self._rows = [()] * len(cast(np.ndarray, self.sign_array))
        return rows

    @property
    def signs(self) -> list[int]:
        signs = self._signs
        if signs is None:
            signs = self._signs = self.sign_array.tolist()  # type: ignore[union-attr]  # columnar: sign_array set
        return signs

    def is_numeric_insert(self) -> bool:
        """Whether this is a columnar batch of insertions only (every sign 1) whose
        columns are all int64 or float64: what the log and snapshots store as bytes."""
        cols = self.cols
        return (cols is not None and len(cols) > 0
                and all(c.dtype == np.int64 or c.dtype == np.float64 for c in cols)
                and bool((self.sign_array == 1).all()))  # type: ignore[union-attr]  # columnar: sign_array set

    def to_rows(self) -> list[tuple]:
        """The rows, built afresh from the columns if need be and not kept: for a batch
        kept long (a base's chunk), so that one read does not double its memory."""
        if self._rows is not None or not self.cols:
            return self.rows
        return list(zip(*[column_list(c) for c in self.cols]))

    @classmethod
    def inserts(cls, rows: Iterable[tuple]) -> "Batch":
        rows = list(rows)
        return cls(rows, [1] * len(rows))

    @classmethod
    def deletes(cls, rows: Iterable[tuple]) -> "Batch":
        rows = list(rows)
        return cls(rows, [-1] * len(rows))

    @classmethod
    def changes(cls, deletes: list[tuple], inserts: list[tuple]) -> "Batch":
        """One write's batch: its deletions, then its insertions (the order a base
        validates and logs them in)."""
        return cls(deletes + inserts, [-1] * len(deletes) + [1] * len(inserts))

    @classmethod
    def concat(cls, parts: Sequence["Batch"]) -> "Batch":
        """The entries of ``parts``, in order, as one batch (one part: that part).
        Columnar when every part is, with the same number of columns, and each column's
        values keep their types in one array (one dtype, or objects among them:
        ``nan.concat``); else as rows. ints and floats meeting in a column would come
        out floats, so such parts are joined as rows."""
        if len(parts) == 1:
            return parts[0]
        cols = [p.cols for p in parts]
        first = cols[0]
        if first and all(c and len(c) == len(first) for c in cols):
            arrays = cast("list[tuple[np.ndarray, ...]]", cols)
            if all(len({a.dtype for a in column}) == 1 or any(a.dtype == object for a in column)
                   for column in zip(*arrays)):
                return cls.stacked(parts)
        return cls([r for p in parts for r in p.rows], [s for p in parts for s in p.signs])

    @classmethod
    def stacked(cls, parts: Sequence["Batch"]) -> "Batch":
        """Columnar ``parts`` of one width, their columns joined as they are
        (``nan.concat``: ints meeting floats come out floats; ``concat`` checks first)."""
        cols = zip(*(cast("tuple[np.ndarray, ...]", p.cols) for p in parts))
        return cls.columnar([concat(column) for column in cols],
                            np.concatenate([cast(np.ndarray, p.sign_array) for p in parts]))

    def _as_rows(self) -> None:
        """About to be changed in place: drop the columnar form."""
        if self.cols is not None:
            self._rows, self._signs = self.rows, self.signs
            self.cols = self.sign_array = None

    def add(self, row: tuple, sign: int = 1) -> None:
        self._as_rows()
        self.rows.append(row)
        self.signs.append(sign)

    def extend(self, other: "Batch") -> None:
        self._as_rows()
        self.rows.extend(other.rows)
        self.signs.extend(other.signs)

    def sliced(self, lo: int, hi: int) -> "Batch":
        """Entries ``lo`` to ``hi`` as a batch of their own (views of the columns where
        this one is columnar: nothing copied)."""
        if self._rows is None:
            return Batch.columnar([c[lo:hi] for c in cast("tuple[np.ndarray, ...]", self.cols)],
                                  cast(np.ndarray, self.sign_array)[lo:hi])
        return Batch(self.rows[lo:hi], self.signs[lo:hi])

    def __len__(self) -> int:
        return len(self._signs) if self._signs is not None else len(self.sign_array)  # type: ignore[arg-type]  # columnar: sign_array set

    def __bool__(self) -> bool:
        return len(self) > 0

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

    def undoing(self) -> "Batch":
        """The batch that takes a state this one was applied to back to the state
        before: each row negated, in reverse order, so that a state applying rows in
        order holds only what it held while this one was applied (a reader's one row a
        key: a row replaced as -old/+new is put back as -new/+old)."""
        return Batch(self.rows[::-1], [-s for s in reversed(self.signs)])


EMPTY = Batch()
