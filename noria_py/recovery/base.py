"""A failed base table comes back from its durable log, whatever the strategy.

Every strategy rebuilds from the base tables, so a base itself is restored from what
makes writes durable: the write-ahead log (``data_dir``), or without one the write
history the runtime keeps outside the node, standing in for the disk. An acknowledged
write is never lost.
"""
from __future__ import annotations

from typing import Iterable

from ..graph import Graph
from ..runtime import Runtime


def recover_base(graph: Graph, rt: "Runtime", node_id: str, low: int | None = None) -> int:
    """A base table comes back from its durable log: its state is the log replayed, its
    time the log's length; children get what they had not received. Its payload log
    keeps the writes after ``low``: a failed child will ask for them when it recovers
    (``low`` is at or below the oldest such request; by default the oldest write)."""
    node = graph[node_id]
    seen = {c: rt.info(c).last_seen.get(node_id, 0) for c in node.children if rt.alive(c)}
    floor = min((seen.get(c, low or 0) for c in node.children), default=0)
    sent = rt.restore_base(node_id, seen, floor)
    restarted(graph, rt, node_id, floor)
    return sent


def restarted(graph: Graph, rt: "Runtime", node_id: str, floor: int) -> None:
    """``node_id`` came back with payload logs to its children starting after its time
    ``floor``: a live stateful child whose newest checkpoint reflects less of it
    checkpoints now (``Domain.parent_restarted``), or its own recovery would find the
    log short of that checkpoint and be rebuilt. So does a live stateful grandchild:
    should the child between fail with it, the child restarts at the child-time the
    grandchild's checkpoint reflects (``treeclock._children_checkpoints``), from this
    node's log (a stateless child), or from its own checkpoint at or below it (a
    stateful one, which may just have taken its only usable one); the grandchild
    checkpoints if its newest reflects less than the child's time now."""
    for c in graph[node_id].children:
        if not rt.alive(c):
            continue
        rt.parent_restarted(c, node_id, floor)
        grandchildren = [g for g in graph[c].children if graph[g].op.stateful and rt.alive(g)]
        if grandchildren:
            c_time = rt.info(c).time
            for g in grandchildren:
                rt.parent_restarted(g, c, c_time)


def restore_upstream_bases(graph: Graph, rt: "Runtime", node_ids: Iterable[str]
                           ) -> tuple[int, list[str]]:
    """Bring back every failed base table at or above any of ``node_ids`` (lineage
    rebuilds read them), each ancestor looked at once; returns the number of messages
    resent and the bases brought back."""
    sent, restored = 0, []
    stack, seen = list(node_ids), set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if graph[n].kind == "base" and not rt.alive(n):
            sent += recover_base(graph, rt, n)
            restored.append(n)
        stack.extend(graph[n].parents)
    return sent, restored


def purge_set(graph: Graph, rt: "Runtime", node_ids: Iterable[str]) -> list[str]:
    """What a lineage rebuild recomputes, in topological order: the failed nodes,
    everything downstream of them, and every failed operator above any of those (whose
    state a rebuilt node would read), with everything downstream of it in turn, until
    nothing purged has a failed operator above it outside the set. A failed node beside
    the failed one, a parent of a node downstream of it (the other shards of a union's
    inputs), is in the set: the union, rebuilt from its parents as they stood, would
    lack that node's rows, and they would not reach it after that node's own recovery
    either (with no witness left below, it comes back to its parents as they stand)."""
    purged: set[str] = set()
    above: set[str] = set()             # nodes whose ancestors have been looked at
    roots = list(node_ids)
    while roots:
        for d in graph.descendants(roots.pop()):
            if d in purged:
                continue
            purged.add(d)
            stack = list(graph[d].parents)
            while stack:
                n = stack.pop()
                if n in above or n in purged:
                    continue
                above.add(n)
                if not rt.alive(n) and graph[n].kind != "base":
                    roots.append(n)
                stack.extend(graph[n].parents)
    return [n for n in graph.topological() if n in purged]


def prepare_rebuild(graph: Graph, rt: "Runtime", node_ids: Iterable[str]
                    ) -> tuple[int, list[str] | None, dict[str, str]]:
    """The common start of a lineage rebuild (in the engine or with Spark): restore the
    failed bases above what it recomputes, let the graph go quiet (messages to failed
    nodes are lost), and name the nodes to recompute. Returns (messages resent, purge
    set, how each node it brought back and each it will did: ``RecoveryReport.paths``,
    "history" for a base, "lineage" for the purge set), the purge set None when the
    failed nodes are all base tables, which are then already back."""
    node_ids = list(node_ids)
    operators = [n for n in node_ids if graph[n].kind != "base"]
    purged = purge_set(graph, rt, operators) if operators else []
    resent, bases = restore_upstream_bases(graph, rt, [*node_ids, *purged])
    paths = {**{b: "history" for b in bases}, **{n: "lineage" for n in purged}}
    if not operators:
        return resent, None, paths
    rt.wait()
    return resent, purged, paths
