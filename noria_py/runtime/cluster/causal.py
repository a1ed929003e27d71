"""The ``causal`` regime in a cluster (``noria-py serve --regime causal``): Clonos's causal
logging (seed 004, §3.2) with node shards on worker processes; a lost worker's nodes
alone are restored, on the spare, and replay their parents' in-flight logs in the
order their determinants, held downstream, give. No other node pauses or rolls back.

Normal operation, on the workers (``Worker._causal_handle``), is the embedded regime's
per-message work, the same code (``runtime/causal.py``: ``Determinants.take``): each
node shard logs the determinants a message carries, records its delivery (port,
sender time), piggybacks on each output message the determinants that child has not
had (a seventh field on the wire, ``causal.encode``'s bytes: never pickled), and keeps
the output in its in-flight log, in the worker's memory. Every
``tuning.CHECKPOINT_EVERY`` messages or ``CHECKPOINT_ROWS`` rows a node with parents
marks: a stateful one puts what changed since its last checkpoint in the checkpoint
store here (the ``ck`` frame), then every one sends its mark (time, parent-times) as
the ``pt`` frame the uncoordinated regime's points use, in that order: a mark here
always has its checkpoint. A node filled outside the message path (a new view, a
lineage rebuild) marks at once, whole, and its parents' logs to it start there.

**What survives a worker's SIGKILL, and the rule.** Everything a worker holds dies with
it: its nodes' state, their own determinants and those they hold of others, their
in-flight logs. What is kept elsewhere: the checkpoints and marks (here), the bases'
write histories (here: a base keeps no in-flight log, its history is its log), and
whatever live workers hold. So:

- a lost node's parent on a live worker still has its in-flight log to it; a parent
  lost too is restored first, and its replay regenerates its log (its mark is at or
  below what its lost children's marks took of it, so the log reaches back far
  enough); a base's messages come from its history;
- a lost node's determinants must be held by a live descendant for every time after
  its mark that a live node depends on (``recovery/causal.py: plan_operator``); those
  held only by nodes on the same worker, or on another one lost with it, are gone.

Recovery of a lost worker (the recovery thread, holding the database's lock; the lost
nodes on a spare, down, their messages held): every live node finishes what it was
sent (``wait``); each live worker says, per node shard, its last-seen times and the
determinants it holds of the lost nodes (``causal_state``). Then every lost node is
planned, in topological order, with the embedded regime's own functions
(``plan_operator``, over what was gathered): its mark (at or below what each child
took, a lost child's own mark's parent-time), its determinants' coverage, its
checkpoint at the mark in the store, its live parents' in-flight logs reaching back to
the mark (fetched now), its base parents' histories too. **Nothing is touched until
every lost node has passed**; a refusal says why, and the lost nodes (and all below
them, as lineage purges) are rebuilt by lineage (``RecoveryReport.fallback``): each
rebuilt node starts afresh as it settles (its times again from 0, nothing held, a
whole checkpoint and a mark), and the only nodes that held its determinants, those
below it, are rebuilt too, so nothing of its old times is left anywhere. Then, parents first: a base replays its history and resends each live child
what it has not taken; an operator is handed what its parents hold of its scope, is
restored from its checkpoint and mark, replays its parents' logs in the order
``replay_order`` gives (the determinants', then per-parent FIFO), sending each live
child only what it has not taken and refilling its own in-flight logs; a live child
whose newest mark reflects less of it than the restart marks now. Then the held
messages go (duplicates dropped by sender time).

**Garbage collection** (``Causal.gc``), the embedded regime's rule over every node at
once. The controller has every mark (the ``pt`` frames), so it stands in for the
children's reports to their parents (embedded: a node tells each parent the
parent-time of its stable mark every ``tuning.ACK_EVERY`` messages): every
``max(8, nodes)`` marks (with the database's lock, when free), children first, each node's stable mark
becomes the newest at or below what its children's stable marks took of it
(``causal.stabilize``, the embedded function; a node without children, its newest);
older marks leave. One ``["cgc", stable marks, levels]`` frame (msgpack maps of
integers, never pickled) on each worker's control connection then has each node drop
the determinants of every origin up to that origin's stable mark, its own and those it
holds (``causal.drop_determinants``), and trim its in-flight log to each child up to
the child's level, its stable mark's parent-time (``causal.trim_inflight``); a base's
history here is trimmed to its children's lowest level, and its checkpoint chain in
the store here folded up to its stable mark (``CheckpointStore.fold_upto``). What a restart from a stable
mark needs is therefore never dropped: its checkpoint (the chain's base is at or below
it), its parents' in-flight logs and histories after its parent-times, the
determinants after it; a recovery's mark is never below the stable one (every child
took at least its stable mark's parent-time), so ``plan_operator``'s coverage check
and refusal are unchanged. Not run while a node is down (its recovery goes first, with
the database's lock as the collection: frames queued before a recovery's requests on a
connection are handled before them). A lagging mark here only makes a level lower.

**Determinant depth** (``serve --determinant-depth N``): the controller and every
worker plan with ``Determinants(depth)`` (the depth goes in each worker's ``config``
frame), so a node's determinants are held by the nodes at most N edges below it; a
lost node whose determinants a live node depends on were all held on lost workers is
refused by ``plan_operator`` (lineage then), as embedded.

**Standbys** (``serve --standbys``; Clonos's passive standby tasks): each stateful
node shard has a standby on another live worker (``assign_standbys``), that worker's
copy of its newest checkpoint: made from the store's newest (``["sb"]``), then kept
by every checkpoint frame of the node forwarded there as the store takes it, under
``rt.store_lock`` (``on_checkpoint``: ``["sbck"]``, folded in at once), so the
controller knows the time it is as of. A lost node with a warm standby is placed on
the standby's worker (``standby_host``, read by the controller's placement of lost
nodes) and, when its plan's mark is that time, restored from the standby there
(``causal_restore`` with ``standby``: no checkpoint read or sent from here); an older
mark loads the store's checkpoint there instead. A standby taken over, lost, or made
stale (its node restored from an older mark: ``ck_keep`` below its time) is made
again after the recovery, on a worker other than its node's. Not kept warm: the
determinants and in-flight logs (the replay reads them from the live workers, as
without).

Invariants: ``marks[n]`` are ``n``'s marks in time order, each with its checkpoint in
the store (a stateful ``n``); a lost node is touched only once every lost node has a
plan; a node restored holds, of each origin in its scope, what its parents held; a
standby in ``in_sync`` with a ``standby_time`` holds exactly the node's checkpoint of
that time.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ... import tuning
from ...errors import Error
from ...recovery.causal import OperatorPlan, plan_operator, replay_order
from ...recovery.report import RecoveryReport
from ..causal import Determinants, DetLog, Mark, decode, newest_mark, stabilize
from ..messages import CausalMessage, Message
from .epochs import snapshots
from .errors import WorkerLost
from .lines import point, resend_base, when_free
from .wire import decode_message, encode_checkpoint, encode_message

if TYPE_CHECKING:  # pragma: no cover
    from ...graph import Node
    from ..checkpoints import Checkpoint
    from .controller import ClusterRuntime

log = logging.getLogger("noria_py.cluster")

__all__ = ["Causal", "Gathered"]

#: a time later than any checkpoint's (``CheckpointStore.latest``: the newest)
NEWEST = 2**62


class Gathered:
    """What a recovery reads (``recovery/causal.py: CausalView``): the marks here, the
    live nodes' last-seen times and determinants held, gathered from their workers."""

    def __init__(self, det: Determinants, marks: dict[str, list[Mark]], down: set[str],
                 seen: dict[str, dict[str, int]], held: dict[str, dict[str, DetLog]]) -> None:
        self.det = det
        self.marks = marks
        self.down = down
        self.seen = seen
        self.held = held

    @property
    def depth(self) -> int | None:
        return self.det.depth

    @property
    def holders(self) -> dict[str, list[str]]:
        return self.det.holders

    def alive(self, node_id: str) -> bool:
        return node_id not in self.down

    def last_seen_of(self, node_id: str, parent: str) -> int:
        return self.seen.get(node_id, {}).get(parent, 0)

    def mark_at_most(self, node_id: str, time: int | float) -> Mark | None:
        return newest_mark(self.marks.get(node_id, ()), time)

    def held_logs(self, origin: str) -> dict[str, DetLog]:
        return {h: logs[origin] for h, logs in self.held.items() if origin in logs}


