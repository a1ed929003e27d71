"""A domain shard: one node's operator and its state, handling one message at a time.

Noria groups several operators into one domain; here each node shard is its own
domain, which keeps recovery per node (a failed node is exactly one domain) at the
cost of a queue hop per operator, negligible next to batches of hundreds of rows.

With tree clocks on, a domain also keeps what Yuan's recovery protocol needs:
its clock, a diff log (one diff per message received; each diff is built as its
path, a small tuple, and written into the log's array and merged into the clock
in bulk, whenever either is read (a checkpoint reads the clock), and at an
acknowledgement once 64 have piled up unless the node checkpoints; a base keeps none,
its clock being its time alone), a payload log per outgoing
edge (every message it sent, by reference: batches are immutable; none to a reader
that does not checkpoint, since recovery then rebuilds it from this node's state), and
the times it last saw from each parent. Every processed message yields a message to every child,
empty if need be, so that each child's diff log records every one of this node's
times: recovery then knows exactly which input was processed at which time
(docs/recovery.md explains why that matters).

With checkpoints on, a stateful domain (readers included, but in the tree-clock
regime not a reader over stateful parents nor a join over stateful parents or bases,
which are rebuilt from them: ``checkpoints.rebuilt_from_parents``) also checkpoints
its state into a store outside it (``checkpoints.py``), on its own schedule, and
remembers its recent checkpoints' times and parent-times: a parent's payload log to
it is trimmed no further than its stable checkpoint, so recovery can replay from
there. The stable
checkpoint is the newest its children have all passed (``on_progress``); for a node
without children (a reader), whose recovery starts from its newest checkpoint, the
newest: its acknowledgements carry that checkpoint's parent-time as the level its
parent may trim its log to it (``progress_report``), instead of its last-seen time.
Every checkpointing node acknowledges no further than its stable checkpoint (its
parent-times and its clock as of then, which the checkpoint keeps), and its messages
carry a low mark no higher than that checkpoint's time: a parent failed together with
it can then restart where the checkpoint stands (``recovery/treeclock.py``).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from treeclock import DiffLog, TreeClocks, receive_path

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError, UnknownNodeError
from ..graph import Graph, Node
from ..tuning import CLOCK_DEPTH, COMPACT_AT, FLUSH_EVERY
from . import checkpoints
from .checkpoints import Checkpoint, Sink
from .messages import Message

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypeAlias

    from treeclock import PathEdge

    #: per child: its id, its shard, this node's payload log to it (see ``_out_edges``)
    OutEdge: TypeAlias = tuple[str, int | None, deque[Message] | None]
    #: per parent B: its id and the clock position of each (self, B, A) path, by A's id
    ReportPlan: TypeAlias = tuple[str, tuple[tuple[str, int], ...]]
    #: per parent B: B, this node's time on B's last message, its clock's entry per
    #: (self, B, A) path by A's id, and how far B may trim its log to it (or None)
    Report: TypeAlias = tuple[str, int, dict[str, int], int | None]


def graph_clocks(graph: Graph, previous: TreeClocks | None = None) -> TreeClocks:
    """The tree clocks of ``graph`` as it stands, at the engine's depth
    (``tuning.CLOCK_DEPTH``); ``previous``, the clocks before the graph changed, whose
    layouts the nodes already there keep (their upstream paths are unchanged)."""
    return TreeClocks(graph.parents_by_num(), CLOCK_DEPTH, previous=previous)


class DomainInfo(NamedTuple):
    alive: bool
    time: int
    last_seen: dict[str, int]
    clock: np.ndarray | None
    log_rows: np.ndarray | None      # the summary of compacted diffs, then the diffs
    diff_rows: np.ndarray | None


class Domain:
    def __init__(self, graph: Graph, node: Node) -> None:
        self.graph = graph
        self.node = node
        self.time = 0                 # messages received so far
        self.alive = True
        self.ports = {p: i for i, p in enumerate(node.parents)}
        self.last_seen: dict[str, int] = {}   # parent -> its time on the last message taken
        self.tc: TreeClocks | None = None
        #: where this node checkpoints (None: it does not, being stateless, or in a
        #: runtime with checkpoints off); see ``use_checkpoints``
        self.store: Sink | None = None
        #: whether the runtime checkpoints (then this node logs what it sends a reader)
        self.checkpointing = False
        #: the kinds of node (readers, joins) rebuilt from their parents instead of
        #: checkpointing where they can be (``use_checkpoints``)
        self.rebuilt: Collection[str] = ()
        self.ck_inputs: list[tuple[int, Batch]] | None = None
        self.reset_clock_state()

    @property
    def id(self) -> str:
        return self.node.id

    # ------------------------------------------------------------ tree-clock state

    def reset_clock_state(self) -> None:
        self.edges: dict[str | None, PathEdge] = {}  # parent -> tc.path_edge(...), filled lazily
        self._clock: np.ndarray | None = None
        self._diffs: DiffLog | None = None
        self.pending: list[int] = []    # diffs not yet applied, as paths one after another
        self.compact_at = COMPACT_AT    # compact the diff log when it holds this many
        self.summary: np.ndarray | None = None   # merge of the diffs compacted away
        self.last_diff: tuple[int, ...] | None = None   # as a path (treeclock.receive_path)
        self.payload: dict[str, deque[Message]] = {}
        self.out_edges: list[OutEdge] | None = None   # emit's (child, shard, payload log)
        self.out_version = -1
        self.progress: dict[str, tuple[int, dict[str, int]]] = {}  # child -> acked times
        self.parent_low: dict[str, int] = {}
        self.low = 0
        #: the low mark this node's messages carry, below which its children fold
        #: their diffs of it away: ``low``, or its stable checkpoint's time if lower
        #: (``_stable_checkpoint``)
        self.sent_low = 0
        self.unacked = 0
        self.report_plan: list[ReportPlan] | None = None   # progress_report's clock positions
        #: (stable checkpoint's parent-times, plan, report): the report as of that
        #: checkpoint, handed out again until another becomes stable (``progress_report``)
        self.report_memo: tuple[dict[str, int], list[ReportPlan], list[Report]] | None = None
        self.reset_checkpoint_state()

    # ------------------------------------------------------------ checkpoints

    def use_checkpoints(self, store: Sink | None, rebuilt: Collection[str] = ()) -> None:
        """Checkpoint into ``store`` from now on (a stateful node, readers included;
        None turns it off), and keep payload logs to readers, which then recover from
        their checkpoints. ``rebuilt`` (the tree-clock regime's runtimes: the embedded
        one's readers and joins, a cluster's readers): a reader over stateful parents,
        or a join over stateful parents or bases (``checkpoints.rebuilt_from_parents``),
        of those kinds takes none, and this node keeps no log to such a reader: each
        is rebuilt from its parents."""
        form = self.node.op.checkpoint_form
        self.checkpointing = store is not None
        self.rebuilt = rebuilt
        if checkpoints.rebuilt_from_parents(self.graph, self.node, rebuilt):
            store = None
        self.out_edges = None
        self.store = store if form is not None else None
        self.node.op.tracking = self.store is not None
        self.reset_checkpoint_state()

    def reset_checkpoint_state(self) -> None:
        """What this node knows of its own checkpoints (lost in a crash: the store
        keeps the checkpoints themselves)."""
        #: "input" form: (port, batch) taken since the last checkpoint
        self.ck_inputs = ([] if self.store is not None and self.node.op.checkpoint_form == "input"
                          else None)
        self.ck_messages = 0            # messages and rows taken since the last checkpoint
        #: (parent, time): checkpoint once this node has taken that parent's messages up
        #: to that time (``parent_restarted``)
        self.ck_wanted: tuple[str, int] | None = None
        self.ck_rows = 0
        #: (time, parent-times, clock) of this node's checkpoints above the newest
        #: stable one
        self.ck_recent: list[tuple[int, dict[str, int], np.ndarray | None]] = []
        #: parent-times of the newest checkpoint at or below the low mark (None: none
        #: yet), its time and its clock (None: not known)
        self.ck_stable: dict[str, int] | None = None
        self.ck_stable_time = 0
        self.ck_stable_clock: np.ndarray | None = None

    def checkpoint_due(self) -> bool:
        messages, rows = checkpoints.interval(self.node.op)
        return self.ck_messages >= messages or self.ck_rows >= rows

    def checkpoint(self) -> None:
        """Hand the store what changed since the last checkpoint (everything, if it
        holds none of this node), tagged with this node's time and parent-times."""
        store = self.store
        if store is None:
            return
        op = self.node.op
        clock = self.clock
        clock = None if clock is None else clock.copy()
        if store.takes():
            full = not store.has(self.id)
            change = checkpoints.delta(op, full, self.ck_inputs or [])
            store.put(self.id, self.time, self.last_seen, cast(str, op.checkpoint_form),
                      change, full, self.recovery_floor(), clock=clock)
        # (else kept nowhere: not computed, the next one whole; recorded all the same,
        # so its parents' logs are trimmed as if it were: a recovery finds no
        # checkpoint of it then, and rebuilds it)
        if self.ck_inputs is not None:
            self.ck_inputs = []
        self.ck_messages = self.ck_rows = 0
        self.ck_wanted = None
        self.ck_recent.append((self.time, dict(self.last_seen), clock))
        self._stable_checkpoint()

    def adopt_checkpoint(self) -> None:
        """This new node was filled from the checkpoint the store holds of it (read from
        disk, ``ondisk.py``) and has settled: that checkpoint is its first, as of now,
        as the whole one a node filled from its parents takes (``EmbeddedRuntime.settle``)."""
        store = cast(checkpoints.CheckpointStore, self.store)
        clock = self.clock
        clock = None if clock is None else clock.copy()
        store.retag(self.id, self.time, self.last_seen, clock)
        self.ck_messages = self.ck_rows = 0
        self.ck_recent.append((self.time, dict(self.last_seen), clock))
        self._stable_checkpoint()

    def parent_restarted(self, parent: str, log_from: int) -> bool:
        """``parent`` has come back (restored from its checkpoint or its write history)
        with a payload log to this node that starts after its time ``log_from``: a
        checkpoint of this node reflecting less of ``parent`` than that can no longer be
        caught up from the log. If this node's newest is one such, it takes one now
        (its last-seen time of ``parent`` is at least ``log_from``: a live child had
        taken everything the restart regenerates from), a delta from the last, so that
        its next recovery starts from a checkpoint instead of a rebuild from its parents.
        The decision is this node's own, from what it knows of its checkpoints; returns
        whether it took one. (A grandchild told of its grandparent's restart is told
        ``parent``'s time now, which it may not have taken yet, its messages in flight:
        it then checkpoints once it has, ``ck_wanted``.)"""
        if self.store is None or not self.alive:
            return False
        newest = self.ck_recent[-1][1] if self.ck_recent else self.ck_stable
        if newest is not None and newest.get(parent, 0) >= log_from:
            return False
        if self.last_seen.get(parent, 0) < log_from:
            self.ck_wanted = (parent, log_from)
            return False
        self.checkpoint()
        return True

    def recovery_floor(self) -> int:
        """No recovery of this node starts below this time: its low mark, or, for a
        node without children (a reader), its own time (nothing downstream pins its
        times: its recovery starts from its newest checkpoint)."""
        return self.low if self.node.children else self.time

    def _stable_checkpoint(self) -> None:
        """The newest checkpoint at or below the recovery floor becomes the stable one:
        no recovery of this node starts below it."""
        recent = self.ck_recent
        floor = self.recovery_floor()
        while recent and recent[0][0] <= floor:
            self.ck_stable_time, self.ck_stable, self.ck_stable_clock = recent.pop(0)
        self.sent_low = min(self.low, self.ck_stable_time)

    def restore_state(self, checkpoint: Checkpoint | None, inputs: list[tuple[int, Batch]]) -> None:
        """Fill this (empty, restarting) node: from ``checkpoint`` then ``inputs`` (what
        its parents sent it since), or from ``inputs`` alone (its whole input, rebuilt
        from its parents). The checkpoints after the one used are forgotten (the node may
        take another path from here), and ``inputs`` go into the next; without one
        used, all of them, and a whole one is taken of the rebuilt state."""
        op = self.node.op
        store = self.store
        if checkpoint is not None:
            checkpoints.load(op, checkpoint)
            if store is not None:
                store.keep_upto(self.id, checkpoint.time)
            self.ck_stable = dict(checkpoint.parent_times)
            self.ck_stable_time, self.ck_stable_clock = checkpoint.time, checkpoint.clock
        elif store is not None:
            store.drop(self.id)
        since = self.ck_inputs if checkpoint is not None else None
        for port, batch in joined_runs(inputs) if op.inputs_join else inputs:
            op.process(port, batch)
            if since is not None:
                since.append((port, op.taken(port, batch)))
        if checkpoint is None and store is not None:
            # rebuilt: a whole checkpoint now (as a new node takes one when filled), or
            # every failure until the next one is due would be a rebuild again
            self.checkpoint()

    def attach_clocks(self, tc: "TreeClocks | None") -> None:
        """Use ``tc`` (rebuilt by the runtime whenever the graph grows)."""
        self.tc = tc
        self.edges = {}                           # parent -> tc.path_edge(...), filled lazily
        self.out_edges = None                     # whether emit logs may have changed
        if tc is not None and self._clock is None:
            num = self.node.num
            self._clock = tc.zero(num)
            self._clock[0] = self.time
            self._diffs = tc.new_log(num)
            self.summary = tc.zero(num)
            self.pending = []
        if tc is not None:
            self.flush_len = FLUSH_EVERY * (tc.depth + 2)
        self.report_plan = None

    @property
    def clock(self) -> np.ndarray | None:
        if self.pending:
            self.flush()
        elif not self.node.parents and self._clock is not None:
            self._clock[0] = self.time      # a base's clock is its time alone
        return self._clock

    @property
    def diffs(self) -> DiffLog | None:
        if self.pending:
            self.flush()
        return self._diffs

    def flush(self) -> None:
        """Apply the diffs built since the last flush to the log and the clock."""
        # diffs are pending only with clocks on, when attach_clocks has made all three
        tc = cast(TreeClocks, self.tc)
        diffs = cast(DiffLog, self._diffs)
        tc.apply_paths(self.node.num, self.pending, cast(np.ndarray, self._clock), diffs)
        self.pending = []
        if len(diffs) >= self.compact_at:
            self.compact_diffs()
            # (again once the log has doubled: the diffs above a checkpointing parent's
            # stable checkpoint stay, and compacting at every flush rescanned them)
            self.compact_at = max(COMPACT_AT, 2 * len(diffs))

    # ------------------------------------------------------------ messages

    def handle(self, msg: Message) -> list[Message]:
        """Process one message; return the messages to send (none for a duplicate)."""
        src = msg.src
        if msg.time <= self.last_seen.get(src, 0):
            return []                       # already applied: a replay after recovery
        self.last_seen[src] = msg.time
        self.time += 1
        tc = self.tc
        if tc is not None:
            edge = self.edges.get(src)
            if edge is None:
                edge = self.edges[src] = tc.path_edge(self.node.num, self.graph.nodes[src].num)
            diff = self.last_diff = receive_path(edge, msg.clock, self.time)
            self.pending += diff        # (applied at an acknowledgement: progress_report)
            self.parent_low[src] = msg.low
        port = self.ports[src]
        out = self.node.op.process(port, msg.batch)
        if self.store is not None:
            self.ck_messages += 1
            self.ck_rows += len(msg.batch)
            if self.ck_inputs is not None:
                self.ck_inputs.append((port, self.node.op.taken(port, msg.batch)))
            wanted = self.ck_wanted
            if wanted is not None and src == wanted[0] and msg.time >= wanted[1]:
                self.checkpoint()
        return self.emit(out)

    def check_incoming(self, msg: Message) -> None:
        """For a message that arrived from another process: refuse a sender that is not
        a parent, and a diff path that does not fit the sender's clock, before any state
        changes (the engine's own paths are right by construction, so ``handle`` checks
        only their length and leaf, and their times when it writes them in bulk)."""
        if msg.src not in self.ports:
            raise UnknownNodeError(f"a message from {msg.src!r}, which is not a parent of {self.id}")
        if self.tc is not None and msg.clock is not None:
            self.tc.check_path(self.graph.nodes[msg.src].num, msg.clock)

    def write(self, batch: Batch) -> list[Message]:
        """A client write entering a base node (an input from outside the dataflow)."""
        self.time += 1
        if self.tc is not None:
            edge = self.edges.get(None)
            if edge is None:
                edge = self.edges[None] = self.tc.path_edge(self.node.num, None)
            # a base keeps no diff log: its diffs would hold only its own time, which
            # its clock has, and recovery reads the logs of a failed node's children
            self.last_diff = receive_path(edge, None, self.time)
        return self.emit(self.node.op.process(0, batch))

    def emit(self, out: Batch | list[Batch]) -> list[Message]:
        """One message per child. Without clocks an empty batch stays home; with them
        every child gets a message, empty if need be, logged unless it goes to a reader
        that does not checkpoint (never asked for again, see Operator.leaf)."""
        outs = self.out_edges
        if outs is None or self.out_version != self.graph.version:
            outs = self._out_edges()
        logging = self.tc is not None
        nid, t, diff, low = self.node.id, self.time, self.last_diff, self.sent_low
        splits = self.node.op.splits
        sends: list[Message] = []
        for c, shard, log in outs:
            # splits: ``out`` is a list, one batch per shard, and every child has its shard
            b: Batch = out[shard] if splits else out  # type: ignore[index, assignment]
            if b or logging:
                m = Message(nid, c, b, t, diff, low)
                sends.append(m)
                if log is not None:
                    log.append(m)
        return sends

    def _out_edges(self) -> list[OutEdge]:
        """Per child: its id, its shard and this node's payload log to it (None without
        clocks, and to a reader without checkpoints); rebuilt when the graph, the clocks
        or the logs change."""
        nodes, payload = self.graph.nodes, self.payload
        logging = self.tc is not None
        self.out_edges = [(c, nodes[c].shard,
                           payload.setdefault(c, deque())
                           if logging and self.keeps_log_to(c) else None)
                          for c in self.node.children]
        self.out_version = self.graph.version
        return self.out_edges

    def keeps_log_to(self, child: str) -> bool:
        """Whether this node logs what it sends ``child`` (clocks on): always, but to a
        reader only if it checkpoints (its recovery reads the log from its checkpoint
        on; without one it is rebuilt from this node's state, and never asks)."""
        node = self.graph.nodes[child]
        op = node.op
        return not op.leaf or (
            self.checkpointing and op.checkpoint_form is not None
            and not checkpoints.rebuilt_from_parents(self.graph, node, self.rebuilt))

    def write_history(self, history: Iterable[Batch], seen: dict[str, int], low: int,
                      start: int = 0, rows: Sequence[Batch] = ()) -> list[Message]:
        """A base back from its durable log: its state is the log replayed, its time the
        log's length; returns what the children named in ``seen`` have not received
        (a failed child asks for its own resend when it recovers). ``start``: the log
        begins after that many writes, ``rows`` the table as of then, as batches that
        add up to it (``WriteHistory.table``: never joined into one; a base that holds
        no rows needs neither: only the writes some child may still ask for)."""
        early = {c: t for c, t in seen.items() if t < start}
        if early:
            raise RecoveryError(f"base {self.id}'s history starts after write {start}, "
                                f"but {early} have not taken all before it")
        self.attach_clocks(self.tc)
        self.last_seen = {}
        self.alive = True
        self.time = start
        for part in rows:
            if part:
                self.node.op.process(0, part)
        sends: list[Message] = []
        for batch in history:
            out = self.write(batch)
            sends.extend(m for m in out if m.dst in seen and m.time > seen[m.dst])
            if self.time <= low:                # children have these: no need to log them
                for q in self.payload.values():
                    q.clear()
        return sends

    def restore(self, time: int, clock: np.ndarray, last_seen: dict[str, int]) -> None:
        """Restart an empty (recovered) node at ``time`` with ``clock``, having taken
        each parent's output up to ``last_seen``."""
        self.attach_clocks(self.tc)
        self._clock = clock.copy()
        # what its diffs up to ``time`` would merge to: a later recovery of a parent,
        # with this node as its witness, reads its entries up to there from the summary
        self.summary = clock.copy()
        self.pending = []
        self.time = time
        self.last_seen = dict(last_seen)
        self.alive = True

    def settle(self, parents: dict[str, tuple[int, np.ndarray | None, bool]]) -> None:
        """A newly filled node has seen its parents' output up to now without a message:
        record it, as last-seen times and as a diff in its clock and summary, so that a
        later recovery of a parent resumes from here. ``parents`` maps each parent to
        (its time, its clock, whether it is newly filled too)."""
        tc = self.tc
        for p, (ptime, pclock, fresh) in parents.items():
            if not fresh:
                self.last_seen[p] = ptime
            if tc is not None:              # (then a live node has its summary and clock)
                seen = tc.make_diff(self.node.num, self.graph.nodes[p].num, pclock, self.time + 1)
                seen[0] = self.time
                tc.merge_into(self.node.num, cast(np.ndarray, self.summary), seen)
                tc.merge_into(self.node.num, cast(np.ndarray, self.clock), seen)

    def info(self) -> "DomainInfo":
        """What recovery reads of a node, taken at one instant."""
        if self.tc is None or self.clock is None:      # no clocks, or failed
            return DomainInfo(self.alive, self.time, dict(self.last_seen), None, None, None)
        return DomainInfo(self.alive, self.time, dict(self.last_seen), self.clock.copy(),
                          self.log_rows(), cast(DiffLog, self.diffs).rows.copy())

    def payload_after(self, child: str, time: int) -> tuple[list[Message], int]:
        """The logged messages to ``child`` after ``time``, and this node's time."""
        return [m for m in self.payload.get(child, ()) if m.time > time], self.time

    def output_info(self, child: str, upto: int) -> tuple[Batch | None, list[Message], int,
                                                          dict[str, int]]:
        """(snapshot if stateful, logged messages to ``child`` after ``upto``, time,
        last-seen times), at one instant: what recovery's ``output_through`` needs."""
        later, time = self.payload_after(child, upto)
        snap = self.node.op.snapshot() if self.node.op.stateful else None
        return snap, later, time, dict(self.last_seen)

    def replay(self, msgs: Iterable[Message], seen: dict[str, int]) -> list[Message]:
        """A recovered node processes ``msgs`` in order; returns the output its children
        have not seen (times after ``seen``)."""
        sends: list[Message] = []
        for m in msgs:
            sends.extend(o for o in self.handle(m) if o.time > seen.get(o.dst, 0))
        return sends

    def crash(self) -> None:
        """Lose everything held in memory: state, time, clock and logs (the runtime drops
        the inbox, the messages queued for this node)."""
        self.node.op.reset()
        self.time = 0
        self.last_seen = {}
        self.reset_clock_state()
        self.alive = False

    # ------------------------------------------------------------ garbage collection

    def ack_due(self) -> bool:
        """Count a handled message toward the next acknowledgement; True when it is
        due. Never without clocks: there are no logs to trim."""
        if self.tc is None:
            return False
        self.unacked += 1
        return self.unacked >= tuning.ACK_EVERY

    def progress_report(self) -> list[Report]:
        """What this node tells each parent B about how far it has got: its time on B's
        last message and, per grandparent A, the entry of its clock on the (self, B, A)
        path; and, if it has no children (a reader), the B-time up to which B may drop
        its payload log to it (None otherwise): its own state reflects B's messages, so
        without checkpoints, its time on B's last message; with them, its stable (its
        newest) checkpoint's parent-time for B, since its recovery replays B's messages
        after it.

        The clock read is as of the last flush, fewer than ``FLUSH_EVERY`` receipts
        behind: a lower entry only trims less, and flushing for each report cost more
        than all the receipts in between (a cold kernel call every 32 messages).

        A checkpointing node reports no further than its stable checkpoint, so between
        two of them its report stays the same: it is built once per stable checkpoint
        (``report_memo``) and handed out again, and its parent, which holds it already,
        passes over it (``on_progress``). Handed out again, not built anew, it can only
        be lower than a new one: its times are minima of the stable checkpoint's and
        the last-seen times and clock, which only rise until the node restarts (then
        its stable checkpoint is another object, or none).

        The diffs built since the last flush are applied here once ``FLUSH_EVERY`` have
        piled up (so the clock read lags by fewer than that): one chore every other
        acknowledgement, not one more on its own schedule, which cost each message a
        check and the flush a cold start of its own (docs/benchmarks.md, "Acknowledgements
        without news"). Not by a checkpointing node: its report is capped by its stable
        checkpoint's clock, not read off its own, so its diffs wait for its next
        checkpoint, which reads its clock (at most an interval of them, checked at every
        acknowledgement: ``checkpoint_due``); until it has a stable checkpoint with a
        clock, its report reads an older clock, which only trims less."""
        pending = self.pending
        if pending and len(pending) >= self.flush_len and self.store is None:
            self.flush()                # (pending: clocks attached)
        self.unacked = 0
        plan = self.report_plan
        if plan is None:
            plan = self.report_plan = self._plan_report()
        clock = self._clock
        last_seen = self.last_seen
        trims: dict[str, int] | None = None
        if not self.node.children:
            trims = (last_seen if self.store is None
                     else self.ck_stable if self.ck_stable is not None else {})
        stable = self.ck_stable if self.store is not None else None
        if stable is not None:
            # no further than the stable checkpoint: a parent failed together with this
            # node restarts where the checkpoint stands, from its own parents' logs
            # (``recovery/treeclock.py``, "a failed child's checkpoint")
            held = self.ck_stable_clock
            memo = self.report_memo
            if memo is not None and memo[0] is stable and memo[1] is plan:
                return memo[2]
            report = [(b_id, min(last_seen.get(b_id, 0), stable.get(b_id, 0)),
                       {a_id: min(int(clock[pos]), int(held[pos])) if held is not None
                        else int(clock[pos]) for a_id, pos in grand} if clock is not None else {},
                       None if trims is None else trims.get(b_id, 0))
                      for b_id, grand in plan]
            # (the clock's own entries, where the checkpoint's clock is not known, rise:
            # then built each time)
            self.report_memo = (stable, plan, report) if held is not None and clock is not None else None
            return report
        return [(b_id, last_seen.get(b_id, 0),
                 {a_id: int(clock[pos]) for a_id, pos in grand} if clock is not None else {},
                 None if trims is None else trims.get(b_id, 0))
                for b_id, grand in plan]

    def _plan_report(self) -> list[ReportPlan]:
        """Per parent B, the clock position of each (self, B, A) path."""
        nodes = self.graph.nodes
        layout = self.tc.layout(self.node.num) if self.tc is not None else None
        plan: list[ReportPlan] = []
        for b_id in self.node.parents:
            b = nodes[b_id]
            grand = () if layout is None else tuple(
                (a_id, layout.position((self.node.num, b.num, nodes[a_id].num)))
                for a_id in b.parents)
            plan.append((b_id, grand))
        return plan

    def on_progress(self, child: str, time: int, paths: dict[str, int],
                    trim: int | None) -> list[tuple[str, int]]:
        """A child's report (``progress_report``; ``trim``: how far to drop the log to a
        child without children); once every child has reported, this node's low mark
        rises and it returns (parent, level) trims: what all its children reflect of
        that parent's messages to this node."""
        progress = self.progress
        if trim is None and progress.get(child) == (time, paths):
            # nothing new (a checkpointing child between two stable checkpoints): the
            # low mark, the stable checkpoint and the trims stand as they were
            return []
        if trim is not None:
            self.truncate(child, trim)
        progress[child] = (time, paths)
        children = self.node.children
        if len(children) == 1 and children[0] == child:   # the usual case
            self.low = self.sent_low = time
            trims = [(a, paths.get(a, 0)) for a in self.node.parents]
        elif not all(ch in progress for ch in children):
            return []
        else:
            self.low = self.sent_low = min(progress[ch][0] for ch in children)
            trims = [(a, min(progress[ch][1].get(a, 0) for ch in children))
                     for a in self.node.parents]
        if self.store is None:
            return trims
        # a parent keeps what a recovery from the stable checkpoint will ask for
        self._stable_checkpoint()
        stable = self.ck_stable or {}
        return [(a, min(level, stable.get(a, 0))) for a, level in trims]

    def history_low(self, seen: dict[str, int] | None = None) -> int:
        """A base's oldest write that a child may still ask for: below what each child's
        payload log still holds (the log keeps what a recovery will ask for) and what
        each child has taken (``seen``, child -> its last-seen time of this node, for
        the live children; by default their last reports): its write history may be
        trimmed to here (``history.WriteHistory``)."""
        low = self.time
        for c in self.node.children:
            log = self.payload.get(c)
            if log:
                low = min(low, log[0].time - 1)
            if seen is None:
                p = self.progress.get(c)
                low = min(low, p[0] if p is not None else 0)
            elif c in seen:
                low = min(low, seen[c])
        return low

    def truncate(self, child: str, level: int) -> None:
        """Drop logged messages to ``child`` up to time ``level``: every child of
        ``child`` has reflected them, so no recovery will ask for them again."""
        log = self.payload.get(child)
        while log and log[0].time <= level:
            log.popleft()

    def compact_diffs(self) -> None:
        """Fold into ``summary`` the diffs every sibling has also received (times up to
        the parent's piggybacked low mark): recovery of that parent starts after them,
        so only their merge (for T*) is still needed."""
        nodes = self.graph.nodes
        # called only with clocks on (from flush), where all three are set
        cast(TreeClocks, self.tc).compact(self.node.num, cast(DiffLog, self._diffs),
                                          cast(np.ndarray, self.summary),
                                          {nodes[p].num: low for p, low in self.parent_low.items()})

    def log_rows(self) -> np.ndarray:
        """This node's diffs, preceded by the summary of the compacted ones."""
        # (with clocks on, of a live node: it has both)
        return np.vstack([cast(np.ndarray, self.summary)[None, :], cast(DiffLog, self.diffs).rows])

    def forget_child(self, child: str) -> None:
        """``child`` has left the graph: drop its payload log and its progress."""
        self.payload.pop(child, None)
        self.progress.pop(child, None)
        self.out_edges = None

    def payload_size(self) -> int:
        return sum(len(q) for q in self.payload.values())


def joined_runs(inputs: Iterable[tuple[int, Batch]]) -> list[tuple[int, Batch]]:
    """``inputs`` (port, batch) with each run of one port's batches joined into one
    (``Batch.concat``), empty ones left out: what a restarting operator whose
    ``inputs_join`` says so (an aggregate) takes to rebuild its state. Its state is a
    function of the multiset each port took, not of how that was cut into batches
    (ops/operator.py), and a COUNT's call costs about the same up to a few hundred
    rows, so the messages since its checkpoint (up to ``CHECKPOINT_EVERY``, a few
    dozen rows each in a sharded view) cost one call instead of one each: 0.017 s
    against 0.07-0.10 s for a shard 1,000 messages past its checkpoint
    (docs/recovery.md). The runs keep the order of the inputs (a row deleted after it
    was inserted stays after it)."""
    out: list[tuple[int, Batch]] = []
    run: list[Batch] = []
    at = -1
    for port, batch in inputs:
        if not len(batch):
            continue
        if port != at and run:
            out.append((at, Batch.concat(run)))
            run = []
        at = port
        run.append(batch)
    if run:
        out.append((at, Batch.concat(run)))
    return out
