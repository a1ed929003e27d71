"""SELECT-list expressions: one output column per expression."""
from __future__ import annotations

from typing import cast

from sql_frontend.expr import Col, Expr

from ..batch import Batch
from ..expression import compile_row
from .operator import Operator


def keeps_columns(exprs: tuple[Expr, ...], width: int | None = None) -> bool:
    """Whether ``exprs`` picks every input column in place (of ``width`` columns, if
    given): the projection changes only names."""
    return ((width is None or len(exprs) == width)
            and all(isinstance(e, Col) and e.index == i for i, e in enumerate(exprs)))


class Project(Operator):
    kind = "project"

    def __init__(self, exprs: tuple[Expr, ...]) -> None:
        self.exprs = exprs
        self.identity = keeps_columns(exprs)
        self._row = compile_row(exprs)
        # only column references: a columnar batch is projected by picking its arrays
        self.picks = (tuple(cast(Col, e).index for e in exprs)
                      if all(isinstance(e, Col) for e in exprs) else None)

    def process(self, port: int, batch: Batch) -> Batch:
        cols = batch.cols
        if cols is not None and self.picks is not None:
            if self.identity and len(cols) == len(self.exprs):
                return batch
            return Batch.columnar([cols[i] for i in self.picks],
                                  batch.sign_array)  # type: ignore[arg-type]  # columnar: sign_array set
        if self.identity and batch.rows and len(batch.rows[0]) == len(self.exprs):
            return batch          # batches are immutable once sent: sharing is safe
        return Batch(list(map(self._row, batch.rows)), batch.signs)
