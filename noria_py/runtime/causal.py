"""The ``causal`` regime: Clonos's causal logging (seed 004, §3.2) in the embedded runtime.

Normal operation, per node shard:

- **Determinants.** A node with parents and children records, for each of its times t,
  which input it delivered at t: the port and the sender's time of that message
  (``DetLog``). Under the ordered-delivery assumption (the operators are deterministic;
  delivery order is the only nondeterminism), these make its execution replayable.
- **Piggybacking.** Every message a node sends a child carries, encoded in bytes
  (``encode``), the determinants that child has not had yet: the node's own, and those of
  the ancestors it holds that the child is to hold too. A child logs what it receives
  before the message changes its state. How far down a node's determinants travel is the
  **determinant sharing depth** (``connect(regime="causal", determinant_depth=N)``,
  Clonos's DSD): 1, its children only; N, every node at most N edges below; None (the
  default), all of them. A node with one parent records them too: the sender's times
  are what tell which of its inputs a child's state reflects.
- **In-flight logs.** A node keeps every message it sent each child (by reference,
  batches are immutable), from the point after which the log is complete
  (``CausalState.log_from``).
- **Local checkpoints.** Every node but a base marks, every ``tuning.CHECKPOINT_EVERY``
  messages or ``CHECKPOINT_ROWS`` rows, its time and the parent-times it has taken
  (``Mark``); a stateful node also puts its state in a ``CheckpointStore`` outside it
  (incremental, ``checkpoints.py``). Marks and checkpoints outlive the node.
- **Garbage collection, without a coordinator.** Every ``tuning.ACK_EVERY`` messages a
  node tells each parent the parent-time of its *stable* mark (the one its recovery
  will never start below: the newest mark at or below what all its children report of
  it; a node without children, its newest). A parent drops its in-flight log to that
  child up to there; once every child has reported, its own stable mark moves, its
  determinants held anywhere are dropped up to that mark's time, and its checkpoint
  chain folds the deltas below it. Reporting the stable mark's parent-time rather than
  the time last taken keeps a parent's log long enough for the child's recovery from
  that mark, even when the child and the parent fail together.

Recovery (``recovery/causal.py``): the failed node alone restores its mark (and
checkpoint), at or below what its children have taken of it, replays its parents'
in-flight logs after the mark's parent-times in the order the determinants held
downstream give, then the rest in per-parent FIFO order; its output to each live child
is sent only beyond what that child has taken (Clonos's deduplication), and rebuilds its
own in-flight log. Nothing else pauses or rolls back.

Invariants: a message's determinants are logged by the receiver before it is
processed; every determinant a node holds of an origin is a contiguous range of that
origin's times, the same at every holder where the ranges overlap; a parent's in-flight
log to a child holds every message after the child's reported level; an operator's
state is a function of the multiset of rows it has taken (docs/recovery.md,
"Determinism"), so two replays that take the same inputs by a time agree at that time.

Optional **standby** (``standby=True``, Clonos's passive standby tasks): each stateful
node shard has a warm copy of its newest checkpoint, materialized at every checkpoint
(``CheckpointStore.latest``, a copy), which a recovery from that checkpoint takes over
instead of reading the store; it then replays only the messages since. A copy taken
over is made again at the node's next report (Clonos schedules a new standby).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple, cast

from .. import tuning
from ..batch import Batch
from ..errors import RecoveryError
from ..graph import Graph, Node
from . import checkpoints
from .checkpoints import Checkpoint, CheckpointStore
from .domain import Domain
from .embedded import EmbeddedRuntime
from .messages import CausalMessage, Message

__all__ = ["CausalMessage", "CausalRuntime", "CausalState", "DetLog", "Determinants", "Mark",
           "decode", "drop_determinants", "encode", "newest_mark", "stabilize", "trim_inflight"]


class Mark(NamedTuple):
    """A node's time and the parent-times it had taken then (a stateful node's
    checkpoint at that time is in the store)."""
    time: int
    parent_times: dict[str, int]


class DetLog:
    """One origin's determinants for its times ``start + 1`` .. ``end``: per time, the
    port it delivered a message on and that message's sender time."""
    __slots__ = ("start", "ports", "times")

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.ports: list[int] = []
        self.times: list[int] = []

    @property
    def end(self) -> int:
        return self.start + len(self.ports)

    def extend(self, start: int, ports: list[int], times: list[int]) -> None:
        """Take the determinants for times after ``start`` (those already held are
        skipped; a range starting after this log's end replaces it: the sender has
        dropped what lies between, below every stable mark)."""
        end = self.end
        if start > end:
            self.start, self.ports, self.times = start, list(ports), list(times)
            return
        skip = end - start
        if skip < len(ports):
            self.ports.extend(ports[skip:])
            self.times.extend(times[skip:])

    def truncate(self, upto: int) -> None:
        """Drop the determinants for times up to ``upto``."""
        n = upto - self.start
        if n <= 0:
            return
        if n >= len(self.ports):
            self.start, self.ports, self.times = upto, [], []
            return
        del self.ports[:n]
        del self.times[:n]
        self.start = upto

    def copy(self) -> "DetLog":
        out = DetLog(self.start)
        out.ports, out.times = list(self.ports), list(self.times)
        return out


