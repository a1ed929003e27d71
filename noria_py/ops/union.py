"""UNION ALL: every input's deltas pass through unchanged (and shards are merged here)."""
from __future__ import annotations

from ..batch import Batch
from .operator import Operator


class Union(Operator):
    kind = "union"

    def process(self, port: int, batch: Batch) -> Batch:
        return batch
