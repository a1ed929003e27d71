"""The ``coordinated`` regime in a cluster (``noria-py serve --regime coordinated``):
checkpoints of every node shard by barriers aligned in flight (Chandy-Lamport as
Flink's asynchronous barrier snapshots do it, seeds 003 and 004), and a rollback of
every node to the last complete one when a worker is lost.

Normal operation. Every ``tuning.BARRIER_EVERY`` writes (``--barrier-every``), when
no epoch is in flight and every node is up, the controller starts epoch ``e``
(``inject``): it sends ``["barrier", e, stable, whole]`` to each worker hosting a
source (a base, a VALUES node), on the connection that carries the writes, behind the
writes accepted before it, and goes on accepting writes. There each source is at its
position in ``e`` (its time: the writes it has taken), reports it and sends
``["bar", child, source, e, ...]`` to each child, on the same FIFO channel as its
messages (a direct link, the worker's own inbox, or the controller's relay). A node
shard aligns (``coordinated.Aligner``, one code with the embedded regime): once the
barrier has come from a parent, what that parent sends after it is held, until it
has come from every parent; then the node snapshots (a stateful one puts what
changed since its last snapshot into the store on the controller, tagged ``e``),
reports its time and last-seen times (``["ep", e, {node: [time, seen]}]``, on its
worker's connection after the checkpoint frame), forwards the barrier to its
children and takes what it held, in arrival order (``Worker.barrier``). Epoch ``e``
is **complete** once every node of the graph has reported it (``on_report``, on the
worker's reader thread): the epochs before it are forgotten, each base's write
history is trimmed to its position in ``e``, and the snapshots' chains fold below
``e``. Several epochs may be in flight (``MAX_IN_FLIGHT`` at most: then a due one
waits for a write after one completes); they complete in order, since every node
reports each epoch before the next, on a FIFO connection.

Why consistent: every edge is FIFO and the graph acyclic, so a node aligned on ``e``
has taken exactly what each parent sent before that parent's own snapshot of ``e``,
and nothing after: no message crosses the cut, and a rollback needs only the
snapshots and the bases' write histories.

Quiet epochs stay where the graph changes outside the message path: after a graph
change (``settle``: its new nodes were filled by a migration, and no barrier of an
epoch started before reaches them) and at a controller restart that keeps its
workers' nodes (the epochs died with the controller before), ``take`` makes the graph
quiet (``ClusterRuntime.wait``, holding the database's lock, so no write is accepted
meanwhile) and asks every worker to snapshot each node shard it hosts
(``Worker.req_epoch``), whole. It supersedes an epoch in flight (after ``wait`` every
barrier has crossed the graph that existed).

Failure and recovery (the recovery thread, holding the database's lock). The lost
worker's nodes are placed on a spare, down. Before any node is touched, the epoch in
flight is abandoned (``abandon``: it never completes now, and the workers drop its
barriers, ``floor``). Then every live node finishes what it was sent (``wait``:
messages for the down nodes are held, then dropped: they come from the incarnation
being rolled back), and **every** node, failed or not, rolls back to the last
complete epoch (``Worker.req_roll_back``: its alignment's buffer dropped, its state
from the snapshot on the controller, its time and last-seen times from the epoch);
then each base resends the writes after its position from its history on the
controller. Operators are deterministic functions of the multiset of rows taken
(docs/recovery.md, "Determinism"), so the replay leaves every view right whatever
the interleaving. A subscription to a view ends with a ``SubscriptionError`` at a
rollback (its reader was set back).

No complete epoch covering the graph (a view created while a node was down): the
lost nodes are rebuilt by lineage as in ``--regime lineage`` (the report says so),
and the next graph change or epoch covers the graph again.

Invariant: ``complete`` is None or an epoch whose ``meta`` names every node of the
graph, every stateful one with a snapshot of that epoch in the store; a base's history
is trimmed to its position in ``complete`` and no further; ``meta`` holds at most
``complete`` and the epochs in flight.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ... import tuning
from ...errors import RecoveryError
from ...recovery.report import RecoveryReport
from . import wire
from .wire import encode_checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from ...graph import Node
    from .controller import ClusterRuntime

log = logging.getLogger("noria_py.cluster")

__all__ = ["Epochs", "snapshots"]

#: epochs in flight at once at most: one more is due every ``barrier_every`` writes,
#: but the writes are accepted faster than the workers take them; a due epoch waits
#: (for a write after one completes) rather than pile up snapshots on a lagging graph
MAX_IN_FLIGHT = 4


def _meta(got: Any) -> dict[str, tuple[int, dict[str, int]]]:
    """Nodes' [time, last-seen times] as a worker sent them, checked."""
    try:
        return {str(n): (int(t), {str(p): int(x) for p, x in seen.items()})
                for n, (t, seen) in got.items()}
    except (AttributeError, TypeError, ValueError):
        raise wire.ProtocolError("an epoch's report must map nodes to [time, "
                                 "{parent: time}]") from None

