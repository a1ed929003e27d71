"""The ``uncoordinated`` and ``cic`` regimes in a cluster (``noria-py serve --regime
uncoordinated | cic``): each worker's node shards checkpoint on their own, the controller
keeps what must survive a worker (the checkpoints, each checkpoint's dependencies, the
channel logs), and a lost worker's recovery sets back only the nodes the recovery line
names, on live workers too.

Normal operation, on the workers (``Worker._uc_handle``). Every node shard with parents
takes a local checkpoint after ``tuning.CHECKPOINT_EVERY`` messages or
``CHECKPOINT_ROWS`` rows, with no barrier and no word from the controller: a stateful
one puts what changed since its last into the checkpoint store on the controller (the
``ck`` frame, as the tree-clock and coordinated regimes do), then every one sends its
*point*, ``["pt", node, time, parent-times, index, forced]``: its time and the
parent-time of the last message it took from each parent, the dependencies between
checkpoints (``runtime/uncoordinated.py``). ``cic`` adds the sender's checkpoint index
to every message (a seventh field on the wire, ``Indexed``), a forced checkpoint before
a message of a higher index, and the index of a local checkpoint taken from the
controller's write count, which it sends every ``PERIOD`` writes (``["tick", count]``:
a node whose index lags it by ``PERIOD`` checkpoints then, as the embedded regime's
``tick``).

Channel logs, on the controller (the stand-in for stable storage, as the write
histories are): with relayed channels every message between workers passes through
the controller, which logs it as it relays it; with direct channels each worker sends
a copy of what it emits (``["log", [message, ...]]``) on its controller connection
*before* routing the messages and before any later point: the controller reads every
frame of a lost worker before it declares the loss, so any message a receiver may have
taken up to a sender's point is in the log. A base's messages are not logged: its write
history on the controller is its log (a base passes each write on whole, its time is
its write count).

Recovery of a lost worker (the recovery thread, holding the database's lock; its nodes
on a spare, down): every live node finishes what it was sent (``wait``), each live node
says its time and last-seen times, and the recovery line is computed by the embedded
regime's own functions (``uncoordinated.newest_line``, ``index_line``, checked by
``orphan``) over the points here. Before any node is touched it is checked: a line, no
orphan, a checkpoint in the store at each stateful node's point, every log needed not
trimmed past what its receiver's point took, every base history reaching what its
children need. Then the nodes the line names, and every node that receives a resend,
are held (their messages queue); each named node is set back to its point (its state
from the store); the messages after each receiver's point up to its sender's are
resent from the logs, and the bases' writes from their histories; then the held
messages go, in arrival order. Outputs of a node set back that its children had taken
were sent after its point and come again from its re-execution, possibly numbered
differently: those children are on the line too (their messages were orphans).
``RecoveryReport.rolled_back`` lists the nodes set back, ``.checkpoint`` the point
of the first lost node that has one, ``.replayed_messages`` the messages resent.

What it refuses, it says: no line (a view created while a node was down: no point of
the new nodes is consistent), an orphan, a checkpoint or log folded too far. Then the
lost nodes are rebuilt by lineage (``RecoveryReport.strategy`` "lineage", ``.fallback``
why), as the coordinated regime does, and every node checkpoints at once afterwards (a
quiet graph: a consistent line), so the next loss has a line again.

Garbage collection: every ``max(8, nodes)`` points, before a write, the lowest line any
failure can need (every node lost at once) is computed: the points below it are
forgotten, the checkpoint chains fold below it (``stable`` of the next checkpoint), the
logs and the bases' write histories are trimmed to what its receivers had taken.

Invariants: ``logs[(p, c)]`` holds, in time order, every message ``p`` sent ``c`` after
``trimmed[(p, c)]`` up to what ``p``'s worker has sent the controller; ``points[n]`` are
``n``'s checkpoints still usable, oldest first, none below ``floor[n]``; ``covered``
is False while some node may have no consistent point (then recovery is lineage's).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import Error
from ...recovery.report import RecoveryReport
from ..uncoordinated import PERIOD, Point, fold_below, history_lows, index_line, newest_line, orphan
from .epochs import snapshots
from .wire import ProtocolError, encode_checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..checkpoints import Checkpoint
    from .controller import ClusterRuntime

log = logging.getLogger("noria_py.cluster")

__all__ = ["REGIMES", "Lines", "point", "resend_base", "when_free"]

#: the regimes this module runs
REGIMES = ("uncoordinated", "cic")


def resend_base(rt: ClusterRuntime, b: str, low: int, seen: dict[str, int]) -> tuple[int, int]:
    """Base ``b`` back on its worker from its writes after ``low`` in its history here
    (in parts: ``ClusterRuntime.history_parts``): it resends each child named in ``seen``
    the writes after that child's time. (messages sent, rows)."""
    w = rt.worker_of(b)
    _, writes = rt.durable[b].since(low)
    part, rows = rt.history_parts(w, b, writes)
    sends: int = rt.ask(w, "uc_base", b, seen, low, part)
    return sends, rows


