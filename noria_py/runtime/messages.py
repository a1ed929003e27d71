"""What travels between domain shards.

A message is explicit data (sender, receiver, batch, the sender's time and clock) so
that any runtime can move it: a deque in the embedded runtime, a socket in a cluster.
``time`` is the sender's logical time when it sent the message (the number of
messages it had received); tree-clock recovery numbers and logs messages by it, and a
receiver drops any message whose time it has already seen from that sender, so a
message replayed after a recovery is never applied twice.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..batch import Batch


@dataclass(slots=True)
class Message:
    src: str
    dst: str
    batch: Batch
    time: int = 0
    clock: tuple[int, ...] | None = None   # the sender's last tree-clock diff, as its path
                                           # (treeclock.receive_path), when clocks are on
    low: int = 0           # piggybacked: every child of the sender has received its
                           # messages up to this time (lets receivers trim diff logs)


@dataclass(slots=True)
class Indexed(Message):
    """A message with its sender's checkpoint index piggybacked (the cic regime,
    ``uncoordinated.py``; in a cluster it travels as a seventh field)."""
    index: int = 0


class CausalMessage(Message):
    """A message with the determinants piggybacked on it (``causal.encode``'s bytes; the
    causal regime, ``causal.py``; in a cluster they travel as a seventh field)."""
    __slots__ = ("dets",)

    def __init__(self, src: str, dst: str, batch: Batch, time: int, dets: bytes = b"") -> None:
        super().__init__(src, dst, batch, time)
        self.dets = dets
