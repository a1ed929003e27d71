"""Fills new (or purged) nodes with the state they would have had all along.

Used by migrations (a view added over tables that already hold data) and by lineage
recovery (a purged subgraph refilled from the base tables). A stateful node that is
kept describes its output from its state (``snapshot``); a stateless one is a pure
function, so its full output is itself applied to its parents' full output. New nodes
are fed their parents' full output through the ordinary ``process`` path, in
topological order. Every inbox must be empty when this runs (the runtime drains first),
or rows in flight would be counted twice. A kept base's rows come from ``table`` (the
runtime's ``Runtime.table``: in a cluster with writes at the workers, the base's
worker, whose rows the controller's copy lags), read while no write is taken.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..batch import Batch
from ..graph import Graph

if TYPE_CHECKING:  # pragma: no cover
    from ..ops.sharder import Sharder


def initialize(graph: Graph, fresh: set[str],
               table: Callable[[str], Batch] | None = None) -> None:
    """Fill the ``fresh`` nodes; ``table(base)``: a kept base's rows (None: its
    operator's own, ``snapshot``)."""
    outputs: dict[str, Batch | list[Batch]] = {}

    def edge(parent: str, child: str) -> Batch:
        out = output_of(parent)
        if graph[parent].op.splits:     # one batch per shard of the child
            return cast("list[Batch]", out)[cast(int, graph[child].shard)]
        return cast(Batch, out)

    def output_of(nid: str) -> Batch | list[Batch]:
        if nid in outputs:
            return outputs[nid]
        node = graph[nid]
        op = node.op
        result: Batch | list[Batch]
        if op.stateful and nid not in fresh:
            result = (table(nid) if table is not None and node.kind == "base"
                      else op.snapshot())
        else:
            results = [op.process(port, edge(p, nid)) for port, p in enumerate(node.parents)]
            if op.stateful:
                result = op.snapshot()
            elif op.splits:                 # (a sharder: ``process`` gives a batch per shard)
                shards = [Batch() for _ in range(cast("Sharder", op).shards)]
                for parts in results:
                    for i, b in enumerate(cast("list[Batch]", parts)):
                        shards[i].extend(b)
                result = shards
            else:
                total = Batch()
                for b in results:
                    total.extend(b)
                result = total
        outputs[nid] = result
        return result

    for nid in graph.topological():
        if nid in fresh:
            output_of(nid)
