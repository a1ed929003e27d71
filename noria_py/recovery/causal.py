"""Recovery in the ``causal`` regime (Clonos, seed 004, §3.2.3.4): the failed node alone,
from its own mark (and checkpoint) and its parents' in-flight logs, in the order the
determinants held downstream give (``runtime/causal.py`` says what is logged and kept).

For a failed node B (its failed ancestors first, in topological order: a base from its
write history, an operator the same way as B):

1. **Where B restarts.** Each child C pins a B-time: a live C, the last it took; a
   failed C, the parent-time of the mark C will restart from (the same rule, one level
   down). B restarts from its newest mark at or below every pin (a node without
   children, its newest): its state from that checkpoint (or its standby), its time and
   parent-times from the mark.
2. **What must replay as before.** Every B-time a live node's state reflects: the pins,
   the determinants of B that live nodes hold (a holder got them with B's output up to
   that time), and the B-times a failed child's own determinants (held below it) say it
   took. B's determinants are read from every live holder and merged (they agree where
   they overlap); they must cover every such time after the mark, else B cannot be
   replayed consistently and the recovery refuses (a ``RecoveryError`` that says which
   times were lost with which nodes: use ``strategy='lineage'``, or a larger
   ``determinant_depth``).
3. **Replay.** Each parent A's in-flight log to B after the mark's A-time is taken in
   the order of B's determinants (each names the port and the sender time, which must be
   the next message of that port), then what is left in per-parent FIFO order. B's
   output goes only to live children, beyond what each has taken, and refills B's own
   in-flight logs; B records its determinants again as it goes.

Everything that can refuse (a failed neighbour whose determinants are needed, a
parent's log already trimmed, logs that disagree) is settled before B is touched: a
refusal leaves B failed, never half restored.
"""
from __future__ import annotations

import time as _time
from typing import Any, NamedTuple, Protocol, TypeVar

from ..errors import RecoveryError
from ..graph import Graph
from ..runtime import Runtime
from ..runtime.causal import CausalMessage, CausalRuntime, DetLog, Mark
from ..runtime.messages import Message
from .base import recover_base
from .report import RecoveryReport

#: a message of an in-flight log (the embedded runtime's, or decoded in a cluster)
M = TypeVar("M", bound=Message)


def recover(graph: Graph, rt: Runtime, node_id: str) -> RecoveryReport:
    """Bring the failed ``node_id`` back (its failed ancestors first)."""
    if not isinstance(rt, CausalRuntime):
        raise RecoveryError("causal recovery needs a database opened with "
                            "connect(regime='causal')")
    if rt.alive(node_id):
        raise RecoveryError(f"node {node_id} has not failed; nothing to recover")
    start = _time.perf_counter()
    rt._plan()
    above = set()
    stack = list(graph[node_id].parents)
    while stack:
        n = stack.pop()
        if n not in above:
            above.add(n)
            stack.extend(graph[n].parents)
    todo = [n for n in graph.topological() if n == node_id or (n in above and not rt.alive(n))]
    replayed = rows = 0
    ck_time = None
    detail: dict[str, Any] = {}
    for n in todo:
        if n in rt.durable:
            replayed += recover_base(graph, rt, n)
            detail[n] = {"base": True}
            continue
        if not graph[n].parents:          # a VALUES node: its rows are its definition
            rt.restore_node(n, Mark(0, {}), None)
            detail[n] = {"mark": 0}
            continue
        r, k, t, info = _recover_operator(graph, rt, n)
        replayed, rows = replayed + r, rows + k
        detail[n] = info
        if n == node_id:
            ck_time = t
    rt.last_recovery = detail
    return RecoveryReport(node=node_id, strategy="causal",
                          seconds=_time.perf_counter() - start, replayed_messages=replayed,
                          rows=rows, checkpoint=ck_time)


class CausalView(Protocol):
    """What planning a causal recovery reads: the embedded ``CausalRuntime``, or what a
    cluster's controller gathered from its workers (``runtime/cluster/causal.py``)."""

    @property
    def depth(self) -> int | None: ...

    @property
    def holders(self) -> dict[str, list[str]]: ...

    def alive(self, node_id: str) -> bool: ...

    def last_seen_of(self, node_id: str, parent: str) -> int: ...

    def mark_at_most(self, node_id: str, time: int | float) -> Mark | None: ...

    def held_logs(self, origin: str) -> dict[str, DetLog]: ...


class OperatorPlan(NamedTuple):
    """Where a failed operator restarts and what its replay must follow: its mark, the
    (port, sender time) its determinants give for each time after the mark they
    cover, and the range of them each live holder had."""
    mark: Mark
    pinned: list[tuple[int, int]]
    sources: dict[str, tuple[int, int]]


def _plan(graph: Graph, rt: CausalView, x: str, memo: dict[str, Mark | None]) -> Mark | None:
    """The mark ``x`` restarts from: its newest at or below every child's pin."""
    if x in memo:
        return memo[x]
    floor: float = float("inf")
    for c in dict.fromkeys(graph[x].children):
        pin = _pin(graph, rt, c, x, memo)
        if pin is not None:
            floor = min(floor, pin)
    memo[x] = found = rt.mark_at_most(x, floor)
    return found


