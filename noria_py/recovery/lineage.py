"""Noria's original recovery: purge the failed node and everything downstream of it
(and of any failed operator above it), then recompute their state from the base tables.

Recovery time grows with the data behind the purged nodes, which is what the
tree-clock protocol avoids. The runtime is drained first (messages to dead nodes are
lost), so the surviving nodes' state is a consistent cut to rebuild from; the caller
keeps every write out from before that drain until the rebuilt nodes are settled (the
database's lock, and a cluster's ``pause`` of the writes taken at its workers), or a
write in between would reach a node emptied for the rebuild besides its parents' state
(doubled) or be behind the times it settles at (lost).
"""
from __future__ import annotations

import time

from ..graph import Graph
from ..planner.initialize import initialize
from ..runtime import Runtime
from .base import prepare_rebuild
from .report import RecoveryReport


def recover(graph: Graph, runtime: Runtime, node_id: str, *also: str) -> RecoveryReport:
    """Rebuild ``node_id`` (and the other failed nodes ``also``, at once: a cluster
    loses every node of a worker together)."""
    start = time.perf_counter()
    resent, purged, paths = prepare_rebuild(graph, runtime, (node_id, *also))
    if purged is None:
        return RecoveryReport(node=node_id, strategy="lineage", replayed_messages=resent,
                              seconds=time.perf_counter() - start, paths=paths)
    for nid in purged:
        runtime.reset(nid)
    initialize(graph, set(purged), runtime.table)    # (the bases' rows where they are)
    runtime.settle(set(purged))
    seconds = time.perf_counter() - start
    rows = sum(len(graph[n].op.snapshot()) for n in purged if graph[n].op.stateful)
    return RecoveryReport(node=node_id, strategy="lineage", seconds=seconds,
                          purged=purged, rows=rows, paths=paths)