def when_free(rt: ClusterRuntime, collect: Callable[[], object]) -> None:
    """``collect`` (a garbage collection) with the database's lock, if it is free: a
    worker's reader thread calls this as points come, and never waits for the lock (a
    write, a recovery or a DDL holding it: the next point tries)."""
    control = rt.control
    if control is None or not control.acquire(blocking=False):
        return
    try:
        collect()
    finally:
        control.release()


def point(f: Sequence[Any]) -> Point:
    """A worker's ``["pt", node, time, parent-times, index, forced]`` frame, checked (the
    causal regime's marks come as the same frame, ``causal.py``)."""
    if not (len(f) == 6 and type(f[1]) is str and type(f[2]) is int
            and isinstance(f[3], dict) and type(f[4]) is int and type(f[5]) is bool):
        raise ProtocolError("a point must be [pt, node, time, parent times, index, forced]")
    return Point(f[2], {str(p): int(t) for p, t in f[3].items()}, f[4], f[5])


class _Plan:
    """What a recovery will do, found (and checked) before any node is touched."""

    def __init__(self) -> None:
        self.line: dict[str, Point] = {}
        self.index: int | None = None
        self.touched: set[str] = set()
        self.held: set[str] = set()                 # every node that gets a resend
        self.checkpoints: dict[str, Checkpoint] = {}
        self.resends: dict[str, list[Any]] = {}     # receiver -> encoded messages, in order
        self.bases: dict[str, tuple[int, dict[str, int]]] = {}   # base -> (from, child seen)


