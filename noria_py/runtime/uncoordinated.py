"""The ``uncoordinated`` and ``cic`` regimes (issue 19): local checkpoints with no
barrier, recovery lines computed at a failure (CheckMate, seed 002, §III-B and §III-C;
the recovery-line examples of seed 003), in the embedded runtime.

``uncoordinated``. Every node with parents (stateless ones too) checkpoints on its own,
when it has taken ``tuning.CHECKPOINT_EVERY`` messages or ``tuning.CHECKPOINT_ROWS``
rows since its last one: its state into a ``CheckpointStore`` (incremental, as the
tree-clock regime's: ``checkpoints.py``; a stateless node has none) and a ``Point``,
its time and the parent-time of the last message it took from each parent. Those
parent-times are the **dependencies** between checkpoints: a checkpoint of ``c``
depends on its parent ``p``'s interval up to ``parent_times[p]``. Every message sent on
an edge is **logged** (the channel state), by reference, in the runtime: outside the
nodes, as the checkpoints and the bases' write histories are, so that a crash loses a
node's memory and queues but never a log (the runtime stands in for stable storage).
Sources never roll back: a base comes back whole from its write history, a VALUES
node from its definition.

Consistency. A set of points, one per node (a checkpoint, or a live node's current
state), is a consistent **recovery line** when no message is an orphan: on every edge
``p -> c``, ``c``'s point has taken no message ``p`` sent after its own point
(``c.parent_times[p] <= p.time``). The messages ``p`` sent up to its point that ``c``
had not taken are in the log: recovery resends them (the channel state). The graph is
acyclic, so rolling a child back never orphans a message of its parent: a line is
found in one pass in topological order, each node taking its newest point consistent
with its parents' (a live, not failed node its current state if that is consistent),
which is the newest consistent line (Wang et al.'s rollback propagation over the
checkpoint graph, CheckMate's Algorithm 1, done parents first). A failed node's
children that took messages it sent after its checkpoint (orphans: its re-execution
may interleave its inputs differently and number its output differently) roll back
too, and so on down: the domino effect, here bounded by the graph's depth since it
only flows downstream.

``cic`` (communication-induced, the index-based rule of Briatico, Ciuffoletti and
Simoncini, BCS, which HMNR, CheckMate's protocol, refines). Each node has a checkpoint
index ``sn``, which a local checkpoint raises (to ``sn + 1``, or to the runtime's
clock, its count of writes, if that is ahead: see below); every message piggybacks its
sender's index (``Indexed``); a node about to take a message whose index is higher
than its own first takes a **forced** checkpoint with that index. Then for any ``i``,
the first checkpoint of each node with index >= ``i`` (or its current state, if it has
none) is a consistent line, so every checkpoint is useful (none is left out of every
line). Recovery sets back each failed node and each of their descendants (nothing
above them can hold an orphan of theirs) to its first checkpoint with index >= ``i``,
``i`` the smallest newest index among the failed nodes at or above it (or leaves it as
it is if it has none). Still consistent: on an edge ``p -> c`` below a failed node,
``c``'s ``i`` is at most ``p``'s (``c`` is below every failed node ``p`` is below); a
message ``p`` sent after its point carries an index >= ``p``'s ``i``, so ``c`` had
checkpointed at that index or more before taking it. A line with one ``i`` for every
node (BCS's) would set back a whole other branch of the graph, and pin every log to the
index of its quietest node (a table nobody writes to: the vote workload's articles).
Why the clock: with ``sn + 1`` alone, a node that takes more messages (a join below two
tables) checkpoints more often and its indices run ahead of its parents'; a parent's
failure then sends it back to its first checkpoint at the parent's index, further back
every interval, and its logs are never trimmed (``test_logs_and_checkpoints_stay_bounded``
fails so). Taking indices from a clock every node shares (BCS's periodic checkpoints,
here the write count standing in for loosely synchronized clocks) keeps them in step;
any increasing choice keeps the rule correct. For the same reason a node whose index lags
the clock by ``PERIOD`` writes takes a local checkpoint then, whatever it took (BCS's
checkpoints are periodic): a table nobody writes to (the vote workload's articles)
would otherwise keep the index of everything below it, and the line of its failure,
at its creation.

Both regimes check the line they found before touching a node (``consistent``): a line
with an orphan raises ``RecoveryError`` and leaves the nodes failed, never a wrong view.
The lines are found and checked by module functions (``newest_line``, ``index_line``,
``orphan``) over points and states given to them, so that a cluster's controller runs
the same code over what its workers sent (``cluster/lines.py``).

Garbage collection. The lowest line any failure can need is the one for every node
failed at once (``lowest_line``): a line for fewer failures, or with more checkpoints,
is at or above it, node by node. Each node's checkpoints below its point on it are
folded away (``CheckpointStore.put``'s ``stable``), each log is trimmed to what that
line's receiver had taken, and each base's write history likewise; recomputed every
``len(nodes)`` checkpoints.

Graph changes. A CREATE VIEW (on a graph made quiet first) with every node alive takes
a checkpoint of every node at once (``settle``): with nothing in flight it is a
consistent line, the new nodes' first. With a node down there is none covering the new
nodes (they were filled from the failed node's lost state): the next recovery rebuilds
every operator from the tables, as the coordinated regime does.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TypeVar, cast

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError
from ..graph import Graph, Node
from . import checkpoints
from .checkpoints import CheckpointStore
from .domain import Domain
from .embedded import EmbeddedRuntime
from .history import WriteHistory
from .messages import Indexed, Message

__all__ = ["CICRuntime", "Indexed", "Point", "Rollback", "UncoordinatedRuntime", "fold_below",
           "history_lows", "index_line", "newest_line", "orphan"]

#: bytes a message carries for the cic regime: its sender's index, an int64
INDEX_BYTES = 8
#: cic: writes between the periodic local checkpoints of a node that has taken none
#: (``CICRuntime.tick``), as often as the coordinated regime's epochs
PERIOD = tuning.BARRIER_EVERY


@dataclass
class Point:
    """One checkpoint of a node: its time, the parent-time of the last message it had
    taken from each parent (its dependencies), its index (cic) and whether the
    protocol forced it."""
    time: int
    parent_times: dict[str, int]
    index: int = 0
    forced: bool = False


def newest_line(order: Sequence[str], parents: Mapping[str, Sequence[str]],
                points: Mapping[str, Sequence[Point]], sources: Mapping[str, int],
                current: Mapping[str, tuple[int, Mapping[str, int]]],
                down: AbstractSet[str]) -> dict[str, Point] | None:
    """The newest consistent recovery line (the ``uncoordinated`` regime's, here and in
    a cluster, ``cluster/lines.py``): parents first (``order`` is topological), each
    node of ``down``, or without a ``current`` state, at its newest point (of
    ``points``, oldest first) consistent with its parents' points; every other one at
    its current state (time, last-seen times) if that is consistent, else as a node of
    ``down``. ``sources``: each node without parents (a base: its writes, all of them:
    it never rolls back). Returns the nodes set back and their points (the others stay
    as they are), or None when some node has no point its parents' points reach."""
    times: dict[str, int] = {}
    line: dict[str, Point] = {}
    for nid in order:
        ps = parents[nid]
        if not ps:
            times[nid] = sources[nid]
            continue
        cur = current.get(nid)
        if cur is not None and nid not in down and all(
                cur[1].get(p, 0) <= times[p] for p in ps):
            times[nid] = cur[0]
            continue
        pt = next((q for q in reversed(points.get(nid, ()))
                   if all(q.parent_times.get(p, 0) <= times[p] for p in ps)), None)
        if pt is None:
            return None
        line[nid] = pt
        times[nid] = pt.time
    return line


