"""Partial state: a view's reader, and the aggregate, join, TopK and DISTINCT above it,
hold only the keys read (``connect(partial=True)``).

What is partial. The reader of a parameterized view (``... WHERE col = ?``) whose key
can be traced up the graph to an index that holds every row of any key (``trace``):

- through filters, unions and sharders (a key's rows keep their key) and projections
  that pass the key columns on as plain columns (so does a reader's own SELECT list);
- through a full DISTINCT (shared with another view): its rows of a key are the
  distinct rows of its input's rows of that key (``Distinct.computed``); nothing above
  it is partial;
- to the nearest full stateful ancestor: a base table (which builds an index on those
  columns at the first upquery and keeps it, ``Base.index_rows``), an aggregate or
  MIN/MAX whose group-by columns are exactly the key (``Aggregate.group_rows``), a
  join whose join key is exactly the key (its two sides are kept under it:
  ``Join.key_rows``), or a TopK partitioned by exactly the key (``TopK.part_rows``).

An aggregate (or MIN/MAX) grouped by the key, a join on the key, a TopK partitioned
by the key or a DISTINCT (whose columns hold the key) on the way is partial too
(``path_of``) when it feeds this reader alone (every node from it down has one child:
not a sub-plan shared with another view, no re-sharding in between) and its own input
traces further up the same way (both inputs, for a join): the vote view's COUNT and
LEFT JOIN are, and a ``WHERE a = ? ORDER BY b LIMIT k``'s TopK. The reader and these
operators form the reader's *path*; their keys are the reader's keys, mapped to each
operator's own form (``op_key``). Anything else on the way (a set operation, a join
on other columns, a TopK partitioned otherwise, a key computed by an expression, a
global aggregate, a key that is part of a group only) leaves the reader full, and
``db.graph()`` says ``partial: False``.

The rules (Noria's replay paths, OSDI'18 §4, in one process):

1. A lookup of a key the reader does not hold (a hole) is an upquery: under the
   database's lock, the key's rows are computed from the sources' state and pushed
   through the operators between them and the reader (``rows_for``): a stateless one
   by its ``process``; a partial aggregate or join that has the key as a hole is
   filled on the way (``fill``: its input rows for the key, from its own parents in
   turn), then answers; the reader fills the key last (``Reader.fill``).
2. A write that reaches a partial node under a hole is dropped there (``ops/holes.py``,
   ``Holes.select``: one indexing of the held keys' slot map for a columnar batch),
   before anything is counted, joined or sent on: the first partial node on its way
   stops it. Invariant: every node of a path holds exactly the
   same keys, each with every row of it (checked by tests/test_partial.py after every
   step), so a key is filled once per node and a dropped write concerns nobody below.
3. A fill never double-counts or misses a write in flight. Without ``seed`` nothing is
   ever in flight when the lock is free (a write propagates before it returns). With
   ``seed`` (or after a recovery's replays are queued), messages may be in flight
   anywhere; before computing a fill, every message pending on an edge into the reader
   or one of its ancestors is delivered (``EmbeddedRuntime.drain``), so each source's
   state is exactly the sum of what the path has been sent from it: a write already
   past the source reaches each partial node (at the hole: dropped) before the fill,
   which includes it; one not yet at the source reaches them after the fill, which
   does not. This is Noria's "the replay travels behind what is in flight", and makes
   a miss as fresh as ``wait()`` would for that view; a hit stays as fresh as ever.
4. Every node from the sources to the reader must be alive: an upquery through a
   failed node raises ``RecoveryError`` (its state, or what it has in flight, is not
   there).
5. Eviction (``memory_limit``): each held key is accounted at the bytes of its entry in
   every node of the path (the reader's: its entry in ``holes``, its rows' entries in
   the arrays or buckets and ``reader.ENTRY_OVERHEAD``; an aggregate's count or group,
   a join's two sides' entries, plus their overheads), measured when it
   is filled and, for a key a write touched, when the sum is next read (``settle``); when the sum exceeds the limit (after a
   fill, after a write), the least recently read keys (over all partial readers)
   become holes again, in the reader and in every partial operator of its path
   together, until it fits. A read refills them. The key just filled is read before
   eviction, so a limit smaller than one key still answers (and keeps nothing).
   "Least recently read" is a stamp per held key, by slot, in its reader
   (``Reader.stamps``, 8 bytes a key; a hit writes the next tick there): eviction
   takes the oldest stamps from a queue (``_queue``) built of the oldest eighth of the
   held keys at once and built again when spent; an entry whose stamp has moved since
   (read again, or its slot evicted and reused) is passed over, so the order is exact
   LRU at amortized O(1) a key, where an ordered dict of (reader, key) cost each hit
   a move and about 160 bytes a key.
6. Any node of a path that loses its state (a crash, a lineage purge, a regime's
   rollback setting it back) makes every key of the path a hole again, in each of its
   nodes (``lost``): it comes back empty, with every recovery strategy and in every
   regime, and the next reads refill. So partial nodes take no checkpoints, in any
   regime (their parents keep logs to them as to a node without any; a regime still
   records their times and parent-times, docs/regimes.md, "Partial state"); what a
   recovery replays into them reaches holes and is dropped (rule 2).
7. A partial operator that a later view comes to share (an identical sub-plan, which
   the planner builds once) becomes full again, with the partial operators above it
   on its path (``recheck``): refilled from its inputs' full output as a new node is;
   its reader's keys become holes.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from sql_frontend.expr import Col

from .batch import Batch
from .errors import RecoveryError

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph
    from .ops.reader import Reader
    from .runtime.embedded import EmbeddedRuntime

#: (source node id, its output columns holding the key's values, in key order)
Source = tuple[str, tuple[int, ...]]

#: kinds of operator that can be partial (grouped by the key) besides the join
GROUPED = ("aggregate", "extremum")
#: kinds of operator that can be partial keeping every input row of a key (TopK
#: partitioned by it, DISTINCT): filled with their input's rows of the key
KEYED = ("topk", "distinct")


def trace(graph: Graph, node_id: str, cols: tuple[int, ...]) -> list[Source] | None:
    """The sources of the rows ``node_id`` outputs whose ``cols`` hold a key: the nearest
    ancestors indexed by it (module docstring), or None where the key cannot be traced."""
    return _walk(graph, node_id, cols, False, set(), [])


def path_of(graph: Graph, node_id: str, cols: tuple[int, ...],
            allowed: set[str]) -> tuple[list[Source], list[Source]] | None:
    """``trace``, and the operators on the way that can be partial with the reader
    whose parent is ``node_id`` (each with its output columns holding the key, in key
    order): an aggregate grouped by the key or a join on the key that is among
    ``allowed``, feeds nothing but this reader (every node from it down has one child)
    and whose own input traces further up (both inputs, for a join)."""
    ops: list[Source] = []
    alone = len(graph[node_id].children) == 1
    sources = _walk(graph, node_id, cols, alone, allowed, ops)
    if sources is None:
        return None
    return sources, ops


def _walk(graph: Graph, node_id: str, cols: tuple[int, ...], alone: bool, allowed: set[str],
          ops: list[Source]) -> list[Source] | None:
    node = graph[node_id]
    op: Any = node.op
    kind = op.kind

    def up(parent: str, pcols: tuple[int, ...]) -> list[Source] | None:
        return _walk(graph, parent, pcols, alone and len(graph[parent].children) == 1,
                     allowed, ops)

    if kind == "base":
        return [(node_id, cols)]
    if kind in GROUPED:
        groups = op.group_by
        if not groups or sorted(cols) != list(range(len(groups))):
            return None
        if alone and node_id in allowed:
            mark = len(ops)
            found = up(node.parents[0], tuple(groups[c] for c in cols))
            if found is not None:
                ops.append((node_id, cols))
                return found
            del ops[mark:]
        return [(node_id, cols)]
    if kind == "join":
        where = join_positions(op, cols)
        if where is None:
            return None
        if alone and node_id in allowed:
            mark = len(ops)
            left = up(node.parents[0], tuple(op.left_keys[w] for w in where))
            right = (up(node.parents[1], tuple(op.right_keys[w] for w in where))
                     if left is not None else None)
            if left is not None and right is not None:
                ops.append((node_id, cols))
                return left + right
            del ops[mark:]
        return [(node_id, cols)]
    if kind in KEYED:
        if kind == "topk" and sorted(cols) != sorted(op.partition):
            return None                 # (a window over more, or other, rows than a key's)
        if alone and node_id in allowed:
            mark = len(ops)
            found = up(node.parents[0], cols)
            if found is not None:
                ops.append((node_id, cols))
                return found
            del ops[mark:]
        if kind == "topk":
            return [(node_id, cols)]    # a full TopK: its partition is kept whole
        out_d: list[Source] = []        # a full DISTINCT: its input's rows, nothing
        for p in node.parents:          # above it partial (it keeps every input row)
            found = _walk(graph, p, cols, False, allowed, ops)
            if found is None:
                return None
            out_d.extend(found)
        return out_d
    if kind == "project":
        projected = through_project(op, cols)
        if projected is None:
            return None
        cols = projected
    elif kind not in ("filter", "union", "sharder"):
        return None
    out: list[Source] = []
    for p in node.parents:
        found = up(p, cols)
        if found is None:
            return None
        out.extend(found)
    return out


def join_positions(op: Any, cols: tuple[int, ...]) -> tuple[int, ...] | None:
    """For each of ``cols`` (a join's output columns), the join-key component it holds
    (a left key column, or a right one past the left's width), if together they hold
    every component once; else None."""
    width = op.left_width
    out = []
    for c in cols:
        keys, at = (op.left_keys, c) if c < width else (op.right_keys, c - width)
        if at not in keys:
            return None
        out.append(keys.index(at))
    if sorted(out) != list(range(len(op.left_keys))):
        return None
    return tuple(out)


def op_key(op: Any, cols: tuple[int, ...], key: tuple) -> Any:
    """The key as ``op`` (an aggregate grouped by it, a join on it, a TopK partitioned
    by it, a DISTINCT) keeps it: ``key``'s values (in key order) are its output columns
    ``cols``."""
    if op.kind == "topk":               # (in partition order; bare for one column)
        part = part_key(op, cols, key)
        return part[0] if len(part) == 1 else part
    if op.kind == "distinct":           # (in key order; bare for one column)
        return key[0] if len(key) == 1 else tuple(key)
    if op.kind in GROUPED:
        if op.count_only:
            return key[0]
        group: list[Any] = [None] * len(cols)
        for c, v in zip(cols, key):
            group[c] = v
        return tuple(group)
    where = join_positions(op, cols)
    assert where is not None
    parts: list[Any] = [None] * len(where)
    for j, v in zip(where, key):
        parts[j] = v
    return parts[0] if len(parts) == 1 else tuple(parts)


def key_of(op: Any, cols: tuple[int, ...], held: Any) -> tuple:
    """The key (its values in key order) that ``op_key`` maps to ``held``: the reader's
    key of a key ``op`` holds."""
    if op.kind == "topk":
        at = dict(zip(op.partition, held if len(op.partition) > 1 else (held,)))
        return tuple(at[c] for c in cols)
    if op.kind == "distinct" or (op.kind in GROUPED and op.count_only):
        return held if len(cols) > 1 else (held,)
    if op.kind in GROUPED:
        return tuple(held[c] for c in cols)
    where = join_positions(op, cols)
    assert where is not None
    parts = held if len(where) > 1 else (held,)
    return tuple(parts[j] for j in where)


def make_partial(op: Any, manager: Any, reader: Reader, cols: tuple[int, ...]) -> None:
    """Make operator ``op`` of reader ``reader``'s path partial, its keys' bytes
    accounted to ``manager``; ``cols``: its output columns holding the key (which a
    DISTINCT keeps its rows under; the others know their key's columns)."""
    if op.kind == "distinct":
        op.make_partial(manager, reader, cols)
    else:
        op.make_partial(manager, reader)


def part_key(op: Any, cols: tuple[int, ...], key: tuple) -> tuple:
    """A TopK's partition tuple (its ``partition`` columns' values, in order) of the key
    ``key`` held in its columns ``cols``."""
    at = dict(zip(cols, key))
    return tuple(at[c] for c in op.partition)


def read_by_key(reader: Reader) -> bool:
    """Whether a reader may be partial at all (embedded and in a cluster): it is read
    by key (a view with ``?``), and not by range (``col > ?``: a range read needs the
    rows of every value of the column)."""
    return bool(reader.key) and reader.range_column is None


def reader_columns(reader: Reader) -> tuple[int, ...] | None:
    """The reader's key columns in the rows its parent sends (through its own SELECT
    list, if it applies one), or None where one is computed."""
    if reader.select is None:
        return reader.key
    return through_project(reader.select, reader.key)


def through_project(project: Any, cols: tuple[int, ...]) -> tuple[int, ...] | None:
    """A projection's output columns ``cols`` as the columns of its input they pass on,
    or None where one of them is computed."""
    mapped = []
    for c in cols:
        e = project.exprs[c]
        if not isinstance(e, Col):
            return None
        mapped.append(e.index)
    return tuple(mapped)


def rows_for(graph: Graph, node_id: str, child: str | None, cols: tuple[int, ...],
             key: tuple | None) -> Batch:
    """The rows ``node_id`` sends ``child`` whose ``cols`` equal ``key`` (every row for
    None), computed from the sources' state (an upquery along ``trace``'s path). A
    partial operator on the way that has the key as a hole is filled on the way
    (rule 1); for None, a partial operator's output is computed from its inputs'."""
    node = graph[node_id]
    op: Any = node.op
    kind = op.kind
    if kind == "base":
        return op.index_rows(cols, key)
    if kind in GROUPED:
        groups = op.group_by
        if key is None:
            if op.partial:
                return op.computed(rows_for(graph, node.parents[0], node_id,
                                            tuple(groups), None))
            return op.group_rows(None)
        if op.partial:
            held = op_key(op, cols, key)
            if held not in op.holes:
                return op.fill(held, rows_for(graph, node.parents[0], node_id,
                                              tuple(groups[c] for c in cols), key))
        group: list[Any] = [None] * len(cols)
        for c, v in zip(cols, key):
            group[c] = v
        return op.group_rows(tuple(group))
    if kind == "join":
        if key is None:
            if op.partial:
                return op.computed(
                    rows_for(graph, node.parents[0], node_id, op.left_keys, None),
                    rows_for(graph, node.parents[1], node_id, op.right_keys, None))
            return op.snapshot()
        held = op_key(op, cols, key)
        padded = all(c < op.left_width for c in cols)
        if op.partial and held not in op.holes:
            where = join_positions(op, cols)
            assert where is not None
            return op.fill(
                held,
                rows_for(graph, node.parents[0], node_id,
                         tuple(op.left_keys[w] for w in where), key),
                rows_for(graph, node.parents[1], node_id,
                         tuple(op.right_keys[w] for w in where), key),
                padded)
        return op.key_rows(held, padded)
    if kind == "topk":
        if key is None:
            if op.partial:
                return op.computed(rows_for(graph, node.parents[0], node_id, cols, None))
            return op.snapshot()
        if not op.partial:
            return op.part_rows(part_key(op, cols, key))
        held = op_key(op, cols, key)
        if held not in op.holes:
            return op.fill(held, rows_for(graph, node.parents[0], node_id, cols, key))
        return op.key_rows(held)
    if kind == "distinct":
        if op.partial and key is not None:
            held = op_key(op, cols, key)
            if held in op.holes:
                return op.key_rows(held)
        rows = Batch()
        for p in node.parents:
            rows.extend(rows_for(graph, p, node_id, cols, key))
        if op.partial and key is not None:
            return op.fill(held, rows)
        return op.computed(rows)        # (every row, or a full DISTINCT's of the key)
    if kind == "project":
        up = tuple(op.exprs[c].index for c in cols)
        return op.process(0, rows_for(graph, node.parents[0], node_id, up, key))
    if kind == "filter":
        return op.process(0, rows_for(graph, node.parents[0], node_id, cols, key))
    if kind == "sharder":
        outs: list[Batch] = op.process(0, rows_for(graph, node.parents[0], node_id, cols, key))
        shard = graph[child].shard if child is not None else None
        if shard is not None:
            return outs[shard]
        out = Batch()
        for b in outs:
            out.extend(b)
        return out
    assert kind == "union", kind
    out = Batch()
    for p in node.parents:
        out.extend(rows_for(graph, p, node_id, cols, key))
    return out


class Partial:
    """Every partial path of one database: which readers are partial and the partial
    operators on each one's path, the clock their keys' last-read stamps are read
    from, the bytes accounted (every node of every path), and the limit (module
    docstring, rule 5)."""

    def __init__(self, graph: Graph, runtime: EmbeddedRuntime, limit: int | None) -> None:
        self.graph = graph
        self.runtime = runtime
        self.limit = limit
        #: the next last-read stamp (1, 2, ...: 0 is a free slot's); readers call it
        self.tick = itertools.count(1).__next__
        #: (stamp, reader, slot) of held keys, newest first, the oldest popped first
        #: (``evict``); an entry whose reader's stamp at the slot differs is stale
        self._queue: list[tuple[int, Reader, int]] = []
        self.total = 0              # bytes accounted to every held key
        #: whether a write touched held keys while no limit was set (then nothing is
        #: marked dirty, and ``settle`` measures every held key)
        self.stale = False
        self.evictions = 0
        self.upqueries = 0
        #: reader node id -> its key columns in its parent's rows
        self.paths: dict[str, tuple[int, ...]] = {}
        #: reader node id -> the partial operators on its path (node ids)
        self.path_ids: dict[str, list[str]] = {}
        self._upstream: dict[str, tuple[int, set[str]]] = {}
        #: (reader, key) -> subscriptions to it: never evicted while one listens
        self.pinned: dict[tuple[Reader, Any], int] = {}

    # ------------------------------------------------------------ set-up

    def install(self, reader_id: str, fresh: set[str] | frozenset[str] = frozenset()) -> bool:
        """Make the reader ``reader_id`` partial if its key traces to an index, and with
        it the operators on its path that can be (``path_of``; only new ones, among
        ``fresh``: an operator that already holds state stays full)."""
        node = self.graph[reader_id]
        reader: Reader = node.op    # type: ignore[assignment]
        if not read_by_key(reader):
            return False
        cols = reader_columns(reader)
        found = None if cols is None else path_of(self.graph, node.parents[0], cols, set(fresh))
        if cols is None or found is None:
            return False
        self.paths[reader_id] = cols
        reader.make_partial(self)
        # no checkpoints: a partial node comes back all holes (rule 6), and recording
        # every batch it is sent (holes' included) cost more than the reader itself
        self.runtime.domains[reader_id].use_checkpoints(None)
        self._set_path(reader_id, reader, found[1])
        return True

    def _set_path(self, reader_id: str, reader: Reader, ops: list[Source]) -> None:
        path = []
        self.path_ids[reader_id] = []
        for nid, cols in ops:
            if nid in self.path_ids[reader_id]:
                continue                # (both sides of a self-join: one operator)
            self.path_ids[reader_id].append(nid)
            op: Any = self.graph[nid].op
            if not op.partial:
                make_partial(op, self, reader, cols)
                self.runtime.domains[nid].use_checkpoints(None)
            path.append((op, cols))
        reader.path = path

    def recheck(self) -> None:
        """After the graph grew: a partial operator that now feeds another view too (a
        shared sub-plan) becomes full again, with every partial operator above it on
        its reader's path (a full node below a hole would miss the writes dropped
        there). Its reader loses its keys; the operators are refilled from their
        inputs' full output and settled (as a new node is: ``planner.initialize``,
        ``Runtime.settle``), checkpointing as the regime's other stateful nodes do from
        then on: a rollback or recovery loads their state again, where a partial node's
        comes back empty."""
        from .planner.initialize import initialize

        full_again: set[str] = set()
        for reader_id, cols in list(self.paths.items()):
            reader: Reader = self.graph[reader_id].op     # type: ignore[assignment]
            if not reader.path:
                continue
            ids = set(self.path_ids[reader_id])
            found = path_of(self.graph, self.graph[reader_id].parents[0], cols, ids)
            keep = {nid for nid, _ in found[1]} if found is not None else set()
            if keep == ids:
                continue
            self.runtime.wait()         # (initialize needs every inbox empty)
            self.lost(reader)
            for nid in self.graph.topological():
                if nid in ids - keep:
                    op: Any = self.graph[nid].op
                    op.make_full()
                    initialize(self.graph, {nid})
                    self.runtime.checkpoint_into(self.runtime.domains[nid])
                    full_again.add(nid)
            reader.path = [(op, c) for op, c in reader.path if op.partial]
            self.path_ids[reader_id] = [n for n in self.path_ids[reader_id] if n in keep]
        if full_again:
            self.runtime.settle(full_again)

    def remove(self, reader_id: str) -> None:
        """The reader ``reader_id`` leaves the graph (its view was dropped), and the
        partial operators on its path with it (they fed it alone)."""
        if self.paths.pop(reader_id, None) is not None:
            reader: Reader = self.graph[reader_id].op     # type: ignore[assignment]
            self.lost(reader)
            reader.path = []
        self.path_ids.pop(reader_id, None)
        self._upstream.pop(reader_id, None)
        self._queue = []

    # ------------------------------------------------------------ the reader's calls

    def resize(self, old: int, new: int) -> None:
        self.total += new - old

    def lost(self, reader: Reader) -> None:
        """A node of ``reader``'s path (the reader, or a partial operator above it) lost
        its state: every key of the path becomes a hole again, in each of its nodes, and
        the subscriptions to its keys end (what was written meanwhile never reaches the
        reader as changes: subscribe again, for a new snapshot)."""
        for key in list(reader.filled):
            self.total -= self._evict(reader, key)
        for listener in list(reader.listeners):
            listener.lost("a node of its partial view lost its state (a failure): "
                          "subscribe again")

    def pin(self, reader: Reader, key: Any) -> None:
        """Keep ``key`` of ``reader`` (as ``Reader.lookup`` takes it) from eviction: a
        subscription listens to it."""
        k = (reader, key)
        self.pinned[k] = self.pinned.get(k, 0) + 1

    def unpin(self, reader: Reader, key: Any) -> None:
        k = (reader, key)
        n = self.pinned.get(k, 0) - 1
        if n > 0:
            self.pinned[k] = n
        else:
            self.pinned.pop(k, None)

    def _evict(self, reader: Reader, key: Any) -> int:
        """``key`` a hole in ``reader`` and in each partial operator of its path; the
        bytes they were accounted at."""
        size = reader.evict(key)
        kt = key if type(key) is tuple else (key,)
        for op, cols in reader.path:
            size += op.evict(op_key(op, cols, kt))
        return size

    # ------------------------------------------------------------ upqueries

    def _check_path(self, reader_id: str) -> set[str]:
        """The reader and its ancestors (cached per graph version); raises if one failed."""
        cached = self._upstream.get(reader_id)
        if cached is None or cached[0] != self.graph.version:
            seen = {reader_id}
            stack = [reader_id]
            while stack:
                for p in self.graph[stack.pop()].parents:
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
            cached = self._upstream[reader_id] = (self.graph.version, seen)
        for nid in cached[1]:
            if not self.runtime.alive(nid):
                raise RecoveryError(f"node {nid} has failed; a read of a key view "
                                    f"{self.graph[reader_id].view!r} does not hold goes "
                                    "through it: recover it first (db.recover())")
        return cached[1]

    def fill(self, reader_id: str, keys: list) -> list[list[tuple]]:
        """Upqueries: the rows of each of ``keys`` (holes of reader ``reader_id``, as
        ``Reader.lookup`` takes them), which the reader then holds; then eviction."""
        self.runtime.drain(self._check_path(reader_id))
        node = self.graph[reader_id]
        reader: Reader = node.op    # type: ignore[assignment]
        cols = self.paths[reader_id]
        out = []
        for k in keys:
            rows = reader.lookup(k)             # (the drain cannot fill, but a key may repeat)
            if rows is None:
                self.upqueries += 1
                batch = rows_for(self.graph, node.parents[0], reader_id, cols,
                                 k if type(k) is tuple else (k,))
                rows = reader.fill(k, batch)
            out.append(rows)
        self.evict()
        return out

    def fill_all(self, asks: list[tuple[str, list]]) -> list[list[list[tuple]]]:
        """``fill`` of each ``(reader_id, keys)`` (a ``lookup_many``'s reader shards):
        one after another here; a cluster sends every upquery before it waits for the
        first answer."""
        return [self.fill(reader_id, keys) for reader_id, keys in asks]

    def all_rows(self, reader_id: str) -> list[tuple]:
        """Every row of a partial reader's view shard, computed from the sources
        (what ``View.all`` reads; nothing is filled)."""
        self.runtime.drain(self._check_path(reader_id))
        node = self.graph[reader_id]
        reader: Reader = node.op    # type: ignore[assignment]
        batch = rows_for(self.graph, node.parents[0], reader_id, self.paths[reader_id], None)
        if reader.select is not None:
            batch = reader.select.process(0, batch)
        out: list[tuple] = []
        for r, s in zip(batch.rows, batch.signs):
            out.extend([r] * s)
        return reader._finish(out)

    # ------------------------------------------------------------ eviction

    def evict(self) -> None:
        """The least recently read keys become holes until the total fits the limit."""
        limit = self.limit
        if limit is None:
            return
        self.settle()
        limit -= self.fixed_bytes()     # (what the nodes' slot maps take: no key's)
        queue = self._queue
        while self.total > limit:
            if not queue:
                queue = self._queue = self._oldest()
                if not queue:
                    break               # (nothing held but pinned keys)
            stamp, reader, slot = queue.pop()
            stamps = reader.stamps
            if slot >= len(stamps) or stamps.item(slot) != stamp:
                continue                # (read since, or evicted)
            key = reader.holes.key_at(slot)
            if reader.holes.slot(key) != slot or (reader, key) in self.pinned:
                continue                # (a free slot a racing hit stamped; subscribed)
            self.total -= self._evict(reader, key)
            self.evictions += 1

    def _oldest(self) -> list[tuple[int, Reader, int]]:
        """The oldest eighth (at least 64) of the held keys of every partial reader, by
        last-read stamp, as (stamp, reader, slot), newest first; pinned keys left
        out."""
        readers: list[Reader] = []
        parts_s, parts_r, parts_k = [], [], []
        for reader_id in self.paths:
            reader: Any = self.graph[reader_id].op
            st = reader.stamps[:reader.holes._top]
            held = np.flatnonzero(st > 0)
            if not len(held):
                continue
            if self.pinned:
                pins = [reader.holes.slot(k) for r, k in self.pinned if r is reader]
                if pins:
                    held = held[~np.isin(held, pins)]
            parts_s.append(st[held])
            parts_k.append(held)
            parts_r.append(np.full(len(held), len(readers)))
            readers.append(reader)
        if not readers:
            return []
        stamps = np.concatenate(parts_s)
        n = len(stamps)
        m = min(n, max(64, n // 8))
        pick = np.argpartition(stamps, m - 1)[:m] if m < n else np.arange(n)
        pick = pick[np.argsort(stamps[pick])[::-1]]
        which = np.concatenate(parts_r)[pick].tolist()
        return list(zip(stamps[pick].tolist(), [readers[i] for i in which],
                        np.concatenate(parts_k)[pick].tolist()))

    def held_bytes(self) -> int:
        """The bytes accounted to every held key (what the limit bounds, with
        ``fixed_bytes``)."""
        self.settle()
        return self.total

    def fixed_bytes(self) -> int:
        """The bytes of every partial node's slot maps and spare slots
        (``Holes.fixed_bytes``: sized to the key range and the slots handed out,
        not to the keys held)."""
        out = 0
        for reader_id in self.paths:
            reader: Any = self.graph[reader_id].op
            out += reader.holes.fixed_bytes(reader.slot_arrays())
            for op, _ in reader.path:
                if op.holes.manager is self:    # (a cluster's, counted where hosted)
                    out += op.holes.fixed_bytes(op.slot_arrays())
        return out

    def settle(self) -> None:
        """Bring the accounting up to date: each partial node measures the held keys
        written since it last did (with a limit: the keys it marked ``dirty``; without,
        once a write has made the manager ``stale``, every held key)."""
        stale, self.stale = self.stale, False
        for reader_id in self.paths:
            reader: Any = self.graph[reader_id].op
            if stale:               # (no limit was set: every held key, once)
                reader.holes.dirty = set(reader.holes.keys())
            if reader.holes.dirty:
                reader.settle()
            for op, _ in reader.path:
                if stale:
                    op.holes.dirty = set(op.holes.keys())
                if op.holes.dirty:
                    op.settle()
