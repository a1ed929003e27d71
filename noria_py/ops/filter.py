"""WHERE / HAVING: keeps the rows whose predicate is TRUE."""
from __future__ import annotations

from sql_frontend.expr import Expr

from ..batch import Batch
from ..expression import compile_predicate
from .operator import Operator


class Filter(Operator):
    kind = "filter"

    def __init__(self, predicate: Expr) -> None:
        self.predicate = predicate
        self._test = compile_predicate(predicate)

    def process(self, port: int, batch: Batch) -> Batch:
        test = self._test
        rows: list[tuple] = []
        signs: list[int] = []
        for r, s in zip(batch.rows, batch.signs):
            if test(r):
                rows.append(r)
                signs.append(s)
        return Batch(rows, signs)
