"""Checkpoints of stateful node shards, kept outside the nodes so that they outlive a
crash (issue 18; Clonos, seed 004, and CheckMate, seed 002, describe the pieces).

Every stateful shard checkpoints on its own (``Domain.checkpoint``), with no barrier
and no other node involved: when it has taken ``tuning.CHECKPOINT_EVERY`` messages or
``tuning.CHECKPOINT_ROWS`` rows since its last one, times its kind's spacing
(``interval``: a join's and a reader's twice; a child's checkpoints hold back its
parent's low mark, so spacing a child keeps more deltas in its parent's store), and
once when it is filled at creation. A checkpoint records the shard's time and, per parent, the parent-time of the
last message it reflects; recovery (``recovery/treeclock.py``) loads the newest one at
or below the time the children pin (a node without children, a reader: its newest), and
replays the parents' payload logs from its parent-times.

Incremental: a checkpoint is a delta, only what changed since the shard's previous one
(``Operator.checkpoint_form``):

- ``"input"`` operators (join, TopK, DISTINCT, EXCEPT/INTERSECT, reader) hand over the
  batches they took since, by reference (batches are immutable), as their state took
  them (``Operator.taken``: a reader's after its SELECT list): the operator does nothing
  per batch (but for state in arrays, below), and the store folds them into a multiset
  of rows per port;
- ``"keyed"`` operators (aggregates) hand over the entries of the groups changed since.

State held in arrays (a join side, a reader or COUNT's counts in their dense form) is handed over
as arrays: whole the first time (a copy, ``DenseRows``, ``DenseCounts``), then as the
entries at the keys changed since (``RowsDelta``, ``CountsDelta``: the keys each batch
changed are kept as it is applied, ``dense.KeyMarks``, and marked together at the
checkpoint), which the store writes into its copy in place. That costs array
operations over the keys changed (and a pass over a bool array up to the largest
key changed, kept from one checkpoint to the next), where folding batches or entries one by
one costs Python work per row, and the delta holds no more than the keys changed; a
whole copy per checkpoint cost 3 ms for the vote join's 200k rows and held a second
copy of the state in the store.

Invariants:

- a delta is relative to what the store holds of the node as of its previous
  checkpoint: every key changed since is in it (an operator tracks from the moment its
  domain checkpoints it, ``Operator.tracking``), and a ``RowsDelta`` comes only for a
  port whose arrays the store holds (the operator sent or loaded that port's arrays
  last; otherwise it sends a copy, and the store refuses a ``RowsDelta`` for rows);
- the store never shares arrays or counts with an operator: a whole copy handed over
  is the store's, and ``latest`` hands out copies, which ``load`` takes over (a port's
  row -> count as the dict itself, ``Operator.load_counts``: a DISTINCT takes it as
  its state, where a batch of its rows had it hash every row again).

A node's checkpoints here are one **base** state and a **chain** of deltas after it.
Deltas at or below the node's low mark (the smallest time its children have
acknowledged; for a node without children, its own time, since its recovery starts
from its newest checkpoint) are folded into the base when the next delta arrives:
recovery never starts below the low mark, so nothing older than the newest such
checkpoint is needed.
Deltas above it stay apart, since a recovery may have to start below them. So the store
holds one copy of the state plus the deltas since the low mark: in a long run, bounded
(``tests/runtime/test_checkpoints.py``). The store's copy is its own: it changes in place
as deltas are folded, so ``latest`` hands out copies, which ``load`` takes over.

The folding is the store's work, not the node's: in a cluster it would run where the
store lives; here it runs in the call, and its cost is that of the delta (the pause a
checkpoint costs the shard is in docs/benchmarks.md).
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import numpy as np

from .. import tuning
from ..batch import Batch
from ..graph import Graph, Node
from ..ops.dense import DenseRows, RowsDelta
from ..ops.operator import Operator
from ..ops.state import CountsDelta, DenseCounts

#: an "input" delta: (port, batch taken, or the port's state in arrays, whole or what
#: changed) in order; a "keyed" delta: key -> entry or None, or the state in arrays
InputDelta: TypeAlias = "list[tuple[int, Batch | DenseRows | RowsDelta]]"
Entries: TypeAlias = "dict[Any, Any] | DenseCounts | CountsDelta"
#: what the store holds of a "keyed" node: key -> entry, or the counts in an array
HeldEntries: TypeAlias = "dict[Any, Any] | DenseCounts"
#: what a checkpoint holds of one port of an "input" node: its arrays, or its rows,
#: row -> count (never 0), a copy the operator may take over (``Operator.load_counts``)
HeldInput: TypeAlias = "DenseRows | dict[Any, int]"


@dataclass
class Checkpoint:
    """One node shard's state as of its ``time``, having taken each parent's messages
    up to ``parent_times``: per port the rows taken (``inputs``, "input" form: a batch
    of them with their counts as signs, as a cluster's wire carries them, or the
    store's row -> count, or arrays) or the entry per key (``entries``, "keyed"
    form)."""
    time: int
    parent_times: dict[str, int]
    form: str
    inputs: list[Batch | HeldInput] = field(default_factory=list)
    entries: HeldEntries = field(default_factory=dict)
    #: the node's tree clock as of ``time`` (None: not recorded, as in one read from
    #: disk; a cluster's worker sends it in its ``ck`` frame): its (node, parent, ...) entries are the parent's
    #: clock as of the parent-time it reflects, which lets a parent failed with it
    #: restart there (``recovery/treeclock.py``, "a failed child's checkpoint")
    clock: np.ndarray | None = None

    def rows(self) -> int:
        """Rows or entries it holds."""
        return sum(map(_size, self.inputs)) + _size(self.entries)


#: the operator kinds ``rebuilt_from_parents`` may name: all it knows
REBUILT_KINDS = frozenset({"reader", "join"})


def rebuilt_from_parents(graph: Graph, node: Node,
                         kinds: Collection[str] = REBUILT_KINDS) -> bool:
    """Whether ``node`` takes no checkpoints in the tree-clock regime, being rebuilt
    from its parents' output instead, at O(its own state), for a node of one of
    ``kinds`` (the embedded runtime: both; a cluster's: readers, where a join's rebuild
    would send its parents' whole output between workers, a sharded table's included):

    - a reader whose every parent regenerates its whole output from state: a stateful
      operator (a join, an aggregate, MIN/MAX, TopK, DISTINCT, a set operation; not a
      base or another source), a project or filter over one (as the vote view's
      reader sits on a project over its join), or a union of such (the union that
      merges a view's shards, as under NEXMark's aggregate views). Nothing downstream
      pins its times (it has no children), so a lost reader is rebuilt from its
      parent's output at the parent's current time (``recovery/treeclock.py``: no
      witness, no checkpoint), and its parent keeps no payload log to it;
    - a join whose every parent is a base, regenerates as above, or is a sharder over
      either (``_holds_its_input``). A join's state is its two inputs' rows, so
      reading its parents' output costs what its own state holds, or, through a
      sharder, the whole input of which it keeps its shard's part (not a base's
      history: a base's output is its table as it stands). Its children pin its
      times, so it comes back as any node without a checkpoint does: its parents'
      output up to the times its children's clocks name, undone from their payload
      logs (``output_through``), then the pinned replay. Its parents' logs to it are
      trimmed as to a stateless node, at its children's acknowledgements, not held
      back to a stable checkpoint of its own.

    Either way the node's checkpoints cost every write their deltas (a key marked per
    row, the delta gathered at each checkpoint, the store's fold) and held a checkpoint
    interval of its parents' batches in their logs to it (docs/recovery.md, "Nodes
    rebuilt from their parents"). A join over a filter or another stateless chain
    down to a base keeps its checkpoints: its rebuild would read the rows the chain
    drops too."""
    parents = [graph.nodes[p] for p in node.parents]
    if not parents or node.op.kind not in kinds:
        return False
    if node.op.kind == "join":
        return all(_holds_its_input(graph, p) for p in parents)
    return node.op.leaf and all(_regenerates(graph, p) for p in parents)


def _holds_its_input(graph: Graph, node: Node) -> bool:
    """Whether a join's parent ``node`` gives its whole output from state: a base (its
    table), a node that regenerates it (``_regenerates``), or a sharder over either
    (the join's shard reads the whole input to keep its part of it)."""
    if node.op.kind == "sharder" and len(node.parents) == 1:
        node = graph.nodes[node.parents[0]]
    return node.op.kind == "base" or _regenerates(graph, node)


def _regenerates(graph: Graph, node: Node) -> bool:
    op = node.op
    if not node.parents or op.kind == "base":
        return False
    if op.stateful:
        return True
    if op.kind == "union":          # (a sharded view's shards merged: each shard's)
        return all(_regenerates(graph, graph.nodes[p]) for p in node.parents)
    return (op.kind in ("project", "filter") and len(node.parents) == 1
            and _regenerates(graph, graph.nodes[node.parents[0]]))


def interval(op: Operator) -> tuple[int, int]:
    """The messages or rows after which a shard of ``op`` checkpoints again: the
    interval (``tuning.CHECKPOINT_EVERY``, ``CHECKPOINT_ROWS``) times the spacing of its
    kind (``tuning.JOIN_CHECKPOINT_SPACING``, ``READER_CHECKPOINT_SPACING``; one for
    the others, whose store must stay within its bound)."""
    kind = op.kind
    spacing = (tuning.JOIN_CHECKPOINT_SPACING if kind == "join"
               else tuning.READER_CHECKPOINT_SPACING if kind == "reader" else 1)
    return spacing * tuning.CHECKPOINT_EVERY, spacing * tuning.CHECKPOINT_ROWS


def delta(op: Operator, full: bool, taken: list[tuple[int, Batch]]) -> InputDelta | Entries:
    """What ``op`` hands the store for a checkpoint: its whole state (``full``), or what
    changed since its last one, ``taken`` being the batches it took since (the "input"
    form; a port held in arrays gives the entries at the keys it changed instead)."""
    if op.checkpoint_form == "keyed":
        return op.export_state(changed_only=not full)   # type: ignore[no-any-return]
    arrays: dict[int, DenseRows | RowsDelta | None] = op.array_state(full)
    rows = enumerate(op.contents()) if full else taken
    # (an empty batch changes nothing; None: a port held in arrays that did not change)
    return ([(p, b) for p, b in rows if p not in arrays and b]
            + [(p, x) for p, x in arrays.items() if x is not None])


def load(op: Operator, ck: Checkpoint) -> None:
    """Fill the empty ``op`` with the state ``ck`` holds (its arrays and counts taken
    over: ``ck`` is ``CheckpointStore.latest``'s copy)."""
    if ck.form == "keyed":
        op.load_state(ck.entries)
        return
    for port, x in enumerate(ck.inputs):
        if isinstance(x, DenseRows):
            op.load_array_state(port, x)
    for port, x in enumerate(ck.inputs):
        if isinstance(x, Batch):
            op.load_input(port, x)
        elif isinstance(x, dict):
            op.load_counts(port, x)


class Sink(Protocol):
    """Where a domain puts its checkpoints: a ``CheckpointStore`` in the same process
    (embedded), or a worker's stand-in that forwards each call to the store on the
    cluster's controller or on the worker's checkpoint holder
    (``cluster/holders.py``)."""

    def has(self, node_id: str) -> bool: ...

    def takes(self) -> bool:
        """Whether a checkpoint put now is kept anywhere (False: a cluster worker with
        no checkpoint holder named; the domain then records one taken, for its
        acknowledgements, and computes nothing)."""
        ...

    def put(self, node_id: str, time: int, parent_times: dict[str, int], form: str,
            delta: InputDelta | Entries, full: bool, stable: int,
            clock: np.ndarray | None = None) -> None: ...

    def keep_upto(self, node_id: str, time: int) -> None: ...

    def drop(self, node_id: str) -> None: ...


class _Chain:
    """One node's base state and the deltas after it."""

    def __init__(self, form: str, time: int, parent_times: dict[str, int]) -> None:
        self.form = form
        self.time = time                        # the base's time and parent-times
        self.parent_times = parent_times
        #: "input": per port, row -> count, or the port's state in arrays
        self.ports: list[HeldInput] = []
        #: "keyed": key -> entry, or COUNT's counts in an array
        self.entries: HeldEntries = {}
        self.deltas: list[tuple[int, dict[str, int], InputDelta | Entries]] = []
        #: the node's clock at the base's and at each delta's time, where it was given
        self.clocks: dict[int, np.ndarray] = {}

    def fold(self, delta: InputDelta | Entries) -> None:
        """Apply ``delta`` to the base."""
        if self.form == "input":
            _fold_inputs(self.ports, delta)   # type: ignore[arg-type]
        else:
            self.entries = _fold_entries(self.entries, delta)   # type: ignore[arg-type]

    def size(self) -> int:
        """Rows or entries held, base and deltas."""
        held = [*self.ports, self.entries] + [x for _, _, d in self.deltas
                                              for x in (d if isinstance(d, list) else [d])]
        return sum(_size(x) for x in held)


def _holds_whole(delta: InputDelta | Entries) -> bool:
    """Whether ``delta`` hands over a whole state in arrays (which the store takes over
    and later changes in place)."""
    if isinstance(delta, list):
        return any(isinstance(x, DenseRows) for _, x in delta)
    return isinstance(delta, DenseCounts)


def delta_rows(delta: InputDelta | Entries) -> int:
    """Rows or keys a delta changes (what it costs to write)."""
    return sum(map(_size, delta)) if isinstance(delta, list) else _size(delta)


def _size(x: Any) -> int:
    """Rows or entries ``x`` holds (a delta's: the keys it changed)."""
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], int):
        x = x[1]                                # (port, batch) of an input delta
    if isinstance(x, DenseCounts):
        return int(np.count_nonzero(x.counts))
    return len(x)


