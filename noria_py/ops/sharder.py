"""Splits a stream by the stable hash of its key columns, one output per shard."""
from __future__ import annotations

from operator import itemgetter

from ..batch import Batch
from ..hashing import key_hash, value_hash
from .operator import Operator


class Sharder(Operator):
    kind = "sharder"
    splits = True

    def __init__(self, key: tuple[int, ...], shards: int) -> None:
        self.key = key
        self.shards = shards

    def process(self, port: int, batch: Batch) -> list[Batch]:
        n = self.shards
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
