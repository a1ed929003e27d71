"""A worker process: hosts some of the graph's domain shards and runs their messages.

Every worker builds the whole graph (the controller sends each catalog change as a
logical plan, and the planner is deterministic, so node ids agree everywhere), but
holds state only for the nodes placed on it. One thread reads the controller
connection and handles its frames strictly in order: messages, writes, progress
reports and requests. That order is what recovery relies on: when the controller's
request reaches a worker, every message forwarded to it before has been processed.
A second thread sends heartbeats. Clients read the readers hosted here on a port of
the worker's own (``reads.py``: how those reads and the thread above share a reader).

With direct channels (``--channels direct``, ``channels.py``), the messages, progress
reports and trims between workers go on worker-to-worker links instead, and the one
thread handles an inbox fed by the controller's connection and each peer's link, in
order per connection. What the controller's ordering gave is kept by frames of its
own: ``["lost", worker]`` is the fence (nothing of that worker's is handled after it,
and a recovery's questions come after it), messages for a lost worker's nodes wait
here until ``["place", {node: worker}]``, messages for nodes this worker took over
(``host``) are held until ``["release", nodes]``, and ``["drop_from", nodes]`` follows
on each link the messages of a node restored then given up on. ``wait()`` asks each
worker's counts of frames sent and handled (``req_counts``).

Frames (lists; see ``wire.py`` for framing and authentication):

- from the controller: ``["ddl", change, placement]``, ``["host", [node ids]]``,
  ``["msg", dst, message]``, ``["write", base, batch]``, ``["progress", b, c, t, paths,
  trim]``, ``["trunc", a, b, level]``, ``["req", id, method, args]``, ``["retire"]``
  (the readers kept from a lost controller may go), ``["adopt"]`` (a restarted
  controller keeps what this worker held: ``Worker.adopt``), ``["stop"]``; with direct
  channels also ``["peers", {name: address}]``, ``["lost", name]``, ``["place",
  {node: worker}]``, ``["release", [node ids]]``
- from a peer (direct channels): ``["msg", dst, message]``, ``["progress", ...]``,
  ``["trunc", ...]``, ``["drop_from", [node ids]]``, ``["fill", dst, body]``, and with
  ``--writes worker`` a base's log (``writes.py``): from its owner ``["rlog", base,
  batches, tags]`` (with ``fill`` after them during a fill: kept aside until its whole
  log), its whole log in parts ``["rpart", base, fill, i, table, batches]``
  then ``["rfull", base, start, table, batches, fill, parts before]``,
  ``["rtrim", base, t]``, from its replica ``["rdur", base, n, fill]`` (the log made
  on that fill's whole log holds the last group, or with ``rfull`` the whole log),
  ``["rdur", base, n, fill, 1]`` (a group kept aside during that fill) and ``["rpack",
  base, fill]`` (a part of a whole log taken);
  nothing else (with
  ``--data-dir``, the config's last item names the directory where this worker keeps
  those logs on disk as well: ``writes.DiskLogs``)
- with ``--writes worker``, from the controller ``["replica", base, worker | None]``
  (None: no other worker is alive, this worker's log alone is the log;
  ``["replica", base, worker, 1]`` during a recovery: its whole log waits for
  ``["fill_go"]``, which the controller sends at the recovery's end),
  ``["pause", id]`` (answered with each base's count of its writes) and
  ``["resume"]``; no write goes to the controller (it keeps no history of these
  bases: a lost base is restored from its replica's log or the lost workers'
  disks, the requests ``log_whole``, ``log_parts``, ``log_landed``, ``promote_base``,
  ``restore_base``)
- with ``serve --partial`` (``partial.py``): the catalog changes ``["partial", reader,
  memory limit, [[aggregate, key columns]], chain]`` (every worker marks the reader
  partial, and the aggregates held partial with it) and ``["full", reader,
  [aggregate]]`` (a later view shares them: full again, the reader all holes), the
  request ``partial_clear`` (a held aggregate or join was lost: the reader and the
  operators held with it all holes), and ``["fill", dst, body]`` (an eviction, its
  request id ``EVICT``, goes up from the reader's worker to the topmost operator
  held, which sends it down like a fill; one with request id ``SIZES`` carries a
  held operator's bytes for some keys down to its reader's worker, which counts
  them against its share); a fill comes
  from the controller (at an upquery's source) or from the chain's node before
  ``dst`` (a peer, this worker, or the relay), dropped where a message would be held
  (its upquery fails with the loss and is sent again); the reader's worker answers the
  controller ``["rep", upquery id, rows per key]``, with a memory limit after
  ``["mem", bytes held, keys held, bytes the fill took]``; the requests ``share``
  (this worker's share of the limit: it evicts down to it before answering) and
  ``pin`` (a subscribed key, never evicted); with ``--writes worker`` and direct
  channels, ``["direct_ok", reader]`` (the controller found the reader's chains up:
  a ``get`` of a hole is upqueried by this worker itself, its fills with request
  ids of its own, until a loss; partial.py, "A miss without the controller"), and
  from a read thread ``["dm", reader, keys, request id, answer]`` (such a miss) and
  ``["dm_drop", request id]`` (given up on)
- to the controller: ``["msg", dst, message]``, ``["progress", ...]``, ``["trunc", ...]``,
  ``["hlow", base, t]`` (writes at the controller: the base's write history there
  may be trimmed to write ``t``),
  ``["rep", id, result]``, ``["err", id, class name, text]``, ``["hb"]``, and a stateful
  node shard's checkpoints (``RemoteStore``): ``["ck", node, time, parent times, form,
  delta, full, stable, clock]`` (the node's tree clock then, ``wire.encode_array``),
  ``["ck_keep", node, time]``, ``["ck_drop", node]``; while a subscription listens at
  one of its readers (``req_listen``), ``["sub", node, None]`` when the reader applies
  a change after a drain (``req_drain``), and its loss,
  ``["sub_lost", node, why]``; with direct channels no ``msg``, ``progress`` or
  ``trunc``, and ``["peer_lost", name]`` for a link that cannot be dialed or written;
  with a checkpoint holder (direct channels, the treeclock regime: ``holders.py``),
  no checkpoint frames: they go on the peer link to it instead, after
  ``["ck_reset"]`` (from the controller ``["ck_holder", worker | None]``), and a
  holder takes them from its peers, ``["ck_forget", origin, node | None]`` from the
  controller, and the request ``ck_latest``
- in the uncoordinated and cic regimes (``lines.py``): to the controller, each node
  shard's points ``["pt", node, time, parent times, index, forced]`` (after the
  checkpoint's ``ck`` frame) and, with direct channels, ``["log", [message, ...]]``,
  a copy of what it emits, before the messages are routed; from the controller (cic)
  ``["tick", write count]``; messages carry cic's index as a seventh field
- in the falkirk regime (``falkirk.py``), as in the uncoordinated one, but each node
  shard's points come as its policy says (``falkirk.take_span``), and with direct
  channels an unlogged (``ephemeral``) sender's messages go to the controller as
  their times only, ``["sent", [[src, dst, time], ...]]``, before they are routed
- in the causal regime (``causal.py``): messages carry their determinants' bytes as a
  seventh field; each node shard's marks go to the controller as ``pt`` frames (after
  the checkpoint's ``ck`` frame); the recovery's requests ``causal_state``,
  ``causal_inflight``, ``causal_handoff``, ``causal_restore``, ``causal_replay``,
  ``causal_parent_restarted`` (and the lines' ``uc_base``,
  ``uc_source`` for a lost base or VALUES node); from the controller, its garbage
  collection ``["cgc", stable marks, levels]`` (``causal_gc``); ``causal_sizes`` says
  what the logs hold; with ``--standbys``, ``["sb", node, checkpoint]``, ``["sbck",
  node, ...]`` and ``["sb_drop", node]`` keep the standbys this worker holds of node
  shards hosted elsewhere (``standby_frame``), which ``causal_restore`` takes over

Checkpoints go to another process, not to this process's memory or disk: a worker that
dies takes its nodes with it, and the spare that takes them over must find their
checkpoints somewhere else: its checkpoint holder, another worker, on the peer link
(``holders.py``), or the controller, on the same connection as the node's other
frames, in order, so when the controller sees this worker's connection end, it has
every checkpoint the worker sent.

A controller lost (its connection ended, not ``stop``): when the controller said so
in its config (``--data-dir``: ``rejoin timeout`` > 0; ``restart.py``), the worker
does not exit. With writes at the workers, direct channels and the bases' logs on
disk (``Worker.goes_on``), its message thread and peer links go on: clients' writes
are taken, logged at the base's replica and on both disks, applied and answered as
before, and the readers keep taking them (the gap). What it would send the
controller is dropped (``_to_controller``): the checkpoints, the reports; the next controller takes the tables from the
disk logs, which hold every acknowledged write, and rebuilds the views. Only writes
that need no controller to be durable are taken then (``_durable_alone``: the base's
replica named and filled; others are answered ``moved`` and wait for the next
controller), and no log is made anew on disk (a new replica's whole log is not
answered). Otherwise its message thread ends (its peer links with it). Either way
its readers stay readable on the read port (``Reads.keep_old``, from the end of
the message thread), and it dials the controller's address again every
``REJOIN_EVERY`` seconds (during the gap, from a thread of its own: ``_Gap``); once
a controller started again there answers with its config, the gap's message
thread ends first (its writes in flight answered in doubt, its disk logs closed:
what that controller then reads of them is final, ``restart.take_workers_logs``),
and the controller takes it back under its name, as a new worker (a fresh graph,
node numbers after the old ones; ``["retire"]``, once that controller's views are
up, drops the old readers) or, when it keeps what the workers hold, with its old
graph and node shards (``["adopt"]``). After the timeout with no controller, it
exits, saying so in its log.
"""
from __future__ import annotations

import argparse
import faulthandler
import itertools
import logging
import os
import signal
import socket
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sql_frontend import wire as plan_wire
from treeclock import TreeClockError, TreeClocks, receive_path

from ... import tuning
from ...arrowio import arrow_columns, column_rows, from_ipc
from ...batch import Batch
from ...errors import ArityError, Error, RecoveryError
from ...graph import Graph, Node
from ...memory import node_bytes
from ...nan import canon_row
from ...ops.base import typed_columns
from ...partial import Partial, key_of, make_partial, op_key
from ...planner import Planner
from ...tls import Files as TlsFiles
from ...tls import client_context as tls_client_context
from ...tls import connect as tls_connect
from ...tls import server_context as tls_server_context
from ...tuning import CLOCK_DEPTH, HEARTBEAT_EVERY
from ...where import matching
from ..causal import CausalState, Determinants, drop_determinants, encode, trim_inflight
from ..checkpoints import Checkpoint, CheckpointStore
from ..checkpoints import delta as checkpoint_delta
from ..checkpoints import load as checkpoint_load
from ..coordinated import Aligner
from ..domain import Domain, graph_clocks
from ..falkirk import LOGGED, choose, stateful
from ..messages import Indexed, Message
from ..uncoordinated import PERIOD
from . import tokens, wire
from .channels import CONTROLLER, Inbox, Links, PeerServer, counted
from .errors import NodeDown
from .falkirk import take_span
from .holders import FRAMES as CK_FRAMES
from .holders import Held, RemoteStore
from .holders import used as holders_used
from .partial import (
    DIRECT,
    EVICT,
    SIZES,
    Fill,
    WorkerPartial,
    before,
    chain,
    is_direct,
    source_rows,
    step,
    through_held,
)
from .reads import IN_DOUBT, Reads, ReadServer, collector_paused, range_rows
from .wire import (
    decode_batch,
    decode_checkpoint,
    decode_delta,
    decode_message,
    encode_batch,
    encode_message,
)
from .writes import DiskLogs, PartsTaken, ReplicaLogs, history_from, log_parts, validated

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sized

    from ...ops.base import Base
    from ...ops.reader import Reader
    from ..history import WriteHistory

log = logging.getLogger("noria_py.worker")


def apply_change(planner: Planner, graph: Graph, change: Sequence[Any],
                 on_remove: Callable[[str], None]) -> None:
    """One catalog change, as the controller's planner made it (see ``ClusterRuntime.announce``)."""
    kind = change[0]
    if kind == "table":
        planner.add_table(plan_wire.from_data(change[1]))
    elif kind == "view":
        planner.add_view(change[1], plan_wire.from_data(change[2]))
    elif kind == "remove":
        planner.remove(list(change[1]), on_remove)
    elif kind == "drop_table":
        planner.drop_table(change[1])
        graph.remove(change[2])
        on_remove(change[2])
    else:
        raise wire.ProtocolError(f"unknown catalog change {kind!r}")


#: the frames a peer may send (``channels.py``): data only, never a request
#: a write's outcome when its worker's message thread ended before its log was known
#: to hold it: it may or may not have been applied
UNKNOWN = ["OperationalError", "the worker taking this write lost its controller before "
           "the write was known to be durable: it may or may not have been applied"]
#: the inbox's source of a client's write (a read thread's ``["cw", ...]``)
CLIENT = "\0client"
#: a fill of at least this many keys is handled with Python's cyclic collector paused
#: (``Worker._fill``; reads.py's ``collector_paused``)
FILL_PAUSE_GC_MIN = 64
#: the inbox's source of this worker's own frames (the next part of a base's whole
#: log to send: ``["wlog", ...]``)
SELF = "\0self"
#: the sources whose frames are not a peer's
LOCAL = frozenset((CONTROLLER, CLIENT, SELF))
#: a new replica's whole log: parts sent and not yet taken there (``rpack``) at most.
#: The link's socket then never holds more than a few MB of it, so the owner's message
#: thread is never stuck sending a part while the replica is busy (traced at 1e7 votes:
#: 0.5 s stuck in a send to the worker taking over the lost nodes, a client's write
#: waiting behind it)
PARTS_AHEAD = 2
PEER_FRAMES = frozenset(("msg", "bar", "progress", "trunc", "drop_from", "fill",
                         "rlog", "rpart", "rfull", "rdur", "rtrim", "rpack")) | CK_FRAMES
#: ``replica_of``'s value for a base whose replica was lost: its writes wait for the
#: controller to name the next one
NO_REPLICA_YET = ""
#: with direct channels, what the inbox's frames produced is sent at the latest after
#: this many frames (and whenever the inbox is empty)
FLUSH_EVERY = 64


@dataclass
class Filling:
    """A new replica being sent a base's whole log (``Worker.set_replica``)."""

    #: the replica's worker
    replica: str
    #: this fill's number (``Worker.fills``): a turn (``wlog``) of an older one does nothing
    fill: int
    #: the whole log's parts not sent yet, each encoded when it is asked for
    #: (``whole_log_frames``)
    parts: Iterator[list[Any]] = field(default_factory=lambda: iter(()))
    #: parts sent and not yet taken by the replica (``rpack``): at ``PARTS_AHEAD``,
    #: the next waits for its answer
    unacked: int = 0
    #: named during a recovery: its first part waits for ``fill_go`` (``Worker.fill_go``)
    waiting: bool = False