def _varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode(records: list[tuple[int, int, list[int], list[int]]]) -> bytes:
    """Determinant deltas as bytes: per record (origin node number, the time before the
    first, ports, sender times), LEB128 varints: the number, the start, the count, then
    a port and a sender time per determinant."""
    out = bytearray()
    for num, start, ports, times in records:
        _varint(out, num)
        _varint(out, start)
        _varint(out, len(ports))
        for p, t in zip(ports, times):
            _varint(out, p)
            _varint(out, t)
    return bytes(out)


def decode(data: bytes) -> list[tuple[int, int, list[int], list[int]]]:
    """``encode``'s records back."""
    out: list[tuple[int, int, list[int], list[int]]] = []
    pos, size = 0, len(data)

    def varint() -> int:
        nonlocal pos
        n = shift = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7
    while pos < size:
        num, start, count = varint(), varint(), varint()
        ports, times = [], []
        for _ in range(count):
            ports.append(varint())
            times.append(varint())
        out.append((num, start, ports, times))
    return out


class CausalState:
    """What one node keeps in memory for causal logging (lost when it crashes)."""
    __slots__ = ("own", "held", "sent", "inflight", "log_from", "progress", "messages",
                 "rows", "unacked")

    def __init__(self, own: DetLog | None = None) -> None:
        self.own = own                           # its determinants (None: it records none)
        self.held: dict[str, DetLog] = {}        # origin -> its determinants held here
        #: child -> origin -> the origin's time up to which its determinants were sent
        self.sent: dict[str, dict[str, int]] = {}
        self.inflight: dict[str, deque[CausalMessage]] = {}   # child -> messages sent
        self.log_from: dict[str, int] = {}       # child -> the log holds every time after
        self.progress: dict[str, int] = {}       # child -> the level it reported
        self.messages = self.rows = self.unacked = 0


def newest_mark(marks: Iterable[Mark], time: int | float) -> Mark | None:
    """The newest of ``marks`` (oldest first) at or below ``time``."""
    found = None
    for m in marks:
        if m.time <= time:
            found = m
    return found


def stabilize(marks: list[Mark], low: int | float) -> int | None:
    """``marks`` (oldest first) of a node whose children will never ask for its times up
    to ``low``: those older than the newest at or below ``low`` dropped (in place); the
    stable mark's time (None: no mark). The garbage collection's one rule, embedded and
    in a cluster (``runtime/cluster/causal.py: Causal.gc``)."""
    if not marks:
        return None
    i = 0
    while i + 1 < len(marks) and marks[i + 1].time <= low:
        i += 1
    if i:
        del marks[:i]
    return marks[0].time


def trim_inflight(cs: CausalState, child: str, level: int) -> None:
    """The in-flight log to ``child`` without its messages up to ``level`` (the parent-time
    of ``child``'s stable mark: a recovery of ``child`` never asks for them again)."""
    log = cs.inflight.get(child)
    while log and log[0].time <= level:
        log.popleft()
    if cs.log_from.get(child, 0) < level:
        cs.log_from[child] = level


