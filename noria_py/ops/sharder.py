"""Splits a stream by the stable hash of its key columns, one output per shard."""
from __future__ import annotations

from operator import itemgetter

import numpy as np

from ..batch import Batch
from ..hashing import key_hash, value_hash
from .operator import Operator


class Sharder(Operator):
    kind = "sharder"
    splits = True

    def __init__(self, key: tuple[int, ...], shards: int) -> None:
        self.key = key
        self.shards = shards

    # a splitting operator: one batch per child (``Operator.splits``)
    def process(self, port: int, batch: Batch) -> list[Batch]:  # type: ignore[override]
        n = self.shards
        cols = batch.cols
        if cols is not None and len(self.key) == 1 and cols[self.key[0]].dtype == np.int64:
            # an int's hash is itself (hashing.value_hash): numpy's % is Python's
            where = cols[self.key[0]] % n
            signs: np.ndarray = batch.sign_array  # type: ignore[assignment]  # columnar: set
            out = []
            for i in range(n):
                m = where == i
                out.append(Batch.columnar([c[m] for c in cols], signs[m]) if m.any() else Batch())
            return out
        outs = [Batch() for _ in range(n)]
        if len(self.key) == 1:
            k = self.key[0]
            for r, s in zip(batch.rows, batch.signs):
                v = r[k]
                h = v % n if type(v) is int else value_hash(v) % n
                o = outs[h]
                o.rows.append(r)
                o.signs.append(s)
        else:
            get = itemgetter(*self.key) if self.key else (lambda r: ())
            for r, s in zip(batch.rows, batch.signs):
                o = outs[key_hash(tuple(get(r))) % n]
                o.rows.append(r)
                o.signs.append(s)
        return outs

    def describe(self) -> str:
        return f"sharder{list(self.key)}x{self.shards}"
