"""Stand-ins, on the controller, for stateful operators that live on workers.

The controller's ``Database`` reads views and initializes new nodes through
``node.op`` as the embedded engine does; for a stateful node hosted elsewhere that op
is a ``RemoteOp``, which asks the hosting worker. Stateless operators stay real
objects on the controller: they hold nothing, so computing with them here is the
same as computing with them there.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...batch import Batch
from ...errors import RecoveryError
from ...ops.operator import Operator
from .errors import WorkerLost
from .wire import decode_batch, encode_batch

if TYPE_CHECKING:  # pragma: no cover
    from ...graph import Node
    from .controller import ClusterRuntime


class RemoteOp(Operator):
    def __init__(self, runtime: ClusterRuntime, node: Node, local: Operator) -> None:
        self.runtime = runtime
        self.node_id = node.id
        self.local = local
        self.kind = local.kind
        self.stateful = local.stateful
        self.splits = local.splits

    def __getattr__(self, name: str) -> Any:    # plan facts (key, width, ...) of the real op
        return getattr(self.local, name)

    # (one batch per shard when the op splits, as ``Sharder.process`` does)
    def process(self, port: int, batch: Batch) -> Batch | list[Batch]:  # type: ignore[override]
        out = self.runtime.call(self.node_id, "process", port, encode_batch(batch))
        if self.splits:
            return [decode_batch(b) for b in out]
        return decode_batch(out)

    def snapshot(self) -> Batch:
        return decode_batch(self.runtime.call(self.node_id, "snapshot"))

    def describe(self) -> str:
        return self.local.describe()

    # reads: a view whose worker is being replaced answers once it is back
    def _read(self, method: str, *args: Any, timeout: float = 60.0) -> Any:   # the reply, as decoded
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.runtime.call(self.node_id, method, *args)
            except WorkerLost:
                if time.monotonic() > deadline:
                    raise RecoveryError(f"node {self.node_id} has been down for over "
                                        f"{timeout:.0f} s") from None
                self.runtime.wait_up(self.node_id, deadline - time.monotonic())

    # (replies are what the worker's op returned, as decoded from msgpack)
    def lookup(self, key: Any) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read("lookup", [key])[0]
        return rows

    def lookup_many(self, keys: list[Any]) -> list[list[tuple[Any, ...]]]:
        # (a list: a partial reader's holes, None, are filled in place: client.View)
        found: list[list[tuple[Any, ...]]] = list(self._read("lookup", list(keys)))
        return found

    def range_lookup(self, key: Any, bounds: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read("range_lookup", key, bounds)
        return rows

    def all(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read("all")
        return rows

    def __len__(self) -> int:
        n: int = self._read("len")
        return n
