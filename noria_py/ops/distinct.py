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

    def load_input(self, port: int, batch: Batch) -> None:
        """The counts themselves, without ``process``: that would build an output row
        per distinct row of the whole state, which a restore throws away (most of a
        restored DISTINCT shard's recovery time, docs/benchmarks.md). A checkpoint's
        rows (``contents``, ``CheckpointStore.latest``) are distinct with nonzero
        counts: on an empty state they become the counts at once."""
        rows, signs = batch.rows, batch.signs
        counts = self.counts
        if not counts:
            loaded = dict(zip(rows, signs))
            if len(loaded) == len(rows) and 0 not in loaded.values():
                self.counts = loaded
                return
        for r, s in zip(rows, signs):
            c = counts.get(r, 0) + s
            if c:
                counts[r] = c
            else:
                counts.pop(r, None)

    def load_counts(self, port: int, counts: dict) -> None:
        """A checkpoint's counts (a copy, never 0) taken over as they are on an empty
        state: no row is hashed again, so a restore costs the store's copy of the
        dict, one pass in C (a DISTINCT over every vote holds a row per vote)."""
        if not self.counts:
            self.counts = counts
        else:                   # (a UNION's second port: counts add up across ports)
            self.load_input(port, Batch(list(counts), list(counts.values())))

    def snapshot(self) -> Batch:
        return Batch([r for r, c in self.counts.items() if c > 0])
