"""The engine's tuning knobs, in one place, each with the reason for its value.

None of these changes what a view holds, only how fast and in how much memory it gets
there (the tests run the array paths at other values of ``ARRAY_MIN`` to check
exactly that). Code reads a knob as ``tuning.NAME`` where a test may change it, and
imports the value where it sits in a per-row loop.

``NORIA_TUNING="NAME=VALUE,..."`` in the environment sets knobs when this module is
first imported, in every process that imports it: how a test or a benchmark runs a
cluster's workers (separate processes) with other values, say checkpoints at every
acknowledgement.
"""
from __future__ import annotations

import os

# ---------------------------------------------------------------- batches and state

#: A batch of this many rows or more takes the array paths: a base keeps it as
#: columns, a dense ``KeyedState`` or ``KeyedCounts`` applies it with numpy. Below it,
#: numpy's cost per call (a microsecond or two, several calls a batch) would cost
#: more than a Python step per row.
ARRAY_MIN = 32

#: Keys below this are kept in arrays indexed by key (the dense forms of
#: ops/state.py); per array, 8 bytes a key, so at most 32 MiB.
DENSE_LIMIT = 1 << 22

#: While checkpoints are on, a state in arrays holds the keys of each batch it applies
#: as they come, and marks them in a bool array as long as the key range at its next
#: checkpoint, or once this many batches' keys have piled up (``dense.KeyMarks``): a
#: bound on what is held (those batches' key arrays), set to a join's checkpoint
#: interval (twice ``CHECKPOINT_EVERY`` messages) so that the default schedule marks
#: only at its checkpoints (256 marked once more per interval at inserts of 100 votes:
#: within the noise of the per-insert figures). Marking each batch as it came wrote into
#: that array while it was cold, twice a write (docs/benchmarks.md, "Checkpoints").
MARKS_HELD = 2048

# ---------------------------------------------------------------- tree clocks

#: Tree-clock depth: d - 1 adjacent failures are recoverable (Noria's prototype used
#: 3); a message carries depth + 2 ints of diff path.
CLOCK_DEPTH = 3

#: How often (in messages handled) a domain acknowledges progress to its parents,
#: which is when their payload logs are trimmed.
ACK_EVERY = 32

#: A domain applies the diff paths built since the last time to its log and clock
#: at an acknowledgement once this many have piled up (a checkpointing node: at its
#: next checkpoint), or when either is read: one kernel call for many, every other
#: acknowledgement (``Domain.progress_report``).
FLUSH_EVERY = 64

#: A diff log is compacted when it holds this many diffs.
COMPACT_AT = 256

#: A base's write history is trimmed (runtime/history.py) once it holds this many
#: writes past its trim point: each trim folds them into the table as of the trim
#: point, at what the base's own writes cost, and the history holds at most about
#: this many writes more than its children may still ask for.
HISTORY_TRIM_EVERY = 256

# ---------------------------------------------------------------- cluster

#: Seconds between a worker's heartbeats to the controller.
HEARTBEAT_EVERY = 0.2

#: Seconds a worker started on the controller's machine may stay silent past the
#: heartbeat timeout while its process keeps using CPU (``/proc``): busy, not hung.
#: A heartbeat is a thread's, which a long call holding the interpreter's lock starves
#: (a 10M-row table encoded for a recovery: over a second on this loaded machine), and
#: declaring such a worker lost made one loss cascade into three. A stopped or
#: deadlocked worker uses no CPU and is lost at the timeout; a dead one sooner, by its
#: connection's end. Workers elsewhere (Ray actors) are judged by the timeout alone.
SILENT_BUSY_MAX = 30.0

#: Seconds the controller waits after a worker is lost before it recovers the worker's
#: nodes, so that losses following close behind (one machine's workers) are recovered
#: with it as one set. 0: at once, since every millisecond here is a millisecond of
#: views behind; messages for the lost nodes are held meanwhile. Tests raise it to
#: hold a recovery back while they arrange a second loss.
RECOVERY_GATHER = 0.0