def drop_determinants(cs: CausalState, nid: str, origin: str, upto: int) -> None:
    """Node ``nid`` drops ``origin``'s determinants (its own when ``origin`` is itself)
    up to ``upto``, ``origin``'s stable mark's time (never replayed below it)."""
    log = cs.own if origin == nid else cs.held.get(origin)
    if log is not None:
        log.truncate(upto)


class Determinants:
    """Who records determinants and who holds whose (within the sharing depth), what
    each node forwards to each child, and the per-message work on them: logging what a
    message carries, recording a delivery, piggybacking on the output. One code for the
    embedded runtime and a cluster's workers (``runtime/cluster/causal.py``), each of
    which keeps a ``CausalState`` per node it runs."""

    def __init__(self, depth: int | None = None) -> None:
        #: the determinant sharing depth (None: the whole graph below)
        self.depth = depth
        self.version = -1
        self.records: set[str] = set()
        self.scope: dict[str, set[str]] = {}
        self.holders: dict[str, list[str]] = {}
        self.forward: dict[tuple[str, str], list[str]] = {}
        self.num_of: dict[str, int] = {}
        self.id_of: dict[int, str] = {}
        #: bytes of determinants piggybacked, and messages sent by nodes (not bases)
        self.det_bytes = 0
        self.messages_sent = 0

    def plan(self, g: Graph) -> None:
        """What ``g`` implies (again when it has changed): a node with parents and
        children records; its determinants are held by the nodes at most ``depth``
        edges below it; a node forwards a child those of its own and its scope's that
        the child is to hold."""
        if self.version == g.version:
            return
        nodes = g.nodes
        self.records = {n for n, x in nodes.items() if x.parents and x.children}
        scope: dict[str, set[str]] = {n: set() for n in nodes}
        for o in self.records:
            seen, frontier, dist = {o}, [o], 0
            while frontier and (self.depth is None or dist < self.depth):
                dist += 1
                below: list[str] = []
                for x in frontier:
                    for c in nodes[x].children:
                        if c not in seen:
                            seen.add(c)
                            scope[c].add(o)
                            below.append(c)
                frontier = below
        self.scope = scope
        self.holders = {o: [n for n in nodes if o in scope[n]] for o in self.records}
        self.forward = {(x, c): [o for o in ([x] if x in self.records else []) + sorted(scope[x])
                                 if o in scope[c]]
                        for x in nodes for c in dict.fromkeys(nodes[x].children)}
        self.num_of = {n: x.num for n, x in nodes.items()}
        self.id_of = {x.num: n for n, x in nodes.items()}
        self.version = g.version

    def fresh(self, nid: str, time: int, children: list[str]) -> CausalState:
        """The state of ``nid`` (re)starting at ``time``: nothing held, its own
        determinants from ``time`` on, its in-flight logs empty from ``time``."""
        cs = CausalState(DetLog(time) if nid in self.records else None)
        for c in children:
            cs.inflight[c] = deque()
            cs.log_from[c] = time
        return cs

    def take(self, d: Domain, cs: CausalState, m: Message,
             seen: dict[str, int] | None) -> list[CausalMessage] | None:
        """Deliver ``m`` to ``d``: log its determinants, process it, record this
        delivery's determinant, log the output in flight; returns what to send (``seen``:
        in a replay, only what each live child named has not taken), None for a
        duplicate (dropped)."""
        if m.time <= d.last_seen.get(m.src, 0):
            return None
        dets = getattr(m, "dets", b"")
        if dets:
            self.receive(d.id, cs, dets)
        port = d.ports[m.src]
        out = d.handle(m)
        if cs.own is not None:
            cs.own.ports.append(port)
            cs.own.times.append(m.time)
        cs.messages += 1
        cs.rows += len(m.batch)
        cs.unacked += 1
        return self.wrap(d.id, bool(d.node.parents), cs, out, seen) if out else []

    def receive(self, nid: str, cs: CausalState, data: bytes) -> None:
        """Log the determinants ``data`` carries of the origins in ``nid``'s scope."""
        scope = self.scope[nid]
        for num, start, ports, times in decode(data):
            o = self.id_of.get(num)
            if o is None or o not in scope:
                continue
            held = cs.held.get(o)
            if held is None:
                held = cs.held[o] = DetLog(start)
            held.extend(start, ports, times)

    def handoff(self, x: str, cs: CausalState, c: str) -> bytes:
        """Everything ``x`` holds that its child ``c`` is to hold (``c`` restarts: Clonos
        sends a new consumer every determinant); ``x`` sends it afresh from here."""
        records = []
        for o in self.forward.get((x, c), ()):
            log = cs.own if o == x else cs.held.get(o)
            if log is not None:
                records.append((self.num_of[o], log.start, log.ports, log.times))
        cs.sent.pop(c, None)
        return encode(records)

    def wrap(self, x: str, counted: bool, cs: CausalState, out: list[Message],
             seen: dict[str, int] | None = None) -> list[CausalMessage]:
        """The messages ``x`` emitted, each with the determinants its child has not had,
        logged in flight; returns those to send (with ``seen``: only to the children
        named, after their times). ``counted``: ``x`` is not a base (the harness's
        messages sent)."""
        sends: list[CausalMessage] = []
        forward, own, held, num_of = self.forward, cs.own, cs.held, self.num_of
        for m in out:
            c = m.dst
            send = seen is None or m.time > seen.get(c, m.time)
            dets = b""
            if send:
                records = []
                cursor = cs.sent.get(c)
                if cursor is None:
                    cursor = cs.sent[c] = {}
                for o in forward.get((x, c), ()):
                    log = own if o == x else held.get(o)
                    if log is None:
                        continue
                    after = max(cursor.get(o, log.start), log.start)
                    end = log.end
                    if end > after:
                        i = after - log.start
                        records.append((num_of[o], after, log.ports[i:], log.times[i:]))
                        cursor[o] = end
                if records:
                    dets = encode(records)
                    self.det_bytes += len(dets)
                if counted:
                    self.messages_sent += 1
            cm = CausalMessage(x, c, m.batch, m.time, dets)
            log_c = cs.inflight.get(c)
            if log_c is None:
                log_c = cs.inflight[c] = deque()
                cs.log_from.setdefault(c, 0)
            log_c.append(cm)
            if send and (seen is None or c in seen):
                sends.append(cm)
        return sends


