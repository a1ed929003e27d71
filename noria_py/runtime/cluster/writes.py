"""Validating a write batch against a base's rows, wherever the base's one validating
copy is (``serve --writes worker``; docs/architecture.md, "Writes at the base's worker").

A batch made at the controller has its rows checked one by one (types, NOT NULL:
``Base.check_rows``, which needs no state) and comes as deletes (sign -1) and inserts
(sign +1), or as int64/float64 columns that the controller's copy took as arrays.
``validated`` applies the rules that need the table (unique keys, a deleted row held)
with ``Base.prepare``, exactly as the embedded engine does, so a batch is taken whole
or refused whole by the same code; it changes no state.

Invariant: one copy of a base's rows validates its writes, its worker's. While the
base is down (its worker lost, its restore not done) a write made at the controller
waits for the restore (``ClusterRuntime.base_down``: the controller's lock, which a
recovery takes, let go meanwhile; under a pause of the writes the statement is undone
and run again after the recovery) and is validated by the restored base, so no copy
of the table at the controller validates or answers a read.

The base's log (``serve --writes worker``): its owner keeps a ``WriteHistory`` of the
base (``history_from``) and, with another live worker, sends each accepted group of
writes to one other worker, its replica, over the direct peer links (``["rlog",
base, batches, tags]``); the replica keeps the same log (``ReplicaLogs``) and answers
``["rdur", base, n, fill]``, and only then is the group acknowledged and its output
released. A new replica is first sent the whole log, in parts of at most
``tuning.WHOLE_LOG_PART_ROWS`` rows (``log_parts``; ``["rpart", ...]`` each, the last
``["rfull", ...]``, which alone the replica answers: the parts are kept aside,
``ReplicaLogs.part``, until the last, and one missing or out of order is an error,
never a shorter log), in the background (``Worker.filling``); one named during a
recovery from the recovery's end on (the controller's ``["fill_go"]``, or at the
latest ``tuning.FILL_WAITS_AT_MOST`` after: ``Worker.fill_go``), so that its parts do
not take the CPU the recovery needs on both workers. The groups taken
meanwhile go to the replica at once, marked with the fill's number (``["rlog",
base, batches, tags, fill]``; the group in flight to a lost replica too, as one of
its own, cut from the whole log); the replica keeps them aside until the whole
log is there and answers each at once (``ReplicaLogs.during_fill``, ``["rdur",
base, n, fill, 1]``), so such a write is acknowledged on two copies, the owner's
log and the replica's, without waiting for the whole log (at 1e7 votes, 160 MB:
every write after a worker's loss waited 0.5-0.6 s for it when it did). With no
other live worker (replica None) the owner's log is the log, fsynced on disk with
``--data-dir``. The controller keeps none of it.
Invariant: every acknowledged write is in the owner's log and in its replica's
(whole for the owner that sent it, ``ReplicaLogs.whole``, or kept aside during a
fill), and, with ``--data-dir``, on the owner's disk (a replica's too once its
whole log is there). Until a new replica holds the whole log, the owner's log
alone holds the writes before the fill: a loss of the owner then loses the table
without ``--data-dir`` (``TableLostError``), answered writes or not; so a lost owner's base is restored from its live replica's
log (on the replica's own worker where it can: its log becomes the base's,
``Worker.req_promote_base``, so no table crosses the network; elsewhere its parts go
through the controller, ``req_log_parts``), else from the longest of the lost
workers' logs on disk (``disk_log``), else it is a lost table, never a shorter one.

The order at the owner (``Worker.accept``, ``commit``): a write is validated first
(``Base.prepare``: no state changes); then, if no group of its base is in flight, its
group is sent to the replica and the link flushed, then appended to the owner's disk
(below), then applied to the base (its output made and held), so the replica's round
trip overlaps the owner's ``fsync`` and apply; the message thread takes ``rdur`` only
after all of them, then the output goes out and the client is answered. A write sent
before its apply cannot then be refused: it was checked against the very state it is
applied to (the thread takes nothing in between). Should the apply raise all the same,
the message thread ends, the worker is lost and the base is restored from the log,
which holds the write: the log never holds a write the base does not take. The
client's write, ``rlog`` and ``rdur`` travel in the inboxes' fast lane, ahead of the
data messages queued before them (``channels.Inbox``), and the answer goes out from
the message thread once the write is durable (its output flushed first).

With ``--data-dir DIR`` (``DiskLogs``), the owner and the replica each keep that log on
disk too, under ``DIR/workers/<worker>/<table>/`` (``log_dir``): one ``Storage``
directory per base (the embedded write-ahead log's files, framing and checks:
``noria_py/storage``), the table as of the log's start in its snapshot and each write
a record of its own, its number the base's write number. One directory per base, not
one log per worker, because a log is trimmed and replaced per base (a new replica's
whole log, a restored base's), and read per base when its workers are lost; named by
the table, which a restarted controller knows (node ids are renumbered). The owner appends a group, in
one write and one ``fsync`` as the controller's WAL does each batch, just after sending
it to its replica (the two overlap; its message thread takes the ``rdur`` only after
the append), and the replica before answering ``rdur``: so an acknowledged write is on
both disks. The log on disk is rewritten from the one in memory, so trimmed by
the same rule (the children's progress, ``rtrim``), once enough writes were trimmed
(``tuning.DISK_LOG_TRIM``). When a base's owner is lost with no live replica holding
its whole log (both lost together, the owner lost while a new replica was being
filled, no other worker), the controller restores it from their directories
(``disk_log``: the longest; a torn last record is cut and reported, other damage
refuses that directory), with the tags of those writes from their records (each
write's tag is in its own record, so on disk in the same ``fsync``): its new worker
keeps them, so a write on a disk but never acknowledged is found by its client's
``write_landed`` and not sent again; the new owner's log then replaces theirs
(deleted: ``ClusterRuntime.restore_base``).

A restarted controller (``tables_on_disk``) takes each table's rows from the longest
of its logs under ``DIR/workers`` (every one there is a prefix of the same sequence of
writes, but a lost owner's, which may hold writes it never had acknowledged: in doubt,
applied whole or not at all), writes them into its own data directory's snapshot and
deletes ``DIR/workers``; then it rebuilds every view from the tables, as a restart
does (``restart.py``), and the workers that dial back start their logs anew. It keeps
the tags of the last ``RESTART_TAGS`` writes of the very log each table's rows come
from (``LandedTail``), so a client whose write was in flight at the controller's death
is told it landed exactly when the rows taken hold it (``restart.LandedBefore``).

Which mode a server runs (``choose``, ``serve --writes auto``, the default): the one a
data directory's tables were written in (``DIR/workers`` is there from a ``worker``
server's start on, so a directory whose tables are in the workers' logs is never
opened as the controller's own, which would miss them), else ``worker`` where it is
built (``unbuilt``: ``--channels direct``, a regime not in ``NOT_BUILT``), else
``controller``. An explicit mode is served as asked or refused with the reason.
"""
from __future__ import annotations