def orphan(order: Sequence[str], parents: Mapping[str, Sequence[str]],
           line: Mapping[str, Point], sources: Mapping[str, int],
           current: Mapping[str, tuple[int, Mapping[str, int]]]) -> str | None:
    """None if ``line`` (every node not on it at its ``current`` state) has no orphan
    message: on every edge ``p -> c``, ``c`` has taken nothing ``p`` sent after its own
    point; else the first edge with one (or a node with neither a point nor a state).
    The check every recovery makes before touching a node."""
    times: dict[str, int] = {}
    for nid in order:
        ps = parents[nid]
        if not ps:
            times[nid] = sources[nid]
            continue
        pt = line.get(nid)
        cur = current.get(nid)
        seen: Mapping[str, int]
        if pt is not None:
            at, seen = pt.time, pt.parent_times
        elif cur is not None:
            at, seen = cur
        else:
            return f"{nid} (no point)"
        for p in ps:
            if seen.get(p, 0) > times[p]:
                return f"{p} -> {nid}"
        times[nid] = at
    return None


def index_line(order: Sequence[str], parents: Mapping[str, Sequence[str]],
               points: Mapping[str, Sequence[Point]],
               failed: Iterable[str]) -> tuple[dict[str, Point], int | None]:
    """The ``cic`` regime's line (here and in a cluster): each node at or below one of
    ``failed`` at its first point of index ``i`` or more (none: it stays as it is),
    ``i`` the smallest newest index among the failed nodes at or above it; and the
    smallest such ``i``. Every failed node needs a point."""
    failed = set(failed)
    below: dict[str, int] = {}
    line: dict[str, Point] = {}
    for nid in order:
        ps = parents[nid]
        if not ps:
            continue
        found = [below[p] for p in ps if p in below]
        if nid in failed:
            found.append(points[nid][-1].index)
        if not found:
            continue
        index = below[nid] = min(found)
        pt = next((q for q in points.get(nid, ()) if q.index >= index), None)
        if pt is not None:
            line[nid] = pt
    return line, min(below.values(), default=None)


