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

Range parameters (``range_column``: a view's ``Query.bounds``, ``col > ?`` and the
like; sql_frontend/select.py): besides the state, the reader keeps a sorted index of
its rows, a ``SortedKeyList`` per equality key (the view's ``key`` values; ``()``
without one) over the range column, and ``range_lookup`` answers a read by a range
scan of it. Invariants, so that the scan answers as the filter ``col op value`` would
(ops/filter.py, noria_py/expression.py):

- the index holds exactly the state's rows, each copy, but those whose range column or
  an equality key column is NULL (a comparison with NULL is never TRUE, ``col = NULL``
  neither);
- NaN is above every other number and equal to itself, as the engine's FLOAT
  comparisons have it (noria_py/nan.py): the rows whose column is NaN are kept apart
  (``_Ranged.nans``), the others sorted by the column, and a read takes the NaN rows
  where its bounds pass NaN;
- it is derived state: None after a reset, a checkpoint's load (``load_input``,
  ``load_array_state``) and at first, built from the state's rows by the first range
  read and kept up to date by every batch from then on. So a recovery restores it as
  the rows are restored, and a view never read by range pays nothing for it.

A range reader is never partial (noria_py/partial.py: a range read would need every
key's rows). Reads of it take the database's lock (client.View): the first builds
the index, which a read outside the lock must not do while a write runs. A cluster
worker reads beside its message thread under a seqlock instead (runtime/cluster/
reads.py): an index such a read builds is kept only if no batch began meanwhile
(``range_lookup``'s ``unchanged``), and a batch reads ``_ranged`` once, so a read
that drops the index again never leaves a batch half indexed.

Partial (``make_partial``; noria_py/partial.py says when and how): the reader holds
only the keys it was asked for (``holes``, ops/holes.py: each held key's slot and the
bytes it is accounted at, measured when filled and, for a key written since, when the
manager next reads the total), and ``lookup`` answers None for any other key (a
hole): the caller fills it by an upquery (``fill``) and reads again. A batch's rows
under a hole are dropped here (a hole stays a hole), so the state is always exactly
the view's rows for the filled keys. The state is kept by slot (``KeyedState(...,
slots=True)``): in arrays while each key holds one row, so a held key costs what a
full reader's dense form costs a key and a batch is applied with array operations;
in a dict of buckets otherwise. A partial reader comes back from a crash or a reset
with no key filled: its checkpoints, whatever they hold, restore nothing
(``load_input`` drops every row, as ``process`` would).