import collections
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from ... import tuning
from ...batch import Batch
from ...errors import ArgumentError, RecoveryError, StorageError
from ...ops.base import Base
from ...storage import Recovered, Storage, holds_tables
from ...storage.storage import LOCK_NAME
from ..history import WriteHistory

log = logging.getLogger("noria_py.cluster")

#: the regimes writes at the bases' workers are not built with yet, and why: each
#: reads, at a recovery, the bases' writes from the controller's history, which the
#: controller does not keep of a base written at its worker (its log is its worker's
#: and its replica's), and sets bases back there, where a base at its worker keeps
#: its rows and a replicated log that would have to be set back with it. (``treeclock`` and ``lineage`` read a live base's writes from its
#: worker, ``payload_after``, or rebuild with the clients' writes paused.)
NOT_BUILT = {
    "coordinated": "its epochs are started by the controller's count of the writes it "
                   "takes, which here are none, and its rollback sets every base back and "
                   "resends its writes from the controller's history",
    "uncoordinated": "its recovery line sets bases back and resends their writes from the "
                     "controller's history",
    "cic": "its recovery line sets bases back and resends their writes from the "
           "controller's history, and its ticks run per write at the controller",
    "falkirk": "its frontier, on the uncoordinated regime's lines, sets bases back and "
               "resends their writes from the controller's history",
    "causal": "a lost node's writes from a live base are read from the controller's "
              "history, which lags what that base sent",
}

