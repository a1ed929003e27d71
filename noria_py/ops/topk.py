"""ORDER BY ... LIMIT k [OFFSET m], per lookup key (per partition).

Every input row is kept, ordered, so that when a row of the top k is deleted the next
one is already at hand; Noria instead asks upstream to refill, which needs a
materialized parent. A batch recomputes the visible slice of each partition it
touches once and emits the difference. Ties are broken by the whole row, so the
slice is the same in every run.
"""
from __future__ import annotations

from sortedcontainers import SortedKeyList

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..ordering import order_key
from .operator import Operator
from .state import tuple_key


class TopK(Operator):
    kind = "topk"
    stateful = True
    checkpoint_form = "input"

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

    def _window(self, rows: SortedKeyList | None) -> list[tuple]:
        if not rows:
            return []
        end = None if self.limit is None else self.offset + self.limit
        return list(rows[self.offset:end])

    def process(self, port: int, batch: Batch) -> Batch:
        before: dict[tuple, list[tuple]] = {}
        for r, s in zip(batch.rows, batch.signs):
            p = self._part(r)
            rows = self.parts.get(p)
            if p not in before:
                before[p] = self._window(rows)
            if rows is None:
                rows = self.parts[p] = SortedKeyList(key=self._sortkey)
            if s > 0:
                for _ in range(s):
                    rows.add(r)
            else:
                for _ in range(-s):
                    rows.discard(r)
        out = Batch()
        for p, old in before.items():
            rows = self.parts.get(p)
            new = self._window(rows)
            if rows is not None and not rows:
                del self.parts[p]
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

    def contents(self) -> list[Batch]:
        return [Batch.inserts([r for rows in self.parts.values() for r in rows])]

    def describe(self) -> str:
        return f"topk {self.limit} offset {self.offset} per {list(self.partition)}"
