"""GROUP BY with COUNT, SUM and AVG (and MIN/MAX beside them, see extremum.py).

State is one entry per group, indexed by the group key (the key a sharded aggregate
is partitioned on). A batch updates the groups it touches, then emits, per touched
group, the retraction of its old output row and the insertion of its new one, so
downstream sees at most two rows per group per batch. COUNT(*) or COUNT(x) alone over
one column, the vote workload's shape, keeps only a count per group
(``state.KeyedCounts``: an array indexed by key while the keys are small ints, where a
columnar batch is counted with array operations only), and for COUNT(x) the rows
whose x is NULL per group, kept apart because that is almost always empty.

A checkpoint holds an entry per group (``checkpoint_form = "keyed"``): (row count,
accumulators...), or (count, NULL count) for COUNT alone; the groups changed since the
last export are tracked, while ``tracking`` is on (checkpoints are), as a set of keys
per batch. The accumulators are **shared** with the checkpoint, not copied (copy on
write): a group handed to a checkpoint, or taken back from one, is not in ``owned``, and
the first batch that changes it afterwards copies its accumulators first, so a
checkpoint's entries never change. MIN and MAX keep every value of a group, so their
state grows with the data: a restore takes the entries as they are (a dict entry per
group, no value copied), and a group is copied, once per checkpoint interval, only if
it changes. While COUNT's counts are an array, the keys a batch touched are marked
beside it instead (``dense.KeyMarks``: each batch's keys held, marked in a bool array
at the export), and
an export is the counts at the marked keys (``CountsDelta``; the whole array,
``DenseCounts``, the first time). Every key changed since the last export is in the set
or marked, so an export holds every change, whichever form the counts moved to in
between.

Partial (``make_partial``; noria_py/partial.py says when): only the groups read are
held (``holes``, ops/holes.py); a batch's rows of other groups are dropped on arrival.
COUNT alone keeps its counts by slot (an array as long as the keys held, not the key
range): a columnar batch is filtered and counted with array operations, and the
groups touched mapped back to their keys for the output. Other aggregates keep their
groups in the dict, under their keys. No checkpoint is taken: a partial aggregate
comes back all holes.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from sql_frontend.plan import AggCall

from .. import tuning
from ..batch import Batch
from ..memory import deep_size
from ..nan import column_list
from . import accumulators
from .dense import KeyMarks
from .holes import HeldKeys, Holes
from .operator import Operator
from .state import CountsDelta, DenseCounts, KeyedCounts, bare_key, tuple_key

#: bytes a held group (not COUNT alone) costs besides its key and its entry: its slot
#: in the groups' dict and its entry in ``holes`` (measured with tracemalloc,
#: tests/test_partial.py). COUNT alone keeps its counts by slot, in an array
#: (``Holes``: a held key costs its count, 8 bytes and the array's slack, and its entry
#: there)
GROUP_OVERHEAD = 100


def _count_batch(keys: np.ndarray, old: np.ndarray, new: np.ndarray) -> Batch:
    """COUNT's output for the groups touched (``KeyedCounts.add`` of arrays) when no
    NULL is counted apart: per group whose count moved, -old then +new, as columns."""
    moved = old != new
    keys, old, new = keys[moved], old[moved], new[moved]
    keep = np.stack([old > 0, new > 0], axis=1).ravel()
    out_keys = np.repeat(keys, 2)[keep]
    out_counts = np.stack([old, new], axis=1).ravel()[keep]
    out_signs = np.tile(np.array([-1, 1], dtype=np.int64), len(keys))[keep]
    return Batch.columnar([out_keys, out_counts], out_signs)


class Aggregate(Operator, HeldKeys):
    kind = "aggregate"
    stateful = True
    checkpoint_form = "keyed"
    inputs_join = True
    #: while partial: the groups held (the rest are holes)
    holes: Holes | None = None
    #: while partial: the partial reader below (noria_py/partial.py)
    owner: Any = None

    def __init__(self, group_by: tuple[int, ...], aggs: tuple[AggCall, ...],
                 pg: bool = False, probe: int | None = None) -> None:
        self.group_by = group_by
        self.aggs = aggs
        #: over a plan that divides as PostgreSQL does: COUNT is the marker while its
        #: group holds one (``accumulators.PgCount``), COUNT(*) told by column ``probe``
        #: (planner/poison.py, ``count_probe``)
        self.pg, self.probe = pg, probe
        # COUNT(*) or COUNT(x) alone over one group column: the vote workload's shape
        self.count_only = (len(aggs) == 1 and len(group_by) == 1 and not aggs[0].distinct
                           and aggs[0].func in ("count_star", "count") and not pg)
        self.args = [probe if pg and a.func == "count_star" else a.arg for a in aggs]
        self._key = tuple_key(group_by)
        self.reset()

    def reset(self) -> None:
        #: group key tuple -> [row count, accumulator, ...] (not count_only); a group
        #: shared with a checkpoint is its entry there, a tuple, until it changes
        self.groups: dict = {}
        #: groups whose accumulators this operator may change in place (the others'
        #: are shared with a checkpoint: copied before their first change)
        self.owned: set = set()
        #: count_only: rows per group key value
        self.counts = KeyedCounts()
        if self.holes is not None:          # (kept by slot: small while few are held)
            self.counts.by_slot = True
        #: count_only COUNT(x): key value -> rows whose x is NULL
        self.nulls: dict = {}
        if not self.group_by:
            self.groups[()] = self._new_group()
            self.owned.add(())
        #: keys changed since the last export (but for COUNT's counts in an array)
        self._changed: set = set()
        #: COUNT's keys changed since the last export while its counts were an array
        self._marks = KeyMarks()
        #: whether COUNT(x) held NULL counts at the last export (then an export says
        #: which of the keys it holds have none any more)
        self._nulls_exported = False
        if self.holes is not None:          # partial: every group a hole now, and the
            self.holes.clear()              # reader's keys go with them
            self.holes.manager.lost(self.owner)

    # ------------------------------------------------------------ partial state

    def slot_arrays(self) -> list[np.ndarray | list]:
        """Its arrays by slot (partial): COUNT's counts while in that form."""
        return [] if self.counts.dense is None else [self.counts.dense]

    def make_partial(self, manager: Any, owner: Any) -> None:
        """Hold only the groups filled from now on (the module docstring); ``owner``:
        the partial reader below, whose keys these groups are."""
        self.partial = True
        self.owner = owner
        self.holes = Holes(manager, owner)
        self.counts.by_slot = True
        self._held_key = bare_key(self.group_by) if self.count_only else self._key

    def fill(self, key: Any, batch: Batch) -> Batch:
        """Fill the hole ``key`` (a group key as kept: the bare value for COUNT alone,
        else a tuple) with ``batch``, every input row of that group; the group's output
        row, as a batch of one insertion (or none)."""
        holes = self.holes
        assert holes is not None
        slot = holes.add(key)
        if self.count_only:             # (every row is the key's: no test a row)
            out = self._process_counts(batch, [slot] * len(batch)) if batch else Batch()
        else:
            out = self.process(0, batch)
        self._measure(key)
        return out

    def evict(self, key: Any) -> int:
        """Make the group ``key`` a hole again; the bytes it was accounted at."""
        assert self.holes is not None
        slot, size = self.holes.remove(key)
        if self.count_only:
            if slot >= 0:
                self.counts.drop(slot)
            self.nulls.pop(key, None)
        else:
            self.groups.pop(key, None)
            self.owned.discard(key)
        return size

    def _measure(self, key: Any) -> None:
        holes = self.holes
        assert holes is not None
        if self.count_only:             # a count in the array (by slot), and its slack
            size = holes.entry_bytes(key) + 16
            if key in self.nulls:
                size += 100
        else:
            size = deep_size(key) + deep_size(self.groups.get(key)) + GROUP_OVERHEAD
        holes.measure(key, size)

    def computed(self, batch: Batch) -> Batch:
        """The output of a full aggregate like this one over ``batch`` (every input
        row): what ``View.all`` of a partial view reads (nothing is filled)."""
        full = type(self)(self.group_by, self.aggs, self.pg, self.probe)
        full.process(0, batch)
        return full.snapshot()

    def _new_group(self) -> list:
        return [0] + [accumulators.make(a, self.pg) for a in self.aggs]

    def _output(self, key: tuple, g: list) -> tuple | None:
        if g[0] <= 0 and self.group_by:
            return None
        return key + tuple(acc.value() for acc in g[1:])

    def process(self, port: int, batch: Batch) -> Batch:
        holes = self.holes
        if holes is not None:           # partial: rows of groups that are holes stop here
            if self.count_only:         # (a count's bytes do not change: not measured again)
                batch, slots = holes.select(batch, self.group_by, self._held_key)
                return self._process_counts(batch, slots) if batch else Batch()
            batch = holes.keep(batch, self.group_by, self._held_key, False)
            if not batch:
                return Batch()
            holes.touched(batch.rows, self._held_key)
            return self._process(batch)
        if self.count_only:
            return self._process_counts(batch)
        return self._process(batch)

    def _process(self, batch: Batch) -> Batch:
        groups, owned = self.groups, self.owned
        touched: dict[tuple, tuple | None] = {}
        keyf = self._key
        args = self.args
        for r, s in zip(batch.rows, batch.signs):
            k = keyf(r)
            g = groups.get(k)
            if g is None:
                g = groups[k] = self._new_group()
                owned.add(k)
                if k not in touched:
                    touched[k] = None
            elif k not in touched:
                touched[k] = self._output(k, g)
                if k not in owned:              # shared with a checkpoint: copy first
                    g = groups[k] = [g[0], *[acc.copy() for acc in g[1:]]]
                    owned.add(k)
            g[0] += s
            for i, a in enumerate(args, 1):
                g[i].update(1 if a is None else r[a], s)
        if self.tracking:
            self._changed.update(touched)
        out = Batch()
        for k, old in touched.items():
            g = groups[k]
            new = self._output(k, g)
            if g[0] == 0 and self.group_by:
                del groups[k]
            if old != new:
                if old is not None:
                    out.add(old, -1)
                if new is not None:
                    out.add(new, 1)
        return out

    def _process_counts(self, batch: Batch, slots: np.ndarray | list | None = None) -> Batch:
        """COUNT alone; partial: the counts are kept by slot, ``slots`` the slot of each
        row (``Holes.select``), and the keys touched are mapped back to keys."""
        g = self.group_by[0]
        a = self.args[0]
        nulls = self.nulls
        cols = batch.cols
        before: dict = {}       # key -> its NULL count before the batch, where it moves
        if (cols is not None and cols[g].dtype == np.int64
                and (a is None or cols[a].dtype != object)):   # no NULL to count apart
            changes = self.counts.add(cols[g] if slots is None else np.asarray(slots),
                                      batch.sign_array)  # type: ignore[arg-type]  # columnar
        elif not batch:
            return Batch()
        else:
            rows = batch.rows
            keys = [r[g] for r in rows]
            if a is not None:
                for k, r, s in zip(keys, rows, batch.signs):
                    if r[a] is None:
                        held = nulls.get(k, 0)
                        if k not in before:
                            before[k] = held
                        nulls[k] = held + s
            changes = self.counts.add(keys if slots is None else list(slots), batch.signs)
        holes = self.holes
        if slots is not None and holes is not None:     # slots touched -> their keys
            t = changes[0]
            back = (holes.keys_of(t) if isinstance(t, np.ndarray)
                    else list(map(holes.key_at, t)))
            changes = (back, changes[1], changes[2])  # type: ignore[assignment]
        if self.tracking:
            t = changes[0]
            dense = self.counts.dense
            if dense is not None:
                # (``add``'s keys come ascending: the last is the largest)
                self._marks.add(t, int(t[-1]) + 1 if slots is None and isinstance(
                    t, np.ndarray) and len(t) else len(dense))
            else:
                self._changed.update(t.tolist() if isinstance(t, np.ndarray) else t)
        if isinstance(changes[0], np.ndarray):     # (then all three are arrays)
            touched, old, new = changes
            # (a NULL count is kept, at 0 too, while its group is; a partial COUNT's
            # few groups, a fill's one, cost less as rows than as ten array operations)
            if not nulls and touched.dtype == np.int64 and (
                    slots is None or len(touched) >= tuning.ARRAY_MIN):
                return _count_batch(touched, old, new)
            return self._count_changes(column_list(touched), old.tolist(), new.tolist(),
                                       before)
        return self._count_changes(*changes, before)

    def _count_changes(self, keys: list, old: list, new: list, before: dict) -> Batch:
        """COUNT's output for each group touched (rows before and after; ``before``:
        the NULL count before the batch of the groups where it moved): the old row
        retracted and the new one inserted, where they differ. A group gone keeps no
        NULL count."""
        nulls = self.nulls
        rows: list[tuple] = []
        signs: list[int] = []
        for k, old_rows, new_rows in zip(keys, old, new):
            held = nulls.get(k, 0) if nulls else 0
            old_value = old_rows - before.get(k, held) if before else old_rows - held
            new_value = new_rows - held
            if new_rows == 0 and nulls:
                nulls.pop(k, None)      # (a NULL count that went to 0 in transit too)
            if old_rows > 0 and new_rows > 0 and old_value == new_value:
                continue
            if old_rows > 0:
                rows.append((k, old_value))
                signs.append(-1)
            if new_rows > 0:
                rows.append((k, new_value))
                signs.append(1)
        return Batch(rows, signs)

    def snapshot(self) -> Batch:
        if self.count_only and self.holes is not None:     # (kept by slot)
            key_at, nulls = self.holes.key_at, self.nulls
            return Batch([(k, c - nulls.get(k, 0)) for k, c in
                          ((key_at(int(s)), c) for s, c in self.counts.items())  # type: ignore[call-overload]
                          if c > 0])
        if self.count_only:
            held = None if self.nulls else self.counts.positive()
            if held is not None:
                keys, counts = held
                return Batch.columnar([keys, counts], np.ones(len(keys), dtype=np.int64))
            nulls = self.nulls
            return Batch([(k, c - nulls.get(k, 0)) for k, c in self.counts.items() if c > 0])
        out = Batch()
        for k, g in self.groups.items():
            row = self._output(k, g)
            if row is not None:
                out.add(row)
        return out

    def group_rows(self, key: tuple | None) -> Batch:
        """The output row of the group ``key`` (its group-by values, in ``group_by``
        order), as a batch of at most one insertion: an upquery's answer (partial.py).
        ``key`` None: every row (``snapshot``)."""
        if key is None:
            return self.snapshot()
        if self.count_only:
            c = self.counts.get(key[0] if self.holes is None else self.holes.slot(key[0]))
            if c > 0:
                return Batch([(key[0], c - self.nulls.get(key[0], 0))], [1])
            return Batch()
        g = self.groups.get(key)
        row = None if g is None else self._output(key, g)
        return Batch() if row is None else Batch([row], [1])

    # ------------------------------------------------------------ checkpoints

    def export_state(self, changed_only: bool) -> dict | DenseCounts | CountsDelta:
        if not self.count_only:
            groups = self.groups
            touched = self._changed if changed_only else groups
            shared = {k: _share_group(groups.get(k)) for k in touched}
            if changed_only:
                self.owned.difference_update(touched)
            else:
                self.owned = set()
            self._changed = set()
            return shared
        counts, nulls = self.counts, self.nulls
        dense = counts.dense
        changed, self._changed = self._changed, set()
        moved = self._marks.take()
        nulls_before, self._nulls_exported = self._nulls_exported, bool(nulls)
        if dense is not None:
            if not changed_only:            # whole, at memory speed
                return DenseCounts(dense.copy(), dict(nulls))
            null_counts = ({k: nulls.get(k, 0) for k in moved.tolist()}
                           if nulls or nulls_before else {})
            return CountsDelta(len(dense), moved, dense[moved], null_counts)
        keys: Iterable = ((k for k, _ in counts.items()) if not changed_only
                          else changed.union(moved.tolist()))
        out: dict = {}
        for k in keys:
            c = counts.get(k)
            out[k] = (c, nulls.get(k, 0)) if c else None
        return out

    def load_state(self, entries: dict | DenseCounts) -> None:
        """(A ``DenseCounts`` is taken over, not copied: ``CheckpointStore.latest`` gives
        copies.) A partial aggregate takes nothing: it comes back all holes."""
        self.reset()
        if self.holes is not None:
            return
        if isinstance(entries, DenseCounts):
            self.counts.dense = entries.counts
            self.nulls = dict(entries.nulls)
            self._nulls_exported = bool(self.nulls)
            return
        if not self.count_only:
            # the entries themselves, shared: each is copied (into a list) before it
            # changes; no accumulator is copied here
            self.groups = {k: e for k, e in entries.items() if e is not None}
            self.owned = set()
            return
        keys = list(entries)
        if keys:
            self.counts.add(keys, [e[0] for e in entries.values()])
        self.nulls = {k: e[1] for k, e in entries.items() if e[1]}
        self._nulls_exported = bool(self.nulls)

    def describe(self) -> str:
        calls = ", ".join(f"{a.func}{'(distinct)' if a.distinct else ''}({'' if a.arg is None else a.arg})"
                          for a in self.aggs)
        return f"{self.kind} by {list(self.group_by)}: {calls}"


def _share_group(g: list | None) -> tuple | None:
    """A group's entry in a checkpoint: (row count, its accumulators), which the
    operator no longer changes in place (``owned``)."""
    if g is None:
        return None
    return tuple(g)
