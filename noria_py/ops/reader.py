"""The materialized end of a view: rows indexed by the view's lookup key.

A read is a dictionary lookup here; nothing is computed. Rows are stored with any
hidden key columns and trimmed to the visible ones when read.

A view's SELECT list can be applied by its reader (``select``) rather than by a
project node before it: one hop less per write (planner/build.py decides).

The rows are a ``state.KeyedState``: in its dense form (a reader keyed on one int
column, one row a key) each column of the row of each key is kept in an array indexed
by key, where a big batch is applied with array operations and the row tuple is built
only when read: an update makes no tuple (a columnar batch is applied as its columns),
so there is none to compare, free, or for Python's young-generation collections to
walk.

Checkpoints (``checkpoint_form = "input"``, one port; runtime/checkpoints.py): the
state is exactly the multiset of rows kept, so a checkpoint is those rows, **as kept**:
after the SELECT list, with any hidden key and ORDER BY columns, before trimming.
``taken`` hands over each batch as kept (the SELECT list's output, not the message),
``contents`` every row kept, ``load_input`` keeps rows without applying the SELECT list
again; in the dense form the arrays are checkpointed instead, as a join side's are
(``array_state``: whole the first time, then the entries at the keys marked since).
"""
from __future__ import annotations

from typing import Any, Sequence

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..nan import canon, canon_row
from ..ordering import order_key
from .dense import DenseRows, KeyMarks, RowsDelta
from .operator import Operator
from .project import Project
from .state import KeyedState, expand


class Reader(Operator):
    kind = "reader"
    stateful = True
    leaf = True
    checkpoint_form = "input"

    def __init__(self, key: tuple[int, ...], visible: int, width: int,
                 order: Sequence[OrderKey] = (), select: Project | None = None) -> None:
        self.select = select        # the view's SELECT list, applied here (no node of its own)
        self.key = key
        self.width = width
        self.visible = visible
        self.trim = visible < width
        self.sort = order_key(order) if order else None
        #: subscriptions (noria_py/subscribe.py): told each batch applied, as kept, and
        #: told when the rows are lost
        self.listeners: list[Any] = []
        self.reset()

    def reset(self) -> None:
        for listener in list(self.listeners):
            listener.lost("its reader failed")
        self.state = KeyedState(self.width, self.key)
        self._exported = False      # whether the store holds the arrays as of the last export
        self._marks = KeyMarks()    # the keys the arrays changed since (``tracking``)
        self.kept = Batch()         # the last batch processed, as kept (after ``select``)

    def process(self, port: int, batch: Batch) -> Batch:
        if self.select is not None:
            batch = self.kept = self.select.process(0, batch)
        if batch:
            state = self.state
            keys, batch = state.prepare(batch)
            state.apply(keys, batch)
            if self.tracking and state.dense is not None:
                self._marks.add(keys, len(state.dense.present))
            for listener in self.listeners:
                listener.changed(batch)
        return Batch()

    # ------------------------------------------------------------ checkpoints

    def taken(self, port: int, batch: Batch) -> Batch:
        return batch if self.select is None else self.kept

    def load_input(self, port: int, batch: Batch) -> None:
        if batch:
            state = self.state
            state.apply(*state.prepare(batch))

    def contents(self) -> list[Batch]:
        return [self.state.snapshot()]

    def array_state(self, full: bool = True) -> dict[int, DenseRows | RowsDelta | None]:
        """As a join side's (``Join.array_state``)."""
        dense, marks = self.state.dense, self._marks
        self._marks = KeyMarks()
        if dense is None:
            self._exported = False
            return {}
        exported, self._exported = self._exported, True
        if full or not exported:
            return {0: dense.copy()}
        return {0: dense.changed(marks.take()) if marks else None}

    def load_array_state(self, port: int, rows: DenseRows) -> None:
        self.state.load_dense(rows)
        self._exported = True

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
        columns are kept for reads of the whole view. A NaN finds the NaN rows (any NaN
        object: it is made the one NaN, noria_py.nan)."""
        if type(key) is not int:
            if key is None or (type(key) is tuple and None in key):
                return []
            key = canon_row(key) if type(key) is tuple else canon(key)   # NaN finds NaN
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
        return self._finish(self.state.rows())

    def snapshot(self) -> Batch:
        return self.state.snapshot()