#: Seconds after a recovery before the causal regime's standbys (``serve --standbys``)
#: taken over, lost or stale are made again (``runtime/cluster/causal.py``): making one
#: sends a whole checkpoint to a worker, which decodes it in its message thread, a
#: second or more for a large state, which the first reads and waits after the
#: recovery would otherwise wait behind. Until then those nodes recover from the
#: controller's store, as without standbys.
STANDBY_DELAY = 2.0

# ---------------------------------------------------------------- ad-hoc queries

#: At most this many unnamed views (those ad-hoc SELECTs make, client.py's
#: ``_select_view``) stay in the graph; the least recently read is dropped to make room
#: for another. Each one's nodes cost every write to the tables it reads, so the bound
#: is what keeps writes from slowing down as queries pile up (docs/benchmarks.md,
#: "Ad-hoc queries"), and a query repeated within the last this many distinct ones is
#: a lookup, not a new view.
ADHOC_VIEWS = 16

#: Seconds after its last read that an unnamed view is dropped (when the next ad-hoc
#: view is made; nothing runs in the background).
ADHOC_IDLE = 600.0

#: SQL texts ``Database.execute`` keeps prepared (a SELECT read by key, an INSERT of
#: ``?`` values: each run of the same text then skips the parse, ~0.5 ms of sqlglot),
#: the least recently run dropped beyond this.
PREPARED_CACHE = 256

#: Changes a subscription holds for its subscriber (noria_py/subscribe.py); one more
#: ends it with a SubscriptionError rather than hold the writer back or grow without
#: bound.
SUBSCRIBE_BUFFER = 1024

#: Seconds between a cluster's quiet points while a subscription has changes waiting
#: (noria_py/subscribe.py): each holds writers back for one ``wait`` (a few ping
#: rounds to the workers), so a shorter interval pushes sooner and writes slower.
SUBSCRIBE_EVERY = 0.02

# ---------------------------------------------------------------- checkpoints

#: A stateful shard checkpoints once it has taken this many messages or this many rows
#: since its last checkpoint (checked when it acknowledges, every ``ACK_EVERY``
#: messages). Recovery replays what came after the checkpoint, so these bound its
#: cost (a few tens of milliseconds of rows); each checkpoint costs what changed since
#: the last, state in arrays included (the keys changed, not the state: so no schedule
#: by state size; docs/recovery.md, docs/benchmarks.md). Spacing by node kind: below.
CHECKPOINT_EVERY = 1024
CHECKPOINT_ROWS = 32768
#: A join's shards go this many of those intervals between checkpoints, a reader's
#: ``READER_CHECKPOINT_SPACING`` (the others one: ``checkpoints.interval``). Their
#: deltas in arrays cost per checkpoint more than per key (the pass over the key
#: range, the gathers and the store's fold, the caches after), and a longer interval
#: changes fewer keys per row, so spacing them cuts the checkpoints' share of a
#: write's CPU (docs/benchmarks.md, "Checkpoints"). The store's bound sets the limit
#: (docs/recovery.md, "Why spaced by kind"): a child's stable checkpoint holds back its
#: parent's low mark, so COUNT (one interval) held 1.47 times its live state with the
#: join and the reader at two, 1.95 with the reader at four (the bound is 1.5).
JOIN_CHECKPOINT_SPACING = 2
READER_CHECKPOINT_SPACING = 2
#: Whether the tree-clock runtimes rebuild a reader over stateful parents, and (the
#: embedded one) a join over stateful parents or bases (or sharders of them), from
#: them instead of checkpointing it (``checkpoints.rebuilt_from_parents``;
#: docs/recovery.md, "Nodes rebuilt from their parents"). A cluster's joins
#: checkpoint either way. Read when a node is added.
REBUILT_FROM_PARENTS = True
#: Seconds after a cluster worker is given a new checkpoint holder (the first, or the
#: next after its holder's loss, named at the end of a recovery) before its node shards
#: start checkpointing whole to it, one a turn of its message thread
#: (``Worker.set_holder``; docs/recovery.md, "In a cluster"). At 2e6 votes a whole
#: checkpoint of a join shard took 0.1-0.2 s to make and as long to fold at the holder;
#: started at once they held the views' catch-up after a recovery for a second. A
#: loss of the worker meanwhile rebuilds its stateful nodes (right, slower).
HOLDER_WHOLE_AFTER = 1.0
#: The coordinated regime starts an epoch of barrier checkpoints every this many writes
#: (``connect(regime="coordinated", barrier_every=..., barrier_seconds=...)``), about as
#: often as the vote workload's shards checkpoint under tree clocks (a shard's 32,768
#: rows at 1,000 votes a write over 4 shards); a rollback replays at most this many
#: writes (docs/regimes.md).
BARRIER_EVERY = 128