_Logged = TypeVar("_Logged")


def fold_below(line: Mapping[str, Point], points: Mapping[str, list[Point]],
               floor: dict[str, int], logs: Mapping[tuple[str, str], deque[_Logged]],
               time_of: Callable[[_Logged], int]) -> dict[tuple[str, str], int]:
    """Drop what no recovery can need once ``line`` is the lowest line: each node's
    points below its point on it (its ``floor`` becomes that point's time) and, on each
    edge ``(parent, child)`` whose child is on it, the logged messages (``time_of``: a
    message's parent-time) that the child's point had taken. Returns the parent-time
    each such edge's log was trimmed to. The garbage collection of both engines
    (``UncoordinatedRuntime`` and the cluster's ``cluster/lines.py``)."""
    for nid, pt in line.items():
        floor[nid] = pt.time
        pts = points[nid]
        del pts[:next(i for i, q in enumerate(pts) if q is pt)]
    levels = {}
    for (p, c), log in logs.items():
        at = line.get(c)
        if at is not None:
            level = levels[(p, c)] = at.parent_times.get(p, 0)
            while log and time_of(log[0]) <= level:
                log.popleft()
    return levels


def history_lows(line: Mapping[str, Point], children: Mapping[str, Sequence[str]],
                 tops: Mapping[str, int]) -> dict[str, int]:
    """For each base (``tops``: its writes so far), the writes no recovery from ``line``
    or above can ask for again: the lowest parent-time of it among its children's points
    on the line (all of them when no child is on it)."""
    return {b: min((line[c].parent_times.get(b, 0) for c in children[b] if c in line),
                   default=t) for b, t in tops.items()}


@dataclass
class Rollback:
    """What a recovery did: the point each node set back went to (failed nodes
    included; topological order), the messages resent from the logs and their rows,
    and whether every operator was rebuilt from the tables instead (no line covered
    the graph)."""
    line: dict[str, Point]
    messages: int
    rows: int
    rebuilt: bool = False
    index: int | None = None        # cic: the index the line was taken at


