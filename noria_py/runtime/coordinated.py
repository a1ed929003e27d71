"""The ``coordinated`` regime: aligned barrier checkpoints (Chandy-Lamport as Flink's
asynchronous barrier snapshots do it, seeds 003 and 004), in the embedded runtime.

Normal operation. Every ``barrier_every`` writes (or ``barrier_seconds`` seconds,
whichever comes first) epoch ``e`` starts: every source (a base table, a VALUES node)
records its position (a base: the number of writes it has taken, a point in its write
history) and sends a ``Barrier`` to each child, on the same queues as the data, after
everything it sent before. A node with one parent snapshots when the barrier arrives;
a node with several **aligns**: once the barrier has come from a parent, that parent's
later messages are held in the node's buffer (not processed) until the barrier has come
from every parent. Then the node snapshots its state, its time and its last-seen time
per parent into the epoch's store, forwards the barrier to each child, and processes
what it held, in arrival order (a held message may be the next epoch's barrier, which
blocks that input again). Epoch ``e`` is **complete** when every node has snapshotted
it; the epochs before it are then forgotten, and each base's write history is trimmed to
its position in ``e`` (a rollback replays from there, never from before).

Why the snapshot is consistent: the graph is acyclic and every edge is FIFO, so a node
aligned on ``e`` has taken exactly what its parents sent before their own snapshot of
``e``, and nothing after. No message is in flight across the cut: the channels' state,
which Chandy-Lamport records, is empty here, and a rollback needs only the snapshots
and the bases' write histories.

Failure and recovery (``recovery/coordinated.py``). A failed node loses its state; its
barriers never come, so no epoch completes while it is down (no new epoch is started
either). Recovery rolls back **every** node to the last complete epoch: the queues and
alignment buffers are emptied, each stateful node loads its snapshot, each node takes
its time and last-seen times back, and each base, restored to its position, resends
the writes after it from its write history. The state of every operator is a function
of the multiset of rows taken (docs/recovery.md, "Determinism"), so the replay may
interleave the parents differently and still leaves every view right.

Snapshots are incremental as the tree-clock regime's are (``checkpoints.py``): a node's
first, and every one taken at a graph change, is whole; the others are what changed
since its previous snapshot (a node's ``ck_inputs``, an aggregate's changed groups).
A graph change (CREATE VIEW, a lineage rebuild) happens on a quiet graph
(``Database._create_view`` waits first), and with every node alive this runtime then
takes a whole, complete epoch at once (``settle``). If a node is down then, there is
no complete epoch covering the graph: recovery rebuilds every operator from the
tables (``RecoveryReport.checkpoint`` None) until an epoch completes again.

What alignment costs here. Without a seed the embedded runtime runs each write to
quiescence before the next, and a barrier is injected between writes: it crosses a
graph with nothing else in flight, so no input is ever held and alignment costs one
barrier message per edge and epoch plus the snapshots. With a seed, writes stay in
flight between calls and barriers overtake nothing: a node with several parents holds
the inputs that delivered the barrier, for as many steps as the slowest input takes
(``align.held`` counts them; the tests check it is not zero). In a cluster
(``cluster/epochs.py``, the same ``Aligner``) it holds up the node's fast inputs for
the slowest one's latency across workers.
"""
from __future__ import annotations

import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError
from ..graph import Graph, Node
from . import checkpoints
from .checkpoints import CheckpointStore
from .domain import Domain
from .embedded import EmbeddedRuntime
from .history import WriteHistory
from .messages import Message

__all__ = ["Aligner", "Barrier", "CoordinatedRuntime", "Rollback"]

T = TypeVar("T")


class Aligner(Generic[T]):
    """Each node's alignment on a barrier (the module docstring): the parents whose
    barrier has come, and what they sent since, held in arrival order. One code for
    both runtimes: this one's messages, and a worker's messages and barrier frames
    (``cluster/epochs.py``). Invariant: a node has a buffer exactly while it aligns
    (a barrier has come from some parents, not from all)."""

    def __init__(self) -> None:
        #: per node aligning: the parents whose barrier has come
        self.arrived: dict[str, set[str]] = {}
        #: per node aligning: what those parents sent since, in arrival order
        self.buffers: dict[str, list[T]] = {}
        self.held = 0                        # items ever held by an alignment

    def holds(self, dst: str, src: str, item: T) -> bool:
        """Whether ``item``, from parent ``src`` to ``dst``, is held (that parent's
        barrier has come and ``dst`` aligns): then it is in ``dst``'s buffer."""
        arrived = self.arrived.get(dst)
        if arrived is None or src not in arrived:
            return False
        self.buffers[dst].append(item)
        self.held += 1
        return True

    def arrive(self, dst: str, src: str, parents: int) -> list[T] | None:
        """The barrier from parent ``src`` at ``dst`` (of ``parents`` parents): None
        while another parent's is to come; once every one's has, what was held, to be
        delivered again in order after ``dst`` snapshots and forwards the barrier (a
        held barrier of the next epoch blocks its input again)."""
        arrived = self.arrived.get(dst)
        if arrived is None:
            arrived = self.arrived[dst] = set()
            self.buffers[dst] = []
        arrived.add(src)
        if len(arrived) < parents:
            return None
        del self.arrived[dst]
        return self.buffers.pop(dst)

    def drop(self, dst: str | None = None) -> None:
        """``dst``'s alignment forgotten, what it held dropped (every node's: None)."""
        if dst is None:
            self.arrived.clear()
            self.buffers.clear()
        else:
            self.arrived.pop(dst, None)
            self.buffers.pop(dst, None)


