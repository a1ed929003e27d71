"""SELECT-list expressions: one output column per expression."""
from __future__ import annotations

from sql_frontend.expr import Col, Expr

from ..batch import Batch
from ..expression import compile_row
from .operator import Operator


class Project(Operator):
    kind = "project"

    def __init__(self, exprs: tuple[Expr, ...]) -> None:
        self.exprs = exprs
        self.identity = all(isinstance(e, Col) and e.index == i for i, e in enumerate(exprs))
        self._row = compile_row(exprs)

    def process(self, port: int, batch: Batch) -> Batch:
        if self.identity and batch.rows and len(batch.rows[0]) == len(self.exprs):
            return batch          # batches are immutable once sent: sharing is safe
        f = self._row
        return Batch([f(r) for r in batch.rows], batch.signs)