#: where a write is validated (``serve --writes``): at the controller, against its copy
#: of the table, or at the base's worker, which keeps the rows
WRITES = ("controller", "worker")
#: ``serve --writes auto`` (the default): one of ``WRITES``, as ``choose`` picks it
AUTO = "auto"


def unbuilt(regime: str, channels: str) -> str | None:
    """Why writes at the bases' workers are not built with ``regime`` and
    ``channels`` (None: they are)."""
    if channels != "direct":
        return ("--writes worker needs --channels direct (not built yet: the log replica "
                "is sent on the peer links)")
    if regime in NOT_BUILT:
        return f"--writes worker with --regime {regime} is not built yet: {NOT_BUILT[regime]}"
    return None


#: ``DIR/workers.before``: the workers' logs of the controller before, set aside by a
#: restarting one until it has taken them (``restart.set_aside_workers_logs``)
ASIDE = "workers.before"


def written_in(data_dir: str | None) -> str | None:
    """The mode the tables of ``data_dir`` were written in: ``worker`` (``DIR/workers``,
    the workers' logs), ``controller`` (the directory's own catalog or snapshot and
    no ``DIR/workers``), or None (no directory, or one where no table was made)."""
    if data_dir is None:
        return None
    if (Path(data_dir) / "workers").exists() or (Path(data_dir) / ASIDE).exists():
        return "worker"
    return "controller" if holds_tables(data_dir) else None


def choose(writes: str, regime: str, channels: str,
           data_dir: str | None) -> tuple[str, str]:
    """The mode (one of ``WRITES``) a server with these options runs, and why, for its
    log: ``writes`` ``auto`` picks the mode of ``data_dir``'s tables if it holds any,
    else ``worker`` where it is built, else ``controller``; ``worker`` or
    ``controller`` is served as asked. ``ArgumentError`` when that mode cannot serve:
    ``worker`` not built with ``regime`` and ``channels``, or ``controller`` on a
    directory whose tables are in its workers' logs."""
    if writes not in (*WRITES, AUTO):
        raise ArgumentError(f"writes must be one of {', '.join((*WRITES, AUTO))}, "
                            f"not {writes!r}")
    written, reason, why = written_in(data_dir), unbuilt(regime, channels), "asked for"
    if writes == AUTO:
        if written is not None:
            writes, why = written, f"auto: the tables of {data_dir} were written so"
        elif reason is None:
            writes, why = "worker", f"auto: built with --regime {regime} --channels {channels}"
        else:
            writes, why = "controller", f"auto: {reason}"
    if writes == "worker":
        if reason is not None and written == "worker":
            raise ArgumentError(f"the tables of {data_dir} are in its workers' logs (served "
                                f"with --writes worker), and {reason}; serve it with "
                                "--regime treeclock or lineage and --channels direct")
        if reason is not None:
            raise ArgumentError(f"{reason}; serve it with --regime treeclock or lineage and "
                                "--channels direct, or with --writes controller")
    elif written == "worker":
        raise ArgumentError(f"the tables of {data_dir} are in its workers' logs "
                            "(served with --writes worker): serve it with --writes worker")
    return writes, why