def _fold_inputs(ports: list[HeldInput], delta: InputDelta,
                 copy: bool = False) -> None:
    """Apply ``delta`` to ``ports`` in place; whole arrays in it are taken over (copied
    with ``copy``, for a delta that stays in the chain)."""
    for port, x in delta:
        while len(ports) <= port:
            ports.append({})
        if isinstance(x, DenseRows):
            ports[port] = x.copy() if copy else x
            continue
        held = ports[port]
        if isinstance(x, RowsDelta):
            # (an operator sends one only for a port whose arrays it last sent)
            if not isinstance(held, DenseRows):
                raise AssertionError(f"the changed keys of port {port}, whose arrays "
                                     "the store does not hold")
            held.put(x)
            continue
        if isinstance(held, DenseRows):         # (the side left its arrays since)
            held = ports[port] = {row: 1 for _, row in held.items()}
        for r, s in zip(x.rows, x.signs):
            c = held.get(r, 0) + s
            if c:
                held[r] = c
            else:
                del held[r]


def _fold_entries(entries: HeldEntries, delta: Entries, copy: bool = False) -> HeldEntries:
    """``entries`` with ``delta`` applied (in place; a whole delta is taken over, or
    copied with ``copy``)."""
    if isinstance(delta, DenseCounts):
        return DenseCounts(delta.counts.copy(), dict(delta.nulls)) if copy else delta
    if isinstance(delta, CountsDelta):
        if isinstance(entries, DenseCounts):
            counts, nulls = entries
            if delta.size > len(counts):
                counts = np.concatenate([counts, np.zeros(delta.size - len(counts),
                                                          dtype=counts.dtype)])
            counts[delta.keys] = delta.counts
            for k, n in delta.nulls.items():
                if n:
                    nulls[k] = n
                else:
                    nulls.pop(k, None)
            return DenseCounts(counts, nulls)
        # (the counts went back into an array after a restore from entries)
        null_counts = delta.nulls
        for k, c in zip(delta.keys.tolist(), delta.counts.tolist()):
            if c:
                entries[k] = (c, null_counts.get(k, 0))
            else:
                entries.pop(k, None)
        return entries
    if isinstance(entries, DenseCounts):        # (the counts left their array since)
        arr, nulls = entries
        keys = np.flatnonzero(arr)
        entries = {k: (c, nulls.get(k, 0)) for k, c in zip(keys.tolist(), arr[keys].tolist())}
    for k, e in delta.items():
        if e is None:
            entries.pop(k, None)
        else:
            entries[k] = e
    return entries