class Lines:
    """The controller's side of the ``uncoordinated`` and ``cic`` regimes (module
    docstring)."""

    def __init__(self, rt: ClusterRuntime, regime: str) -> None:
        if regime not in REGIMES:
            raise Error(f"no recovery lines in regime {regime!r}")
        self.rt = rt
        self.regime = regime
        self.cic = regime == "cic"
        self.lock = threading.Lock()        # (never held while taking rt.lock)
        self.points: dict[str, list[Point]] = {}
        self.logs: dict[tuple[str, str], deque[tuple[int, Any]]] = {}
        self.trimmed: dict[tuple[str, str], int] = {}
        self.floor: dict[str, int] = {}
        self.covered = True
        self.due = 0                         # points since the last garbage collection
        self.clock = 0                       # writes accepted (cic: the indices' clock)
        self.top = 0                         # the highest index of a point (cic)
        self.taken = 0                       # points taken, forced ones among them
        self.forced = 0
        self.logged = 0                      # messages logged

    # ------------------------------------------------------------ normal operation

    def on_point(self, f: Sequence[Any]) -> None:
        """``["pt", node, time, parent-times, index, forced]`` from a worker's reader."""
        pt = point(f)
        with self.lock:
            self.points.setdefault(f[1], []).append(pt)
            self.taken += 1
            self.forced += f[5]
            self.due += 1
            self.top = max(self.top, pt.index)

    def on_log(self, msgs: Sequence[Any]) -> None:
        """Encoded messages a worker sent (``["log", [...]]``, or relayed here)."""
        with self.lock:
            logs = self.logs
            for m in msgs:
                if not (isinstance(m, (list, tuple)) and len(m) in (6, 7)
                        and type(m[3]) is int):
                    raise ProtocolError("a logged message must be an encoded message")
                key = (m[0], m[1])
                q = logs.get(key)
                if q is None:
                    q = logs[key] = deque()
                q.append((m[3], m))
            self.logged += len(msgs)

    def stable(self, node_id: str, stable: int) -> int:
        """Where a checkpoint of ``node_id`` put now may fold its chain to."""
        with self.lock:
            return max(stable, self.floor.get(node_id, -1))

    def before_write(self) -> None:
        """With the database's lock, before a write is accepted: cic's tick every
        ``PERIOD`` writes; a garbage collection when due."""
        rt = self.rt
        self.clock += 1
        if self.cic and self.clock % PERIOD == 0:
            with rt.lock:
                for w in rt.workers.values():
                    if w.alive:
                        w.put(["tick", self.clock])
        if self.due >= max(8, len(rt.graph.nodes)):
            self.gc()

    def forget(self, node_id: str) -> None:
        """A node dropped with its view."""
        with self.lock:
            self.points.pop(node_id, None)
            self.floor.pop(node_id, None)
            for key in [k for k in self.logs if node_id in k]:
                del self.logs[key]
                self.trimmed.pop(key, None)

    def invalidate(self) -> None:
        with self.lock:
            self.covered = False

    def checkpoint_all(self) -> bool:
        """Every node checkpoints at once, whole, on a quiet graph (a graph change, a
        lineage rebuild): a consistent line, from which the logs start afresh. Whether
        it covered the graph (not with a node down)."""
        rt = self.rt
        with rt.lock:
            if any(n not in rt.up for n in rt.placement):
                self.invalidate()
                return False
        try:
            rt.wait()
        except Error:
            self.invalidate()
            return False
        with self.lock:
            self.covered = False
            self._clear()
            index = max(self.top + 1, self.clock) if self.cic else 0
        try:
            with rt.lock:
                hosts = {rt.placement[n] for n, node in rt.graph.nodes.items() if node.parents}
                futs = [rt.request(rt.workers[w], "uc_checkpoint_all", index) for w in hosts]
            for fut in futs:
                fut.result(300)
        except Error as e:
            log.info("no checkpoint of every node: %s", e)
            return False
        with self.lock:
            ops = [n for n, node in rt.graph.nodes.items() if node.parents]
            self.covered = all(self.points.get(n) for n in ops)
            return self.covered

    def _clear(self) -> None:
        """Every point and log forgotten (``self.lock`` held): every node checkpoints
        whole now."""
        self.points.clear()
        self.logs.clear()
        self.trimmed.clear()
        self.floor.clear()

    def gc(self) -> None:
        """Fold what no failure can need: below the lowest line (every node lost)."""
        rt = self.rt
        graph = rt.graph
        order = graph.topological()
        parents = {n: graph[n].parents for n in order}
        sources = {n: len(rt.durable[n]) for n in order if n in rt.durable}
        with self.lock:
            self.due = 0
            if not self.covered or any(not parents[n] and n not in sources for n in order):
                return
            ops = [n for n in order if parents[n]]
            if not all(self.points.get(n) for n in ops):
                return
            line = self._lowest_line(order, parents, sources, ops)
            if line is None or orphan(order, parents, line, sources, {}) is not None:
                return
            self._fold(line)
            lows = history_lows(line, {b: graph[b].children for b in sources}, sources)
        for b, low in lows.items():
            rt.durable[b].trim(low)

    def _lowest_line(self, order: list[str], parents: dict[str, list[str]],
                     sources: dict[str, int], ops: list[str]) -> dict[str, Point] | None:
        """The line of every node lost at once (``self.lock`` held; None: none)."""
        if self.cic:
            return index_line(order, parents, self.points, ops)[0]
        return newest_line(order, parents, self.points, sources, {}, set(order))

    def _fold(self, line: dict[str, Point]) -> None:
        """``line`` is the lowest: what is below it folded (``self.lock`` held)."""
        levels = fold_below(line, self.points, self.floor, self.logs, lambda m: m[0])
        for edge, level in levels.items():
            self.trimmed[edge] = max(self.trimmed.get(edge, 0), level)

    # ------------------------------------------------------------ recovery

    def _current(self, down: set[str]) -> dict[str, tuple[int, dict[str, int]]]:
        """Each live node's time and last-seen times (the graph is quiet)."""
        rt = self.rt
        with rt.lock:
            hosts: dict[str, list[str]] = {}
            for n, w in rt.placement.items():
                if n not in down:
                    hosts.setdefault(w, []).append(n)
            futs = [rt.request(rt.workers[w], "uc_state", ns) for w, ns in hosts.items()]
        out: dict[str, tuple[int, dict[str, int]]] = {}
        for fut in futs:
            for n, (t, seen) in fut.result(300).items():
                out[str(n)] = (int(t), {str(p): int(x) for p, x in seen.items()})
        return out

    def _plan(self, order: list[str], parents: dict[str, list[str]], down: set[str],
              current: dict[str, tuple[int, dict[str, int]]],
              sources: dict[str, int]) -> _Plan | str:
        """The line and what it takes (``self.lock`` held), or why there is none."""
        rt = self.rt
        plan = _Plan()
        if not self.covered:
            return "no line covers the graph (a view was created while a node was down)"
        found = self._recovery_line(order, parents, down, current, sources)
        if isinstance(found, str):
            return found
        plan.line, plan.index = found
        bad = orphan(order, parents, plan.line, sources,
                     {n: c for n, c in current.items() if n not in down})
        if bad is not None:
            return f"the recovery line found has an orphan message on {bad}"
        line = plan.line
        touched = plan.touched = set(line) | down
        store = rt.store
        assert store is not None
        for nid, pt in line.items():
            if snapshots(rt.graph[nid]):
                with rt.store_lock:
                    ck = store.latest(nid, pt.time)
                if ck is None or ck.time != pt.time:
                    return f"node {nid} has no checkpoint at its point {pt.time}"
                plan.checkpoints[nid] = ck
        times = {n: line[n].time if n in line else sources[n] if not parents[n]
                 else current[n][0] for n in order}
        for c in order:
            for p in dict.fromkeys(parents[c]):
                if p not in touched and c not in touched:
                    continue
                seen = line[c].parent_times.get(p, 0) if c in line else current[c][1].get(p, 0)
                plan.held.add(c)
                if p in rt.durable:
                    plan.bases.setdefault(p, (0, {}))[1][c] = seen
                    continue
                if self.trimmed.get((p, c), 0) > seen:
                    return (f"the log {p} -> {c} is trimmed to {self.trimmed[(p, c)]}, past "
                            f"{c}'s point at {seen}")
                upto = times[p]
                msgs = [m for t, m in self.logs.get((p, c), ()) if seen < t <= upto]
                if msgs:
                    plan.resends.setdefault(c, []).extend(msgs)
        for b in order:
            if b in down and b in rt.durable:
                plan.bases.setdefault(b, (0, {}))
        for b, (_, kids) in list(plan.bases.items()):
            low = min(kids.values(), default=sources[b])
            first = rt.durable[b].since(low)[0]
            if first != low:
                return f"base {b}'s history starts after write {first}, not at {low}"
            plan.bases[b] = (low, kids)
        return plan

    def _recovery_line(self, order: list[str], parents: dict[str, list[str]], down: set[str],
                       current: dict[str, tuple[int, dict[str, int]]], sources: dict[str, int],
                       ) -> tuple[dict[str, Point], int | None] | str:
        """The nodes to set back and their points, and the index (cic) (``self.lock``
        held), or why there is none."""
        if self.cic:
            failed = [n for n in order if n in down and parents[n]]
            missing = [n for n in failed if not self.points.get(n)]
            if missing:
                return f"no checkpoint of {missing}"
            return index_line(order, parents, self.points, failed)
        line = newest_line(order, parents, self.points, sources, current, down)
        if line is None:
            return (f"no consistent recovery line for the lost nodes {sorted(down)}: some "
                    "node has no checkpoint its parents' points reach")
        return line, None

    def _forget_after(self, line: dict[str, Point]) -> None:
        """What the nodes set back did after their points (``self.lock`` held): their
        later points and the messages they logged sending after."""
        rt = self.rt
        for nid, pt in line.items():
            pts = self.points[nid]
            del pts[next(i for i, q in enumerate(pts) if q is pt) + 1:]
            for c in rt.graph[nid].children:
                q = self.logs.get((nid, c))
                while q and q[-1][0] > pt.time:
                    q.pop()
            if nid in self.floor:
                self.floor[nid] = min(self.floor[nid], pt.time)

    def roll_back(self, node_id: str) -> RecoveryReport | str:
        """Bring every node down back along the recovery line (the recovery thread,
        with the database's lock; the lost nodes on spares, down). The report is about
        ``node_id``; a string says why there is no line (nothing touched: the caller
        falls back on lineage). A failure part-way (another worker lost) leaves every
        node it touched down, for the next attempt."""
        rt = self.rt
        start = time.perf_counter()
        rt.wait()                      # every live node has handled what it was sent
        graph = rt.graph
        order = graph.topological()
        parents = {n: list(graph[n].parents) for n in order}
        with rt.lock:
            down = {n for n in order if n not in rt.up and n not in rt.restored}
        current = self._current(down)
        down |= {n for n in order if n not in current and n not in rt.durable}
        sources: dict[str, int] = {}
        for n in order:
            if not parents[n]:
                if n in rt.durable:
                    sources[n] = len(rt.durable[n])
                elif n in current:
                    sources[n] = current[n][0]
                elif graph[n].kind == "values":
                    # (a constant relation: it never sends, its time stays 0, its rows
                    # are its definition; a child that saw more is an orphan: refused)
                    sources[n] = 0
                else:
                    return f"source {n} is down and has no write history"
        with self.lock:
            plan = self._plan(order, parents, down, current, sources)
            if isinstance(plan, str):
                return plan
            self._forget_after(plan.line)
        touched = plan.touched | plan.held
        try:
            sends, rows = self._touch(order, plan)
        except BaseException:
            rt.abandon(n for n in order if n in touched)
            raise
        for n in order:
            if n in plan.line and graph[n].kind == "reader":
                for listener in list(rt.listeners.get(n, ())):
                    listener.lost(f"its view was rolled back by an {self.regime} recovery")
        # (the point of the first lost node that has one: a lost base has none)
        pt = next((plan.line[n] for n in order if n in down and n in plan.line), None)
        return RecoveryReport(node=node_id, strategy=self.regime,
                              seconds=time.perf_counter() - start, replayed_messages=sends,
                              rows=rows, checkpoint=None if pt is None else pt.time,
                              rolled_back=[n for n in order if n in plan.line])

    def _touch(self, order: list[str], plan: _Plan) -> tuple[int, int]:
        rt = self.rt
        hold = plan.touched | plan.held
        with rt.lock:
            for n in hold:
                rt.up.discard(n)
                rt.held[n] = []        # (from incarnations set back or lost: dropped)
                rt.restored.add(n)
            hosts: dict[str, list[str]] = {}
            for n in hold:
                hosts.setdefault(rt.placement[n], []).append(n)
        if rt.direct:
            futs = [rt.request(rt.workers[w], "uc_hold", ns) for w, ns in hosts.items()]
            for f in futs:
                f.result(300)
        futs = []
        for nid in order:
            pt = plan.line.get(nid)
            if pt is None:
                continue
            ck = plan.checkpoints.get(nid)
            futs.append(rt.request(rt.worker_of(nid), "uc_roll_back", nid, pt.time,
                                   pt.parent_times, None if ck is None else encode_checkpoint(ck),
                                   pt.index))
        for nid in order:
            if nid in plan.touched and not rt.graph[nid].parents and nid not in rt.durable:
                futs.append(rt.request(rt.worker_of(nid), "uc_source", nid))
        for f in futs:
            f.result(300)
        sends = rows = 0
        for b, (low, seen) in plan.bases.items():
            k, r = resend_base(rt, b, low, seen)
            sends += k
            rows += r
        for c in order:
            msgs = plan.resends.get(c)
            if msgs:
                n, r = rt.ask(rt.worker_of(c), "uc_replay", c, msgs)
                sends += n
                rows += r
        rt._release()
        return sends, rows