#: per base, the tags of this many last writes are kept where its log is (a replica's
#: log, a restored base's worker): a write whose worker was lost before it
#: answered is done if its tag is there (``write_landed``), else it may be sent again
LANDED_KEPT = 1 << 16


def validated(op: Base, batch: Batch) -> Batch:
    """``batch`` (deletes then inserts, or columns to insert) checked against ``op``'s
    rows: the delta to apply, or the ``noria_py.Error`` naming what is wrong."""
    if batch.cols:
        cols = list(batch.cols)
        if op.arrays_from_numbers(cols) is not None:
            return op.prepare_arrays(cols)
    rows, signs = batch.rows, batch.signs
    return op.prepare([r for r, s in zip(rows, signs) if s > 0],
                      [r for r, s in zip(rows, signs) if s < 0])


def history_from(op: Base, start: int, table: Sequence[Batch],
                 writes: list[Batch]) -> WriteHistory:
    """A base's log: the table as of write ``start`` (batches that add up to it, kept
    as they are: ``Base.parts``), then ``writes``."""
    h = WriteHistory(op)
    for part in table:
        if part:
            h.folded.process(0, part)
    h.start = start
    h.batches = list(writes)
    return h


def log_parts(table: Sequence[Batch], writes: Sequence[Batch], rows: int
              ) -> list[tuple[list[Batch], list[Batch]]]:
    """A base's whole log (its table's batches, then its writes), in order, cut into
    parts of at most ``rows`` rows: (the table's batches, the writes) of each, at
    least one part. A table batch longer than ``rows`` is cut (the table is only
    their sum); a write never is (the log counts writes, each one batch): a longer one
    is a part alone."""
    parts: list[tuple[list[Batch], list[Batch]]] = [([], [])]
    held = 0

    def add(b: Batch, i: int) -> None:
        nonlocal held
        if held and held + len(b) > rows:
            parts.append(([], []))
            held = 0
        parts[-1][i].append(b)
        held += len(b)
    for b in table:
        for lo in range(0, len(b), rows):
            add(b if len(b) <= rows else b.sliced(lo, lo + rows), 0)
    for b in writes:
        add(b, 1)
    return parts


@dataclass
class PartsTaken:
    """The parts of a base's whole log a replica has taken so far (``ReplicaLogs.part``),
    kept aside until the last (``ReplicaLogs.full``)."""
    owner: str                  # the worker sending them
    fill: int                   # its number for this whole log
    taken: int = 0              # parts taken so far, the next is part ``taken``
    table: list[Batch] = field(default_factory=list)    # the table's batches
    writes: list[Batch] = field(default_factory=list)   # the writes after it

    def turn(self) -> tuple[str, int, int]:
        """(owner, fill, parts taken): what the next part must match."""
        return self.owner, self.fill, self.taken


