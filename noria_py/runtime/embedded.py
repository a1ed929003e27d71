"""Runs every domain in this process.

Without a seed, messages are delivered in global FIFO order and each write is
propagated before the call returns. With ``seed``, delivery is a deterministic
simulation: each step picks a pseudo-random edge with pending messages (per-edge FIFO
is kept, as TCP would), and after a write only a random number of steps run, so
messages stay in flight between calls; ``wait()`` drains them all.
"""
from __future__ import annotations

import random
from collections import deque

from ..batch import Batch
from ..domain import Domain
from ..graph import Graph, Node
from ..messages import Message


class EmbeddedRuntime:
    def __init__(self, graph: Graph, seed: int | None = None) -> None:
        self.graph = graph
        self.domains: dict[str, Domain] = {}
        self.seed = seed
        self.rng = random.Random(seed)
        self.fifo: deque[Message] = deque()
        self.edges: dict[tuple[str, str], deque[Message]] = {}
        self.active: list[tuple[str, str]] = []     # edges with pending messages (seeded)
        self.delivered = 0

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> Domain:
        d = self.domains[node.id] = Domain(self.graph, node)
        return d

    def remove(self, node_id: str) -> None:
        self.domains.pop(node_id, None)
        self._drop_where(lambda m: m.dst == node_id or m.src == node_id)

    def refresh_ports(self, node_id: str) -> None:
        d = self.domains[node_id]
        d.ports = {p: i for i, p in enumerate(d.node.parents)}

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

    def step(self) -> bool:
        """Deliver one message; False when none is pending."""
        m = self._next()
        if m is None:
            return False
        d = self.domains.get(m.dst)
        if d is None or not d.alive:
            return True            # a crashed node loses what is sent to it
        self.delivered += 1
        self.send_all(d.handle(m))
        return True

    def run(self, max_steps: int | None = None) -> int:
        n = 0
        if self.seed is None and max_steps is None:
            fifo = self.fifo
            domains = self.domains
            while fifo:
                m = fifo.popleft()
                d = domains.get(m.dst)
                if d is None or not d.alive:
                    continue
                n += 1
                fifo.extend(d.handle(m))
            self.delivered += n
            return n
        while (max_steps is None or n < max_steps) and self.step():
            n += 1
        return n

    def wait(self) -> None:
        self.run()

    def write(self, base_id: str, batch: Batch) -> None:
        """A validated write enters its base node, then propagates (fully, unless seeded)."""
        d = self.domains[base_id]
        d.time += 1
        out = d.node.op.process(0, batch)
        self.send_all(d.emit(out))
        if self.seed is None:
            self.run()
        else:
            self.run(self.rng.randint(0, max(1, self.pending())))

    # ------------------------------------------------------------ failure

    def crash(self, node_id: str) -> None:
        self.domains[node_id].crash()
        self._drop_where(lambda m: m.dst == node_id)

    def _drop_where(self, pred) -> None:
        if self.seed is None:
            self.fifo = deque(m for m in self.fifo if not pred(m))
            return
        for key, q in list(self.edges.items()):
            kept = deque(m for m in q if not pred(m))
            self.edges[key] = kept
        self.active = [k for k in self.active if self.edges.get(k)]