class CheckpointStore:
    """The checkpoints of every node shard of one runtime, by node id."""

    def __init__(self) -> None:
        self._chains: dict[str, _Chain] = {}
        #: with checkpoints on disk (``ondisk.py``): per node, the deltas put since its
        #: chain on disk was last written to, in order, by reference (none of them is
        #: changed afterwards: folding writes into the store's own base, and a whole
        #: state, which the store takes over and changes in place, is never journaled)
        self.journal: dict[str, list[tuple[str, InputDelta | Entries]]] | None = None
        #: nodes whose chain on disk cannot be carried on by the journal (a whole state
        #: put, or checkpoints forgotten by a restore): rewritten whole at the next cut
        self.rewrite: set[str] = set()

    def has(self, node_id: str) -> bool:
        return node_id in self._chains

    def takes(self) -> bool:
        return True

    def adopt(self, node_id: str, ck: Checkpoint) -> None:
        """Hold ``ck`` (whole; read from disk and taken over) as ``node_id``'s only
        checkpoint, with no journal entry: the disk already holds it."""
        chain = self._chains[node_id] = _Chain(ck.form, ck.time, dict(ck.parent_times))
        if ck.form == "input":
            # (a port's rows as a batch, counts as signs, as ``wire`` carries them: held
            # as row -> count)
            chain.ports = [dict(zip(x.rows, x.signs)) if isinstance(x, Batch) else x
                           for x in ck.inputs]
        else:
            chain.entries = ck.entries
        if self.journal is not None:
            self.journal[node_id] = []
            self.rewrite.discard(node_id)

    def retag(self, node_id: str, time: int, parent_times: dict[str, int],
              clock: np.ndarray | None = None) -> None:
        """Give ``node_id``'s only checkpoint (``adopt``) the time, parent-times and
        clock of the node that took it over."""
        chain = self._chains[node_id]
        assert not chain.deltas
        chain.time, chain.parent_times = time, dict(parent_times)
        chain.clocks = {} if clock is None else {time: clock}

    def _journal(self, node_id: str, form: str, delta: InputDelta | Entries, whole: bool) -> None:
        journal = self.journal
        assert journal is not None
        if whole or _holds_whole(delta):
            self.rewrite.add(node_id)
            journal[node_id] = []
        elif node_id not in self.rewrite:
            journal.setdefault(node_id, []).append((form, delta))

    def put(self, node_id: str, time: int, parent_times: dict[str, int], form: str,
            delta: InputDelta | Entries, full: bool, stable: int,
            clock: np.ndarray | None = None) -> None:
        """Record a checkpoint of ``node_id`` at ``time``: ``delta`` is the change since
        its previous one, or (``full``) its whole state; ``clock``, the node's clock
        then. Deltas at or below ``stable`` (the node's low mark) are folded into the
        base."""
        chain = self._chains.get(node_id)
        if self.journal is not None:
            self._journal(node_id, form, delta, full or chain is None)
        if full or chain is None:
            chain = self._chains[node_id] = _Chain(form, time, dict(parent_times))
            chain.fold(delta)
        else:
            chain.deltas.append((time, dict(parent_times), delta))
        if clock is not None:
            chain.clocks[time] = clock
        self.fold_upto(node_id, stable)

    def fold_upto(self, node_id: str, stable: int) -> None:
        """Fold ``node_id``'s deltas at or below ``stable`` (its low mark: no restore
        asks for a checkpoint below it) into its chain's base."""
        chain = self._chains.get(node_id)
        if chain is None:
            return
        while chain.deltas and chain.deltas[0][0] <= stable:
            chain.time, chain.parent_times, d = chain.deltas.pop(0)
            chain.fold(d)
        clocks = chain.clocks
        for t in [t for t in clocks if t < chain.time]:
            del clocks[t]

    def latest(self, node_id: str, at_most: int) -> Checkpoint | None:
        """The newest checkpoint of ``node_id`` at or below time ``at_most``, or None."""
        chain = self._chains.get(node_id)
        if chain is None or chain.time > at_most:
            return None
        later = [d for d in chain.deltas if d[0] <= at_most]
        time, parent_times = chain.time, chain.parent_times
        if later:
            time, parent_times = later[-1][0], later[-1][1]
        if chain.form == "input":
            # (copies: folding changes dicts and arrays in place, and the operator takes
            # them over: a dict's copy is one pass in C, where handing rows over as a
            # batch had the operator hash each row again, ``Operator.load_counts``)
            ports = [p.copy() for p in chain.ports]
            for _, _, d in later:
                _fold_inputs(ports, d, copy=True)      # type: ignore[arg-type]
            return Checkpoint(time, dict(parent_times), "input", inputs=list(ports),
                              clock=chain.clocks.get(time))
        entries = chain.entries
        if isinstance(entries, DenseCounts):
            entries = DenseCounts(entries.counts.copy(), dict(entries.nulls))
        elif later:
            entries = dict(entries)
        for _, _, d in later:
            entries = _fold_entries(entries, d, copy=True)   # type: ignore[arg-type]
        return Checkpoint(time, dict(parent_times), "keyed", entries=entries,
                          clock=chain.clocks.get(time))

    def keep_upto(self, node_id: str, time: int) -> None:
        """Forget the checkpoints of ``node_id`` after ``time`` (it restarted from one
        at or below it, and may take a different path from there)."""
        chain = self._chains.get(node_id)
        if chain is not None:
            if self.journal is not None:         # (the disk may hold those forgotten)
                self.rewrite.add(node_id)
                self.journal[node_id] = []
            chain.deltas = [d for d in chain.deltas if d[0] <= time]
            for t in [t for t in chain.clocks if t > time]:
                del chain.clocks[t]

    def drop(self, node_id: str) -> None:
        self._chains.pop(node_id, None)
        if self.journal is not None:
            self.rewrite.add(node_id)
            self.journal.pop(node_id, None)

    def size(self, node_id: str) -> tuple[int, int]:
        """(rows or entries held for ``node_id``, deltas not yet folded)."""
        chain = self._chains.get(node_id)
        return (0, 0) if chain is None else (chain.size(), len(chain.deltas))