def _pin(graph: Graph, rt: CausalView, c: str, x: str,
         memo: dict[str, Mark | None]) -> int | None:
    """The ``x``-time child ``c`` depends on: a live one's last taken, a failed one's
    restart mark's (None: it has none, it will refuse and be rebuilt)."""
    if rt.alive(c):
        return rt.last_seen_of(c, x)
    p = _plan(graph, rt, c, memo)
    return None if p is None else p.parent_times.get(x, 0)


def plan_operator(graph: Graph, rt: CausalView, b: str,
                  memo: dict[str, Mark | None]) -> OperatorPlan:
    """Steps 1 and 2 for the failed operator ``b`` (its failed parents are planned, or
    brought back, first; ``memo`` is shared among the nodes of one recovery): its
    mark, and its determinants from every live holder, checked to cover every
    ``b``-time a live node depends on; a RecoveryError otherwise (nothing touched)."""
    node = graph[b]
    mark = _plan(graph, rt, b, memo)
    if mark is None:
        raise RecoveryError(f"node {b} has no mark at or below the times its children "
                            "have taken of it; use strategy='lineage'")
    need = 0
    for c in dict.fromkeys(node.children):
        pin = _pin(graph, rt, c, b, memo)
        if pin is not None:
            need = max(need, pin)
        if not rt.alive(c):
            port = list(graph[c].parents).index(b)
            for log in rt.held_logs(c).values():
                took = [t for p, t in zip(log.ports, log.times) if p == port]
                if took:
                    need = max(need, max(took))
    merged: dict[int, tuple[int, int]] = {}
    sources: dict[str, tuple[int, int]] = {}
    for holder, log in rt.held_logs(b).items():
        need = max(need, log.end)
        sources[holder] = (log.start, log.end)
        for i, (p, t) in enumerate(zip(log.ports, log.times)):
            at = log.start + i + 1
            if at <= mark.time:
                continue
            had = merged.setdefault(at, (p, t))
            if had != (p, t):
                raise RecoveryError(f"the determinants of {b} at its time {at} disagree "
                                    f"({had} and {(p, t)} at {holder})")
    covered = mark.time
    while covered + 1 in merged:
        covered += 1
    if need > covered:
        lost = [h for h in rt.holders.get(b, ()) if not rt.alive(h)]
        depth = "all" if rt.depth is None else rt.depth
        raise RecoveryError(
            f"the determinants of {b} for its times {covered + 1}..{need} were lost "
            f"(failed holders {lost}, determinant sharing depth {depth}): it cannot be "
            "replayed as the live nodes below it saw it; use strategy='lineage'")
    return OperatorPlan(mark, [merged[t] for t in range(mark.time + 1, covered + 1)], sources)


def replay_order(b: str, parents: list[str], pinned: list[tuple[int, int]],
                 buffers: dict[str, list[M]]) -> list[M]:
    """Step 3's order: each parent's in-flight log to ``b`` after the mark (``buffers``)
    taken as the determinants (``pinned``: port, sender time) say, each the next
    message of its port, then what is left in per-parent FIFO order."""
    heads = dict.fromkeys(buffers, 0)
    order: list[M] = []
    for t, (port, sender_time) in enumerate(pinned):
        a = parents[port]
        buf, h = buffers[a], heads[a]
        if h >= len(buf) or buf[h].time != sender_time:
            raise RecoveryError(f"replay of {b} found no message of {a} at its time "
                                f"{sender_time} for its {t + 1}th time after its mark; "
                                "the logs disagree")
        order.append(buf[h])
        heads[a] = h + 1
    for a, buf in buffers.items():
        order.extend(buf[heads[a]:])
    return order


def _recover_operator(graph: Graph, rt: CausalRuntime,
                      b: str) -> tuple[int, int, int | None, dict[str, Any]]:
    """Recover one operator whose parents are all alive; returns (messages replayed,
    rows restored from its checkpoint, its checkpoint's time or None, what it did)."""
    node = graph[b]
    parents = list(node.parents)
    down = [a for a in parents if not rt.alive(a)]
    if down:
        raise RecoveryError(f"node {b}'s parents {down} have failed; recover them first")
    plan = plan_operator(graph, rt, b, {})
    mark = plan.mark
    # 3. the parents' in-flight logs after the mark, in the determinants' order
    buffers: dict[str, list[CausalMessage]] = {
        a: rt.inflight_after(a, b, mark.parent_times.get(a, 0)) for a in dict.fromkeys(parents)}
    order = replay_order(b, parents, plan.pinned, buffers)
    t0 = _time.perf_counter()
    ck, standby = rt.checkpoint_at(b, mark) if node.op.stateful else (None, False)

    rt.restore_node(b, mark, ck)
    t1 = _time.perf_counter()
    seen = {c: rt.domains[c].last_seen.get(b, 0) for c in node.children if rt.alive(c)}
    rt.replay(b, list(order), seen)
    for c in seen:                   # B's logs to them now start after the mark
        rt.parent_restarted(c, b, mark.time)
    info = {"mark": mark.time, "replayed": {a: len(buf) for a, buf in buffers.items()},
            "pinned": len(plan.pinned), "determinants_from": plan.sources, "standby": standby,
            "restore_seconds": t1 - t0, "replay_seconds": _time.perf_counter() - t1}
    return len(order), 0 if ck is None else ck.rows(), None if ck is None else ck.time, info
