"""SELECT DISTINCT (and UNION): a row is output while at least one copy is present."""
from __future__ import annotations

from ..batch import Batch
from .operator import Operator


class Distinct(Operator):
    kind = "distinct"
    stateful = True
    checkpoint_form = "input"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.counts: dict[tuple, int] = {}

    def process(self, port: int, batch: Batch) -> Batch:
        counts = self.counts
        before: dict[tuple, int] = {}
        for r, s in zip(batch.rows, batch.signs):
            c = counts.get(r, 0)
            if r not in before:
                before[r] = c
            c += s
            if c:
                counts[r] = c
            else:
                del counts[r]
        out = Batch()
        for r, c0 in before.items():
            c1 = counts.get(r, 0)
            if c0 <= 0 < c1:
                out.add(r, 1)
            elif c1 <= 0 < c0:
                out.add(r, -1)
        return out

    def contents(self) -> list[Batch]:
        return [Batch(list(self.counts), list(self.counts.values()))]

    def snapshot(self) -> Batch:
        return Batch([r for r, c in self.counts.items() if c > 0])
