"""The materialized end of a view: rows indexed by the view's lookup key.

A read is a dictionary lookup here; nothing is computed. Rows are stored with any
hidden key columns and trimmed to the visible ones when read.
"""
from __future__ import annotations

from typing import Sequence

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..ordering import order_key
from .operator import Operator
from .state import bare_key, expand, index_batch, items


class Reader(Operator):
    kind = "reader"
    stateful = True

    def __init__(self, key: tuple[int, ...], visible: int, width: int,
                 order: Sequence[OrderKey] = ()) -> None:
        self.key = key
        self.visible = visible
        self.trim = visible < width
        self.sort = order_key(order) if order else None
        self._keyf = bare_key(key)          # row -> its key (a bare value for one column)
        self.reset()

    def reset(self) -> None:
        self.state: dict = {}      # key -> bucket of rows (state.index_add)

    def process(self, port: int, batch: Batch) -> Batch:
        rows = batch.rows
        keys = list(map(self._keyf, rows))
        index_batch(self.state, keys, rows, batch.signs)
        return Batch()

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
        out: list[tuple] = []
        for bucket in self.state.values():
            expand(bucket, out)
        return self._finish(out)

    def snapshot(self) -> Batch:
        rows: list[tuple] = []
        signs: list[int] = []
        for bucket in self.state.values():
            for r, c in items(bucket):
                rows.append(r)
                signs.append(c)
        return Batch(rows, signs)