class Worker:
    def __init__(self, conn: wire.Connection, name: str, shards: int, clocks: bool,
                 checkpoints: bool = True, reads: Reads | None = None,
                 channels: str = "relay", token: str | None = None,
                 inbox: Inbox | None = None, peers: PeerServer | None = None,
                 tls: ssl.SSLContext | None = None, first_number: int = 0,
                 regime: str = "treeclock", writes: str = "controller",
                 disk: str | None = None, policies: dict[str, str] | None = None,
                 determinant_depth: int | None = None) -> None:
        """``disk`` (``--writes worker --data-dir``): the directory this worker keeps its
        bases' logs in, and those it is the replica of (``writes.DiskLogs``);
        ``policies``: the falkirk regime's per-node choice (``falkirk.choose``);
        ``determinant_depth``: the causal regime's (``causal.py``)."""
        self.conn = conn
        self.name = name
        self.graph = Graph()
        self.graph.number_after(first_number)     # (restart.py: after a restart's old ids)
        #: the readers stay readable when the controller is lost (it may come back)
        self.keep_reads = False
        self.control_recv: threading.Thread | None = None   # (direct: reads self.conn)
        self.stopped = False                      # the controller said ``stop``
        self.clocks = clocks
        #: the coordinated regime (``epochs.py``): the domains snapshot when the
        #: barrier of an epoch has come on every input (``barrier``), or when the
        #: controller asks on a quiet graph (``req_epoch``), never on their own
        self.coordinated = regime == "coordinated"
        #: (coordinated) each node shard's alignment: what it holds, with the worker
        #: it came from, from the parents whose barrier has come
        self.align: Aligner[tuple[str, Message | Sequence[Any]]] = Aligner()
        #: (coordinated) barriers of epochs up to this one are dropped: the controller
        #: abandoned them at a rollback
        self.bar_floor = 0
        #: the uncoordinated and cic regimes (``lines.py``): each domain checkpoints on
        #: its own and sends its point; with direct channels, a copy of every message
        #: (a base's aside) goes to the controller's logs
        self.uc = regime in ("uncoordinated", "cic", "falkirk")
        self.cic = regime == "cic"
        #: the falkirk regime (``falkirk.py``): the user's per-node choice (None:
        #: another regime), and each node shard's policy from it (``choose``)
        self.choice = dict(policies or {}) if regime == "falkirk" else None
        self.policy: dict[str, str] = {}
        #: the causal regime (``causal.py``): each domain records its determinants and
        #: piggybacks them, keeps its in-flight logs, and checkpoints and marks on its
        #: own (the ``pt`` frames, as above, are its marks)
        self.causal = regime == "causal"
        self.det = Determinants(determinant_depth)
        self.cstate: dict[str, CausalState] = {}
        #: (causal) per domain: the parent-times of its newest mark
        self.marked: dict[str, dict[str, int]] = {}
        #: (causal, ``--standbys``) the standbys held here of node shards hosted
        #: elsewhere: each one's newest checkpoint, every delta folded in as it comes
        #: (``["sb"]``, ``["sbck"]``, ``["sb_drop"]`` frames; ``causal.py``)
        self.standbys = CheckpointStore()
        #: (uc) per domain: [messages, rows] taken since its last checkpoint
        self.since: dict[str, list[int]] = {}
        #: (cic) per domain: its checkpoint index; the controller's write count
        self.sn: dict[str, int] = {}
        self.clock = 0
        # direct channels (channels.py; docs/architecture.md, "Direct channels"):
        self.direct = channels == "direct"
        self.links = Links(name, token, self._link_broken, tls)
        #: where the stateful domains checkpoint (None: checkpoints off, or no clocks):
        #: the controller's store, or with direct channels in the treeclock regime a
        #: holder worker the controller names (``holders.py``)
        self.store = (RemoteStore(self._to_controller,
                                  self.links if holders_used(self.direct, regime) else None)
                      if clocks and checkpoints or self.coordinated
                      or self.uc or self.causal else None)
        #: the kinds of node shard rebuilt from their parents instead of checkpointing
        #: (``checkpoints.rebuilt_from_parents``): in the treeclock regime, readers over
        #: stateful parents (a join's rebuild would send its parents' whole output
        #: between workers, so joins checkpoint here)
        self.rebuilt = (("reader",) if regime == "treeclock" and tuning.REBUILT_FROM_PARENTS
                        else ())
        #: the checkpoints this worker holds of other workers' node shards (holders.py)
        self.held_checkpoints = Held()
        #: node shards to checkpoint whole to a new holder, one a turn (``set_holder``,
        #: ``whole_turn``), and the holder they are for (a turn for another does nothing)
        self.whole_due: list[str] = []
        self.whole_for: str | None = None
        #: per base hosted here, the last trim point of its history sent (``"hlow"``)
        self.history_lows: dict[str, int] = {}
        self.tc: TreeClocks | None = None
        self.new_nodes: list[Node] = []
        self.planner = Planner(self.graph, shards, self.new_nodes.append)
        #: client reads at this worker (reads.py) see the domains through ``reads``
        self.reads = reads if reads is not None else Reads({})
        self.domains: dict[str, Domain] = self.reads.domains
        #: per base, the parts of a lost base's history sent ahead of the request that
        #: restores it (``base_parts``; sent by the controller: ``owner`` "", ``fill`` 0)
        self.history: dict[str, PartsTaken] = {}
        self.send = self._to_controller
        #: the controller lost while this worker goes on taking writes (``goes_on``):
        #: what it would send the controller is dropped, and ``on_gap`` (set by
        #: ``serve_worker``) is called once, to dial back
        self.gone = False
        self.on_gap: Callable[[], None] | None = None
        self.inbox = inbox if inbox is not None else Inbox()
        self.peer_server = peers
        self.placement: dict[str, str] = {}       # every node shard -> its worker's name
        self.lost_workers: set[str] = set()       # declared lost: their frames are dropped
        #: messages for nodes whose worker is lost, until the controller places them
        self.pending: dict[str, list[list[Any]]] = {}
        #: messages for nodes hosted here being recovered, with the worker they came
        #: from, until ``release``
        self.holding: dict[str, list[tuple[str, Message | Fill]]] = {}
        self.reads.held = self.holding            # (not read until released: reads.py)
        #: messages for nodes this worker has not built yet (their catalog change is on
        #: its way from the controller while their parent's worker already sends)
        self.early: dict[str, list[tuple[str, Message | Fill]]] = {}
        self.removed: set[str] = set()
        #: what this worker held under the controller before, if it was lost
        #: (``holdings``; asked by the next one: ``req_held``)
        self.previous: dict[str, Any] | None = None
        #: the worker before (its graph and node shards, ``kept``), which ``adopt``
        #: takes back
        self.before: Worker | None = None
        #: the node shards it held when its controller was lost (``adopt``)
        self.kept: dict[str, Domain] = {}
        #: the partial readers (``partial.py``): every worker marks each one, hosted
        #: or not (a spare may take it over); what they hold, and eviction, are here
        self.partial: WorkerPartial | None = None
        #: the aggregates held partial here or not, each with its key's output columns
        self.held_cols: dict[str, tuple[int, ...]] = {}
        #: partial reader -> the operators held partial with it (topmost first)
        self.held_by: dict[str, list[str]] = {}
        #: an operator held partial -> its reader (``held_by`` the other way)
        self.held_reader: dict[str, str] = {}
        #: ``serve --writes worker``: the bases hosted here keep their rows and validate
        #: their writes (``accept``); the accepted ones wait, their output held, until
        #: the base's log replica has them (with no other live worker at all: this
        #: worker's own log, on disk with ``--data-dir``) (``commit``, ``durable``)
        self.at_workers = writes == "worker"
        #: per base: accepted writes not yet sent to the log replica, (output, reply)
        self.accepted: dict[str, list[_Accepted]] = {}
        #: per base: the group sent to the log replica, until ``durable`` (one at a time)
        self.committing: dict[str, list[_Accepted]] = {}
        self.ended = False                        # (its message thread has ended)
        #: clients' writes wait in ``deferred`` while the controller makes a catalog
        #: change (``req_pause``); the pause is answered (``pausing``: its request ids)
        #: once no accepted write is short of its log
        self.paused = False
        self.deferred: list[list[Any]] = []
        self.pausing: list[int] = []
        #: the base's log replica (``writes.py``): per base hosted here, the worker
        #: holding its log (None: no other live worker at all, this worker's log is
        #: the log, on disk with ``--data-dir``; ``NO_REPLICA_YET`` or absent: none
        #: named yet, or lost: writes wait), and this worker's own copy of the log
        #: (sent whole to a new replica)
        self.replica_of: dict[str, str | None] = {}
        self.logs: dict[str, WriteHistory] = {}
        #: per base, where its group in flight went (a replica's name; None: nowhere,
        #: no other live worker)
        self.committing_via: dict[str, str | None] = {}
        #: per base, a new replica being sent the whole log (``set_replica``,
        #: ``Filling``): the groups sent it meanwhile it keeps aside until the whole
        #: log is in, and answers at once (``ReplicaLogs.during_fill``)
        self.filling: dict[str, Filling] = {}
        self.fills = 0
        #: per base, the fill whose whole log its replica answered: its answers name it
        self.replica_fill: dict[str, int] = {}
        #: the logs of bases hosted elsewhere that this worker is the replica of, and
        #: their owners' frames for a base whose catalog change is still on its way
        self.replica_logs = ReplicaLogs()
        self.early_logs: dict[str, list[tuple[Sequence[Any], str]]] = {}
        #: with ``--data-dir``: both kinds of log on disk too, each written before what
        #: acknowledges it (the owner's just after its group is sent, so before this
        #: thread can take the ``rdur``; the replica's before it sends ``rdur``)
        self.disk: DiskLogs | None = (DiskLogs(disk) if disk is not None and self.at_workers
                                      else None)
        #: ``--partial --writes worker`` (direct channels): a ``get`` of a hole of a
        #: partial reader hosted here is upqueried by this worker itself, without the
        #: controller (partial.py, A miss without the controller): each partial
        #: reader's chains ([node ids, source first; the source's key columns]), the
        #: readers whose chains the controller last found up and released
        #: (``direct_ok``; emptied at any loss), and the upqueries on their way
        #: (request id -> reader, the answer's callback)
        self.direct_chains: dict[str, list[tuple[list[str], tuple[int, ...]]]] = {}
        self.direct_ready: set[str] = set()
        self.direct_ups: dict[int, tuple[str, Callable[[Any], None]]] = {}
        self.direct_rids = itertools.count(DIRECT, -1)
        #: the bytes a key took at this worker's last fills (a moving average): a
        #: worker's own upquery only while a key fits its share (else the
        #: controller's, which grants more)
        self.direct_per_key = 0
        self.direct_fills = 0           # (keys its own upqueries answered: tests)
        if self.at_workers:
            self.reads.write = self.client_write
            if self.direct:
                self.reads.miss = self.direct_miss
                self.reads.miss_many = self.direct_miss_many

    @property
    def goes_on(self) -> bool:
        """Whether the message thread outlives the controller's connection (module
        docstring, "A controller lost"): with ``--data-dir`` (a rejoin timeout),
        direct channels and the bases' logs on this worker's disk, a write needs no
        controller to be made durable, so the writes go on until one is back."""
        return self.keep_reads and self.direct and self.disk is not None

    def _to_controller(self, frame: Any) -> None:
        """A frame to the controller; while it is lost (``gone``), or found so by this
        send, dropped: each is either rebuilt by the next controller (``ck``) or a
        report it no longer waits for (``peer_lost``, counts, subscription notices)."""
        if self.gone:
            return
        try:
            self.conn.send(frame)
        except OSError:
            if not self.goes_on:
                raise

    def _lose_controller(self) -> None:
        """The controller's connection ended while the writes go on (``goes_on``):
        from now on nothing is sent it, and ``on_gap`` dials back."""
        self.gone = True
        self._direct_off()              # (no loss can be declared: misses are holes,
                                        # partial.py, A miss without the controller)
        log.warning("worker %s: the controller was lost; taking writes and serving reads "
                    "as before while it is down", self.name)
        if self.on_gap is not None:
            self.on_gap()

    def holdings(self) -> dict[str, Any]:
        """What this worker holds, for a controller that may keep it (restart.py): its
        name, per node shard it hosts its kind, time, whether it is up, and the time
        it last took from each parent; and the whole graph as it built it (each
        node's parents, each base's table)."""
        graph = self.graph.nodes
        clean = not (self.holding or self.early or any(self.pending.values()))
        return {"worker": self.name, "clean": clean, "partial": self.partial is not None,
                "nodes": {
            nid: {"kind": d.node.kind, "time": d.time, "alive": d.alive,
                  "last_seen": dict(d.last_seen)} for nid, d in self.domains.items()},
            "graph": {nid: list(n.parents) for nid, n in graph.items()},
            "nums": {nid: n.num for nid, n in graph.items()},
            "tables": {nid: n.op.schema.name.lower()        # type: ignore[attr-defined]
                       for nid, n in graph.items() if n.kind == "base"}}

    def req_held(self) -> dict[str, Any] | None:
        """What this worker held before its controller was lost (None: nothing)."""
        return self.previous

    def adopt(self) -> None:
        """The new controller keeps what this worker held (restart.py): its graph,
        planner and node shards come back from the worker before, each stateful one
        checkpointed whole to the new controller (the old one's checkpoints died with
        it), or with a holder to the one it names (``set_holder``: whole again then);
        the readers kept for reads are this worker's own again."""
        prev = self.before
        if prev is None:
            raise wire.ProtocolError("adopt: this worker held nothing before")
        self.graph, self.planner, self.new_nodes = prev.graph, prev.planner, prev.new_nodes
        self.tc, self.placement = prev.tc, prev.placement
        self.history_lows, self.removed = prev.history_lows, prev.removed
        self.reads.old = {}
        self.domains.update(prev.kept)
        for d in self.domains.values():
            d.use_checkpoints(self.store, self.rebuilt)
            if d.store is not None and d.alive:
                d.checkpoint()
        self.before = None

    # ------------------------------------------------------------ structure

    def ddl(self, change: Sequence[Any], placement: dict[str, str]) -> None:
        if change[0] == "partial":
            self.make_partial(str(change[1]), change[2], *change[3:])
            return
        if change[0] == "full":
            self.make_full(str(change[1]), [str(n) for n in change[2]])
            return
        self.new_nodes.clear()
        apply_change(self.planner, self.graph, change, self._removed)
        self.planner.take_fresh()
        made = [n.id for n in self.new_nodes]
        want = list(placement)
        if made != want:
            raise Error(f"worker {self.name} built nodes {made} where the controller built {want}")
        self._refresh_clocks()
        self.placement.update(placement)
        for n in self.new_nodes:
            if n.kind == "base" and not self.at_workers:
                n.op.holds_rows = False   # type: ignore[attr-defined]  # (the controller's)
            if placement[n.id] == self.name:
                d = self.domains[n.id] = Domain(self.graph, n)
                d.attach_clocks(self.tc)
                d.use_checkpoints(self.store, self.rebuilt)
        for dst in [n for n in self.early if n in self.graph.nodes]:
            for src, m in self.early.pop(dst):
                if src not in self.lost_workers:
                    self.deliver(m, src)
        for nid in [n for n in self.early_logs if n in self.graph.nodes]:
            for f, src in self.early_logs.pop(nid):
                if src not in self.lost_workers:
                    self.replica_frame(f, src)

    def make_partial(self, reader_id: str, limit: int | None, held: Sequence[Any] = (),
                     path: Sequence[str] = (), chains: Sequence[Any] = ()) -> None:
        """Reader ``reader_id`` holds only the keys filled by upqueries from now on
        (all holes), and never checkpoints (it comes back all holes); so do the
        aggregates ``held`` ([node, its key columns]) on its chain ``path``. ``limit``:
        the cluster's memory limit (None: none); this worker's own share of it is 0
        until the controller gives it one (``req_share``; partial.py, Eviction).
        ``chains``: every chain of the reader ([node ids, the source's key columns]),
        which this worker's own upqueries take (``direct_miss``)."""
        self.direct_chains[reader_id] = [([str(n) for n in p], tuple(int(c) for c in cols))
                                         for p, cols in chains]
        if self.partial is None:
            self.partial = WorkerPartial(self.graph, cast(Any, _Hosted(self.domains)),
                                         None if limit is None else 0, self._send_up)
        reader = cast("Reader", self.graph[reader_id].op)
        for nid, cols in held:
            op: Any = self.graph[nid].op
            make_partial(op, self.partial.ops, reader, tuple(cols))
            self.held_cols[nid] = tuple(cols)
            self.held_reader[nid] = reader_id
            self._no_checkpoints(nid)
        if held:                        # (evictions start at the topmost: partial.py)
            self.partial.hold(reader_id, str(held[0][0]), list(path))
        self.held_by[reader_id] = [str(nid) for nid, _ in held]
        self.partial.paths[reader_id] = reader.key
        self.partial.path_ids[reader_id] = []
        reader.make_partial(self.partial)
        reader.path = []
        self._no_checkpoints(reader_id)

    def make_full(self, reader_id: str, nids: list[str]) -> None:
        """The aggregates ``nids`` on reader ``reader_id``'s chain hold every key again,
        empty until the controller fills them (partial.py, ``recheck``); the reader's
        keys become holes (its chain now ends at them)."""
        partial = cast(WorkerPartial, self.partial)
        self._direct_off(reader_id)     # (its new chain: up once the controller says)
        if reader_id in self.direct_chains:
            found = chain(self.graph, reader_id)    # (as the controller's, on its graph)
            if found is None:
                del self.direct_chains[reader_id]
            else:
                self.direct_chains[reader_id] = [found]
        if reader_id in self.domains:
            partial.lost(cast("Reader", self.graph[reader_id].op))
        partial.release_held(reader_id)
        self.held_by.pop(reader_id, None)
        for nid in nids:
            cast(Any, self.graph[nid].op).make_full()
            self.held_cols.pop(nid, None)
            self.held_reader.pop(nid, None)
            d = self.domains.get(nid)
            if d is not None:
                d.use_checkpoints(self.store, self.rebuilt)

    def _no_checkpoints(self, nid: str) -> None:
        d = self.domains.get(nid)
        if d is not None:
            d.use_checkpoints(None)
            if self.store is not None and self.store.has(nid):
                self.store.drop(nid)

    def _send_up(self, dst: str, frame: list[Any]) -> None:
        """An eviction on its way up to the aggregate ``dst`` (partial.py, Eviction)."""
        if self.direct:
            self.route(dst, frame)
        else:
            self.send(frame)

    def req_partial_clear(self, reader_id: str) -> None:
        """An operator held partial with reader ``reader_id`` was lost (it comes back all
        holes): every key of the reader, and of each operator held with it here,
        becomes a hole too (partial.py, Failures)."""
        if self.partial is None:
            return
        self._direct_off(reader_id)     # (until the controller's next upquery of it)
        for nid in self.held_by.get(reader_id, ()):
            if nid in self.domains:
                cast(Any, self.graph[nid].op).reset()
        if reader_id in self.domains:
            self.partial.lost(cast("Reader", self.graph[reader_id].op))

    def _removed(self, node_id: str) -> None:
        if self.direct_chains.pop(node_id, None) is not None:
            self._direct_off(node_id)
        if self.partial is not None and self.partial.paths.pop(node_id, None) is not None:
            self.partial.path_ids.pop(node_id, None)
            self.partial.release_held(node_id)
            self.partial._queue = []
        self.held_cols.pop(node_id, None)
        self.held_reader.pop(node_id, None)
        self.held_by.pop(node_id, None)
        self.removed.add(node_id)
        self.policy.pop(node_id, None)
        self.early.pop(node_id, None)
        self.replica_logs.drop(node_id)         # (a dropped table's log, its copy)
        if self.disk is not None:
            self.disk.drop(node_id)
        for kept in (self.early_logs, self.logs, self.replica_of, self.filling,
                     self.replica_fill):
            kept.pop(node_id, None)
        self.holding.pop(node_id, None)
        self.pending.pop(node_id, None)
        self.align.drop(node_id)
        if self.domains.pop(node_id, None) is not None and self.store is not None:
            self.store.drop(node_id)
        self.cstate.pop(node_id, None)
        for cs in self.cstate.values():
            for per_child in (cs.inflight, cs.log_from, cs.sent, cs.held):
                per_child.pop(node_id, None)
        for d in self.domains.values():
            d.forget_child(node_id)

    def _refresh_clocks(self) -> None:
        if self.clocks:
            self.tc = graph_clocks(self.graph, self.tc)
            for d in self.domains.values():
                d.attach_clocks(self.tc)

    def host(self, node_ids: list[str]) -> None:
        """Take over failed nodes: empty, down until the controller restores them."""
        for nid in node_ids:
            d = self.domains[nid] = Domain(self.graph, self.graph[nid])
            d.crash()
            d.attach_clocks(self.tc)
            d.use_checkpoints(None if getattr(d.node.op, "partial", False) else self.store,
                              self.rebuilt)
            if self.direct:
                self.holding[nid] = []       # (what was held for it is held again)

    def req_host(self, node_ids: Sequence[str]) -> None:
        """``host``, answered: the controller tells the others where the nodes are only
        once this worker holds their messages (a peer's may arrive before any frame
        of the controller's that follows)."""
        self.host(list(node_ids))

    # ------------------------------------------------------------ messages

    def emit(self, msgs: Iterable[Message]) -> None:
        if self.direct:
            if self.uc:
                # (the controller's log first: it has every message a receiver may
                # take before the sender's next point, lines.py; falkirk: of an
                # unlogged sender, its times alone)
                msgs = list(msgs)
                nodes = self.graph.nodes
                logged: list[Any] = []
                times: list[Any] = []
                for m in msgs:
                    if nodes[m.src].kind == "base":
                        continue
                    if self.choice is not None and self._policy(m.src) not in LOGGED:
                        times.append([m.src, m.dst, m.time])
                    else:
                        logged.append(encode_message(m))
                if times:
                    self.send(["sent", times])
                if logged:
                    self.send(["log", logged])
            route = self.route
            for m in msgs:
                route(m.dst, ["msg", m.dst, m])
            return
        send = self.send
        for m in msgs:
            send(["msg", m.dst, encode_message(m)])

    def route(self, dst: str, frame: list[Any]) -> None:
        """A frame for node ``dst`` (direct channels): to this worker's own inbox, to
        the link of the worker hosting ``dst``, or, while that worker is lost and the
        node not yet placed again, held here (a message; a progress report or a trim
        is dropped, as the relay drops it)."""
        w = self.placement.get(dst)
        if w == self.name:
            self.links.sent[w] += 1
            self.inbox.put((w, frame))
        elif w is None:
            return                          # (a node gone)
        elif w in self.lost_workers or w not in self.links.peers:
            if frame[0] == "msg":           # (a fill is dropped: partial.py, Failures)
                self.pending.setdefault(dst, []).append(frame)
        else:
            m = frame[2] if frame[0] == "msg" else None
            if isinstance(m, Message):
                frame = ["msg", dst, encode_message(m)]
            self.links.send(w, frame)

    def _link_broken(self, peer: str, e: BaseException) -> None:
        """A link that cannot be dialed or written: its worker must count as lost
        (what was not sent is lost with it), which only the controller declares."""
        log.warning("worker %s: link to %s broken: %s", self.name, peer, e)
        try:
            self.send(["peer_lost", peer])
        except OSError:
            pass

    def deliver(self, m: Message | Fill, src: str = CONTROLLER) -> None:
        held = self.holding.get(m.dst)
        if held is not None:
            if isinstance(m, Fill):
                return                      # (dropped, never held: partial.py, Failures)
            held.append((src, m))           # until ``release``, in arrival order
            return
        d = self.domains.get(m.dst)
        if d is None:
            if self.direct and m.dst not in self.graph.nodes and m.dst not in self.removed \
                    and not isinstance(m, Fill):
                self.early.setdefault(m.dst, []).append((src, m))
            return
        if not d.alive:
            return
        if isinstance(m, Fill):
            self._fill(m)
            return
        if self.align.arrived and self.align.holds(m.dst, m.src, (src, m)):
            return                          # (its input delivered the barrier: held)
        try:
            d.check_incoming(m)
        except (Error, TreeClockError) as e:       # as malformed as a frame decode refuses
            raise wire.ProtocolError(f"message {m.src} -> {m.dst}: {e}") from None
        if self.causal:
            self._causal_handle(d, m)
            return
        if self.uc:
            self._uc_handle(d, m)
            return
        before = d.time
        out = d.handle(m)
        if d.time == before:
            return
        if out:
            self.emit(out)
        if self.partial is not None and self.partial.limit is not None \
                and d.node.op.partial:
            if d.node.kind == "reader":
                self.partial.evict()
            else:                       # (held: the bytes it now holds, to its reader's)
                self._report_sizes(d.id)
        if d.ack_due():
            # a checkpoint first: the acknowledgement then carries it (as embedded)
            if d.store is not None and d.checkpoint_due():
                d.checkpoint()
            self.report_progress(d)

    # ------------------------------------------------------------ uncoordinated, cic

    def _uc_handle(self, d: Domain, m: Message) -> int:
        """``m`` taken by ``d`` in the uncoordinated and cic regimes (``lines.py``): a
        forced checkpoint first if ``m``'s index is higher than ``d``'s (cic), its
        output tagged with ``d``'s index (cic), a local checkpoint when due; the rows
        taken (0: a duplicate)."""
        if m.time <= d.last_seen.get(m.src, 0):
            return 0
        nid = d.id
        if self.cic:
            index = m.index if isinstance(m, Indexed) else 0
            if index > self.sn.get(nid, 0):
                self._uc_take(d, forced=True, index=index)
        out = d.handle(m)
        if out:
            if self.cic:
                sn = self.sn.get(nid, 0)
                out = [Indexed(o.src, o.dst, o.batch, o.time, o.clock, o.low, sn) for o in out]
            self.emit(out)
        since = self.since.get(nid)
        if since is None:
            since = self.since[nid] = [0, 0]
        since[0] += 1
        since[1] += len(m.batch)
        if self.choice is not None:
            if take_span(self._policy(nid), stateful(d.node), since, tuning.CHECKPOINT_EVERY,
                         tuning.CHECKPOINT_ROWS):
                self._uc_take(d)
        elif since[0] >= tuning.CHECKPOINT_EVERY or since[1] >= tuning.CHECKPOINT_ROWS:
            self._uc_take(d)
        return len(m.batch)

    def _policy(self, nid: str) -> str:
        """Node shard ``nid``'s falkirk policy (``choose``: the controller's too)."""
        p = self.policy.get(nid)
        if p is None:
            p = self.policy[nid] = choose(cast(dict[str, str], self.choice),
                                          self.graph[nid])[0]
        return p

    def _uc_take(self, d: Domain, forced: bool = False, index: int | None = None,
                 whole: bool = False) -> None:
        """A checkpoint of ``d``: its state's change (``whole``: all of it) to the
        store on the controller, then its point (time, last-seen times, index; the
        causal regime's mark)."""
        nid = d.id
        if self.cic:
            self.sn[nid] = (max(self.sn.get(nid, 0) + 1, self.clock) if index is None
                            else index)
        store = self.store
        if d.store is not None and store is not None:
            op = d.node.op
            full = whole or not store.has(nid)
            change = checkpoint_delta(op, full, d.ck_inputs or [])
            if d.ck_inputs is not None:
                d.ck_inputs = []
            store.put(nid, d.time, d.last_seen, cast(str, op.checkpoint_form), change, full, -1)
        d.ck_messages = d.ck_rows = 0
        self.since[nid] = [0, 0]
        if self.causal:
            self.marked[nid] = dict(d.last_seen)
        self.send(["pt", nid, d.time, dict(d.last_seen), self.sn.get(nid, 0), forced])

    def tick(self, clock: int) -> None:
        """cic: the controller's write count; a live node whose index lags it by
        ``PERIOD`` writes takes a local checkpoint (``CICRuntime.tick``)."""
        self.clock = max(self.clock, clock)
        for nid, d in self.domains.items():
            if d.node.parents and d.alive and nid not in self.holding \
                    and self.sn.get(nid, 0) <= clock - PERIOD:
                self._uc_take(d)

    def req_uc_checkpoint_all(self, index: int) -> int:
        """Every live node shard with parents checkpoints whole (the graph is quiet;
        cic: at ``index``); points go before the answer."""
        n = 0
        for nid, d in self.domains.items():
            if d.alive and d.node.parents and nid not in self.holding:
                self._uc_take(d, index=index if self.cic else None, whole=True)
                n += 1
        return n

    def req_uc_state(self, nids: Sequence[str]) -> dict[str, Any]:
        """Each live node's time and last-seen times (a recovery line's current state)."""
        out: dict[str, Any] = {}
        for nid in nids:
            d = self.domains.get(nid)
            if d is not None and d.alive:
                out[nid] = [d.time, dict(d.last_seen)]
        return out

    def req_uc_hold(self, nids: Sequence[str]) -> None:
        """Hold what comes for these nodes until ``release`` (direct channels)."""
        for nid in nids:
            self.holding.setdefault(nid, [])

    def req_uc_roll_back(self, nid: str, at: int, last_seen: dict[str, int], checkpoint: Any,
                         index: int) -> None:
        """Node shard ``nid`` (not a base) back to its point: its state the checkpoint
        of ``at`` (a stateful one), its time and last-seen times the point's; what was
        held for it dropped (from an incarnation set back or lost), what comes until
        ``release`` held."""
        if self.direct:
            self.holding[nid] = []
        self.pending.pop(nid, None)
        self.early.pop(nid, None)
        self._set_back(nid, at, last_seen, checkpoint)
        if self.cic:
            self.sn[nid] = index

    def _set_back(self, nid: str, at: int, last_seen: dict[str, int], checkpoint: Any,
                  mark: int | None = None) -> Domain:
        """Node shard ``nid`` (not a base) as of its time ``at``: its state the
        checkpoint of then (a stateful one with parents must have one; the store keeps
        it as ``mark``, ``at`` by default, and the next one is a delta from it), its
        time and last-seen times. Every regime's rollback of a node (uncoordinated,
        cic, causal, coordinated)."""
        d = self.domains[nid]
        d.crash()
        if checkpoint is not None:
            checkpoint_load(d.node.op, checkpoint if isinstance(checkpoint, Checkpoint)
                            else decode_checkpoint(checkpoint))
            if self.store is not None:
                self.store.keep_upto(nid, at if mark is None else mark)
        elif d.store is not None and d.node.parents:
            raise Error(f"node {nid} set back to {at} without its checkpoint")
        d.time = at
        d.last_seen = dict(last_seen)
        d.alive = True
        self.since[nid] = [0, 0]
        return d

    # ------------------------------------------------------------ causal

    def _cs(self, d: Domain) -> CausalState:
        cs = self.cstate.get(d.id)
        if cs is None:
            self.det.plan(self.graph)
            cs = self.cstate[d.id] = self.det.fresh(d.id, d.time, list(d.node.children))
        return cs

    def _causal_handle(self, d: Domain, m: Message, seen: dict[str, int] | None = None) -> int:
        """``m`` taken by ``d`` in the causal regime (``runtime/cluster/causal.py``): its
        determinants logged, the delivery recorded, the output piggybacked and logged in
        flight (``Determinants.take``, as embedded), a local checkpoint and mark when
        due (not in a replay: ``seen``); the rows taken (0: a duplicate)."""
        if self.det.version != self.graph.version:
            self.det.plan(self.graph)
        sends = self.det.take(d, self._cs(d), m, seen)
        if sends is None:
            return 0
        if sends:
            self.emit(sends)
        nid = d.id
        since = self.since.get(nid)
        if since is None:
            since = self.since[nid] = [0, 0]
        since[0] += 1
        since[1] += len(m.batch)
        if seen is None and (since[0] >= tuning.CHECKPOINT_EVERY
                             or since[1] >= tuning.CHECKPOINT_ROWS):
            self._uc_take(d)
        return len(m.batch)

    def causal_gc(self, stables: dict[str, int], levels: dict[str, dict[str, int]]) -> None:
        """The controller's garbage collection (``["cgc", stable marks, levels]``,
        ``causal.py: Causal.gc``): each live node here drops every origin's
        determinants up to that origin's stable mark, and its in-flight log to each
        child up to the child's level."""
        if not (isinstance(stables, dict) and isinstance(levels, dict)):
            raise wire.ProtocolError("a collection must be [cgc, stable marks, levels]")
        for nid, cs in self.cstate.items():
            d = self.domains.get(nid)
            if d is None or not d.alive or nid in self.holding:
                continue
            for o in [nid, *cs.held]:
                t = stables.get(o)
                if type(t) is int:
                    drop_determinants(cs, nid, o, t)
            for c, level in (levels.get(nid) or {}).items():
                if type(level) is int:
                    trim_inflight(cs, str(c), level)

    def req_causal_sizes(self) -> dict[str, Any]:
        """Per live node shard here: its in-flight logs (child -> [the time after which
        each is complete, messages held]) and the determinants it holds, its own
        among them (origin -> [the time before the first, how many]): what the
        garbage collection bounds (tests, ``bench``)."""
        out: dict[str, Any] = {}
        for nid, cs in self.cstate.items():
            d = self.domains.get(nid)
            if d is None or not d.alive:
                continue
            logs = dict(cs.held)
            if cs.own is not None:
                logs[nid] = cs.own
            out[nid] = [{c: [cs.log_from.get(c, 0), len(q)] for c, q in cs.inflight.items()},
                        {o: [log.start, len(log.ports)] for o, log in logs.items()}]
        return out

    def req_causal_state(self, origins: Sequence[str]) -> dict[str, Any]:
        """Per live node shard here: its last-seen times, and the determinants it holds
        of each of ``origins`` (``causal.encode``'s bytes)."""
        self.det.plan(self.graph)
        want = set(origins)
        out: dict[str, Any] = {}
        for nid, d in self.domains.items():
            if not d.alive or nid in self.holding:
                continue
            cs = self.cstate.get(nid)
            held = {} if cs is None else {
                o: encode([(self.det.num_of[o], log.start, log.ports, log.times)])
                for o, log in cs.held.items() if o in want and log.ports}
            out[nid] = [dict(d.last_seen), held]
        return out

    def req_causal_inflight(self, parent: str, child: str, after: int) -> list[Any]:
        """What ``parent`` sent ``child`` after its time ``after``, from its in-flight
        log (a RecoveryError when the log starts later)."""
        cs = self._cs(self.domains[parent])
        start = cs.log_from.get(child, 0)
        if start > after:
            raise RecoveryError(f"parent {parent} no longer holds the messages it sent "
                                f"{child} after its time {after} (its in-flight log starts "
                                f"after {start})")
        return [encode_message(m) for m in cs.inflight.get(child, ()) if m.time > after]

    def req_causal_handoff(self, parent: str, child: str, restart_log: bool) -> bytes:
        """What ``parent`` holds that its restarting ``child`` is to hold; it sends
        ``child`` its determinants afresh from here (``restart_log``: and its in-flight
        log to ``child`` starts now, a child filled outside the message path)."""
        d = self.domains[parent]
        if d.node.kind == "base" or not d.alive:
            return b""
        self.det.plan(self.graph)
        cs = self._cs(d)
        if restart_log:
            cs.inflight[child] = deque()
            cs.log_from[child] = d.time
        return self.det.handoff(parent, cs, child)

    def req_causal_restore(self, nid: str, at: int, last_seen: dict[str, int],
                           checkpoint: Any, seeds: Sequence[bytes],
                           standby: bool = False) -> None:
        """Node shard ``nid`` (lost, on this spare or its standby's worker) back to its
        mark: its state the checkpoint of ``at`` (a stateful one; ``standby``: the
        standby held here, which is as of ``at``, taken over), its time and last-seen
        times the mark's, its causal state afresh from there, holding what its parents
        handed it (``seeds``). What comes for it stays held until ``release``."""
        self.det.plan(self.graph)
        if standby:
            ck = self.standbys.latest(nid, at)
            if ck is None or ck.time != at:
                raise RecoveryError(f"the standby of {nid} here is not as of its mark {at}")
            self.standbys.drop(nid)
            checkpoint = ck
        d = self._set_back(nid, at, last_seen, checkpoint)
        self.marked[nid] = dict(last_seen)
        cs = self.cstate[nid] = self.det.fresh(nid, at, list(d.node.children))
        for data in seeds:
            self.det.receive(nid, cs, data)

    def req_causal_replay(self, nid: str, msgs: Sequence[Any], seen: dict[str, int]) -> list[int]:
        """``nid``'s parents' logged messages, in the order its determinants gave:
        taken now; its output goes to the live children named in ``seen`` beyond their
        times: [messages, rows]."""
        d = self.domains[nid]
        rows = 0
        for raw in msgs:
            m = decode_message(raw)
            d.check_incoming(m)
            rows += self._causal_handle(d, m, dict(seen))
        return [len(msgs), rows]

    def standby_frame(self, f: Sequence[Any]) -> None:
        """A standby's upkeep (``causal.py``, "Standbys"): ``["sb", node, checkpoint or
        None]`` makes this worker ``node``'s standby from the store's newest checkpoint
        (none: from its next whole one); ``["sbck", node, time, parent times, form,
        delta, full]`` is the node's next checkpoint, folded in at once (a delta
        without a checkpoint before it leaves the standby cold: the controller never
        takes a cold one over); ``["sb_drop", node]``: no longer its standby."""
        nid = f[1]
        if type(nid) is not str:
            raise wire.ProtocolError("a standby frame must name its node")
        sb = self.standbys
        if f[0] == "sb":
            sb.drop(nid)
            if f[2] is not None:
                sb.adopt(nid, decode_checkpoint(f[2]))
        elif f[0] == "sbck":
            _, _, at, parents, form, delta, full = f
            if not (type(at) is int and isinstance(parents, dict) and type(full) is bool):
                raise wire.ProtocolError("a standby's checkpoint must be [sbck, node, time, "
                                         "parent times, form, delta, full]")
            if full or sb.has(nid):
                sb.put(nid, at, dict(parents), form, decode_delta(form, delta), full, at)
        else:
            sb.drop(nid)

    def req_causal_parent_restarted(self, nid: str, parent: str, log_from: int) -> bool:
        """``parent``'s log to the live ``nid`` now starts after ``log_from``: if its
        newest mark reflects less of ``parent``, it takes one now (as embedded)."""
        d = self.domains.get(nid)
        if d is None or not d.alive or not d.node.parents:
            return False
        if self.marked.get(nid, {}).get(parent, 0) < log_from:
            self._uc_take(d)
            return True
        return False

    def req_uc_source(self, nid: str) -> None:
        """A lost ``VALUES`` node back: its rows are its definition (a crash keeps
        them), it never sends, its time is 0."""
        d = self.domains[nid]
        d.crash()
        d.alive = True

    def req_uc_base(self, nid: str, seen: dict[str, int], start: int,
                    history: Sequence[Any]) -> int:
        """Base ``nid`` from its writes after ``start`` (parts sent before with
        ``base_history``, then ``history``): it resends each child named in ``seen``
        the writes after that child's time."""
        self.holding.pop(nid, None)
        d = self.domains[nid]
        d.crash()
        _, writes = self.base_parts(nid, history)
        sends = d.write_history(writes, dict(seen), start, start)
        self.emit(sends)
        return len(sends)

    def req_uc_replay(self, nid: str, msgs: Sequence[Any]) -> list[int]:
        """Logged messages resent to ``nid`` (held meanwhile), taken now, in order:
        [messages, rows]."""
        d = self.domains[nid]
        rows = 0
        for raw in msgs:
            m = decode_message(raw)
            d.check_incoming(m)
            rows += self._uc_handle(d, m)
        return [len(msgs), rows]

    def _fill(self, m: Fill) -> None:
        """A fill at node ``m.dst`` of its chain (partial.py): computed from its state
        at the source, passed on by a filter, projection or sharder, applied to each
        key still a hole at the reader, which answers the controller. A fill of many
        keys is handled with Python's cyclic collector paused (``collector_paused``)."""
        with collector_paused(len(m.body[3]), FILL_PAUSE_GC_MIN):
            self._fill_now(m)

    def _fill_now(self, m: Fill) -> None:
        _, rid, path, keys, cols, batches = m.body
        path = list(path)
        at = path.index(m.dst)
        key_tuples = [tuple(k) for k in keys]
        if rid == SIZES:                # (a held operator's bytes, down to the reader)
            if at < len(path) - 1:
                self._pass(path[at + 1], ["fill", path[at + 1], [m.dst, *m.body[1:]]])
            elif self.partial is not None:
                op_id, sizes = batches
                self.partial.sized(m.dst, str(op_id), key_tuples, sizes)
                self.partial.evict()
            return
        if rid == EVICT:                # (an eviction, from the aggregate down: Eviction)
            if at == len(path) - 1:
                if self.partial is not None:
                    self.partial.evicted(m.dst, key_tuples)
                return
            if m.dst in self.held_cols:     # (the topmost held, then each below it)
                op: Any = self.graph[m.dst].op
                if op.holes is not None:
                    for k in key_tuples:
                        held = op_key(op, self.held_cols[m.dst], k)
                        if held in op.holes:
                            op.evict(held)
            rows = []
        elif batches is None:             # (the source, here: its state as of now,
            held = self.waiting(m.dst)      # but a base's writes whose output waits)
            rows = source_rows(self.graph, path, tuple(cols), key_tuples, held)
        else:
            rows = [decode_batch(b) for b in batches]
            if at == len(path) - 1:
                direct = None
                if is_direct(rid):      # (this worker's own upquery: ``direct_miss_now``)
                    direct = self.direct_ups.pop(rid, None)
                    if direct is None:
                        return          # (failed, or given up on: the client asked the
                                        # controller; never applied, so nothing to undo)
                reader = cast("Reader", self.graph[m.dst].op)
                answers = []
                filled = 0              # (the bytes of the keys filled, before eviction)
                n_filled = 0
                partial = self.partial
                for k, b in zip(key_tuples, rows):
                    key = k[0] if len(k) == 1 else k
                    found = reader.lookup(key)
                    if found is None:   # (held already: the fill is not applied again)
                        n_filled += 1
                        found = reader.fill(key, b)
                        filled += reader.filled.get(key, 0)
                        if partial is not None:     # (and the operators' above it)
                            filled += partial.above_of(m.dst, key)
                    answers.append(found)
                if n_filled:            # (a key's bytes, for ``direct_miss_now``)
                    per_key = filled // n_filled
                    self.direct_per_key = (per_key if not self.direct_per_key else
                                           (3 * self.direct_per_key + per_key) // 4)
                if partial is not None and partial.limit is not None:
                    partial.evict()     # (its bytes then, for the controller's shares)
                    self.send(["mem", partial.total, self._held_keys(), filled])
                if direct is None:
                    self.send(["rep", rid, answers])
                    return
                self.direct_fills += len(answers)
                direct[1](answers)
                self._paused_yet()
                return
            if m.dst in self.held_cols and self.graph[m.dst].kind == "join":
                op = self.graph[m.dst].op   # (held partial: both sides' fills meet here)
                hc = self.held_cols[m.dst]
                side = self.graph[m.dst].parents.index(path[at - 1])
                done = op.arrive(side, rid, [op_key(op, hc, k) for k in key_tuples], rows,
                                 all(c < op.left_width for c in hc))
                if done is None:
                    return              # (until the other side's rows arrive)
                rows = done
                self._report_sizes(m.dst, key_tuples)
            elif m.dst in self.held_cols:   # (held partial: filled on the way)
                op = self.graph[m.dst].op
                hc = self.held_cols[m.dst]
                rows = [through_held(op, hc, k, b) for k, b in zip(key_tuples, rows)]
                self._report_sizes(m.dst, key_tuples)
            elif at:                    # (at 0, a base's rows, computed on the controller)
                rows = [step(self.graph, m.dst, path[at + 1], b) for b in rows]
        nxt = path[at + 1]
        self._pass(nxt, ["fill", nxt, [m.dst, rid, path, keys, cols,
                                       None if rid == EVICT
                                       else [encode_batch(b) for b in rows]]])

    def direct_miss(self, nid: str, key: Any,
                    at_once: Callable[[Any], None]) -> list[Any] | None:
        """A client's ``get`` found ``key`` a hole of partial reader ``nid`` (a read
        thread's call, reads.py): its rows, from this worker's own upquery (handed to
        the message thread: ``direct_miss_now``), given to ``at_once`` first, on the
        message thread (it sends the answer without waiting for this thread to wake);
        None when it falls back (the client then asks the controller, as before): not
        ready, paused, or no answer within ``tuning.DIRECT_MISS_TIMEOUT``."""
        def first(found: list[Any] | None) -> None:
            at_once(None if found is None else found[0])
        (found,) = self.direct_miss_many([(nid, [key])], first)
        return None if found is None else cast("list[Any] | None", found[0])

    def direct_miss_many(self, asks: Sequence[tuple[str, list[Any]]],
                         at_once: Callable[[Any], None] | None = None
                         ) -> list[list[Any] | None]:
        """Each ``(reader, keys)`` of ``asks`` (a read thread's: a ``read`` or a ``get``
        that found holes there), upqueried by this worker itself, every one handed to
        the message thread before the first answer is waited for (their fills travel
        together): each one's rows per key (None for a key still a hole), or None
        where it falls back (as ``direct_miss``). ``at_once``: given the one ask's
        answer on the message thread (one ask only)."""
        out: list[list[Any] | None] = [None] * len(asks)
        waits = []
        for i, (nid, keys) in enumerate(asks):
            if nid not in self.direct_ready or self.paused or self.ended:
                continue                # (checked again on the message thread)
            rid = next(self.direct_rids)
            done = threading.Event()

            def reply(found: Any, i: int = i, done: threading.Event = done) -> None:
                if at_once is not None:
                    at_once(found)
                out[i] = found
                done.set()
            self.inbox.put_client((CLIENT, ["dm", nid, keys, rid, reply]))
            waits.append((rid, done))
        deadline = time.monotonic() + tuning.DIRECT_MISS_TIMEOUT
        for rid, done in waits:
            while not done.wait(0.5):
                if self.ended or time.monotonic() > deadline:
                    self.inbox.put_client((CLIENT, ["dm_drop", rid]))
                    break
        return out

    def direct_miss_now(self, nid: str, keys: list[Any], rid: int,
                        reply: Callable[[Any], None]) -> None:
        """``direct_miss_many``'s ask on the message thread: keys all held by now answer
        from the reader; else, if the controller last found the reader's chains up
        (``direct_ready``), no catalog change holds the writes (``paused``) and the
        keys fit this worker's share, one ``fill`` frame of them up each chain,
        request id ``rid`` (``DIRECT``), to its source, on the messages' channels, as
        the controller sends them; the reader answers ``reply`` when it lands
        (``_fill_now``: each key's rows). Any other case answers what the reader
        holds, None for a hole (which the client upqueries through the controller),
        or None for them all."""
        d = self.domains.get(nid)
        partial = self.partial
        if d is None or not d.alive or d.node.kind != "reader" or nid in self.holding \
                or partial is None:
            reply(None)
            return
        reader = cast("Reader", d.node.op)
        try:
            found = [reader.lookup(k) for k in keys]
        except Exception:               # noqa: BLE001 - the controller's path says why
            reply(None)
            return
        chains = self.direct_chains.get(nid)
        if None not in found or chains is None or nid not in self.direct_ready \
                or self.paused or (partial.limit is not None and partial.total + len(keys)
                                   * max(self.direct_per_key, 1) > partial.limit):
            reply(found)
            return
        self.direct_ups[rid] = (nid, reply)
        asked = [list(k) if type(k) is tuple else [k] for k in keys]
        for path, cols in chains:       # (one a chain: they meet at a held join)
            self._pass(path[0], ["fill", path[0], ["", rid, path, asked, list(cols), None]])

    def _direct_off(self, reader_id: str | None = None) -> None:
        """This worker's own upqueries stop (of reader ``reader_id``; None: of every
        reader) until the controller's next upquery of the reader says its chains
        are up (``direct_ok``): a worker lost (a fill may be lost with it, a node of
        a chain down), a held operator lost, a reader made full or dropped. Those on
        their way answer the hole (their clients ask the controller, which waits for
        the recovery), and their fills are not applied if they land."""
        for rid, (nid, reply) in list(self.direct_ups.items()):
            if reader_id is None or nid == reader_id:
                del self.direct_ups[rid]
                reply(None)
        if reader_id is None:
            self.direct_ready.clear()
        else:
            self.direct_ready.discard(reader_id)
        self._paused_yet()

    def _pass(self, nxt: str, frame: list[Any]) -> None:
        """A ``fill`` frame on to node ``nxt`` of its chain, on the messages' channel."""
        if self.direct:
            self.route(nxt, frame)
        else:
            self.send(frame)

    def _report_sizes(self, nid: str, keys: list[tuple[Any, ...]] | None = None) -> None:
        """With a limit: the bytes operator ``nid`` (held partial) holds for ``keys``
        (just filled), or for the keys the message it just handled touched (measured
        now; those whose bytes changed), sent down its chain to its reader's worker,
        which counts them (``SIZES``; partial.py, Eviction). It goes ahead of the
        fill it follows, so that the reader's worker knows them when the fill lands."""
        partial = self.partial
        reader_id = self.held_reader.get(nid)
        if partial is None or partial.limit is None or reader_id is None:
            return
        op: Any = self.graph[nid].op
        holes = op.holes
        cols = self.held_cols[nid]
        if keys is not None:
            sizes = [holes.size_of(op_key(op, cols, k)) for k in keys]
        else:
            touched = [k for k in holes.dirty if k in holes]
            if not touched:
                holes.dirty.clear()
                return
            before = [holes.size_of(k) for k in touched]
            op.settle()
            changed = [(k, holes.size_of(k)) for k, b in zip(touched, before)
                       if holes.size_of(k) != b]
            if not changed:
                return
            keys = [key_of(op, cols, k) for k, _ in changed]
            sizes = [b for _, b in changed]
        path = partial.upstream[reader_id][1]
        nxt = path[path.index(nid) + 1]
        self._pass(nxt, ["fill", nxt, [nid, SIZES, path, [list(k) for k in keys], [],
                                       [nid, sizes]]])

    def report_progress(self, c: Domain) -> None:
        for b_id, t, paths, trim in c.progress_report():
            b = self.domains.get(b_id)
            if b is not None:
                self.progress(b_id, c.id, t, paths, trim)
            elif self.direct:
                self.route(b_id, ["progress", b_id, c.id, t, paths, trim])
            else:
                self.send(["progress", b_id, c.id, t, paths, trim])

    def progress(self, b_id: str, c_id: str, t: int, paths: dict[str, int],
                 trim: int | None) -> None:
        b = self.domains.get(b_id)
        if b is None or not b.alive or b_id in self.holding:
            return
        for a_id, level in b.on_progress(c_id, t, paths, trim):
            if a_id in self.domains:
                self.truncate(a_id, b_id, level)
            elif self.direct:
                self.route(a_id, ["trunc", a_id, b_id, level])
            else:
                self.send(["trunc", a_id, b_id, level])
        if b.node.kind == "base":
            # the base's write history (the controller's, or with writes at the workers
            # its log here and at its replica): trimmed as its children go on
            low = b.history_low()
            if low - self.history_lows.get(b_id, 0) >= tuning.HISTORY_TRIM_EVERY:
                self.history_lows[b_id] = low
                if self.at_workers:
                    self._trim_log(b_id, low)
                else:
                    self.send(["hlow", b_id, low])

    def truncate(self, a_id: str, b_id: str, level: int) -> None:
        a = self.domains.get(a_id)
        if a is not None and a.alive and a_id not in self.holding:
            a.truncate(b_id, level)

    def write(self, base_id: str, batch: Batch) -> None:
        d = self.domains.get(base_id)
        if d is not None and d.alive:
            self.emit(d.write(batch))
            if base_id in self.logs:
                # (writes at the workers: a write the controller made, its tables'
                # rows as a restarted controller reopens them, after the base's log
                # was made, when its replica was named) the log, on disk too, is made
                # again as of the base now and its replica sent it whole; else the
                # next restart would take the table from a log without those rows
                self.logs.pop(base_id)
                if self.replica_of.get(base_id):     # (a replica named: its fill)
                    self.set_replica(base_id, self.replica_of[base_id])
                else:
                    self._log(base_id)

    # ------------------------------------------------------------ requests (recovery, reads)
    # (their arguments are msgpack values as decoded, arrays as tuples; their results
    # go back as msgpack: lists, maps, scalars)

    def waiting(self, nid: str) -> list[Batch]:
        """The writes base ``nid`` has applied whose output waits for its log (the
        replica's), in order: not acknowledged yet."""
        return [b for _, b, _, _ in self.accepted.get(nid, []) + self.committing.get(nid, [])]

    def table_now(self, nid: str) -> Batch:
        """Base ``nid``'s rows (``ClusterRuntime.table``, with writes at the workers), as
        of now among the writes taken here: every acknowledged write in, those whose
        output waits for the log left out (the views do not have them yet either),
        the table then given as one batch of rows, each with its count."""
        op = cast("Base", self._up(nid).node.op)
        held = self.waiting(nid)
        snap = op.snapshot()
        return before(snap, (), (), held) if held else snap

    def req_table(self, nid: str) -> Any:
        return encode_batch(self.table_now(nid))

    def req_matching(self, nid: str, where: Any) -> list[Any]:
        """The rows of base ``nid``'s table, as ``table_now`` has them, for which the
        WHERE ``where`` (``sql_frontend.wire`` data; None: every row) holds, each as
        many times as its count, as one batch (``where.matching``); none, an empty
        list, if it divides by zero on one of them. With no write waiting for its log,
        the table is read as kept (``Base.parts``: columns tested as columns)."""
        op = cast("Base", self._up(nid).node.op)
        parts = [self.table_now(nid)] if self.waiting(nid) else op.parts()
        rows = matching(parts, None if where is None else plan_wire.from_data(where))
        return [] if rows is None else [encode_batch(Batch(rows, [1] * len(rows)))]

    def req_table_size(self, nid: str) -> int:
        """The number of rows in base ``nid``'s table, as ``table_now`` has them."""
        op = cast("Base", self._up(nid).node.op)
        return len(op) - sum(sum(b.signs) for b in self.waiting(nid))

    def req_primary_keys(self, nid: str) -> Any:
        """The primary keys of base ``nid``'s table, as ``table_now`` has them
        (``Table.primary_keys`` at the controller): the keys alone cross, not the rows,
        as a batch in columns (``encode_batch``: an INT or FLOAT key as bytes). With a
        write waiting for its log, the keys of ``table_now``'s rows (which undoes it)."""
        op = cast("Base", self._up(nid).node.op)
        keys = ([op.key_of(r) for r, c in self.table_now(nid) if c > 0]
                if self.waiting(nid) else list(op.by_key))
        if not keys:
            return encode_batch(Batch())
        cols = typed_columns([op.types[c] for c in op.pk], keys)
        return encode_batch(Batch.columnar(cols, np.ones(len(keys), dtype=np.int64)))

    def req_rows_by_key(self, nid: str, keys: Sequence[Any]) -> list[tuple[Any, ...] | None]:
        """The row of base ``nid``'s table under each primary key (None: none), as
        ``table_now`` has them (a ``delete_keys`` at the controller)."""
        op = cast("Base", self._up(nid).node.op)
        held = self.waiting(nid)
        out = []
        for k in keys:
            key = canon_row(tuple(k))
            row = op.by_key.get(key)
            if held:
                was = before(Batch() if row is None else Batch([row], [1]), op.pk, key, held)
                row = next((r for r, s in was if s > 0), None)
            out.append(row)
        return out

    def sent_time(self, nid: str) -> int:
        """Node ``nid``'s time as its children know it: for a base, that of the last
        write it passed on. Its writes whose output waits for the log were not sent
        (the held writes are its latest, one time each); the children take them when
        they are (``durable``). What a recovery reads of a base (``req_info``,
        ``req_payload_after``) stops there, both alike: a child restored while its
        base held a write, resumed after it by ``info`` but given the log without it,
        dropped the held write as a duplicate when it came (a COUNT 5 rows short,
        found by a SIGKILL soak)."""
        return self.domains[nid].time - len(self.waiting(nid))

    def req_info(self, nid: str) -> list[Any]:
        """What recovery reads of node ``nid`` (``Domain.info``), as of ``sent_time``."""
        i = self.domains[nid].info()
        time, clock = self.sent_time(nid), i.clock
        if time != i.time and clock is not None:
            clock = clock.copy()
            clock[0] = time             # (a base has no parents: its own entry alone)
        arr = wire.encode_array
        return [i.alive, time, i.last_seen, arr(clock), arr(i.log_rows), arr(i.diff_rows)]

    def req_payload_after(self, nid: str, child: str, t: int) -> list[Any]:
        """The logged messages to ``child`` after ``t`` and the time, as of
        ``sent_time``."""
        msgs, now = self.domains[nid].payload_after(child, t)
        sent = self.sent_time(nid)
        if sent < now:
            msgs = [m for m in msgs if m.time <= sent]
            now = sent
        return [[encode_message(m) for m in msgs], now]

    def req_output_info(self, nid: str, child: str, upto: int) -> list[Any]:
        """A node's output to ``child`` up to its time ``upto`` (``Domain.output_info``,
        for ``treeclock.output_through``). A base with its log here (writes at the
        workers) answers from that log: its first ``upto`` writes (a base passes each
        write on whole), or ``RecoveryError`` if the log is trimmed past ``upto``
        (the recovery then rebuilds, as when any log no longer reaches back), so
        the controller holds no copy of the table for this."""
        log = self.logs.get(nid) if self.at_workers else None
        if log is not None:
            return [encode_batch(log.state_at(upto).snapshot()), [], upto, {}]
        snap, later, now, last_seen = self.domains[nid].output_info(child, upto)
        return [None if snap is None else encode_batch(snap),
                [encode_message(m) for m in later], now, last_seen]

    def set_holder(self, name: str | None) -> None:
        """``["ck_holder", worker | None]``: this worker's checkpoints go to ``worker``
        from now on (holders.py), which holds none of them yet: every live stateful
        node shard takes a whole one, so that a loss of this worker from then on
        finds them there (each later one a delta from it): from
        ``tuning.HOLDER_WHOLE_AFTER`` on, one node a turn of the message thread
        (``whole_turn``), unless the node's own next checkpoint, whole, comes first.
        Not all at once here: a holder is named at the end of a recovery, and whole checkpoints
        of every node at once held the message thread for a second at 2e6 votes,
        which the views' next update waited for."""
        store = self.store
        if not isinstance(store, RemoteStore) or not store.to_holder:
            raise wire.ProtocolError("ck_holder: this worker's checkpoints go to the controller")
        store.set_holder(name)
        self.whole_for = name
        self.whole_due = []
        self.due_whole([nid for nid, d in self.domains.items()
                        if d.store is not None and d.alive])

    def due_whole(self, nids: Sequence[str]) -> None:
        """Node shards ``nids`` (stateful, alive) owe the holder a whole checkpoint,
        each in its turn (``whole_turn``) from ``tuning.HOLDER_WHOLE_AFTER`` on: all
        of them when a holder is named, and one brought back here after that (a
        recovery's ``restore``, a rebuild's ``reset``), whose checkpoints so far are
        at the holder of the worker it was lost with, if anywhere. Without this, a
        holder named in the middle of a recovery (the log replicas' choice names it
        then) was owed nothing for the nodes restored after it, so that a second
        loss found none of their checkpoints and rebuilt them from the whole table
        (seconds at 1e7 votes, against 0.05 s from a checkpoint)."""
        name = self.whole_for
        if name is None or not nids:
            return
        idle = not self.whole_due
        self.whole_due.extend(n for n in nids if n not in self.whole_due)
        if idle:                        # (else a turn is on its way and takes them)
            timer = threading.Timer(tuning.HOLDER_WHOLE_AFTER, self.inbox.put,
                                    args=((SELF, ["whole", name]),))
            timer.daemon = True
            timer.start()

    def whole_turn(self, name: str) -> None:
        """``["whole", holder]`` (this worker's own): the next node shard of
        ``whole_due`` that the holder holds nothing of yet checkpoints whole, and the
        next turn goes behind what waits in the inbox now."""
        store = self.store
        if name != self.whole_for or store is None:
            return                          # (another holder named since)
        while self.whole_due:
            nid = self.whole_due.pop()
            d = self.domains.get(nid)
            if d is None or d.store is None or not d.alive or nid in self.holding \
                    or store.has(nid):
                continue                    # (gone, down, or whole since)
            d.checkpoint()
            break
        if self.whole_due:
            self.inbox.put((SELF, ["whole", name]))

    def req_ck_latest(self, origin: str, nid: str, at_most: int) -> list[Any] | None:
        """The newest checkpoint held here of worker ``origin``'s node shard ``nid`` at
        or below ``at_most`` (a recovery's, after the fence of ``origin``'s loss), as
        the wire carries it; None: none."""
        return self.held_checkpoints.latest(origin, nid, at_most)

    def req_restore(self, nid: str, t: int, clock: Any, last_seen: dict[str, int],
                    inputs: Sequence[Any], checkpoint: Any) -> None:
        d = self.domains[nid]
        d.tc = self.tc
        # (never None: ClusterRuntime.restore sends the array Runtime.restore takes)
        d.restore(t, cast("np.ndarray", wire.decode_array(clock)), last_seen)
        d.restore_state(None if checkpoint is None else decode_checkpoint(checkpoint),
                        [(port, decode_batch(b)) for port, b in inputs])
        if d.store is not None:
            self.due_whole([nid])

    def req_replay(self, nid: str, msgs: Sequence[Any], seen: dict[str, int]) -> int:
        self.emit(self.domains[nid].replay([decode_message(m) for m in msgs], seen))
        return len(msgs)

    def req_parent_restarted(self, nid: str, parent: str, log_from: int) -> bool:
        d = self.domains.get(nid)
        return d is not None and d.parent_restarted(parent, log_from)

    def req_base_history(self, nid: str, i: int, writes: Sequence[Any],
                         table: Sequence[Any]) -> None:
        """Part ``i`` of a lost base's history (its table's batches, with writes at
        the workers, and writes), ahead of the request that uses it (a long history
        comes in parts: no frame is near the size limit). Part 0 starts afresh: what
        an abandoned attempt sent before is dropped."""
        got = self.history.get(nid)
        if i == 0:
            got = self.history[nid] = PartsTaken("", 0)
        elif got is None or got.taken != i:
            raise RecoveryError(f"base {nid}: part {i} of its history after "
                                f"{got.taken if got else 0} parts")
        got.taken += 1
        got.table.extend(decode_batch(b) for b in table)
        got.writes.extend(decode_batch(b) for b in writes)

    def base_parts(self, nid: str, last: Sequence[Any]) -> tuple[list[Batch], list[Batch]]:
        """Base ``nid``'s history for a restore, resend or roll-back: the parts sent
        ahead (``req_base_history``) and ``last`` (``[writes, table, parts ahead]``,
        ``ClusterRuntime.history_parts``): (the table's batches, the writes). Parts
        kept from another attempt than this one are never taken: the count must be
        the one ``last`` names."""
        writes, table, ahead = last
        got = self.history.pop(nid, None)
        if got is None or not ahead:    # (none ahead: what is kept is another attempt's)
            got = PartsTaken("", 0)
        if got.taken != ahead:
            raise RecoveryError(f"base {nid}: {got.taken} parts of its history arrived, "
                                f"not the {ahead} sent ahead")
        return (got.table + [decode_batch(b) for b in table],
                got.writes + [decode_batch(b) for b in writes])

    def req_restore_base(self, nid: str, history: Sequence[Any], seen: dict[str, int],
                         low: int, start: int, tags: Sequence[int] = ()) -> int:
        """With writes at the workers, ``history`` is the base's whole log, read from
        its live replica or the lost workers' disks (``ClusterRuntime.restore_base``):
        its table as of ``start`` too (its writes then are every write after it, not
        just those after ``low``), and ``tags`` those of its last writes, kept here
        for ``log_landed``."""
        rows, writes = self.base_parts(nid, history)
        log = None
        if self.at_workers:
            log = history_from(cast("Base", self.domains[nid].node.op), start, rows, writes)
            self.replica_logs.keep_tags(nid, tags)
            if self.disk is not None:
                self.disk.reset(nid, log)
        return self._base_back(nid, seen, low, start, rows, writes, log)

    def req_promote_base(self, nid: str, seen: dict[str, int], low: int, owner: str
                         ) -> int | None:
        """A lost owner's base restored here, its log replica (``writes.py``, *the
        replica promoted*): its whole log here from ``owner`` (``ReplicaLogs.whole``)
        becomes the base's own, and the base is rebuilt from it, so no table crosses
        the network; its log on disk (``--data-dir``) is already this one. None,
        nothing changed: no whole log of that owner's here."""
        h = self.replica_logs.whole(nid, owner)
        if h is None:
            return None
        # (kept as the replica's log too, and its tags: a recovery that fails
        # part-way abandons the base, and its next attempt promotes it again; a later
        # owner's whole log replaces it, ``ReplicaLogs.part``)
        start, rows, writes = h.table()         # (the table's batches, not joined)
        return self._base_back(nid, seen, low, start, rows, writes, h)

    def _base_back(self, nid: str, seen: dict[str, int], low: int, start: int,
                   rows: Sequence[Batch], writes: list[Batch], log: WriteHistory | None
                   ) -> int:
        """The base rebuilt from its history (``Domain.write_history``); ``log``: its
        log from now on (writes at the workers), whose replica is named next
        (``["replica", ...]``; its writes wait meanwhile)."""
        d = self.domains[nid]
        d.tc = self.tc
        for group in (self.accepted.pop(nid, []), self.committing.pop(nid, [])):
            for _, _, reply, _ in group:
                reply(UNKNOWN)          # (the log says what became of them)
        if log is not None:
            self.logs[nid] = log
            self.replica_of.pop(nid, None)
            self.replica_fill.pop(nid, None)
            self.committing_via.pop(nid, None)
            self.filling.pop(nid, None)
        sends = d.write_history(writes, seen, low, start, rows)
        self.emit(sends)
        return len(sends)

    # ------------------------------------------------------------ writes at this worker
    # (``serve --writes worker``; docs/architecture.md, "Writes at the base's worker")

    def client_write(self, nid: str, method: str, args: Sequence[Any], tag: int,
                     at_once: Callable[[Any], None]) -> Any:
        """A client's write to base ``nid`` (a read thread's call): handled by the
        message thread in turn; returns ``accept``'s outcome once it is known, which
        ``at_once`` is given first, on the message thread (it sends the answer without
        waiting for this thread to wake: ``reads.py``)."""
        done = threading.Event()
        out: list[Any] = []

        def reply(outcome: Any) -> None:
            at_once(outcome)
            out.append(outcome)
            done.set()
        self.inbox.put_client((CLIENT, ["cw", nid, method, args, reply, tag]))
        while not done.wait(1.0):
            if self.ended:      # (a write it never took: nothing written, the client
                return out[0] if out else None  # asks where the base is now, at the spare)
        return out[0]

    def end_writes(self) -> None:
        """The message thread ends (its controller gone, or ``stop``): writes waiting
        for their log may or may not be in it (on disk, with ``--data-dir``); their
        clients are told so (``IN_DOUBT``), and ask the next controller. ``ended`` is
        set last, once every write it took has its answer: one still in the inbox then
        was never taken, nothing written (``client_write``)."""
        if self.reads.write == self.client_write:
            self.reads.write = None
        if self.reads.miss == self.direct_miss:
            self.reads.miss = None      # (its holes answered as holes: the client asks)
            self.reads.miss_many = None
        for groups in (self.committing, self.accepted):
            for group in groups.values():
                for _, _, reply, _ in group:
                    reply(IN_DOUBT)
            groups.clear()
        for f in self.deferred:
            f[4](None)                  # (never taken: nothing written)
        self.deferred = []
        self.ended = True
        if self.disk is not None:
            self.disk.close()           # (what it holds is on disk already)

    def controller_write(self, rid: int, args: Sequence[Any]) -> None:
        """The controller's ``cwrite`` (a write made there: ``ClusterRuntime.forward``),
        answered as ``accept`` says, once durable."""
        def reply(outcome: Any) -> None:
            self.links.flush()          # (what it sent goes out before its answer)
            self.send(["rep", rid, outcome])
        if len(args) != 3 or type(args[2]) is not int:
            self.send(["err", rid, "ProtocolError", "cwrite takes [base, batch, tag]"])
            return
        self.accept(str(args[0]), "batch", [args[1]], reply, args[2])

    def accept(self, nid: str, method: str, args: Sequence[Any],
               reply: Callable[[Any], None], tag: int = 0) -> None:
        """Validate a write against the base's rows here (``Base.prepare``, as the
        embedded engine does) and apply it, its output held until its log has it.
        ``reply``: None if the base is not up here (nothing written: ask where it is),
        ``[error class name, message]`` if refused (nothing changed), or ``[]`` once the
        write is durable and passed on. ``tag``: the write's name, given by the client
        or the controller, which goes with it to the log (``write_landed``,
        ``ClusterRuntime.forward``)."""
        d = self.domains.get(nid)
        if d is None or not d.alive or d.node.kind != "base" or nid in self.holding \
                or self.gone and not self._durable_alone(nid):
            reply(None)
            return
        try:
            batch = self._batch(cast("Base", d.node.op), method, args)
        except Error as e:
            reply([type(e).__name__, str(e)])
            return
        except (wire.ProtocolError, TypeError, ValueError) as e:
            reply(["Error", f"a malformed write: {type(e).__name__}: {e}"])
            return
        if not batch:
            reply([])
            return
        self._log(nid)                  # (made before its first write: as of the rows now)
        entry: _Accepted = [[], batch, reply, tag]
        self.accepted.setdefault(nid, []).append(entry)
        alone = nid in self.replica_of and self.replica_of[nid] is None
        if nid not in self.committing and not alone:
            self.commit(nid)            # (out before the apply: the round trips overlap)
        entry[0] = d.write(batch)       # (held until ``durable``, which comes after this)
        if alone and nid not in self.committing:
            self.commit(nid)            # (durable at once: after its apply, its output made)

    def _durable_alone(self, nid: str) -> bool:
        """Whether a write of base ``nid`` can be made durable with no controller: its
        log replica is named and holds the whole log. While the controller is down (``gone``), a write of
        any other base is not taken (``moved``: the client asks the next controller),
        so no new log is made on disk then (``DiskLogs`` under a directory a
        restarted controller may have set aside: ``restart.set_aside_workers_logs``)."""
        via = self.replica_of.get(nid)
        return bool(via) and nid not in self.filling and nid in self.logs

    def _batch(self, op: Base, method: str, args: Sequence[Any]) -> Batch:
        """The validated batch of a write request (no state changes)."""
        if method == "batch":           # the controller's: rows already checked
            return validated(op, decode_batch(args[0]))
        if method == "insert":
            (rows,) = args
            return op.prepare(list(rows))
        if method == "insert_columns":
            n, columns = args
            if type(n) is not int or n < 0 or not isinstance(columns, (list, tuple)):
                raise wire.ProtocolError("insert_columns takes [rows, columns]")
            if len(columns) != len(op.types):
                raise ArityError(f"{len(columns)} columns for table {op.schema.name!r}, "
                                 f"which has {len(op.types)}")
            arrays = [wire.decode_numbers(c, n) for c in columns]
            taken = op.arrays_from_numbers(arrays)
            if taken is not None:
                return op.prepare_arrays(taken) if n else Batch()
            return op.prepare(list(zip(*[a.tolist() for a in arrays])))
        if method == "insert_arrow":
            (data,) = args
            cols = arrow_columns(from_ipc(data), [c.name for c in op.schema.columns],
                                 op.schema.name)
            taken = op.arrays_from_arrow(cols)
            if taken is not None:
                return op.prepare_arrays(taken) if len(taken[0]) else Batch()
            return op.prepare(column_rows(cols))
        raise wire.ProtocolError(f"unknown write {method!r}")

    def commit(self, nid: str) -> None:
        """Send the base's accepted writes to its log replica (``writes.py``), all in
        one frame (group commit: those accepted while the last group was on its way),
        marked with the fill's number while its whole log is being sent (``_rlog``:
        the replica keeps it aside and answers it at once); with its replica lost or not
        named yet, they wait for the next; with no other live worker at all (None),
        durable once in this worker's log (on disk with ``--data-dir``), at once."""
        via = self.replica_of.get(nid, NO_REPLICA_YET)
        if via == NO_REPLICA_YET:
            return
        group = self.accepted.pop(nid, None)
        if not group:
            return
        self.committing[nid] = group
        self.committing_via[nid] = via
        log = self._log(nid)
        batches = [b for _, b, _, _ in group]
        for b in batches:
            log.append(b)
        tags = [tag for _, _, _, tag in group]
        if via is not None:
            self.links.send(via, self._rlog(nid, batches, tags, via))
            self.links.flush()          # (on its way while this worker goes on)
        if self.disk is not None:               # (durable here before ``durable`` runs)
            self.disk.append(nid, batches, tags)
        if via is None:
            self.durable(nid, len(group), None)

    def _rlog(self, nid: str, batches: list[Batch], tags: list[Any],
              via: str) -> list[Any]:
        """A group's frame to the replica ``via``: ``["rlog", base, batches, tags]``,
        with the fill's number after them while its whole log is on its way there
        (the replica keeps such a group aside until the whole log, and answers it at
        once: ``ReplicaLogs.during_fill``)."""
        frame: list[Any] = ["rlog", nid, [encode_batch(b) for b in batches], tags]
        filling = self.filling.get(nid)
        if filling is not None and filling.replica == via:
            frame.append(filling.fill)
        return frame

    def _log(self, nid: str) -> WriteHistory:
        """The base's own log (made before its first write here, or when it is first
        sent to a replica: the table as it is then, at its time then; at time 0 too:
        a restarted controller's tables are filled into their bases before any write,
        and its next restart takes the rows from this log, ``writes.tables_on_disk``)."""
        log = self.logs.get(nid)
        if log is None:
            d = self.domains[nid]
            at, op = d.time, cast("Base", d.node.op)
            log = self.logs[nid] = history_from(op, at, op.parts(), [])
            if self.disk is not None:
                self.disk.reset(nid, log)
        return log

    def _trim_log(self, nid: str, low: int) -> None:
        """The base's log (here and at its replica) folded up to ``low`` (its children
        have every write up to it); not the replica's while a whole log is on its way
        there (it is trimmed at the next trim)."""
        log = self.logs.get(nid)
        if log is None:
            return
        log.trim(low)
        if self.disk is not None:
            self.disk.trimmed(nid, log)
        via = self.replica_of.get(nid)
        if via and nid not in self.filling:
            self.links.send(via, ["rtrim", nid, low])

    def durable(self, nid: str, n: int, src: str | None) -> None:
        """The log (the replica ``src``'s; None: this worker's alone) has the group
        sent: its output goes out, then the answers; the writes accepted meanwhile
        are sent next."""
        if self.committing_via.get(nid, NO_REPLICA_YET) != src or nid not in self.committing:
            return                      # (a group of a replica lost since: sent again)
        group = self.committing.pop(nid)
        if len(group) != n:
            raise wire.ProtocolError(f"durable {n} writes of {nid}, {len(group)} sent")
        self.committing_via.pop(nid, None)
        for out, _, _, _ in group:
            if out:
                self.emit(out)
        if self.direct:
            self.links.flush()          # (its output goes on before the answers, which go
        for _, _, reply, _ in group:    # at once: ``client_write``)
            reply([])
        self.commit(nid)
        self._paused_yet()

    def set_replica(self, nid: str, name: str | None, waits: bool = False) -> None:
        """``["replica", base, worker]``: the base's log goes to ``worker`` from now on
        (None: no other worker is alive, this worker's log alone is the log). A new
        replica is first sent the whole log, in the background (``whole_log_part``),
        or, ``waits`` (named during a recovery), from ``fill_go`` on;
        the group in flight to a lost replica, if any, is cut from it and sent as a
        group of its own, at once, as are the groups committed meanwhile (``commit``),
        each marked with the fill's number: the replica keeps them aside until the
        whole log is there and answers each at once (``ReplicaLogs.during_fill``),
        which acknowledges it: no write is acknowledged that only this worker holds
        while another is alive."""
        d = self.domains.get(nid)
        if d is None or d.node.kind != "base":
            return
        self.filling.pop(nid, None)
        self.replica_of[nid] = name
        group = self.committing.get(nid)
        if name is None:
            if group:                   # (its replica lost: this worker's log has it)
                self.committing_via[nid] = None
                self.durable(nid, len(group), None)
            else:
                self.commit(nid)
            return
        log = self._log(nid)
        # (the table's batches as the log holds them: nothing joined on this thread)
        start, table, writes = log.table()
        # the group in flight (to a lost replica) is the log's last writes: none of
        # its output went out, so no child's progress trimmed them; it goes to the
        # new replica as a group of its own, answered before the whole log is there
        inflight = len(group or ())
        if inflight > len(writes):
            raise wire.ProtocolError(f"base {nid}: {inflight} writes in flight, "
                                     f"{len(writes)} in its log")
        self.fills += 1
        self.filling[nid] = Filling(name, self.fills, parts=whole_log_frames(
            nid, self.fills, start, table, writes[:len(writes) - inflight]), waiting=waits)
        if not waits:
            self.inbox.put_fast((SELF, ["wlog", nid, name, self.fills]))
        else:                           # (the controller's ``fill_go``, or at the latest:)
            timer = threading.Timer(tuning.FILL_WAITS_AT_MOST, self.inbox.put_fast,
                                    args=((SELF, ["fill_go"]),))
            timer.daemon = True
            timer.start()
        if group:
            self.committing_via[nid] = name
            self.links.send(name, self._rlog(nid, [b for _, b, _, _ in group],
                                             [tag for _, _, _, tag in group], name))
            self.links.flush()
        else:
            self.commit(nid)

    def fill_go(self) -> None:
        """``["fill_go"]`` (the controller's, at a recovery's end, or this worker's own
        ``tuning.FILL_WAITS_AT_MOST`` after the replica was named): each whole log
        waiting for it starts (``whole_log_part``). Why a fill named during a recovery
        waits: sent beside it, its parts (encoded here, decoded and folded at the
        replica) took the CPU that the recovery and the views' catch-up needed on both
        workers (at 2e6 votes, the kill to views right 0.31-0.34 s against 0.09-0.12 s
        with the fill after). The writes meanwhile are not held back: each group goes
        to the new replica at once, kept aside there and answered
        (``ReplicaLogs.during_fill``), so only the writes before the replica was named
        are in this worker's log alone for longer, as during any fill (writes.py)."""
        for nid, filling in self.filling.items():
            if filling.waiting:
                filling.waiting = False
                self.inbox.put_fast((SELF, ["wlog", nid, filling.replica, filling.fill]))

    def whole_log_part(self, nid: str, name: str, fill: int) -> None:
        """``["wlog", base, replica, fill]``, this worker's own bulk frame (``Inbox``):
        the next part of the whole log of fill ``fill`` encoded and sent to the
        replica, and the next ``wlog`` put in the fast lane, so the message thread
        sends one part per pass over its inbox's ordinary lane, data messages and the
        controller's questions going between the parts; after the last, the groups'
        copies held for it meanwhile. Nothing once the fill is abandoned (the replica
        changed since). Why not a thread of its own, as before: traced at 1e7 votes,
        its encoding held the interpreter from the message thread (a thread that
        waits on sockets gets it back only at the switch interval), and both
        workers' message threads lagged 0.3-0.6 s behind the kill's recovery."""
        filling = self.filling.get(nid)
        if filling is None or filling.replica != name or filling.fill != fill:
            return
        frame = next(filling.parts, None)
        if frame is None:
            return                      # (all sent: no more turns are put)
        self.links.send(name, frame)
        if frame[0] != "rfull":
            filling.unacked += 1
            if filling.unacked < PARTS_AHEAD:   # (else the next turn comes with an ``rpack``)
                self.inbox.put_fast((SELF, ["wlog", nid, name, fill]))
        self.links.flush()

    def part_taken(self, nid: str, src: str, fill: int) -> None:
        """``["rpack", base, fill]``: the replica ``src`` took a part of the base's whole
        log; the next part's turn, if it waited for this answer (``PARTS_AHEAD``)."""
        filling = self.filling.get(nid)
        if filling is None or filling.replica != src or filling.fill != fill:
            return
        filling.unacked -= 1
        if filling.unacked == PARTS_AHEAD - 1:
            self.inbox.put_fast((SELF, ["wlog", nid, src, fill]))

    def replica_frame(self, f: Sequence[Any], src: str) -> None:
        """A base's log kept here for its owner (``rlog``, ``rfull``, ``rtrim``), or this
        worker's replica's answer (``rdur``)."""
        op, nid = f[0], f[1]
        if nid in self.removed:
            return
        if op not in ("rdur", "rpack") and (nid not in self.graph.nodes
                                            or nid in self.early_logs):
            self.early_logs.setdefault(nid, []).append((f, src))
            return
        if op == "rpack":
            self.part_taken(nid, src, int(f[2]))
            return
        if op == "rdur":
            # (each answer names the whole log it was made on: one of an earlier fill
            # to the same replica is dropped, its group resent with the next fill's)
            # (a fifth field: the answer to a group kept aside during the fill)
            fill = f[3] if len(f) > 3 else None
            aside = len(f) > 4
            filling = self.filling.get(nid)
            if filling is not None and filling.replica == src:
                if fill != filling.fill:
                    return
                if not aside:
                    # the whole log's answer: it holds the log from now on
                    del self.filling[nid]
                    self.replica_fill[nid] = fill
            elif aside or fill != self.replica_fill.get(nid):
                return
            if type(f[2]) is int and f[2]:
                self.durable(nid, f[2], src)
            return
        if self.gone and op in ("rpart", "rfull"):
            return      # (no log made anew with no controller: the owner's writes wait)
        if op == "rtrim":
            self.replica_logs.trim(nid, int(f[2]))
            if self.disk is not None and nid in self.replica_logs.logs and not self.gone:
                self.disk.trimmed(nid, self.replica_logs.logs[nid])
            return
        if op == "rpart":               # fill, i, table, writes: kept aside until the last
            self.replica_logs.part(nid, src, int(f[2]), int(f[3]),
                                   [decode_batch(b) for b in f[4]],
                                   [decode_batch(b) for b in f[5]])
            self.links.send(src, ["rpack", nid, f[2]])      # (the next may come)
            return
        if op == "rlog":
            batches = [decode_batch(b) for b in f[2]]
            if len(f) > 4 and not self.replica_logs.is_whole(nid, src, int(f[4])):
                # taken during a fill whose whole log is not all here yet: kept aside
                # until it is, and answered now (the owner's log holds it too); not
                # with no controller, as the fill's parts (its writes wait)
                if self.gone:
                    return
                self.replica_logs.during_fill(nid, src, int(f[4]), batches, list(f[3]))
                self.links.send(src, ["rdur", nid, len(f[2]), int(f[4]), 1])
                self.links.flush()
                return
            self.replica_logs.append(nid, batches, list(f[3]))
            if self.disk is not None:
                self.disk.append(nid, batches, list(f[3]))
            n = len(f[2])
            fill = self.replica_logs.fills.get(nid)
        else:       # rfull: start, table, writes, fill, parts before
            base = cast("Base", self.graph[nid].op)
            fill = int(f[5])
            self.replica_logs.full(base, nid, int(f[2]), [decode_batch(b) for b in f[3]],
                                   [decode_batch(b) for b in f[4]], src, fill, int(f[6]))
            if self.disk is not None:
                self.disk.reset(nid, self.replica_logs.logs[nid])
            n = 0                       # (no group with it: those go as their own)
            for batches, tags in self.replica_logs.take_aside(nid, src, fill):
                self.replica_logs.append(nid, batches, tags)
                if self.disk is not None:
                    self.disk.append(nid, batches, tags)
        self.links.send(src, ["rdur", nid, n, fill])
        self.links.flush()              # (the owner's client waits: not behind the inbox)

    def req_log_whole(self, nid: str, owner: str) -> bool:
        """Whether the whole log of base ``nid`` from its lost owner ``owner`` is here
        (``ReplicaLogs.whole``): then it holds every write that owner acknowledged."""
        return self.replica_logs.whole(nid, owner) is not None

    def req_log_parts(self, nid: str, owner: str, i: int) -> list[Any] | None:
        """Part ``i`` of that whole log, for the base's restore on another worker
        (``ClusterRuntime.restore_base``): ``[start, table, writes, tags, parts]``,
        each part at most ``tuning.BASE_PART_ROWS`` rows (``log_parts``), the tags
        with the last; None: no such log here."""
        h = self.replica_logs.whole(nid, owner)
        if h is None:
            return None
        start, table, writes = h.table()
        parts = log_parts(table, writes, tuning.BASE_PART_ROWS)
        t, w = parts[i]
        tags = list(self.replica_logs.tags.get(nid, ())) if i == len(parts) - 1 else []
        return [start, [encode_batch(b) for b in t], [encode_batch(b) for b in w], tags,
                len(parts)]

    def req_log_landed(self, nid: str, tag: int) -> bool:
        return self.replica_logs.landed(nid, tag)

    def pause(self, rid: int) -> None:
        """``["pause", id]``: the controller makes a catalog change, which fills new
        nodes from its copy of the tables: clients' writes wait (``deferred``) until
        ``["resume"]``, and the answer ``["rep", id, times]`` comes once every write
        accepted here is durable and passed on: ``times``, each base's here, its
        writes so far (the controller's ``taken_writes``)."""
        self.paused = True
        self.pausing.append(rid)
        self._paused_yet()

    def _paused_yet(self) -> None:
        if self.pausing and not self.committing and not self.accepted \
                and not self.direct_ups:    # (this worker's own upqueries landed)
            self.links.flush()
            times = {nid: d.time for nid, d in self.domains.items()
                     if d.node.kind == "base" and d.alive}
            for rid in self.pausing:
                self.send(["rep", rid, times])
            self.pausing = []

    def resume(self) -> None:
        self.paused = False
        deferred, self.deferred = self.deferred, []
        for f in deferred:
            self.accept(f[1], f[2], f[3], f[4], f[5])

    def req_reset(self, nid: str) -> None:
        self.holding.pop(nid, None)     # (the graph is quiet: already in its parents' state)
        d = self.domains[nid]
        d.crash()
        d.alive = True
        d.attach_clocks(self.tc)
        if d.store is not None:
            d.store.drop(nid)
            self.due_whole([nid])

    def req_crash(self, nid: str) -> None:
        """A recovery that gave up on the node: down again, its messages held again;
        what it sent since it came back is dropped wherever it is still held (here,
        and, behind it on every link, at the peers: ``drop_from``), as the relay drops
        it (``ClusterRuntime._drop_held_from``)."""
        self.domains[nid].crash()
        if not self.direct:
            return
        self.holding.setdefault(nid, [])
        for dst, frames in self.pending.items():
            self.pending[dst] = [f for f in frames if _source(f) != nid]
        frame = ["drop_from", [nid]]
        for peer in set(self.links.conns) | {p for p, out in self.links.out.items() if out}:
            self.links.send(peer, frame)
        self.links.sent[self.name] += 1
        self.inbox.put((self.name, frame))

    def drop_from(self, nodes: Sequence[str]) -> None:
        gone = set(nodes)
        for held in (self.holding, self.early):
            for dst, items in held.items():
                held[dst] = [(s, m) for s, m in items if m.src not in gone]

    def lose(self, name: str) -> None:
        """The controller declared worker ``name`` lost: nothing more of it is handled
        (this frame is the fence: a recovery's questions come after it), what it sent
        and is still held is dropped, and messages for its nodes are held here until
        they are placed again."""
        self.lost_workers.add(name)
        self._direct_off()              # (a fill may be lost with it: the controller's)
        store = self.store
        if isinstance(store, RemoteStore) and store.to_holder and store.holder == name:
            self.set_holder(None)       # (the next one named gets every node whole)
        self.links.drop(name)
        self.replica_logs.lost(name)
        for nid, via in self.replica_of.items():
            filling = self.filling.get(nid)
            if via == name or filling is not None and filling.replica == name:
                # (writes wait for the next: ``set_replica``)
                self.filling.pop(nid, None)
                self.replica_of[nid] = NO_REPLICA_YET
        for nid in self.held_cols:      # (their upqueries failed: asked again)
            getattr(self.graph[nid].op, "waiting", {}).clear()
        if self.peer_server is not None:
            self.peer_server.cut(name)
        for held in (self.holding, self.early):
            for dst, items in held.items():
                held[dst] = [(s, m) for s, m in items if s != name]

    def place(self, placement: dict[str, str]) -> None:
        """Where nodes are now: what was held for them here goes there, in order."""
        self.placement.update(placement)
        for dst in [n for n in self.pending if n in placement]:
            for f in self.pending.pop(dst):
                self.route(dst, f)

    def release(self, nodes: Sequence[str]) -> None:
        """Nodes restored: what was held for them is handled now, in arrival order
        (duplicates of what their replay regenerated are dropped by sender time)."""
        for nid in nodes:
            for src, m in self.holding.pop(nid, ()):
                if src not in self.lost_workers:
                    self.deliver(m, src)

    def req_counts(self) -> list[Any]:
        """Frames sent to each worker and handled from each (``ClusterRuntime.wait``)."""
        return [dict(self.links.sent), dict(self.links.handled)]

    def req_settle(self, nid: str, parents: dict[str, tuple[int, Any, bool]]) -> None:
        d = self.domains[nid]
        d.settle({p: (t, wire.decode_array(c), fresh) for p, (t, c, fresh) in parents.items()})
        if self.causal:
            # it starts afresh here (``causal.py``: a whole checkpoint and a mark)
            self.det.plan(self.graph)
            self.cstate[nid] = self.det.fresh(nid, d.time, list(d.node.children))
            self._uc_take(d, whole=True)
        elif d.store is not None and not self.coordinated and not self.uc:
            # its first checkpoint: the state it was filled with (coordinated: the
            # controller's whole epoch after the change, ``epochs.py``)
            d.store.drop(nid)
            d.checkpoint()

    def req_epoch(self, epoch: int, stable: int, whole: bool) -> dict[str, Any]:
        """The coordinated regime's epoch on a quiet graph (``epochs.py``): every node
        shard hosted here snapshots (``_snapshot``) and answers its time and
        last-seen times."""
        return {nid: self._snapshot(d, epoch, stable, whole)
                for nid, d in self.domains.items() if d.alive and nid not in self.holding}
                # (one down: not in this epoch, which then is incomplete)

    def _snapshot(self, d: Domain, epoch: int, stable: int, whole: bool) -> list[Any]:
        """Node shard ``d`` as of ``epoch`` (coordinated): a stateful one puts what
        changed since its last snapshot (all of it if ``whole``, or if the store holds
        none of it) into the store on the controller, folding the chain below
        ``stable`` (the last complete epoch); its [time, last-seen times]. The
        checkpoint frame goes before any report of them, on the same connection."""
        if d.store is not None and d.node.parents:
            store = cast(RemoteStore, self.store)
            op = d.node.op
            full = whole or not store.has(d.id)
            change = checkpoint_delta(op, full, d.ck_inputs or [])
            if d.ck_inputs is not None:
                d.ck_inputs = []
            d.ck_messages = d.ck_rows = 0
            store.put(d.id, epoch, d.last_seen, cast(str, op.checkpoint_form), change,
                      full, stable)
        return [d.time, dict(d.last_seen)]

    def inject(self, epoch: int, stable: int, whole: bool) -> None:
        """``["barrier", epoch, stable, whole]`` from the controller, after the writes
        it sent before (coordinated, ``epochs.py``): each source hosted here (a base,
        a VALUES node) is at its position in ``epoch`` (its time: the writes it has
        taken), reports it and sends the barrier to each child, behind what it sent."""
        out: dict[str, Any] = {}
        for nid, d in self.domains.items():
            if not d.node.parents and d.alive and nid not in self.holding:
                out[nid] = [d.time, {}]
                self._forward(d, epoch, stable, whole)
        if out:
            self.send(["ep", epoch, out])

    def barrier(self, f: Sequence[Any], src: str) -> None:
        """``["bar", dst, parent, epoch, stable, whole]``: epoch ``epoch``'s barrier from
        node shard ``parent`` to ``dst``, behind everything ``parent`` sent ``dst``
        before it (the same FIFO link or relay). ``dst`` aligns (``Aligner``: what that
        parent sends after it is held); once the barrier has come from every parent,
        ``dst`` snapshots (``_snapshot``), reports its time and last-seen times to the
        controller (``["ep", epoch, {dst: [time, seen]}]``, after the checkpoint),
        forwards the barrier to its children and takes what it held, in arrival
        order. Dropped for a node down or being recovered (the epoch cannot complete)
        and for an epoch a rollback abandoned."""
        if len(f) != 6 or type(f[1]) is not str or type(f[2]) is not str \
                or type(f[3]) is not int or type(f[4]) is not int or type(f[5]) is not bool:
            raise wire.ProtocolError("a barrier must be [bar, node, parent, epoch, stable, "
                                     "whole]")
        dst, parent, epoch = f[1], f[2], f[3]
        d = self.domains.get(dst)
        if d is None or not d.alive or dst in self.holding or epoch <= self.bar_floor:
            return
        if parent not in d.ports:
            raise wire.ProtocolError(f"a barrier from {parent!r}, not a parent of {dst}")
        if self.align.holds(dst, parent, (src, f)):
            return                      # (the next epoch's, behind this one: held)
        held = self.align.arrive(dst, parent, len(d.ports))
        if held is None:
            return                      # (aligning: the barrier is to come on other inputs)
        self.send(["ep", epoch, {dst: self._snapshot(d, epoch, f[4], f[5])}])
        self._forward(d, epoch, f[4], f[5])
        for s, item in held:
            if isinstance(item, Message):
                self.deliver(item, s)
            else:
                self.barrier(item, s)

    def _forward(self, d: Domain, epoch: int, stable: int, whole: bool) -> None:
        """``d``'s barrier of ``epoch`` to each of its children, behind its messages."""
        for c in d.node.children:
            frame = ["bar", c, d.id, epoch, stable, whole]
            if self.direct:
                self.route(c, frame)
            else:
                self.send(frame)

    def req_roll_back(self, nid: str, at: int, last_seen: dict[str, int], checkpoint: Any,
                      epoch: int, floor: int) -> None:
        """The coordinated regime's rollback of node shard ``nid`` (not a base) to an
        epoch: what was held for it, and its alignment's buffer, are dropped (the
        graph was made quiet: they came from the incarnation rolled back), as are
        barriers of the epochs up to ``floor`` (the controller abandoned them); its
        state is the epoch's snapshot, its time and last-seen times the epoch's."""
        self.bar_floor = max(self.bar_floor, floor)
        self.align.drop(nid)
        self.holding.pop(nid, None)
        self.pending.pop(nid, None)
        self.early.pop(nid, None)
        self._set_back(nid, at, last_seen, checkpoint, mark=epoch)

    def req_roll_back_base(self, nid: str, at: int, history: Sequence[Any]) -> int:
        """The coordinated regime's rollback of base ``nid`` to its position ``at`` in
        an epoch: it resends its writes since (parts sent before with
        ``base_history``, then ``history``) to every child."""
        children = self.domains[nid].node.children
        return self.req_uc_base(nid, {c: at for c in children}, at, history)

    def req_process(self, nid: str, port: int, batch: Any) -> list[Any]:
        out = self.domains[nid].node.op.process(port, decode_batch(batch))
        if isinstance(out, list):
            return [encode_batch(b) for b in out]
        return encode_batch(out)

    def req_snapshot(self, nid: str) -> list[Any]:
        return encode_batch(self.domains[nid].node.op.snapshot())

    def _up(self, nid: str) -> Domain:
        d = self.domains[nid]
        if not d.alive:
            raise NodeDown(f"node {nid} is being recovered")
        return d

    # (reads come from a View, through RemoteOp: the node is a reader)
    def req_lookup(self, nid: str, keys: Sequence[Any]) -> list[list[tuple[Any, ...]]]:
        op = cast("Reader", self._up(nid).node.op)
        return [op.lookup(tuple(k) if isinstance(k, (list, tuple)) else k) for k in keys]

    def req_range_lookup(self, nid: str, key: Any, bounds: Sequence[Any]) -> list[tuple[Any, ...]]:
        """``Reader.range_lookup`` (a view with range parameters), on the message thread:
        the first one builds the sorted index (reads.py: ``range_rows``)."""
        return range_rows(cast("Reader", self._up(nid).node.op), key, bounds)

    def req_all(self, nid: str) -> list[tuple[Any, ...]]:
        return cast("Reader", self._up(nid).node.op).all()

    def req_len(self, nid: str) -> int:
        return len(cast("Sized", self._up(nid).node.op))    # (RemoteOp.__len__ asks)

    def req_listen(self, nid: str, on: bool) -> None:
        """Start (or stop) keeping what the reader applies for the controller."""
        op = cast("Reader", self._up(nid).node.op)
        op.listeners[:] = [x for x in op.listeners if not isinstance(x, _Forward)]
        if on:
            op.listeners.append(_Forward(nid, self.send))

    def req_cut(self, nid: str) -> None:
        """A quiet point's cut, made while the controller holds the writes: what the
        reader applied so far is set aside for the next ``drain``."""
        op = cast("Reader", self._up(nid).node.op)
        for x in op.listeners:
            if isinstance(x, _Forward):
                x.cut()

    def req_drain(self, nid: str) -> list[Any]:
        """What the reader applied up to the last cut and not drained, consolidated."""
        op = cast("Reader", self._up(nid).node.op)
        for x in op.listeners:
            if isinstance(x, _Forward):
                return encode_batch(x.drain())
        return encode_batch(Batch())

    def req_pin(self, nid: str, key: Any, on: bool) -> None:
        """Keep ``key`` of the partial reader ``nid`` from eviction (a subscription
        listens to it), or no longer (``on`` False)."""
        if self.partial is None:
            return
        reader = cast("Reader", self.graph[nid].op)
        k = tuple(key) if isinstance(key, (list, tuple)) else key
        if on:
            self.partial.pin(reader, k)
        else:
            self.partial.unpin(reader, k)

    def req_share(self, share: int | None) -> list[int]:
        """This worker's share of the cluster's memory limit is ``share`` bytes from now
        on (None: unchanged), its oldest keys evicted down to it before the answer:
        [bytes counted, keys held, share, evictions so far, bytes of the partial nodes
        hosted here by their own accounting, keys leaving] (partial.py, Eviction)."""
        partial = self.partial
        if partial is None or partial.limit is None:
            return [0, 0, 0, 0, 0, 0]
        if share is not None:
            partial.limit = int(share)
        partial.evict()
        return [partial.total, self._held_keys(), partial.limit, partial.evictions,
                partial.hosted(list(self.held_cols)),
                sum(map(len, partial.leaving.values()))]

    def _held_keys(self) -> int:
        """Keys held by the partial readers hosted here."""
        partial = cast(Partial, self.partial)
        return sum(len(cast("Reader", self.graph[r].op).filled)
                   for r in partial.paths if r in self.domains)

    def req_memory(self, nids: Sequence[str]) -> dict[str, int]:
        """Bytes of each of these node shards' state (``memory.node_bytes``), as hosted
        here (``Database.memory`` in a cluster)."""
        return {nid: node_bytes(self.domains[nid].node.op) for nid in nids}

    def req_ping(self) -> int:
        return os.getpid()

    # ------------------------------------------------------------ loop

    def run(self) -> None:
        if self.direct:
            self.run_direct()
            return
        recv = self.conn.recv
        reads = self.reads
        try:
            while True:
                f = recv()
                reads.version += 1          # odd: a frame under way (reads.py)
                try:
                    if self.frame(f):
                        return
                finally:
                    reads.version += 1
                if reads.pending:
                    reads.serve_pending()
        finally:
            if self.stopped or not self.keep_reads:
                reads.close()

    def run_direct(self) -> None:
        """The message thread with direct channels: the inbox's frames in order (the
        controller's connection and each peer link are read by threads of their own),
        sending what they produced whenever the inbox is empty."""
        inbox, reads, links = self.inbox, self.reads, self.links
        take = inbox.take                   # (a base log's frames first: ``Inbox``)
        lost = self.lost_workers
        self.control_recv = threading.Thread(target=inbox.read, args=(CONTROLLER, self.conn),
                                             daemon=True, name="control-recv")
        self.control_recv.start()
        since_flush = 0

        def idle() -> None:                 # (the inbox is empty: what was made goes)
            nonlocal since_flush
            links.flush()
            since_flush = 0
        try:
            while True:
                if since_flush >= FLUSH_EVERY:      # (an inbox never empty must not
                    links.flush()                   # hold back what it produced)
                    since_flush = 0
                src, f = take(idle)
                since_flush += 1
                if src in lost:
                    continue                # (after the fence: its frames are dropped)
                if isinstance(f, BaseException):
                    if src == CONTROLLER and isinstance(f, (OSError, wire.ProtocolError)) \
                            and self.goes_on and not self.stopped:
                        self._lose_controller()     # (the gap: the writes go on)
                        continue
                    if isinstance(f, (OSError, wire.ConnectionClosed)):
                        raise wire.ConnectionClosed(str(f))
                    raise f
                reads.version += 1
                try:
                    if src not in LOCAL and f[0] not in PEER_FRAMES:
                        raise wire.ProtocolError(f"frame {f[0]!r} from peer {src}")
                    if self.frame(f, src):
                        return
                finally:
                    reads.version += 1
                if src not in LOCAL and counted(f):
                    links.handled[src] += 1
                if reads.pending:
                    reads.serve_pending()
        finally:
            self.end_writes()
            if self.stopped or not self.keep_reads:
                reads.close()
            links.close()
            if self.peer_server is not None:
                self.peer_server.close()

    def frame(self, f: Sequence[Any], src: str = CONTROLLER) -> bool:
        """Handle one frame from the controller (or, with direct channels, a peer:
        ``src``); True for ``stop``."""
        op = f[0]
        if op == "msg":
            m = f[2]
            self.deliver(m if isinstance(m, Message) else decode_message(m), src)
        elif op == "write":
            self.write(f[1], decode_batch(f[2]))
        elif op == "bar":
            self.barrier(f, src)
        elif op == "barrier":
            self.inject(int(f[1]), int(f[2]), bool(f[3]))
        elif op == "fill":
            self.deliver(Fill(f[1], f[2]), src)
        elif op == "req":
            if f[2] == "cwrite":            # (answered once durable: ``accept``)
                self.controller_write(f[1], f[3])
            else:
                self.request(f[1], f[2], f[3])
        elif op == "cw" and src == CLIENT:  # a client's write, from a read thread
            if self.paused:
                self.deferred.append(list(f))
            else:
                self.accept(f[1], f[2], f[3], f[4], f[5])
        elif op == "dm" and src == CLIENT:  # a read's hole, from a read thread
            self.direct_miss_now(f[1], f[2], f[3], f[4])
        elif op == "dm_drop" and src == CLIENT:
            if self.direct_ups.pop(f[1], None) is not None:
                self._paused_yet()
        elif op == "direct_ok":
            if f[1] in self.direct_chains:
                self.direct_ready.add(f[1])
        elif op == "pause":
            self.pause(f[1])
        elif op == "resume":
            self.resume()
        elif op in ("rlog", "rpart", "rfull", "rdur", "rtrim", "rpack"):
            self.replica_frame(f, src)
        elif op == "replica":
            self.set_replica(f[1], f[2], len(f) > 3 and bool(f[3]))
        elif op == "fill_go" and src in (CONTROLLER, SELF):
            self.fill_go()
        elif op in CK_FRAMES and src not in LOCAL:
            self.held_checkpoints.frame(src, f)
        elif op == "ck_holder":
            self.set_holder(f[1])
        elif op == "ck_forget":
            self.held_checkpoints.forget(f[1], f[2])
        elif op == "wlog" and src == SELF:
            self.whole_log_part(f[1], f[2], f[3])
        elif op == "whole" and src == SELF:
            self.whole_turn(f[1])
        elif op == "progress":
            self.progress(*f[1:])
        elif op == "trunc":
            self.truncate(*f[1:])
        elif op == "ddl":
            self.ddl(f[1], f[2])
        elif op == "host":
            self.host(list(f[1]))
        elif op == "drop_from":
            self.drop_from(list(f[1]))
        elif op == "lost":
            self.lose(f[1])
        elif op == "place":
            self.place(dict(f[1]))
        elif op == "peers":
            self.links.peers.update({n: (a[0], a[1]) for n, a in f[1].items()})
        elif op == "release":
            self.release(list(f[1]))
        elif op == "tick":
            self.tick(int(f[1]))
        elif op == "cgc":
            self.causal_gc(f[1], f[2])
        elif op in ("sb", "sbck", "sb_drop"):
            self.standby_frame(f)
        elif op == "retire":
            self.reads.drop_old()
        elif op == "adopt":
            self.adopt()
        elif op == "stop":
            self.stopped = True
            return True
        elif op == "rejoin" and src == SELF:  # (the gap ends: ``serve_worker``)
            return True
        elif op == "die":                     # db.fail() on a worker we did not start
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            raise wire.ProtocolError(f"unknown frame {op!r} from the controller")
        return False

    def request(self, rid: int, method: str, args: Sequence[Any]) -> None:
        fn = getattr(self, "req_" + method, None)
        try:
            if fn is None:
                raise wire.ProtocolError(f"unknown request {method!r}")
            result = fn(*args)
        except Exception as e:                      # reported to the caller, not fatal
            if not isinstance(e, NodeDown):
                log.exception("request %s failed", method)
            if self.direct:
                self.links.flush()
            self.send(["err", rid, type(e).__name__, str(e)])
            return
        if self.direct:
            self.links.flush()           # (what it sent goes out before its answer)
        self.send(["rep", rid, result])


def whole_log_frames(nid: str, fill: int, start: int, table: list[Batch],
                     writes: list[Batch]) -> Iterator[list[Any]]:
    """Base ``nid``'s whole log (fill ``fill``, as of write ``start``) for a new
    replica, as frames of at most ``tuning.WHOLE_LOG_PART_ROWS`` rows each, in order,
    each encoded only when it is asked for (``Worker.whole_log_part``, a part a turn):
    ``["rpart", base, fill, i, table, writes]`` for each part but the last, then
    ``["rfull", base, start, table, writes, fill, parts before]`` (a group in flight
    goes as one of its own, ``Worker.set_replica``)."""
    parts = log_parts(table, writes, tuning.WHOLE_LOG_PART_ROWS)
    for i, (t, w) in enumerate(parts[:-1]):
        yield ["rpart", nid, fill, i, [encode_batch(b) for b in t],
               [encode_batch(b) for b in w]]
    t, w = parts[-1]
    yield ["rfull", nid, start, [encode_batch(b) for b in t], [encode_batch(b) for b in w],
           fill, len(parts) - 1]


def _source(frame: list[Any]) -> str:
    """The sending node of a ``msg`` frame, encoded or not."""
    m = frame[2]
    return m.src if isinstance(m, Message) else str(m[0])


#: an accepted write waiting for its log: [its output (filled once applied), its
#: batch, its answer, the controller's tag (0: a client's)]
_Accepted = list[Any]


class _Hosted:
    """What ``partial.Partial`` asks of a runtime on a worker: its domains."""

    def __init__(self, domains: dict[str, Domain]) -> None:
        self.domains = domains


class _Forward:
    """The subscriptions' listener at a reader on this worker (noria_py/subscribe.py):
    keeps what the reader applies until the controller's quiet point cuts it
    (``req_cut``, while the writes are held: no per-row work) and drains it
    (``req_drain``, once they go on again), consolidated, so a key changed many times
    meanwhile travels once. The first change after a cut tells the controller there is
    something to take."""

    def __init__(self, nid: str, send: Callable[[Any], None]) -> None:
        self.nid = nid
        self.send = send
        self.pending = Batch()
        self.cut_off = Batch()              # (up to the last cut, not drained yet)

    def changed(self, batch: Batch) -> None:
        if not self.pending:
            self.send(["sub", self.nid, None])
        self.pending.extend(batch)

    def lost(self, why: str) -> None:
        self.pending, self.cut_off = Batch(), Batch()
        self.send(["sub_lost", self.nid, why])

    def cut(self) -> None:
        if self.cut_off:                    # (a cut never drained: both go next time)
            self.cut_off.extend(self.pending)
        else:
            self.cut_off = self.pending
        self.pending = Batch()

    def drain(self) -> Batch:
        out, self.cut_off = self.cut_off.consolidated(), Batch()
        return out


def warm_up() -> None:
    """Load the compiled tree-clock kernels now (0.2 s from Numba's cache), not in the
    middle of the first recovery this worker is a spare for."""
    tc = TreeClocks({1: (), 2: (1,)}, CLOCK_DEPTH)
    clock, log = tc.zero(1), tc.new_log(1)
    diff = receive_path(tc.path_edge(1, None), None, 1)
    tc.apply_paths(1, diff, clock, log)
    clock2, log2 = tc.zero(2), tc.new_log(2)
    tc.apply_paths(2, receive_path(tc.path_edge(2, 1), diff, 1), clock2, log2)
    tc.merge_into(2, clock2, tc.make_diff(2, 1, log[0], 2))
    tc.t_star(1, {2: log2.rows}, 1)


def _heartbeats(conn: wire.Connection, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_EVERY):
        try:
            conn.send(["hb"])
        except OSError:
            return


def _close_after(conn: wire.Connection, users: Sequence[threading.Thread | None],
                 timeout: float = 5.0) -> None:
    """Close the controller's connection once the other threads using it (its reader
    with direct channels, the heartbeats) have ended: shut down first, which wakes
    them. Closed under a thread about to read or send, its descriptor could be the
    next socket's (the one dialing back to a restarted controller) by the time that
    thread reaches the kernel, and it would take or send bytes of that stream."""
    try:
        conn.shutdown()
    except OSError:
        pass
    for t in users:
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if t.is_alive():
                log.warning("closing the controller's connection under thread %s", t.name)
    conn.close()


#: addresses that bind every interface: advertised as "" (clients then use the host
#: they reached the controller at)
WILDCARD = ("0.0.0.0", "::", "")


#: seconds between a lost controller's worker's attempts to rejoin
REJOIN_EVERY = 0.1


def serve_worker(host: str, port: int, token: str | None, name: str | None = None,
                 read_host: str | None = None, read_port: int = 0,
                 tls: TlsFiles | None = None) -> None:
    """Join the controller at host:port and work until it says stop or goes away (and,
    where it asked for that, does not come back within its rejoin timeout: module
    docstring). Clients read this worker's readers at ``read_host``:``read_port``
    (default: the address this worker reaches the controller from, and a free port).
    With ``tls``, the controller's certificate is verified against ``tls.ca`` and the
    read port serves TLS only, with ``tls.cert`` and ``tls.key``."""
    warm_up()                  # join warm: a spare may be needed the moment it joins
    read_tls = None if tls is None else tls_server_context(tls.cert, tls.key)
    state = Reads({})                   # (the worker's domains, once it has any)
    reads: ReadServer | None = None
    advertised = ""
    rejoin_until: float | None = None   # (set once a controller was lost: rejoining)
    why = ""
    previous: dict[str, Any] | None = None   # (what it held then: Worker.holdings)
    before: Worker | None = None             # (and the worker itself: Worker.adopt)
    was: str | None = None                   # (its name then)

    def dial(rejoin: bool, was: str | None) -> _Dialed:
        """Join (or rejoin) the controller: its connection, this worker's inbox and
        peer port for it, and the controller's ``config``."""
        nonlocal read_host, reads, advertised
        peers: PeerServer | None = None
        conn: wire.Connection | None = None
        try:
            # (rejoining: a host that vanished must not hold the dialing for minutes)
            sock = socket.create_connection((host, port), timeout=5.0 if rejoin else None)
            sock.settimeout(None)
            if read_host is None:
                read_host = sock.getsockname()[0]
            if reads is None:
                reads = ReadServer(state, read_host, read_port, token, tls=read_tls)
                advertised = "" if read_host in WILDCARD else reads.address[0]
            if tls is not None:
                sock = tls_connect(sock, tls_client_context(tls.ca), host)
            conn = wire.Connection(sock)
            inbox = Inbox()             # (direct channels: what peers send, channels.py)
            peers = PeerServer(inbox, read_host, 0, token, tls=read_tls)
            wire.client_handshake(conn, token, {
                "role": "worker", "name": name, "pid": os.getpid(),
                "read": [advertised, reads.address[1]],
                "peer": [advertised, peers.address[1]],
                "rejoin": rejoin, "was": was})
            f = conn.recv()
            if f[0] != "config":
                raise wire.ProtocolError(f"expected the controller's config, got {f[0]!r}")
            # (beating from now on: a worker that dialed back while its writes went on
            # ends them before it runs for this controller, which must not find it
            # silent meanwhile)
            stop = threading.Event()
            beating = threading.Thread(target=_heartbeats, args=(conn, stop), daemon=True)
            beating.start()
            return conn, inbox, peers, f, stop, beating
        except BaseException:
            if peers is not None:
                peers.close()
            if conn is not None:
                conn.close()
            raise

    dialed: _Dialed | None = None       # (dialed back while the writes went on: ``_Gap``)
    try:
        while True:
            if dialed is None:
                if rejoin_until is not None and time.monotonic() > rejoin_until:
                    log.error("no controller at %s:%s took this worker back (%s); exiting",
                              host, port, why or "none answered")
                    return
                try:
                    dialed = dial(rejoin_until is not None, was)
                except (OSError, wire.ProtocolError) as e:
                    if rejoin_until is None:
                        raise               # (the first join: the caller says why)
                    why = str(e)
                    time.sleep(REJOIN_EVERY)
                    continue
            conn, inbox, peers, f, stop, beating = dialed
            dialed = None
            _, assigned, shards, clocks, checkpoints, *more = f
            channels = more[0] if more else "relay"
            first_number = int(more[1]) if len(more) > 1 else 0
            rejoin_timeout = float(more[2]) if len(more) > 2 else 0.0
            regime = str(more[3]) if len(more) > 3 else "treeclock"
            writes = str(more[4]) if len(more) > 4 else "controller"
            disk = str(more[5]) if len(more) > 5 and more[5] is not None else None
            policies = ({str(k): str(v) for k, v in more[6].items()}
                        if len(more) > 6 and isinstance(more[6], dict) else {})
            depth = more[7] if len(more) > 7 else None
            if depth is not None and (type(depth) is not int or depth < 1):
                raise wire.ProtocolError(f"a determinant depth must be 1 or more, got {depth!r}")
            worker = Worker(conn, assigned, shards, clocks, checkpoints, state, channels,
                            token, inbox, peers,
                            None if tls is None else tls_client_context(tls.ca), first_number,
                            regime, writes, disk, policies, depth)
            worker.keep_reads = rejoin_timeout > 0
            worker.previous, worker.before = previous, before
            gap = _Gap(worker, lambda: dial(True, assigned), rejoin_timeout)
            worker.on_gap = gap.start
            try:
                worker.run()
            except wire.ConnectionClosed:
                pass
            except (OSError, wire.ProtocolError) as e:
                if not worker.keep_reads:
                    raise
                log.warning("worker %s: the controller's connection failed: %s", assigned, e)
            finally:
                stop.set()
                _close_after(conn, [beating, worker.control_recv])
                peers.close()
                dialed, why = gap.end()
            if worker.stopped or not worker.keep_reads:
                if dialed is not None:
                    dialed[4].set()
                    dialed[2].close()
                    _close_after(dialed[0], [dialed[5]])
                return
            # (its message thread has ended: the domains are still)
            if worker.domains or worker.before is None:
                previous, before, was = worker.holdings(), worker, assigned
                worker.kept = dict(worker.domains)
            state.keep_old()
            if gap.thread is not None:      # (the writes went on until now)
                if dialed is None:
                    log.error("no controller at %s:%s took this worker back (%s); exiting",
                              host, port, why or "none answered")
                    return
                log.warning("worker %s: back with the controller at %s:%s; its writes "
                            "taken while it was down are in its logs on disk", assigned,
                            host, port)
                continue
            log.warning("worker %s: the controller at %s:%s was lost; serving reads of its "
                        "readers as they are and dialing back for up to %.0f s", assigned,
                        host, port, rejoin_timeout)
            rejoin_until = time.monotonic() + rejoin_timeout
    finally:
        state.close()
        if reads is not None:
            reads.close()


#: a controller dialed: its connection, the worker's inbox and peer port, its config
#: and its heartbeats' stop and thread
_Dialed = tuple[wire.Connection, Inbox, PeerServer, Sequence[Any], threading.Event,
                threading.Thread]


class _Gap:
    """A worker's time without a controller while its writes go on
    (``Worker.goes_on``): a thread dials back every ``REJOIN_EVERY`` seconds for up
    to the rejoin timeout; once a controller answers with its config, or the timeout
    has passed, it ends the message thread (``["rejoin"]`` in its inbox, after every
    frame before it), so the old worker's writes in flight are answered in doubt and
    its logs on disk closed before the new controller hears from the new worker:
    what that controller reads of the logs is final (``restart.take_workers_logs``)."""

    def __init__(self, worker: Worker, dial: Callable[[], _Dialed], timeout: float) -> None:
        self.worker, self.dial, self.timeout = worker, dial, timeout
        self.thread: threading.Thread | None = None
        self.dialed: _Dialed | None = None
        self.why = ""

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True, name="rejoin")
        self.thread.start()

    def _run(self) -> None:
        until = time.monotonic() + self.timeout
        while not self.worker.ended and time.monotonic() <= until:
            try:
                self.dialed = self.dial()
                break
            except (OSError, wire.ProtocolError) as e:
                self.why = str(e)
                time.sleep(REJOIN_EVERY)
        self.worker.inbox.put((SELF, ["rejoin"]))

    def end(self) -> tuple[_Dialed | None, str]:
        """Once the message thread has ended: the controller dialed, if any."""
        if self.thread is not None:
            self.thread.join()
        return self.dialed, self.why


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="noria-py worker")
    ap.add_argument("--join", required=True, metavar="HOST:PORT")
    ap.add_argument("--name")
    ap.add_argument("--read-host", default=None,
                    help="address clients read this worker's views at (default: the one "
                         "it reaches the controller from)")
    ap.add_argument("--read-port", type=int, default=0, help="default: a free port")
    ap.add_argument("--tls-cert", default=os.environ.get("NORIA_TLS_CERT"),
                    help="a cluster served with TLS: the certificate this worker's read port "
                         "serves (default $NORIA_TLS_CERT)")
    ap.add_argument("--tls-key", default=os.environ.get("NORIA_TLS_KEY"),
                    help="its key (default $NORIA_TLS_KEY)")
    ap.add_argument("--tls-ca", default=os.environ.get("NORIA_TLS_CA"),
                    help="the CA file the controller's certificate is verified with "
                         "(default $NORIA_TLS_CA, else --tls-cert)")
    args = ap.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        ap.error("--tls-cert and --tls-key go together")
    tls = (None if args.tls_cert is None
           else TlsFiles(args.tls_cert, args.tls_key, args.tls_ca or args.tls_cert))
    host, _, port = args.join.rpartition(":")
    logging.basicConfig(level=logging.WARNING, format="worker %(process)d: %(message)s")
    faulthandler.register(signal.SIGUSR1)      # kill -USR1 PID: its stacks, to stderr
    try:
        host = host or "127.0.0.1"
        token = os.environ.get("NORIA_TOKEN") or tokens.read_token(host, int(port))
        serve_worker(host, int(port), token, args.name, args.read_host, args.read_port,
                     tls=tls)
    except (OSError, Error) as e:
        print(f"noria-py worker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
