"""The :class:`Storage` of one data directory: its lock, catalog, snapshot and log.

The directory holds at most: ``LOCK`` (taken with ``flock`` for as long as a
Storage is open, so only one process appends to the log), ``catalog.json`` (the
CREATE statements, replaced by atomic rename), ``snapshot.bin`` (every base row
as of batch ``lsn`` of generation ``gen``, :mod:`.snapshot`) and one log,
``wal-<gen+1>.log`` (the batches since, :mod:`.log`). Opening repairs what a
crash left (unfinished ``*.tmp`` files, a log already covered by the snapshot, a
torn log tail) and replays snapshot plus log into rows; any other damage (a bad
record with data after it, a damaged, short or missing log) is refused with a
:class:`~noria_py.errors.CorruptionError` naming the file and byte offset, never
a guess. :func:`repair` (``noria-py repair --data-dir DIR``) says what dropping
the damage would lose, and drops it only when asked.

Invariants (every method that writes holds one lock while it works):

* a batch's lsn is one more than the previous batch's, and a batch is on disk
  (synced, unless ``sync=False``) before the method that logs it returns, so
  the engine may apply it only afterwards and never shows a write that a crash
  could lose;
* a snapshot stands for exactly the batches logged so far (the caller hands
  over the rows as of that point: :meth:`Storage.maybe_snapshot` reads them
  right after the write that made it due), and the log it covers is deleted
  only after the snapshot is durable;
* after a failure that leaves the directory's state unknown (a write that could
  not be undone, no new log after a snapshot), every later write is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

# StorageError: a data directory that cannot be used as asked: locked by another
# process, damaged beyond a torn log tail, a row that cannot be stored, or an I/O
# failure while writing (a noria_py.Error subclass, so it is defined with the others).
from ..errors import CorruptionError, StorageError
from . import codec
from .log import (
    BATCH,
    COLUMNS,
    DROP,
    LOG_HEADER_SIZE,
    LOG_VERSION,
    RECORD_HEADER,
    TAGGED_LOG_VERSION,
    FrameScanner,
    HeaderError,
    LogWriter,
    atomic_write,
    classify_bad_record,
    decode_log_header,
    encode_log_header,
    frame,
    fsync_dir,
    next_record,
)
from .snapshot import SnapshotError, read_snapshot, write_snapshot

if TYPE_CHECKING:
    from ..batch import Batch
    from ..columns import ColumnChunk

__all__ = ["Storage", "StorageError", "CorruptionError", "Recovered", "Damage", "RepairPlan", "holds_tables",
           "repair"]

LOCK_NAME = "LOCK"
CATALOG_NAME = "catalog.json"
SNAPSHOT_NAME = "snapshot.bin"
#: the views' checkpoints (``noria_py/runtime/ondisk.py``): derived from the tables, and
#: standing for a batch number of the log, so a repair that drops batches drops them
CHECKPOINTS_DIR = "checkpoints"
CATALOG_VERSION = 1
_WAL_RE = re.compile(r"wal-(\d+)\.log")


def holds_tables(data_dir: str | os.PathLike[str]) -> bool:
    """Whether a table was ever made in ``data_dir`` (its catalog or a snapshot is
    there), without opening it: a directory that does not exist, or holds at most a
    lock and an empty log, is new."""
    d = Path(data_dir)
    return (d / CATALOG_NAME).exists() or (d / SNAPSHOT_NAME).exists()


def _wal_name(gen: int) -> str:
    return f"wal-{gen:08d}.log"


@dataclass
class Recovered:
    """What a data directory holds, as found when it was opened.

    ``tables`` has one entry per table that has rows or row changes since it
    was last dropped (a table created but never written may be absent:
    the catalog, not this dict, says which tables exist). Rows are a
    multiset in a deterministic order: snapshot rows first, then the log's
    inserts in order; a delete removes one equal row (equal in value and in
    type, so ``1``, ``1.0`` and ``True`` are different rows).
    """

    catalog: list[str]
    tables: dict[str, list[tuple]]
    lsn: int
    report: list[str] = field(default_factory=list)
    #: opened with ``split_at=L`` and the directory could be split there: ``tables`` hold
    #: the rows as of batch L, and ``later`` the batches after it, in order, as
    #: (table, inserts, deletes); None when not split (``tables`` hold every batch)
    later: list[tuple[str, tuple, tuple]] | None = None
    #: with ``later``: the CRC32 of batch L's log record (None: L is the snapshot's batch)
    split_crc: int | None = None
    #: with ``later``: L
    split_lsn: int | None = None
    #: a tagged log's (``Storage(tagged=True)``): the tag of each batch logged with one
    #: since the snapshot, by its lsn (those in ``later`` too)
    tags: dict[int, int] = field(default_factory=dict)
    #: the lsn of the snapshot's last batch: the log holds the batches after it
    start: int = 0


@dataclass
class Damage:
    """Damage found in a data directory that a crash cannot explain: what
    opening refuses and :func:`repair` drops. ``offset`` is where the damage
    starts in ``path`` (everything before it is kept); ``size`` is the bytes
    from there to the end of the file; ``dropped`` counts, per table, the
    valid-looking records found in those bytes (``[records, rows inserted,
    rows deleted]``), which dropping the damage loses with it."""

    path: Path
    offset: int
    problem: str
    size: int
    evidence: str = ""
    dropped: dict[str, list[int]] = field(default_factory=dict)
    kept_lsn: int = 0
    missing: bool = False

    def describe(self) -> str:
        if self.missing:
            where = f"{self.path.name}: {self.problem}"
        else:
            where = (f"{self.path.name}: bytes {self.offset}..{self.offset + self.size} "
                     f"({self.size} bytes): {self.problem}")
        if self.evidence:
            where += f" ({self.evidence})"
        lost = [f"table {t!r}: {r} record(s), {i} row(s) inserted, {d} deleted"
                for t, (r, i, d) in sorted(self.dropped.items())]
        where += f"; kept up to batch {self.kept_lsn}"
        if lost:
            where += ("; besides the damaged record, " if self.offset else "; ") + (
                "the dropped bytes hold valid-looking records: " + "; ".join(lost))
        return where

    def error(self, data_dir: Path) -> CorruptionError:
        return CorruptionError(
            (f"{str(self.path)!r} is missing" if self.missing else
             f"{str(self.path)!r} is damaged at byte {self.offset}: {self.problem}")
            + (f" ({self.evidence})" if self.evidence else "")
            + f". This is not what a crash leaves (a torn last write), and opening would lose "
            f"acknowledged writes, so the data directory was left as it is. Run "
            f"`noria-py repair --data-dir {data_dir}` to see what dropping the damage would "
            f"lose, then with --yes to drop it (a copy of the damaged file is kept), or restore "
            f"the directory from a backup"
        )


class _Rows:
    """One table's rows during replay. Kept as a plain list while only
    inserts arrive (the common case: no hashing at all), and switched to a
    counted dict at the first delete so that deletes are O(1), not a list
    scan each."""

    __slots__ = ("rows", "counts", "unmatched")

    def __init__(self, rows: list[tuple] | None = None) -> None:
        self.rows: list[tuple] | None = rows if rows is not None else []
        self.counts: dict[tuple, int] | None = None
        self.unmatched = 0

    def insert(self, rows: tuple) -> None:
        if self.counts is None:
            self.rows.extend(rows)  # type: ignore[union-attr]
            return
        counts = self.counts
        for row in rows:
            key = (row, tuple(map(type, row)))
            counts[key] = counts.get(key, 0) + 1

    def delete(self, rows: tuple) -> None:
        if not rows:
            return
        if self.counts is None:
            counts: dict[tuple, int] = {}
            for row in self.rows:  # type: ignore[union-attr]
                key = (row, tuple(map(type, row)))
                counts[key] = counts.get(key, 0) + 1
            self.counts, self.rows = counts, None
        counts = self.counts
        for row in rows:
            key = (row, tuple(map(type, row)))
            n = counts.get(key)
            if n is None:
                self.unmatched += 1
            elif n == 1:
                del counts[key]
            else:
                counts[key] = n - 1

    def result(self) -> list[tuple]:
        if self.counts is None:
            return self.rows  # type: ignore[return-value]
        return [key[0] for key, n in self.counts.items() for _ in range(n)]


def _valid_record(rec: object, lsn: int, tagged: bool = False) -> str | None:
    """Why a decoded log record is unusable at this point, or ``None``. ``tagged``: in
    a version-2 log, whose batch and columns records may end in a tag (log.py)."""
    if type(rec) is not tuple or not rec:
        return "malformed record"
    kind = rec[0]
    if kind in (BATCH, COLUMNS) and len(rec) == 6:
        if not tagged:
            return "a tagged record in an untagged (version 1) log"
        tag = rec[5]
        if type(tag) is not int or tag <= 0:
            return f"malformed tag {tag!r}"
        rec = rec[:5]
    if kind == BATCH and len(rec) == 5:
        _, rec_lsn, table, ins, dels = rec
        if type(table) is not str or type(ins) is not tuple or type(dels) is not tuple:
            return "malformed batch record"
        if type(rec_lsn) is not int or rec_lsn != lsn + 1:
            return f"batch lsn {rec_lsn!r} out of sequence (expected {lsn + 1})"
        if not (codec.rows_are_plain(ins) and codec.rows_are_plain(dels)):
            return "malformed rows in batch record"
        return None
    if kind == COLUMNS and len(rec) == 5:
        _, rec_lsn, table, n, cols = rec
        if type(table) is not str:
            return "malformed columns record"
        if type(rec_lsn) is not int or rec_lsn != lsn + 1:
            return f"batch lsn {rec_lsn!r} out of sequence (expected {lsn + 1})"
        if not codec.columns_ok(n, cols):
            return "malformed columns in columns record"
        return None
    if kind == DROP and len(rec) == 3:
        _, rec_lsn, table = rec
        if type(table) is not str:
            return "malformed drop record"
        if type(rec_lsn) is not int or rec_lsn != lsn:
            return f"drop record lsn {rec_lsn!r} out of sequence (expected {lsn})"
        return None
    return "unknown record kind"


def _accept_any_record(payload: memoryview) -> bool:
    try:
        rec = codec.unpackb(payload)
    except codec.DecodeError:
        return False
    return type(rec) is tuple and len(rec) in (3, 5, 6) and rec[0] in (BATCH, DROP, COLUMNS)



def _rows_record(table: str, inserts: Sequence[tuple], deletes: Sequence[tuple], lsn: int,
                 tag: int = 0) -> bytes:
    """A batch record, framed (``tag``: ending in it; 0: untagged); ``StorageError`` if
    a row cannot be stored."""
    if type(table) is not str:
        raise StorageError(f"table name must be a str, not {type(table).__name__}")
    if not isinstance(inserts, (list, tuple)):
        inserts = list(inserts)
    if not isinstance(deletes, (list, tuple)):
        deletes = list(deletes)
    for what, rows in (("insert", inserts), ("delete", deletes)):
        problem = codec.check_rows(rows)
        if problem is not None:
            raise StorageError(f"cannot log {what} into table {table!r}: {problem}")
    try:
        return frame(codec.packb((BATCH, lsn, table, inserts, deletes, tag) if tag
                                 else (BATCH, lsn, table, inserts, deletes)))
    except codec.EncodeError as exc:
        raise StorageError(f"cannot log a batch for table {table!r}: {exc}") from exc


def _columns_record(table: str, columns: Sequence, lsn: int, tag: int = 0) -> bytes:
    """A columns record, framed (``tag`` as ``_rows_record``'s)."""
    if type(table) is not str:
        raise StorageError(f"table name must be a str, not {type(table).__name__}")
    try:
        n, parts = codec.pack_columns(columns)
    except codec.EncodeError as exc:
        raise StorageError(f"cannot log columns for table {table!r}: {exc}") from exc
    return frame(codec.packb((COLUMNS, lsn, table, n, parts, tag) if tag
                             else (COLUMNS, lsn, table, n, parts)))


def _batch_record(table: str, batch: Batch, lsn: int, tag: int = 0) -> bytes:
    """An accepted batch's record (``Storage.log_batch``): columns for an all-numeric
    insert, else rows, deletions (sign -1) before insertions; ending in ``tag`` if not
    0."""
    cols = batch.cols
    if cols is not None and batch.is_numeric_insert():   # (the latter implies the former)
        return _columns_record(table, cols, lsn, tag)
    rows = batch.to_rows()       # (not kept on a batch the base may keep)
    if batch.sign_array is not None:
        n_del = int((batch.sign_array < 0).sum())
    else:
        n_del = sum(1 for s in batch.signs if s < 0)
    return _rows_record(table, rows[n_del:], rows[:n_del], lsn, tag)


def _tags_of(batches: Sequence[Batch], tags: Sequence[int] | None, tagged: bool,
             where: Path) -> Sequence[int]:
    """Each batch's tag (0: none), checked: one per batch, each an int 0 .. 2**64-1,
    and all 0 unless the log they go to (in directory ``where``) is ``tagged``."""
    if tags is None:
        return [0] * len(batches)
    if len(tags) != len(batches) or not all(type(t) is int and 0 <= t < 1 << 64 for t in tags):
        raise StorageError(f"{len(tags)} tag(s) for {len(batches)} batch(es), each an int "
                           "from 0 (untagged) to 2**64-1")
    if any(tags) and not tagged:
        raise StorageError(f"data directory {str(where)!r}: its log is not tagged "
                           "(version 1): it cannot hold the writes' tags")
    return tags


class Storage:
    """The durable state of one data directory; one per directory, enforced
    with a lock file so two processes never append to the same log.

    Opening recovers the directory at once (cutting a torn log tail), so
    :meth:`log_batch` (or :meth:`append`) can follow immediately;
    :meth:`load` hands over what was found. All methods are safe to call from
    several threads.

    ``sync=False`` skips every fsync: for tests and benchmarks only, as a
    crash of the machine can then lose acknowledged batches.

    ``tagged=True``: the logs it creates are tagged (version 2, log.py), so a batch
    may be logged with its write's tag (:meth:`log_batches`, :meth:`reset`), handed
    back by :meth:`load` (:attr:`Recovered.tags`). A log of either version opens.

    ``should_snapshot`` turns true once the log reaches ``snapshot_max_bytes``,
    or once it is bigger than both the last snapshot and
    ``snapshot_min_bytes``: past that point replaying the log at restart
    costs more than reading a fresh snapshot would.
    """

    _lsn: int                  # set by _open
    _gen: int                  # set by _read_state

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        sync: bool = True,
        snapshot_min_bytes: int = 4 << 20,
        snapshot_max_bytes: int = 64 << 20,
        split_at: int | None = None,
        tagged: bool = False,
        _inspect: bool = False,
    ) -> None:
        """``split_at``: hand over the rows as of that batch and the batches after it
        apart (:attr:`Recovered.later`), where the directory allows it: the snapshot is
        at or before that batch, the log reaches it, and no table was dropped at or
        after it (the engine's checkpoints on disk stand for the views as of such a
        batch). ``_inspect`` (for :func:`repair`): read the directory without changing
        anything, collecting damage in ``_damage`` instead of refusing it; the
        Storage then refuses every write."""
        self._dir = Path(data_dir)
        self._sync = sync
        self._snapshot_min = snapshot_min_bytes
        self._snapshot_max = snapshot_max_bytes
        self._mutex = threading.RLock()
        self._log: LogWriter | None = None
        self._broken: str | None = None
        self._closed = False
        self._lock_fd = -1
        self._damage: list[Damage] | None = [] if _inspect else None
        self._torn: list[str] = []
        self._inspected: Recovered | None = None
        self._split_at = split_at
        #: the version of the logs this Storage creates; of the log opened: ``_log.version``
        self._version = TAGGED_LOG_VERSION if tagged else LOG_VERSION
        self._opened_version = LOG_VERSION          # (set by _replay)
        self._tags: dict[int, int] = {}             # (collected by _replay)
        #: the CRC32 of the last batch record logged (None: none since the snapshot)
        self.last_crc: int | None = None
        try:
            existed = self._dir.is_dir()
            self._dir.mkdir(parents=True, exist_ok=True)
            if not existed and sync:
                fsync_dir(self._dir.absolute().parent)  # so the directory itself survives a crash
        except OSError as exc:
            raise StorageError(f"cannot create data directory {str(self._dir)!r}: {exc.strerror or exc}") from exc
        self._lock_fd = self._take_lock()
        try:
            if _inspect:
                self._recovered: Recovered | None = None
                self._inspected = self._read_state(repair=False, inspect=True)
                self._lsn, self._catalog = self._inspected.lsn, list(self._inspected.catalog)
                self._open_report: list[str] = []
                self._broken = "opened for inspection (repair) only"
            else:
                self._recovered = self._open()
        except BaseException as exc:
            if self._log is not None:
                self._log.close()
            self._release_lock()
            self._closed = True
            if isinstance(exc, OSError):
                raise StorageError(f"cannot recover data directory {str(self._dir)!r}: {exc}") from exc
            raise

    # -- public API ---------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._dir

    @property
    def lsn(self) -> int:
        """Number of write batches applied so far (the base tables' time)."""
        return self._lsn

    @property
    def catalog(self) -> list[str]:
        return list(self._catalog)

    @property
    def generation(self) -> int:
        """The current log's generation: one more after each snapshot."""
        return self._gen

    def load(self) -> Recovered:
        """The current catalog and rows, with what recovery did at opening.

        The first call right after opening hands over what opening already
        read (and forgets it, so the rows are not kept twice); any other call
        reads the files again.
        """
        with self._mutex:
            self._check_usable(writing=False)
            rec, self._recovered = self._recovered, None
            if rec is None:
                rec = self._read_state(repair=False)
                rec.report[:0] = self._open_report
            return rec

    def append(self, table: str, inserts: Sequence[tuple], deletes: Sequence[tuple] = ()) -> int:
        """Log one write batch durably; returns its lsn (1, 2, 3, ...).

        Nothing is written if any row cannot be stored, so a rejected batch
        leaves the log as it was.
        """
        with self._mutex:
            self._check_usable(writing=True)
            lsn = self._lsn + 1
            self._write(_rows_record(table, inserts, deletes, lsn), f"batch {lsn} for table {table!r}")
            self._lsn = lsn
            return lsn

    def append_columns(self, table: str, columns: Sequence) -> int:
        """Log one insert given as columns (int64 or float64 arrays of one length, one per
        column of the table, in order) durably; returns its lsn. The arrays' bytes are
        logged as they are, not a row at a time (log.py: the columns record)."""
        with self._mutex:
            self._check_usable(writing=True)
            lsn = self._lsn + 1
            self._write(_columns_record(table, columns, lsn), f"batch {lsn} for table {table!r}")
            self._lsn = lsn
            return lsn

    def log_batch(self, table: str, batch: Batch) -> int:
        """Log one write batch that a base table accepted, durably; returns its lsn.

        ``batch`` is as :meth:`noria_py.ops.Base.prepare` makes it: deletions
        first (sign -1), then insertions (sign +1). An all-numeric insert
        (:meth:`Batch.is_numeric_insert`) is logged as a columns record, its
        arrays' bytes as they are; anything else as rows. Call it before the
        engine applies the batch, so that nothing is visible that a crash
        could lose.
        """
        return self.log_batches(table, [batch])

    def log_batches(self, table: str, batches: Sequence[Batch],
                    tags: Sequence[int] | None = None) -> int:
        """Log write batches of one table as :meth:`log_batch` does, in one write and
        one sync (a group commit); returns the last one's lsn. None is logged if one
        cannot be stored. ``tags``: each batch's write's tag (0: none), for a tagged
        Storage only."""
        with self._mutex:
            self._check_usable(writing=True)
            assert self._log is not None
            tags = _tags_of(batches, tags, self._log.version == TAGGED_LOG_VERSION, self._dir)
            lsn = self._lsn
            records = b"".join(_batch_record(table, b, lsn + 1 + i, t)
                               for i, (b, t) in enumerate(zip(batches, tags)))
            if records:
                self._write(records, f"batch {lsn + len(batches)} for table {table!r}")
            self._lsn = lsn + len(batches)
            return self._lsn

    def reset(self, table: str, rows: Iterable[tuple], lsn: int, batches: Sequence[Batch],
              tags: Sequence[int] | None = None) -> None:
        """Make the directory hold one table, ``rows`` as of batch ``lsn``, then
        ``batches`` (lsn + 1, ...; ``tags``: theirs, as :meth:`log_batches` takes them,
        for a tagged Storage only): a log that starts anew or was trimmed
        (``runtime/cluster/writes.py: DiskLogs``). Crash-safe in three steps: the next
        log, with the batches, is put in place whole (a crash now leaves one log more
        than the snapshot names, an unfinished reset that opening deletes: the
        directory stands as before it), then the snapshot (covering the current log),
        then the current log is deleted."""
        with self._mutex:
            self._check_usable(writing=True)
            assert self._log is not None
            path = self._dir / _wal_name(self._gen + 1)
            tags = _tags_of(batches, tags, self._version == TAGGED_LOG_VERSION, self._dir)
            try:
                records = [encode_log_header(self._gen + 1, lsn, self._version)]
                records += [_batch_record(table, b, lsn + 1 + i, t)
                            for i, (b, t) in enumerate(zip(batches, tags))]
                size = atomic_write(path, records, sync=self._sync)
                self._snapshot_bytes = write_snapshot(self._dir / SNAPSHOT_NAME, self._gen, lsn,
                                                      {table: rows}, sync=self._sync)
            except codec.EncodeError as exc:
                raise StorageError(f"cannot reset the log of {table!r}: {exc}") from exc
            except OSError as exc:
                self._broken = f"a reset of the log failed: {exc}"
                raise StorageError(f"data directory {str(self._dir)!r}: {self._broken}") from exc
            old = self._log
            self._log = LogWriter(path, size, sync=self._sync, version=self._version)
            self._gen, self._lsn, self.last_crc = self._gen + 1, lsn + len(batches), None
            self._recovered = None
            self._retire(old)

    def drop_table(self, name: str) -> None:
        """Log that ``name`` was dropped, so a table created later under the
        same name starts empty instead of inheriting the old rows at replay."""
        if type(name) is not str:
            raise StorageError(f"table name must be a str, not {type(name).__name__}")
        with self._mutex:
            self._check_usable(writing=True)
            self._write(frame(codec.packb((DROP, self._lsn, name))), f"drop of table {name!r}")

    def record_ddl(self, statement: str) -> None:
        """Add one CREATE statement to the end of the persisted catalog."""
        with self._mutex:
            self.set_catalog([*self._catalog, statement])

    def set_catalog(self, statements: list[str]) -> None:
        """Replace the persisted catalog atomically (used for DROP too)."""
        statements = list(statements)
        for s in statements:
            if type(s) is not str:
                raise StorageError(f"catalog entries must be str, not {type(s).__name__}")
        data = json.dumps({"version": CATALOG_VERSION, "statements": statements}, indent=1).encode()
        with self._mutex:
            self._check_usable(writing=True)
            try:
                atomic_write(self._dir / CATALOG_NAME, [data], sync=self._sync)
            except OSError as exc:
                raise StorageError(f"cannot write the catalog in {str(self._dir)!r}: {exc}") from exc
            self._catalog = statements
            self._recovered = None

    def snapshot(self, tables: Mapping[str, Iterable[tuple | ColumnChunk]]) -> None:
        """Write every base table's rows and start a new, empty log.

        ``tables`` must be the state after exactly the batches logged so far
        (lsn :attr:`lsn`) and must include every live table; tables left out
        are gone after a restart. The old log is deleted only once the
        snapshot is durable, and recovery copes with a crash at any step.
        """
        with self._mutex:
            self._check_usable(writing=True)
            assert self._log is not None
            old = self._log
            try:
                size = write_snapshot(self._dir / SNAPSHOT_NAME, self._gen, self._lsn, tables, sync=self._sync)
            except codec.EncodeError as exc:
                raise StorageError(f"cannot write a snapshot: {exc}") from exc
            except OSError as exc:
                raise StorageError(f"cannot write a snapshot in {str(self._dir)!r}: {exc}") from exc
            self._recovered = None
            # The snapshot is durable from here on; what follows only tidies.
            # Until the new log exists, appending to the old one would put
            # batches into a generation that recovery skips, so a failure now
            # stops all writes.
            self._snapshot_bytes = size
            try:
                new = LogWriter.create(self._dir / _wal_name(self._gen + 1), self._gen + 1, self._lsn,
                                       sync=self._sync, version=self._version)
            except OSError as exc:
                self._broken = f"could not start a new log after a snapshot: {exc}"
                raise StorageError(f"data directory {str(self._dir)!r}: {self._broken}") from exc
            self._log, self._gen = new, self._gen + 1
            self.last_crc = None
            self._retire(old)

    def _retire(self, old: LogWriter) -> None:
        """Close and delete a log the snapshot now covers."""
        old.close()
        try:
            os.unlink(old.path)
            if self._sync:
                fsync_dir(self._dir)
        except OSError:
            pass  # a leftover old log is deleted at the next start

    def should_snapshot(self) -> bool:
        """Whether the log has grown enough that a snapshot is worth taking."""
        log = self._log
        if log is None:
            return False
        size = log.size - LOG_HEADER_SIZE
        return size >= self._snapshot_max or size > max(self._snapshot_min, self._snapshot_bytes)

    def maybe_snapshot(self, tables: Callable[[], Mapping[str, Iterable[tuple | ColumnChunk]]]) -> bool:
        """Take a snapshot if :meth:`should_snapshot` says it is due; returns
        whether one was taken.

        ``tables`` is called only then, and must return what :meth:`snapshot`
        takes: every live base table's rows as of the batches logged so far
        (every copy of a duplicated row; a table kept as columns may hand over
        :class:`~noria_py.columns.ColumnChunk` objects among its rows). Call it
        after the engine applied the last logged batch, so that the rows match
        the log.
        """
        if not self.should_snapshot():
            return False
        self.snapshot(tables())
        return True

    def log_bytes(self) -> int:
        """Size of the current log's records, for monitoring."""
        log = self._log
        return 0 if log is None else log.size - LOG_HEADER_SIZE

    def close(self) -> None:
        """Release the directory. Every acknowledged batch is already on disk,
        so there is nothing to flush."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._recovered = None
            if self._log is not None:
                self._log.close()
                self._log = None
            self._release_lock()

    def __del__(self) -> None:
        # A forgotten Storage must not keep the directory locked for the rest
        # of the process; every batch is already synced, so closing is safe.
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    def __enter__(self) -> "Storage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"lsn={self._lsn}"
        return f"Storage({str(self._dir)!r}, {state})"

    # -- internals ------------------------------------------------------------

    def _take_lock(self) -> int:
        path = self._dir / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open lock file {str(path)!r}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            try:
                pid = os.pread(fd, 32, 0).decode().strip()
                if pid:
                    holder = f" (held by process {pid})"
            except (OSError, UnicodeDecodeError):
                pass
            os.close(fd)
            raise StorageError(
                f"data directory {str(self._dir)!r} is already in use by another connection{holder}; "
                f"only one process may open it at a time"
            ) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is only a hint for the error message above
        return fd

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def _check_usable(self, writing: bool) -> None:
        if self._closed:
            raise StorageError(f"storage for {str(self._dir)!r} is closed")
        if writing and self._broken is not None:
            raise StorageError(f"data directory {str(self._dir)!r} refuses writes: {self._broken}")

    def _write(self, record: bytes, what: str) -> None:
        assert self._log is not None
        self._recovered = None
        try:
            self._log.append(record)
        except OSError as exc:
            if getattr(exc, "broken", False):
                self._broken = f"a failed write could not be undone ({exc})"
            raise StorageError(f"could not log {what} in {str(self._dir)!r}: {exc}") from exc
        if what.startswith("batch"):
            self.last_crc = RECORD_HEADER.unpack_from(record)[1]

    def _open(self) -> Recovered:
        """Recover the directory, leaving it clean for appending."""
        rec = self._read_state(repair=True)
        self._open_report = list(rec.report)
        self._lsn = rec.lsn
        self._catalog = list(rec.catalog)
        path = self._dir / _wal_name(self._gen)
        try:
            if path.exists():
                self._log = LogWriter(path, path.stat().st_size, sync=self._sync,
                                      version=self._opened_version)
            else:
                self._log = LogWriter.create(path, self._gen, self._lsn, sync=self._sync,
                                             version=self._version)
        except OSError as exc:
            raise StorageError(f"cannot open the log {str(path)!r}: {exc}") from exc
        for g in self._covered:
            (self._dir / _wal_name(g)).unlink(missing_ok=True)
            note = f"{_wal_name(g)}: deleted, already covered by the snapshot (a snapshot was interrupted)"
            rec.report.insert(0, note)
            self._open_report.insert(0, note)
        return rec

    def _read_catalog(self) -> list[str]:
        path = self._dir / CATALOG_NAME
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            doc = json.loads(raw)
            statements = doc["statements"]
            if doc.get("version") != CATALOG_VERSION or not all(type(s) is str for s in statements):
                raise ValueError("unexpected contents")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Written by atomic rename, so damage here is not a crash artefact;
            # guessing a schema would be worse than stopping.
            raise StorageError(f"catalog {str(path)!r} is damaged ({exc}); restore it from a backup") from None
        return list(statements)

    def _read_state(self, repair: bool, inspect: bool = False) -> Recovered:
        """Read catalog, snapshot and log. With ``repair``, also delete what
        an interrupted operation left behind and cut a torn log tail; without
        it, the files are assumed clean (they were repaired at opening), unless
        ``inspect`` (for :func:`repair`): then nothing is changed, a torn tail is
        noted in ``_torn`` and damage in ``_damage``, and what comes before it is
        read."""
        report: list[str] = []
        d = self._dir
        if repair:
            for tmp in sorted(d.glob("*.tmp")):
                tmp.unlink(missing_ok=True)
                report.append(f"{tmp.name}: removed an unfinished file left by an interrupted write")
        catalog_exists = (d / CATALOG_NAME).exists()
        catalog = self._read_catalog()
        try:
            snap = read_snapshot(d / SNAPSHOT_NAME)
        except (SnapshotError, OSError) as exc:
            raise StorageError(
                f"data directory {str(d)!r}: the snapshot is unreadable: {exc}; it is replaced atomically, "
                f"so this is damage to the disk or the file, not a crash; restore the directory from a backup"
            ) from None
        snap_gen, lsn = (snap.gen, snap.lsn) if snap is not None else (0, 0)
        start = lsn
        self._snapshot_bytes = (d / SNAPSHOT_NAME).stat().st_size if snap is not None else 0
        tables: dict[str, _Rows] = {name: _Rows(rows) for name, rows in snap.tables.items()} if snap else {}

        gens = sorted(int(m.group(1)) for p in d.iterdir() if (m := _WAL_RE.fullmatch(p.name)))
        # logs the snapshot covers (a snapshot was interrupted): _open deletes them
        # once the next log exists, so that a log is never missing
        self._covered = [g for g in gens if g <= snap_gen]
        later = [g for g in gens if g > snap_gen]
        if later == [snap_gen + 1, snap_gen + 2]:
            # a reset put its log in place and was cut short before its snapshot
            # (``reset``): it never took effect, its caller acknowledged nothing of it
            if repair and not inspect:
                (d / _wal_name(snap_gen + 2)).unlink(missing_ok=True)
                report.append(f"{_wal_name(snap_gen + 2)}: deleted, the log of a reset "
                              f"interrupted before its snapshot")
            later = later[:1]
        if later and later != [snap_gen + 1]:
            raise StorageError(
                f"data directory {str(d)!r}: unexpected log files {[_wal_name(g) for g in later]} "
                f"(expected only {_wal_name(snap_gen + 1)}); they were not written by this storage layer"
            )
        self._gen = snap_gen + 1
        # (split only at opening, and only where the snapshot is at or before the batch)
        split = self._split_at if repair and not inspect else None
        if split is not None and split < lsn:
            split = None
        held: list[tuple] | None = [] if split is not None else None
        self._split_crc: int | None = None
        self._tags = {}
        if later:
            lsn = self._replay(d / _wal_name(self._gen), snap_gen + 1, lsn, tables, report, repair, inspect,
                               split, held)
        elif (snap is not None and snap_gen not in gens) or (snap is None and catalog_exists and catalog):
            # A log is created (by rename, synced) before anything can be written
            # that refers to it: opening creates it before the first CREATE TABLE,
            # a snapshot before it deletes the log it covers. Only a new
            # directory, or a snapshot interrupted before its new log (the old
            # log still there), has none.
            self._damaged(Damage(
                d / _wal_name(self._gen), 0, "the log is missing", 0,
                evidence=(f"snapshot.bin covers batches up to {lsn} and its next log is gone"
                          if snap is not None else "catalog.json lists tables, so a log was created before them")
                + "; the writes it held are unknown", kept_lsn=lsn, missing=True))

        after: list[tuple[str, tuple, tuple]] | None = None
        if held is not None:
            if split is not None and split <= lsn and all(rec[0] != DROP for rec in held):
                after = [_batch_rows(rec) for rec in held]
            else:               # not splittable there: every batch goes into the rows
                for rec in held:
                    _apply(tables, rec)
        out: dict[str, list[tuple]] = {}
        for name, rows in tables.items():
            out[name] = rows.result()
            if rows.unmatched:
                report.append(f"table {name!r}: {rows.unmatched} deleted row(s) matched no stored row and were ignored")
        return Recovered(catalog=catalog, tables=out, lsn=lsn, report=report, later=after,
                         split_crc=self._split_crc if after is not None else None,
                         split_lsn=split if after is not None else None, tags=self._tags,
                         start=start)

    def _damaged(self, damage: Damage) -> None:
        """Refuse to open, or (inspecting for :func:`repair`) note the damage."""
        if self._damage is None:
            raise damage.error(self._dir)
        self._damage.append(damage)

    def _replay(
        self, path: Path, gen: int, lsn: int, tables: dict[str, _Rows], report: list[str], repair: bool,
        inspect: bool = False, split: int | None = None, held: list[tuple] | None = None,
    ) -> int:
        """Apply the log's records to ``tables``; returns the last batch's lsn. With
        ``split``, the records after batch ``split`` (a drop: at or after it) go to
        ``held`` instead, and the CRC of batch ``split``'s record to ``_split_crc``."""
        buf = path.read_bytes()
        if len(buf) < LOG_HEADER_SIZE:
            # Logs are created by rename after their header is synced, so a
            # short one is damage (or a file system that does not keep rename
            # ordering), never a torn append: the records it held are unknown.
            self._damaged(Damage(path, 0, f"the file is {len(buf)} bytes, shorter than its "
                                 f"{LOG_HEADER_SIZE}-byte header", len(buf), kept_lsn=lsn))
            return lsn
        try:
            header = decode_log_header(buf)
        except HeaderError as exc:
            self._damaged(self._dropping(path, buf, 0, f"bad header: {exc}", "", lsn))
            return lsn
        self._opened_version = header.version
        tagged = header.version == TAGGED_LOG_VERSION
        if header.gen != gen or header.base_lsn != lsn:
            self._damaged(self._dropping(
                path, buf, 0, f"the header says generation {header.gen} starting after batch "
                f"{header.base_lsn}, expected generation {gen} after batch {lsn}", "the directory mixes files "
                "from different states", lsn))
            return lsn
        scanner = FrameScanner(buf, LOG_HEADER_SIZE)
        problem: str | None = None
        end = LOG_HEADER_SIZE
        checksum_ok = False
        for fr in scanner:
            try:
                rec = codec.unpackb(fr.payload)
            except codec.DecodeError as exc:
                problem, end, checksum_ok = str(exc), fr.start, True
                break
            why = _valid_record(rec, lsn, tagged)
            if why is not None:
                problem, end, checksum_ok = why, fr.start, True
                break
            if len(rec) == 6:
                self._tags[rec[1]] = rec[5]
            if held is not None and (rec[1] > cast(int, split) or rec[1] == split and rec[0] == DROP):
                held.append(rec)
            else:
                _apply(tables, rec)
                if rec[1] == split and rec[0] != DROP:
                    self._split_crc = RECORD_HEADER.unpack_from(buf, fr.start)[1]
            if rec[0] != DROP:
                lsn = rec[1]
                self.last_crc = RECORD_HEADER.unpack_from(buf, fr.start)[1]
            end = fr.end
        else:
            problem, end = scanner.problem, scanner.end
        if problem is None:
            return lsn
        evidence = classify_bad_record(buf, end, _accept_any_record, checksum_ok)
        if evidence is not None:
            why = ("its checksum matches, so it is not a torn write" if checksum_ok and evidence == end
                   else f"a valid record follows at byte {evidence}" if _plausible_at(buf, evidence)
                   else f"non-zero bytes follow it at byte {evidence}")
            self._damaged(self._dropping(path, buf, end, problem, why, lsn))
            return lsn
        # A torn tail: the last append was cut short by a crash, and was never
        # acknowledged (LogWriter.append syncs before it returns).
        dropped = len(buf) - end
        note = (
            f"{path.name}: torn tail at byte {end} ({problem}): {dropped} byte(s) of an unfinished last "
            f"write dropped; recovered up to batch {lsn}"
        )
        if inspect:
            self._torn.append(note)
            return lsn
        if not repair:
            raise StorageError(f"log changed on disk while open: {note}")
        keep = path.with_name(f"{path.name}.dropped-{end}")
        try:
            atomic_write(keep, [buf[end:]], sync=self._sync)
            note += f" (the dropped bytes are kept in {keep.name})"
        except OSError:
            pass
        cut = end          # the bad record's start: everything before it is good
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, cut)
                if self._sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(f"{str(path)!r}: could not cut the torn tail: {exc}") from exc
        report.append(note)
        return lsn

    def _dropping(self, path: Path, buf: bytes, start: int, problem: str, evidence: str, lsn: int) -> Damage:
        """The damage from ``start`` to the end of ``path``, with a count of the
        valid-looking records in it (which dropping it loses)."""
        dropped: dict[str, list[int]] = {}
        pos: int | None = next_record(buf, max(start + 1, LOG_HEADER_SIZE), _accept_any_record)
        while pos is not None:
            scanner = FrameScanner(buf, pos)
            stop = pos
            for fr in scanner:
                try:
                    rec = codec.unpackb(fr.payload)
                except codec.DecodeError:
                    break
                if type(rec) is not tuple or len(rec) < 3 or type(rec[2]) is not str:
                    break
                counts = dropped.setdefault(rec[2], [0, 0, 0])
                counts[0] += 1
                if rec[0] == BATCH and len(rec) in (5, 6):
                    counts[1] += len(rec[3]) if type(rec[3]) is tuple else 0
                    counts[2] += len(rec[4]) if type(rec[4]) is tuple else 0
                elif rec[0] == COLUMNS and len(rec) in (5, 6) and type(rec[3]) is int:
                    counts[1] += rec[3]
                stop = fr.end
            else:
                stop = scanner.end
            pos = next_record(buf, stop + 1, _accept_any_record)
        return Damage(path, start, problem, len(buf) - start, evidence, dropped, kept_lsn=lsn)


