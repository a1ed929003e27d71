"""WHERE / HAVING: keeps the rows whose predicate is TRUE.

A row whose predicate is the division-by-zero marker (the PostgreSQL front end's
``/`` by zero: noria_py/divzero.py) is kept as a row of markers, every column the
marker, rather than dropped: a read that returns it then fails as PostgreSQL's would.
The columns ``keep`` (a read's key: noria_py/planner/poison.py) are kept as they are
in it, so a read of that key finds it. The same row in, the same row of markers out,
so its retraction cancels it."""
from __future__ import annotations

from sql_frontend.expr import Expr

from ..batch import Batch
from ..divzero import DIV0
from ..expression import compile_condition
from .operator import Operator


class Filter(Operator):
    kind = "filter"

    def __init__(self, predicate: Expr, keep: tuple[int, ...] = ()) -> None:
        self.predicate = predicate
        self.keep = keep
        self._test = compile_condition(predicate)

    def process(self, port: int, batch: Batch) -> Batch:
        test = self._test
        rows: list[tuple] = []
        signs: list[int] = []
        for r, s in zip(batch.rows, batch.signs):
            t = test(r)
            if t:
                rows.append(r if t is True else self._poisoned(r))
                signs.append(s)
        return Batch(rows, signs)

    def _poisoned(self, r: tuple) -> tuple:
        """The row of markers for ``r``, its ``keep`` columns as they are."""
        keep = self.keep
        return tuple(v if i in keep else DIV0 for i, v in enumerate(r)) if keep \
            else (DIV0,) * len(r)
