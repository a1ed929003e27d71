"""Stand-ins, on the controller, for stateful operators that live on workers.

The controller's ``Database`` reads views and initializes new nodes through
``node.op`` as the embedded engine does; for a stateful node hosted elsewhere that op
is a ``RemoteOp``, which asks the hosting worker. Stateless operators stay real
objects on the controller: they hold nothing, so computing with them here is the
same as computing with them there.
"""
from __future__ import annotations

import time

from ...batch import Batch
from ...errors import RecoveryError
from ...ops.operator import Operator
from .errors import WorkerLost
from .wire import decode_batch, encode_batch


class RemoteOp(Operator):
    def __init__(self, runtime, node, local: Operator) -> None:
        self.runtime = runtime
        self.node_id = node.id
        self.local = local
        self.kind = local.kind
        self.stateful = local.stateful
        self.splits = local.splits

    def __getattr__(self, name):            # plan facts (key, width, ...) of the real op
        return getattr(self.local, name)

    def process(self, port: int, batch: Batch):
        out = self.runtime.call(self.node_id, "process", port, encode_batch(batch))
        if self.splits:
            return [decode_batch(b) for b in out]
        return decode_batch(out)

    def snapshot(self) -> Batch:
        return decode_batch(self.runtime.call(self.node_id, "snapshot"))

    def describe(self) -> str:
        return self.local.describe()

    # reads: a view whose worker is being replaced answers once it is back
    def _read(self, method: str, *args, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.runtime.call(self.node_id, method, *args)
            except WorkerLost:
                if time.monotonic() > deadline:
                    raise RecoveryError(f"node {self.node_id} has been down for over "
                                        f"{timeout:.0f} s") from None
                self.runtime.wait_up(self.node_id, deadline - time.monotonic())

    def lookup(self, key) -> list[tuple]:
        return self._read("lookup", [key])[0]

    def lookup_many(self, keys: list) -> list[list[tuple]]:
        return self._read("lookup", list(keys))

    def all(self) -> list[tuple]:
        return self._read("all")

    def __len__(self) -> int:
        return self._read("len")
