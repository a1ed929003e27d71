"""The keys a partial operator holds (an aggregate's groups, a join's keys): the rest
are holes, and a batch's rows under a hole are dropped on arrival (``keep``).

Shared by the partial aggregate and join (noria_py/partial.py says when an operator
is partial). Invariant: a key is in ``filled`` exactly while the operator holds every
row of it (it was filled by an upquery, and every write to it since was applied);
any other key holds no state at all, so filling it adds the key's rows once. Each
held key's bytes are accounted to the partial-state manager (``resize``), which
bounds their sum (``memory_limit``): measured when the key is filled, and for a key
written since (``dirty``) when the manager next reads the sum (``Partial.settle``);
where no limit is set, a write only marks the manager stale, and reading the sum
measures every held key.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..batch import Batch
from ..nan import column_list
from ..tuning import DENSE_LIMIT


class Holes:
    """The held keys of one partial operator and their accounted bytes."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        #: key held -> the bytes it is accounted at
        self.filled: dict[Any, int] = {}
        #: held keys written since they were last measured (measured when the manager
        #: reads the total: ``Partial.settle``)
        self.dirty: set[Any] = set()
        #: while every held key is an int in [0, DENSE_LIMIT): a bool array, True at
        #: each held key (None: to build; False: some key is not such an int), so a
        #: columnar batch's int keys are filtered with one indexing, kept up to date
        #: by ``add`` and ``remove``
        self._ints: np.ndarray | bool | None = None

    def __contains__(self, key: Any) -> bool:
        return key in self.filled

    def __len__(self) -> int:
        return len(self.filled)

    def add(self, key: Any) -> None:
        self.filled[key] = 0
        self._mark(key, True)

    def remove(self, key: Any) -> int:
        """``key`` a hole again; the bytes it was accounted at (given back by the caller)."""
        self._mark(key, False)
        self.dirty.discard(key)
        return self.filled.pop(key, 0)

    def _mark(self, key: Any, held: bool) -> None:
        table = self._ints
        if isinstance(table, np.ndarray) and type(key) is int and 0 <= key < len(table):
            table[key] = held
        elif table is not False or held:
            self._ints = None           # (built again at the next columnar batch)

    def clear(self) -> None:
        """Every key a hole; their bytes given back to the manager."""
        if self.filled:
            self.manager.resize(sum(self.filled.values()), 0)
        self.filled = {}
        self.dirty = set()
        self._ints = None

    def touched(self, rows: list[tuple], keyf: Callable[[tuple], Any]) -> None:
        """A batch of ``rows`` (under held keys) was applied: their keys are to be
        measured again when the manager next reads the total; without a limit, the
        manager measures everything then instead (``Partial.settle``)."""
        manager = self.manager
        if manager.limit is None:
            manager.stale = True
        else:
            self.dirty.update(map(keyf, rows))

    def measure(self, key: Any, size: int) -> None:
        """``key`` (held) now takes ``size`` bytes."""
        old = self.filled.get(key)
        if old is not None:
            self.manager.resize(old, size)
            self.filled[key] = size

    def keep(self, batch: Batch, cols: tuple[int, ...], keyf: Callable[[tuple], Any],
             bare: bool = True) -> Batch:
        """The rows of ``batch`` whose key (``cols``, read by ``keyf``) is held. ``bare``:
        a key of one column is held as the bare value (else as a 1-tuple)."""
        filled = self.filled
        if not filled or not batch:
            return Batch()
        bcols = batch.cols
        if bcols is not None and len(cols) == 1 and bare:
            col = bcols[cols[0]]
            table = self._table() if col.dtype == np.int64 and len(col) else None
            if table is not None:
                lo, hi = int(col.min()), int(col.max())
                if lo >= 0 and hi < len(table):
                    mask = table[col]
                else:
                    inside = (col >= 0) & (col < len(table))
                    mask = np.zeros(len(col), dtype=bool)
                    mask[inside] = table[col[inside]]
            else:
                keys = column_list(col)
                mask = np.fromiter((k in filled for k in keys), dtype=bool, count=len(keys))
            if not mask.any():
                return Batch()
            if mask.all():
                return batch
            signs: np.ndarray = batch.sign_array    # type: ignore[assignment]  # columnar
            return Batch.columnar([c[mask] for c in bcols], signs[mask])
        rows: list[tuple] = []
        kept: list[int] = []
        for r, s in zip(batch.rows, batch.signs):
            if keyf(r) in filled:
                rows.append(r)
                kept.append(s)
        return Batch(rows, kept)

    def _table(self) -> np.ndarray | None:
        table = self._ints
        if table is None:
            keys = list(self.filled)
            table = self._ints = False
            if all(type(k) is int for k in keys):
                hi = max(keys)
                if min(keys) >= 0 and hi < DENSE_LIMIT:
                    table = self._ints = np.zeros(min(DENSE_LIMIT, max(1024, hi + hi // 8 + 1)),
                                                  dtype=bool)
                    table[keys] = True
        return table if isinstance(table, np.ndarray) else None