class ReplicaLogs:
    """The write logs a worker keeps as the replica of bases hosted elsewhere (their
    owners send them: ``part``, ``full``, ``append``, ``trim``), and the tags of their
    last ``LANDED_KEPT`` writes; read by the controller when an owner is lost."""

    def __init__(self) -> None:
        self.logs: dict[str, WriteHistory] = {}
        #: per base, the owner that sent the log kept here and its fill's number
        #: (``full``): a log is whole for that owner only (a later owner's whole log
        #: may still be on its way), and each answer to the owner names the fill
        self.owners: dict[str, str] = {}
        self.fills: dict[str, int] = {}
        self.tags: dict[str, collections.deque[int]] = {}
        #: per base, the parts of a whole log on their way (``part``)
        self.parts: dict[str, PartsTaken] = {}
        #: per base, the groups its owner took while that whole log was on its way:
        #: (owner, fill, [(batches, tags)]), appended behind it once it is here
        self.aside: dict[str, tuple[str, int, list[tuple[list[Batch], list[int]]]]] = {}

    def part(self, nid: str, src: str, fill: int, i: int, table: list[Batch],
             writes: list[Batch]) -> None:
        """Part ``i`` of the whole log of fill ``fill`` from owner ``src``, kept aside
        until its last part (``full``). A part 0 starts a fill anew (one abandoned by
        its owner is dropped); the parts come in order on one link, so another out of
        turn is an error (the log would miss or misplace writes)."""
        got = self.parts.get(nid)
        if i == 0:
            got = self.parts[nid] = PartsTaken(src, fill)
            self.forget(nid)        # (another whole log on its way)
            if self.aside.get(nid, (src, fill))[:2] != (src, fill):
                del self.aside[nid]     # (an abandoned fill's)
        elif got is None or got.turn() != (src, fill, i):
            raise RecoveryError(f"base {nid}: part {i} of the whole log {fill} from "
                                f"{src} out of turn (have {got and got.turn()})")
        got.taken += 1
        got.table.extend(table)
        got.writes.extend(writes)

    def full(self, op: Base, nid: str, start: int, table: Sequence[Batch],
             writes: list[Batch], src: str = "", fill: int = 0, parts: int = 0) -> None:
        """The whole log, from a base's (new) owner: replaces what was kept. ``parts``:
        how many parts of it came before (``part``), the last of the same ``fill``
        from ``src``; they go first."""
        got = self.parts.pop(nid, None)
        if parts:
            if got is None or got.turn() != (src, fill, parts):
                raise RecoveryError(f"base {nid}: the whole log {fill} from {src} has "
                                    f"{parts} parts before its last, here "
                                    f"{got and got.turn()}")
            table, writes = got.table + list(table), got.writes + writes
        self.logs[nid] = history_from(op, start, table, writes)
        self.owners[nid], self.fills[nid] = src, fill
        self.tags.setdefault(nid, collections.deque(maxlen=LANDED_KEPT))

    def lost(self, src: str) -> None:
        """Owner ``src`` was lost: the parts of its whole logs will not be finished."""
        for nid in [n for n, got in self.parts.items() if got.owner == src]:
            del self.parts[nid]
        for nid in [n for n, a in self.aside.items() if a[0] == src]:
            del self.aside[nid]

    def is_whole(self, nid: str, src: str, fill: int) -> bool:
        """Whether the whole log of fill ``fill`` from ``src`` is here (``full``)."""
        return self.whole(nid, src) is not None and self.fills.get(nid) == fill

    def during_fill(self, nid: str, src: str, fill: int, batches: list[Batch],
                    tags: list[int]) -> None:
        """A group owner ``src`` took while the whole log of fill ``fill`` is on its way
        here, kept aside in order until that log is (``take_aside``). Its owner's log
        holds it, and acknowledges it on this answer: a write taken during a fill
        then waits for two copies, not for the whole log (at 1e7 votes, 160 MB that
        every write after a worker's loss waited for, 0.5-0.6 s). No weaker: until
        the whole log is here, the owner's log alone holds the writes before, and
        the owner's loss meanwhile loses the table (or restores it from the lost
        workers' disks with ``--data-dir``) whether or not these were answered. The
        log kept here from an earlier fill is forgotten at the first: it would no
        longer hold every write its owner acknowledged."""
        got = self.aside.get(nid)
        if got is None or got[:2] != (src, fill):
            got = self.aside[nid] = (src, fill, [])
            # a log kept here from before is no longer whole for anyone (``whole``):
            # it misses this acknowledged write (as at part 0, which may come later)
            self.forget(nid)
        got[2].append((batches, tags))

    def take_aside(self, nid: str, src: str, fill: int) -> list[tuple[list[Batch], list[int]]]:
        """The groups kept aside during fill ``fill`` from ``src``, now that its whole
        log is here, in the order they came (those of another fill: dropped)."""
        got = self.aside.pop(nid, None)
        return got[2] if got is not None and got[:2] == (src, fill) else []

    def append(self, nid: str, batches: list[Batch], tags: list[int]) -> None:
        h = self.logs.get(nid)
        if h is None:
            raise RecoveryError(f"writes of base {nid} before its whole log")
        for b in batches:
            h.append(b)
        self.tags[nid].extend(t for t in tags if type(t) is int and t)

    def trim(self, nid: str, t: int) -> None:
        h = self.logs.get(nid)
        if h is not None:
            h.trim(t)

    def whole(self, nid: str, owner: str) -> WriteHistory | None:
        """The log of ``nid`` kept here if ``owner`` sent it whole (``full``), which
        then holds every write ``owner`` acknowledged (it acknowledges a write only
        once its replica has it); None: none, or another owner's (named its replica,
        it was lost before this one's whole log was answered: the log is on the lost
        workers' disks, if anywhere)."""
        h = self.logs.get(nid)
        return h if h is not None and self.owners.get(nid) == owner else None

    def forget(self, nid: str) -> None:
        """The base's log kept here is no longer its replica's whole log: it became the
        base's own (``Worker.req_promote_base``), or another whole log is on its way
        (``part``); its tags stay (``landed``)."""
        self.logs.pop(nid, None)
        self.owners.pop(nid, None)
        self.fills.pop(nid, None)

    def keep_tags(self, nid: str, tags: Collection[int]) -> None:
        """The tags of a base's last writes, restored here from a log read elsewhere
        (``Worker.req_restore_base``), for ``landed``."""
        known = self.tags.setdefault(nid, collections.deque(maxlen=LANDED_KEPT))
        known.extend(t for t in tags if type(t) is int and t)

    def landed(self, nid: str, tag: int) -> bool:
        return tag in self.tags.get(nid, ())

    def drop(self, nid: str) -> None:
        self.forget(nid)
        self.tags.pop(nid, None)
        self.aside.pop(nid, None)
        self.parts.pop(nid, None)