class Causal:
    """The controller's side of the causal regime (module docstring)."""

    def __init__(self, rt: ClusterRuntime, depth: int | None = None,
                 standbys: bool = False) -> None:
        self.rt = rt
        self.lock = threading.Lock()        # (never held while taking rt.lock)
        self.marks: dict[str, list[Mark]] = {}
        #: the determinants' plan of the graph (who holds whose), for recovery
        self.det = Determinants(depth)
        self.taken = 0                       # marks received
        self.due = 0                         # marks since the last garbage collection
        self.collections = 0                 # garbage collections sent to the workers
        #: ``--standbys``: per stateful node shard, the worker holding its standby, and
        #: the time of the checkpoint that standby holds (absent: cold, never taken
        #: over); nodes whose standby has every checkpoint since it was made
        #: (``in_sync``). All three change under ``rt.store_lock`` (module docstring,
        #: "Standbys")
        self.standbys = standbys
        #: the thread making standbys after a recovery or DDL (off the recovery's
        #: path: a whole checkpoint encoded and sent per standby made)
        self.assigner: threading.Thread | None = None
        self.assigning = threading.Lock()
        self.standby_of: dict[str, str] = {}
        self.standby_time: dict[str, int] = {}
        self.in_sync: set[str] = set()

    # ------------------------------------------------------------ normal operation

    def on_point(self, f: Sequence[Any]) -> None:
        """A node shard's mark (``["pt", node, time, parent-times, 0, False]``)."""
        pt = point(f)
        with self.lock:
            self.marks.setdefault(f[1], []).append(Mark(pt.time, pt.parent_times))
            self.taken += 1
            self.due += 1
            due = self.due >= max(8, len(self.rt.graph.nodes))
        if due:
            self._collect()

    def _collect(self) -> None:
        """A garbage collection, now that as many marks came as the graph has nodes (8
        at least), if the database's lock is free (this is a worker's reader thread:
        it never waits for it; a recovery or DDL holding it, the next mark tries)."""
        when_free(self.rt, self.gc)

    def gc(self) -> bool:
        """The embedded regime's garbage collection over every node at once, from the
        marks here (module docstring, "Garbage collection"): children first, each node's
        stable mark the newest at or below what its children's stable marks took of it
        (``causal.stabilize``); every worker told each node's stable mark (its
        determinants dropped up to there wherever held) and each edge's level (the
        child's stable mark's parent-time: the parent's in-flight log to it trimmed up
        to there); the bases' histories trimmed to their children's levels. Not with a
        node down (its recovery runs first). Whether it ran."""
        rt = self.rt
        graph = rt.graph
        order = graph.topological()
        with rt.lock:
            if any(n not in rt.up for n in rt.placement):
                return False
        stables: dict[str, int] = {}
        levels: dict[str, dict[str, int]] = {}
        lows: dict[str, int] = {}
        with self.lock:
            self.due = 0
            marks = self.marks
            for n in reversed(order):
                node = graph[n]
                kids = list(dict.fromkeys(node.children))
                taken = [marks[c][0].parent_times.get(n, 0) for c in kids if marks.get(c)]
                whole = len(taken) == len(kids)   # (a child not marked yet reports nothing)
                if n in rt.durable:
                    if whole and taken:
                        lows[n] = min(taken)
                    continue
                ms = marks.get(n)
                if not ms:
                    continue
                if whole:
                    stables[n] = stabilize(ms, min(taken, default=float("inf"))) or 0
                for p, level in ms[0].parent_times.items():
                    if p not in rt.durable:
                        levels.setdefault(p, {})[n] = level
            self.collections += 1
        with rt.lock:
            for w in rt.workers.values():
                if w.alive:
                    w.put(["cgc", stables, levels])
        store = rt.store
        if store is not None:
            with rt.store_lock:
                for n, t in stables.items():
                    store.fold_upto(n, t)
        for b, low in lows.items():
            rt.durable[b].trim(low)
        return True

    def forget(self, node_id: str) -> None:
        """A node dropped with its view, or emptied for a lineage rebuild (its standby
        goes too: ``settle`` makes it again)."""
        with self.lock:
            self.marks.pop(node_id, None)
        if self.standbys:
            with self.rt.store_lock:
                self._drop_standby(node_id)

    # ------------------------------------------------------------ standbys

    def _drop_standby(self, n: str) -> None:
        """``n`` has no standby (with ``rt.store_lock``)."""
        s = self.standby_of.pop(n, None)
        self.standby_time.pop(n, None)
        self.in_sync.discard(n)
        w = self.rt.workers.get(s or "")
        if w is not None and w.alive:
            w.put(["sb_drop", n])

    def on_checkpoint(self, f: Sequence[Any]) -> None:
        """A checkpoint frame of ``f[1]`` (``ck``, ``ck_keep``, ``ck_drop``), just applied
        to the store (with ``rt.store_lock``): a standby in sync gets the checkpoint
        too, folded in at once; one newer than where its node restarted from
        (``ck_keep``) is stale, made again by ``assign_standbys``."""
        n = f[1]
        if n not in self.in_sync:
            return
        w = self.rt.workers.get(self.standby_of.get(n, ""))
        if w is None or not w.alive:
            return
        if f[0] == "ck":
            if f[6] or n in self.standby_time:
                self.standby_time[n] = f[2]
            w.put(["sbck", n, f[2], f[3], f[4], f[5], f[6]])
        elif f[0] == "ck_keep":
            if self.standby_time.get(n, -1) > f[2]:
                self.in_sync.discard(n)
                self.standby_time.pop(n, None)
        else:
            self._drop_standby(n)

    def standby_host(self, n: str) -> str | None:
        """The live worker whose warm standby of the lost ``n`` takes it over (a loss
        places ``n`` there, not on a spare; with ``rt.lock``), None: none."""
        with self.rt.store_lock:
            s = self.standby_of.get(n)
            warm = n in self.standby_time and n in self.in_sync
        w = self.rt.workers.get(s or "")
        if not warm or w is None or not w.alive or self.rt.placement.get(n) == s:
            return None
        return s

    def refresh_standbys(self, delay: float = 0.0) -> None:
        """``assign_standbys`` on a thread of its own, after ``delay`` seconds (after a
        recovery, ``tuning.STANDBY_DELAY``; after DDL, at once): the recovery holding
        the database's lock, and the reads and waits after it, do not wait for it."""
        if not self.standbys:
            return

        def later() -> None:
            time.sleep(delay)
            self.assign_standbys()
        t = self.assigner = threading.Thread(target=later, name="standbys", daemon=True)
        t.start()

    def wait_standbys(self, timeout: float = 60.0) -> None:
        """Until the last ``refresh_standbys`` is done (tests, benchmarks)."""
        if self.assigner is not None:
            self.assigner.join(timeout)

    def assign_standbys(self) -> None:
        """Every stateful node shard whose standby is missing, lost, on its own worker
        (it took it over) or stale gets one: on another live active worker, one
        hosting none of its neighbours where it can, the fewest standbys first, sent
        the store's newest checkpoint (none yet: its next whole one makes it warm).
        One node at a time under ``rt.store_lock`` (the checkpoint frames forwarded
        wait for one node's, never for all)."""
        if not self.standbys:
            return
        rt = self.rt
        graph = rt.graph
        with self.assigning:
            with rt.lock:
                active = [w.name for w in rt.active if w.alive]
                placement = dict(rt.placement)
            count = Counter(self.standby_of.values())
            for n, host in placement.items():
                node = graph.nodes.get(n)
                if node is None or not snapshots(node):
                    continue
                with rt.store_lock:
                    self._assign(n, node, host, active, placement, count)

    def _assign(self, n: str, node: Node, host: str, active: list[str],
                placement: dict[str, str], count: Counter[str]) -> None:
        """``assign_standbys`` for ``n`` (with ``rt.store_lock``)."""
        rt = self.rt
        now = self.standby_of.get(n)
        if now is not None and now != host and now in active and n in self.in_sync:
            return
        others = [a for a in active if a != host]
        if not others:
            self._drop_standby(n)
            return
        near = {placement.get(x) for x in (*node.parents, *node.children)}
        best = min(others, key=lambda a: (a in near, count[a]))
        w = rt.workers.get(best)
        if w is None or not w.alive:
            return
        if now is not None and now != best:
            self._drop_standby(n)
        count[best] += 1
        assert rt.store is not None
        ck = rt.store.latest(n, NEWEST)
        w.put(["sb", n, None if ck is None else encode_checkpoint(ck)])
        self.standby_of[n] = best
        self.in_sync.add(n)
        if ck is None:
            self.standby_time.pop(n, None)
        else:
            self.standby_time[n] = ck.time

    def settle(self, fresh: set[str]) -> None:
        """Nodes filled outside the message path (their workers mark them whole when
        they settle): each parent's log to one starts now, and sends it every
        determinant afresh (Clonos: a new consumer gets them all)."""
        rt = self.rt
        for nid in rt.graph.topological():
            if nid in fresh:
                for p in dict.fromkeys(rt.graph[nid].parents):
                    if p not in rt.durable:
                        try:
                            rt.call(p, "causal_handoff", nid, True)
                        except WorkerLost:
                            pass         # (a parent lost: its restore hands off anew)
        self.refresh_standbys()

    # ------------------------------------------------------------ recovery

    def _gather(self, down: set[str]) -> tuple[dict[str, dict[str, int]],
                                               dict[str, dict[str, DetLog]]]:
        """Each live node's last-seen times and the determinants of ``down`` it holds."""
        rt = self.rt
        with rt.lock:
            hosts = {w for n, w in rt.placement.items() if n not in down}
            futs = [rt.request(rt.workers[w], "causal_state", sorted(down)) for w in hosts]
        seen: dict[str, dict[str, int]] = {}
        held: dict[str, dict[str, DetLog]] = {}
        id_of = self.det.id_of
        for fut in futs:
            for n, (last, logs) in fut.result(300).items():
                seen[str(n)] = {str(p): int(t) for p, t in last.items()}
                mine = held[str(n)] = {}
                for data in logs.values():
                    for num, start, ports, times in decode(data):
                        log_ = DetLog(start)
                        log_.ports, log_.times = ports, times
                        mine[id_of[num]] = log_
        return seen, held

    def _plan(self, order: list[str], down: set[str], view: Gathered,
              ) -> dict[str, Any] | str:
        """Every lost node's plan (nothing touched), or why there is none."""
        rt = self.rt
        graph = rt.graph
        store = rt.store
        assert store is not None
        plans: dict[str, Any] = {}
        memo: dict[str, Mark | None] = {}
        for n in order:
            if n not in down:
                continue
            node = graph[n]
            if n in rt.durable:
                kids = {c: view.last_seen_of(c, n) for c in dict.fromkeys(node.children)
                        if c not in down}
                low = min(kids.values(), default=len(rt.durable[n]))
                first = rt.durable[n].since(low)[0]
                if first != low:
                    return f"base {n}'s history starts after write {first}, not at {low}"
                plans[n] = ("base", low, kids)
                continue
            if not node.parents:
                plans[n] = ("values",)
                continue
            try:
                op = plan_operator(graph, view, n, memo)
            except Error as e:
                return str(e)
            ck: Checkpoint | None = None
            with rt.lock:
                host = rt.placement.get(n)
            with rt.store_lock:          # (its standby, moved to, is as of the mark)
                standby = (snapshots(node) and self.standby_of.get(n) == host
                           and n in self.in_sync
                           and self.standby_time.get(n) == op.mark.time)
                if snapshots(node) and not standby:
                    ck = store.latest(n, op.mark.time)
            if snapshots(node) and not standby and (ck is None or ck.time != op.mark.time):
                return f"node {n} has no checkpoint at its mark {op.mark.time}"
            buffers: dict[str, list[Message] | None] = {}
            for a in dict.fromkeys(node.parents):
                after = op.mark.parent_times.get(a, 0)
                if a in rt.durable:
                    first, writes = rt.durable[a].since(after)
                    if first != after:
                        return (f"base {a}'s history starts after write {first}, past "
                                f"{n}'s mark at {after}")
                    # (an empty write sends nothing: its time has no message)
                    buffers[a] = [CausalMessage(a, n, b, first + i + 1)
                                  for i, b in enumerate(writes) if len(b)]
                elif a in down:
                    buffers[a] = None            # (regenerated by its own replay)
                else:
                    try:
                        raw = rt.call(a, "causal_inflight", n, after)
                    except Error as e:
                        return str(e)
                    buffers[a] = [decode_message(m) for m in raw]
            if all(b is not None for b in buffers.values()):
                try:                             # (checked now: the logs agree)
                    replay_order(n, list(node.parents), op.pinned,
                                 {a: b for a, b in buffers.items() if b is not None})
                except Error as e:
                    return str(e)
            plans[n] = ("op", op, ck, buffers, standby)
        return plans

    def recover(self, node_id: str) -> RecoveryReport | str:
        """Restore every lost node (the recovery thread, with the database's lock; the
        lost nodes on spares, down). The report is about ``node_id``; a string says why
        not (nothing touched: the caller falls back on lineage). A failure part-way
        (another worker lost) leaves every node it touched down, for the next attempt."""
        rt = self.rt
        start = time.perf_counter()
        rt.wait()                      # every live node has handled what it was sent
        graph = rt.graph
        order = graph.topological()
        with rt.lock:
            down = {n for n in order if n not in rt.up and n not in rt.restored}
        self.det.plan(graph)
        seen, held = self._gather(down)
        down |= {n for n in order if n not in seen}
        with self.lock:
            marks = {n: list(ms) for n, ms in self.marks.items()}
        view = Gathered(self.det, marks, down, seen, held)
        plans = self._plan(order, down, view)
        if isinstance(plans, str):
            return plans
        lost = [n for n in order if n in down]
        try:
            sends, rows, taken = self._touch(lost, plans, view)
        except BaseException:
            rt.abandon(lost)
            raise
        seconds = time.perf_counter() - start
        # (those taken over, lost or stale: made again, once the recovery has settled)
        self.refresh_standbys(tuning.STANDBY_DELAY)
        first = next((plans[n][1] for n in lost if plans[n][0] == "op"), None)
        paths = {n: ("history" if p[0] == "base" else "standby" if n in taken
                     else "checkpoint" if p[0] == "op" and snapshots(graph[n]) else "replayed")
                 for n, p in plans.items()}
        return RecoveryReport(node=node_id, strategy="causal", seconds=seconds,
                              replayed_messages=sends, rows=rows,
                              checkpoint=None if first is None else first.mark.time,
                              rolled_back=lost, paths=paths)

    def _touch(self, lost: list[str], plans: dict[str, Any],
               view: Gathered) -> tuple[int, int, set[str]]:
        """Restore every lost node by its plan, parents first: (messages replayed, rows,
        the nodes whose standby took them over)."""
        rt = self.rt
        graph = rt.graph
        sends = rows = 0
        taken: set[str] = set()
        for n in lost:
            plan = plans[n]
            with rt.lock:
                rt.restored.add(n)
            if plan[0] == "base":
                sends += resend_base(rt, n, plan[1], plan[2])[0]
                continue
            if plan[0] == "values":
                rt.call(n, "uc_source")
                continue
            op: OperatorPlan = plan[1]
            ck: Checkpoint | None = plan[2]
            buffers: dict[str, list[Message] | None] = plan[3]
            standby: bool = plan[4]
            node = graph[n]
            parents = list(node.parents)
            seeds = [rt.call(a, "causal_handoff", n, False)
                     for a in dict.fromkeys(parents) if a not in rt.durable]
            if standby:
                try:
                    rt.call(n, "causal_restore", op.mark.time, op.mark.parent_times, None,
                            seeds, True)
                    taken.add(n)
                    with rt.store_lock:  # (taken over: none until ``assign_standbys``)
                        self.in_sync.discard(n)
                        self.standby_time.pop(n, None)
                except WorkerLost:
                    raise
                except Error as e:       # (nothing touched there: from the store, then)
                    log.warning("the standby of %s was not taken over (%s): its "
                                "checkpoint comes from here", n, e)
                    standby = False
                    with rt.store_lock:
                        ck = rt.store.latest(n, op.mark.time) if rt.store else None
            if not standby:
                rt.call(n, "causal_restore", op.mark.time, op.mark.parent_times,
                        None if ck is None else encode_checkpoint(ck), seeds, False)
            full: dict[str, list[Message]] = {}
            for a, buf in buffers.items():
                if buf is None:          # (a lost parent, restored above)
                    raw = rt.call(a, "causal_inflight", n, op.mark.parent_times.get(a, 0))
                    buf = [decode_message(m) for m in raw]
                full[a] = buf
            msgs = replay_order(n, parents, op.pinned, full)
            kids = {c: view.last_seen_of(c, n) for c in dict.fromkeys(node.children)
                    if c not in view.down}
            k, r = rt.call(n, "causal_replay", [encode_message(m) for m in msgs], kids)
            sends += k
            rows += r
            for c in kids:               # (its logs to them now start after the mark)
                rt.call(c, "causal_parent_restarted", n, op.mark.time)
            with self.lock:              # (it may take another path from its mark)
                ms = self.marks.get(n, [])
                self.marks[n] = [m for m in ms if m.time <= op.mark.time]
        rt._release()
        return sends, rows, taken