def _apply(tables: dict[str, _Rows], rec: tuple) -> None:
    """One checked log record applied to the rows being replayed."""
    if rec[0] == DROP:
        tables.pop(rec[2], None)
        return
    table, ins, dels = _batch_rows(rec)
    rows = tables.get(table)
    if rows is None:
        rows = tables[table] = _Rows()
    rows.insert(ins)
    rows.delete(dels)


def _batch_rows(rec: tuple) -> tuple[str, tuple, tuple]:
    """(table, inserts, deletes) of a checked batch or columns record."""
    if rec[0] == BATCH:
        return rec[2], rec[3], rec[4]
    return rec[2], tuple(cast("list[tuple]", codec.unpack_columns(rec[3], rec[4]))), ()


def _plausible_at(buf: bytes, pos: int) -> bool:
    return next_record(buf, pos, _accept_any_record) == pos


@dataclass
class RepairPlan:
    """What :func:`repair` found and (with ``apply``) did."""

    data_dir: Path
    damage: list[Damage] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    #: per table whose stored rows the catalog does not accept: (table, rows, rows dropped, why)
    catalog: list[tuple[str, int, int, str]] = field(default_factory=list)
    applied: bool = False
    backups: list[str] = field(default_factory=list)
    lsn: int = 0
    #: the directory holds the views' checkpoints, which dropping damage drops too
    checkpoints: bool = False

    @property
    def needed(self) -> bool:
        return bool(self.damage or self.catalog)

    def lines(self) -> list[str]:
        out = []
        verb = "dropped" if self.applied else "would drop"
        for dmg in self.damage:
            out.append(f"{verb}: {dmg.describe()}")
        for table, n, k, why in self.catalog:
            out.append(f"{verb}: table {table!r}: {k} of its {n} row(s): {why}")
        if self.needed and self.checkpoints:
            out.append(f"{'deleted' if self.applied else 'would delete'}: {CHECKPOINTS_DIR}/, the "
                       "views' checkpoints (they stand for batches the repair renumbers; the "
                       "views are recomputed from the tables at the next opening)")
        for note in self.torn:
            out.append(f"not damage: {note} (opening does this by itself)")
        if not self.needed:
            out.append(f"{self.data_dir}: nothing to repair")
        elif self.applied:
            out.append(f"{self.data_dir}: repaired; the data now stands at batch {self.lsn}; "
                       f"backups: {', '.join(self.backups) or 'none'}")
        else:
            out.append(f"{self.data_dir}: nothing changed; run again with --yes to drop the above "
                       f"(a copy of each file changed is kept beside it, *.damaged-<time>)")
        return out


