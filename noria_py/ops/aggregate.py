"""GROUP BY with COUNT, SUM and AVG (and MIN/MAX beside them, see extremum.py).

State is one entry per group, indexed by the group key (the key a sharded aggregate
is partitioned on). A batch updates the groups it touches, then emits, per touched
group, the retraction of its old output row and the insertion of its new one, so
downstream sees at most two rows per group per batch. COUNT(*) or COUNT(x) alone over
one column, the vote workload's shape, runs on a plain dict of counts, or, while the
group keys are small non-negative ints, on an array of counts indexed by key, where a
columnar batch is counted with array operations only (one shard's array spans every
key up to the largest it has seen: at most DENSE_LIMIT entries, 32 MiB).
"""
from __future__ import annotations

import numpy as np

from sql_frontend.plan import AggCall

from ..batch import Batch
from . import accumulators
from .operator import Operator
from .base import COLUMNAR_MIN
from .dense import DENSE_LIMIT, grown_size
from .state import tuple_key


def _net_by_key(keys: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of a batch, sorted, and the sum of the signs of each."""
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv, weights=signs, minlength=len(uniq)).astype(np.int64)


def _count_changes(changes: list[tuple]) -> Batch:
    """COUNT's output for (key, rows before, count before, rows after, count after) per
    group touched: the old row retracted and the new one inserted, where they differ."""
    rows: list[tuple] = []
    signs: list[int] = []
    for k, old_rows, old_value, new_rows, new_value in changes:
        if old_rows > 0 and new_rows > 0 and old_value == new_value:
            continue
        if old_rows > 0:
            rows.append((k, old_value))
            signs.append(-1)
        if new_rows > 0:
            rows.append((k, new_value))
            signs.append(1)
    return Batch(rows, signs)


class Aggregate(Operator):
    kind = "aggregate"
    stateful = True

    def __init__(self, group_by: tuple[int, ...], aggs: tuple[AggCall, ...]) -> None:
        self.group_by = group_by
        self.aggs = aggs
        # COUNT(*) or COUNT(x) alone over one group column: the vote workload's shape
        self.count_only = (len(aggs) == 1 and len(group_by) == 1 and not aggs[0].distinct
                           and aggs[0].func in ("count_star", "count"))
        self.args = [a.arg for a in aggs]
        self._key = tuple_key(group_by)
        self.reset()

    def reset(self) -> None:
        # group key tuple -> [row count, accumulator, ...]
        # (count_only: key value -> row count, and for COUNT(x) key value -> NULL x count,
        # kept apart because it is almost always empty: one random access per row, not two)
        self._groups: dict = {}
        self.nulls: dict = {}
        # count_only over small non-negative int keys: counts in an array indexed by key
        # (0 = no group), until a batch needs the dict (see ``groups``)
        self.dense: np.ndarray | None = np.zeros(0, dtype=np.int64) if self.count_only else None
        if not self.group_by:
            self._groups[()] = self._new_group()

    @property
    def groups(self) -> dict:
        """Group -> state; for count_only, key -> row count (leaves the array form)."""
        if self.dense is not None:
            dense = self.dense
            keys = np.flatnonzero(dense)
            self._groups = dict(zip(keys.tolist(), dense[keys].tolist()))
            self.dense = None
        return self._groups

    def _new_group(self) -> list:
        return [0] + [accumulators.make(a) for a in self.aggs]

    def _output(self, key: tuple, g: list) -> tuple | None:
        if g[0] <= 0 and self.group_by:
            return None
        return key + tuple(acc.value() for acc in g[1:])

    def process(self, port: int, batch: Batch) -> Batch:
        if self.count_only:
            return self._process_counts(batch)
        groups = self.groups
        touched: dict[tuple, tuple | None] = {}
        keyf = self._key
        args = self.args
        for r, s in zip(batch.rows, batch.signs):
            k = keyf(r)
            g = groups.get(k)
            if g is None:
                g = groups[k] = self._new_group()
                if k not in touched:
                    touched[k] = None
            elif k not in touched:
                touched[k] = self._output(k, g)
            g[0] += s
            for i, a in enumerate(args, 1):
                g[i].update(1 if a is None else r[a], s)
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

    def _process_counts(self, batch: Batch) -> Batch:
        g = self.group_by[0]
        a = self.args[0]
        nulls = self.nulls
        cols = batch.cols
        if (cols is not None and cols[g].dtype == np.int64
                and (a is None or cols[a].dtype != object)):   # no NULL to count apart
            if self.dense is not None and self._fits_dense(cols[g]):
                return self._count_dense(cols[g], batch.sign_array)
            return self._count_columns(cols[g], batch.sign_array)
        if not batch:
            return Batch()
        if self.dense is not None:
            keys = [r[g] for r in batch.rows]
            if (set(map(type, keys)) == {int} and min(keys) >= 0 and max(keys) < DENSE_LIMIT
                    and (a is None or all(r[a] is not None for r in batch.rows))):
                if len(keys) < COLUMNAR_MIN and max(keys) < len(self.dense):
                    return self._count_dense_rows(keys, batch.signs)
                keys = np.array(keys, dtype=np.int64)
                self._fits_dense(keys)                  # (grows the array: the keys fit)
                return self._count_dense(keys, np.array(batch.signs, dtype=np.int64))
        counts = self.groups
        touched: dict = {}
        for r, s in zip(batch.rows, batch.signs):
            k = r[g]
            old = counts.get(k, 0)
            if k not in touched:
                touched[k] = (old, old - nulls.get(k, 0) if nulls else old)
            counts[k] = old + s
            if a is not None and r[a] is None:
                nulls[k] = nulls.get(k, 0) + s
        changes = []
        for k, (old_rows, old_value) in touched.items():
            new_rows = counts[k]
            changes.append((k, old_rows, old_value, new_rows,
                            new_rows - nulls.get(k, 0) if nulls else new_rows))
            if new_rows == 0:
                del counts[k]
                nulls.pop(k, None)
        return _count_changes(changes)

    def _fits_dense(self, keys: np.ndarray) -> bool:
        """Whether the array form can take these keys (growing it if need be)."""
        size = grown_size(keys, len(self.dense))
        if size is None:
            return False
        if size > len(self.dense):
            grown = np.zeros(size, dtype=np.int64)
            grown[:len(self.dense)] = self.dense
            self.dense = grown
        return True

    def _count_dense(self, keys: np.ndarray, signs: np.ndarray) -> Batch:
        """COUNT with the counts in an array: the whole batch vectorized. Emits, per
        group touched, -old then +new (interleaved), as a columnar batch."""
        uniq, delta = _net_by_key(keys, signs)
        moved = delta != 0
        uniq, delta = uniq[moved], delta[moved]
        old = self.dense[uniq]
        new = old + delta
        self.dense[uniq] = new
        keep = np.stack([old > 0, new > 0], axis=1).ravel()
        out_keys = np.repeat(uniq, 2)[keep]
        out_counts = np.stack([old, new], axis=1).ravel()[keep]
        out_signs = np.tile(np.array([-1, 1], dtype=np.int64), len(uniq))[keep]
        return Batch.columnar([out_keys, out_counts], out_signs)

    def _count_dense_rows(self, keys: list[int], signs: list[int]) -> Batch:
        """``_count_dense`` for a few rows (keys known to be in the array): plain Python,
        since numpy's cost per call would dominate."""
        dense = self.dense
        touched: dict[int, int] = {}
        for k, s in zip(keys, signs):
            old = int(dense[k])
            if k not in touched:
                touched[k] = old
            dense[k] = old + s
        changes = []
        for k, old in touched.items():
            new = int(dense[k])
            changes.append((k, old, old, new, new))
        return _count_changes(changes)

    def _count_columns(self, keys: np.ndarray, signs: np.ndarray) -> Batch:
        """``_process_counts`` for a columnar batch with no NULL argument: the per-row
        work (grouping, summing signs) vectorized, a Python step per group touched."""
        uniq, delta = _net_by_key(keys, signs)
        counts = self.groups
        nulls = self.nulls
        changes = []
        for k, d in zip(uniq.tolist(), delta.tolist()):
            if not d:
                continue
            old = counts.get(k, 0)
            new = old + d
            held = nulls.get(k, 0) if nulls else 0
            if new == 0:
                del counts[k]
                if nulls:
                    nulls.pop(k, None)      # (a NULL count that went to 0 in transit too)
            else:
                counts[k] = new
            changes.append((k, old, old - held, new, new - held))
        return _count_changes(changes)

    def snapshot(self) -> Batch:
        if self.dense is not None:
            keys = np.flatnonzero(self.dense > 0)
            return Batch.columnar([keys.astype(np.int64), self.dense[keys]],
                                  np.ones(len(keys), dtype=np.int64))
        if self.count_only:
            nulls = self.nulls
            return Batch([(k, c - nulls.get(k, 0)) for k, c in self.groups.items() if c > 0])
        out = Batch()
        for k, g in self.groups.items():
            row = self._output(k, g)
            if row is not None:
                out.add(row)
        return out

    def describe(self) -> str:
        calls = ", ".join(f"{a.func}{'(distinct)' if a.distinct else ''}({'' if a.arg is None else a.arg})"
                          for a in self.aggs)
        return f"{self.kind} by {list(self.group_by)}: {calls}"
