"""A base table's write history, bounded: the rows as of a trim point, and the writes
since.

A base comes back from its history (``recovery/base.py``): its state, and the writes
its children may still ask for. Keeping every write ever made grew memory with all
the writes, not the table (5M row-writes, 0 rows live: 370 MB). So the history is
``folded``, the table as of write ``start`` (a ``Base`` of its own, which a write
folded into costs what the base's own write costs; an insert-only table keeps the
write batches themselves, shared with the base, so nothing is held twice), then the
writes after ``start``, one batch a write, as before.

The history is trimmed to the oldest write anybody may still ask for
(``Domain.history_low``): what a child has not taken yet, or has taken but may ask for
again after a failure, which its parent's payload log keeps for it. Nothing below that
is asked for by a tree-clock recovery, whose requests come from those logs; one that
would ask for more (a base failed with witnesses that cannot say where its children
are) finds the base's log starting at ``start`` and falls back as it does whenever a
log no longer reaches back (lineage), never reading writes that are gone.

Invariant: ``len(self)`` is the base's time (writes made); ``state_at(t)`` for
``start <= t <= len(self)`` is the table after ``t`` writes. Its calls may come from
different threads (a cluster's controller appends as clients write and trims as
workers report): each holds ``lock``.
"""
from __future__ import annotations

import threading

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError
from ..ops.base import Base

__all__ = ["WriteHistory"]


class WriteHistory:
    def __init__(self, op: Base) -> None:
        self.folded = Base(op.schema)
        self.start = 0
        self.batches: list[Batch] = []
        self.lock = threading.Lock()
        #: how many writes ``batches`` holds when the embedded runtime next trims it
        #: (``EmbeddedRuntime._record``)
        self.trim_at = tuning.HISTORY_TRIM_EVERY

    def __len__(self) -> int:
        return self.start + len(self.batches)

    def append(self, batch: Batch) -> None:
        with self.lock:
            self.batches.append(batch)

    def rows_kept(self) -> int:
        """Row-writes held after ``start`` (what trimming bounds)."""
        with self.lock:
            return sum(len(b) for b in self.batches)

    def trim(self, t: int) -> None:
        """Fold the writes up to ``t`` into the table as of ``t`` (no-op below ``start``)."""
        with self.lock:
            n = min(t, len(self)) - self.start
            if n <= 0:
                return
            for b in self.batches[:n]:
                self.folded.process(0, b)
            del self.batches[:n]
            self.start += n

    def since(self, t: int) -> tuple[int, list[Batch]]:
        """(where they start, the writes after write ``t``), from ``start`` at the
        earliest."""
        with self.lock:
            at = max(t, self.start)
            return at, self.batches[at - self.start:]

    def table(self) -> tuple[int, list[Batch], list[Batch]]:
        """(``start``, the table as of it as batches that add up to it, the writes
        after), at one instant. The table's batches are the folded base's own
        (``Base.parts``): nothing is joined, so taking a log of millions of rows costs
        next to nothing on the thread that takes it (a cluster worker's message
        thread)."""
        with self.lock:
            return self.start, self.folded.parts(), list(self.batches)

    def state_at(self, t: int) -> Base:
        """The table after ``t`` writes (a new ``Base``)."""
        with self.lock:
            if t < self.start:
                raise RecoveryError(f"table {self.folded.schema.name!r}: its history starts "
                                    f"after write {self.start}, not {t}; use "
                                    "strategy='lineage'")
            parts, batches = self.folded.parts(), self.batches[:t - self.start]
        out = Base(self.folded.schema)
        for b in parts + batches:
            out.process(0, b)
        return out