class UncoordinatedRuntime(EmbeddedRuntime):
    """The embedded runtime with uncoordinated local checkpoints and channel logs."""

    regime = "uncoordinated"

    def __init__(self, graph: Graph, seed: int | None = None) -> None:
        super().__init__(graph, seed, clocks=False, checkpoints=False)
        #: every stateful node's checkpoints (``rt.store`` stays None: no tree clocks)
        self.ckpts = CheckpointStore()
        #: per node with parents: its checkpoints still usable, oldest first
        self.points: dict[str, list[Point]] = {}
        #: per edge (src, dst): every message sent on it since the lowest line, in order
        self.logs: dict[tuple[str, str], deque[Message]] = {}
        #: per node: [messages, rows] taken since its last checkpoint
        self.since: dict[str, list[int]] = {}
        #: per node: the time of its point on the lowest line (checkpoints below fold)
        self.floor: dict[str, int] = {}
        #: per base: the oldest write the lowest line may ask for again
        self.base_low: dict[str, int] = {}
        #: whether a consistent set of checkpoints covers every node (see ``settle``)
        self.covered = True
        self.taken = 0          # checkpoints taken (forced ones included)
        self.forced = 0         # ... of which forced (cic)
        self.logged = 0         # messages logged, ever
        self._gc_due = 0
        self._order: tuple[int, list[str]] = (-1, [])

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> Domain:
        d = super().add(node)
        self.points[node.id] = []
        self.since[node.id] = [0, 0]
        return d

    def checkpoint_into(self, d: Domain) -> None:
        d.use_checkpoints(self.ckpts)     # (stateless nodes: store None, points only)

    def remove(self, node_id: str) -> None:
        super().remove(node_id)
        self._forget(node_id)
        self.points.pop(node_id, None)
        self.since.pop(node_id, None)

    def reset(self, node_id: str) -> None:
        """Empty a node for a lineage rebuild (its checkpoints and logs are gone with
        its old times)."""
        super().reset(node_id)
        self._forget(node_id)
        self.points[node_id] = []
        self.since[node_id] = [0, 0]

    def _forget(self, node_id: str) -> None:
        self.ckpts.drop(node_id)
        self.floor.pop(node_id, None)
        for key in [k for k in self.logs if node_id in k]:
            del self.logs[key]

    def order(self) -> list[str]:
        """The graph's nodes in topological order (cached per graph version)."""
        version = self.graph.version
        if self._order[0] != version:
            self._order = (version, self.graph.topological())
        return self._order[1]

    def settle(self, fresh: set[str], adopted: set[str] | frozenset[str] = frozenset()) -> None:
        """Nodes were filled outside the message path (a new view, a lineage rebuild).
        On a quiet graph with every node up, every node checkpoints now (a consistent
        line: nothing is in flight); else no line covers the new nodes until a
        recovery rebuilds them."""
        for nid in self.order():
            if nid in fresh:
                d = self.domains[nid]
                d.settle({p: (self.domains[p].time, None, p in fresh) for p in d.node.parents})
        if self.pending() or not all(d.alive for d in self.domains.values()):
            self.covered = False
            return
        for nid in fresh:
            self._forget(nid)
            self.points[nid] = []
        self._checkpoint_all()
        self.covered = True
        self._gc()

    def _checkpoint_all(self) -> None:
        for nid in self.order():
            d = self.domains[nid]
            if d.node.parents:
                self.take(d)

    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None:
        """The channel logs are the runtime's (a lineage rebuild's restored base calls this)."""

    # ------------------------------------------------------------ checkpoints

    def index(self, node_id: str) -> int:
        """The checkpoint index of ``node_id``'s next point (cic; 0 here)."""
        return 0

    def take(self, d: Domain, forced: bool = False) -> None:
        """``d`` checkpoints: its state (what changed since its last one) into the
        store, and its time and dependencies as a point."""
        nid = d.id
        if d.store is not None:
            op = d.node.op
            full = not self.ckpts.has(nid)
            change = checkpoints.delta(op, full, d.ck_inputs or [])
            if d.ck_inputs is not None:
                d.ck_inputs = []
            self.ckpts.put(nid, d.time, d.last_seen, cast(str, op.checkpoint_form), change,
                           full, self.floor.get(nid, -1))
        d.ck_messages = d.ck_rows = 0
        self.points[nid].append(Point(d.time, dict(d.last_seen), self.index(nid), forced))
        self.since[nid] = [0, 0]
        self.taken += 1
        self.forced += forced
        self._gc_due += 1
        if self._gc_due >= max(8, len(self.domains)):
            self._gc()

    def lowest_line(self) -> dict[str, Point] | None:
        """The line recovery would take with every node failed at once (None: there
        is none)."""
        return self._newest_line(set(self.domains), live=False)

    def _gc(self) -> None:
        """Fold the checkpoints below the lowest line, trim logs and write histories
        to what it may still ask for."""
        self._gc_due = 0
        if not self.covered:
            return
        line = self.lowest_line()
        if line is None or self.consistent(line, live=False):
            return
        self._fold(line)

    def _fold(self, line: dict[str, Point]) -> None:
        """Fold the checkpoints below ``line``, trim the logs and the bases' write
        histories to what it may still ask for."""
        fold_below(line, self.points, self.floor, self.logs, lambda m: m.time)
        children = {b: self.graph[b].children for b in self.durable}
        self.base_low.update(history_lows(
            line, children, {b: self.domains[b].time for b in self.durable}))

    def _trim_history(self, base_id: str, d: Domain, history: WriteHistory) -> None:
        history.trim(self.base_low.get(base_id, 0))

    # ------------------------------------------------------------ delivery

    def send_all(self, msgs: list[Message]) -> None:
        logs = self.logs
        for m in msgs:
            key = (m.src, m.dst)
            log = logs.get(key)
            if log is None:
                log = logs[key] = deque()
            log.append(m)
        self.logged += len(msgs)
        super().send_all(msgs)

    def before(self, d: Domain, m: Message) -> None:
        """Called before ``d`` takes ``m`` (cic: a forced checkpoint)."""

    def deliver(self, m: Message) -> None:
        d = self.domains.get(m.dst)
        if d is None or not d.alive or m.time <= d.last_seen.get(m.src, 0):
            return                  # a crashed node loses what is sent to it; a duplicate
        self.before(d, m)
        out = d.handle(m)
        self.delivered += 1
        if out:
            self.send_all(out)
        since = self.since[d.id]
        since[0] += 1
        since[1] += len(m.batch)
        if since[0] >= tuning.CHECKPOINT_EVERY or since[1] >= tuning.CHECKPOINT_ROWS:
            self.take(d)

    # ------------------------------------------------------------ recovery lines

    def source_time(self, nid: str) -> int:
        """A source's time once it is back (a base: its writes, from its history)."""
        hist = self.durable.get(nid)
        return len(hist) if hist is not None else self.domains[nid].time

    def current(self) -> dict[str, tuple[int, dict[str, int]]]:
        """Each node's time and last-seen times as they stand (``newest_line``'s
        ``current``)."""
        return {n: (d.time, d.last_seen) for n, d in self.domains.items()}

    def _newest_line(self, down: set[str], live: bool = True) -> dict[str, Point] | None:
        """``newest_line`` over this runtime's nodes (``live=False``: every node is
        down)."""
        order = self.order()
        return newest_line(order, {n: self.graph[n].parents for n in order}, self.points,
                           {n: self.source_time(n) for n in order if not self.graph[n].parents},
                           self.current() if live else {}, down)

    def recovery_line(self, down: set[str]) -> tuple[dict[str, Point], int | None]:
        """The nodes to set back and the point of each (the others stay as they are),
        and the index the line was taken at (cic)."""
        line = self._newest_line(down)
        if line is None:
            raise RecoveryError(f"no consistent recovery line for the failed nodes "
                                f"{sorted(down)}: some node has no checkpoint its parents' "
                                "points reach; use strategy='lineage'")
        return line, None

    def consistent(self, line: dict[str, Point], live: bool = True) -> str | None:
        """None if ``line`` (the others at their current state) has no orphan message;
        else the edge that has one (``orphan``)."""
        order = self.order()
        return orphan(order, {n: self.graph[n].parents for n in order}, line,
                      {n: self.source_time(n) for n in order if not self.graph[n].parents},
                      self.current() if live else {})

    def rollback(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        """Bring every failed node back: along a recovery line (the nodes it names set
        back to their points, the channel state resent from the logs), or, with no line
        covering the graph, every operator rebuilt by ``rebuild`` from the tables."""
        down = {n for n, d in self.domains.items() if not d.alive}
        if not self.covered:
            return self._rebuild_all(rebuild)
        line, index = self.recovery_line(down)
        bad = self.consistent(line)
        if bad is not None:
            raise RecoveryError(f"the recovery line found has an orphan message on "
                                f"{bad}; nothing was rolled back")
        touched = set(line) | down
        self._drop_where(lambda m: m.src in touched or m.dst in touched)
        order = self.order()
        times: dict[str, int] = {}
        for nid in order:
            d = self.domains[nid]
            pt = line.get(nid)
            if not d.node.parents:
                if nid in down:             # a source: back whole
                    hist = self.durable.get(nid)
                    if hist is not None:
                        start, rows, writes = hist.table()
                        d.write_history(writes, {}, 0, start, rows)
                    d.alive = True
                times[nid] = d.time
            elif pt is not None:
                self._set_back(d, pt)
                times[nid] = pt.time
            else:
                times[nid] = d.time
        sends: list[Message] = []
        for c in order:
            d = self.domains[c]
            for p in dict.fromkeys(d.node.parents):
                if p in touched or c in touched:
                    seen, upto = d.last_seen.get(p, 0), times[p]
                    sends += [m for m in self.logs.get((p, c), ()) if seen < m.time <= upto]
        EmbeddedRuntime.send_all(self, sends)
        return Rollback({n: line[n] for n in order if n in line}, len(sends),
                        sum(len(m.batch) for m in sends), False, index)

    def _set_back(self, d: Domain, pt: Point) -> None:
        """``d`` (failed or not) back to its checkpoint ``pt``; its later checkpoints
        and what it logged sending after it are forgotten."""
        nid = d.id
        d.crash()
        if d.store is not None:
            ck = self.ckpts.latest(nid, pt.time)
            if ck is None or ck.time != pt.time:
                raise RecoveryError(f"node {nid} has no checkpoint at its time {pt.time}")
            checkpoints.load(d.node.op, ck)
            self.ckpts.keep_upto(nid, pt.time)
        d.time = pt.time
        d.last_seen = dict(pt.parent_times)
        d.alive = True
        pts = self.points[nid]
        del pts[next(i for i, q in enumerate(pts) if q is pt) + 1:]
        for c in d.node.children:
            log = self.logs.get((nid, c))
            while log and log[-1].time > pt.time:
                log.pop()
        self.since[nid] = [0, 0]

    def _rebuild_all(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        """No line covers the graph: every operator rebuilt from the tables."""
        self.fifo.clear()
        self.edges.clear()
        self.active.clear()
        self.logs.clear()
        self.floor.clear()
        self.base_low.clear()
        order = self.order()
        for nid in order:
            d = self.domains[nid]
            d.crash()
            self.ckpts.drop(nid)
            self.points[nid] = []
            self.since[nid] = [0, 0]
            hist = self.durable.get(nid)
            if hist is not None:            # a base: its table as it stands now
                start, rows, writes = hist.table()
                d.write_history(writes, {}, 0, start, rows)
            d.alive = True
        rebuild({n for n in order if self.graph[n].parents})   # (settle checkpoints all)
        return Rollback({}, 0, 0, True)


class CICRuntime(UncoordinatedRuntime):
    """Uncoordinated checkpoints plus BCS's index rule: indices piggybacked on
    messages, a forced checkpoint before taking a message of a higher index."""

    regime = "cic"

    def __init__(self, graph: Graph, seed: int | None = None) -> None:
        super().__init__(graph, seed)
        #: per node: its checkpoint index (that of its last checkpoint)
        self.sn: dict[str, int] = {}
        self.piggybacked = 0      # messages sent with an index (INDEX_BYTES each)
        #: the clock local checkpoints take their index from: writes accepted so far
        self.clock = 0

    def write(self, base_id: str, batch: Batch) -> None:
        self.clock += 1
        if self.clock % PERIOD == 0:
            self.tick()
        super().write(base_id, batch)

    def tick(self) -> None:
        """BCS's periodic local checkpoints: a live node whose index lags the clock by
        ``PERIOD`` or more (a quiet one: it took too few messages to checkpoint) takes
        one, at the clock's index (nothing changed: a point and an empty delta)."""
        for nid in self.order():
            d = self.domains[nid]
            if d.node.parents and d.alive and self.sn[nid] <= self.clock - PERIOD:
                self.take(d)

    def add(self, node: Node) -> Domain:
        self.sn[node.id] = 0
        return super().add(node)

    def remove(self, node_id: str) -> None:
        super().remove(node_id)
        self.sn.pop(node_id, None)

    def reset(self, node_id: str) -> None:
        super().reset(node_id)
        self.sn[node_id] = 0

    def index(self, node_id: str) -> int:
        return self.sn[node_id]

    def take(self, d: Domain, forced: bool = False, index: int | None = None) -> None:
        """A local checkpoint takes the next index, or the clock's if it is ahead; a
        forced one takes ``index``."""
        self.sn[d.id] = max(self.sn[d.id] + 1, self.clock) if index is None else index
        super().take(d, forced)

    def _checkpoint_all(self) -> None:
        """Every node at one index, above every index so far (nothing in flight)."""
        top = max(self.sn.values(), default=0) + 1
        for nid in self.order():
            d = self.domains[nid]
            if d.node.parents:
                self.take(d, index=top)

    def _set_back(self, d: Domain, pt: Point) -> None:
        super()._set_back(d, pt)
        self.sn[d.id] = pt.index

    def _rebuild_all(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        for nid in self.sn:
            self.sn[nid] = 0
        return super()._rebuild_all(rebuild)

    def send_all(self, msgs: list[Message]) -> None:
        sn = self.sn
        tagged: list[Message] = [Indexed(m.src, m.dst, m.batch, m.time, m.clock, m.low,
                                         sn[m.src]) for m in msgs]
        self.piggybacked += len(tagged)
        super().send_all(tagged)

    def before(self, d: Domain, m: Message) -> None:
        index = cast(Indexed, m).index
        if index > self.sn[d.id]:
            self.take(d, forced=True, index=index)

    def _index_line(self, failed: Iterable[str]) -> tuple[dict[str, Point], int | None]:
        """``index_line`` over this runtime's nodes."""
        order = self.order()
        return index_line(order, {n: self.graph[n].parents for n in order}, self.points,
                          failed)

    def lowest_line(self) -> dict[str, Point] | None:
        ops = [n for n in self.order() if self.graph[n].parents]
        if not all(self.points[n] for n in ops):
            return None
        return self._index_line(ops)[0]

    def recovery_line(self, down: set[str]) -> tuple[dict[str, Point], int | None]:
        failed = [n for n in down if self.graph[n].parents]
        if not all(self.points[n] for n in failed):
            raise RecoveryError(f"no checkpoint of {sorted(n for n in failed if not self.points[n])}; "
                                "use strategy='lineage'")
        return self._index_line(failed)
