"""The materialized end of a view: rows indexed by the view's lookup key.

A read is a dictionary lookup here; nothing is computed. Rows are stored with any
hidden key columns and trimmed to the visible ones when read.

A view's SELECT list can be applied by its reader (``select``) rather than by a
project node before it: one hop less per write (planner/build.py decides).

A reader keyed on one column starts in dense form (``dense.DenseRows``: each column
of the row of each key in an array indexed by key), where a big batch is applied with
array operations and the row tuple is built only when read: an update makes no tuple
(a columnar batch is applied as its columns), so there is none to compare, free, or
for Python's young-generation collections to walk. The first batch outside that shape
(a second row for a key, a key that is not a small int) moves the rows to the dict
for good.
"""
from __future__ import annotations

from typing import Sequence

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..ordering import order_key
from . import dense
from .dense import DenseRows, batch_columns
from .operator import Operator
from .project import Project
from .state import bare_key, expand, index_batch, items


def _as_int(key) -> int | None:
    """The int equal to ``key`` (a float, bool, numpy int...), which a dict would find
    under that int; None if there is none."""
    try:
        k = int(key)
    except (TypeError, ValueError, OverflowError):
        return None
    return k if k == key else None


class Reader(Operator):
    kind = "reader"
    stateful = True
    leaf = True

    def __init__(self, key: tuple[int, ...], visible: int, width: int,
                 order: Sequence[OrderKey] = (), select: Project | None = None) -> None:
        self.select = select        # the view's SELECT list, applied here (no node of its own)
        self.key = key
        self.width = width
        self.visible = visible
        self.trim = visible < width
        self.sort = order_key(order) if order else None
        self._keyf = bare_key(key)          # row -> its key (a bare value for one column)
        self.reset()

    def reset(self) -> None:
        self.state: dict = {}      # key -> bucket of rows (state.index_add)
        self.dense: DenseRows | None = DenseRows(self.width, self.key[0]) if len(self.key) == 1 else None

    def process(self, port: int, batch: Batch) -> Batch:
        if self.select is not None:
            batch = self.select.process(0, batch)
        if self.dense is not None:
            if not batch or self._apply_dense(batch):
                return Batch()
            self._to_state()
        rows = batch.rows
        keys = list(map(self._keyf, rows))
        index_batch(self.state, keys, rows, batch.signs)
        return Batch()

    def _apply_dense(self, batch: Batch) -> bool:
        """Apply the batch in dense form; False (nothing changed) if it does not fit."""
        if len(batch) < dense.DENSE_MIN:
            rows = batch.rows
            col = self.key[0]
            return self.dense.apply_rows([r[col] for r in rows], rows, batch.signs) is not None
        split = batch_columns(batch, self.key[0])
        return split is not None and self.dense.apply(*split) is not None

    def _to_state(self) -> None:
        """Leave dense form for good: its rows into ``state``."""
        held = self.dense
        self.dense = None
        for k, row in held.items():
            self.state[k] = row

    def _finish(self, out: list[tuple]) -> list[tuple]:
        """Sorted by the view's ORDER BY, trimmed to the visible columns."""
        if self.sort is not None:
            out.sort(key=self.sort)
        if self.trim:
            v = self.visible
            out = [r[:v] for r in out]
        return out

    def lookup(self, key) -> list[tuple]:
        """Rows for one key value (a tuple for a compound key). ``col = NULL`` is never
        true in SQL, so a NULL in the key finds nothing, though rows with NULL key
        columns are kept for reads of the whole view."""
        d = self.dense
        if d is not None:
            if type(key) is not int:
                key = _as_int(key)
                if key is None:
                    return []
            row = d.get(key, self.visible)
            return [] if row is None else [row]
        if key is None or (type(key) is tuple and None in key):
            return []
        bucket = self.state.get(key)
        if bucket is None:
            return []
        if type(bucket) is tuple:       # one row: the common case, kept short
            if self.trim:
                return [bucket[:self.visible]]
            return [bucket]
        out: list[tuple] = []
        expand(bucket, out)
        return self._finish(out)

    def lookup_many(self, keys: list) -> list[list[tuple]]:
        lookup = self.lookup
        return [lookup(k) for k in keys]

    def all(self) -> list[tuple]:
        if self.dense is not None:
            return self._finish(self._held_rows())
        out: list[tuple] = []
        for bucket in self.state.values():
            expand(bucket, out)
        return self._finish(out)

    def _held_rows(self) -> list[tuple]:
        return [row for _, row in self.dense.items()]

    def snapshot(self) -> Batch:
        if self.dense is not None:
            return Batch.inserts(self._held_rows())
        rows: list[tuple] = []
        signs: list[int] = []
        for bucket in self.state.values():
            for r, c in items(bucket):
                rows.append(r)
                signs.append(c)
        return Batch(rows, signs)
