"""The one small interface every dataflow operator implements.

An operator turns the batch arriving on one input port into the batch it emits. A
stateful operator can also describe its whole current output (``snapshot``), which is
how new views are initialized from existing state and how lineage recovery refills a
purged subgraph. A stateless operator has no snapshot of its own: its full output is
itself applied to its parents' full output (see ``planner.initialize``).
"""
from __future__ import annotations

from ..batch import Batch


class Operator:
    kind: str = "?"
    stateful: bool = False
    #: True for operators whose ``process`` returns one batch per child (sharders).
    splits: bool = False
    #: True for operators that never have children (readers): recovery rebuilds such a
    #: node from its parents' state as it stands, never from what they sent it, so its
    #: parents keep no payload log for it (docs/recovery.md)
    leaf: bool = False

    def process(self, port: int, batch: Batch) -> Batch:
        raise NotImplementedError

    def snapshot(self) -> Batch:
        """Every row this operator currently outputs, as insertions (stateful only)."""
        raise NotImplementedError(f"{self.kind} keeps no state to snapshot")

    def reset(self) -> None:
        """Forget all state, as after a crash."""

    def describe(self) -> str:
        return self.kind