class DiskLogs:
    """The base logs a worker keeps on disk (``--data-dir``): its own bases' and those
    it is the replica of, one ``Storage`` directory per base under ``root`` (which
    starts empty: what a worker of an earlier run left there is not its own), each
    mirroring a ``WriteHistory`` of the worker: ``reset`` when that log is made or
    replaced, ``append`` as it takes writes (durable when it returns), ``trimmed``
    after it is trimmed.

    Each write's tag is in its own record (a tagged ``Storage``, storage/log.py), so
    ``disk_tail`` hands the tags of the writes it reads to the controller, which
    answers ``write_landed`` from them: a write durable on disk whose owner and
    replica were lost before it was acknowledged is found there and not sent again.
    The tags of the writes in a log are kept here too (``tags``, by write number), so
    a trim's rewrite keeps them; a log made or replaced (``reset``) has those it is
    given (a new replica's: the group in flight, the last writes of the whole log)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        #: per base: its directory's storage, its table, the write number its log
        #: there starts after, and the tags of the writes in it by write number
        self.stores: dict[str, Storage] = {}
        self.tables: dict[str, str] = {}
        self.start: dict[str, int] = {}
        self.tags: dict[str, dict[int, int]] = {}

    def reset(self, nid: str, h: WriteHistory, last_tags: Collection[int] = ()) -> None:
        """The base's log on disk made anew as ``h``, the tags of its last writes
        ``last_tags`` (those of others are not known here: the controller has them)."""
        with h.lock:
            end = h.start + len(h.batches)
        self.tags[nid] = {end - len(last_tags) + 1 + i: t for i, t in enumerate(last_tags)
                          if type(t) is int and t}
        self._rewrite(nid, h)

    def _rewrite(self, nid: str, h: WriteHistory) -> None:
        table = self.tables[nid] = h.folded.schema.name.lower()
        st = self.stores.get(nid)
        if st is None:
            st = self.stores[nid] = Storage(log_dir(self.root, table), tagged=True)
        with h.lock:
            start, writes = h.start, list(h.batches)
            rows = list(h.folded.stored_rows())
        known = self.tags.setdefault(nid, {})
        for n in [n for n in known if n <= start]:
            del known[n]
        st.reset(table, rows, start, writes,
                 [known.get(start + 1 + i, 0) for i in range(len(writes))])
        self.start[nid] = start

    def append(self, nid: str, batches: list[Batch], tags: Collection[int] = ()) -> None:
        """``batches`` logged durably, with their tags (``tags``: one per batch, 0 or
        None for an untagged write, or none at all)."""
        st = self.stores[nid]
        at = st.lsn
        tags = [t if type(t) is int and t else 0 for t in tags] or [0] * len(batches)
        st.log_batches(self.tables[nid], batches, tags)
        known = self.tags.setdefault(nid, {})
        known.update((at + 1 + i, t) for i, t in enumerate(tags) if t)

    def trimmed(self, nid: str, h: WriteHistory) -> None:
        if nid not in self.stores:
            return
        with h.lock:
            dropped, kept = h.start - self.start[nid], len(h.batches)
        if dropped >= max(kept, tuning.DISK_LOG_TRIM):
            self._rewrite(nid, h)

    def drop(self, nid: str) -> None:
        st = self.stores.pop(nid, None)
        self.start.pop(nid, None)
        self.tags.pop(nid, None)
        table = self.tables.pop(nid, None)
        if st is not None and table is not None:
            st.close()
            shutil.rmtree(log_dir(self.root, table), ignore_errors=True)

    def close(self) -> None:
        for st in self.stores.values():
            st.close()
        self.stores.clear()


def log_dir(root: Path, table: str) -> Path:
    """Where a worker whose logs are under ``root`` keeps table ``table``'s."""
    return root / quote(table.lower(), safe="")


