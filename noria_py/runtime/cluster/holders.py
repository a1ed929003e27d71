"""Where a worker's node shards' checkpoints live: a checkpoint holder, another live
worker the controller names (``--channels direct``, regimes treeclock and lineage), or
the controller's own store (relay, and the other regimes).

A stateful node shard hands its checkpoints to its worker's ``RemoteStore``, which
sends each call on (``["ck", node, time, parent times, form, delta, full, stable,
clock]``, ``["ck_keep", node, time]``, ``["ck_drop", node]``; arrays as the wire
encodes them, nothing pickled): to the controller, or, with a holder, on the direct
peer link to the holder's worker, which keeps them in a ``CheckpointStore`` per origin
worker (``Held``). Why a holder: a recovery needs a lost node's checkpoints from
somewhere that outlived its worker, and the controller then holds no node's state
nor decodes a checkpoint (docs/architecture.md, "Writes at the base's worker", item 6).

Invariants:

- *A holder's chain of a node is a prefix of what its origin sent it.* One link per
  ordered pair of workers, FIFO, and the frames go in order with each other; the
  fence of the origin's loss (``["lost", origin]``) drops the frames not handled yet,
  so a recovery, whose question comes after the fence, reads a prefix: an older
  checkpoint at worst, whose parents' logs may no longer reach back to it; the
  recovery then rebuilds the node (``recovery/treeclock.py``, ``_since_checkpoint``),
  never a wrong view.
- *A delta is only ever put on what the holder holds of the node.* ``RemoteStore``
  counts a node as held only once a checkpoint of it went to the present holder; a new
  holder (``["ck_holder", worker]``, the first or after a loss) or none makes every
  node's next checkpoint whole (``held`` forgotten), and the worker takes those from
  ``tuning.HOLDER_WHOLE_AFTER`` on, one a turn (``Worker.set_holder``); a node
  restored from a checkpoint that another holder has (``keep_upto``) is not held
  here: its next one is whole too. With no holder named a checkpoint is not computed
  (``takes``), only recorded by its domain. A holder refuses a delta of a node it
  holds nothing of (logged, dropped), and a new holder is sent ``["ck_reset"]``
  first, which forgets anything an earlier turn left of that origin.
- *A recovery asks the holder named when the node's worker was lost*
  (``ClusterRuntime.checkpoint``: ``["req", id, "ck_latest", [origin, node,
  at_most]]``); that holder lost too, or none named: no checkpoint, and the node is
  rebuilt (lineage's fallback in the treeclock regime, logged), never a wrong view.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..checkpoints import CheckpointStore
from . import wire

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..checkpoints import Entries, InputDelta
    from .channels import Links

log = logging.getLogger("noria_py.worker")

#: the frames a worker sends its checkpoint holder on its peer link (one FIFO link
#: per pair of workers keeps them in order)
FRAMES = frozenset(("ck", "ck_keep", "ck_drop", "ck_reset"))


def used(direct: bool, regime: str) -> bool:
    """Whether checkpoints go to a holder worker: direct channels, and the regimes
    whose recovery reads a checkpoint by node and time alone (treeclock and lineage;
    a worker's config says "treeclock" for both). The others keep the controller's
    store: the causal regime's standbys are fed from it, in order with its marks, and
    the coordinated and recovery-line regimes fold it by epochs and lines the
    controller decides."""
    return direct and regime == "treeclock"


class RemoteStore:
    """The checkpoint store of a worker's domains (``checkpoints.Sink``): each call is a
    frame to the store on the controller (``send``), or, with ``links``, to the
    present holder's worker (None: none named, the frame is dropped). It remembers
    which nodes that store holds a checkpoint of, so a domain knows whether its next
    one must be whole."""

    def __init__(self, send: Callable[[Any], None], links: Links | None = None) -> None:
        self.send = send
        self.links = links
        self.holder: str | None = None
        self.held: set[str] = set()

    @property
    def to_holder(self) -> bool:
        return self.links is not None

    def set_holder(self, name: str | None) -> None:
        """Send to ``name`` from now on: it holds nothing of this worker's yet."""
        self.holder = name
        self.held.clear()
        if name is not None:
            self._send(["ck_reset"])

    def _send(self, frame: list[Any]) -> bool:
        if self.links is None:
            self.send(frame)
            return True
        if self.holder is None:
            return False
        self.links.send(self.holder, frame)
        return True

    def has(self, node_id: str) -> bool:
        return node_id in self.held

    def takes(self) -> bool:
        return self.links is None or self.holder is not None

    def put(self, node_id: str, time: int, parent_times: dict[str, int], form: str,
            delta: InputDelta | Entries, full: bool, stable: int,
            clock: np.ndarray | None = None) -> None:
        # (with its clock: a parent lost with this node then restarts no later than
        # the checkpoint, and this node comes back from it, ``recovery/treeclock.py``;
        # the parent-times copied: a peer link packs its frames when it flushes, and
        # the domain's own dict moves on meanwhile)
        if self._send(["ck", node_id, time, dict(parent_times), form,
                       wire.encode_delta(form, delta), full, stable,
                       wire.encode_array(clock)]):
            self.held.add(node_id)

    def keep_upto(self, node_id: str, time: int) -> None:
        if self.to_holder and node_id not in self.held:
            return          # (restored from another holder's: the next one is whole)
        if self._send(["ck_keep", node_id, time]):
            self.held.add(node_id)

    def drop(self, node_id: str) -> None:
        if not self.to_holder or node_id in self.held:
            self._send(["ck_drop", node_id])
        self.held.discard(node_id)


@dataclass
class Frame:
    """A checkpoint frame, checked and decoded: ``op`` "ck" (its fields), "ck_keep"
    (``time``) or "ck_drop"."""
    op: str
    node: str
    time: int = 0
    parents: dict[str, int] | None = None
    form: str = ""
    delta: Any = None
    full: bool = False
    stable: int = 0
    clock: np.ndarray | None = None


_CK_SHAPE = "a checkpoint must be [ck, node, time, parent times, form, delta, full, stable, clock]"


def parse(f: Any) -> Frame:
    """``f`` checked and decoded; ``wire.ProtocolError`` if it is not well formed."""
    node = f[1] if len(f) > 1 else None
    if type(node) is not str:
        raise wire.ProtocolError("a checkpoint frame must name its node")
    if f[0] == "ck":
        if len(f) != 9:
            raise wire.ProtocolError(_CK_SHAPE)
        _, _, time, parents, form, delta, full, stable, clock = f
        if not (type(time) is int and type(stable) is int and isinstance(parents, dict)
                and type(full) is bool):
            raise wire.ProtocolError(_CK_SHAPE)
        return Frame("ck", node, time, dict(parents), form, wire.decode_delta(form, delta),
                     full, stable, wire.decode_array(clock))
    if f[0] == "ck_keep":
        if len(f) != 3 or type(f[2]) is not int:
            raise wire.ProtocolError("expected [ck_keep, node, time]")
        return Frame("ck_keep", node, f[2])
    if f[0] == "ck_drop":
        return Frame("ck_drop", node)
    raise wire.ProtocolError(f"unknown checkpoint frame {f[0]!r}")


def apply(store: CheckpointStore, c: Frame) -> None:
    """Make the call ``c`` on ``store``."""
    if c.op == "ck":
        store.put(c.node, c.time, c.parents or {}, c.form, c.delta, c.full, c.stable,
                  clock=c.clock)
    elif c.op == "ck_keep":
        store.keep_upto(c.node, c.time)
    else:
        store.drop(c.node)


class Held:
    """The checkpoints a holder worker keeps of other workers' node shards, a
    ``CheckpointStore`` per origin worker."""

    def __init__(self) -> None:
        self.stores: dict[str, CheckpointStore] = {}

    def frame(self, origin: str, f: Any) -> None:
        """A checkpoint frame from ``origin``'s link."""
        if f[0] == "ck_reset":
            self.stores.pop(origin, None)
            return
        c = parse(f)
        store = self.stores.get(origin)
        if store is None:
            store = self.stores[origin] = CheckpointStore()
        if c.op == "ck" and not c.full and not store.has(c.node):
            # (never sent so: a delta needs the base it changes, ``RemoteStore.held``)
            log.error("a checkpoint delta of %s from %s, which this worker holds nothing "
                      "of: dropped", c.node, origin)
            return
        apply(store, c)

    def latest(self, origin: str, node_id: str, at_most: int) -> list[Any] | None:
        """The newest checkpoint of ``node_id`` from ``origin`` at or below ``at_most``,
        as the wire carries it (with its clock), or None."""
        store = self.stores.get(origin)
        ck = None if store is None else store.latest(node_id, at_most)
        return None if ck is None else wire.encode_checkpoint(ck, clock=True)

    def forget(self, origin: str, node_id: str | None = None) -> None:
        """What ``origin`` sent (of ``node_id`` alone, if given)."""
        if node_id is None:
            self.stores.pop(origin, None)
        elif origin in self.stores:
            self.stores[origin].drop(node_id)
