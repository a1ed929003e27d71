"""A domain shard: one node's operator plus its inbox, handling one message at a time.

Noria groups several operators into one domain; here each node shard is its own
domain, which keeps recovery per node (a failed node is exactly one domain) at the
cost of a queue hop per operator, negligible next to batches of hundreds of rows.
"""
from __future__ import annotations

from collections import deque

from .batch import Batch
from .graph import Graph, Node
from .messages import Message


class Domain:
    def __init__(self, graph: Graph, node: Node) -> None:
        self.graph = graph
        self.node = node
        self.inbox: deque[Message] = deque()
        self.time = 0                 # messages received so far
        self.alive = True
        self.ports = {p: i for i, p in enumerate(node.parents)}

    @property
    def id(self) -> str:
        return self.node.id

    def handle(self, msg: Message) -> list[Message]:
        """Process one message; return the messages to send."""
        self.time += 1
        out = self.node.op.process(self.ports[msg.src], msg.batch)
        return self.emit(out)

    def emit(self, out: Batch | list[Batch]) -> list[Message]:
        node = self.node
        sends: list[Message] = []
        if node.op.splits:
            nodes = self.graph.nodes
            for c in node.children:
                b = out[nodes[c].shard]
                if b:
                    sends.append(Message(node.id, c, b, self.time))
        elif out:
            for c in node.children:
                sends.append(Message(node.id, c, out, self.time))
        return sends

    def crash(self) -> None:
        """Lose everything held in memory: state, inbox and time."""
        self.node.op.reset()
        self.inbox.clear()
        self.time = 0
        self.alive = False
