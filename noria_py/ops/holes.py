"""The keys a partial operator holds (an aggregate's groups, a join's keys): the rest
are holes, and a batch's rows under a hole are dropped on arrival (``keep``).

Shared by the partial aggregate and join (noria_py/partial.py says when an operator
is partial). Invariant: a key is in ``filled`` exactly while the operator holds every
row of it (it was filled by an upquery, and every write to it since was applied);
any other key holds no state at all, so filling it adds the key's rows once. Each
held key's bytes are accounted to the partial-state manager (``resize``), which
bounds their sum (``memory_limit``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..batch import Batch
from ..nan import column_list


class Holes:
    """The held keys of one partial operator and their accounted bytes."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        #: key held -> the bytes it is accounted at
        self.filled: dict[Any, int] = {}
        #: the held keys as an int64 array while all are ints (None: to build; False:
        #: not all ints), for filtering a columnar batch with one array operation
        self._ints: np.ndarray | bool | None = None

    def __contains__(self, key: Any) -> bool:
        return key in self.filled

    def __len__(self) -> int:
        return len(self.filled)

    def add(self, key: Any) -> None:
        self.filled[key] = 0
        self._ints = None

    def remove(self, key: Any) -> int:
        """``key`` a hole again; the bytes it was accounted at (given back by the caller)."""
        self._ints = None
        return self.filled.pop(key, 0)

    def clear(self) -> None:
        """Every key a hole; their bytes given back to the manager."""
        if self.filled:
            self.manager.resize(sum(self.filled.values()), 0)
        self.filled = {}
        self._ints = None

    def measure(self, key: Any, size: int) -> None:
        """``key`` (held) now takes ``size`` bytes."""
        old = self.filled.get(key)
        if old is not None:
            self.manager.resize(old, size)
            self.filled[key] = size

    def keep(self, batch: Batch, cols: tuple[int, ...], keyf: Callable[[tuple], Any]) -> Batch:
        """The rows of ``batch`` whose key (``cols``, read by ``keyf``) is held."""
        filled = self.filled
        if not filled or not batch:
            return Batch()
        bcols = batch.cols
        if bcols is not None and len(cols) == 1:
            col = bcols[cols[0]]
            held = self._held_ints() if col.dtype == np.int64 else None
            if held is not None:
                mask = np.isin(col, held)
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

    def _held_ints(self) -> np.ndarray | None:
        held = self._ints
        if held is None:
            keys = list(self.filled)
            held = self._ints = (np.array(keys, dtype=np.int64)
                                 if all(type(k) is int for k in keys) else False)
        return held if isinstance(held, np.ndarray) else None
