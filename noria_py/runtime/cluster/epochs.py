"""The ``coordinated`` regime in a cluster (``noria-py serve --regime coordinated``):
checkpoints of every node shard at once, taken by the controller on a quiet graph, and
a rollback of every node to the last complete one when a worker is lost.

Normal operation. Every ``tuning.BARRIER_EVERY`` writes (``--barrier-every``), and at
every graph change, the controller starts epoch ``e``: holding the database's lock (no
write is accepted meanwhile), it waits until every message caused by the writes
accepted so far has been handled (``ClusterRuntime.wait``: nothing is in flight), then
asks every worker to snapshot each node shard it hosts (``Worker.req_epoch``): a
stateful one puts what changed since its last snapshot (whole the first time, on a new
worker, and at a graph change) into the store on the controller, tagged with ``e``, on
the worker's own connection, before its answer; every one answers its time and
last-seen times. Epoch ``e`` is **complete** once every node of the graph has answered:
the epochs before it are forgotten, each base's write history is trimmed to its
position in ``e``, and the snapshots' chains fold below ``e``.

This is Chandy-Lamport with the barriers' alignment done by the controller instead of
in flight: the embedded regime's barriers, injected between writes run to quiescence,
cross a quiet graph and hold no input (docs/regimes.md, "What alignment costs here");
here the quiet graph is made by ``wait`` (the writes are held for its rounds and the
snapshots), since a worker-to-worker barrier would have to align inputs that arrive
on different connections. No message is in flight across the cut, so a rollback needs
only the snapshots and the bases' write histories.

Why consistent: with nothing in flight, each node's state reflects exactly its
parents' output up to the times the cut records, and each base's position is its
writes. Every node is snapshotted at the same cut; the epoch counts only if every node
answered (a worker lost mid-epoch leaves it incomplete, its partial snapshots are
later than the complete epoch and never read).

Failure and recovery (the recovery thread, holding the database's lock). The lost
worker's nodes are placed on a spare, down. Then every live node finishes what it was
sent (``wait``: messages for the down nodes are held, then dropped: they come from
the incarnation being rolled back), and **every** node, failed or not, rolls back to
the last complete epoch (``Worker.req_roll_back``): its state from the snapshot on
the controller, its time and last-seen times from the epoch; then each base resends
the writes after its position from its history on the controller. Operators are
deterministic functions of the multiset of rows taken (docs/recovery.md,
"Determinism"), so the replay leaves every view right whatever the interleaving. A
subscription to a view ends with a ``SubscriptionError`` at a rollback (its reader was
set back).

No complete epoch covering the graph (a view created while a node was down): the
lost nodes are rebuilt by lineage as in ``--regime lineage`` (the report says so),
and the next graph change or epoch covers the graph again.

Invariant: ``complete`` is None or an epoch whose ``meta`` names every node of the
graph, every stateful one with a snapshot of that epoch in the store; a base's history
is trimmed to its position in ``complete`` and no further.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ... import tuning
from ...errors import Error, RecoveryError
from ...recovery.report import RecoveryReport
from .wire import encode_checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from ...graph import Node
    from .controller import ClusterRuntime

log = logging.getLogger("noria_py.cluster")

__all__ = ["Epochs", "snapshots"]

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
        #: per epoch kept: node -> (its time, its last-seen times) at its snapshot
        self.meta: dict[int, dict[str, tuple[int, dict[str, int]]]] = {}
        self.writes_since = 0
        self.taken = 0                        # complete epochs taken
        self.lock = threading.Lock()

    # ------------------------------------------------------------ normal operation

    def before_write(self) -> None:
        """Called with the database's lock held, before a write is accepted: an epoch
        when one is due (never failing the write: an epoch that cannot be taken now,
        a node down, is taken at a later write)."""
        self.writes_since += 1
        if self.writes_since > self.every:
            try:
                if self.take():
                    self.writes_since = 1
            except Error as e:
                log.info("epoch skipped: %s", e)

    def forget(self, node_id: str) -> None:
        """A node dropped with its view: no epoch needs it."""
        for m in self.meta.values():
            m.pop(node_id, None)

    def invalidate(self) -> None:
        """No complete epoch covers the graph any more (a node was filled while
        another was down): recovery falls back to lineage until the next one."""
        self.complete = None
        self.meta.clear()

    def take(self, whole: bool = False) -> bool:
        """Epoch now, on a quiet graph; whether it completed. ``whole``: every
        snapshot whole (a graph change filled nodes outside the message path)."""
        rt = self.rt
        with rt.lock:
            if any(n not in rt.up for n in rt.placement):
                return False
        rt.wait()                             # nothing in flight from here on
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
            got = fut.result(300)
            for n, (t, seen) in got.items():
                meta[n] = (int(t), {str(p): int(x) for p, x in seen.items()})
        if not set(rt.graph.nodes) <= meta.keys():
            return False
        self.meta = {epoch: meta}
        self.complete = epoch
        self.taken += 1
        for b, hist in rt.durable.items():
            if b in meta:
                hist.trim(meta[b][0])
        return True

    # ------------------------------------------------------------ recovery

    def refusal(self) -> str | None:
        """Why a rollback cannot bring the graph back (None: it can), found before any
        node is touched: no complete epoch covering every node, a stateful node with
        no snapshot of it, a base whose history no longer reaches its position."""
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
            futs.append(rt.request(rt.worker_of(nid), "roll_back", nid, at, seen, ck, epoch))
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