def disk_log(dirs: Sequence[Path], nid: str, table: str
             ) -> tuple[int, list[Batch], list[Batch], list[int]] | None:
    """Base ``nid``'s log from the longest of the logs in ``dirs`` (its lost workers'
    ``DiskLogs`` directories; each holds a prefix of the same writes, the lost
    owner's perhaps a write it never acknowledged: in doubt, taken whole or not at
    all): (the write its snapshot is at, the table then as one batch, the writes
    after it, their tags), or None if none opens. What opening each finds (a torn
    tail cut) is logged; a damaged one (``CorruptionError``) is logged and passed
    over."""
    best: tuple[int, Path] | None = None
    for d in dirs:
        if not (d / "snapshot.bin").exists():
            continue
        rec = _read_log(d, f"base {nid}")
        if not isinstance(rec, StorageError) and (best is None or rec.lsn > best[0]):
            best = (rec.lsn, d)
    if best is None:
        return None
    first = _read_log(best[1], f"base {nid}")
    if isinstance(first, StorageError):
        return None
    rec = _read_log(best[1], f"base {nid}", first.start)      # (split at its snapshot)
    if isinstance(rec, StorageError):
        return None
    rows = rec.tables.get(table.lower(), [])
    later = [] if rec.later is None else [Batch.changes(list(dels), list(ins))
                                          for _, ins, dels in rec.later]
    start = rec.lsn - len(later)
    tags = [rec.tags[k] for k in range(start + 1, rec.lsn + 1) if k in rec.tags]
    return start, [Batch(list(rows), [1] * len(rows))] if rows else [], later, tags


#: a restarted controller keeps what the workers' logs say of the tags of the last
#: this many writes of each table (``tables_on_disk``, ``restart.LandedBefore``). Every
#: write in doubt at a controller's death is among them: a write is in doubt only
#: while its group is in flight (a group is acknowledged once durable, and only a
#: durable write is ever trimmed), and at most one write per connection is in flight
#: to a base at once (a read port takes a connection's next write after answering
#: the last; ``reads.MAX_READ_CONNECTIONS``, 256, per worker), plus the controller's
#: own (``forward``: one at a time, under its lock): 257 at most, so four times that
RESTART_TAGS = 1024