@dataclass(slots=True)
class Barrier(Message):
    """Epoch ``time``'s barrier from ``src`` to ``dst`` (an empty batch)."""


@dataclass
class Rollback:
    """What a rollback did: the epoch it went back to (None: none covered the graph,
    every operator was rebuilt from the tables), the nodes rolled back, the messages
    the bases resent and the rows in them."""
    epoch: int | None
    nodes: list[str]
    messages: int
    rows: int


class CoordinatedRuntime(EmbeddedRuntime):
    """The embedded runtime with barrier checkpoints instead of tree clocks."""

    def __init__(self, graph: Graph, seed: int | None = None,
                 barrier_every: int | None = None,
                 barrier_seconds: float | None = None) -> None:
        super().__init__(graph, seed, clocks=False, checkpoints=False)
        self.barrier_every = barrier_every if barrier_every is not None else (
            tuning.BARRIER_EVERY if barrier_seconds is None else None)
        self.barrier_seconds = barrier_seconds
        #: every node's snapshots, by epoch (``CheckpointStore`` with the epoch as time)
        self.epochs = CheckpointStore()
        #: per epoch started: node -> (its time, its last-seen times) at its snapshot
        self.meta: dict[int, dict[str, tuple[int, dict[str, int]]]] = {}
        self.epoch = 0                       # the last epoch started
        self.complete: int | None = None     # the last complete epoch (None: none yet)
        #: each node's alignment (``held`` counts the messages it ever held)
        self.align: Aligner[Message] = Aligner()
        self.writes_since = 0
        self.last_barrier = _time.monotonic()
        #: nodes whose next snapshot must be whole (their state changed outside ``handle``)
        self.whole: set[str] = set()
        self.snapshots = 0                   # node snapshots taken (whole or deltas)

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> Domain:
        d = super().add(node)
        self.whole.add(node.id)
        return d

    def checkpoint_into(self, d: Domain) -> None:
        # the domain records what it takes for the next delta (ck_inputs, tracking);
        # the runtime decides when a snapshot is taken and puts it itself
        d.use_checkpoints(self.epochs)

    def remove(self, node_id: str) -> None:
        super().remove(node_id)
        self.epochs.drop(node_id)
        for m in self.meta.values():
            m.pop(node_id, None)
        self.align.drop(node_id)
        for e in sorted(self.meta):
            self._maybe_complete(e)

    def settle(self, fresh: set[str], adopted: set[str] | frozenset[str] = frozenset()) -> None:
        """Nodes were filled outside the message path (a new view, a lineage rebuild):
        on a quiet graph with every node up, take a whole, complete epoch now; else no
        complete epoch covers the graph until the next one completes."""
        self.refresh_clocks()
        for nid in self.graph.topological():
            if nid in fresh:           # (``EmbeddedRuntime.settle`` without its checkpoint)
                d = self.domains[nid]
                d.settle({p: (self.domains[p].time, None, p in fresh) for p in d.node.parents})
        if self.pending() or self.align.buffers or not all(d.alive for d in self.domains.values()):
            self.complete = None
            self.meta.clear()
            self.whole.update(self.domains)
            return
        self.epoch += 1
        self.meta[self.epoch] = {}
        self.whole.update(self.domains)
        for nid in self.graph.topological():
            self._snapshot(self.domains[nid], self.epoch, forward=False)

    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None:
        """No local checkpoints here (a lineage rebuild's restored base calls this)."""

    # ------------------------------------------------------------ barriers

    def write(self, base_id: str, batch: Batch) -> None:
        self._enter(base_id, batch)
        self.writes_since += 1
        if self._barrier_due():
            self.inject()
        self._propagate()

    def _barrier_due(self) -> bool:
        every, seconds = self.barrier_every, self.barrier_seconds
        return ((every is not None and self.writes_since >= every)
                or (seconds is not None and _time.monotonic() - self.last_barrier >= seconds))

    def inject(self) -> bool:
        """Start an epoch: every source snapshots and sends a barrier to its children.
        Not while a node is down (the epoch could not complete); returns whether one
        started."""
        if not all(d.alive for d in self.domains.values()):
            return False
        self.writes_since = 0
        self.last_barrier = _time.monotonic()
        self.epoch += 1
        self.meta[self.epoch] = {}
        for nid in self.graph.topological():
            d = self.domains[nid]
            if not d.node.parents:
                self._snapshot(d, self.epoch)
        return True

    def deliver(self, m: Message) -> None:
        dst = m.dst
        d = self.domains.get(dst)
        if d is None or not d.alive:
            return                      # a crashed node loses what is sent to it
        if self.align.holds(dst, m.src, m):
            return                      # this input delivered the barrier: held
        if type(m) is Barrier:
            self._on_barrier(d, m)
            return
        super().deliver(m)

    def _on_barrier(self, d: Domain, m: Message) -> None:
        held = self.align.arrive(d.id, m.src, len(d.node.parents))
        if held is None:
            return                      # aligning: wait for the barrier on every input
        self._snapshot(d, m.time)
        for h in held:                  # (a held barrier of the next epoch blocks again)
            self.deliver(h)

    def _snapshot(self, d: Domain, epoch: int, forward: bool = True) -> None:
        """``d`` records its state as of ``epoch`` and forwards the barrier (not in an
        epoch taken at once on a quiet graph, ``settle``)."""
        nid = d.id
        meta = self.meta.get(epoch)
        if meta is None:                # an epoch a graph change abandoned: pass it on,
            self.send_all([Barrier(nid, c, Batch(), epoch) for c in d.node.children])
            return                      # so that the nodes below stop aligning on it
        if d.store is not None:
            op = d.node.op
            full = nid in self.whole or not self.epochs.has(nid)
            change = checkpoints.delta(op, full, d.ck_inputs or [])
            if d.ck_inputs is not None:
                d.ck_inputs = []
            d.ck_messages = d.ck_rows = 0
            self.epochs.put(nid, epoch, d.last_seen, cast(str, op.checkpoint_form), change,
                            full, self.complete if self.complete is not None else -1)
            self.snapshots += 1
        self.whole.discard(nid)
        meta[nid] = (d.time, dict(d.last_seen))
        if forward:
            self.send_all([Barrier(nid, c, Batch(), epoch) for c in d.node.children])
        self._maybe_complete(epoch)

    def _maybe_complete(self, epoch: int) -> None:
        meta = self.meta.get(epoch)
        if meta is None or len(meta) < len(self.domains) or not self.domains.keys() <= meta.keys():
            return
        self.complete = epoch
        for e in [e for e in self.meta if e < epoch]:
            del self.meta[e]
        for nid, hist in self.durable.items():
            if nid in meta:
                hist.trim(meta[nid][0])

    def _trim_history(self, base_id: str, d: Domain, history: WriteHistory) -> None:
        """A rollback replays from the base's position in the last complete epoch: keep
        everything after it (trimmed when an epoch completes, ``_maybe_complete``)."""

    # ------------------------------------------------------------ failure

    def crash(self, node_id: str) -> None:
        super().crash(node_id)
        self.align.drop(node_id)

    def rollback(self, rebuild: Callable[[set[str]], None]) -> Rollback:
        """Every node back to the last complete epoch, the bases resending their writes
        since; without one, every operator rebuilt by ``rebuild`` (a lineage pass) from
        the tables brought up to date."""
        self.fifo.clear()
        self.edges.clear()
        self.active.clear()
        self.align.drop()
        epoch = self.complete
        order = self.graph.topological()
        if epoch is not None and any(n not in self.meta[epoch] and self.graph[n].parents
                                     for n in order):
            epoch = None                     # (an operator the epoch does not cover)
        if epoch is None:
            operators = {n for n in order if self.graph[n].parents}
            for nid in order:
                d = self.domains[nid]
                d.crash()
                if nid in self.durable:      # a base: its table as it stands now
                    start, rows, writes = self.durable[nid].table()
                    d.write_history(writes, {}, 0, start, rows)
                d.alive = True
            self.meta.clear()
            rebuild(operators)               # (settle takes a complete epoch)
            return Rollback(None, list(order), 0, 0)
        meta = self.meta[epoch]
        for e in [e for e in self.meta if e > epoch]:
            del self.meta[e]
        sends: list[Message] = []
        for nid in order:
            d = self.domains[nid]
            d.crash()
            # (a source created after the epoch had taken nothing as of it)
            at, last_seen = meta.get(nid, (0, {}))
            if nid in self.durable:
                start, rows, writes = self.durable[nid].table()
                seen = {c: at for c in d.node.children}
                sends += d.write_history(writes, seen, 0, start, rows)
                d.alive = True
                continue
            if d.store is not None:
                ck = self.epochs.latest(nid, epoch)
                if ck is None or ck.time != epoch:
                    raise RecoveryError(f"node {nid} has no snapshot of epoch {epoch}")
                checkpoints.load(d.node.op, ck)
                self.epochs.keep_upto(nid, epoch)
            d.time = at
            d.last_seen = dict(last_seen)
            d.alive = True
        self.writes_since = 0
        self.last_barrier = _time.monotonic()
        self.send_all(sends)
        return Rollback(epoch, list(order), len(sends), sum(len(m.batch) for m in sends))