def repair(
    data_dir: str | os.PathLike[str],
    *,
    apply: bool = False,
    check: Callable[[list[str], dict[str, list[tuple]]], dict[str, tuple[list[tuple], str]]] | None = None,
    sync: bool = True,
) -> RepairPlan:
    """Find the damage that opening ``data_dir`` refuses and say what dropping it
    would lose; with ``apply``, drop it.

    Without ``apply`` nothing in the directory changes. ``check`` (the engine's
    ``noria_py.client.catalog_problems``) takes the catalog and the rows that
    would be kept, and returns, for each table whose rows the catalog does not
    accept, the rows to keep and why. With ``apply`` and something to drop, each
    log and snapshot is first copied beside itself (``NAME.damaged-<time>``),
    then the kept rows are written as a new snapshot (covering the damaged log)
    with a new, empty log after it, so that a crash during the repair leaves
    either the old directory or the repaired one. A damaged snapshot or
    catalog.json is not repaired here (they are replaced atomically, so damage
    to them is the disk's): restore them from a backup."""
    d = Path(data_dir)
    if not d.is_dir():
        raise StorageError(f"no data directory {str(d)!r}")
    plan = RepairPlan(d)
    st = Storage(d, sync=sync, _inspect=True)
    try:
        rec = st._inspected
        assert rec is not None and st._damage is not None
        plan.damage, plan.torn, plan.lsn = list(st._damage), list(st._torn), rec.lsn
        plan.checkpoints = (d / CHECKPOINTS_DIR).exists()
        tables = rec.tables
        if check is not None:
            for name, (kept, why) in sorted(check(rec.catalog, tables).items()):
                plan.catalog.append((name, len(tables[name]), len(tables[name]) - len(kept), why))
                tables[name] = kept
        if not apply or not plan.needed:
            return plan
        stamp = time.strftime("%Y%m%dT%H%M%S")
        gen = st._gen
        # first: checkpoints of batches that the new snapshot may renumber must not
        # outlive it (a crash after this opens without them, recomputing the views)
        shutil.rmtree(d / CHECKPOINTS_DIR, ignore_errors=True)
        if sync:
            fsync_dir(d)
        for p in sorted(d.iterdir()):
            if _WAL_RE.fullmatch(p.name) or p.name == SNAPSHOT_NAME:
                backup = p.with_name(f"{p.name}.damaged-{stamp}")
                shutil.copy2(p, backup)
                plan.backups.append(backup.name)
        for tmp in d.glob("*.tmp"):
            tmp.unlink()
        write_snapshot(d / SNAPSHOT_NAME, gen, rec.lsn, {t: r for t, r in tables.items() if r}, sync=sync)
        LogWriter.create(d / _wal_name(gen + 1), gen + 1, rec.lsn, sync=sync).close()
        for p in d.iterdir():
            m = _WAL_RE.fullmatch(p.name)
            if m and int(m.group(1)) <= gen:
                p.unlink()
        if sync:
            fsync_dir(d)
        plan.applied = True
        return plan
    except OSError as exc:
        raise StorageError(f"cannot repair data directory {str(d)!r}: {exc}") from exc
    finally:
        st.close()
