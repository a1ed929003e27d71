"""EXCEPT and INTERSECT with SQL's set semantics.

Per distinct row it keeps how many copies each input holds; a row is in the output
(once) while ``left > 0 and right == 0`` (EXCEPT) or ``left > 0 and right > 0``
(INTERSECT). A batch on either port updates the counts of the rows it touches and
emits the rows whose membership flipped, so deletions on either side work the same
way as insertions. NULLs compare equal here, as SQL requires for set operations.
"""
from __future__ import annotations

from ..batch import Batch
from .operator import Operator

LEFT, RIGHT = 0, 1


class SetOp(Operator):
    kind = "setop"
    stateful = True
    checkpoint_form = "input"

    def __init__(self, op: str) -> None:
        if op not in ("except", "intersect"):
            raise ValueError(f"unknown set operation {op!r}")
        self.op = op
        self.reset()

    def reset(self) -> None:
        # row -> [left count, right count]
        self.counts: dict[tuple, list[int]] = {}

    def _member(self, c: list[int]) -> bool:
        if self.op == "except":
            return c[0] > 0 and c[1] <= 0
        return c[0] > 0 and c[1] > 0

    def process(self, port: int, batch: Batch) -> Batch:
        counts = self.counts
        before: dict[tuple, bool] = {}
        side = 0 if port == LEFT else 1
        for r, s in zip(batch.rows, batch.signs):
            c = counts.get(r)
            if c is None:
                c = counts[r] = [0, 0]
            if r not in before:
                before[r] = self._member(c)
            c[side] += s
            if c[0] == 0 and c[1] == 0:
                del counts[r]
        out = Batch()
        for r, was in before.items():
            c = counts.get(r)
            now = c is not None and self._member(c)
            if now and not was:
                out.add(r, 1)
            elif was and not now:
                out.add(r, -1)
        return out

    def snapshot(self) -> Batch:
        return Batch([r for r, c in self.counts.items() if self._member(c)])

    def contents(self) -> list[Batch]:
        return [Batch([r for r, c in self.counts.items() if c[side]],
                      [c[side] for c in self.counts.values() if c[side]])
                for side in (LEFT, RIGHT)]

    def load_input(self, port: int, batch: Batch) -> None:
        """The counts, without ``process``'s output (a restore would throw away a row
        per member of the whole state)."""
        counts = self.counts
        side = 0 if port == LEFT else 1
        for r, s in zip(batch.rows, batch.signs):
            c = counts.get(r)
            if c is None:
                c = counts[r] = [0, 0]
            c[side] += s
            if c[0] == 0 and c[1] == 0:
                del counts[r]

    def describe(self) -> str:
        return self.op