@dataclass
class LandedTail:
    """What a restarted controller knows of the last ``RESTART_TAGS`` writes of a
    table's log on its workers' disks: their tags (``tags``), and whether each of
    those writes has its tag there (``complete``). A write in a log made whole (a
    restored base's, a new replica's ``rfull``) has none, its tag not being sent with
    it; then a tag not found may yet be such a write's."""

    tags: list[int] = field(default_factory=list)
    complete: bool = True


def tables_on_disk(root: Path, tables: Collection[str], wait: float = 0.0
                   ) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, LandedTail]]:
    """For a restarted controller: each of ``tables`` that has a log under ``root``
    (the workers' logs of the controller before), its rows from the longest of them
    (the most writes; of two as long, the one with more tags), and the tags of the
    last ``RESTART_TAGS`` writes of that same log (``LandedTail``: so a write is
    found landed exactly when the rows taken hold it). A torn last record is cut and
    logged; a damaged log is logged and passed over where another log of its table
    opens, and refused (``CorruptionError``, naming the file and offset) where none
    does. A log still open at a worker (its lock held: a worker taking writes with
    no controller that has not dialed back) is waited for up to ``wait`` seconds in
    all, then passed over or refused as a damaged one is: only a closed log is
    final (``Worker.goes_on``)."""
    best: dict[str, tuple[tuple[int, int], Recovered]] = {}
    damaged: dict[str, StorageError] = {}
    deadline = time.monotonic() + wait
    for d in sorted(root.glob("*/*")):
        table = unquote(d.name)
        if table not in tables or not (d / "snapshot.bin").exists():
            continue
        if not _closed(d, deadline):
            log.error("table %s: its log in %s is still open at a worker that has not "
                      "dialed back; passed over", table, d)
            damaged.setdefault(table, StorageError(
                f"the log of table {table!r} in {d} is still open at a worker that has "
                "not dialed back to this controller: start it again once that worker "
                "has exited or rejoined"))
            continue
        rec = _read_log(d, f"table {table}")
        if isinstance(rec, StorageError):
            damaged.setdefault(table, rec)
            continue
        if table not in best or (rec.lsn, len(rec.tags)) > best[table][0]:
            best[table] = ((rec.lsn, len(rec.tags)), rec)
    for table, refused in damaged.items():
        if table not in best:
            raise refused
    landed = {}
    for table, (_, rec) in best.items():
        tail = range(max(rec.start, rec.lsn - RESTART_TAGS) + 1, rec.lsn + 1)
        landed[table] = LandedTail([rec.tags[k] for k in tail if k in rec.tags],
                                   all(k in rec.tags for k in tail))
    return {t: rec.tables.get(t, []) for t, (_, rec) in best.items()}, landed


def _closed(d: Path, deadline: float) -> bool:
    """Whether no process holds the log directory ``d`` open (its ``Storage`` lock),
    waiting until ``deadline`` (``time.monotonic``) for it to be closed."""
    while True:
        try:
            fd = os.open(d / LOCK_NAME, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
        finally:
            os.close(fd)
        time.sleep(0.05)


def _read_log(d: Path, what: str, split_at: int | None = None) -> Recovered | StorageError:
    """A lost or earlier worker's log directory, opened (a torn tail cut) and read, what
    opening found logged; or why it is refused (logged)."""
    try:
        st = Storage(d, split_at=split_at)
    except StorageError as e:
        log.error("%s: its log in %s is refused: %s", what, d, e)
        return e
    try:
        rec = st.load()
    finally:
        st.close()
    for note in rec.report:
        log.warning("%s: its log in %s: %s", what, d, note)
    return rec
