"""Runtimes move messages between domain shards; they do not know what operators do.

``Runtime`` is everything the client and recovery ask of one: the embedded runtime
answers from domains in this process, the cluster runtime by asking the worker that
hosts each node. Recovery code is written against it alone, so it runs unchanged in
both. Both runtimes subclass it, so a member added here and missing from either one
fails the type check instead of being probed for with ``getattr``. The members only a
cluster has a use for (``describe``, ``automatic_recovery``, ``wait_recovered``) say
nothing in-process: no more to tell of a node, no recovery of its own, nothing to
wait for.

A domain (``domain.py``) and the messages between domains (``messages.py``) live here
because only runtimes create and move them (recovery reads ``Message`` values it gets
back from a runtime); the client never sees either.
"""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..memory import node_bytes
from ..where import matching

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import numpy as np

    from sql_frontend.expr import Expr
    from treeclock import TreeClocks

    from ..batch import Batch
    from ..graph import Graph, Node
    from ..ops.base import Base
    from .checkpoints import Checkpoint
    from .domain import DomainInfo
    from .messages import Message


class Runtime(Protocol):
    graph: "Graph"                   # the graph the runtime's nodes come from
    tc: "TreeClocks | None"          # the TreeClocks of the current graph, None without clocks
    #: True when lost nodes are recovered by the runtime itself (a cluster); then
    #: ``Database.recover`` waits for that instead of running a strategy
    automatic_recovery: bool
    #: True when other processes run the messages, as writes come (a cluster); then
    #: subscriptions are flushed by a thread of the database's (``publish``) rather
    #: than by the writer
    asynchronous: bool

    # structure
    def add(self, node: "Node") -> Any: ...
    def remove(self, node_id: str) -> None: ...
    def refresh_clocks(self) -> None: ...
    def settle(self, fresh: set[str]) -> None: ...
    def announce(self, change: tuple[Any, ...]) -> None: ...   # (kind, plan objects and ids)

    # writes and progress
    #: writes accepted that never went through the database's ``write`` (a cluster
    #: with writes at the workers: every write its bases' histories took, the
    #: controller's forwarded ones too), counted in a subscription's progress
    #: beside the database's own
    taken_writes: int = 0

    def write(self, base_id: str, batch: "Batch") -> None: ...
    def check_writable(self, base_id: str, table: str) -> None: ...
    def wait(self) -> None: ...
    # a quiet point for subscriptions: writers held, every write processed, the
    # listened readers' changes handed over, then ``then(taken_writes)``, the count as
    # of the changes (nothing if none changed)
    def publish(self, then: "Callable[[int], None]") -> None: ...

    def hold(self) -> AbstractContextManager[None]:
        """Hold back the writes the database's lock does not (a cluster's clients'
        writes at the workers) while in it, every one accepted before counted in
        ``taken_writes`` and passed on; nestable. Here: none to hold."""
        return nullcontext()

    # subscriptions: a reader node shard tells ``listener`` each batch it applies
    # (``listener.changed``) and when it loses its rows (``listener.lost``)
    def listen(self, node_id: str, listener: Any) -> None: ...
    def unlisten(self, node_id: str, listener: Any) -> None: ...

    # failure and recovery
    def crash(self, node_id: str) -> None: ...
    def reset(self, node_id: str) -> None: ...
    def alive(self, node_id: str) -> bool: ...
    def info(self, node_id: str) -> "DomainInfo": ...
    def payload_after(self, node_id: str, child: str, time: int) -> tuple[list["Message"], int]: ...
    def output_info(self, node_id: str, child: str, upto: int) -> tuple[
            "Batch | None", list["Message"], int, dict[str, int]]: ...
    def checkpoint(self, node_id: str, at_most: int) -> "Checkpoint | None": ...
    def drop_checkpoints(self, node_id: str) -> None: ...
    def restore(self, node_id: str, time: int, clock: "np.ndarray", last_seen: dict[str, int],
                inputs: list[tuple[int, "Batch"]],
                checkpoint: "Checkpoint | None" = None) -> None: ...
    def replay(self, node_id: str, msgs: list["Message"], seen: dict[str, int]) -> None: ...
    def restore_base(self, node_id: str, seen: dict[str, int], low: int) -> int: ...
    #: ``parent`` came back with a log to the live ``node_id`` starting after ``log_from``
    #: (``Domain.parent_restarted``: the child checkpoints if its newest is older)
    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None: ...
    def wait_recovered(self, timeout: float = 120.0, node_id: str | None = None) -> None: ...

    # a base's table, read where its rows are: here, its operator (a cluster with writes
    # at the workers asks the base's worker, which holds the rows the copy here lags)
    def table(self, base_id: str) -> "Batch":
        """Every row of base ``base_id``'s table, each with its count (``Base.snapshot``):
        what reads a table (``Table.rows``, a DELETE's WHERE, a new view's fill)."""
        return cast("Base", self.graph[base_id].op).snapshot()

    def table_size(self, base_id: str) -> int:
        """The number of rows in base ``base_id``'s table (``len(Table)``)."""
        return len(cast("Base", self.graph[base_id].op))

    def matching(self, base_id: str, where: "Expr | None") -> list[tuple[Any, ...]] | None:
        """The rows of base ``base_id``'s table for which ``where`` holds, as
        ``where.matching`` gives them (None: it divides by zero): a DELETE's or an
        UPDATE's WHERE, tested on the table's parts as kept (``Base.parts``: its write
        batches, columns tested as columns), not on one batch of them all."""
        return matching(cast("Base", self.graph[base_id].op).parts(), where)

    def primary_keys(self, base_id: str) -> list[tuple[Any, ...]]:
        """The primary keys of base ``base_id``'s table (``Table.primary_keys``; a
        table with a primary key is kept as rows, indexed by them: ``Base.by_key``)."""
        return list(cast("Base", self.graph[base_id].op).by_key)

    def rows_by_key(self, base_id: str, keys: list[tuple[Any, ...]]) -> list[tuple[Any, ...] | None]:
        """The row of base ``base_id``'s table under each primary key in ``keys``
        (canonical: ``nan.canon_row``), None where there is none (``delete_keys``)."""
        by_key = cast("Base", self.graph[base_id].op).by_key
        return [by_key.get(k) for k in keys]

    # introspection
    def describe(self, node_id: str) -> dict[str, Any]: ...

    def memory(self, node_ids: list[str]) -> dict[str, int]:
        """Bytes of each node shard's state (``memory.node_bytes``), measured where it
        lives: here, every node's operator (a cluster asks each worker for its own)."""
        return {nid: node_bytes(self.graph[nid].op) for nid in node_ids}