def snapshots(node: Node) -> bool:
    """Whether the epochs hold a snapshot of ``node`` (a stateful operator; on the
    controller, a stateful node's op is a ``RemoteOp`` standing in for its worker's)."""
    op = getattr(node.op, "local", node.op)
    return bool(node.parents) and op.checkpoint_form is not None


class Epochs:
    """The controller's epochs of the coordinated regime (module docstring)."""

    def __init__(self, rt: ClusterRuntime, barrier_every: int | None = None) -> None:
        self.rt = rt
        self.every = barrier_every if barrier_every is not None else tuning.BARRIER_EVERY
        self.epoch = 0                        # the last epoch started
        self.complete: int | None = None      # the last complete one (None: none)
        #: the epochs up to this one were abandoned by a rollback: never complete
        self.floor = 0
        #: per epoch kept (``complete``, the one in flight): node -> (its time, its
        #: last-seen times) at its snapshot
        self.meta: dict[int, dict[str, tuple[int, dict[str, int]]]] = {}
        self.writes_since = 0
        self.taken = 0                        # complete epochs taken
        self.lock = threading.Lock()          # (``meta``, ``complete``, ``floor``)

    # ------------------------------------------------------------ normal operation

    def before_write(self) -> None:
        """Called with the database's lock held, before a write is accepted: a barrier
        injected when an epoch is due (never failing the write: one that cannot start
        now, too many in flight or a node down, starts at a later write)."""
        self.writes_since += 1
        if self.writes_since > self.every and self.inject():
            self.writes_since = 1

    def in_flight(self) -> list[int]:
        """The epochs started, neither complete nor abandoned, oldest first (``lock``
        held)."""
        low = max(self.floor, -1 if self.complete is None else self.complete)
        return sorted(e for e in self.meta if e > low)

    def inject(self) -> bool:
        """Start epoch ``epoch + 1`` in flight (module docstring): its barrier to each
        worker hosting a source, behind the writes sent to it before; whether it
        started (not with ``MAX_IN_FLIGHT`` in flight, nor with a node down: it could
        not complete). Those in flight are asked whether complete first (``_covers``)."""
        rt = self.rt
        with rt.lock:
            if any(n not in rt.up for n in rt.placement):
                return False
            with self.lock:
                flying = [e for e in self.in_flight() if not self._covers(e)]
                if len(flying) >= MAX_IN_FLIGHT:
                    return False
                self.epoch += 1
                epoch = self.epoch
                self.meta[epoch] = {}
                stable = -1 if self.complete is None else self.complete
                whole = self.complete is None     # (a chain of epochs starts whole)
            hosts = {rt.placement[n] for n, node in rt.graph.nodes.items()
                     if not node.parents and n in rt.placement}
            for w in hosts:
                rt.workers[w].put(["barrier", epoch, stable, whole])
        return True

    def on_report(self, f: Any) -> None:
        """``["ep", epoch, {node: [time, last-seen times]}]`` from a worker, after the
        snapshots' checkpoint frames: those nodes have snapshotted ``epoch``; once
        every node of the graph has, it is complete (ignored for an epoch no longer
        in flight: superseded, or abandoned by a rollback)."""
        if len(f) != 3 or type(f[1]) is not int or not isinstance(f[2], dict):
            raise wire.ProtocolError("an epoch report must be [ep, epoch, {node: [time, "
                                     "last-seen times]}]")
        epoch = f[1]
        got = _meta(f[2])
        with self.lock:
            if epoch not in self.in_flight():
                return
            self.meta[epoch].update(got)
            self._covers(epoch)

    def _covers(self, epoch: int) -> bool:
        """Whether ``epoch`` (in flight; ``lock`` held) has every node's report: then
        it is complete. (Asked at each report, and again before the next epoch: a
        report read while a graph change was under way is counted then.)"""
        meta = self.meta[epoch]
        try:
            nodes = set(self.rt.graph.nodes)
        except RuntimeError:            # (changed size: a migration, on another thread)
            return False
        if not nodes <= meta.keys():
            return False
        self._completed(epoch, meta)
        return True

    def _completed(self, epoch: int, meta: dict[str, tuple[int, dict[str, int]]]) -> None:
        """``epoch`` is complete (``lock`` held): the ones before forgotten, each base's
        history trimmed to its position in it."""
        self.meta = {e: m for e, m in self.meta.items() if e > epoch}
        self.meta[epoch] = meta
        self.complete = epoch
        self.taken += 1
        for b, hist in self.rt.durable.items():
            if b in meta:
                hist.trim(meta[b][0])

    def forget(self, node_id: str) -> None:
        """A node dropped with its view: no epoch needs it (the one in flight may be
        complete without it: ``inject`` asks again)."""
        with self.lock:
            for m in self.meta.values():
                m.pop(node_id, None)

    def invalidate(self) -> None:
        """No complete epoch covers the graph any more (a node was filled while
        another was down): recovery falls back to lineage until the next one."""
        with self.lock:
            self.complete = None
            self.meta.clear()

    def abandon(self) -> None:
        """The epochs in flight never complete (a rollback is coming, or a quiet epoch
        supersedes it); the workers drop its barriers once told ``floor``."""
        with self.lock:
            self.floor = self.epoch
            self.meta = {e: m for e, m in self.meta.items() if e == self.complete}

    def take(self, whole: bool = False) -> bool:
        """Epoch now, on a quiet graph; whether it completed. ``whole``: every
        snapshot whole (a graph change filled nodes outside the message path)."""
        rt = self.rt
        with rt.lock:
            if any(n not in rt.up for n in rt.placement):
                return False
        rt.wait()                             # nothing in flight from here on
        self.abandon()                        # (its barriers have crossed: superseded)
        with self.lock:
            whole = whole or self.complete is None     # (a chain of epochs starts whole)
            self.epoch += 1
            epoch = self.epoch
            stable = -1 if self.complete is None else self.complete
        with rt.lock:
            hosts: dict[str, list[str]] = {}
            for n, w in rt.placement.items():
                hosts.setdefault(w, []).append(n)
            futs = [rt.request(rt.workers[w], "epoch", epoch, stable, whole) for w in hosts]
        meta: dict[str, tuple[int, dict[str, int]]] = {}
        for fut in futs:
            meta.update(_meta(fut.result(300)))
        if not set(rt.graph.nodes) <= meta.keys():
            return False
        with self.lock:
            self._completed(epoch, meta)
        return True

    # ------------------------------------------------------------ recovery

    def refusal(self) -> str | None:
        """Why a rollback cannot bring the graph back (None: it can), found before any
        node is touched: no complete epoch covering every node, a stateful node with
        no snapshot of it, a base whose history no longer reaches its position. The
        epoch in flight is abandoned first: none completes during a recovery (it
        would trim the bases' histories past the epoch rolled back to)."""
        self.abandon()
        rt = self.rt
        c = self.complete
        if c is None or not set(rt.graph.nodes) <= self.meta[c].keys():
            return "no complete epoch covers the graph"
        store = rt.store
        assert store is not None
        for nid, node in rt.graph.nodes.items():
            if nid in rt.durable:
                first, _ = rt.durable[nid].since(self.meta[c][nid][0])
                if first != self.meta[c][nid][0]:
                    return (f"base {nid}'s history starts after write {first}, not at "
                            f"its position {self.meta[c][nid][0]} in epoch {c}")
            elif snapshots(node):
                with rt.store_lock:
                    got = store.latest(nid, c)
                if got is None or got.time != c:
                    return f"node {nid} has no snapshot of epoch {c}"
        return None

    def roll_back(self, node_id: str) -> RecoveryReport:
        """Every node back to the last complete epoch, the bases resending their writes
        since (the recovery thread, with the database's lock; the lost nodes placed on
        spares, down; ``refusal`` None). The report is about ``node_id``, the first
        node lost. A failure part-way (another worker lost) leaves every node down,
        for the next attempt to roll back again."""
        rt = self.rt
        start = time.perf_counter()
        epoch = self.complete
        assert epoch is not None
        meta = self.meta[epoch]
        rt.wait()                      # every live node has handled what it was sent
        order = rt.graph.topological()
        try:
            sends, rows = self._roll_back(order, epoch, meta)
        except BaseException:
            rt.abandon(order)
            raise
        self.writes_since = 0
        return RecoveryReport(node=node_id, strategy="coordinated",
                              seconds=time.perf_counter() - start, replayed_messages=sends,
                              rows=rows, checkpoint=epoch, rolled_back=list(order))

    def _roll_back(self, order: list[str], epoch: int,
                   meta: dict[str, tuple[int, dict[str, int]]]) -> tuple[int, int]:
        rt = self.rt
        with rt.lock:
            for n in rt.held:          # (from the incarnation rolled back: dropped)
                rt.held[n] = []
        store = rt.store
        assert store is not None
        readers = []
        futs = []
        for nid in order:
            node = rt.graph[nid]
            if nid in rt.durable:
                continue
            at, seen = meta[nid]
            ck: Any = None
            if snapshots(node):
                with rt.store_lock:
                    got = store.latest(nid, epoch)
                if got is None or got.time != epoch:
                    raise RecoveryError(f"node {nid} has no snapshot of epoch {epoch}")
                ck = encode_checkpoint(got)
            if node.kind == "reader":
                readers.append(nid)
            futs.append(rt.request(rt.worker_of(nid), "roll_back", nid, at, seen, ck, epoch,
                                   self.floor))
        for f in futs:
            f.result(300)
        with rt.lock:                  # (the bases too: they send only below)
            for nid in order:
                if nid not in rt.up:
                    rt.restored.add(nid)
        rt._release()
        for n in readers:
            for listener in list(rt.listeners.get(n, ())):
                listener.lost("its view was rolled back by a coordinated recovery")
        sends = rows = 0
        for nid in order:
            if nid not in rt.durable:
                continue
            at = meta[nid][0]
            first, writes = rt.durable[nid].since(at)
            if first != at:
                raise RecoveryError(f"base {nid}'s history starts after write {first}, "
                                    f"not at its position {at} in epoch {epoch}")
            w = rt.worker_of(nid)
            part, taken = rt.history_parts(w, nid, writes)
            rows += taken
            sends += rt.ask(w, "roll_back_base", nid, at, part)
        return sends, rows
