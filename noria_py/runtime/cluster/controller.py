"""The cluster runtime, on the controller: places node shards on worker processes,
relays their messages, notices when one dies, and recovers its nodes on a spare.

The controller runs the same ``Database`` as the embedded engine, with this runtime in
place of ``EmbeddedRuntime``. It keeps:

- the graph and the planner (workers rebuild the same graph from each catalog change);
- with ``writes="controller"``, each base table's rows (to validate writes, as the
  embedded base does) and its write history (``durable``), which is the durable log
  a lost base recovers from: a write is acknowledged once it is in that history (and
  in the WAL with ``data_dir``), so an acknowledged write survives any worker; with
  ``writes="worker"``, no table data at all: the base's worker validates and is asked
  for the rows (``forward``, ``_at_base``; while the base is down they wait for it,
  ``base_down``), and its log is its worker's and its log replica's (``writes.py``),
  on their disks with ``--data-dir``, of which the controller keeps no history. A
  lost owner's base is restored from its live replica's log, whole for that owner
  (``log_whole``), else from the longest of the logs its lost workers left on disk
  (``writes.disk_log``), else it is a lost table (``_lose_tables``:
  ``TableLostError``), never a shorter one;
- with ``channels="relay"``, the routing of messages between workers (a star:
  worker-to-worker traffic goes through here, which keeps every edge FIFO and lets a
  failed node's inbound messages be held until it is back); with ``"direct"``, none:
  workers send each other their messages (``channels.py``), and this side keeps the
  order recovery needs with frames of its own: the ``lost`` fence before any question
  of a recovery, ``host`` answered before ``place``, ``release`` once a node is
  restored, and ``wait`` by the workers' counts (docs/architecture.md, "Direct
  channels"). A checkpoint need not be in order with the node's messages: a recovery
  uses one no newer than what the node's witnesses saw (``at_most``);
- with direct channels in the treeclock regime (lineage too), each worker's
  checkpoint holder, another worker it sends its stateful node shards'
  checkpoints to on its peer link (``holders.py``: ``choose_holders``), and for the
  nodes of a lost worker the holder named then, which a recovery asks (``ck_at``);
  otherwise the checkpoints themselves (``runtime/checkpoints.py``), which each
  worker sends here as its nodes take them. Either way a dead worker's nodes come
  back on the spare from their checkpoints plus their parents' payload logs;
- with ``--data-dir``, ``restart.ClusterState`` on disk (the token, the workers, the
  placement, the highest node number), so that a controller started again on the
  same directory re-adopts the workers still running (they dial back and join
  afresh, their old readers serving reads meanwhile) and rebuilds the views from the
  write-ahead log (``restart.py``); and each base's anchor in that log (the batch
  after which it had taken so many writes), set only under the database's lock,
  where no write is between its logging and its base.

A worker lost (connection reset, or silent past the heartbeat timeout) has its nodes
moved to a warm spare process, and each is recovered with the configured strategy:
tree clocks where they apply, lineage otherwise. Recovery runs the same code as in the
embedded engine (``recovery/``), against this runtime's ``Runtime`` calls, which are
requests to the workers. With ``--regime coordinated`` the controller injects barriers
at the bases, aligned in flight by the workers, for epochs of snapshots instead of
tree clocks, and a lost worker rolls every node back to the last complete one
(``epochs.py``).
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sql_frontend import wire as plan_wire
from treeclock import TreeClocks

from ... import tuning
from ...batch import Batch
from ...errors import ArgumentError, Error, OperationalError, RecoveryError, TableLostError
from ...errors import named as named_error
from ...graph import Graph, Node
from ...memory import node_bytes
from ...nan import canon_row
from ...recovery import lineage, treeclock
from .. import Runtime
from ..checkpoints import Checkpoint, CheckpointStore
from ..domain import DomainInfo, graph_clocks
from ..history import WriteHistory
from ..messages import Message
from . import wire
from .causal import Causal
from .epochs import Epochs
from .errors import BaseDown, NodeDown, WorkerLost
from .falkirk import Falkirk
from .holders import apply as apply_checkpoint
from .holders import parse as parse_checkpoint
from .holders import used as holders_used
from .lines import REGIMES as LINE_REGIMES
from .lines import Lines
from .placement import Launched, Launcher, ProcessLauncher, cpu_seconds
from .remote_ops import RemoteOp
from .restart import ClusterState
from .wire import (
    decode_batch,
    decode_message,
    encode_batch,
    encode_checkpoint,
    encode_message,
)
from .writes import WRITES, disk_log, log_dir, log_parts

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypeAlias

    import numpy as np

    from sql_frontend.expr import Expr

    from ...ops.base import Base
    from ...recovery.report import RecoveryReport
    from ...storage import Storage
    from .partial import ClusterPartial

    #: a frame to or from a worker (see ``worker.py``): a list when built here, a tuple
    #: when relayed as a worker sent it (msgpack arrays decode as tuples)
    Frame: TypeAlias = list[Any] | tuple[Any, ...]

log = logging.getLogger("noria_py.cluster")

#: how messages travel between workers (``--channels``): through the controller, or
#: on direct worker-to-worker links (``channels.py``; ``serve``'s default)
CHANNELS = ("relay", "direct")
#: where ``ClusterRuntime.add`` places a node shard (``--placement``): "apart", on a
#: worker holding none of its parents (each edge between two workers where it can: a
#: lost worker leaves every lost node's neighbours alive, single failures for tree
#: clocks), but for a stateless operator of one parent, which sits with that parent
#: where the parent's own parents are elsewhere (its batches cross no worker; a lost
#: worker takes the pair, recovered two deep); "together", each shard's chain on one
#: worker (shard i of every sharded node on the i-th active worker, an unsharded node
#: with its first parent, a base on the least loaded): a batch crosses between
#: workers only where a sharder splits it, at the price of a lost worker taking whole
#: chains, which tree clocks recover two deep and lineage beyond
#: (docs/architecture.md, "Placement and the graph")
PLACEMENTS = ("apart", "together")
#: seconds a write or a table read made here waits for its base's restore
#: (``ClusterRuntime.base_down``) before it is refused (``RecoveryError``)
BASE_DOWN_TIMEOUT = 60.0
#: seconds ``wait`` gives the workers to handle what was sent to them, a round
WAIT_TIMEOUT = 60.0


def _among(counts: dict[str, int], live: dict[str, Any]) -> dict[str, int]:
    """``counts`` of the workers in ``live`` only."""
    return {w: n for w, n in counts.items() if w in live and n}


def _released_until(lock: threading.RLock, done: Callable[[], bool], timeout: float) -> None:
    """``lock``, which this thread holds, let go at every depth until ``done()`` is true
    or ``timeout`` seconds have passed, then held again as it was (a ``Condition``'s
    wait; ``done`` is polled): for a caller that waits for what a thread needing that
    lock does (``ClusterRuntime.base_down``: a recovery)."""
    held = threading.Condition(lock)
    deadline = time.monotonic() + timeout
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        held.wait(min(left, 0.05))


def _answered(answers: list[tuple[WorkerHandle, Future[Any]]], doing: str) -> None:
    """Wait for each worker's answer; a lost worker's is not needed (the caller says why),
    and one that does not come within ``WAIT_TIMEOUT`` (a stopped worker, not yet
    declared lost) is an ``OperationalError`` that names the worker and what it did not do."""
    for w, fut in answers:
        try:
            fut.result(WAIT_TIMEOUT)
        except WorkerLost:
            pass
        except TimeoutError:
            raise OperationalError(f"worker {w.name} (pid {w.pid}) did not {doing} within "
                                   f"{WAIT_TIMEOUT:.0f} s") from None


class WorkerHandle:
    def __init__(self, name: str, conn: wire.Connection, pid: int,
                 proc: Launched | None = None,
                 read: tuple[str, int] | None = None,
                 peer: tuple[str, int] | None = None) -> None:
        self.name = name
        self.conn = conn
        self.pid = pid
        self.proc = proc                 # a process or Ray actor we started, or None
        #: where clients read the readers it hosts (``reads.py``); "" as the host: the
        #: controller's (the worker binds every interface)
        self.read = read
        self.peer = peer                 # its peer port (direct channels: channels.py)
        self.alive = True
        #: when its last frame arrived or was done with; while ``handling`` one (its
        #: reader thread here busy: a checkpoint waiting for the store's lock during a
        #: recovery, a relay), its silence is this side's, not the worker's
        self.last_heard = time.monotonic()
        self.handling = False
        #: (CPU seconds, when) of its process, read while it is silent (``busy``)
        self.cpu_mark: tuple[float, float] | None = None
        self.busy_logged = False
        self.pending: dict[int, Future[Any]] = {}     # (replies, as decoded)
        self.outq: queue.SimpleQueue[Frame | None] = queue.SimpleQueue()   # None: stop
        self.lost_at: float | None = None    # when the controller declared it lost
        self.killed_at: float | None = None  # when db.fail() killed it (None: not by us)
        #: a worker that dialed back after its controller was lost: its answer to
        #: ``held``, what it held then (``Worker.holdings``; restart.py)
        self.held: Future[Any] | None = None
        self.sender: threading.Thread | None = None     # (``writer``'s thread)

    def silent(self, now: float) -> float:
        """For how long, at ``now``, this worker has sent nothing: no frame, and no
        bytes of a long frame (``wire.Connection.heard``: a table of a million rows
        takes seconds to arrive under load, and the worker's heartbeats queue behind
        it); 0 while a frame of its is handled here (this side's time)."""
        return 0.0 if self.handling else now - max(self.last_heard, self.conn.heard)

    def busy(self, now: float, silent: float, timeout: float) -> bool:
        """Whether this worker, silent past the heartbeat ``timeout`` for ``silent``
        s, is busy rather than hung (``tuning.SILENT_BUSY_MAX``): its process, on this
        machine, used CPU within each half ``timeout`` since its silence was first
        looked at here, and for less than ``SILENT_BUSY_MAX`` in all. False where
        the process cannot be seen (``placement.cpu_seconds``)."""
        cpu = None if self.proc is None else cpu_seconds(self.proc)
        if cpu is None or silent > tuning.SILENT_BUSY_MAX:
            return False
        mark = self.cpu_mark
        if mark is None or mark[1] < now - silent:      # (first look at this silence)
            self.cpu_mark = (cpu, now)
            self.busy_logged = False
            return True
        if cpu > mark[0]:
            self.cpu_mark = (cpu, now)
            return True
        return now - mark[1] < timeout / 2          # (CPU time counts in ticks)

    def put(self, frame: Frame | None) -> None:
        self.outq.put(frame)

    def writer(self) -> None:
        """Sends this worker's frames; never blocks a relay (no deadlock between two
        workers whose socket buffers are full)."""
        q, conn = self.outq, self.conn
        while True:
            f = q.get()
            if f is None:
                return
            batch = [f]
            while len(batch) < 64:
                try:
                    f = q.get_nowait()
                except queue.Empty:
                    break
                if f is None:
                    q.put(None)
                    break
                batch.append(f)
            try:
                conn.send_many(batch)
            except OSError:
                return


class ClusterRuntime(Runtime):
    """``Runtime`` over worker processes (see ``noria_py.runtime.Runtime``)."""

    automatic_recovery = True        # a lost worker's nodes are recovered on a spare
    asynchronous = True              # the workers run the messages as they come

    def __init__(self, graph: Graph, clocks: bool = True, shards: int = 1, workers: int = 1,
                 heartbeat_timeout: float = 1.0, strategy: str = "treeclock",
                 checkpoints: bool = True, channels: str = "relay",
                 barrier_every: int | None = None, writes: str = "controller",
                 policies: Mapping[str, str] | None = None,
                 determinant_depth: int | None = None, standbys: bool = False,
                 placement: str = "apart") -> None:
        """``strategy`` "coordinated": the coordinated regime (``epochs.py``), with an
        epoch every ``barrier_every`` writes (default ``tuning.BARRIER_EVERY``);
        "falkirk": ``policies`` is the per-node choice (``falkirk.py``; checked by
        ``regimes.policies``, None: each node's default); "causal": ``determinant_depth``
        and ``standbys`` (``causal.py``). ``placement``: where node shards go
        (``PLACEMENTS``)."""
        if channels not in CHANNELS:
            raise ArgumentError(f"channels must be one of {', '.join(CHANNELS)}, "
                                f"not {channels!r}")
        #: "relay": workers' messages go through here; "direct": worker to worker
        self.channels = channels
        self.direct = channels == "direct"
        if placement not in PLACEMENTS:
            raise ArgumentError(f"placement must be one of {', '.join(PLACEMENTS)}, "
                                f"not {placement!r}")
        #: where ``add`` places a new node shard (``PLACEMENTS``)
        self.placement_rule = placement
        if writes not in WRITES:
            raise ArgumentError(f"writes must be one of {', '.join(WRITES)}, not {writes!r}")
        #: "worker": each base's worker keeps its rows, validates its writes and keeps
        #: their log with its log replica's (``writes.py``): none of it is here
        self.writes = writes
        self.at_workers = writes == "worker"
        #: (writes at the workers) every write the bases took: a subscription's
        #: progress (``Runtime.taken_writes``), from each base's count of its writes
        #: as its worker answers a pause (``pause_writes``: ``times``), those of the
        #: tables dropped since (``dropped_writes``); and how deep ``hold`` is (the
        #: workers' writes paused at the first, resumed at its end)
        self.taken_writes = 0
        self.times: dict[str, int] = {}
        self.dropped_writes = 0
        self.hold_depth = 0
        self.held_workers: list[WorkerHandle] = []
        #: (writes at the workers) per base, the worker holding its log replica
        #: (``writes.py``; None: no other live worker at all, the owner's log alone,
        #: on disk with ``--data-dir``): the owner sends its writes there before
        #: acknowledging them; and per base whose owner was lost, that owner (whose
        #: whole log a live replica may hold: ``log_whole``)
        self.replicas: dict[str, str | None] = {}
        self.lost_owner: dict[str, str] = {}
        #: the bases the recovery under way has named a replica of already
        #: (``restore_logged_base``; not named again at its end)
        self.renamed: set[str] = set()
        #: whether ``serve`` has warned that a base with no other live worker and no
        #: ``--data-dir`` is acknowledged on its owner alone (once)
        self.warned_alone = False
        #: (writes at the workers, ``--data-dir``) where each worker keeps its bases'
        #: logs on disk, ``disk/<worker>/<base>`` (``writes.DiskLogs``; None: in memory
        #: only), and per base the directories of the lost workers that held its log
        #: since it was last restored (its owner, its replicas): what ``restore_base``
        #: reads when no live replica has the whole log (``log_left``)
        self.disk: Path | None = None
        self.lost_logs: dict[str, list[Path]] = {}
        #: (writes at the workers) the nodes of tables whose log was lost (no live
        #: replica with the whole log, no ``--data-dir``: ``_lose_tables``), the base's
        #: and every node over it, and what their reads and writes raise
        #: (``TableLostError``)
        self.lost_tables: dict[str, str] = {}
        self.graph = graph
        self.clocks = clocks
        self.checkpoints = clocks and checkpoints
        #: every worker's node shards' checkpoints (read by a recovery; a worker's
        #: reader thread puts them, under ``store_lock``)
        #: the coordinated regime's epochs (None: another regime)
        self.epochs: Epochs | None = (Epochs(self, barrier_every)
                                      if strategy == "coordinated" else None)
        #: the uncoordinated and cic regimes' points and logs (None: another regime)
        #: (falkirk's: ``falkirk.py``, built on them)
        self.lines: Lines | None = (Lines(self, strategy) if strategy in LINE_REGIMES
                                    else Falkirk(self, policies or {})
                                    if strategy == "falkirk" else None)
        #: the causal regime's marks and recovery (None: another regime)
        self.causal: Causal | None = (Causal(self, determinant_depth, standbys)
                                      if strategy == "causal" else None)
        #: the regime the workers are told (``config``): "treeclock" for lineage too
        self.regime = ("coordinated" if self.epochs is not None
                       else self.lines.regime if self.lines is not None
                       else "causal" if self.causal is not None else "treeclock")
        #: with direct channels in the treeclock regime, each worker's checkpoints go to
        #: a holder worker named here (``holders.py``), and there is no store here:
        #: per worker its holder (None: none yet, its checkpoints go nowhere), and per
        #: node of a lost worker (from its loss until its recovery is done) the holder
        #: then and that worker: where a recovery reads its checkpoints
        self.to_holders = self.checkpoints and holders_used(self.direct, self.regime)
        self.holders: dict[str, str | None] = {}
        self.ck_at: dict[str, tuple[str | None, str]] = {}
        self.store: CheckpointStore | None = (
            CheckpointStore() if (self.checkpoints or self.epochs is not None
                                  or self.lines is not None or self.causal is not None)
            and not self.to_holders else None)
        self.store_lock = threading.Lock()
        self.shards = shards
        self.target = workers
        self.heartbeat_timeout = heartbeat_timeout
        self.strategy = strategy
        self.tc: TreeClocks | None = None
        self.address: tuple[str, int] | None = None   # where local workers join
        self.token: str | None = None
        self.lock = threading.RLock()          # routing state below
        self.changed = threading.Condition(self.lock)
        self.workers: dict[str, WorkerHandle] = {}
        self.active: list[WorkerHandle] = []
        self.spares: list[WorkerHandle] = []
        self.placement: dict[str, str] = {}
        self.up: set[str] = set()              # nodes that take messages
        self.restored: set[str] = set()        # down nodes already rebuilt, not yet up
        self.held: dict[str, list[Frame]] = {}   # messages for nodes being recovered
        self.ddl_log: list[list[Any]] = []         # [catalog change, placement]
        self.new_placement: dict[str, str] = {}
        self.durable: dict[str, WriteHistory] = {}
        self.relayed = 0
        self.rids = itertools.count(1)
        #: (workers lost, their nodes, attempt): what the recovery thread works through
        self.lost: queue.SimpleQueue[tuple[list[WorkerHandle], list[str], int]] = queue.SimpleQueue()
        self.resets: list[str] = []            # nodes a lineage rebuild has emptied so far
        #: upqueries of partial readers awaiting their reader's answer (partial.py):
        #: request id -> (the reader's worker, the future); all fail when any worker
        #: is lost (their fill may have been lost with it)
        self.upqueries: dict[int, tuple[WorkerHandle, Future[Any]]] = {}
        #: how many times recovered nodes were released (``_release``): an upquery
        #: after a new one first makes sure its chain's workers have handled it
        self.releases = 0
        #: the partial-state manager (``partial_manager``; None without ``--partial``)
        self.partial: ClusterPartial | None = None
        self.control: threading.RLock | None = None    # the Database's lock, set by the server
        #: subscriptions' listeners per reader node shard (noria_py/subscribe.py): while
        #: there is one, its worker keeps what the reader applies for ``publish``
        self.listeners: dict[str, list[Any]] = {}
        self.changes_at: set[str] = set()      # listened readers with changes to drain
        self.on_recovery: Callable[[RecoveryReport], None] | None = None
        self.recovering = 0
        self.recovery_thread: int | None = None
        self.started = False
        self.broken: str | None = None         # set when a recovery gave up
        self.closed = False
        self._names = itertools.count(1)
        #: the names of the workers of the controller before (restart.py): given back
        #: to them only, as they dial back
        self.known_names: set[str] = set()
        #: starts the workers: subprocesses here, or Ray actors (``placement.py``)
        self.launcher: Launcher = ProcessLauncher()
        #: with ``--data-dir``: what a restarted controller needs (``restart.py``)
        self.state: ClusterState | None = None
        #: seconds a worker whose controller died waits for the next (0: it exits)
        self.rejoin_timeout = 0.0
        #: node numbers start after this one, here and on every worker (restart.py)
        self.first_number = 0
        #: set once the views are up (``retire``): a worker dialing back later (lost,
        #: then back) has its old readers dropped at once, superseded already
        self.retired = False
        #: the data directory's storage, once the database is open (``anchor_all``)
        self.storage: Storage | None = None
        #: base -> [lsn, t]: after batch lsn of the log it had taken t writes
        #: (restart.py); the log generation they were set in
        self.anchors: dict[str, list[int]] = {}
        self.anchored_gen = -1
        #: while a restarted controller builds again the graph its workers kept
        #: (``begin_adoption``): node -> the worker keeping it; their base times
        self.adopting: dict[str, str] | None = None
        self.adopt_times: dict[str, int] = {}
        #: the workers whose graph is kept: no catalog change of the adoption is sent
        #: to them (they have it)
        self.adopted: set[str] = set()
        #: while adopting: the catalog's statements in the order they were planned
        #: (``Database._restore`` plans them so; None: tables first, as it does)
        self.adopt_catalog: list[str] | None = None
        #: the tables and views, by name, in the order this controller planned them
        #: (cluster.json: a restart keeping the workers' nodes plans them so again)
        self.order: list[str] = []
        #: node numbers of this controller's graph start after this one (cluster.json)
        self.first = 0
        threading.Thread(target=self._monitor, daemon=True, name="heartbeats").start()
        threading.Thread(target=self._recoverer, daemon=True, name="recovery").start()

    # ------------------------------------------------------------ workers

    def spawn(self, n: int = 1) -> None:
        """Start ``n`` workers with the launcher; they join on their own."""
        self.launcher.start(n, cast(tuple[str, int], self.address), self.token)

    def died(self, pid: int) -> None:
        """The launcher saw the worker with ``pid`` die (Ray: its process or machine):
        lost, as when its connection ends, without waiting for the heartbeat timeout."""
        with self.lock:
            w = next((w for w in self.workers.values() if w.pid == pid and w.alive), None)
        if w is not None:
            log.warning("worker %s (pid %s) died, says the launcher", w.name, pid)
            try:                     # its reader sees the end, relays what it had
                w.conn.shutdown()    # read, then declares the loss
            except OSError:
                self._lose(w)

    def attach(self, conn: wire.Connection, hello: dict[str, Any]) -> threading.Thread:
        """A worker has authenticated: configure it, replay the catalog to it, and make
        it an active worker (while fewer than asked) or a spare. Returns the thread
        reading its connection, which ends with it."""
        pid = int(hello.get("pid") or 0)
        was = hello.get("was")
        with self.lock:
            if hello.get("rejoin") and type(was) is str and was not in self.workers \
                    and was in self.known_names:
                name = was              # (its name then: its nodes' placement says so)
            else:
                name = f"w{next(self._names)}"
                while name in self.workers or name in self.known_names:
                    name = f"w{next(self._names)}"
        proc = self.launcher.find(pid)
        read = hello.get("read")
        if not (isinstance(read, (tuple, list)) and len(read) == 2 and type(read[0]) is str
                and type(read[1]) is int and 0 < read[1] < 65536):
            read = None                  # (reads of its readers go through here)
        peer = hello.get("peer")
        if not (isinstance(peer, (tuple, list)) and len(peer) == 2 and type(peer[0]) is str
                and type(peer[1]) is int and 0 < peer[1] < 65536):
            peer = None
        elif not peer[0]:                # (it binds every interface: where it came from)
            peer = (conn.sock.getpeername()[0], peer[1])
        if self.direct and peer is None:
            raise wire.ProtocolError(f"worker from {conn.peer} has no peer port: it cannot "
                                     "take part in direct channels")
        w = WorkerHandle(name, conn, pid, proc, None if read is None else (read[0], read[1]),
                         None if peer is None else (peer[0], peer[1]))
        # (the node numbers the workers' planners start after: a restarted cluster's old
        # workers may still hold lower ones, restart.py)
        conn.send(["config", name, self.shards, self.clocks, self.checkpoints, self.channels,
                   self.first_number, self.rejoin_timeout, self.regime, self.writes,
                   None if self.disk is None else str(self.disk / name),
                   self.lines.choice if isinstance(self.lines, Falkirk) else {},
                   None if self.causal is None else self.causal.det.depth])
        with self.lock:
            if self.direct:
                # everyone learns where the newcomer listens, and it where they do,
                # before any placement on it is announced
                for o in self.workers.values():
                    if o.alive:
                        o.put(["peers", {name: w.peer}])
                w.put(["peers", {o.name: o.peer for o in self.workers.values() if o.alive}
                       | {name: w.peer}])
            if self.retired:
                w.put(["retire"])
            for change, placement in self.ddl_log:
                w.put(["ddl", change, placement])
            if self.direct:
                w.put(["place", dict(self.placement)])    # (moved since, by recoveries)
            self.workers[name] = w
            if hello.get("rejoin"):      # (asked before anyone counts it as back)
                w.held = self.request(w, "held")
            if not self.started and len(self.active) < self.target:
                self.active.append(w)
            else:
                self.spares.append(w)
            self.changed.notify_all()
        self.choose_replicas()          # (a base left with no replica gets this one)
        w.sender = threading.Thread(target=w.writer, daemon=True, name=f"{name}-send")
        w.sender.start()
        reader = threading.Thread(target=self._reader, args=(w,), daemon=True,
                                  name=f"{name}-recv")
        reader.start()
        if hello.get("rejoin"):
            log.warning("worker %s (pid %s) rejoined from %s, after its controller was lost",
                        name, pid, conn.peer)
        else:
            log.info("worker %s (pid %s) joined from %s", name, pid, conn.peer)
        self.save()
        return reader

    def save(self) -> None:
        """Write what a restarted controller needs (``restart.py``): the live workers,
        the placement and the highest node number (no-op without ``--data-dir``)."""
        if self.state is None:
            return
        with self.lock:
            workers = {w.name: {"pid": w.pid, "read": w.read, "peer": w.peer}
                       for w in self.workers.values() if w.alive}
            placement = dict(self.placement)
            numbers = max(self.graph.last_number, self.state.data["numbers"])
            anchors = {b: a for b, a in self.anchors.items() if b in self.durable}
        try:
            self.state.save(workers=workers, placement=placement, numbers=numbers,
                            anchors=anchors, first=self.first, order=list(self.order))
        except OSError as e:
            log.error("could not write %s: %s", self.state.path, e)
            raise

    def anchor_all(self, storage: Storage, lsn: int | None = None) -> None:
        """Anchor every base in the log (restart.py): after batch ``lsn`` (default: the
        last logged) it had taken the writes its history counts. Called under the
        database's lock only (at start, at a new table, after a snapshot)."""
        self.storage = storage
        at = storage.lsn if lsn is None else lsn
        with self.lock:
            self.anchors = {b: [at, len(h)] for b, h in self.durable.items()}
            self.anchored_gen = storage.generation

    def begin_adoption(self, placement: dict[str, str], times: dict[str, int],
                       first: int, catalog: list[str]) -> None:
        """Keep what the workers hold (restart.py): each rejoined worker takes back
        its graph and node shards (``["adopt"]``, before any other frame of this
        controller's but its config); the database's opening then builds the same
        graph here (numbered from ``first``, as it was), placing each node where it
        is, and neither sends the catalog's changes to those workers nor fills the
        nodes; each base's history starts at its time there (``times``). ``catalog``:
        the catalog's statements in the order they were planned, which made the
        graph the workers hold."""
        self.graph.number_from(first)
        self.first = self.first_number = first
        self.adopt_catalog = catalog
        with self.lock:
            self.adopting, self.adopt_times = dict(placement), dict(times)
            keepers = set(placement.values())
            for w in self.workers.values():
                if w.alive and w.held is not None:
                    self.adopted.add(w.name)
                    w.put(["adopt"])
            # the workers that hold nodes are the active ones; the others spares
            self.active = [w for w in self.workers.values() if w.alive and w.name in keepers]
            self.spares = [w for w in self.workers.values()
                           if w.alive and w.name not in keepers]
            self.changed.notify_all()

    def adopt_view(self, name: str, readers: list[str],
                   fresh: set[str]) -> tuple[set[str], set[str]]:
        """``Database._create_views``'s ``restore`` while adopting: every node of the
        view is filled already, on its worker."""
        return set(fresh), {n for n in fresh if self.graph[n].op.stateful}

    def finish_adoption(self) -> None:
        """The graph is built again: each base's history starts at its time on its
        worker (the table's rows as of then: the log holds nothing after it)."""
        with self.lock:
            for b, h in self.durable.items():
                h.start = self.adopt_times.get(b, 0)
            self.adopting = None
            self.adopted = set()
            self.adopt_catalog = None
        if self.epochs is not None:
            # (the epochs of the controller before died with it: one of what is kept
            # now, else a loss before the next one falls back on lineage)
            try:
                self.epochs.take(whole=True)
            except Error as e:
                log.warning("no epoch of the kept nodes yet: %s", e)
        if self.lines is not None and not self.lines.checkpoint_all():
            log.warning("no checkpoint of every kept node yet: the next loss is lineage's")

    def held_reports(self, timeout: float) -> dict[str, dict[str, Any]]:
        """What each worker that dialed back held under the controller before, by its
        name then (``Worker.holdings``); a worker that does not answer in time (or
        an older one that cannot) is left out."""
        with self.lock:
            futs = [(w.name, w.held) for w in self.workers.values()
                    if w.alive and w.held is not None]
        out = {}
        deadline = time.monotonic() + timeout
        for name, fut in futs:
            try:
                got = fut.result(max(0.0, deadline - time.monotonic()))
            except Exception:                # (lost, too slow, or no such request)
                continue
            if isinstance(got, dict) and type(got.get("worker")) is str \
                    and isinstance(got.get("nodes"), dict):
                if got["worker"] != name:
                    log.warning("worker %s reports what it held as %s", name, got["worker"])
                out[got["worker"]] = got
        return out

    def rejoined_count(self) -> int:
        with self.lock:
            return sum(1 for w in self.workers.values() if w.alive)

    def wait_for_rejoin(self, known: int, timeout: float) -> None:
        """Until ``known`` workers joined, or ``timeout`` seconds (a restart: the
        workers of the controller before dial back on their own)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.rejoined_count() < known:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)

    def retire(self) -> None:
        """Tell every worker that the readers it kept from before a restart may go
        (this controller's views are up): a read naming one is told ``moved``."""
        with self.lock:
            self.retired = True
            for w in self.workers.values():
                if w.alive:
                    w.put(["retire"])

    def wait_for_workers(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.active) < self.target or not self.spares:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Error(f"only {len(self.active) + len(self.spares)} of "
                                f"{self.target + 1} workers joined within {timeout:.0f} s")
                self.changed.wait(left)
            self.started = True          # later joiners are spares

    def _reader(self, w: WorkerHandle) -> None:
        recv = w.conn.recv
        try:
            while True:
                w.last_heard = time.monotonic()
                w.handling = False           # (after: the monitor never sees it false
                f = recv()                   # beside a time from before the frame)
                w.last_heard = time.monotonic()
                w.handling = True
                op = f[0]
                if op in ("msg", "bar"):    # (a barrier, coordinated: as a message)
                    self._relay(f[1], f)
                elif op == "ep" and self.epochs is not None:
                    self.epochs.on_report(f)
                elif op == "rep":
                    fut = w.pending.pop(f[1], None)
                    if fut is not None:
                        fut.set_result(f[2])
                elif op == "err":
                    fut = w.pending.pop(f[1], None)
                    if fut is not None:
                        cls = WorkerLost if f[2] == NodeDown.__name__ else Error
                        fut.set_exception(cls(f"worker {w.name}: {f[2]}: {f[3]}"))
                elif op == "progress":
                    self._relay(f[1], f)
                elif op == "fill":
                    self._relay(f[1], f)
                elif op == "mem":           # (a partial reader's worker after a fill)
                    if self.partial is not None:
                        self.partial.reported(w.name, *f[1:4])
                elif op == "trunc":
                    self._relay(f[1], f)
                elif op == "hlow":
                    history = self.durable.get(f[1])
                    if history is not None and type(f[2]) is int:
                        history.trim(f[2])
                elif op == "hb":
                    pass
                elif op in ("ck", "ck_keep", "ck_drop"):
                    self._checkpoint_frame(f)
                elif op == "pt" and self.lines is not None:
                    self.lines.on_point(f)
                elif op == "pt" and self.causal is not None:
                    self.causal.on_point(f)
                elif op == "log" and self.lines is not None and len(f) == 2 \
                        and isinstance(f[1], (list, tuple)):
                    self.lines.on_log(f[1])
                elif op == "sent" and isinstance(self.lines, Falkirk) and len(f) == 2 \
                        and isinstance(f[1], (list, tuple)):
                    self.lines.on_sent(f[1])
                elif op in ("sub", "sub_lost"):
                    self._listened(f)
                elif op == "peer_lost":
                    self._peer_lost(w, f)
                else:
                    raise wire.ProtocolError(f"unknown frame {op!r} from worker {w.name}")
        except (OSError, wire.ProtocolError) as e:
            if not self.closed:
                log.warning("worker %s lost: %s", w.name, e)
        self._lose(w)
        # closed here, by its reader, once its sender has stopped too: closed by another
        # thread, the descriptor could be the next worker's connection by the time
        # this one's reader or sender reaches the kernel (``wire.Connection.shutdown``)
        if w.sender is not None:
            w.sender.join(5.0)
        w.conn.close()

    def choose_replicas(self, renamed: Collection[str] = (),
                        recovering: bool | None = None) -> None:
        """Name each base's log replica (writes at the workers; ``writes.py``) where it
        has none alive, and for the bases in ``renamed`` (moved to a new owner) again:
        the first live active worker in placement order (a spare if no other is
        active) that hosts neither the base nor, where it can, its children; None when
        no other worker is alive (its owner's log alone: ``serve`` warns once without
        ``--data-dir``). The owner hears it after anything sent to it before (a
        restore, the fence of a loss). A base whose replica was lost is named the
        next one at once, even while a recovery is under way (its whole log then
        goes in the background beside the lost nodes' recovery): its writes'
        acknowledgements wait for a replica, and a writer may hold the server's lock
        that the recovery needs (a SQL statement's write, forwarded under its pause:
        the two waited for each other when the recovery's end named it; the
        controller's history no longer takes the writes meanwhile); one named while
        a recovery is under way is told to wait for ``fill_go`` before it sends the
        whole log (the recovery's end sends it: ``Worker.fill_go``), its writes
        going to the new replica meanwhile. ``recovering``
        is for the checkpoint holders, named here too by the same rule
        (``choose_holders``): a worker hosting nodes was lost, and the recovery that
        follows names them once done (None: whether a recovery is under way)."""
        self.choose_holders(recovering)
        if not self.at_workers or not self.direct or self.closed:
            return
        with self.lock:
            for base in self._bases():
                owner = self.workers.get(self.placement.get(base, ""))
                if owner is None or not owner.alive or base in self.lost_tables:
                    continue                # (named once it is restored)
                children = {self.placement.get(c) for c in self.graph[base].children}
                best = self._other_worker(owner, children)
                known = base in self.replicas and base not in renamed
                now = self.replicas.get(base)
                if known and (now is None and best is None or now is not None
                              and (r := self.workers.get(now)) is not None and r.alive):
                    continue
                name = None if best is None else best.name
                if known and name == now:
                    continue
                self.replicas[base] = name
                owner.put(["replica", base, name]
                          + ([1] if name is not None and self.recovering > 0 else []))
                if name is None and self.disk is None and not self.warned_alone:
                    self.warned_alone = True
                    log.warning("no second worker and no --data-dir: a worker's loss "
                                "loses its tables")

    def _other_worker(self, owner: WorkerHandle, avoid: Collection[str | None]
                      ) -> WorkerHandle | None:
        """The first live active worker in placement order but ``owner`` (a spare if no
        other is active), one not named in ``avoid`` where there is one; None when no
        other worker is alive (lock held)."""
        others = ([w for w in self.active if w.alive and w is not owner]
                  or [w for w in self.spares if w.alive and w is not owner])
        return next((w for w in others if w.name not in avoid), others[0] if others else None)

    def choose_holders(self, recovering: bool | None = None) -> None:
        """Name the checkpoint holder (``holders.py``) of each live active worker that
        has none alive: by the log replicas' rule (``_other_worker``), preferring one
        that hosts none of the children of its nodes, so that a lost node's children
        and its checkpoints rarely go together. A holder keeps its turn while it
        lives. ``recovering`` (None: whether a recovery is under way), a worker
        without a live holder gets None until the recovery's end names one (its
        nodes' checkpoints go nowhere meanwhile, and a loss of it rebuilds them), so
        that no worker taking over lost nodes is sent whole checkpoints meanwhile; a
        worker given one checkpoints every node whole to it, one a turn, from
        ``tuning.HOLDER_WHOLE_AFTER`` on (``Worker.set_holder``)."""
        if not self.to_holders:
            return
        with self.lock:
            if recovering is None:
                recovering = self.recovering > 0
            graph = self.graph.nodes
            for w in self.active:
                if not w.alive:
                    continue
                now = self.holders.get(w.name)
                h = self.workers.get(now or "")
                if h is not None and h.alive:
                    continue
                children = {self.placement.get(c) for n, p in self.placement.items()
                            if p == w.name and n in graph for c in graph[n].children}
                best = self._other_worker(w, children)
                name = None if best is None or recovering else best.name
                if w.name in self.holders and name == now:
                    continue
                self.holders[w.name] = name
                w.put(["ck_holder", name])

    def _bases(self) -> list[str]:
        """The base nodes placed on workers (lock held)."""
        nodes = self.graph.nodes
        return [n for n in self.placement if n in nodes and nodes[n].kind == "base"]

    def log_left(self, base: str) -> bool:
        """Whether a lost owner's base has a log holding every write that owner
        acknowledged (writes at the workers): its live log replica's, if that owner
        sent it whole (``log_whole``: the owner acknowledges a write only once its
        replica has it, and a new replica's writes only once it answered the whole
        log and them), else the longest of the logs its lost workers left on disk
        (``--data-dir``: the owner's holds every write it acknowledged, fsynced
        first). False (no log of the base's is left) is a lost table
        (``_lose_tables``), never a shorter one."""
        if self._whole_at_replica(base) is not None:
            return True
        with self.lock:
            return bool(self.lost_logs.get(base))

    def _whole_at_replica(self, base: str) -> WorkerHandle | None:
        """The base's live log replica if it holds the whole log of the base's lost
        owner (asked after the fence of the loss: it takes nothing more of it)."""
        with self.lock:
            r = self.workers.get(self.replicas.get(base) or "")
            owner = self.lost_owner.get(base, "")
        if r is None or not r.alive:
            return None
        try:
            return r if self.ask(r, "log_whole", base, owner) else None
        except WorkerLost:
            return None

    def drop_lost_logs(self, base: str) -> None:
        """The logs on disk of the base's lost workers, once no longer its log: the base
        restored (its new owner's log, made from the completed history, replaces them)
        or dropped. (A lost owner's may hold writes it never had acknowledged, which
        would be taken for its table's at a restart: ``writes.tables_on_disk``.)"""
        with self.lock:
            lost = self.lost_logs.pop(base, [])
        for d in dict.fromkeys(lost):
            shutil.rmtree(d, ignore_errors=True)

    def landed_at_replica(self, base: str, tag: int) -> bool:
        """Whether the base's log replica has the write tagged ``tag`` (its owner lost:
        asked after the fence of the loss, so the replica takes nothing more of it)."""
        with self.lock:
            r = self.workers.get(self.replicas.get(base) or "")
        return self._landed_at(r, base, tag)

    def _landed_at(self, w: WorkerHandle | None, base: str, tag: int) -> bool:
        if w is None or not w.alive:
            return False
        try:
            return bool(self.ask(w, "log_landed", base, tag))
        except WorkerLost:
            return False

    def has_landed(self, base_id: str, tag: int) -> bool:
        """Whether the write tagged ``tag`` is in the base's log (one of its last
        ``LANDED_KEPT``), as the tags of the log a restored base took say (at its
        worker: its replica's, promoted, or those read with it from its replica or the
        lost workers' disks); while it is down, its live replica's."""
        if not self.at_workers:
            return False
        with self.lock:
            up = base_id in self.up
            w = self.workers.get(self.placement.get(base_id, ""))
        if up:
            return self._landed_at(w, base_id, tag)
        return self.landed_at_replica(base_id, tag)

    def forward(self, base_id: str, batch: Batch) -> None:
        """A write made here (SQL, or a table handle at the controller), its rows checked
        one by one (types, NOT NULL) but not against the table: validated by the base's
        worker (``Worker.controller_write``), whose answer comes once the log holds it.
        While the base is down it waits for its restore (``base_down``): no copy of the
        table here validates. Its worker lost meanwhile, the write is done if the log
        has it (its tag, in the same frame: at the replica, ``log_landed``, asked after
        the fence of the loss, or in the tags the restored base took with its log,
        ``has_landed``), else sent again once the base is back."""
        tag = secrets.randbits(62) or 1
        encoded = encode_batch(batch)
        sent = False                    # (to a worker lost before it answered)
        while True:
            with self.lock:
                if base_id not in self.placement:
                    raise Error(f"node {base_id} is gone (its table was dropped)")
                up = base_id in self.up
                w = self.workers.get(self.placement[base_id])
            if not up or w is None or not w.alive:
                self.base_down(base_id)
                continue
            if sent and self.has_landed(base_id, tag):
                return                  # (in the log its restore took)
            try:
                said = self.request(w, "cwrite", base_id, encoded, tag).result(300.0)
            except WorkerLost:
                if not self.landed_at_replica(base_id, tag):
                    sent = True
                    continue            # (not in the log yet: never applied, or on a disk)
                said = []
            if said is None:
                continue                # (not up there: nothing was written; again)
            if said:                    # [error class name, message]: rejected whole
                raise named_error(str(said[0]), str(said[1]))
            return

    def base_down(self, base_id: str) -> None:
        """Base ``base_id`` is down (its worker lost, its restore not done): wait for it
        to be up again, the server's lock (``control``, held by the caller, and taken
        by the recovery) let go meanwhile, for at most ``BASE_DOWN_TIMEOUT`` seconds
        (then ``RecoveryError`` naming the table). Under a pause of the writes
        (``hold``: a SQL statement, a catalog change) ``BaseDown`` instead, which its
        caller undoes and runs again after the recovery (``Server._catalog_change``);
        on the recovery's own thread ``RecoveryError`` (it restores the bases first)."""
        table = cast("Base", self.graph[base_id].op).schema.name
        with self.lock:
            lost = self.lost_tables.get(base_id)
        if lost is not None:
            raise TableLostError(lost)
        if threading.get_ident() == self.recovery_thread:
            raise RecoveryError(f"table {table!r}: its base is down during a recovery")
        if self.hold_depth:
            raise BaseDown(f"table {table!r}: its base's worker was lost")

        def back() -> bool:
            with self.lock:
                return (base_id in self.up or base_id not in self.placement
                        or base_id in self.lost_tables)
        if self.control is not None:
            _released_until(self.control, back, BASE_DOWN_TIMEOUT)
        else:
            self.wait_up(base_id, BASE_DOWN_TIMEOUT)
        with self.lock:
            lost = self.lost_tables.get(base_id)
        if lost is not None:
            raise TableLostError(lost)
        if not back():
            raise RecoveryError(f"table {table!r} has been down for over "
                                f"{BASE_DOWN_TIMEOUT:.0f} s (its worker was lost)")

    def table(self, base_id: str) -> Batch:
        """``Runtime.table``: with writes at the workers, asked of the base's worker
        (``Worker.req_table``: the rows its acknowledged writes made; no copy of them
        is kept here), once the base is up (``_at_base``); with writes at the
        controller, the base operator here, which is the table."""
        got = self._at_base(base_id, "table")
        return super().table(base_id) if got is None else decode_batch(got)

    def table_size(self, base_id: str) -> int:
        """``Runtime.table_size``, as ``table`` reads the rows."""
        got = self._at_base(base_id, "table_size")
        return super().table_size(base_id) if got is None else int(got)

    def matching(self, base_id: str, where: Expr | None) -> list[tuple[Any, ...]] | None:
        """``Runtime.matching``: with writes at the workers, ``where`` is tested at the
        base's worker (``Worker.req_matching``), on the rows ``table`` would read there,
        and only the rows matched cross."""
        got = self._at_base(base_id, "matching",
                            None if where is None else plan_wire.to_data(where))
        if got is None:
            return super().matching(base_id, where)
        return [canon_row(r) for r, _ in decode_batch(got[0])] if got else None

    def primary_keys(self, base_id: str) -> list[tuple[Any, ...]]:
        """``Runtime.primary_keys``, as ``table`` reads the rows: asked of the base's
        worker (``Worker.req_primary_keys``), only the keys crossing."""
        got = self._at_base(base_id, "primary_keys")
        return super().primary_keys(base_id) if got is None else decode_batch(got).rows

    def rows_by_key(self, base_id: str, keys: list[tuple[Any, ...]]) -> list[tuple[Any, ...] | None]:
        """``Runtime.rows_by_key``, as ``table`` reads the rows."""
        got = self._at_base(base_id, "rows_by_key", keys)
        return (super().rows_by_key(base_id, keys) if got is None
                else [None if r is None else canon_row(tuple(r)) for r in got])

    def _at_base(self, base_id: str, method: str, *args: Any) -> Any:
        """The answer of the base's worker to ``method`` (writes at the workers), once
        the base is up (``base_down`` waits for its restore); None with writes at the
        controller (the copy here is the table)."""
        if not self.at_workers:
            return None
        while True:
            with self.lock:
                # (restored, not yet released: a lineage rebuild on the recovery's
                # thread reads it, its rows at its worker)
                up = base_id in self.up or base_id in self.restored
                w = self.workers.get(self.placement.get(base_id, ""))
            if up and w is not None and w.alive:
                try:
                    return self.ask(w, method, base_id, *args)
                except WorkerLost:
                    pass
            elif base_id not in self.placement:
                raise Error(f"node {base_id} is gone (its table was dropped)")
            self.base_down(base_id)

    def pause_writes(self) -> list[WorkerHandle]:
        """Hold clients' writes at the workers (writes at the workers) for a catalog
        change, which fills new nodes from the bases' rows at their workers
        (``table``): once each live worker has answered, every write it accepted is
        durable and passed on (``Worker._paused_yet``), ``taken_writes`` counts them
        (each answer holds its bases' counts of their writes), and none is taken until
        ``resume_writes``. If this raises (a worker
        that does not answer within ``WAIT_TIMEOUT``: ``OperationalError``), the workers it paused are
        resumed first: a failed catalog change leaves no writer waiting."""
        if not self.at_workers:
            return []
        ws: list[WorkerHandle] = []
        try:
            with self.lock:
                answers = []
                for w in [w for w in self.workers.values() if w.alive]:
                    rid = next(self.rids)
                    fut: Future[Any] = Future()
                    w.pending[rid] = fut
                    ws.append(w)
                    w.put(["pause", rid])
                    answers.append((w, fut))
            # (a lost worker's writes: in its bases' logs, for the recovery)
            _answered(answers, "hold its clients' writes for a catalog change")
        except BaseException:
            self.resume_writes(ws)      # (none left holding its clients' writes)
            raise
        with self.lock:
            for w, fut in answers:
                if fut.done() and fut.exception() is None and isinstance(fut.result(), dict):
                    for b, t in fut.result().items():
                        if self.placement.get(b) == w.name and type(t) is int:
                            self.times[b] = max(t, self.times.get(b, 0))
            self.taken_writes = self.dropped_writes + sum(self.times.values())
        return ws

    def resume_writes(self, ws: list[WorkerHandle]) -> None:
        with self.lock:
            for w in ws:
                if w.alive:
                    w.put(["resume"])

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """``Runtime.hold``: with writes at the workers, their clients' writes paused
        (``pause_writes``: every one accepted before is durable, counted in
        ``taken_writes``, and passed on) until the outermost ``hold`` ends. Its holder
        has the database's lock, as every pauser does, so no other pause overlaps."""
        if self.hold_depth == 0:
            self.held_workers = self.pause_writes()
        self.hold_depth += 1
        try:
            yield
        finally:
            self.hold_depth -= 1
            if self.hold_depth == 0:
                paused, self.held_workers = self.held_workers, []
                self.resume_writes(paused)

    def write_address(self, base_id: str) -> list[Any] | None:
        """Where a client writes the table of base ``base_id`` (writes at the workers):
        ``[base, [host, read port]]``; None: through here. ``WorkerLost`` while the base
        is down."""
        if not self.at_workers:
            return None
        (addr,) = self.read_addresses([base_id])
        return None if addr is None else [base_id, list(addr)]

    def _checkpoint_frame(self, f: Frame) -> None:
        """A worker's call on its checkpoint store (``holders.RemoteStore``), made here
        (relay, and the regimes other than treeclock and lineage: ``holders.used``)."""
        store = self.store
        if store is None:
            raise wire.ProtocolError("a checkpoint from a worker whose checkpoints go "
                                     "elsewhere (off, or to a holder worker)")
        c = parse_checkpoint(f)
        causal = getattr(self, "causal", None)    # (its standby gets it too, in order)
        lines = getattr(self, "lines", None)
        if c.op == "ck" and lines is not None:    # (folded below the lowest line)
            c.stable = lines.stable(c.node, c.stable)
        with self.store_lock:
            apply_checkpoint(store, c)
            if causal is not None:
                causal.on_checkpoint(f)

    def _listened(self, f: Frame) -> None:
        """A listened reader has changes to drain (``["sub", node, None]``), or lost its
        rows (``["sub_lost", node, why]``, for its listeners)."""
        if len(f) != 3 or type(f[1]) is not str:
            raise wire.ProtocolError("expected [\"sub\" | \"sub_lost\", node, data]")
        with self.lock:
            if f[0] == "sub":
                self.changes_at.add(f[1])
                return
            listeners = list(self.listeners.get(f[1], ()))
        for listener in listeners:
            listener.lost(str(f[2]))

    def _peer_lost(self, reporter: WorkerHandle, f: Frame) -> None:
        """A worker could not dial or write its link to another (direct channels):
        that one counts as lost, so that no message is dropped while its receiver
        goes on (it is killed, as a hung worker is)."""
        if len(f) != 2 or type(f[1]) is not str:
            raise wire.ProtocolError("expected [\"peer_lost\", worker]")
        with self.lock:
            w = self.workers.get(f[1])
        if w is None or not w.alive:
            return
        log.warning("worker %s cannot reach worker %s: %s is lost", reporter.name, w.name,
                    w.name)
        if w.proc is not None:
            w.proc.kill()
        try:
            w.conn.shutdown()
        except OSError:
            self._lose(w)

    def _relay(self, dst: str, frame: Frame) -> None:
        if self.lines is not None and frame[0] == "msg" and frame[2][0] not in self.durable:
            self.lines.on_log([frame[2]])       # (a base's log is its write history)
        with self.lock:
            if dst in self.up:
                self.workers[self.placement[dst]].put(frame)
                self.relayed += 1
            elif frame[0] == "msg" and dst in self.held:     # (a fill is dropped)
                self.held[dst].append(frame)
            # else: a node gone, or down and not yet being recovered: lost, as in a crash

    def _lose(self, w: WorkerHandle) -> None:
        with self.lock:
            if not w.alive:
                return
            w.alive = False
            w.lost_at = time.monotonic()
            w.put(None)
            if self.direct:
                # the fence (docs/architecture.md, "Direct channels"): each live worker
                # handles this before any question of the recovery, and nothing of
                # ``w`` after it
                for o in self.workers.values():
                    if o.alive:
                        o.put(["lost", w.name])
            if w in self.active:
                self.active.remove(w)
            if w in self.spares:
                self.spares.remove(w)
            mine = [n for n, p in self.placement.items() if p == w.name]
            for n in self._bases() if self.at_workers else ():
                if self.placement.get(n) == w.name:
                    self.lost_owner[n] = w.name
                if self.disk is not None and w.name in (self.placement.get(n),
                                                        self.replicas.get(n)):
                    table = cast("Base", self.graph[n].op).schema.name
                    self.lost_logs.setdefault(n, []).append(log_dir(self.disk / w.name,
                                                                    table))
            if self.to_holders:
                # where a recovery finds their checkpoints (a node down already, its
                # recovery under way, keeps the place it had: it took none here since)
                holder = self.holders.pop(w.name, None)
                self.ck_at.update({n: (holder, w.name) for n in mine if n in self.up})
            for n in mine:
                self.up.discard(n)
                self.restored.discard(n)
                self.held[n] = []
            self._drop_held_from(set(mine))
            for fut in w.pending.values():
                fut.set_exception(WorkerLost(f"worker {w.name} (pid {w.pid}) was lost"))
            w.pending.clear()
            self.fail_upqueries(f"worker {w.name} (pid {w.pid}) was lost")
            if self.partial is not None:    # (its share of the memory limit is free)
                self.partial.worker_lost(w.name, mine)
            if mine and not self.closed:
                self.recovering += 1
            self.changed.notify_all()
        for n in mine:                       # outside the lock: a listener detaches
            for listener in list(self.listeners.get(n, ())):
                listener.lost(f"its worker {w.name} was lost")
        try:                                 # (its reader closes it: ``_reader``)
            w.conn.shutdown()
        except OSError:
            pass
        if w.proc is not None:
            w.proc.kill()                    # a hung worker must not come back
        if not self.closed and self.state is not None:
            try:
                self.save()
            except OSError:
                pass                         # (logged; the next change writes it again)
        # (for the bases whose replica it was; named at once unless a recovery follows)
        self.choose_replicas(recovering=bool(mine) and not self.closed)
        if mine and not self.closed:
            self.lost.put(([w], mine, 1))
        elif not self.closed and self.address is not None:
            self.spawn(1)                    # a lost spare is replaced

    def _monitor(self) -> None:
        while not self.closed:
            time.sleep(min(0.1, self.heartbeat_timeout / 4))
            now = time.monotonic()
            for w in list(self.workers.values()):
                silent = w.silent(now)
                if w.alive and silent > self.heartbeat_timeout:
                    if w.busy(now, silent, self.heartbeat_timeout):
                        if not w.busy_logged and silent > 2 * self.heartbeat_timeout:
                            w.busy_logged = True
                            log.warning("worker %s silent for %.2f s but busy (its "
                                        "process using CPU): not lost", w.name, silent)
                        continue
                    log.warning("worker %s silent for %.2f s", w.name, silent)
                    if w.proc is not None:
                        w.proc.kill()
                    try:                     # its reader sees the end, relays what it
                        w.conn.shutdown()    # had read, then declares the loss
                    except OSError:
                        self._lose(w)

    def _take_spare(self, timeout: float = 60.0, wait: bool = True) -> WorkerHandle | None:
        """A spare made active (a new spare is started meanwhile); without ``wait``,
        None when none is ready now."""
        deadline = time.monotonic() + timeout
        with self.lock:
            if not wait and not self.spares:
                return None
            while not self.spares:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RecoveryError("no spare worker joined to take over the lost nodes")
                self.changed.wait(left)
            w = self.spares.pop(0)
            self.active.append(w)
        if self.address is not None:
            self.spawn(1)                    # the next spare warms up meanwhile
        return w

    # ------------------------------------------------------------ partial readers

    def partial_manager(self, limit: int | None) -> Any:
        """The ``Database``'s partial-state manager in a cluster (``partial.py``)."""
        from .partial import ClusterPartial
        self.partial = ClusterPartial(self.graph, self, limit)
        return self.partial

    def expect_upquery(self, w: WorkerHandle) -> tuple[int, Future[Any]]:
        """A request id whose answer worker ``w`` (a partial reader's) will send when
        the fill reaches it, and the future it sets."""
        fut: Future[Any] = Future()
        rid = next(self.rids)
        with self.lock:
            if not w.alive:
                raise WorkerLost(f"worker {w.name} was lost")
            w.pending[rid] = fut
            self.upqueries[rid] = (w, fut)
        fut.add_done_callback(lambda _: self.upqueries.pop(rid, None))
        return rid, fut

    def forget_upquery(self, rid: int) -> None:
        with self.lock:
            w, _ = self.upqueries.pop(rid, (None, None))
            if w is not None:
                w.pending.pop(rid, None)

    def fail_upqueries(self, why: str) -> None:
        """Every upquery outstanding fails (lock held): a worker was lost, and a fill
        on its way through it with it; the callers upquery again once it is back."""
        for rid, (w, fut) in list(self.upqueries.items()):
            if w.pending.pop(rid, None) is not None:
                fut.set_exception(WorkerLost(why))

    # ------------------------------------------------------------ requests

    def worker_of(self, node_id: str) -> WorkerHandle:
        with self.lock:
            w = self.workers.get(self.placement.get(node_id, ""))
            lost = self.lost_tables.get(node_id)
        if lost is not None:
            raise TableLostError(lost)
        if w is None or not w.alive:
            raise WorkerLost(f"node {node_id} has no live worker")
        return w

    def request(self, w: WorkerHandle, method: str, *args: Any) -> Future[Any]:
        """Queue a request to ``w``; the future fails with WorkerLost if ``w`` is lost."""
        fut: Future[Any] = Future()
        rid = next(self.rids)
        with self.lock:
            if not w.alive:
                raise WorkerLost(f"worker {w.name} was lost")
            w.pending[rid] = fut
            w.put(["req", rid, method, list(args)])
        return fut

    def ask(self, w: WorkerHandle, method: str, *args: Any, timeout: float = 300.0) -> Any:
        return self.request(w, method, *args).result(timeout)

    def call(self, node_id: str, method: str, *args: Any) -> Any:   # the reply, as decoded
        return self.ask(self.worker_of(node_id), method, node_id, *args)

    def read_addresses(self, node_ids: list[str]) -> list[tuple[str, int] | None]:
        """Where clients read each reader node shard (its worker's read port), or None
        where that worker has none; raises ``WorkerLost`` for a node not up."""
        with self.lock:
            out = []
            for n in node_ids:
                if n not in self.placement:
                    raise Error(f"node {n} is gone (its view was dropped)")
                if n in self.lost_tables:
                    raise TableLostError(self.lost_tables[n])
                w = self.workers.get(self.placement[n])
                if w is None or not w.alive or n not in self.up:
                    raise WorkerLost(f"node {n} is down until its recovery")
                out.append(w.read)
            return out

    # ------------------------------------------------------------ structure

    def add(self, node: Node) -> None:
        with self.lock:
            counts = {w.name: 0 for w in self.active}
            for nid, p in self.placement.items():
                if p in counts:
                    counts[p] += 1
            where = self._place(node, counts)
            if self.adopting is not None:
                where = self.adopting[node.id]       # (where it is kept)
            self.placement[node.id] = where
            self.new_placement[node.id] = where
            self.up.add(node.id)
        if node.kind == "base":
            if not self.at_workers:         # (else its log is at its worker's, only)
                self.durable.setdefault(node.id, WriteHistory(cast("Base", node.op)))
        elif node.op.stateful:
            node.op = RemoteOp(self, node, node.op)

    def _place(self, node: Node, counts: dict[str, int]) -> str:
        """The active worker a new node shard goes to (``PLACEMENTS``), given how many
        nodes each holds."""
        if self.placement_rule == "together":
            if node.shard is not None:
                return self.active[node.shard % len(self.active)].name
            parent = self.placement.get(node.parents[0]) if node.parents else None
            if parent in counts:
                return parent
            return min(self.active, key=lambda w: counts[w.name]).name
        if not node.op.stateful and len(node.parents) == 1 and node.kind != "sharder":
            # a stateless operator (a project, a filter) goes with its one parent, where
            # that parent's worker holds none of the parent's own parents: its batches
            # then cross no worker (the vote view's project: 1.2x the votes/s), and
            # a lost worker takes a chain two deep at most, which tree clocks recover
            # from the live grandparent (docs/recovery.md, "Concurrent failures")
            at = self.placement.get(node.parents[0])
            if at in counts and at not in {self.placement.get(g)
                                           for g in self.graph[node.parents[0]].parents}:
                return at
        near = {self.placement.get(p) for p in node.parents}
        # neighbours on other workers: one lost worker then leaves each lost node's
        # parents and children alive, which is where tree clocks recover from
        return min(self.active, key=lambda w: (w.name in near, counts[w.name])).name

    def announce(self, change: tuple[Any, ...]) -> None:
        kind = change[0]
        if kind == "table":
            data = ["table", plan_wire.to_data(change[1])]
        elif kind == "view":
            data = ["view", change[1], plan_wire.to_data(change[2])]
        elif kind == "remove":
            data = ["remove", list(change[1])]
        elif kind in ("partial", "full"):   # (a reader made partial, an aggregate on its
            data = [kind, *change[1:]]      # chain full again: partial.py)
        else:
            data = ["drop_table", change[1], change[2]]
        log.info("catalog change %s", data[:2])
        if kind in ("table", "view"):
            name = (change[1].name if kind == "table" else change[1]).lower()
            self.order = [n for n in self.order if n != name] + [name]
        if self.storage is not None:         # (a new table's base: anchored at 0 writes)
            with self.lock:
                for b, h in self.durable.items():
                    self.anchors.setdefault(b, [self.storage.lsn, len(h)])
        # on disk before any worker has the new nodes: a restarted controller numbers
        # its own after them (restart.py)
        self.save()
        with self.lock:
            placement, self.new_placement = self.new_placement, {}
            self.ddl_log.append([data, placement])
            for w in self.workers.values():
                if w.alive and w.name not in self.adopted:
                    w.put(["ddl", data, placement])
        self.choose_replicas()

    def remove(self, node_id: str) -> None:
        with self.lock:
            self.placement.pop(node_id, None)
            self.up.discard(node_id)
            self.held.pop(node_id, None)
        self.durable.pop(node_id, None)
        self.replicas.pop(node_id, None)
        self.lost_owner.pop(node_id, None)
        with self.lock:
            self.lost_tables.pop(node_id, None)
            self.dropped_writes += self.times.pop(node_id, 0)
        self.ck_at.pop(node_id, None)
        self.drop_lost_logs(node_id)
        if self.store is not None:
            with self.store_lock:
                self.store.drop(node_id)
        if self.epochs is not None:
            self.epochs.forget(node_id)
        if self.lines is not None:
            self.lines.forget(node_id)
        if self.causal is not None:
            self.causal.forget(node_id)

    def refresh_clocks(self) -> None:
        if self.clocks:
            self.tc = graph_clocks(self.graph, self.tc)

    def settle(self, fresh: set[str], adopted: set[str] | None = None) -> None:
        self.refresh_clocks()
        if self.adopting is not None:
            return                           # (settled on their workers already)
        for nid in self.graph.topological():
            if nid in fresh and self.graph[nid].parents:
                parents = {}
                for p in self.graph[nid].parents:
                    i = self.info(p)
                    parents[p] = [i.time, wire.encode_array(i.clock), p in fresh]
                self.call(nid, "settle", parents)
        if self.epochs is not None and fresh:
            # a whole epoch on the graph as it now stands (filled outside the message
            # path: no delta can say what changed); a node down: none covers it
            if not self.epochs.take(whole=True):
                self.epochs.invalidate()
        if self.causal is not None and fresh:
            self.causal.settle(fresh)
        if self.lines is not None and fresh:
            # every node at once, on the graph as it now stands (a node down: none
            # covers the new nodes, and the next recovery is lineage's)
            self.lines.checkpoint_all()

    # ------------------------------------------------------------ writes

    def write(self, base_id: str, batch: Batch) -> None:
        """Accepted (the controller's copy of the table and its history hold it); the
        base node gets it now, or from the history if its worker is being replaced.
        With writes at the workers (a restarted controller's tables, reopened from
        the workers' logs), only the base's worker takes it, into its log."""
        if self.epochs is not None and self.adopting is None:
            self.epochs.before_write()        # (an epoch first, when one is due)
        if self.lines is not None and self.adopting is None:
            self.lines.before_write()         # (cic's tick, garbage collection)
        st = self.storage
        if st is not None and st.generation != self.anchored_gen:
            # the log was snapshotted: its batches so far are folded, so anchor every
            # base after them (this write is logged already, not yet in its base)
            self.anchor_all(st, st.lsn - 1)
            self.save()
        if self.at_workers:
            with self.lock:
                w = self.workers.get(self.placement.get(base_id, ""))
                if base_id not in self.up or w is None or not w.alive:
                    raise RecoveryError(f"base {base_id}: its worker was lost while its "
                                        "table was reopened")
                w.put(["write", base_id, encode_batch(batch)])
            return
        self.graph[base_id].op.process(0, batch)
        if self.adopting is not None:
            # the table's rows, reopened: as of the base's time on its worker, which
            # holds them already (``finish_adoption`` sets the history's start)
            self.durable[base_id].folded.process(0, batch)
            return
        self.durable[base_id].append(batch)
        with self.lock:
            if base_id in self.up:
                self.workers[self.placement[base_id]].put(["write", base_id, encode_batch(batch)])

    def check_writable(self, base_id: str, table: str) -> None:
        """Writes to a table whose worker is down are kept and applied on recovery."""

    def wait(self) -> None:
        """Every message caused by writes accepted before the call has been processed:
        one round of pings processes what was relayed before it, so depth + 1 rounds
        cover the longest path. A worker lost meanwhile raises ``WorkerLost``: what it
        had not processed is not reflected (a migration must not start from that)."""
        if self.direct:
            self._wait_direct()
            return
        for _ in range(self._rounds()):
            before = self.relayed
            with self.lock:
                futs = [self.request(w, "ping") for w in self.workers.values() if w.alive]
                down = [n for n in self.placement
                    if n not in self.up and n not in self.lost_tables]
            if self.broken:
                raise RecoveryError(self.broken)
            if down and threading.get_ident() != self.recovery_thread:
                raise WorkerLost(f"nodes {down[:5]} are down until their recovery")
            for f in futs:
                f.result(60)
            if self.relayed == before:
                return

    def _counts(self) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        """Each live worker's frames sent to each worker and handled from each, asked
        in order with everything sent to it before (``Worker.req_counts``)."""
        with self.lock:
            futs = [(w.name, self.request(w, "counts")) for w in self.workers.values()
                    if w.alive]
            down = [n for n in self.placement
                    if n not in self.up and n not in self.lost_tables]
        if self.broken:
            raise RecoveryError(self.broken)
        if down and threading.get_ident() != self.recovery_thread:
            raise WorkerLost(f"nodes {down[:5]} are down until their recovery")
        out = {}
        for name, f in futs:
            sent, handled = f.result(60)
            out[name] = (dict(sent), dict(handled))
        return out

    def _wait_direct(self) -> None:
        """``wait`` with direct channels, by counts instead of pings through one queue:
        the first round is answered after every write accepted before the call (they
        reach a base's worker on the same connection), so what those writes made its
        worker send is in that round's sent counts. Each next round waits until every
        live worker has handled at least what the others had sent it by the round
        before (handled counts a frame once it is done, its own sends counted first),
        so after depth + 1 rounds the longest path is done; a round in which nothing
        more was sent ends it early. Frames to or from a lost worker do not count:
        what it had not handled is recovered (and the nodes down make ``wait`` raise
        ``WorkerLost``, as with the relay)."""
        before = self._counts()
        for _ in range(self._rounds()):
            spins = 0
            deadline = time.monotonic() + WAIT_TIMEOUT
            while True:
                now = self._counts()
                behind = [(i, j) for i, (sent, _) in before.items() if i in now
                          for j, n in sent.items() if j in now and now[j][1].get(i, 0) < n]
                if not behind:
                    break
                if time.monotonic() > deadline:
                    raise OperationalError(
                        f"wait(): frames sent {behind[0][0]} -> {behind[0][1]} not handled "
                        f"after {WAIT_TIMEOUT:.0f} s")
                spins += 1
                if spins > 3:
                    time.sleep(0.001)
            if all(_among(now[i][0], now) == _among(before.get(i, ({}, {}))[0], now)
                   for i in now):
                return
            before = now

    def publish(self, then: Callable[[int], None]) -> None:
        """A quiet point for subscriptions, if a listened reader changed since the last:
        with the writers held back (the database's lock, and with writes at the
        workers ``hold``), every accepted write is processed and each such reader's
        changes are cut at its worker (``cut``: set aside, no per-row work); then, the
        workers' writes going on again (what they change at those readers waits there
        for the next cut), the cut changes are drained to the readers' listeners and
        ``then(taken_writes)`` runs, with ``taken_writes`` as of the hold: every write
        the changes reflect and no other (docs/architecture.md, "Which write path a
        server takes"). A first wait with the writers going on takes most of the time,
        so the one that holds them is mostly a single round of pings; the per-row work
        on the changes (consolidating, encoding, decoding, the listeners') is done
        outside the hold."""
        if not self.changes_at:
            return
        self.wait()
        with self.control or threading.RLock():
            with self.hold():
                self.wait()
                with self.lock:
                    nodes = [n for n in self.changes_at if n in self.listeners and n in self.up]
                    self.changes_at.clear()
                    cuts = [self.request(self.worker_of(n), "cut", n) for n in nodes]
                for fut in cuts:
                    fut.result(60)
                taken = self.taken_writes
            with self.lock:
                asked = [(n, self.request(self.worker_of(n), "drain", n)) for n in nodes]
            for n, fut in asked:
                batch = decode_batch(fut.result(60))
                with self.lock:
                    listeners = list(self.listeners.get(n, ()))
                for listener in listeners:
                    listener.changed(batch)
            then(taken)

    def listen(self, node_id: str, listener: Any) -> None:
        """The reader's worker starts keeping what the reader applies, for ``publish``
        to drain (a request: every batch it applies after the reply is kept)."""
        with self.lock:
            first = node_id not in self.listeners
            self.listeners.setdefault(node_id, []).append(listener)
        if first:
            try:
                self.call(node_id, "listen", True)
            except BaseException:
                self.unlisten(node_id, listener)
                raise

    def unlisten(self, node_id: str, listener: Any) -> None:
        with self.lock:
            listeners = self.listeners.get(node_id, [])
            if listener in listeners:
                listeners.remove(listener)
            if listeners or node_id not in self.listeners:
                return
            del self.listeners[node_id]
            if node_id not in self.up:
                return                       # its worker was lost, and the listener with it
            w = self.workers[self.placement[node_id]]
        try:
            self.request(w, "listen", node_id, False)   # not waited for
        except WorkerLost:
            pass

    def _rounds(self) -> int:
        """``wait``'s rounds at most: one per hop of the longest path, and one more;
        twice that with barriers in flight (``epochs.py``), since a message held by an
        alignment goes on from its node only once the barrier has come there on the
        longest path."""
        rounds = self._depth() + 1
        return 2 * rounds if self.epochs is not None else rounds

    def _depth(self) -> int:
        depth: dict[str, int] = {}
        for n in self.graph.topological():
            depth[n] = 1 + max((depth[p] for p in self.graph[n].parents), default=-1)
        return max(depth.values(), default=0)

    def wait_recovered(self, timeout: float = 120.0, node_id: str | None = None) -> None:
        """Until no lost node is still waiting for its recovery. With ``node_id``, a
        loss of its worker not noticed yet is noticed first: a SIGKILLed worker's
        connection ends at once, but its reader thread may not have taken the end
        when the caller asks (``db.recover(node)`` right after the kill), and a
        recovery not yet begun is not waited for. So the node's worker is pinged: a
        dead one fails the ping (``WorkerLost``, raised once the loss is declared and
        counted in ``recovering``); one silent past the heartbeat timeout is the
        monitor's to declare lost."""
        if node_id is not None:
            try:
                self.ask(self.worker_of(node_id), "ping", timeout=self.heartbeat_timeout + 5)
            except (WorkerLost, TimeoutError):
                pass                         # (lost: counted in ``recovering`` by now)
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.recovering:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RecoveryError("recovery of a lost worker's nodes is taking over "
                                        f"{timeout:.0f} s")
                self.changed.wait(left)

    # ------------------------------------------------------------ failure

    def crash(self, node_id: str) -> None:
        """Kill the worker process hosting the node (SIGKILL)."""
        w = self.worker_of(node_id)
        w.killed_at = time.monotonic()
        if w.proc is not None:
            w.proc.kill()                    # SIGKILL, or Ray's forced kill
        else:
            w.put(["die"])
        deadline = time.monotonic() + self.heartbeat_timeout + 5
        with self.lock:                      # returns once the loss has been noticed
            while w.alive and time.monotonic() < deadline:
                self.changed.wait(0.05)

    def alive(self, node_id: str) -> bool:
        with self.lock:
            return node_id in self.up or node_id in self.restored

    def info(self, node_id: str) -> DomainInfo:
        alive, t, last_seen, clock, log_rows, diff_rows = self.call(node_id, "info")
        dec = wire.decode_array
        return DomainInfo(alive, t, last_seen, dec(clock), dec(log_rows), dec(diff_rows))

    def payload_after(self, node_id: str, child: str, t: int) -> tuple[list[Message], int]:
        msgs, now = self.call(node_id, "payload_after", child, t)
        return [decode_message(m) for m in msgs], now

    def output_info(self, node_id: str, child: str, upto: int) -> tuple[
            Batch | None, list[Message], int, dict[str, int]]:
        node = self.graph[node_id]
        if node.kind == "base" and not self.at_workers:
            # its rows are here, not on its worker: a base's output up to its time
            # ``upto`` is its first ``upto`` writes (a base passes each write on whole)
            return self.durable[node_id].state_at(upto).snapshot(), [], upto, {}
        # (with writes at the workers, a base's too: its worker keeps its log,
        # ``Worker.req_output_info``, and nothing here is read)
        snap, later, now, last_seen = self.call(node_id, "output_info", child, upto)
        return (None if snap is None else decode_batch(snap),
                [decode_message(m) for m in later], now, last_seen)

    def checkpoint(self, node_id: str, at_most: int) -> Checkpoint | None:
        """From the store here: what the node's worker sent before it was lost (its
        connection's frames are all read before the loss is declared); with holders,
        asked of the holder named when its worker was lost (after the fence of that
        loss: a prefix of what it was sent), None if that one is lost too."""
        if self.to_holders:
            w, origin = self._held_at(node_id)
            if w is None:
                return None
            try:
                got = self.ask(w, "ck_latest", origin, node_id, at_most)
            except WorkerLost:
                return None                 # (lost meanwhile: a rebuild, never wrong)
            return None if got is None else wire.decode_checkpoint(got)
        if self.store is None:
            return None
        with self.store_lock:
            return self.store.latest(node_id, at_most)

    def _held_at(self, node_id: str) -> tuple[WorkerHandle | None, str]:
        """The live holder of ``node_id``'s checkpoints (None: none) and the worker
        that sent them: as recorded at that worker's loss, or its worker's now."""
        with self.lock:
            where = self.ck_at.get(node_id)
            if where is None:
                origin = self.placement.get(node_id, "")
                where = (self.holders.get(origin), origin)
            w = self.workers.get(where[0] or "")
        return (w if w is not None and w.alive else None), where[1]

    def drop_checkpoints(self, node_id: str) -> None:
        if self.to_holders:
            w, origin = self._held_at(node_id)
            if w is not None:
                w.put(["ck_forget", origin, node_id])
            return
        if self.store is not None:
            with self.store_lock:
                self.store.drop(node_id)

    def restore(self, node_id: str, t: int, clock: np.ndarray, last_seen: dict[str, int],
                inputs: list[tuple[int, Batch]], checkpoint: Checkpoint | None = None) -> None:
        self.call(node_id, "restore", t, wire.encode_array(clock), last_seen,
                  [[port, encode_batch(b)] for port, b in inputs],
                  None if checkpoint is None else encode_checkpoint(checkpoint, clock=True))
        with self.lock:
            self.restored.add(node_id)

    def replay(self, node_id: str, msgs: list[Message], seen: dict[str, int]) -> None:
        self.call(node_id, "replay", [encode_message(m) for m in msgs], seen)

    def history_parts(self, w: WorkerHandle, node_id: str, writes: list[Batch],
                      table: Sequence[Batch] = ()) -> tuple[list[Any], int]:
        """Base ``node_id``'s ``table`` (with writes at the workers: the batches that
        add up to its rows as of its history's start) and ``writes`` to its worker
        ``w``, in order, in parts of at most ``tuning.BASE_PART_ROWS`` rows
        (``writes.log_parts``: a table batch is cut, a write never), so that no frame
        nears ``wire.MAX_FRAME`` whatever the table's size. Every part but the last
        goes ahead, numbered (requests ``base_history``, which the worker keeps for
        the request that uses them); the last goes with that request (restore, resend
        or roll back), as ``[writes, table, parts ahead]``, so the worker takes
        exactly the parts of this attempt (``Worker.base_parts``): (the last part, the
        writes' rows)."""
        parts = log_parts(table, writes, tuning.BASE_PART_ROWS)
        for i, (rows_part, writes_part) in enumerate(parts[:-1]):
            self.ask(w, "base_history", node_id, i, [encode_batch(b) for b in writes_part],
                     [encode_batch(b) for b in rows_part])
        rows_part, writes_part = parts[-1]
        return ([[encode_batch(b) for b in writes_part], [encode_batch(b) for b in rows_part],
                 len(parts) - 1], sum(len(b) for b in writes))

    def restore_base(self, node_id: str, seen: dict[str, int], low: int) -> int:
        """A worker's base holds no rows (they are here), so it gets only the writes
        after ``low``, which its children may still ask for, in parts
        (``history_parts``). With writes at the workers, the base's whole log is at
        its workers, none here: placed on its live log replica holding its lost
        owner's whole log (``_log_replica_host``), the base is rebuilt from the log
        there (``promote_base``: nothing sent); elsewhere, that replica's log
        (``log_parts``), or else the longest of its lost workers' logs on disk
        (``writes.disk_log``), goes to its new worker with the tags of its last
        writes, through here for the restore only (``restore_logged_base``)."""
        w = self.worker_of(node_id)
        if self.at_workers:
            n = self.restore_logged_base(w, node_id, seen, low)
        else:
            start, writes = self.durable[node_id].since(low)
            part, _ = self.history_parts(w, node_id, writes)
            n = self.ask(w, "restore_base", node_id, part, seen, low, start)
        with self.lock:
            self.restored.add(node_id)
        return n

    def restore_logged_base(self, w: WorkerHandle, node_id: str, seen: dict[str, int],
                            low: int) -> int:
        """``restore_base`` with writes at the workers (its docstring)."""
        with self.lock:
            owner = self.lost_owner.get(node_id, "")
        r = self._whole_at_replica(node_id)
        n: int | None = None
        if r is w:
            n = self.ask(w, "promote_base", node_id, seen, low, owner)
        if n is None:
            got = self._whole_log(r, node_id, owner)
            if got is None:
                raise RecoveryError(f"base {node_id}: no log of it is left")
            start, rows, writes, tags = got
            part, _ = self.history_parts(w, node_id, writes, rows)
            n = self.ask(w, "restore_base", node_id, part, seen, low, start, tags)
        # its replica named at once: a write to it (once it is up) waits for one, and a
        # recovery that fails part-way leaves it up; a SQL write waiting for it holds
        # the server's lock the next attempt needs
        self.renamed.add(node_id)
        self.choose_replicas({node_id}, recovering=False)
        # (the lost workers' logs stay until the recovery is done: one that fails
        # part-way abandons the restored base, and its next attempt reads them again)
        return n

    def _whole_log(self, r: WorkerHandle | None, node_id: str, owner: str
                   ) -> tuple[int, list[Batch], list[Batch], list[int]] | None:
        """The base's whole log (the write its table is at, the table, the writes
        after, their tags) from its live replica ``r`` holding the lost owner's, in
        parts, or from the lost workers' disks; None: neither has it."""
        if r is not None:
            try:
                start, rows, writes, tags, i, count = 0, [], [], [], 0, 1
                while i < count:
                    got = self.ask(r, "log_parts", node_id, owner, i)
                    if got is None:
                        break
                    start, tags, count = got[0], got[3], got[4]
                    rows += [decode_batch(b) for b in got[1]]
                    writes += [decode_batch(b) for b in got[2]]
                    i += 1
                else:
                    return start, rows, writes, tags
            except WorkerLost:
                pass                        # (lost meanwhile: its log on disk, below)
        with self.lock:
            lost = list(dict.fromkeys(self.lost_logs.get(node_id, ())))
        table = cast("Base", self.graph[node_id].op).schema.name
        got_disk = disk_log(lost, node_id, table) if lost else None
        if got_disk is not None:
            log.warning("base %s: its table as of write %d and %d write(s) after it from "
                        "the log on disk of its lost worker(s) %s", node_id, got_disk[0],
                        len(got_disk[2]), ", ".join(d.parent.name for d in lost))
        return got_disk

    def parent_restarted(self, node_id: str, parent: str, log_from: int) -> None:
        """Tell the live ``node_id`` (on its worker, in order with its messages) that
        ``parent`` came back with a log to it from ``log_from`` on; a worker lost
        meanwhile takes the node with it, which then recovers as any lost node does."""
        try:
            self.call(node_id, "parent_restarted", parent, log_from)
        except WorkerLost:
            pass

    def reset(self, node_id: str) -> None:
        """Empty a node for a lineage rebuild; the graph is quiet, so what was held for
        it is already in its parents' state: dropped."""
        self.resets.append(node_id)
        self.call(node_id, "reset")
        if self.causal is not None:
            self.causal.forget(node_id)
        with self.lock:
            self.held.pop(node_id, None)
            self.restored.discard(node_id)
            self.up.add(node_id)
            self.changed.notify_all()

    def _drop_held_from(self, lost: set[str]) -> None:
        """Forget the messages held for nodes being recovered that ``lost`` (nodes just
        lost, or made down again) sent: they come from an incarnation that is gone. Its
        successor may number its output afresh or replay the unpinned part of its input
        in another order, so a held message could repeat, under a new time, what the
        successor's state (from which a down child may be rebuilt) already holds. The
        held node gets what it needs from the successor's log, or is rebuilt (lock
        held)."""
        if not lost:
            return
        for dst, frames in self.held.items():
            if frames:
                self.held[dst] = [f for f in frames if f[2][0] not in lost]

    def _abandon(self, node_id: str) -> None:
        """A recovery that gave up part-way: the node is down again (and empty), until
        the next attempt or lineage."""
        with self.lock:
            self.restored.discard(node_id)
            self.up.discard(node_id)
            self.held.setdefault(node_id, [])
            self._drop_held_from({node_id})
        try:
            self.call(node_id, "crash")
        except WorkerLost:
            pass                        # (its worker is gone: down and empty anyway)

    def abandon(self, node_ids: Iterable[str]) -> None:
        """A regime's recovery that gave up part-way (it raises on): each of these nodes
        is down again and empty (``_abandon``), until the next attempt or lineage."""
        for nid in node_ids:
            try:
                self._abandon(nid)
            except Exception:  # (its worker lost too: down anyway)
                pass

    def _release(self) -> None:
        """Nodes rebuilt since the last call take messages again, held ones first."""
        with self.lock:
            released: dict[str, list[str]] = {}
            for nid in list(self.restored):
                w = self.workers[self.placement[nid]]
                if self.direct:          # (held at its worker: ``Worker.release``)
                    released.setdefault(w.name, []).append(nid)
                for f in self.held.pop(nid, []):
                    w.put(f)
                self.restored.discard(nid)
                self.up.add(nid)
            for name, nids in released.items():
                self.workers[name].put(["release", nids])
            self.releases += 1
            self.changed.notify_all()

    def wait_up(self, node_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while node_id not in self.up and node_id in self.placement \
                    and node_id not in self.lost_tables:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.changed.wait(left)

    def _recoverer(self) -> None:
        """Recover lost workers' nodes, one set at a time: every loss known when a
        recovery starts is recovered with it, as one set of concurrent failures (in
        topological order, a failed neighbour first, as ``db.recover()`` does). A worker
        lost in the middle aborts the attempt: whatever it left half-restored is made
        down again, and everything still down is recovered, with the new loss, in the
        next attempt."""
        self.recovery_thread = threading.get_ident()   # (its waits expect nodes down)
        while True:
            batch = [self.lost.get()]
            if tuning.RECOVERY_GATHER > 0:
                time.sleep(tuning.RECOVERY_GATHER)
            while True:
                try:
                    batch.append(self.lost.get_nowait())
                except queue.Empty:
                    break
            losses = [w for ws, _, _ in batch for w in ws]
            nodes = list(dict.fromkeys(n for _, ns, _ in batch for n in ns))
            attempt = max(a for _, _, a in batch)
            names = ", ".join(w.name for w in losses)
            try:
                self._recover_workers(losses, nodes)
            except Exception:
                # (another worker lost meanwhile, most likely: try again once it is known)
                log.exception("recovery of the nodes of %s failed (attempt %d)", names, attempt)
                if attempt < 3:
                    with self.lock:
                        self.recovering += 1
                    time.sleep(self.heartbeat_timeout)
                    self.lost.put((losses, [n for n in nodes if not self.alive(n)], attempt + 1))
                else:
                    self.broken = (f"the nodes of lost worker(s) {names} could not be recovered; "
                                   "see the server log")
            finally:
                with self.lock:
                    self.recovering -= len(batch)
                    self.changed.notify_all()
                    if not self.recovering and self.at_workers and not self.closed:
                        for w in self.active + self.spares:     # (the fills named meanwhile)
                            if w.alive:
                                w.put(["fill_go"])

    def _place_on_spares(self, losses: list[WorkerHandle], nodes: list[str]) -> WorkerHandle:
        """Move the lost nodes whose worker is gone to spares (one per lost worker while
        spares are ready, the first one otherwise); returns the first spare."""
        with self.lock:
            gone = {n for n in nodes
                    if not (w := self.workers.get(self.placement.get(n, ""))) or not w.alive}
        first = cast(WorkerHandle, self._take_spare())
        spare_for: dict[str, WorkerHandle] = {}
        for w in losses:
            if any(self.placement.get(n) == w.name for n in gone) and w.name not in spare_for:
                spare_for[w.name] = (first if not spare_for
                                     else self._take_spare(wait=False) or first)
        hosted: dict[str, list[str]] = {}
        with self.lock:
            for n in nodes:
                if n in gone and n in self.placement:
                    # (the causal regime's warm standby of it takes it over where it is)
                    standby = None if self.causal is None else self.causal.standby_host(n)
                    if standby is None:
                        standby = self._log_replica_host(n)
                    spare = (self.workers[standby] if standby is not None
                             else spare_for.get(self.placement[n], first))
                    self.placement[n] = spare.name
                    hosted.setdefault(spare.name, []).append(n)
        if not self.direct:
            for name, ns in hosted.items():
                self.workers[name].put(["host", ns])
            return first
        moved: dict[str, str] = {}
        lost: WorkerLost | None = None
        for name, ns in hosted.items():
            # answered before anyone is told: a peer's message for them may then come
            # at once, and the spare must hold it, not drop it. Every one is asked even
            # when one is lost meanwhile: a node placed on a live worker never asked to
            # host it was not "gone" to the next attempt, which then restored it on a
            # worker without it (``KeyError`` there, the recovery failed for good)
            try:
                self.ask(self.workers[name], "host", ns)
            except WorkerLost as e:
                lost = lost or e
                continue
            moved.update(dict.fromkeys(ns, name))
        with self.lock:
            for o in self.workers.values():
                if o.alive:
                    o.put(["place", moved])
        if lost is not None:
            raise lost
        return first

    def _log_replica_host(self, base: str) -> str | None:
        """Where a lost owner's base comes back (lock held): on its live log replica,
        which holds its log (the table as of a trim, every write since), so that no
        table crosses the network (``restore_base``); None (a spare): no live replica,
        or writes at the controller."""
        if not self.at_workers or self.graph[base].kind != "base":
            return None
        r = self.workers.get(self.replicas.get(base) or "")
        return r.name if r is not None and r.alive and r in self.active else None

    def _recover_workers(self, losses: list[WorkerHandle], nodes: list[str]) -> None:
        self._recover_set(losses, nodes)

    def _recover_set(self, losses: list[WorkerHandle], nodes: list[str]) -> None:
        lost = losses[0]
        lost_at = cast(float, lost.lost_at)       # set when it was declared lost
        detected = lost_at - (lost.killed_at or lost_at)
        control = self.control or threading.RLock()
        named = self.renamed = set()            # (bases whose replica is named already)
        with control:
            with self.lock:                     # (lost for good: never recovered)
                nodes = [n for n in nodes if n not in self.lost_tables]
            if not nodes:
                self.choose_replicas(recovering=False)
                return
            # moved under the lock: until now, a request for these nodes finds their
            # worker gone (and waits), never an empty stand-in
            spare = self._place_on_spares(losses, nodes)
            down = set(nodes)
            order = [n for n in self.graph.topological() if n in down]
            if self.at_workers:
                order = self._lose_tables(order)
            log.info("recovering %s", order)
            reports = []
            leftover = []
            todo = order
            refused: str | None = None
            if self.lines is not None and order:
                got = self.lines.roll_back(order[0])
                if isinstance(got, str):          # (nothing touched yet)
                    refused = f"no {self.lines.regime} recovery line: {got}"
                    log.warning("%s: lineage for %s", refused, order)
                    self.lines.invalidate()
                else:
                    reports.append(got)
                    todo = []
            if self.causal is not None and order:
                done = self.causal.recover(order[0])
                if isinstance(done, str):         # (nothing touched yet)
                    refused = f"no causal recovery: {done}"
                    log.warning("%s: lineage for %s", refused, order)
                else:
                    reports.append(done)
                    todo = []
            if self.epochs is not None and order:
                why = self.epochs.refusal()
                if why is None:
                    # every node back to the last complete epoch (a failure part-way
                    # leaves every node down: the next attempt rolls back again)
                    reports.append(self.epochs.roll_back(order[0]))
                    todo = []
                else:                             # (nothing touched yet)
                    log.warning("the coordinated rollback cannot recover %s (%s): "
                                "lineage", order, why)
            for n in todo:
                if self.alive(n):
                    continue                      # came back with a neighbour
                if self.graph[n].kind == "base" or (self.clocks and self.strategy == "treeclock"):
                    try:
                        reports.append(treeclock.recover(self.graph, self, n))
                        self._release()
                        continue
                    except WorkerLost:
                        for r in list(self.restored):   # (half restored, maybe): down again
                            self._abandon(r)
                        raise                     # another worker lost: start over
                    except Exception as e:        # RecoveryError: beyond what clocks keep
                        log.info("tree clocks cannot recover %s (%s): lineage", n, e)
                        self._abandon(n)
                        self._release()           # (failed parents it brought back first)
                leftover.append(n)
            if leftover:
                # one rebuild for all of them: each one's purge set may read another
                rest = [n for n in order if not self.alive(n) and n not in leftover]
                # (writes at the workers: none may land between the rebuild's wait and
                # its settle, which our lock holds back only for writes made here; the
                # pause waits for every accepted write to be durable, so the bases
                # restored so far are named their replica now, not at the recovery's
                # end; one the rebuild restores takes no write before the pause ends)
                if self.at_workers:
                    early = {n for n in order if self.graph[n].kind == "base"
                             and self.alive(n)} - named
                    self.choose_replicas(early, recovering=False)
                    named |= early
                paused = self.pause_writes()
                try:
                    self.resets = []
                    try:
                        reports.append(lineage.recover(self.graph, self, *leftover, *rest))
                    except Exception:
                        for r in self.resets + list(self.restored):   # emptied, not refilled
                            self._abandon(r)
                        raise
                    finally:
                        self.resets = []
                    self._release()
                finally:
                    self.resume_writes(paused)
            if refused is not None:
                for report in reports:
                    report.fallback = refused
                if self.lines is not None and not self.lines.covered:
                    self.lines.checkpoint_all()   # (a line again for the next loss)
            for report in reports:
                report.automatic = True
                # a cluster's own fields, beyond RecoveryReport's (sent with the rest of
                # vars(report); remote._report sets them back the same way)
                vars(report).update(worker=spare.name, lost_worker=lost.name,
                                    detection_seconds=detected)
                if self.on_recovery is not None:
                    self.on_recovery(report)
        for n in order:                     # (recovered: their new logs are theirs)
            if self.graph[n].kind == "base":
                self.drop_lost_logs(n)
        self.choose_replicas({n for n in order if self.graph[n].kind == "base"} - named,
                             recovering=False)
        self._forget_checkpoints(order)
        log.warning("recovered %d node(s) of worker(s) %s", len(order),
                    ", ".join(w.name for w in losses))

    def _lose_tables(self, order: list[str]) -> list[str]:
        """The lost nodes of ``order`` left to recover once the tables whose log is gone
        are set aside (writes at the workers; recovery's lock held): a lost base with
        no log left (``log_left`` False: no live replica holding its owner's whole log,
        no ``--data-dir``) may have lost acknowledged writes, so it is not restored
        shorter; it and every node over it (views, shared nodes) are
        down for good, those on live workers emptied (``_abandon``), and their reads
        and writes raise ``TableLostError`` (``lost_tables``) until they are dropped."""
        bases = [n for n in order if self.graph[n].kind == "base"]
        gone = [n for n in bases if not self.log_left(n)]
        if not gone:
            return order
        over: dict[str, str] = {}
        for base in gone:
            table = cast("Base", self.graph[base].op).schema.name
            why = (f"table {table!r} was lost: the workers holding its base and its whole "
                   "log were lost together (its log replica with it, or still being sent "
                   "the log, or none), and with them writes acknowledged to it; serve "
                   "the cluster with --data-dir to survive that (drop the table and the "
                   "views over it to make them again)")
            stack = [base]
            while stack:
                n = stack.pop()
                if n not in over:
                    over[n] = why
                    stack.extend(self.graph[n].children)
        log.error("%s; nodes down for good: %s", next(iter(over.values())), sorted(over))
        for n in over:
            if n not in order and self.alive(n):
                self._abandon(n)                # (emptied on its live worker)
        with self.lock:
            self.lost_tables.update(over)
            self.changed.notify_all()
        for n, why in over.items():
            for listener in list(self.listeners.get(n, ())):
                listener.lost(why)
        return [n for n in order if n not in over]

    def _forget_checkpoints(self, nodes: list[str]) -> None:
        """The lost workers' checkpoints their holders kept, once their nodes are
        recovered (each checkpoints to its new worker's holder from then on)."""
        with self.lock:
            gone = {self.ck_at.pop(n) for n in nodes if n in self.ck_at}
            for holder, origin in gone:
                w = self.workers.get(holder or "")
                if w is not None and w.alive:
                    w.put(["ck_forget", origin, None])

    # ------------------------------------------------------------ introspection

    def describe(self, node_id: str) -> dict[str, Any]:
        """Its worker's name and pid; a base with a log replica (``writes.py``) adds
        the replica's (``replica``, ``replica_pid``), and a worker's node shard with a
        checkpoint holder (``holders.py``) the holder's (``holder``, ``holder_pid``)."""
        with self.lock:
            w = self.workers.get(self.placement.get(node_id, ""))
            out = {"worker": w.name if w else None, "pid": w.pid if w else None}
            h = self.workers.get(self.holders.get(w.name) or "") if w else None
            if h is not None:
                out.update(holder=h.name, holder_pid=h.pid)
            if self.replicas.get(node_id) is not None:
                r = self.workers.get(cast(str, self.replicas[node_id]))
                out.update(replica=r.name if r else None, replica_pid=r.pid if r else None)
        return out

    def memory(self, node_ids: list[str]) -> dict[str, int]:
        """Bytes of each node shard's state: a base's here (its rows, history aside, and
        upquery indexes are the controller's; with writes at the workers, the base's
        worker holds its rows and is asked), every other's asked of its worker, all
        workers at once; ``WorkerLost`` if one is lost meanwhile."""
        def here(nid: str) -> bool:
            return self.graph[nid].kind == "base" and not self.at_workers
        by_worker: dict[str, list[str]] = {}
        with self.lock:
            lost = set(self.lost_tables)
        for nid in node_ids:
            if nid in lost:
                continue
            if not here(nid):
                by_worker.setdefault(self.worker_of(nid).name, []).append(nid)
        asked = [self.request(self.workers[w], "memory", ids) for w, ids in by_worker.items()]
        sizes: dict[str, int] = {}
        for fut in asked:
            sizes.update(fut.result(60))
        return {nid: 0 if nid in lost else node_bytes(self.graph[nid].op) if here(nid)
                else int(sizes[nid]) for nid in node_ids}

    def close(self) -> None:
        self.closed = True
        with self.lock:
            ws = list(self.workers.values())
        for w in ws:
            w.put(["stop"])
            w.put(None)
        self.launcher.close()
