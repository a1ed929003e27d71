"""Noria's original recovery: purge the failed node and everything downstream of it
(and of any failed operator above it), then recompute their state from the base tables.

Recovery time grows with the data behind the purged nodes, which is what the
tree-clock protocol avoids. The runtime is drained first (messages to dead nodes are
lost), so the surviving nodes' state is a consistent cut to rebuild from.
"""
from __future__ import annotations

import time

from ..graph import Graph
from ..planner import initialize
from ..runtime.embedded import EmbeddedRuntime
from .base import purge_set, restore_upstream_bases
from .report import RecoveryReport


def recover(graph: Graph, runtime: EmbeddedRuntime, node_id: str) -> RecoveryReport:
    start = time.perf_counter()
    resent = restore_upstream_bases(graph, runtime, node_id)
    if graph[node_id].kind == "base":
        return RecoveryReport(node=node_id, strategy="lineage", replayed_messages=resent,
                              seconds=time.perf_counter() - start)
    runtime.wait()
    purged = purge_set(graph, runtime, node_id)
    for nid in purged:
        d = runtime.domains[nid]
        d.crash()
        d.alive = True
    initialize(graph, set(purged))
    runtime.settle(set(purged))
    seconds = time.perf_counter() - start
    rows = sum(len(graph[n].op.snapshot()) for n in purged if graph[n].op.stateful)
    return RecoveryReport(node=node_id, strategy="lineage", seconds=seconds,
                          purged=purged, rows=rows)