#: With a data directory, the stateful shards' checkpoints are also written to disk at
#: a quiet point once this many bytes have been logged since the last time (and after
#: each snapshot, catalog change and at close): a reopen after a crash replays at most
#: about this much log through the views (runtime/ondisk.py).
DISK_CHECKPOINT_BYTES = 4 << 20

#: a lost base restored on a worker from the controller's history (with writes at the
#: workers, from its replica's log or the lost workers' disks: its table as of the
#: log's start, then its writes) gets them in requests of at most this many rows
#: (``ClusterRuntime.history_parts``; a replica's log read in parts this long too,
#: ``Worker.req_log_parts``), the table's batches cut to fit:
#: no frame nears ``wire.MAX_FRAME`` (at two INT columns about 16 MB a part)
BASE_PART_ROWS = 1 << 20

#: ``serve --writes worker``: a base's whole log, sent to a new replica, goes in parts
#: of at most this many rows (a write is never cut: a bigger one is a part alone), each
#: a frame of its own (``writes.log_parts``): the owner's message thread encodes and
#: sends one per pass over its inbox (``channels.Inbox``, bulk frames), so the data
#: messages pass between them, no part holds up either worker long (a few ms), and no
#: table is bounded by the frame size limit (``wire.MAX_FRAME``). About 1 MB a part
#: at two INT columns (4 MB before the parts were encoded on the message thread).
WHOLE_LOG_PART_ROWS = 1 << 16
#: Seconds a new log replica named during a recovery waits at most for the
#: controller's word that the recovery is over before its owner starts sending it the
#: whole log (``Worker.fill_go``; the word comes at the recovery's end, this is for a
#: controller lost meanwhile or a long lineage rebuild). The writes meanwhile go to
#: the new replica at once, kept aside there and acknowledged.
FILL_WAITS_AT_MOST = 2.0

#: ``serve --writes worker --data-dir``: a base's log on disk (``writes.DiskLogs``) is
#: rewritten from the log in memory once the writes trimmed from that one since the
#: last rewrite reach this many and the writes it keeps: bounded by about twice what
#: the log in memory holds, each rewrite paid for by as many trimmed writes
DISK_LOG_TRIM = 256

#: ``serve --partial --writes worker``: seconds a read of a hole waits for its worker's
#: own upquery (``Worker.direct_miss``) before it answers the hole, which the client
#: then upqueries through the controller. A safety net only: an upquery whose fill
#: may be lost fails at once (at a worker's loss, a held operator's loss, a catalog
#: change that makes the reader full), so this is never waited out in a healthy
#: cluster; long enough for a fill of a key with many rows under load.
DIRECT_MISS_TIMEOUT = 10.0


def _override(text: str) -> None:
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, value = item.partition("=")
        old = globals().get(name)
        if not name.isupper() or not isinstance(old, (int, float)):
            raise ValueError(f"NORIA_TUNING: no knob {name!r} in noria_py.tuning")
        globals()[name] = float(value) if isinstance(old, float) else int(value)


_override(os.environ.get("NORIA_TUNING", ""))