class CausalRuntime(EmbeddedRuntime):
    """The embedded runtime with causal logging instead of tree clocks."""

    def __init__(self, graph: Graph, seed: int | None = None, depth: int | None = None,
                 standby: bool = False) -> None:
        super().__init__(graph, seed, clocks=False, checkpoints=False)
        #: the determinant sharing depth (None: the whole graph below)
        self.standby = standby
        #: the stateful nodes' checkpoints (outside every node)
        self.ckpts = CheckpointStore()
        #: per node, its marks, oldest first; the first is its stable one
        self.marks: dict[str, list[Mark]] = {}
        #: per stateful node, its newest checkpoint ready to take over (``standby``)
        self.standbys: dict[str, Checkpoint] = {}
        self.causal: dict[str, CausalState] = {}
        #: nodes whose next checkpoint must be whole (their state changed outside ``handle``)
        self.whole: set[str] = set()
        #: who records and holds whose determinants, and the piggybacking itself
        self.det = Determinants(depth)
        #: what the last recovery did, per node it brought back (``recovery/causal.py``)
        self.last_recovery: dict[str, Any] = {}

    # (the determinants' plan, read by recovery and the harness)
    @property
    def depth(self) -> int | None:
        return self.det.depth

    @property
    def records(self) -> set[str]:
        return self.det.records

    @property
    def scope(self) -> dict[str, set[str]]:
        return self.det.scope

    @property
    def holders(self) -> dict[str, list[str]]:
        return self.det.holders

    @property
    def det_bytes(self) -> int:
        """Bytes of determinants piggybacked."""
        return self.det.det_bytes

    @property
    def messages_sent(self) -> int:
        """Messages sent by nodes (not bases)."""
        return self.det.messages_sent

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> Domain:
        d = super().add(node)
        self.causal[node.id] = CausalState()
        self.marks[node.id] = []
        self.whole.add(node.id)
        return d

    def checkpoint_into(self, d: Domain) -> None:
        # the domain records what it takes for the next delta (ck_inputs, tracking);
        # the runtime decides when a checkpoint is taken and puts it itself
        d.use_checkpoints(self.ckpts)

    def remove(self, node_id: str) -> None:
        super().remove(node_id)
        self.causal.pop(node_id, None)
        self.marks.pop(node_id, None)
        self.standbys.pop(node_id, None)
        self.ckpts.drop(node_id)
        self.whole.discard(node_id)
        for cs in self.causal.values():
            for per_child in (cs.inflight, cs.log_from, cs.progress, cs.sent, cs.held):
                per_child.pop(node_id, None)

    def _plan(self) -> None:
        """Who records determinants, who holds whose, what each forwards (``Determinants``)."""
        self.det.plan(self.graph)

    def settle(self, fresh: set[str], adopted: set[str] | frozenset[str] = frozenset()) -> None:
        """Nodes were filled outside the message path (a new view, a lineage rebuild):
        each has taken its parents' output as it stands; it starts afresh (nothing held,
        a whole checkpoint and a mark now), and its parents' logs to it start here."""
        self._plan()
        for nid in self.graph.topological():
            if nid not in fresh:
                continue
            d = self.domains[nid]
            d.settle({p: (self.domains[p].time, None, p in fresh) for p in d.node.parents})
            self._restart(nid, d.time)
            for p in d.node.parents:
                pcs = self.causal[p]
                pcs.inflight[nid] = deque()
                pcs.log_from[nid] = self.domains[p].time
                pcs.progress.pop(nid, None)
            if d.node.parents:
                self.marks[nid] = []
                self.ckpts.drop(nid)
                self.standbys.pop(nid, None)
                self.whole.add(nid)
                self._checkpoint(d, self.causal[nid])

    def _restart(self, nid: str, time: int) -> None:
        """``nid`` (re)starts at ``time`` with empty logs; it holds again what its parents
        hold of its scope (Clonos: a new consumer is sent every determinant), and its
        parents send it their determinants afresh."""
        d = self.domains[nid]
        cs = self.causal[nid] = self.det.fresh(nid, time, list(d.node.children))
        for p in dict.fromkeys(d.node.parents):
            data = self.det.handoff(p, self.causal[p], nid)
            if data and self.domains[p].alive:
                self.det.receive(nid, cs, data)

    # ------------------------------------------------------------ delivery

    def _enter(self, base_id: str, batch: Batch) -> None:
        d = self._record(base_id, batch)
        self.send_all(self._wrap(d, self.causal[base_id], d.write(batch)))

    def deliver(self, m: Message) -> None:
        d = self.domains.get(m.dst)
        if d is None or not d.alive:
            return                  # a crashed node loses what is sent to it
        self._take(d, self.causal[m.dst], m, None)

    def _take(self, d: Domain, cs: CausalState, m: Message, seen: dict[str, int] | None) -> None:
        """Deliver ``m`` to ``d`` (``Determinants.take``), then checkpoint or report if due
        (not in a replay, as Clonos's recovering task takes none: at the next message)."""
        if self.det.version != self.graph.version:
            self._plan()
        sends = self.det.take(d, cs, m, seen)
        if sends is None:
            return                  # a duplicate, dropped
        self.delivered += 1
        if self.trace is not None:
            self.trace.append((m.src, m.dst, m.time))
        if sends:
            self.send_all(list[Message](sends))
        if seen is not None:
            return                  # (a replay: checkpoint and report after, when due)
        if cs.messages >= tuning.CHECKPOINT_EVERY or cs.rows >= tuning.CHECKPOINT_ROWS:
            self._checkpoint(d, cs)
        if cs.unacked >= tuning.ACK_EVERY:
            self._report(d)

    def _wrap(self, d: Domain, cs: CausalState, out: list[Message],
              seen: dict[str, int] | None = None) -> list[Message]:
        return list(self.det.wrap(d.id, bool(d.node.parents), cs, out, seen))

    # ------------------------------------------------------------ checkpoints and progress

    def _checkpoint(self, d: Domain, cs: CausalState) -> None:
        """A mark of ``d``'s time and parent-times; a stateful node's state into the store
        (what changed since its last one), and its standby refreshed."""
        nid = d.id
        cs.messages = cs.rows = 0
        marks = self.marks[nid]
        if d.store is not None:
            op = d.node.op
            full = nid in self.whole or not self.ckpts.has(nid)
            change = checkpoints.delta(op, full, d.ck_inputs or [])
            if d.ck_inputs is not None:
                d.ck_inputs = []
            stable = marks[0].time if marks and d.node.children else d.time
            self.ckpts.put(nid, d.time, d.last_seen, cast(str, op.checkpoint_form), change,
                           full, stable)
            self.whole.discard(nid)
        marks.append(Mark(d.time, dict(d.last_seen)))
        if not d.node.children:
            del marks[:-1]             # nothing downstream pins it: the newest is stable
        if self.standby and d.store is not None:
            self._make_standby(nid)

    def _make_standby(self, nid: str) -> None:
        """A warm copy of ``nid``'s newest checkpoint (Clonos's standby loading it)."""
        marks = self.marks.get(nid)
        ck = self.ckpts.latest(nid, marks[-1].time) if marks else None
        if ck is not None:
            self.standbys[nid] = ck

    def level(self, nid: str, parent: str) -> int:
        """The oldest ``parent``-time a recovery of ``nid`` can ask for: its stable mark's."""
        marks = self.marks.get(nid)
        return marks[0].parent_times.get(parent, 0) if marks else 0

    def _report(self, d: Domain) -> None:
        """``d`` tells each parent its level; a parent drops its log to ``d`` up to
        there, and once all its children have reported, moves its stable mark."""
        self.causal[d.id].unacked = 0
        if self.standby and d.store is not None and d.id not in self.standbys:
            self._make_standby(d.id)      # (one taken over by a recovery is made again)
        for p in dict.fromkeys(d.node.parents):
            pd = self.domains.get(p)
            if pd is None or not pd.alive:
                continue
            pcs = self.causal[p]
            level = self.level(d.id, p)
            pcs.progress[d.id] = level
            trim_inflight(pcs, d.id, level)
            children = pd.node.children
            if all(c in pcs.progress for c in children):
                self._stabilize(p, min(pcs.progress[c] for c in children))

    def _stabilize(self, nid: str, low: int) -> None:
        """``nid``'s children will never ask for its times up to ``low``: its newest mark
        at or below it becomes stable, and its determinants up to there are dropped."""
        stable = stabilize(self.marks.get(nid, []), low)
        if stable is None:
            return
        for h in [nid, *self.holders.get(nid, ())]:
            drop_determinants(self.causal[h], h, nid, stable)

    def _trim_history(self, base_id: str, d: Domain, history: object) -> None:
        """A base's writes its children will never ask for again (at or below every
        child's level) leave its history."""
        cs = self.causal[base_id]
        children = d.node.children
        if children and all(c in cs.progress for c in children):
            self.durable[base_id].trim(min(cs.progress[c] for c in children))

    # ------------------------------------------------------------ failure

    def crash(self, node_id: str) -> None:
        super().crash(node_id)
        self.causal[node_id] = CausalState()

    def reset(self, node_id: str) -> None:
        """Empty a node for a lineage rebuild (``settle`` then starts it afresh); what
        others hold of its times no longer means anything."""
        super().reset(node_id)
        self.causal[node_id] = CausalState()
        self.marks[node_id] = []
        self.ckpts.drop(node_id)
        self.standbys.pop(node_id, None)
        for cs in self.causal.values():
            cs.held.pop(node_id, None)

    def restore_base(self, node_id: str, seen: dict[str, int], low: int) -> int:
        """A base back from its write history: every message after the history's start
        regenerated into its in-flight logs; the live children named in ``seen`` are
        sent what they have not taken."""
        self._plan()
        d = self.domains[node_id]
        start, rows, writes = self.durable[node_id].table()
        early = {c: t for c, t in seen.items() if t < start}
        if early:
            raise RecoveryError(f"base {node_id}'s history starts after write {start}, "
                                f"but {early} have not taken all before it")
        children = list(dict.fromkeys(d.node.children))
        regenerated = d.write_history(writes, {c: start for c in children}, 0, start, rows)
        self._restart(node_id, start)
        cs = self.causal[node_id]
        logged = self._wrap(d, cs, regenerated, {c: start for c in children})
        sends = [m for m in logged if m.dst in seen and m.time > seen[m.dst]]
        self.send_all(sends)
        return len(sends)

    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None:
        """``parent``'s log to the live ``node_id`` now starts after ``log_from``: if its
        newest mark reflects less of ``parent``, it takes one now."""
        d = self.domains[node_id]
        marks = self.marks.get(node_id)
        if not d.alive or not d.node.parents:
            return
        if not marks or marks[-1].parent_times.get(parent, 0) < log_from:
            self._checkpoint(d, self.causal[node_id])

    # ------------------------------------------------------------ what recovery reads and does

    def last_seen_of(self, node_id: str, parent: str) -> int:
        """The last ``parent``-time the live ``node_id`` took."""
        return self.domains[node_id].last_seen.get(parent, 0)

    def mark_at_most(self, node_id: str, time: int | float) -> Mark | None:
        """The newest mark of ``node_id`` at or below ``time``."""
        return newest_mark(self.marks.get(node_id, ()), time)

    def held_logs(self, origin: str) -> dict[str, DetLog]:
        """Live node -> the determinants of ``origin`` it holds (the origin's own log
        is lost with it and not asked for)."""
        out = {}
        for h in self.holders.get(origin, ()):
            if self.domains[h].alive:
                log = self.causal[h].held.get(origin)
                if log is not None and log.ports:
                    out[h] = log
        return out

    def inflight_after(self, parent: str, child: str, after: int) -> list[CausalMessage]:
        """The messages ``parent`` sent ``child`` after its time ``after``, from its
        in-flight log; RecoveryError when the log no longer reaches back that far."""
        cs = self.causal[parent]
        start = cs.log_from.get(child, 0)
        if start > after:
            raise RecoveryError(f"parent {parent} no longer holds the messages it sent "
                                f"{child} after its time {after} (its in-flight log starts "
                                f"after {start}); use strategy='lineage'")
        return [m for m in cs.inflight.get(child, ()) if m.time > after]

    def checkpoint_at(self, node_id: str, mark: Mark) -> tuple[Checkpoint | None, bool]:
        """The state of the stateful ``node_id`` as of ``mark``: its standby when that is
        as of the mark (True), else the store's checkpoint; none for a node that takes
        no checkpoints, a partial one (docs/partial.md, rule 6): it comes back all
        holes, as its crash left it, and what it replays reaches holes and is dropped."""
        if self.domains[node_id].store is None:
            return None, False
        ck = self.standbys.get(node_id)
        if ck is not None and ck.time == mark.time:
            return ck, True
        ck = self.ckpts.latest(node_id, mark.time)
        if ck is None or ck.time != mark.time:
            raise RecoveryError(f"node {node_id} has no checkpoint as of its time {mark.time}")
        return ck, False

    def restore_node(self, node_id: str, mark: Mark, ck: Checkpoint | None) -> None:
        """Restart the failed ``node_id`` as of ``mark`` (with the state ``ck``), its
        later marks and checkpoints forgotten (it may take another path from here)."""
        self._plan()
        d = self.domains[node_id]
        if ck is not None:
            checkpoints.load(d.node.op, ck)
            self.ckpts.keep_upto(node_id, mark.time)
            if self.standbys.get(node_id) is ck:
                del self.standbys[node_id]        # taken over: made again at the next one
        d.time = mark.time
        d.last_seen = dict(mark.parent_times)
        d.alive = True
        marks = self.marks[node_id]
        marks[:] = [m for m in marks if m.time <= mark.time]
        self._restart(node_id, mark.time)

    def replay(self, node_id: str, msgs: list[Message], seen: dict[str, int]) -> None:
        d = self.domains[node_id]
        cs = self.causal[node_id]
        for m in msgs:
            self._take(d, cs, m, seen)

    def held_bytes(self) -> int:
        """Determinants held in every live node, encoded (what the logs cost)."""
        total = 0
        for cs in self.causal.values():
            logs = list(cs.held.values()) + ([cs.own] if cs.own is not None else [])
            total += len(encode([(0, log.start, log.ports, log.times) for log in logs]))
        return total

    def inflight_messages(self) -> int:
        return sum(len(q) for cs in self.causal.values() for q in cs.inflight.values())
