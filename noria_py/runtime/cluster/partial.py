"""Partial readers, and the aggregates, joins, TopKs and DISTINCTs above them, in a
cluster (``noria-py serve --partial [--memory-limit BYTES]``): a parameterized view's
reader shard holds only the keys read, on its worker (and so do an aggregate grouped
by its key, a join on its key, a TopK partitioned by it or a DISTINCT that feed it
alone, on their own workers), and a miss is an upquery that
travels the replay paths from the nearest ancestors holding the key to the reader,
over the same channels as the writes.

What is partial. A reader whose key can be followed up a *chain* of single-parent
filters, projections (passing the key columns on as plain columns) and sharders to
one source that answers for the key from its own state (``chain``): a base table
(its rows are on the controller, which builds an index on the key at the first
upquery: ``Base.index_rows``; with ``--writes worker``, on the base's worker: step 2),
or a full aggregate or MIN/MAX grouped by exactly the
key, join on exactly the key, or TopK partitioned by exactly the key, on a worker.
Anything else (a union, a full DISTINCT, several sources) leaves the reader full. An
aggregate or MIN/MAX grouped by exactly the key, or a TopK partitioned by exactly
the key, is *held* partial with the reader (``chain_and_ops``) instead of being its
source when it is new (no state yet), feeds this reader alone (every node from it
down has one child) and its own input leads up such a chain to a base: the chain
then runs from the base through it, and it holds the keys filled through it
(``through_held``: a hole is filled with the rows the fill carries, a key held
answers from its state: its group's row, its window), its writes for other keys
dropped on arrival (``Holes.select``). A DISTINCT (never a source: it keeps no index
by the key when full) is held the same way, or its reader stays full; a sharded one
never is (the planner partitions it by all its columns and re-shards below it, so it
does not feed one reader shard alone), as embedded. A join on exactly the key is
held likewise when both its inputs lead up chains to bases (the vote view: ``article
-> sharder -> join`` and ``vote -> sharder -> COUNT -> join``, the COUNT held too):
the reader then has two chains, which meet at the join, and an upquery sends a fill
up each; the join answers when both sides' rows have arrived (``Join.arrive``: the
side that came first waits, and the writes that reach it on that side meanwhile,
which are after its fill, are added to its rows; those on the other side before its
fill are in that fill, and are dropped at the hole). Above a join at most one side
holds an aggregate, and above an aggregate, TopK or DISTINCT nothing more is held
(``chain_and_ops``). An operator held partial that a later view comes to share (an
identical sub-plan, it or a node below it) becomes full again, with the others held
with it (``recheck``).

How a miss is filled (``ClusterPartial.fill``, the worker's ``Worker._fill``):

1. A read of a hole at the reader's worker answers "hole" (None); the client asks the
   controller (request ``upquery``), which upqueries the keys without reading the
   readers again. (With ``--writes worker`` the holes are upqueried by the reader's
   worker itself where it can: "A miss without the controller", below.)
2. Under the database's lock (so in order with every write: the controller takes
   writes under it), the controller checks that every node of the chain is up and
   sends a ``fill`` frame to the source: for a base, with the key's rows computed
   here from the controller's copy of the table, to the base's worker (behind every
   ``write`` frame sent before, on the same connection); for a worker's operator,
   without rows, to its worker, which computes them from the operator's state when
   it handles the frame (in order with every message it handled and sent before).
   With ``--writes worker`` a base is such a source too: the clients' writes reach
   its worker, not the controller, whose copy may lack writes whose output has left
   (it would drop them at the hole); the worker computes the rows from the base's
   own, less the writes it applied whose output waits for the base's log
   (``source_rows``' ``held``), which follows the fill.
3. Each worker on the chain passes the rows on, as its stateless node would (filter,
   projection, the sharder's part for the next node's shard), with ``fill`` frames on
   the same channels as the messages (direct links or the controller's relay, FIFO
   per edge), never through a domain: a fill has no time, no clock and no log.
4. The reader's worker fills each key that is still a hole with the rows and
   answers the controller (a ``rep`` to the upquery's request id), and the
   controller answers the read.

A miss without the controller (``--writes worker``, direct channels: the default
``auto`` takes the writes at the workers). The catalog change ``partial`` carries every
chain of the reader, and the reader's worker upqueries the holes a ``get`` or a
``read`` found itself (``Worker.direct_miss_many``, one upquery per reader shard):
its read thread hands the keys to the message thread, which answers from the reader
if they are held by now, else sends one ``fill`` frame of them up each chain to its
source, as the controller's step 2 does (no rows: the source
computes them when it handles the frame, a base at its worker in order with the
writes it takes), with a request id of its own (``DIRECT`` and below: never the
controller's, which are positive, nor ``EVICT`` or ``SIZES``); the fill travels the
chain as any other, and where it lands at the reader, it is applied as any other
(step 4) and answers the client on the read connection, sent by the message thread
at once. Why that is as right as the controller's path: the controller's lock
ordered its fill after the writes *it* took; with the writes at the workers the
order that matters is the base's worker's, which the fill meets there either way (a
write acknowledged before the miss has been applied there and its output sent
ahead of the fill on the same edge, so it is in the fill and dropped at the hole; one
whose output still waits for the log replica is left out and follows the fill). What
the controller checked per upquery moves to the worker, which falls back (answers the
hole, and the client asks the controller, as before) whenever it cannot know it:

- *the chain up and released*: a reader is ready for its worker's own upqueries only
  once the controller's upquery of it has found every node of its chains up and its
  workers past every ``release`` (the ping above), and said so in a ``direct_ok``
  frame on the worker's connection, sent under the runtime's lock; a loss declared
  after it is a ``lost`` frame behind it, which empties the ready set (so does each
  ``lost``: a recovery's ``release`` is known to be handled only by the controller);
- *a worker lost* (``lost``): every upquery of the worker's own on its way answers the
  hole at once (its fill may be lost, or held and dropped), as the controller's fail
  (``fail_upqueries``); a fill of one that lands later is not applied (nothing to
  undo: the key stays a hole, as a dropped fill leaves it); the client's upquery
  through the controller waits for the recovery;
- *a held operator lost* (``partial_clear``), *the reader made full again* (``full``,
  ``recheck``) or *dropped*: the same, for that reader; *the controller lost* while
  the writes go on (the gap: no loss can be declared): the same, for every reader;
- *a catalog change* (``pause``): no upquery of its own starts while the workers'
  writes are paused, and the pause is answered only once those on their way have
  landed, so ``recheck`` finds none in flight (it waits for the controller's);
- *the memory limit*: only while a key (the moving average of the bytes a key took at
  this worker's fills) fits the worker's share; else through the controller, which
  grants more (``_grant``); the worker reports its bytes after each fill either way;
- *no answer in* ``tuning.DIRECT_MISS_TIMEOUT`` seconds (a safety net: never waited
  out in a healthy cluster): the hole.

With ``--writes controller`` a base's fill must follow the writes the controller
accepted, which its worker may not have yet: every miss goes through the controller.

Why a fill never double-counts or misses a write (Noria's replay-path rule, with the
embedded engine's reasoning, partial.py rule 3): the fill leaves the source behind
everything the source sent before and ahead of everything it sends after, and every
edge of the chain is FIFO. A write the source had applied when it computed the fill
is in the fill, and reaches the reader before it (at the hole: dropped); one it
applies later reaches the reader after the fill, and is applied to the held key. A
fill for a key already held (two upqueries for one key, or a retry) is not applied:
the key's rows there are already the source's plus every later write, which the
fill's own rows would count again. A key evicted while a fill for it travels is
filled by it, which is right for the same reason.

Failures. Every upquery outstanding when any worker is lost fails at the controller
(``ClusterRuntime.fail_upqueries``), which waits for the chain to be up again and
upqueries again; so a fill is never needed after a loss, and is dropped wherever a
message would be held for a node being recovered (at a worker, at the relay, or
waiting for a lost worker's node to be placed again). It must not be held: a node of
its chain restored from a snapshot of its parent, or given replays regenerated from
logs, is at a new place in the stream, and a fill computed before the loss, released
behind those, would count again what they hold (a COUNT's old row left beside its
new one; seen in a soak before fills were dropped). A fill already past a node when
that node's worker is lost was handled in order with that worker's messages, or is
dropped with them at the fence. The first upquery of a chain after nodes were
released from a recovery pings the chain's workers first (answered once each has
handled the ``release`` sent before), so that a fresh fill is not dropped at a node
still held. A partial reader never checkpoints: on a spare it
comes back all holes, and each key is filled again when read (treeclock and lineage
alike).

Eviction through an aggregate or a join. The rule: *a node held partial holds a key
only while the held operator above it holds it, or while that operator's eviction of
it is on its way down to the node* (else a write to the key would stop above and
the node keep stale rows). So an eviction starts at the topmost held operator (the
vote view's COUNT, above its join; ``evict_path``) and travels down its chain like
a fill, each held operator below (the join) making the keys holes as it passes and
sending it on behind its own output: the reader's worker chooses the keys (its LRU, its share,
below) and sends them up (``WorkerPartial``: a ``fill`` frame with request id
``EVICT``, to the aggregate's node, on any channel); the aggregate makes them holes
and sends the eviction on to the reader on its output's channels, behind everything
it sent before; the reader lets them go when it arrives. A fill of the key that
passed the aggregate before (the key held, or filled there) reaches the reader
before the eviction, which then evicts it there too; one that passes after finds a
hole at the aggregate, fills it from the base's rows and reaches the reader behind
the eviction (FIFO per edge), so the order of fills and evictions is the
aggregate's at every node below it. Between the choice and the eviction's arrival
the keys are *leaving*: held (a hit still answers, as stale as a write in flight),
not chosen again, no longer counted against the share. A lost aggregate or join comes
back all holes: the controller asks the workers of its reader and of every operator
held with it to make every key a hole there (``partial_clear``) when it declares the
worker lost, before the recovery, and the chain's next fill follows the ping that
follows that request. A join's fill waiting for its other side when a worker is lost
is dropped (``Worker.lose``): its upquery failed, and is asked again. A reader lost
while its aggregate lives leaves the aggregate holding keys its reader no longer
does, until each is read and evicted again.

Eviction (``--memory-limit``): one limit for the whole cluster, in shares. Each worker
bounds by its *share* the bytes of the partial readers it hosts and of the operators
held with them, wherever those are (``partial.Partial``: the embedded engine's
accounting and least-recently-read order, on that worker): after a fill, after a
message to a partial reader and after a ``SIZES`` report, its oldest keys become
holes until they fit. The held operators' bytes are counted at their reader's
worker, because the keys are chosen there (the reads' order is the reader's): an
operator's worker measures the keys it fills, and with a limit the keys a message
to it touched, and sends the bytes that changed down the eviction's chain to the
reader's worker (a ``fill`` frame with request id ``SIZES``, ahead of the fill it
follows; ``Worker._report_sizes``), which keeps them per key and operator
(``WorkerPartial.above``, in ``total``) and takes a key's off with the reader's
own when it chooses the key. A report for a key the reader does not hold yet (its
fill waits at a join) is counted too: the operator holds it. So the bytes counted
over all workers are every partial node's, up to the reports on their way. The
controller deals the shares (``_grant``), and keeps two invariants:

- the shares add up to the limit at most, at every moment: a worker starts at 0 (the
  catalog change says only that there is a limit), a share taken from a worker is
  lowered there first (``req_share``: it evicts down to it before it answers) and
  only then added to another's, and a lost worker's share goes back to the pool (its
  keys died with it). So the bytes held over all workers never exceed the limit,
  except by the keys subscriptions pin (never evicted) and, for the length of one
  frame, by the batch a worker is applying before it evicts;
- shares follow the reads: before an upquery, if the reader's worker may not fit the
  keys asked (its bytes at its last report, ``["mem", bytes, keys, filled]`` after a
  fill, plus a key's bytes each), it takes at least 1/``SHARE_STEP`` of the limit:
  from the part no worker has, then from the unused part of other workers' shares,
  then half the difference from the worker with the largest share (a move from
  another worker, a round trip, only for half a step or more). Two workers read
  alike end with about equal shares; one whose keys are no longer read gives its
  bytes to the other.

Subscriptions: ``pin`` asks the reader's worker to keep the key (``req_pin``, answered
before the snapshot's read fills it) until ``unpin``; a failure that loses the
reader ends the subscription, as without a limit.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from ...batch import Batch
from ...errors import RecoveryError
from ...partial import (
    GROUPED,
    KEYED,
    Partial,
    join_positions,
    op_key,
    part_key,
    read_by_key,
    reader_columns,
    rows_for,
    through_project,
    trace,
)
from ...planner.initialize import initialize
from .errors import WorkerLost
from .wire import encode_batch

if TYPE_CHECKING:  # pragma: no cover
    from ...graph import Graph
    from ...ops.reader import Reader
    from .controller import ClusterRuntime, WorkerHandle

#: kinds of node a chain passes through (one parent; the key's rows keep their key)
THROUGH = ("filter", "project", "sharder")
#: kinds of node that answer an upquery for their key from their own state
SOURCES = ("base", "aggregate", "extremum", "join", "topk")
#: seconds an upquery waits for its reader's answer before it is sent again
FILL_TIMEOUT = 30.0
#: seconds a read of a hole waits for the chain's nodes to be recovered
RECOVERY_TIMEOUT = 60.0
#: a worker's share of the memory limit grows by at least this part of the limit (or
#: one key's bytes, if more) at a time: fewer moves, each a round trip to a donor
SHARE_STEP = 64

#: (the chain's node ids, source first, reader last; the key's columns at the source)
Chain = tuple[list[str], tuple[int, ...]]
#: (an aggregate held partial on a chain, its output columns holding the key)
Held = tuple[str, tuple[int, ...]]
#: kinds of operator a chain may pass through, held partial with its reader (grouped
#: or partitioned by exactly the key, or a DISTINCT, its one input leading up to a
#: base: ``chain_and_ops``); the join, held likewise, has two inputs
HELD = ("aggregate", "extremum", "topk", "distinct")
#: the request id of a ``fill`` frame that is an eviction (module docstring)
EVICT = -1
#: the request id of a ``fill`` frame carrying a held operator's bytes for some keys
#: down its chain to the reader's worker, which counts them (module docstring, Eviction)
SIZES = -2
#: the first request id of a worker's own upqueries (module docstring, A miss without
#: the controller), each next one lower: below ``SIZES``, never the controller's (> 0)
DIRECT = -3


def is_direct(rid: int) -> bool:
    """Whether request id ``rid`` is a worker's own upquery's (``DIRECT``)."""
    return rid <= DIRECT


def chain(graph: Graph, reader_id: str,
          allowed: set[str] | frozenset[str] = frozenset()) -> Chain | None:
    """The replay path of reader ``reader_id`` (module docstring), or None where the
    reader cannot be partial in a cluster, or where its key leads up several chains
    (a join held partial among ``allowed``: ``chain_and_ops``)."""
    found = chain_and_ops(graph, reader_id, allowed)
    return None if found is None or len(found[0]) != 1 else found[0][0]


def chain_and_ops(graph: Graph, reader_id: str, allowed: set[str] | frozenset[str]
                  ) -> tuple[list[Chain], list[Held]] | None:
    """The chains of reader ``reader_id`` (one per source, each from it to the reader),
    and the operators on them held partial with the reader (each with its output
    columns holding the key; the topmost first: evictions start there). An aggregate
    grouped by exactly the key, a TopK partitioned by exactly it, a DISTINCT, or a
    join on exactly the key, among ``allowed`` (new: no state yet), feeding this
    reader alone (every node from it down has one child), is held when its input
    leads up chains to bases (both inputs, for a join: two chains meet at it);
    otherwise it is the chain's source, kept full (a DISTINCT is no source: the
    reader is then full). Above a held aggregate, TopK or DISTINCT nothing more is
    held, and above a join at most one branch holds one (an eviction starts at one
    topmost node)."""
    node = graph[reader_id]
    reader = cast("Reader", node.op)
    if not read_by_key(reader) or len(node.parents) != 1:
        return None
    cols = reader_columns(reader)
    if cols is None:
        return None
    found = _up(graph, node.parents[0], cols, allowed, True, False)
    if found is None:
        return None
    chains, held = found
    return [(path + [reader_id], c) for path, c in chains], held


def _up(graph: Graph, nid: str, cols: tuple[int, ...], allowed: set[str] | frozenset[str],
        alone: bool, bases: bool) -> tuple[list[Chain], list[Held]] | None:
    """The chains from the sources of node ``nid``'s rows whose ``cols`` hold the key,
    each ending at ``nid``, and the operators held on them (``chain_and_ops``); None
    where there are none, or (``bases``: above a held operator) where one source is
    not a base."""
    seg: list[str] = []
    while True:
        n = graph[nid]
        op: Any = n.op
        kind = op.kind
        seg.append(nid)
        alone = alone and len(n.children) == 1
        if kind in SOURCES:
            # (a source of the key itself: grouped, joined or partitioned by exactly it)
            if trace(graph, nid, cols) != [(nid, cols)]:
                return None
            if kind != "base":
                above = (_held_up(graph, nid, cols, allowed)
                         if alone and nid in allowed else None)
                if above is not None:
                    chains, held = above
                    return ([(p + seg[::-1], c) for p, c in chains], held + [(nid, cols)])
                if bases:
                    return None
            return [(seg[::-1], cols)], []
        if kind == "distinct":          # (never a source: held, or the reader full)
            above = (_held_up(graph, nid, cols, allowed)
                     if alone and nid in allowed else None)
            if above is None:
                return None
            chains, held = above
            return ([(p + seg[::-1], c) for p, c in chains], held + [(nid, cols)])
        if kind not in THROUGH or len(n.parents) != 1:
            return None
        if kind == "project":
            projected = through_project(op, cols)
            if projected is None:
                return None
            cols = projected
        nid = n.parents[0]


def _held_up(graph: Graph, nid: str, cols: tuple[int, ...],
             allowed: set[str] | frozenset[str]) -> tuple[list[Chain], list[Held]] | None:
    """The chains above operator ``nid`` (its output ``cols`` holding the key) if it can
    be held partial: each ending at its parent (``_up``), from bases."""
    n = graph[nid]
    op: Any = n.op
    if op.kind in HELD and len(n.parents) == 1:
        # (a TopK's and a DISTINCT's rows are their input's: the key in the same columns)
        up = tuple(op.group_by[c] for c in cols) if op.kind in GROUPED else cols
        return _up(graph, n.parents[0], up, frozenset(), True, True)
    if op.kind != "join" or len(n.parents) != 2 or n.parents[0] == n.parents[1]:
        return None
    where = join_positions(op, cols)
    if where is None:
        return None
    left = _up(graph, n.parents[0], tuple(op.left_keys[w] for w in where), allowed,
               True, True)
    if left is None:
        return None
    right = _up(graph, n.parents[1], tuple(op.right_keys[w] for w in where),
                frozenset() if left[1] else allowed, True, True)
    if right is None:
        return None
    return left[0] + right[0], left[1] + right[1]


def evict_path(chains: list[Chain], held: list[Held]) -> list[str]:
    """The chain an eviction of the reader's keys takes: from the topmost operator held
    (the first of ``held``) down (module docstring, Eviction); with none held, the
    first chain (an eviction then stays at the reader)."""
    if not held:
        return chains[0][0]
    top = held[0][0]
    path = next(p for p, _ in chains if top in p)
    return path[path.index(top):]


def through_held(op: Any, cols: tuple[int, ...], key: tuple[Any, ...], batch: Batch) -> Batch:
    """What an aggregate, TopK or DISTINCT on a chain (``chain_and_ops``; its output
    columns ``cols`` hold the key) sends on for a fill of ``key`` whose rows reach it
    as ``batch``: a hole is filled with them (its group's row, window or distinct
    rows out); a key it holds (or every key, full) answers from its state, which
    already has every row the fill carries."""
    held = op_key(op, cols, key)
    if op.holes is not None and held not in op.holes:
        out: Batch = op.fill(held, batch)
        return out
    if op.kind in KEYED:
        rows: Batch = (op.key_rows(held) if op.holes is not None
                       else op.part_rows(part_key(op, cols, key)))
        return rows
    group: list[Any] = [None] * len(cols)
    for c, v in zip(cols, key):
        group[c] = v
    grouped: Batch = op.group_rows(tuple(group))
    return grouped


def step(graph: Graph, node_id: str, next_id: str, batch: Batch) -> Batch:
    """The rows node ``node_id`` (filter, projection, sharder) sends ``next_id`` for
    ``batch`` of its input (a fill passing through: its own ``process``)."""
    op: Any = graph[node_id].op
    if op.kind == "sharder":
        outs: list[Batch] = op.process(0, batch)
        return outs[cast(int, graph[next_id].shard)]
    out: Batch = op.process(0, batch)
    return out


def source_rows(graph: Graph, chain_ids: list[str], cols: tuple[int, ...],
                keys: list[tuple[Any, ...]], held: Sequence[Batch] = ()) -> list[Batch]:
    """Each key's rows, as the chain's source sends them to the next node: from its
    state, where it is (the controller for a base; its worker for a base with
    ``--writes worker``, and for any other source). ``held``: writes the source has
    applied but whose output it has not sent yet (a base's writes waiting for its log
    replica), left out: their output follows the fill, and is applied to the key."""
    out = [rows_for(graph, chain_ids[0], chain_ids[1], cols, k) for k in keys]
    return [before(b, cols, k, held) for b, k in zip(out, keys)] if held else out


def before(rows: Batch, cols: tuple[int, ...], key: tuple[Any, ...],
           writes: Sequence[Batch]) -> Batch:
    """A base's ``rows`` whose ``cols`` equal ``key`` (each row's count its sign) as
    they were before ``writes`` (applied after them, in order)."""
    counts: dict[tuple[Any, ...], int] = {}
    for r, s in zip(rows.rows, rows.signs):
        counts[r] = counts.get(r, 0) + s
    for b in writes:
        for r, s in zip(b.rows, b.signs):
            if tuple(r[c] for c in cols) == key:
                counts[r] = counts.get(r, 0) - s
    kept = [(r, n) for r, n in counts.items() if n]
    return Batch([r for r, _ in kept], [n for _, n in kept])


class ClusterPartial(Partial):
    """The controller's side (module docstring): which readers are partial, and
    upqueries. What a partial reader holds, and eviction, are on its worker."""

    def __init__(self, graph: Graph, runtime: ClusterRuntime, limit: int | None) -> None:
        super().__init__(graph, cast(Any, runtime), limit)
        self.cluster = runtime
        #: partial reader -> its chains (one per source; two meet at a join held)
        self.chains: dict[str, list[Chain]] = {}
        #: partial reader -> the aggregates on its chain held partial with it
        self.held: dict[str, list[Held]] = {}
        #: reader -> ``ClusterRuntime.releases`` when its chain's workers were last
        #: known to have handled every ``release`` sent them (``_upquery``)
        self.synced: dict[str, int] = {}
        #: with a limit: worker name -> its share of it (module docstring, Eviction);
        #: their sum never exceeds the limit, and a share is lowered at its worker
        #: (which evicts down to it before answering) before it is given to another
        self.shares: dict[str, int] = {}
        #: worker name -> (bytes, keys) its partial readers held at its last report
        self.seen: dict[str, tuple[int, int]] = {}
        #: worker name -> the bytes of a key its fills took, lately (a moving average)
        self.per_key: dict[str, int] = {}
        self.share_lock = threading.Lock()
        self.moves = 0              # shares moved from one worker to another

    def install(self, reader_id: str, fresh: set[str] | frozenset[str] = frozenset()) -> bool:
        """Make reader ``reader_id`` partial if it has a chain, with the aggregate on it
        that can be held partial too (``chain_and_ops``; only a new one, among
        ``fresh``): here (for ``graph()`` and the views), and on every worker
        (``["partial", node, limit, [[aggregate, its key columns]], chain]`` as a
        catalog change, before the reader is filled or sent anything; a spare that
        takes them over later has it too)."""
        found = chain_and_ops(self.graph, reader_id, fresh)
        if found is None:
            return False
        chains, held = found
        self.chains[reader_id] = chains
        self.held[reader_id] = held
        for nid in [reader_id] + [h for h, _ in held]:
            op: Any = self.graph[nid].op
            op.partial = True               # (the stand-in, and the plan's copy it wraps)
            getattr(op, "local", op).partial = True
        self.cluster.announce(("partial", reader_id, self.limit,
                               [[h, list(c)] for h, c in held], evict_path(chains, held),
                               [[path, list(c)] for path, c in chains]))
        return True

    def recheck(self) -> None:
        """After the graph grew (under the database lock): an aggregate or join held
        partial that now feeds another view too (an identical sub-plan, built once: it,
        or a node between it and the reader, has another child now) becomes full
        again, with every operator held with it, as embedded (noria_py/partial.py,
        rule 7). Once nothing is in flight (no
        message, no upquery), every worker makes it full and empty and its reader all
        holes (``["full", reader, [aggregate]]``, a catalog change); then it is filled
        from its input's full output and settled, as a new node is, and its reader's
        chain ends at it."""
        rt = self.cluster
        for reader_id, held in list(self.held.items()):
            ids = {nid for nid, _ in held}
            below = {n for path, _ in self.chains[reader_id]
                     for n in path[min((path.index(h) for h in ids if h in path),
                                       default=len(path)):-1]}
            if not any(len(self.graph[n].children) > 1 for n in below):
                continue                # (each from a held operator down feeds it alone)
            shared = [nid for nid, _ in held]   # (and those above it: full again together)
            rt.wait()
            deadline = time.monotonic() + FILL_TIMEOUT
            while rt.upqueries and time.monotonic() < deadline:
                time.sleep(0.005)       # (their fills are on their way: let them land)
            rt.announce(("full", reader_id, shared))
            for nid in shared:
                op: Any = self.graph[nid].op
                op.partial = False
                getattr(op, "local", op).partial = False
            self.chains[reader_id] = [cast(Chain, chain(self.graph, reader_id))]
            self.held[reader_id] = []
            initialize(self.graph, set(shared), rt.table)     # (a base's rows: its worker's)
            rt.settle(set(shared))

    def remove(self, reader_id: str) -> None:
        self.chains.pop(reader_id, None)
        self.held.pop(reader_id, None)
        self.synced.pop(reader_id, None)

    def pin(self, reader: Reader, key: Any) -> None:
        """A subscription to ``key`` of ``reader`` (its stand-in here): its worker keeps
        the key from eviction until ``unpin`` (asked and answered before the
        subscription's snapshot fills it)."""
        if self.limit is not None:
            node_id = cast(Any, reader).node_id
            self.cluster.call(node_id, "pin", key, True)

    def unpin(self, reader: Reader, key: Any) -> None:
        if self.limit is not None:
            node_id = cast(Any, reader).node_id
            try:
                self.cluster.request(self.cluster.worker_of(node_id), "pin", node_id, key,
                                     False)     # (not waited for)
            except WorkerLost:
                pass                # (its reader's keys, pins included, died with it)

    def evict(self) -> None:
        """Eviction is the workers' (module docstring)."""

    def held_bytes(self) -> int:
        return 0

    # ------------------------------------------------------------ one limit, shared

    def reported(self, worker: str, held: Any, keys: Any, filled: Any) -> None:
        """Worker ``worker``'s partial readers hold ``held`` bytes in ``keys`` keys, and
        the keys a fill just filled took ``filled`` bytes before its eviction (its
        ``["mem", ...]`` frame after a fill)."""
        if not (type(held) is int and type(keys) is int and type(filled) is int):
            return
        with self.share_lock:
            per_key = self.per_key.get(worker, 0)
            if filled:
                per_key = filled if not per_key else (3 * per_key + filled) // 4
            self.seen[worker] = (held, keys)
            self.per_key[worker] = per_key

    def worker_lost(self, worker: str, nodes: list[str] | None = None) -> None:
        """Its readers' keys died with it: its share goes back to the pool. A partial
        aggregate or join among its ``nodes`` comes back all holes, so its reader's keys
        become holes too, and so do those of every operator held with it (asked of
        their workers now, before the recovery: each handles it before the ping that
        precedes the chain's next fill, and the lost operator sends nothing for any key
        until a fill)."""
        rt = self.cluster
        lost = set(nodes or ())
        for reader_id, held in self.held.items():
            if not any(h in lost for h, _ in held):
                continue
            hosts = {rt.placement.get(n, "") for n in [reader_id] + [h for h, _ in held]
                     if n not in lost}
            for name in hosts:      # (the reader and every operator held with it)
                w = rt.workers.get(name)
                if w is not None and w.alive:
                    try:
                        rt.request(w, "partial_clear", reader_id)     # (not waited for)
                    except WorkerLost:
                        pass
        with self.share_lock:
            self.shares.pop(worker, None)
            self.seen.pop(worker, None)
            self.per_key.pop(worker, None)

    def _grant(self, w: WorkerHandle, n: int) -> None:
        """Before a fill of ``n`` keys at worker ``w``'s reader (under the database
        lock: one at a time): if they may not fit its share, it takes more, from the
        part of the limit no worker has, then from the unused part of other workers'
        shares, then half the difference from a worker with a larger share (module
        docstring, Eviction). A donor's share is lowered first (it evicts down to it
        and answers), then ``w``'s raised: the shares' sum never exceeds the limit."""
        limit = self.limit
        if limit is None:
            return
        rt = self.cluster
        with self.share_lock:
            share = self.shares.get(w.name, 0)
            held, _ = self.seen.get(w.name, (0, 0))
            per_key = self.per_key.get(w.name) or limit // SHARE_STEP
            step = max(limit // SHARE_STEP, per_key, 1)
            want = held + n * per_key - share
            if want <= 0:
                return
            want = max(want, step)
            got = min(want, limit - sum(self.shares.values()))
            others = [(s - self.seen.get(d, (0, 0))[0], d) for d, s in self.shares.items()
                      if d != w.name]
        plan: dict[str, int] = {}       # donor -> bytes to take from its share
        for idle, d in sorted(others, reverse=True):       # the unused parts first
            short = want - got - sum(plan.values())
            if short <= 0 or idle < step // 2:
                break                   # (less is not worth a round trip to the donor)
            plan[d] = min(idle, short)
        short = want - got - sum(plan.values())
        if short > 0 and others:        # then half the gap to the largest share
            big, d = max((s, d) for d, s in ((d, self.shares.get(d, 0)) for _, d in others))
            half = (big - share - got - sum(plan.values())) // 2
            if half >= step // 2 and d not in plan:
                plan[d] = min(half, short)
        for d, take in plan.items():
            donor = rt.workers.get(d)
            if donor is None:
                continue
            with self.share_lock:
                new = self.shares.get(d, 0) - take
            if new < 0:
                continue
            try:
                answer = rt.ask(donor, "share", new, timeout=FILL_TIMEOUT)
            except (WorkerLost, TimeoutError):
                continue            # (lost: its share is back in the pool, for later)
            with self.share_lock:
                if d in self.shares:
                    self.shares[d] = new
                    self.seen[d] = (int(answer[0]), int(answer[1]))
                    got += take
                    self.moves += 1
        if got <= 0:
            return
        with self.share_lock:
            if not w.alive:
                return
            self.shares[w.name] = share + got
        try:
            rt.request(w, "share", share + got)     # (not waited for)
        except WorkerLost:
            self.worker_lost(w.name)

    def usage(self) -> dict[str, list[int]]:
        """Per worker hosting partial readers: [bytes counted against its share (its
        readers' and the operators' held with them), keys held, share, evictions, bytes
        of the partial nodes it hosts by their own accounting, keys leaving] (asked of
        each: ``Worker.req_share``; for tests and figures)."""
        rt = self.cluster
        with rt.lock:
            active = list(rt.active)
        asked = [(w.name, rt.request(w, "share", None)) for w in active]
        return {name: [int(x) for x in fut.result(FILL_TIMEOUT)] for name, fut in asked}

    def fill(self, reader_id: str, keys: list[Any]) -> list[list[tuple[Any, ...]]]:
        """Upqueries for ``keys`` (as ``Reader.lookup`` takes them) of the partial
        reader ``reader_id``: their rows, which the reader then holds. A worker lost
        meanwhile: once the chain is up again, upqueried again."""
        rt = self.cluster
        chains = self.chains[reader_id]
        tuples = _tuples(keys)
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        while True:
            try:
                return self._answer(reader_id, *self._send(reader_id, chains, tuples))
            except WorkerLost as e:
                left = deadline - time.monotonic()
                control: Any = rt.control
                if control is not None and control._is_owned():
                    raise           # (recovery needs the lock this thread holds: the
                                    # caller's, which retries once it is let go)
                if left <= 0:
                    raise RecoveryError(f"an upquery of view {self.graph[reader_id].view!r} "
                                        f"found its path down for over {RECOVERY_TIMEOUT:.0f} "
                                        f"s ({e})") from None
                for n in {n for path, _ in chains for n in path}:
                    rt.wait_up(n, left)
                time.sleep(0.01)

    def fill_all(self, asks: list[tuple[str, list[Any]]]) -> list[list[list[tuple[Any, ...]]]]:
        """``fill`` of each ``(reader_id, keys)`` (a ``lookup_many``'s reader shards),
        every upquery sent before the first answer is waited for: their fills travel
        the chains together. One that fails (a worker lost, a node down) is asked
        again as ``fill`` asks (a fill for a key held meanwhile is not applied: never
        counted twice)."""
        sent: list[tuple[int, Future[Any]] | None] = []
        for reader_id, keys in asks:
            try:
                sent.append(self._send(reader_id, self.chains[reader_id], _tuples(keys)))
            except WorkerLost:
                sent.append(None)
        out = []
        for (reader_id, keys), one in zip(asks, sent):
            rows = None
            if one is not None:
                try:
                    rows = self._answer(reader_id, *one)
                except WorkerLost:
                    pass
            out.append(self.fill(reader_id, keys) if rows is None else rows)
        return out

    def _send(self, reader_id: str, chains: list[Chain],
              keys: list[tuple[Any, ...]]) -> tuple[int, Future[Any]]:
        """An upquery of ``keys`` sent up ``chains``: its request id, and the future
        its reader's worker's answer sets (``_answer``)."""
        rt = self.cluster
        nodes = [n for path, _ in chains for n in path]
        # in order with the writes the controller takes (--writes controller); with
        # --writes worker the base's worker orders the fill after its writes
        with rt.control or threading.RLock():
            with rt.lock:
                down = [n for n in nodes if n not in rt.up]
            if down:
                raise WorkerLost(f"node {down[0]} is down until its recovery")
            if rt.releases != self.synced.get(reader_id, 0):
                # nodes recovered since the last upquery: their workers handle the
                # ``release`` first (a ping behind it is answered after it), else this
                # fill could reach one that still holds its messages, and be dropped
                synced = rt.releases
                for w in {rt.worker_of(n).name: rt.worker_of(n) for n in nodes}.values():
                    rt.ask(w, "ping", timeout=FILL_TIMEOUT)
                self.synced[reader_id] = synced
            at = rt.worker_of(reader_id)
            self._grant(at, len(keys))
            rid, fut = rt.expect_upquery(at)
            for path, cols in chains:       # (one fill a chain: they meet at a join)
                batches = None
                if self.graph[path[0]].kind == "base" and not rt.at_workers:
                    # (its rows are here; with --writes worker, at its worker, which
                    # computes them in order with the writes it takes: Worker._fill)
                    batches = [encode_batch(b)
                               for b in source_rows(self.graph, path, cols, keys)]
                rt.worker_of(path[0]).put(["fill", path[0], ["", rid, path,
                                                             [list(k) for k in keys],
                                                             list(cols), batches]])
            if rt.at_workers and rt.direct:
                with rt.lock:           # (no loss declared since the check: module
                    # docstring, A miss without the controller; any later ``lost``
                    # frame follows this one on the worker's connection)
                    if at.alive and rt.releases == self.synced.get(reader_id, 0) \
                            and all(n in rt.up for n in nodes):
                        at.put(["direct_ok", reader_id])
        self.upqueries += len(keys)
        return rid, fut

    def _answer(self, reader_id: str, rid: int,
                fut: Future[Any]) -> list[list[tuple[Any, ...]]]:
        """The rows of upquery ``rid`` (``_send``), once its reader answers."""
        rt = self.cluster
        try:
            out = fut.result(FILL_TIMEOUT)
        except TimeoutError:
            rt.forget_upquery(rid)
            raise WorkerLost(f"no answer to an upquery of {reader_id} in "
                             f"{FILL_TIMEOUT:.0f} s") from None
        return [[tuple(r) for r in rows] for rows in out]

    def all_rows(self, reader_id: str) -> list[tuple[Any, ...]]:
        """Every row of the reader's view shard, computed from the chain's source's whole
        output (nothing is filled)."""
        chains = self.chains[reader_id]
        held = dict(self.held.get(reader_id, ()))
        sources = {path[0]: cols for path, cols in chains}
        below = {a: b for path, _ in chains for a, b in zip(path, path[1:])}

        def output(nid: str) -> Batch:
            """What ``nid`` sends the next node of its chain, for every key."""
            op: Any = self.graph[nid].op
            if nid in sources:
                out: Batch = (op.index_rows(sources[nid], None) if op.kind == "base"
                              else op.snapshot())
                return out
            parents = self.graph[nid].parents
            if nid in held:             # (computed by a full copy: nothing is filled)
                out = getattr(op, "local").computed(*[output(p) for p in parents])
                return out
            return step(self.graph, nid, below[nid], output(parents[0]))

        batch = output(self.graph[reader_id].parents[0])
        op: Any = self.graph[reader_id].op
        reader = getattr(op, "local", op)
        if reader.select is not None:
            batch = reader.select.process(0, batch)
        out: list[tuple[Any, ...]] = []
        for r, s in zip(batch.rows, batch.signs):
            out.extend([r] * s)
        rows: list[tuple[Any, ...]] = reader._finish(out)
        return rows


def _tuples(keys: list[Any]) -> list[tuple[Any, ...]]:
    """Keys as ``Reader.lookup`` takes them, as tuples (one column's bare)."""
    return [k if type(k) is tuple else (k,) for k in keys]


class Fill:
    """A ``fill`` frame on its way to node ``dst`` (a worker's inbox, holding and
    release treat it as a message from node ``src``, the chain's node before it; ""
    for the controller): ``body`` is ``[src, request id, chain, keys, source's key
    columns, each key's rows encoded or None]``."""

    __slots__ = ("dst", "src", "body")

    def __init__(self, dst: str, body: Any) -> None:
        self.dst = dst
        self.body = body
        self.src = str(body[0])


class WorkerPartial(Partial):
    """A worker's side: its partial readers' keys, their accounting and eviction (the
    embedded manager's, within this worker's share), where a reader whose chain holds
    an aggregate partial evicts through it (module docstring, Eviction through an
    aggregate): the keys chosen are sent up to the aggregate (``["fill", aggregate,
    [reader, EVICT, path, keys, [], None]]``), which makes them holes and sends the
    eviction down its output's channels, behind what it sent before; the reader lets
    them go when it arrives (``evicted``). Meanwhile they are *leaving*: held,
    answered, written, but no longer counted against the share (their bytes at the
    choice), and not chosen again."""

    def __init__(self, graph: Graph, runtime: Any, limit: int | None,
                 send_up: Any) -> None:
        super().__init__(graph, runtime, limit)
        #: reader id -> (the aggregate held with it, the chain from it to the reader)
        self.upstream: dict[str, tuple[str, list[str]]] = {}
        self.reader_ids: dict[Reader, str] = {}     # (the readers of ``upstream``)
        #: reader id -> leaving key -> the bytes subtracted from ``total`` at the choice
        self.leaving: dict[str, dict[Any, int]] = {}
        self._chosen: dict[str, list[Any]] | None = None
        self.send_up = send_up
        #: the manager of the operators held partial here: their bytes are counted at
        #: their readers' workers (``above``, from ``SIZES`` frames), a loss passed on
        #: to the reader
        self.ops = _Uncounted(self)
        #: reader id (hosted here) -> key -> held operator -> the bytes it holds for
        #: the key, as last reported (``sized``); counted in ``total`` but for the
        #: keys leaving (taken off at the choice with the reader's own)
        self.above: dict[str, dict[Any, dict[str, int]]] = {}

    def fixed_bytes(self) -> int:
        """Nothing: in a cluster the shares of the limit are of the keys' bytes (what
        each worker reports, ``mem``), the slot maps not counted (docs/partial.md)."""
        return 0

    def _evict(self, reader: Reader, key: Any) -> int:
        up = self._upstream_of(reader) if self._chosen is not None else None
        if up is None:
            return super()._evict(reader, key)
        rid, _ = up
        leaving = self.leaving.setdefault(rid, {})
        if key in leaving:
            return 0                    # (chosen before: on its way)
        size = int(reader.filled.get(key, 0))
        leaving[key] = size
        cast("dict[str, list[Any]]", self._chosen).setdefault(rid, []).append(key)
        return size + self.above_of(rid, key)

    def above_of(self, reader_id: str, key: Any) -> int:
        """The bytes the operators held with reader ``reader_id`` hold for ``key``."""
        return sum(self.above.get(reader_id, {}).get(key, {}).values())

    def sized(self, reader_id: str, op_id: str, keys: list[Any], sizes: list[Any]) -> None:
        """Operator ``op_id`` held with reader ``reader_id`` holds ``sizes`` bytes for
        ``keys`` (a ``SIZES`` frame, after a fill or a write there): counted here, where
        its reader's keys are chosen for eviction, so that a worker's share bounds its
        readers and the operators above them together. A key not held here yet (its
        fill on its way) is counted too: the operator holds it."""
        if reader_id not in self.paths:
            return
        above = self.above.setdefault(reader_id, {})
        leaving = self.leaving.get(reader_id, {})
        for k, size in zip(keys, sizes):
            key = k[0] if len(k) == 1 else tuple(k)
            entry = above.setdefault(key, {})
            old = entry.get(op_id, 0)
            entry[op_id] = int(size)
            if key not in leaving:
                self.total += int(size) - old

    def _drop_above(self, reader_id: str) -> None:
        """The operators held with reader ``reader_id`` hold none of its keys any more
        (lost, made full, dropped): their bytes are no longer counted."""
        leaving = self.leaving.get(reader_id, {})
        for key, entry in self.above.pop(reader_id, {}).items():
            if key not in leaving:
                self.total -= sum(entry.values())

    def hosted(self, op_ids: list[str]) -> int:
        """The bytes the partial readers and the operators ``op_ids`` hosted here hold,
        each by its own accounting (tests: what ``total`` must bound, over workers)."""
        out = 0
        for nid in [*self.paths, *op_ids]:
            op: Any = self.graph[nid].op
            holes = getattr(op, "holes", None)
            if holes is not None and nid in self.runtime.domains:
                out += int(holes._size[:holes._top].sum())
        return out

    def _upstream_of(self, reader: Reader) -> tuple[str, tuple[str, list[str]]] | None:
        rid = self.reader_ids.get(reader)
        if rid is None:
            return None
        return rid, self.upstream[rid]

    def hold(self, reader_id: str, aggregate: str, path: list[str]) -> None:
        """Reader ``reader_id``'s chain ``path`` holds ``aggregate`` partial: its
        evictions go through it."""
        self.upstream[reader_id] = (aggregate, path[path.index(aggregate):])
        self.reader_ids[cast("Reader", self.graph[reader_id].op)] = reader_id

    def release_held(self, reader_id: str) -> None:
        """Reader ``reader_id`` has no aggregate held with it any more (made full, its
        keys already holes; or the view dropped): its keys leaving are forgotten."""
        if self.upstream.pop(reader_id, None) is not None:
            self.reader_ids = {r: i for r, i in self.reader_ids.items() if i != reader_id}
        self._drop_above(reader_id)
        self.leaving.pop(reader_id, None)

    def _oldest(self) -> list[tuple[int, Reader, int]]:
        """The embedded choice, less the keys leaving (chosen before, on their way)."""
        if not any(self.leaving.values()):
            return super()._oldest()
        out = []
        for stamp, reader, slot in super()._oldest():
            up = self._upstream_of(reader)
            if up is None or reader.holes.key_at(slot) not in self.leaving.get(up[0], ()):
                out.append((stamp, reader, slot))
        return out

    def evict(self) -> None:
        """The embedded eviction; the keys chosen of a reader with an aggregate above
        are sent up to it (the class docstring)."""
        self._chosen = {}
        try:
            super().evict()
        finally:
            chosen, self._chosen = self._chosen, None
        for rid, keys in chosen.items():
            agg, path = self.upstream[rid]
            self.send_up(agg, ["fill", agg, [rid, EVICT, path,
                                             [list(k) if type(k) is tuple else [k]
                                              for k in keys], [], None]])

    def evicted(self, reader_id: str, keys: list[Any]) -> None:
        """The eviction through the aggregate reached reader ``reader_id``: ``keys``
        become holes there."""
        reader = cast("Reader", self.graph[reader_id].op)
        leaving = self.leaving.get(reader_id, {})
        above = self.above.get(reader_id, {})
        for k in keys:
            key = k[0] if len(k) == 1 else tuple(k)
            chosen = key in leaving     # (its bytes taken off at the choice)
            size = leaving.pop(key, 0)
            if key in reader.filled:
                self.total -= reader.evict(key) - size
            entry = above.pop(key, None)    # (gone above it now)
            if entry and not chosen:
                self.total -= sum(entry.values())

    def lost(self, reader: Reader) -> None:
        up = self._upstream_of(reader)
        if up is not None:              # (their bytes were taken off at the choice)
            self._drop_above(up[0])
            self.total += sum(self.leaving.pop(up[0], {}).values())
        super().lost(reader)


class _Uncounted:
    """The manager the operators held partial on a worker keep their holes with
    (``WorkerPartial.ops``): their bytes are not counted here but at their readers'
    workers (``SIZES`` frames: with a limit, each marks the keys a write touched, and
    the worker measures them after the message: ``Worker._report_sizes``), and a loss
    of one empties its reader where it is hosted here (elsewhere the controller asks
    its worker: ``ClusterPartial.worker_lost``)."""

    def __init__(self, manager: WorkerPartial) -> None:
        self.manager = manager
        self.stale = False

    @property
    def limit(self) -> int | None:
        """The worker's (None: no limit, nothing is measured after a write)."""
        return self.manager.limit

    def resize(self, old: int, new: int) -> None:
        """Not counted."""

    def lost(self, reader: Reader) -> None:
        if reader is not None and getattr(reader, "holes", None) is not None:
            self.manager.lost(reader)
