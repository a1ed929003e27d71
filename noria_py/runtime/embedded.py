"""Runs every domain in this process.

Without a seed, messages are delivered in global FIFO order and each write is
propagated before the call returns. With ``seed``, delivery is a deterministic
simulation: each step picks a pseudo-random edge with pending messages (per-edge FIFO
is kept, as TCP would), and after a write only a random number of steps run, so
messages stay in flight between calls; ``wait()`` drains them all.

Progress acknowledgements, which let parents trim their payload logs, are direct
calls here; in a cluster they are messages. Either way no node waits for them.

Checkpoints (with clocks, unless ``checkpoints=False``) go to a store in the runtime,
outside every domain, so a crashed node's checkpoints are still there to recover from;
a domain checks whether one is due when it acknowledges (every ``ACK_EVERY`` messages).
"""
from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from treeclock import TreeClocks

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError
from ..graph import Graph, Node
from ..ops.base import Base
from . import Runtime
from .checkpoints import REBUILT_KINDS, Checkpoint, CheckpointStore
from .domain import Domain, DomainInfo, graph_clocks
from .history import WriteHistory
from .messages import Message

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..ops.reader import Reader


class EmbeddedRuntime(Runtime):
    automatic_recovery = False       # a failed node stays down until ``recover``
    asynchronous = False             # messages run in the caller's thread (``run``)

    def __init__(self, graph: Graph, seed: int | None = None, clocks: bool = True,
                 checkpoints: bool = True) -> None:
        self.graph = graph
        self.domains: dict[str, Domain] = {}
        self.seed = seed
        self.rng = random.Random(seed)
        self.fifo: deque[Message] = deque()
        self.edges: dict[tuple[str, str], deque[Message]] = {}
        self.active: list[tuple[str, str]] = []     # edges with pending messages (seeded)
        self.delivered = 0
        self.clocks = clocks
        self.tc: TreeClocks | None = None
        #: the stateful nodes' checkpoints (tree-clock recovery starts from them)
        self.store: CheckpointStore | None = CheckpointStore() if clocks and checkpoints else None
        # A base's write history, outside the node (it survives the base's crash):
        # the table as of a trim point and the writes since (runtime/history.py)
        self.durable: dict[str, WriteHistory] = {}
        self.trace: list[tuple[str, str, int]] | None = None   # (src, dst, time) handled

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> Domain:
        d = self.domains[node.id] = Domain(self.graph, node)
        self.checkpoint_into(d)
        if node.kind == "base":
            self.durable.setdefault(node.id, WriteHistory(cast(Base, node.op)))
        return d

    def checkpoint_into(self, d: Domain) -> None:
        """``d`` records what its regime's checkpoints need (here the tree-clock
        regime's store; each regime's runtime names its own). A node made partial
        takes none (``Domain.use_checkpoints(None)``: it comes back all holes,
        noria_py/partial.py, rule 6); one made full again calls this."""
        d.use_checkpoints(self.store,
                          rebuilt=REBUILT_KINDS if tuning.REBUILT_FROM_PARENTS else ())

    def announce(self, change: tuple[Any, ...]) -> None:
        """A catalog change (the cluster runtime forwards these to its workers)."""

    def check_writable(self, base_id: str, table: str) -> None:
        if not self.domains[base_id].alive:
            raise RecoveryError(f"table {table!r} (node {base_id}) has failed; "
                                "recover it before writing")

    def remove(self, node_id: str) -> None:
        self.domains.pop(node_id, None)
        self.durable.pop(node_id, None)
        if self.store is not None:
            self.store.drop(node_id)
        for d in self.domains.values():
            d.forget_child(node_id)
        self._drop_where(lambda m: m.dst == node_id or m.src == node_id)

    def refresh_clocks(self) -> None:
        """Rebuild clock layouts after the graph changed (new nodes only add layouts;
        existing nodes keep theirs, since their upstream paths are unchanged)."""
        if not self.clocks:
            return
        self.tc = graph_clocks(self.graph, self.tc)
        for d in self.domains.values():
            d.attach_clocks(self.tc)

    def settle(self, fresh: set[str], adopted: set[str] | frozenset[str] = frozenset()) -> None:
        """Newly filled nodes have seen their parents' output up to now, without a
        message: record it in their last-seen times and clocks (``Domain.settle``).
        ``adopted``: those filled from the checkpoint the store holds of them (read from
        disk), which is then their first."""
        self.refresh_clocks()
        for nid in self.graph.topological():
            if nid in fresh:
                d = self.domains[nid]
                d.settle({p: (self.domains[p].time, self.domains[p].clock, p in fresh)
                          for p in d.node.parents})
                if d.store is None:
                    continue
                if nid in adopted:
                    d.adopt_checkpoint()
                else:                       # its first checkpoint: the state it was filled with
                    d.store.drop(nid)
                    d.checkpoint()

    # ------------------------------------------------------------ delivery

    def pending(self) -> int:
        if self.seed is None:
            return len(self.fifo)
        return sum(len(q) for q in self.edges.values())

    def send_all(self, msgs: list[Message]) -> None:
        if self.seed is None:
            self.fifo.extend(msgs)
            return
        for m in msgs:
            key = (m.src, m.dst)
            q = self.edges.get(key)
            if q is None:
                q = self.edges[key] = deque()
            if not q:
                self.active.append(key)
            q.append(m)

    def _next(self) -> Message | None:
        if self.seed is None:
            return self.fifo.popleft() if self.fifo else None
        if not self.active:
            return None
        i = self.rng.randrange(len(self.active))
        key = self.active[i]
        q = self.edges[key]
        m = q.popleft()
        if not q:
            self.active[i] = self.active[-1]
            self.active.pop()
        return m

    def deliver(self, m: Message) -> None:
        d = self.domains.get(m.dst)
        if d is None or not d.alive:
            return                  # a crashed node loses what is sent to it
        before = d.time
        out = d.handle(m)
        if d.time == before:
            return                  # a duplicate, dropped
        self.delivered += 1
        if self.trace is not None:
            self.trace.append((m.src, m.dst, m.time))
        if out:
            self.send_all(out)
        if d.ack_due():
            # a checkpoint first: the acknowledgement then carries it (a reader's parent
            # trims its log to the reader up to it)
            if d.store is not None and d.checkpoint_due():
                d.checkpoint()
            self.ack(d)

    def step(self) -> bool:
        """Deliver one message; False when none is pending."""
        m = self._next()
        if m is None:
            return False
        self.deliver(m)
        return True

    def run(self, max_steps: int | None = None) -> int:
        n = 0
        if self.seed is None and max_steps is None:
            fifo = self.fifo
            deliver = self.deliver
            while fifo:
                deliver(fifo.popleft())
                n += 1
            return n
        while (max_steps is None or n < max_steps) and self.step():
            n += 1
        return n

    def wait(self) -> None:
        self.run()

    def publish(self, then: Callable[[int], None]) -> None:
        """The database's lock holds writers back, and readers tell their listeners
        as they apply: run what is queued, then ``then`` (no writes taken elsewhere)."""
        self.run()
        then(self.taken_writes)

    def listen(self, node_id: str, listener: Any) -> None:
        cast("Reader", self.graph[node_id].op).listeners.append(listener)

    def unlisten(self, node_id: str, listener: Any) -> None:
        node = self.graph.nodes.get(node_id)
        listeners = cast("Reader", node.op).listeners if node is not None else []
        if listener in listeners:
            listeners.remove(listener)

    def drain(self, nodes: set[str]) -> None:
        """Deliver every message pending on an edge into one of ``nodes`` (and what
        those deliveries send on such edges), each edge in FIFO order: a schedule the
        seeded one could have picked. Without a seed, every pending message (there is
        none outside a recovery's replays). A partial reader's upquery starts here
        (noria_py/partial.py, rule 3)."""
        if self.seed is None:
            self.run()
            return
        while True:
            keys = [k for k in self.active if k[1] in nodes]
            if not keys:
                return
            for key in keys:
                q = self.edges[key]
                while q:
                    m = q.popleft()
                    if not q:
                        self.active.remove(key)
                    self.deliver(m)

    def write(self, base_id: str, batch: Batch) -> None:
        """A validated write enters its base node, then propagates (fully, unless seeded)."""
        self._enter(base_id, batch)
        self._propagate()

    def _enter(self, base_id: str, batch: Batch) -> None:
        """A write into its base's history, then through its base node onto the queues."""
        d = self._record(base_id, batch)
        self.send_all(d.write(batch))

    def _record(self, base_id: str, batch: Batch) -> Domain:
        """``batch`` appended to its base's write history (trimmed once it holds
        ``tuning.HISTORY_TRIM_EVERY`` writes more than after its last trim); the base's
        domain, for the write."""
        d = self.domains[base_id]
        history = self.durable[base_id]
        history.append(batch)
        if len(history.batches) >= history.trim_at and d.alive:
            self._trim_history(base_id, d, history)
            # (next once ``HISTORY_TRIM_EVERY`` more are held: a child's stable
            # checkpoint may pin more than that, and trying at every write then cost a
            # pass over the children per write, 1% of a write of 100 rows)
            history.trim_at = len(history.batches) + tuning.HISTORY_TRIM_EVERY
        return d

    def _propagate(self) -> None:
        """Run the queues: to quiescence, or, seeded, a random number of steps."""
        if self.seed is None:
            self.run()
        else:
            self.run(self.rng.randint(0, max(1, self.pending())))

    def _trim_history(self, base_id: str, d: Domain, history: WriteHistory) -> None:
        """Trim to what the base's children may still ask for: its logs to them, and
        what each live one has taken (here, read from the child itself)."""
        domains = self.domains
        seen = {c: domains[c].last_seen.get(base_id, 0) for c in d.node.children
                if domains[c].alive}
        history.trim(d.history_low(seen))

    # ------------------------------------------------------------ progress

    def ack(self, c: Domain) -> None:
        """``c`` reports its progress to each parent; a parent whose children have all
        reported trims its own parents' payload logs (see ``Domain.on_progress``)."""
        domains = self.domains
        for b_id, t, paths, trim in c.progress_report():
            b = domains.get(b_id)
            if b is None or not b.alive:
                continue
            for a_id, level in b.on_progress(c.id, t, paths, trim):
                a = domains.get(a_id)
                if a is not None and a.alive:
                    a.truncate(b_id, level)

    # ------------------------------------------------------------ failure

    def crash(self, node_id: str) -> None:
        """The node loses its memory; what was sent to it is lost, and so is what it had
        sent that has not arrived (its connections reset): a child's last-seen time is
        then final until recovery, which regenerates the rest."""
        self.domains[node_id].crash()
        self._drop_where(lambda m: m.dst == node_id or m.src == node_id)

    def reset(self, node_id: str) -> None:
        """Empty a node for a lineage rebuild: it stays up, with no state or history."""
        d = self.domains[node_id]
        d.crash()
        d.alive = True
        if self.store is not None:
            self.store.drop(node_id)

    # ------------------------------------------------------------ what recovery reads and does
    # (the cluster runtime offers the same calls, answered by the worker hosting the node)

    def alive(self, node_id: str) -> bool:
        return self.domains[node_id].alive

    def info(self, node_id: str) -> DomainInfo:
        return self.domains[node_id].info()

    def payload_after(self, node_id: str, child: str, time: int) -> tuple[list[Message], int]:
        return self.domains[node_id].payload_after(child, time)

    def output_info(self, node_id: str, child: str, upto: int) -> tuple[
            Batch | None, list[Message], int, dict[str, int]]:
        return self.domains[node_id].output_info(child, upto)

    def checkpoint(self, node_id: str, at_most: int) -> Checkpoint | None:
        return None if self.store is None else self.store.latest(node_id, at_most)

    def drop_checkpoints(self, node_id: str) -> None:
        if self.store is not None:
            self.store.drop(node_id)

    def restore(self, node_id: str, time: int, clock: np.ndarray, last_seen: dict[str, int],
                inputs: list[tuple[int, Batch]], checkpoint: Checkpoint | None = None) -> None:
        d = self.domains[node_id]
        d.tc = self.tc
        d.restore(time, clock, last_seen)
        d.restore_state(checkpoint, inputs)

    def replay(self, node_id: str, msgs: list[Message], seen: dict[str, int]) -> None:
        self.send_all(self.domains[node_id].replay(msgs, seen))

    def restore_base(self, node_id: str, seen: dict[str, int], low: int) -> int:
        d = self.domains[node_id]
        d.tc = self.tc
        start, rows, writes = self.durable[node_id].table()
        sends = d.write_history(writes, seen, low, start, rows)
        self.send_all(sends)
        return len(sends)

    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None:
        self.domains[node_id].parent_restarted(parent, log_from)

    def wait_recovered(self, timeout: float = 120.0, node_id: str | None = None) -> None:
        """Nothing recovers on its own here: there is never a recovery to wait for."""

    # ------------------------------------------------------------ introspection

    def describe(self, node_id: str) -> dict[str, Any]:
        """Every node is in this process: nothing to add to its ``Node.describe``."""
        return {}

    def _drop_where(self, pred: Callable[[Message], bool]) -> None:
        if self.seed is None:
            self.fifo = deque(m for m in self.fifo if not pred(m))
            return
        for key, q in list(self.edges.items()):
            kept = deque(m for m in q if not pred(m))
            self.edges[key] = kept
        self.active = [k for k in self.active if self.edges.get(k)]
