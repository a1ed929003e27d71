"""The ``falkirk`` regime (issue 19): a fault-tolerance policy chosen per node, and the
rollback frontier computed as a fixed point over the graph at a failure (Falkirk
Wheel, seed 000, §3.3 and §4), in the embedded runtime.

Logical times. A node's time counts the messages it has taken (sequence numbers, the
seed's §3.1); each message it sends carries the time of the input that caused it, and a
node knows, per parent, the parent-time of the last message it took. A *span* of a node
is a prefix of its times, written as a ``Point``: its time and those parent-times. The
spans a node can be restored to, the seed's Ŝ(p), depend on its policy:

============  ==============================  =====================================  ==========
policy        the seed's regime (§1, §4.2)    spans it can restore to                its output
============  ==============================  =====================================  ==========
``eager``     eager checkpointing             every time (a checkpoint per message)  logged
``lazy``      lazy checkpointing              its checkpoints (``tuning`` interval)  logged
``batch``     batch                           a stateful node: its creation only;    logged
                                              a stateless one: every time
``ephemeral`` ephemeral                       as ``batch``                           not logged
============  ==============================  =====================================  ==========

A stateless node saves no state, so every time is a span of it once its parent-times
there are recorded (metadata: a ``Point`` per message, no checkpoint). The names the
issue used are taken too: ``checkpoint`` is ``lazy``, ``log`` is ``batch``,
``stateless`` is ``ephemeral``. Without a ``"default"``, a stateful node is ``lazy`` and
a stateless one ``batch``: FW-N's Lindi processors suppress logging, but the seed
notes that a developer logs where that prevents cascading rollbacks upstream, and here
an ``ephemeral`` sharder or union between ``lazy`` shards sets every shard back at a
failure of one (measured in docs/regimes.md). A live node can also
stay as it is (the seed's span ⊤, ``TOP`` here). Sources never roll back: a base comes
back whole from its write history and its output is always logged.

What is logged. A logged edge keeps every message sent on it (by reference, in the
runtime, which stands in for stable storage, as in ``uncoordinated``). An unlogged edge
keeps only the times of what it sent (the seed's T_D, integers): enough to know what a
rollback would lose.

The frontier (``frontier``). Start from ⊤ for every live node and the newest span of
every failed one; then, until nothing changes, set each node to its newest span at or
below its current one such that, for its parents and children at their current spans:

- *no message is duplicated* (the seed's second constraint): on each input edge
  ``p -> q``, ``q``'s span has taken nothing ``p`` sent after ``p``'s span;
- *no discarded message is lost* (the first and third): on each output edge ``q -> c``
  unless both ends stay at ⊤ (their queue is kept), every message ``q`` sent after
  ``c``'s span and up to ``q``'s is still there to resend: the edge is logged and its
  log not trimmed below ``c``'s span. An unlogged edge thus pulls ``q`` back to what
  ``c`` had taken, and ``q``'s other children back with it (no duplicates): the
  constraints run both ways, which is why one pass in topological order is not enough
  and this iterates (``test_the_frontier_needs_more_than_one_pass``).

Spans only move down and each node has finitely many, so it ends; the constraints are
monotone, so it ends at the greatest consistent frontier below the start. A node with no
span left (its spans folded away by garbage collection past it: never, if the low
watermark is right) is a ``RecoveryError`` that leaves every node as it was, never a
wrong view; so is a frontier the final check (``consistent``) finds an orphan or a lost
message in.

The frontier, its final check, the policy choice (``choose``) and the unlogged edges'
trim (``trim_sent``) are module functions over a ``Spans`` view of the state, so that
a cluster's controller runs the same code over what its workers sent
(``cluster/falkirk.py``).

Recovery (``rollback``) restores only the nodes the frontier sets below ⊤, each from its
checkpoint (stateful) or its recorded parent-times (stateless), forgets what each sent
after its span, and resends from the logs what each receiver had not taken; the nodes
re-execute from there, the bases first (their histories are the inputs' logs).

Low-watermark garbage collection (the seed's §4.3). The frontier with every node failed
at once (``lowest_line``) is at or below the frontier of any failure, node by node (the
start is lower, the constraints monotone), and only rises as nodes checkpoint. Every
``max(8, len(nodes))`` spans recorded it is computed again: spans and checkpoints below
it are folded away, each log trimmed to what its receiver's span there had taken (an
unlogged edge's times likewise), each base's write history to what its children's had.
A stateful ``batch`` or ``ephemeral`` node keeps its creation as its only span, so its
inputs' logs are never trimmed (the seed: "grows without bound"); ``lazy`` and
``eager`` nodes keep the logs and checkpoints bounded.

Graph changes (``settle``): as ``uncoordinated``, a CREATE VIEW on a quiet graph with
every node up records a span of every node at once, with a full checkpoint of every
stateful one whatever its policy (a ``batch`` node's creation span); with a node down,
the next recovery rebuilds every operator from the tables.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

from .. import tuning
from ..errors import RecoveryError, RegimeError
from ..graph import Graph, Node
from .domain import Domain
from .embedded import EmbeddedRuntime
from .messages import Message
from .uncoordinated import Point, Rollback, UncoordinatedRuntime

__all__ = ["ALIASES", "DEFAULTS", "LOGGED", "POLICIES", "TOP", "FalkirkRuntime", "Spans", "choose",
           "consistent", "frontier", "normalize", "stateful", "trim_sent", "unknown_names"]

#: policy -> (the seed's regime, what the node saves, whether its output is logged)
POLICIES: Final = {
    "eager": "eager checkpointing: a checkpoint after every message, output logged",
    "lazy": "lazy checkpointing: a checkpoint every tuning.CHECKPOINT_EVERY messages "
            "(or CHECKPOINT_ROWS rows), output logged",
    "batch": "batch: no checkpoint (a stateful node restarts from its creation, a "
             "stateless one from any time), output logged",
    "ephemeral": "ephemeral: no checkpoint, nothing logged; recomputed from upstream",
}
#: the issue's words for the seed's regimes
ALIASES: Final = {"checkpoint": "lazy", "log": "batch", "stateless": "ephemeral"}
#: the policies whose output edges are logged
LOGGED: Final = frozenset({"eager", "lazy", "batch"})

#: the policy of a node no name chooses, without a "default"
DEFAULTS: Final = {"stateful": "lazy", "stateless": "batch"}

#: a live node's span ⊤: everything it took, it stays as it is
TOP: Final = Point(-1, {})


def _time(pt: Point) -> int:
    return pt.time


def normalize(choice: Mapping[object, object]) -> dict[str, str]:
    """``connect(regime={...})``'s dict, checked: names (``"default"``, a view, a node
    id, with or without its shard) to policies, aliases resolved; a RegimeError naming
    what is wrong."""
    out: dict[str, str] = {}
    known = ", ".join([*POLICIES, *ALIASES])
    for name, policy in choice.items():
        if not isinstance(name, str) or not name:
            raise RegimeError(f"falkirk's per-node regime names a node, a view or "
                              f"'default', got {name!r}")
        if not isinstance(policy, str) or ALIASES.get(policy, policy) not in POLICIES:
            raise RegimeError(f"unknown falkirk policy {policy!r} for {name!r}; "
                              f"choose one of {known}")
        out[name] = ALIASES.get(policy, policy)
    return out


def stateful(node: Node) -> bool:
    """Whether ``node`` keeps state a checkpoint saves (on a cluster's controller a
    node's op is a ``RemoteOp`` standing in for its worker's: its ``local`` one)."""
    return getattr(node.op, "local", node.op).checkpoint_form is not None


def choose(choice: Mapping[str, str], node: Node, defaults: Mapping[str, str] = DEFAULTS,
           ) -> tuple[str, str | None]:
    """``node``'s policy and the name of ``choice`` that chose it (None: a default): a
    source's output is always logged (``lazy``); else the first of its id, its id
    without the shard, its view (a reader), in ``choice``; else ``choice``'s
    ``"default"``; else ``defaults`` for a stateful or a stateless node. The embedded
    runtime and a cluster's workers and controller (``cluster/falkirk.py``) all
    choose with this."""
    if not node.parents:
        return "lazy", None
    for name in (node.id, node.id.split(".")[0], node.view):
        if name is not None and name in choice:
            return choice[name], name
    if "default" in choice:
        return choice["default"], "default"
    return defaults["stateful" if stateful(node) else "stateless"], None


def unknown_names(choice: Mapping[str, str], graph: Graph, matched: AbstractSet[str],
                  ) -> str | None:
    """None if every name of ``choice`` is ``"default"`` or one ``matched`` (by
    ``choose``) and none is a table; else what is wrong (a RegimeError's words)."""
    tables = {n.table for n in graph.nodes.values() if n.table is not None}
    bad = sorted(set(choice) & tables)
    if bad:
        return (f"falkirk's regime names the table(s) {bad}: a table keeps its write "
                "history and never rolls back; name its views or operator nodes")
    unknown = sorted(set(choice) - set(matched) - {"default"})
    if unknown:
        return (f"falkirk's regime names {unknown}, which no view or node of this "
                "database is (db.graph() lists the node ids)")
    return None


@dataclass
class Spans:
    """What the frontier reads, as it stands (the embedded runtime's, or what a
    cluster's controller gathered from its workers): ``order``, the nodes with parents
    in topological order; each node's ``parents`` and ``children``; ``points``, each
    one's spans, oldest first; ``current``, each live node's time and last-seen times
    (its span ⊤); ``sources``, each node without parents, its time; ``policy``, every
    node's; ``sent``, per unlogged edge the times it sent since the low watermark;
    ``trimmed``, per logged edge the sender time its log was trimmed to."""
    order: Sequence[str]
    parents: Mapping[str, Sequence[str]]
    children: Mapping[str, Sequence[str]]
    points: Mapping[str, Sequence[Point]]
    current: Mapping[str, tuple[int, Mapping[str, int]]]
    sources: Mapping[str, int]
    policy: Mapping[str, str]
    sent: Mapping[tuple[str, str], Sequence[int]]
    trimmed: Mapping[tuple[str, str], int]

    def time(self, nid: str, s: Mapping[str, Point]) -> int:
        """``nid``'s time at its span in ``s`` (a source: its time)."""
        pt = s.get(nid)
        if pt is None:
            return self.sources[nid]
        return self.current[nid][0] if pt is TOP else pt.time

    def seen(self, nid: str, x: Point) -> Mapping[str, int]:
        """``nid``'s last-seen parent-times at its span ``x``."""
        return self.current[nid][1] if x is TOP else x.parent_times

    def limit(self, src: str, dst: str, after: int) -> int | None:
        """The highest time ``src``'s span may have for ``dst``, at a span that took
        ``src``'s messages up to ``after``, to get every later one again: an unlogged
        edge's next send after ``after`` is gone, and so is everything of a logged one
        whose log was trimmed past ``after`` (None: no limit)."""
        if self.policy[src] in LOGGED:
            return after if after < self.trimmed.get((src, dst), 0) else None
        times = self.sent.get((src, dst))
        if not times or times[-1] <= after:
            return None
        return times[bisect_right(times, after)] - 1

    def bound(self, nid: str, top: bool, s: Mapping[str, Point]) -> int | None:
        """The highest time ``nid``'s span may have so that no message it sent is lost
        (``top``: it would stay at ⊤, whose queues to children at ⊤ are kept)."""
        bound: int | None = None
        for c in self.children[nid]:
            if top and s[c] is TOP:
                continue
            lim = self.limit(nid, c, self.seen(c, s[c]).get(nid, 0))
            if lim is not None and (bound is None or lim < bound):
                bound = lim
        return bound

    def no_orphan(self, nid: str, x: Point, s: Mapping[str, Point]) -> bool:
        """Whether ``nid`` at span ``x`` took nothing a parent sent after its span."""
        seen = self.seen(nid, x)
        return all(seen.get(p, 0) <= self.time(p, s) for p in self.parents[nid])

    def allowed(self, nid: str, x: Point, s: Mapping[str, Point]) -> bool:
        """Whether ``nid`` at span ``x`` meets the seed's constraints with its
        neighbours at their spans ``s``."""
        bound = self.bound(nid, x is TOP, s)
        time = self.current[nid][0] if x is TOP else x.time
        return (bound is None or time <= bound) and self.no_orphan(nid, x, s)


def frontier(sp: Spans, down: AbstractSet[str], live: bool = True,
             ) -> tuple[dict[str, Point], int]:
    """The rollback frontier for the failed nodes ``down`` (``live=False``: every node
    failed, the low watermark): each node with parents at a span (``TOP``: it stays as
    it is), found as a fixed point (module docstring); and the passes it took. A
    RecoveryError if some node has no span left. The embedded runtime's and a
    cluster's (``cluster/falkirk.py``)."""
    s: dict[str, Point] = {}
    for nid in sp.order:
        if live and nid not in down:
            s[nid] = TOP
        elif sp.points.get(nid):
            s[nid] = sp.points[nid][-1]
        else:
            raise RecoveryError(f"node {nid} has no span to restore to (no checkpoint "
                                "or recorded time); use strategy='lineage'")
    passes, changed = 0, True
    while changed:
        passes += 1
        changed = False
        for nid in sp.order:
            cur = s[nid]
            if sp.allowed(nid, cur, s):
                continue
            pts = sp.points.get(nid, ())
            bound = sp.bound(nid, False, s)
            top = len(pts) if cur is TOP else bisect_left(pts, cur.time, key=_time)
            if bound is not None:
                top = min(top, bisect_right(pts, bound, key=_time))
            x = _newest(pts, top, lambda pt: sp.no_orphan(nid, pt, s))
            if x is None:
                raise RecoveryError(
                    f"the rollback frontier needs node {nid} ({sp.policy[nid]}) "
                    f"further back than its oldest span (time "
                    f"{pts[0].time if pts else '-'}): what it needs was folded away "
                    "or never logged; use strategy='lineage'")
            s[nid] = x
            changed = True
    return s, passes


def _newest(pts: Sequence[Point], top: int, ok: Callable[[Point], bool]) -> Point | None:
    """The newest of ``pts[:top]`` (a node's spans, oldest first) that ``ok`` holds for,
    ``ok`` being ``no_orphan`` at the other nodes' spans as they stand: it holds for a
    prefix of the spans, since a node's last-seen parent-times only grow from one span
    to the next (a rollback drops the spans after the one it restores, whose times the
    node takes up again), so this is a binary search. The low watermark is a frontier
    with every node down, found every few spans: a linear search from the newest went
    over every span of each stateless node above its lazy neighbours' last checkpoints
    (up to ``CHECKPOINT_EVERY`` of them), half of a write's time at 100-vote inserts."""
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(pts[mid]):
            lo = mid + 1
        else:
            hi = mid
    return pts[lo - 1] if lo else None


def consistent(sp: Spans, line: Mapping[str, Point], live: bool = True) -> str | None:
    """None if ``line`` (the other nodes with parents at ⊤; ``live=False``: none may
    be) duplicates and loses no message; else the edge where it would. The final check
    of every frontier, embedded and in a cluster."""
    s: dict[str, Point] = {}
    for nid in sp.order:
        pt = line.get(nid)
        if pt is None and not live:
            return f"{nid} (no span)"
        s[nid] = TOP if pt is None else pt
    for nid, x in s.items():
        seen = sp.seen(nid, x)
        for p in sp.parents[nid]:
            if seen.get(p, 0) > sp.time(p, s):
                return f"{p} -> {nid} (orphan)"
        for c in sp.children[nid]:
            if x is TOP and s[c] is TOP:
                continue
            lim = sp.limit(nid, c, sp.seen(c, s[c]).get(nid, 0))
            if lim is not None and sp.time(nid, s) > lim:
                return f"{nid} -> {c} (a lost message: unlogged or trimmed)"
    return None


def trim_sent(sent: Mapping[tuple[str, str], deque[int]], line: Mapping[str, Point]) -> None:
    """The low watermark ``line`` reached: each unlogged edge's times that its
    receiver's span there had taken are dropped (as ``fold_below`` trims the logs)."""
    for (p, c), times in sent.items():
        at = line.get(c)
        if at is not None:
            level = at.parent_times.get(p, 0)
            while times and times[0] <= level:
                times.popleft()


class FalkirkRuntime(UncoordinatedRuntime):
    """The embedded runtime with per-node policies, logical times, the fixed-point
    rollback frontier and low-watermark garbage collection."""

    regime = "falkirk"

    def __init__(self, graph: Graph, seed: int | None = None,
                 choice: Mapping[str, str] | None = None) -> None:
        super().__init__(graph, seed)
        #: the user's choice (names to policies), checked by ``normalize``
        self.choice: dict[str, str] = dict(choice or {})
        #: every node's policy
        self.policy: dict[str, str] = {}
        #: the policy of a node the choice names not, without a "default" (set before
        #: the views are created to change it: ``noria-py bench regimes`` does)
        self.defaults = dict(DEFAULTS)
        #: the names of ``choice`` some node (or table) has matched so far
        self.matched: set[str] = {"default"}
        #: per unlogged edge (src, dst): the times of the messages sent on it since the
        #: low watermark (the seed's T_D)
        self.sent: dict[tuple[str, str], deque[int]] = {}
        #: per logged edge: the highest sender time its log was trimmed to
        self.trimmed: dict[tuple[str, str], int] = {}
        #: what the last recovery computed: fixed-point passes, each node's span
        self.last_frontier: dict[str, object] = {}

    # ------------------------------------------------------------ policies

    def choose(self, node: Node) -> str:
        """``node``'s policy (``choose``, with this runtime's defaults)."""
        policy, name = choose(self.choice, node, self.defaults)
        if name is not None:
            self.matched.add(name)
        return policy

    def check_names(self) -> None:
        """A RegimeError if the choice names what no node is, or a table (a base's
        write history is its log; it never rolls back)."""
        bad = unknown_names(self.choice, self.graph, self.matched)
        if bad is not None:
            raise RegimeError(bad)

    def add(self, node: Node) -> Domain:
        # a source never rolls back and its output is logged
        self.policy[node.id] = self.choose(node) if node.parents else "lazy"
        return super().add(node)

    def remove(self, node_id: str) -> None:
        super().remove(node_id)
        self.policy.pop(node_id, None)

    def _forget(self, node_id: str) -> None:
        super()._forget(node_id)
        for key in [k for k in self.sent if node_id in k]:
            del self.sent[key]
        for key in [k for k in self.trimmed if node_id in k]:
            del self.trimmed[key]

    def crash(self, node_id: str) -> None:
        self.check_names()
        super().crash(node_id)

    # ------------------------------------------------------------ normal operation

    def send_all(self, msgs: list[Message]) -> None:
        logs, sent, policy = self.logs, self.sent, self.policy
        for m in msgs:
            key = (m.src, m.dst)
            if policy[m.src] in LOGGED:
                log = logs.get(key)
                if log is None:
                    log = logs[key] = deque()
                log.append(m)
            else:
                times = sent.get(key)
                if times is None:
                    times = sent[key] = deque()
                times.append(m.time)
        self.logged += len(msgs)
        EmbeddedRuntime.send_all(self, msgs)

    def deliver(self, m: Message) -> None:
        d = self.domains.get(m.dst)
        if d is None or not d.alive or m.time <= d.last_seen.get(m.src, 0):
            return                  # a crashed node loses what is sent to it; a duplicate
        out = d.handle(m)
        self.delivered += 1
        if out:
            self.send_all(out)
        policy = self.policy[d.id]
        if policy == "eager" or (policy != "lazy" and d.store is None):
            self.take(d)            # a span at every time (a stateless one: metadata)
            return
        if policy != "lazy":
            return                  # a stateful batch or ephemeral node: its creation only
        since = self.since[d.id]
        since[0] += 1
        since[1] += len(m.batch)
        if since[0] >= tuning.CHECKPOINT_EVERY or since[1] >= tuning.CHECKPOINT_ROWS:
            self.take(d)

    # ------------------------------------------------------------ the frontier

    def spans(self) -> Spans:
        """What the frontier reads, as this runtime stands."""
        order = [n for n in self.order() if self.graph[n].parents]
        graph = self.graph
        return Spans(order, {n: graph[n].parents for n in order},
                     {n: graph[n].children for n in order}, self.points, self.current(),
                     {n: self.source_time(n) for n in self.order() if not graph[n].parents},
                     self.policy, self.sent, self.trimmed)

    def frontier(self, down: set[str], live: bool = True) -> tuple[dict[str, Point], int]:
        """``frontier`` over this runtime's nodes (``live=False``: every node failed,
        the low watermark)."""
        return frontier(self.spans(), down, live)

    def lowest_line(self) -> dict[str, Point] | None:
        try:
            return self.frontier(set(self.domains), live=False)[0]
        except RecoveryError:
            return None

    def recovery_line(self, down: set[str]) -> tuple[dict[str, Point], int | None]:
        s, passes = self.frontier(down)
        line = {n: pt for n, pt in s.items() if pt is not TOP}
        self.last_frontier = {"passes": passes,
                              "spans": {n: pt.time for n, pt in line.items()}}
        bad = self.consistent(line)
        if bad is not None:
            raise RecoveryError(f"the rollback frontier found is not consistent on {bad}; "
                                "nothing was rolled back; use strategy='lineage'")
        return line, None

    def consistent(self, line: dict[str, Point], live: bool = True) -> str | None:
        """``consistent`` over this runtime's nodes."""
        return consistent(self.spans(), line, live)

    def rollback(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        self.check_names()
        return super().rollback(rebuild)

    def _set_back(self, d: Domain, pt: Point) -> None:
        super()._set_back(d, pt)
        for c in d.node.children:
            times = self.sent.get((d.id, c))
            while times and times[-1] > pt.time:
                times.pop()

    def _rebuild_all(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        self.sent.clear()
        self.trimmed.clear()
        return super()._rebuild_all(rebuild)

    # ------------------------------------------------------------ garbage collection

    def _fold(self, line: dict[str, Point]) -> None:
        """The low watermark (``_gc``: the frontier with every node failed): spans and
        checkpoints below it folded, logs and write histories trimmed to it (as
        ``uncoordinated``'s), and the unlogged edges' sent times too."""
        super()._fold(line)
        trim_sent(self.sent, line)
        for p, c in self.logs:
            at = line.get(c)
            if at is not None and at.parent_times.get(p, 0) > self.trimmed.get((p, c), 0):
                self.trimmed[(p, c)] = at.parent_times.get(p, 0)