A partial reader in the array form also keeps each held key's row as ``lookup``
answers it (a tuple trimmed to the visible columns, or None) in a list by slot
(``_rows``), so that a hit reads one list entry instead of building the tuple from
the arrays (about 0.3 µs of a 1 µs hit). Invariant: while ``_rows`` is not None, the
state is in the array form and ``_rows[s]`` is the row at every held slot ``s``. It is
written under the database's lock only, by the fill and by each write to held keys
(the touched slots' rows built again), never by a hit: a hit read outside the lock
(``View.lookup``'s seqlock) only reads it, so a race can make it read again but never
leaves a stale row behind.

Division by zero (``pg``: a keyed view whose plan divides as PostgreSQL does,
noria_py/divzero.py): a read by key fails (its answer is a row of markers) for every
key while the reader holds a row whose key is the marker (a row of markers whose key
was not kept: PostgreSQL, which could not tell that row's key without evaluating
what failed, fails every such read; a key of several columns fails the reads it could
be, each marker a wildcard), and for the key of a row whose hidden ``probe`` column
(added where the read names only the key: planner/poison.py) is the marker. Those
keys are counted in ``poisoned`` as the rows come and go (by ``process``, before a
partial reader drops what it does not hold), so a read without one pays a test of an
empty dict.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np
from sortedcontainers import SortedKeyList

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..divzero import DIV0
from ..nan import canon, canon_row, column_list
from ..ordering import order_key
from .dense import DenseRows, KeyMarks, RowsDelta, rows_by_key, slot_length
from .holes import Holes
from .operator import Operator
from .project import Project
from .state import KeyedState, expand

#: ``lookup_many`` of at least this many int keys reads a dense reader's arrays at once
DENSE_MANY = 32
#: a write to at least this many rows of held keys builds their cached rows from the
#: arrays at once (``_recache``) rather than one ``row`` call a key
RECACHE_ARRAYS = 16

#: bytes a held key costs besides its rows, its entry in ``holes`` and its cached row
#: (``_rows``): its last-read stamp (8, and the array's slack) and the key object the
#: slot map may hold; measured with tracemalloc (tests/test_memory.py)
ENTRY_OVERHEAD = 40


class Reader(Operator):
    kind = "reader"
    stateful = True
    leaf = True
    checkpoint_form = "input"
    #: whether this reader holds only the keys read (``make_partial``)
    partial = False
    #: the partial-state manager (noria_py/partial.py) while partial: its LRU of keys
    manager: Any = None
    #: while partial: the keys held, their slots in the state and their bytes
    holes: Holes
    #: while partial: the partial operators above it whose keys are its keys, each with
    #: its output columns holding the key (noria_py/partial.py)
    path: list = []

    def __init__(self, key: tuple[int, ...], visible: int, width: int,
                 order: Sequence[OrderKey] = (), select: Project | None = None,
                 pg: bool = False, probe: int | None = None,
                 range_column: int | None = None) -> None:
        self.select = select        # the view's SELECT list, applied here (no node of its own)
        #: the column of the view's range parameters (None: a view without), and the
        #: sorted index of the rows over it (module docstring; None until a range read)
        self.range_column = range_column
        self._ranged: dict[Any, _Ranged] | None = None
        self.key = key
        #: reads by key see the rows of markers (the module docstring)
        self.pg = pg and bool(key)
        self.probe = probe
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
        self._ranged = None
        #: key -> rows held whose read fails (the module docstring)
        self.poisoned: dict = {}
        self._exported = False      # whether the store holds the arrays as of the last export
        self._marks = KeyMarks()    # the keys the arrays changed since (``tracking``)
        #: the last batch processed, as kept (after ``select``), until ``taken``
        self.kept = Batch()
        if self.partial:
            self._empty_partial()

    # ------------------------------------------------------------ partial state

    @property
    def filled(self) -> Mapping:
        """While partial: the keys held, each to the bytes it is accounted at."""
        return self.holes.filled

    def make_partial(self, manager: Any) -> None:
        """Hold only the keys read from now on; ``manager`` keeps the LRU order of
        every partial reader's keys and their accounted bytes (``partial.Partial``)."""
        self.partial = True
        self.manager = manager
        self._tick = manager.tick
        self.holes = Holes(manager)
        self._empty_partial()

    def slot_arrays(self) -> list[np.ndarray | list]:
        """Its arrays by slot (partial): the stamps, the cached rows, the state's
        arrays while it is in that form (``Holes.fixed_bytes`` counts their spare
        entries)."""
        out: list[np.ndarray | list] = [self.stamps]
        if self._rows is not None:
            out.append(self._rows)
        if self.state.dense is not None:
            out.extend(self.state.dense.arrays())
        return out

    def _empty_partial(self) -> None:
        """No key held (all holes): the state emptied, each key's bytes given back to
        the manager, and ``lookup`` the partial one. The state is kept by slot
        (ops/holes.py): in arrays while each key holds one row, in a dict otherwise."""
        if self.holes.n:                # (the partial operators above lose them too)
            self.manager.lost(self)
        self.holes.clear()
        self.state = KeyedState(self.width, self.key, slots=True)
        #: slot -> the row ``lookup`` answers there, while the state is in arrays
        #: (the module docstring); None: read the state
        self._rows: list[tuple | None] | None = None
        #: slot -> its key's last-read stamp (``manager.tick``; 0: a free slot), the
        #: manager's LRU order (partial.py, rule 5)
        self.stamps = np.zeros(0, dtype=np.int64)
        self.lookup = self._lookup_partial      # type: ignore[method-assign,assignment]

    def _lookup_partial(self, key) -> list[tuple] | None:
        """``lookup``, or None where ``key`` is a hole (the caller upqueries: ``fill``)."""
        if type(key) is not int:
            if key is None or (type(key) is tuple and None in key):
                return []
            key = canon_row(key) if type(key) is tuple else canon(key)
        if self.poisoned and self._fails(key):
            return [(DIV0,) * self.visible]
        holes = self.holes
        if type(key) is int:            # (``Holes.slot``, its common case inline)
            km = holes.keymap
            m = km._map
            slot = m.item(key) if 0 <= key < len(m) else km.slot(key)
            held = holes._held
            if slot < 0 or slot >= len(held) or not held.item(slot):
                return None
        else:
            slot = holes.slot(key)
            if slot < 0:
                return None
        # (outside the lock, a key evicted meanwhile: View.lookup's seqlock reads again
        # under the lock; a stamp left at a free slot is passed over by eviction)
        self.stamps[slot] = self._tick()
        rows = self._rows
        if rows is not None:            # (the row as answered, kept by slot)
            row = rows[slot]
            return [] if row is None else [row]
        return self._rows_at(slot)

    def fill(self, key, batch: Batch) -> list[tuple]:
        """Fill the hole ``key`` with ``batch``, its rows as this reader's parent sends
        them (an upquery's answer); the rows of ``key`` now held."""
        if type(key) is not int:
            key = canon_row(key) if type(key) is tuple else canon(key)
        slot = self.holes.add(key)
        stamps = self.stamps
        if slot >= len(stamps):
            grown = np.zeros(slot_length(slot), dtype=np.int64)
            grown[:len(stamps)] = stamps
            self.stamps = stamps = grown
        stamps[slot] = self._tick()
        if self.select is not None:
            batch = self.select.process(0, batch)
        if batch:                       # (every row is the key's: no test a row)
            self._apply_held(batch, [slot] * len(batch))
        else:
            self._recache([slot])
        self.holes.dirty.discard(key)
        self._measure(key)
        return self._rows_at(slot)

    def evict(self, key) -> int:
        """Make ``key`` a hole again; the bytes its entry was accounted at."""
        slot, size = self.holes.remove(key)
        if slot >= 0:
            self.state.drop(slot)
            self.stamps[slot] = 0
            rows = self._rows
            if rows is not None:
                rows[slot] = None
        return size

    def settle(self) -> None:
        """Measure the held keys written since they were last measured."""
        holes = self.holes
        dirty, holes.dirty = holes.dirty, set()
        for k in dirty:
            if k in holes:
                self._measure(k)

    def _measure(self, key) -> None:
        holes = self.holes
        slot = holes.slot(key)
        size = holes.entry_bytes(key) + self.state.entry_bytes(slot) + ENTRY_OVERHEAD
        rows = self._rows
        if rows is not None:            # its entry in ``_rows``, and the tuple there
            row = rows[slot]
            size += 8 if row is None else 8 + _tuple_bytes(row)
        holes.measure(key, size, slot)

    def _recache(self, slots: np.ndarray | list[int]) -> None:
        """The rows ``lookup`` answers at ``slots`` (held, just written) built again
        into ``_rows``; every held slot's where ``_rows`` is new (the state has just
        come to the array form), and ``_rows`` None where the state is not in it."""
        dense = self.state.dense
        if dense is None:
            self._rows = None
            return
        holes = self.holes
        rows = self._rows
        if rows is None:
            rows = [None] * holes._top
            slots = [holes.slot(k) for k in holes.keys()]
        else:
            if len(rows) < holes._top:
                rows = rows + [None] * (slot_length(holes._top - 1) - len(rows))
            if len(slots) >= RECACHE_ARRAYS:    # (a big batch: gathered from the arrays)
                at = np.unique(np.asarray(slots, dtype=np.int64))
                hit, parts = dense.gather(at)
                if self.trim:
                    parts = parts[:self.visible]
                built = zip(*[column_list(part) for part in parts])
                for s, h in zip(at.tolist(), hit.tolist()):
                    rows[s] = next(built) if h else None
                self._rows = rows
                return
            if isinstance(slots, np.ndarray):
                slots = np.unique(slots).tolist()
        row = dense.row
        if self.trim:
            v = self.visible
            for s in slots:
                r = row(s)
                rows[s] = None if r is None else r[:v]
        else:
            for s in slots:
                rows[s] = row(s)
        self._rows = rows               # (a new list, where grown: whole when seen)

    def _apply_held(self, batch: Batch, given: list[int] | None = None) -> Batch:
        """Apply the rows of ``batch`` under held keys (writes to holes stop here), or,
        ``given`` their slots, every row of it; those rows."""
        holes = self.holes
        slots: np.ndarray | list[int]
        if given is None:
            batch, slots = holes.select(batch, self.key, self.state._keyf)
        else:
            slots = given
        if batch:
            state = self.state
            layout = state.layout()
            keys, batch = state.prepare_slots(slots, batch)
            state.apply(keys, batch)
            holes.touched_slots(slots)
            if state.layout() != layout:
                holes.touched_all()
                self._rows = None       # (built again whole, or dropped: not arrays)
            self._recache(slots)
        return batch

    def _rows_at(self, slot: int) -> list[tuple]:
        """The rows held at ``slot`` (partial)."""
        dense = self.state.dense
        bucket = dense.row(slot) if dense is not None else self.state._index.get(slot)
        if bucket is None:
            return []
        if type(bucket) is tuple:
            return [bucket[:self.visible]] if self.trim else [bucket]
        out: list[tuple] = []
        expand(bucket, out)
        return self._finish(out)

    def _count_poisoned(self, batch: Batch) -> None:
        """Count the keys of ``batch``'s rows whose read fails (the module docstring)."""
        if batch.cols and all(c.dtype != object for c in batch.cols):
            return                      # (int64 and float64 columns hold no marker)
        keyf, probe, poisoned = self.state._keyf, self.probe, self.poisoned
        for r, s in zip(batch.rows, batch.signs):
            k = keyf(r)
            if k is DIV0 or (type(k) is tuple and DIV0 in k) \
                    or (probe is not None and r[probe] is DIV0):
                n = poisoned.get(k, 0) + s
                if n:
                    poisoned[k] = n
                else:
                    del poisoned[k]

    def _fails(self, key) -> bool:
        """Whether a read of ``key`` meets a row whose read fails (``poisoned``)."""
        for k in self.poisoned:
            if k is DIV0 or k == key:
                return True
            if type(k) is tuple and type(key) is tuple and len(k) == len(key) and all(
                    a is DIV0 or a == b for a, b in zip(k, key)):
                return True
        return False

    def process(self, port: int, batch: Batch) -> Batch:
        if self.select is not None:
            batch = self.select.process(0, batch)
            if self.tracking:           # for ``taken``, which lets go of it
                self.kept = batch
        if self.pg and batch:
            self._count_poisoned(batch)
        if batch and self.partial:
            batch = self._apply_held(batch)
            if self.select is not None and self.tracking:
                self.kept = batch
            if batch:
                for listener in self.listeners:
                    listener.changed(batch)
            return Batch()
        if batch:
            state = self.state
            keys, batch = state.prepare(batch)
            state.apply(keys, batch, marks=self._marks if self.tracking else None)
            ranged = self._ranged       # (read once: a cluster's read thread may drop it)
            if ranged is not None:
                self._index(ranged, batch.rows, batch.signs)
            for listener in self.listeners:
                listener.changed(batch)
        return Batch()

    # ------------------------------------------------------------ checkpoints

    def taken(self, port: int, batch: Batch) -> Batch:
        if self.select is None:
            return batch
        kept, self.kept = self.kept, Batch()    # (not held on to: it may be a whole snapshot)
        return kept

    def load_input(self, port: int, batch: Batch) -> None:
        if self.pg and batch:
            self._count_poisoned(batch)
        if self.partial:
            self._apply_held(batch)
        elif batch:
            state = self.state
            state.apply(*state.prepare(batch))
            self._ranged = None         # (built again from the rows by the next range read)

    def contents(self) -> list[Batch]:
        return [self.state.snapshot()]

    def array_state(self, full: bool = True) -> dict[int, DenseRows | RowsDelta | None]:
        """As a join side's (``Join.array_state``)."""
        dense, marks = self.state.dense, self._marks
        if dense is None or self.partial:       # (kept by slot: no checkpoint)
            self._exported = False
            marks.clear()
            return {}
        exported, self._exported = self._exported, True
        if full or not exported:
            marks.clear()
            return {0: dense.copy()}
        return {0: dense.changed(marks.take()) if marks else None}

    def load_array_state(self, port: int, rows: DenseRows) -> None:
        self.state.load_dense(rows)
        self._ranged = None
        self._exported = True
        if self.pg:                     # (a probe column the marker: counted again)
            self.poisoned = {}
            self._count_poisoned(self.state.snapshot())

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
        if self.poisoned and self._fails(key):
            return [(DIV0,) * self.visible]
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

    # ------------------------------------------------------------ range parameters

    def _index(self, index: dict[Any, "_Ranged"], rows: Sequence[tuple],
               signs: Sequence[int]) -> None:
        """Apply rows (added ``sign`` times, or removed) to the sorted ``index``."""
        c = self.range_column
        assert c is not None
        key = self.key
        one = key[0] if len(key) == 1 else None
        for row, sign in zip(rows, signs):
            v = row[c]
            if v is None:
                continue
            if one is not None:
                k = row[one]
                if k is None:
                    continue
            elif key:
                k = tuple([row[i] for i in key])
                if None in k:
                    continue
            else:
                k = ()
            found = index.get(k)
            if found is None:
                if sign < 0:
                    continue
                found = index[k] = _Ranged(c)
            into = found.nans if v != v else found.sorted
            if sign > 0:
                for _ in range(sign):
                    into.add(row) if into is found.sorted else into.append(row)
            else:
                for _ in range(-sign):
                    into.discard(row) if into is found.sorted else into.remove(row)
                if not found.sorted and not found.nans:
                    del index[k]

    def range_lookup(self, key: Any, bounds: Sequence[tuple[str, Any]],
                     unchanged: Callable[[], bool] | None = None) -> list[tuple]:
        """The rows of equality key ``key`` (``()`` for a view without one; a tuple for a
        compound one) whose range column compares with every ``(op, value)`` of
        ``bounds`` as SQL's ``col op value`` would (the module docstring): a range scan
        of the sorted index, sorted by the view's ORDER BY, trimmed to the visible
        columns. A NULL anywhere finds nothing.

        ``unchanged``: for a read made beside the thread that applies the batches (a
        cluster worker's read thread, under its seqlock: runtime/cluster/reads.py),
        whether no batch began meanwhile; an index built by such a read is kept only
        if so, since a batch that found no index did not go into it."""
        if key is None or (type(key) is tuple and None in key):
            return []
        if self.key:
            key = canon_row(key) if type(key) is tuple else canon(key)
        else:
            key = ()
        lo: tuple[Any, bool] | None = None      # (value, inclusive) over the numbers
        hi: tuple[Any, bool] | None = None
        numbers = True                          # whether any non-NaN value may pass
        nans = True                             # whether a NaN passes
        for op, value in bounds:
            if value is None:
                return []
            if value != value:                  # NaN: above every other number
                numbers = numbers and op in ("<", "<=")
                nans = nans and op in (">=", "<=")
            elif op == ">" or op == ">=":   # (NaN passes: above every number)
                if lo is None or value > lo[0] or (value == lo[0] and op == ">"):
                    lo = (value, op == ">=")
            else:
                nans = False
                if hi is None or value < hi[0] or (value == hi[0] and op == "<"):
                    hi = (value, op == "<=")
        if lo is not None and hi is not None and (
                lo[0] > hi[0] or (lo[0] == hi[0] and not (lo[1] and hi[1]))):
            numbers = False
        index = self._ranged
        if index is None:
            index = {}
            rows = self.state.rows()
            self._index(index, rows, [1] * len(rows))
            self._ranged = index
            if unchanged is not None and not unchanged():
                self._ranged = None     # (a batch may have missed it: built again later)
        found = index.get(key)
        if found is None:
            return []
        out = list(found.sorted.irange_key(None if lo is None else lo[0],
                                           None if hi is None else hi[0],
                                           (True if lo is None else lo[1],
                                            True if hi is None else hi[1]))) if numbers else []
        if nans and found.nans:
            out += found.nans
        return self._finish(out)

    def lookup_many(self, keys: list) -> list[list[tuple]]:
        """``lookup`` of each key. In the dense form, many int keys are read with array
        operations (``dense_parts``): no Python call per key, about 4× less time a key."""
        found = self.dense_parts(keys)
        if found is not None:
            hit, parts = found
            return rows_by_key(hit, [column_list(p) for p in parts])
        lookup = self.lookup
        return [lookup(k) for k in keys]

    def dense_parts(self, keys: list | np.ndarray) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """For many int ``keys`` (or an int64 array of them, any length) of a reader in
        the dense form (at most one row a key): which keys hold a row, and the columns
        of those rows, as ``lookup`` gives them (the key in its place, trimmed to the
        visible columns); ``rows_by_key`` makes them rows. None where that form does not
        apply: ``lookup`` each key. A cluster's worker sends these columns to the client
        as they are (runtime/cluster/reads.py)."""
        dense = self.state.dense
        if dense is None or self.partial or self.poisoned:
            return None
        if isinstance(keys, np.ndarray):
            at = keys.astype(np.int64, copy=False)
        elif len(keys) < DENSE_MANY or not set(map(type, keys)) <= {int}:
            return None
        else:
            try:
                at = np.array(keys, dtype=np.int64)
            except OverflowError:           # (an int past 64 bits: no row has it)
                return None
        size = len(dense.present)
        inside = np.where((at >= 0) & (at < size), at, size)    # (size: no row)
        hit, parts = dense.gather(inside)
        if dense.key is not None:
            parts[dense.key] = inside[hit]
        if self.trim:
            parts = parts[:self.visible]
        return hit, parts

    def all(self) -> list[tuple]:
        return self._finish(self.state.rows())

    def snapshot(self) -> Batch:
        return self.state.snapshot()


class _Ranged:
    """The rows of one equality key in a range reader's index: those whose range column
    is a number or other value sorted by it (``itemgetter``: a key function in C, not
    a Python call a row), and those where it is NaN, which sorts above every other
    number and equals itself, so they are one block, kept apart in a list."""

    __slots__ = ("sorted", "nans")

    def __init__(self, column: int) -> None:
        self.sorted = SortedKeyList(key=itemgetter(column))
        self.nans: list[tuple] = []


def _tuple_bytes(row: tuple) -> int:
    """Bytes of a row tuple built from arrays: the tuple and the numbers made for it
    (an object column's values are the arrays' own)."""
    size = sys.getsizeof(row)
    for v in row:
        if type(v) is int or type(v) is float:
            size += sys.getsizeof(v)
    return size
