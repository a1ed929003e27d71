"""A constant relation: the rows of a SELECT without FROM (one empty row), or any
other fixed set of rows.

It has no parents and never receives a batch; its whole output is its rows, which is
what ``snapshot`` describes, so a new view over it is initialized with them like any
stateful node. The rows are part of the operator's definition, not state it learned,
so ``reset`` (a crash) keeps them.
"""
from __future__ import annotations

from ..batch import Batch
from .operator import Operator


class Values(Operator):
    kind = "values"
    stateful = True

    def __init__(self, rows: tuple[tuple, ...]) -> None:
        self.rows = tuple(tuple(r) for r in rows)

    def process(self, port: int, batch: Batch) -> Batch:
        return Batch()

    def snapshot(self) -> Batch:
        return Batch.inserts(self.rows)

    def describe(self) -> str:
        return f"values ({len(self.rows)} rows)"
