"""Validating a write batch against a base's rows, wherever the base's one validating
copy is (``serve --writes worker``; docs/architecture.md, "Writes at the base's worker").

A batch made at the controller has its rows checked one by one (types, NOT NULL:
``Base.check_rows``, which needs no state) and comes as deletes (sign -1) and inserts
(sign +1), or as int64/float64 columns that the controller's copy took as arrays.
``validated`` applies the rules that need the table (unique keys, a deleted row held)
with ``Base.prepare``, exactly as the embedded engine does, so a batch is taken whole
or refused whole by the same code; it changes no state.

Invariant: at any instant one copy of a base's rows validates its writes: its worker's
while the base is up there, the controller's (equal to the history, which holds every
write the base took) while it is down, under the controller's lock, which a recovery
holds too, so no write lands between a restore's reading of the history and the base
being up again.
"""
from __future__ import annotations

from ...batch import Batch
from ...ops.base import Base


def validated(op: Base, batch: Batch) -> Batch:
    """``batch`` (deletes then inserts, or columns to insert) checked against ``op``'s
    rows: the delta to apply, or the ``noria_py.Error`` naming what is wrong."""
    if batch.cols:
        cols = list(batch.cols)
        if op.arrays_from_numbers(cols) is not None:
            return op.prepare_arrays(cols)
    rows, signs = batch.rows, batch.signs
    return op.prepare([r for r, s in zip(rows, signs) if s > 0],
                      [r for r, s in zip(rows, signs) if s < 0])
