"""ORDER BY ... LIMIT k [OFFSET m], per lookup key (per partition).

Every input row is kept, ordered, so that when a row of the top k is deleted the next
one is already at hand; Noria instead asks upstream to refill, which needs a
materialized parent. A batch recomputes the visible slice of each partition it
touches once and emits the difference. Ties are broken by the whole row, so the
slice is the same in every run.

Checkpoints (``checkpoint_form = "keyed"``, runtime/checkpoints.py) hold an entry per
partition: its sorted rows, **shared** with the operator rather than copied (copy on
write). A partition the operator has handed to a checkpoint, or taken back from one,
is not in ``owned``; the first batch that changes it afterwards copies it first
(``sortedcopy.copy_sorted``: the chunks as they are, no key computed), so a
checkpoint's entries never change. A checkpoint therefore costs a dict entry per
partition changed since the last one, and a restore a dict entry per partition: no row
is sorted or copied to restore a TopK, whatever it holds (holding every row of its
input, it grows with the data: re-adding them one by one was what made its recovery
grow). The copies are paid instead by the partitions changed after a checkpoint, once
each per checkpoint interval.
"""
from __future__ import annotations

from sortedcontainers import SortedKeyList

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..ordering import order_key
from .operator import Operator
from .sortedcopy import copy_sorted
from .state import tuple_key


class TopK(Operator):
    kind = "topk"
    stateful = True
    checkpoint_form = "keyed"
    #: whether to track the partitions changed since the last export (set by the domain)
    tracking = False

    def __init__(self, order: tuple[OrderKey, ...], limit: int | None, offset: int,
                 partition: tuple[int, ...]) -> None:
        self.order = order
        self.limit = limit
        self.offset = offset
        self.partition = partition
        self._sortkey = order_key(order)
        self._part = tuple_key(partition)
        self.reset()

    def reset(self) -> None:
        self.parts: dict[tuple, SortedKeyList] = {}
        #: partitions this operator may change in place (the others are shared with a
        #: checkpoint: copied before their first change)
        self.owned: set[tuple] = set()
        #: partitions changed since the last export (while ``tracking``)
        self._changed: set[tuple] = set()

    def _window(self, rows: SortedKeyList | None) -> list[tuple]:
        if not rows:
            return []
        end = None if self.limit is None else self.offset + self.limit
        return list(rows[self.offset:end])

    def process(self, port: int, batch: Batch) -> Batch:
        before: dict[tuple, list[tuple]] = {}
        parts, owned = self.parts, self.owned
        for r, s in zip(batch.rows, batch.signs):
            p = self._part(r)
            rows = parts.get(p)
            if p not in before:
                before[p] = self._window(rows)
                if p not in owned:              # new, or shared with a checkpoint
                    owned.add(p)
                    if rows is not None:
                        rows = parts[p] = copy_sorted(rows)
            if rows is None:
                rows = parts[p] = SortedKeyList(key=self._sortkey)
            if s > 0:
                for _ in range(s):
                    rows.add(r)
            else:
                for _ in range(-s):
                    rows.discard(r)
        if self.tracking:
            self._changed.update(before)
        out = Batch()
        for p, old in before.items():
            rows = parts.get(p)
            new = self._window(rows)
            if rows is not None and not rows:
                del parts[p]
            if old == new:
                continue
            diff: dict[tuple, int] = {}
            for r in old:
                diff[r] = diff.get(r, 0) - 1
            for r in new:
                diff[r] = diff.get(r, 0) + 1
            for r, c in diff.items():
                if c:
                    out.add(r, c)
        return out

    def snapshot(self) -> Batch:
        out = Batch()
        for rows in self.parts.values():
            for r in self._window(rows):
                out.add(r)
        return out

    # ------------------------------------------------------------ checkpoints

    def export_state(self, changed_only: bool) -> dict:
        """Partition -> its sorted rows (None: gone), shared: each becomes the
        checkpoint's, and this operator copies it before changing it again."""
        parts = self.parts
        if changed_only:
            out = {p: parts.get(p) for p in self._changed}
            self.owned.difference_update(self._changed)
        else:
            out = dict(parts)
            self.owned = set()
        self._changed = set()
        return out

    def load_state(self, entries: dict) -> None:
        """The partitions of a checkpoint, shared (copied before their first change)."""
        self.reset()
        # (an entry None, a partition gone, reads as none; a list of rows, from the
        # cluster's wire, is sorted back into a container: the rows come in order)
        self.parts = {p: rows if rows is None or isinstance(rows, SortedKeyList)
                      else SortedKeyList(rows, key=self._sortkey)
                      for p, rows in entries.items()}

    def describe(self) -> str:
        return f"topk {self.limit} offset {self.offset} per {list(self.partition)}"
