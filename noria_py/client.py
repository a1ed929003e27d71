"""The Python API: ``connect()``, and the Database, Table and View handles.

This layer is thin: it parses SQL with the front end, asks the planner for nodes, and
hands validated writes to the runtime. Reads go straight to reader nodes.

Threads: an embedded database may be shared by threads. Every call on a ``Database`` and
on its ``Table`` and ``View`` handles holds the database's lock (``_DatabaseLock``, an
``RLock``), so calls are atomic with respect to one another: a write has reached every
view when the lock is released (without ``seed``), a read never sees a batch half
applied, and ``wait()`` returns once every write accepted before it, from any thread,
is reflected. The reads of a view (``View.lookup``, ``lookup_many`` and ``all``) take
the lock only when a write ran during the read (the lock's version says so: a
seqlock), and read on while a tree-clock recovery that changes no reader holds it
(``Database._reads_open``); a partial view's ``all`` and its holes take the lock.
Python runs one thread's bytecode at a time anyway, so taking turns costs little (docs/reliability.md,
"Threads"). A database over another runtime (the cluster controller's) is serialized by
that runtime's server instead, whose reads go to the workers without a lock.
"""
from __future__ import annotations

import datetime
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar, cast, overload

import sql_frontend
from sql_frontend import plan as lp
from sql_frontend.expr import Col
from sql_frontend.types import SqlType, TableSchema

from . import arguments, regimes, tuning
from .arrowio import arrow_columns, as_arrow_table, column_rows, is_frame
from .batch import Batch
from .dbapi import Cursor
from .divzero import DIV0
from .errors import (
    AlreadyExistsError,
    ArgumentError,
    ArityError,
    ClosedError,
    CorruptionError,
    DependentViewsError,
    DivisionByZeroError,
    Error,
    NotSupportedError,
    ProgrammingError,
    RecoveryError,
    RowNotFoundError,
    TypeMismatchError,
    UnknownNodeError,
    UnknownTableError,
    UnknownViewError,
)
from .expression import compile_row, evaluate_constant
from .graph import Graph
from .hashing import shard_of
from .nan import canon_row
from .ops import Base, Reader
from .ordering import order_key
from .partial import Partial
from .planner import Planner, initialize
from .recovery import RecoveryReport, causal, coordinated, falkirk, lineage, spark, treeclock
from .recovery import uncoordinated as uncoordinated_recovery
from .remote import connect_url
from .result import Result, ViewFrames
from .runtime import checkpoints as ck_mod
from .runtime import ondisk
from .runtime.causal import CausalRuntime
from .runtime.coordinated import CoordinatedRuntime
from .runtime.embedded import EmbeddedRuntime
from .runtime.falkirk import FalkirkRuntime
from .runtime.uncoordinated import CICRuntime, UncoordinatedRuntime
from .storage import Storage
from .subscribe import Change, Subscription, buffer_size

log = logging.getLogger("noria_py")

_F = TypeVar("_F", bound=Callable[..., Any])
_R = TypeVar("_R")


class _DatabaseLock:
    """The database's lock (an ``RLock``) with a version, a seqlock's: odd while some
    thread holds the lock, bumped on the outermost acquire and release. A ``lookup``
    reads without the lock and keeps its answer only if the version was even before
    and unchanged after, so no write ran meanwhile; otherwise it reads again holding
    the lock. Taking the lock on every lookup cost about 22% of a process doing 2M of
    them; this, 8% (docs/reliability.md, "Threads")."""

    __slots__ = ("_rlock", "_depth", "version", "reads_open")

    def __init__(self) -> None:
        self._rlock = threading.RLock()
        self._depth = 0
        self.version = 0
        #: set by the holder (``open_reads``) while it changes no reader: lookups then
        #: read without waiting for it
        self.reads_open = False

    def __enter__(self) -> None:
        self._rlock.acquire()
        if not self._depth:
            self.version += 1
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self.version += 1
        self._rlock.release()

    @contextmanager
    def open_reads(self) -> Iterator[None]:
        """Held by this thread: let lookups read meanwhile, as if the lock were free.
        The holder promises to change no reader inside the block (a recovery that
        restores a node above the readers: ``Database._reads_open``). Leaving bumps the
        version by two (it stays odd), so a lookup that straddles the end reads again
        under the lock; a lookup that began before the block took the lock path then."""
        self.reads_open = True
        try:
            yield
        finally:
            self.reads_open = False
            self.version += 2


class _Unlocked:
    """A database over another runtime: its owner serializes the calls (module docstring)."""

    version = 0
    reads_open = False

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


def _serialized(method: _F) -> _F:
    """The method runs holding its database's lock (``self._lock``): see the module
    docstring."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return locked  # type: ignore[return-value]


@dataclass
class _TableEntry:
    schema: TableSchema
    node: str
    sql: str
    dropped: bool = False           # its Table handles refuse every call


@dataclass
class _ViewEntry:
    name: str
    query: lp.Query
    readers: list[str]
    sql: str
    anonymous: bool = False
    handle: "View | None" = field(default=None, repr=False)
    last_used: float = 0.0          # (an ad-hoc query's view) time.monotonic() of its last read
    pins: int = 0                   # reads under way outside the lock (the cluster server's)
    reads: tuple[str, ...] = ()     # the views it reads (lp.CreateView.reads)


class _Catalog:
    """The front end's view of this database's tables and views."""

    def __init__(self, db: "Database") -> None:
        self.db = db

    def table(self, name: str) -> TableSchema | None:
        t = self.db._tables.get(name.lower())
        return t.schema if t else None

    def view(self, name: str) -> lp.Query | None:
        v = self.db._views.get(name.lower())
        return v.query if v else None


class Database:
    """One embedded noria-py engine. Create it with ``noria_py.connect()``."""

    def __init__(self, data_dir: str | None = None, shards: int = 1, seed: int | None = None,
                 clocks: bool | None = None, runtime=None, checkpoints: bool | None = None,
                 partial: bool = False, memory_limit: int | None = None,
                 regime: str | dict[str, str] = "treeclock", barrier_every: int | None = None,
                 barrier_seconds: float | None = None, determinant_depth: int | None = None,
                 standby: bool = False) -> None:
        """``runtime`` (with a ``graph`` of its own) replaces the embedded one: the cluster
        controller runs this class over its ``ClusterRuntime``. ``checkpoints``: stateful
        nodes checkpoint their state (with clocks; docs/recovery.md). ``partial``: the
        readers of parameterized views hold only the keys read, ``memory_limit`` bytes
        of them at most (noria_py/partial.py, docs/partial.md; in every regime, a partial
        node coming back from any recovery all holes). ``regime``: the
        fault-tolerance regime (noria_py/regimes.py, docs/regimes.md); ``clocks`` and
        ``checkpoints`` default to its own (on for treeclock, off otherwise);
        ``barrier_every`` (writes) and ``barrier_seconds``: how often the coordinated
        regime starts an epoch of barrier checkpoints. ``determinant_depth`` (edges; None:
        all) and ``standby``: the causal regime's determinant sharing depth and warm
        standbys (docs/regimes.md). A dict for ``regime`` is falkirk's per-node choice of
        policies (``{"default": "lazy", "votes": "eager", ...}``)."""
        choice = regimes.policies(regime)
        regime = regimes.check(regime)
        regimes.check_causal(regime, determinant_depth, standby,
                             "connect(regime='causal', ...)")
        if regime != "coordinated" and (barrier_every is not None or barrier_seconds is not None):
            raise ArgumentError("barrier_every and barrier_seconds set how often the "
                                "coordinated regime checkpoints; connect(regime='coordinated', ...)")
        if barrier_every is not None and (type(barrier_every) is not int or barrier_every < 1):
            raise ArgumentError(f"barrier_every must be a number of writes (an int, 1 or "
                                f"more), got {barrier_every!r}")
        if barrier_seconds is not None and (not isinstance(barrier_seconds, (int, float))
                                            or isinstance(barrier_seconds, bool)
                                            or not barrier_seconds > 0):
            raise ArgumentError(f"barrier_seconds must be a number of seconds above 0, "
                                f"got {barrier_seconds!r}")
        if regime != "treeclock":
            if clocks or checkpoints:
                raise ArgumentError(f"regime {regime!r} keeps no tree clocks or local "
                                    "checkpoints; clocks= and checkpoints= go with "
                                    "regime='treeclock'")
        clocks = regime == "treeclock" if clocks is None else clocks
        checkpoints = regime == "treeclock" if checkpoints is None else checkpoints
        #: the fault-tolerance regime (docs/regimes.md)
        self.regime = regime
        if shards < 1:
            raise ArgumentError(f"shards must be at least 1, got {shards}")
        if type(partial) is not bool:
            raise ArgumentError(f"partial must be True or False, got {partial!r}")
        if memory_limit is not None:
            if type(memory_limit) is not int or memory_limit < 0:
                raise ArgumentError(f"memory_limit must be a number of bytes (an int, 0 or "
                                    f"more), got {memory_limit!r}")
            if not partial:
                raise ArgumentError("memory_limit bounds partial readers' state; "
                                    "connect(partial=True, memory_limit=...)")
        # (a cluster's runtime makes its own manager: runtime/cluster/partial.py)
        make_partial = getattr(runtime, "partial_manager", None)
        if partial and runtime is not None and make_partial is None:
            raise NotSupportedError("partial state is offered by the embedded engine and "
                                    "a cluster (noria-py serve --partial) only")
        self.shards = shards
        self.clocks = clocks
        #: held by every call (module docstring); a runtime given is serialized by its owner
        self._lock: _DatabaseLock | _Unlocked = _DatabaseLock() if runtime is None else _Unlocked()
        if runtime is None and regime == "coordinated":
            runtime = CoordinatedRuntime(Graph(), seed, barrier_every, barrier_seconds)
        elif runtime is None and regime == "uncoordinated":
            runtime = UncoordinatedRuntime(Graph(), seed)
        elif runtime is None and regime == "cic":
            runtime = CICRuntime(Graph(), seed)
        elif runtime is None and regime == "causal":
            runtime = CausalRuntime(Graph(), seed, determinant_depth, standby)
        elif runtime is None and regime == "falkirk":
            runtime = FalkirkRuntime(Graph(), seed, choice)
        elif runtime is None:
            runtime = EmbeddedRuntime(Graph(), seed, clocks=clocks, checkpoints=checkpoints)
        self.runtime = runtime
        self.graph_ = runtime.graph
        #: the partial readers' manager (None: every reader is full)
        self._partial: Partial | None = (
            None if not partial else make_partial(memory_limit) if make_partial is not None
            else Partial(self.graph_, runtime, memory_limit))
        self.planner = Planner(self.graph_, shards, self.runtime.add)
        self._tables: dict[str, _TableEntry] = {}
        self._views: dict[str, _ViewEntry] = {}
        self._anonymous: dict[lp.Query, str] = {}
        #: changes of the named catalog (CREATE or DROP of a table or view): a prepared
        #: statement planned before one is planned again (SQL may mean something else)
        self._generation = 0
        #: execute's prepared statements by SQL text (embedded only: the cluster
        #: server reads views its own way)
        self._prepared: OrderedDict[str, Prepared] | None = (
            OrderedDict() if isinstance(self._lock, _DatabaseLock) else None)
        self._catalog = _Catalog(self)
        self._recoveries: list[RecoveryReport] = []
        self._failed: set[str] = set()      # failed with fail(), not yet named to recover()
        self._writes = 0                    # writes accepted: a subscription's progress
        self._subscriptions: list[Subscription] = []
        self._publisher: threading.Thread | None = None   # a cluster's (``subscribe``)
        self._closed = False
        self.storage: Storage | None = None
        self.recovery_notes: list[str] = []
        #: the stateful shards' checkpoints on disk (embedded, with checkpoints, not
        #: partial; runtime/ondisk.py), and the log's size at the last cut
        self._disk: ondisk.DiskCheckpoints | None = None
        self._disk_mark = 0
        #: how the opening of the data directory filled the views: the batch the
        #: checkpoints on disk stood for (None: not used, "unused_because" says why),
        #: the views filled from them and from the tables, and the logged batches
        #: written after the checkpoints' (damage found is in ``recovery_notes``)
        self.reopened: dict[str, Any] = {"checkpoint_lsn": None, "from_checkpoints": [],
                                         "recomputed": [], "batches_replayed": 0,
                                         "unused_because": None}
        if data_dir is not None:
            self._open_storage(data_dir)

    # ------------------------------------------------------------ durability

    def _open_storage(self, data_dir: str) -> None:
        rt = self.runtime
        if (isinstance(rt, EmbeddedRuntime) and rt.store is not None
                and self._partial is None):
            self._disk = ondisk.DiskCheckpoints(Path(data_dir))
        # (read again once the directory is locked: this is where to split the log)
        hint = self._disk.read_manifest() if self._disk is not None else None
        self.storage = Storage(data_dir, split_at=hint.lsn if hint is not None else None)
        if self._disk is not None and isinstance(rt, EmbeddedRuntime) and rt.store is not None:
            rt.store.journal = {}
        try:
            self._restore(self.storage)
        except BaseException:
            self.storage.close()
            self.storage = None
            raise

    def _restore(self, storage: Storage) -> None:
        """The catalog's tables and views with the stored rows, each table's rows checked
        against its definition (a catalog lost, or edited, must not load rows unchecked).
        Where the checkpoints on disk stand for the views as of a batch of the log
        (runtime/ondisk.py says when), the tables take their rows as of that batch, the
        views their checkpoints, and the batches after it are written through them."""
        recovered = storage.load()
        disk, cut = self._disk, None
        if disk is not None:
            cut = disk.read_manifest()
            why = (None if cut is None else disk.usable(
                cut, recovered.split_lsn, recovered.split_crc, recovered.catalog, self.shards))
            if why is not None:
                self.reopened["unused_because"] = why
                cut = None
            if cut is not None:
                disk.cut_now = cut
        if recovered.later is not None and cut is None:
            recovered = storage.load()      # (read again, whole)
        if cut is not None:
            self.reopened.update(checkpoint_lsn=cut.lsn,
                                 batches_replayed=len(recovered.later or ()))
        self.recovery_notes = list(recovered.report)
        ordered = getattr(self.runtime, "adopt_catalog", None)
        if ordered is not None:
            # (a restarted cluster keeping its workers' nodes, planned in this order)
            assert sorted(ordered) == sorted(recovered.catalog)
            views = self._create_catalog_in_order(ordered)
        else:
            views = self._create_catalog_tables(recovered.catalog)
        path = storage.data_dir / "catalog.json"
        for name, rows in recovered.tables.items():
            if not rows:
                continue
            entry = self._tables.get(name.lower())      # the catalog says which tables exist
            if entry is None:
                raise CorruptionError(
                    f"{str(path)!r} does not list table {name!r}, which has {len(rows)} row(s) in the "
                    f"data (was catalog.json lost or replaced?); restore it from a backup, or run "
                    f"`noria-py repair --data-dir {storage.data_dir}` to see what dropping those rows would lose")
            self.runtime.write(entry.node, self._restored(entry, rows, path, storage.data_dir))
        # (a restarted cluster's controller keeping its workers' nodes: filled there)
        adopt = getattr(self.runtime, "adopt_view", None)
        for sql in views:
            stmt = sql_frontend.parse(sql, self._catalog)
            assert isinstance(stmt, lp.CreateView)  # the catalog holds CREATE TABLE and VIEW only
            self._create_views([stmt], persist=False,
                               restore=(functools.partial(self._from_disk, cut) if cut is not None
                                        else adopt if getattr(self.runtime, "adopting", None)
                                        is not None else None))
        for table, ins, dels in recovered.later or ():
            entry = self._tables.get(table.lower())
            if entry is None:
                raise CorruptionError(f"the log holds a write to table {table!r}, which "
                                      f"{str(path)!r} does not list")
            base: Base = self.graph_[entry.node].op
            try:
                batch = base.prepare(list(ins), list(dels))
            except Error as exc:
                raise CorruptionError(f"a logged write to table {table!r} no longer applies "
                                      f"({exc}); run `noria-py repair --data-dir "
                                      f"{storage.data_dir}`") from None
            if batch:
                self.runtime.write(entry.node, batch)
        self.runtime.wait()
        if disk is not None:
            self.recovery_notes += disk.notes
            disk.notes = []
            self._disk_mark = storage.log_bytes() if cut is not None and not recovered.later else 0

    def _from_disk(self, cut: ondisk.Cut, name: str, readers: list[str],
                   fresh: set[str]) -> tuple[set[str], set[str]]:
        """Fill the shards view ``name``'s plan just made (``fresh``; ``readers`` its
        readers) from their checkpoints in ``cut``; returns (those nodes, the stateful
        ones), or two empty sets if the view's shape or a shard's checkpoint does not
        allow it."""
        graph, disk = self.graph_, cast(ondisk.DiskCheckpoints, self._disk)
        rt = cast(EmbeddedRuntime, self.runtime)
        store = rt.store
        assert store is not None
        nodes = [n for n in ondisk.view_nodes(graph, readers) if n in fresh]
        keys = {nid: key for key, nid in disk.ids.items()}
        keys.update((nid, f"{name}/{i}") for i, nid in enumerate(nodes))
        for i, nid in enumerate(nodes):         # (the keys of later views' parents)
            disk.ids[f"{name}/{i}"] = nid
        recomputed = self.reopened["recomputed"]
        if cut.views.get(name) != ondisk.view_shape(graph, nodes, keys):
            recomputed.append(name)         # (not in them, or planned otherwise since)
            return set(), set()
        loaded: dict[str, ck_mod.Checkpoint] = {}
        # a node rebuilt from its parents (a reader or a join over stateful parents)
        # keeps no checkpoint: initialize fills it from them
        rebuilt = {nid for nid in nodes if rt.domains[nid].store is None
                   and ck_mod.rebuilt_from_parents(graph, graph[nid])}
        for i, nid in enumerate(nodes):
            op = graph[nid].op
            if not op.stateful or nid in rebuilt:
                continue
            got = disk.load(cut, f"{name}/{i}") if op.checkpoint_form is not None else None
            if got is None or got.form != op.checkpoint_form:
                recomputed.append(name)
                return set(), set()
            loaded[nid] = got
        self.reopened["from_checkpoints"].append(name)
        for nid, got in loaded.items():
            store.adopt(nid, got)
            ck_mod.load(graph[nid].op, cast(ck_mod.Checkpoint, store.latest(nid, ondisk.EVER)))
        return set(nodes) - rebuilt, set(loaded)

    def _cut(self, force: bool = False) -> None:
        """Write the stateful shards' checkpoints to disk (runtime/ondisk.py), at a
        quiet point with every node alive (else not now: the last cut stays in force),
        when due or ``force``d."""
        disk, storage = self._disk, self.storage
        if disk is None or storage is None:
            return
        if not force and storage.log_bytes() - self._disk_mark < tuning.DISK_CHECKPOINT_BYTES:
            return
        rt = cast(EmbeddedRuntime, self.runtime)
        store = rt.store
        assert store is not None
        if rt.pending() or not all(d.alive for d in rt.domains.values()):
            # not now; what the journal holds is let go (those shards are written whole
            # at the next cut), so that it does not grow while no cut can be taken
            if store.journal:
                store.rewrite.update(nid for nid, deltas in store.journal.items() if deltas)
                store.journal = {}
            return
        cut = disk.cut_now
        if (cut is not None and cut.lsn == storage.lsn and not store.rewrite
                and not any((store.journal or {}).values()) and all(
                    d.ck_messages == 0 for d in rt.domains.values() if d.store is not None)
                and cut.catalog == storage.catalog):
            self._disk_mark = storage.log_bytes()
            return                          # nothing changed since
        for d in rt.domains.values():
            if d.store is not None and (d.ck_messages or not store.has(d.id)):
                d.checkpoint()
        mine = ondisk.owned(self.graph_, [(v.name, v.readers) for v in self._views.values()
                                          if not v.anonymous])
        keys = {nid: f"{name}/{i}" for name, ids in mine.items() for i, nid in enumerate(ids)}
        views = {name: ondisk.view_shape(self.graph_, ids, keys) for name, ids in mine.items()}
        nodes: dict[str, tuple[str, str]] = {}
        for nid, key in keys.items():
            d = rt.domains[nid]
            if d.store is not None and store.has(nid):
                nodes[key] = (nid, cast(str, d.node.op.checkpoint_form))
        try:
            disk.write_cut(storage.lsn, storage.last_crc, storage.catalog, self.shards, views,
                           nodes, store)
        except (OSError, ValueError) as exc:     # (the disk, or a value it cannot encode)
            self.recovery_notes.append(f"checkpoints could not be written to disk ({exc}); "
                                       "the last ones written stay in force")
        self._disk_mark = storage.log_bytes()

    def _create_catalog_tables(self, catalog: list[str]) -> list[str]:
        """Create the tables of a stored catalog; returns its views' statements, in order
        (a view may read a view before it, so views are parsed once those exist)."""
        views = []
        for sql in catalog:
            try:
                stmt = sql_frontend.parse(sql, self._catalog)
            except UnknownTableError:       # a view over a view not created yet
                stmt = None
            if isinstance(stmt, lp.CreateTable):
                self._create_table(stmt, sql, persist=False)
            else:
                views.append(sql)
        return views

    def _create_catalog_in_order(self, catalog: list[str]) -> list[str]:
        """Create a stored catalog's tables and views in the order given (the order
        they were planned in; each reads only what comes before it), the views unfilled
        (only ``restore`` fills them: a cluster's workers hold them); returns []."""
        adopt = getattr(self.runtime, "adopt_view", None)
        for sql in catalog:
            stmt = sql_frontend.parse(sql, self._catalog)
            if isinstance(stmt, lp.CreateTable):
                self._create_table(stmt, sql, persist=False)
            else:
                assert isinstance(stmt, lp.CreateView) and adopt is not None
                self._create_views([stmt], persist=False, restore=adopt)
        return []

    def _restored(self, entry: _TableEntry, rows: list[tuple], path, data_dir) -> Batch:
        """A table's rows read back from its data directory, as its base takes a write
        (columns, for a table kept as columns); rows its definition refuses are damage."""
        try:
            return self.graph_[entry.node].op.prepare(rows)
        except Error as exc:
            raise CorruptionError(
                f"the stored rows of table {entry.schema.name!r} do not match its definition in "
                f"{str(path)!r} ({exc}); was catalog.json edited or replaced? Restore it from a "
                f"backup, or run `noria-py repair --data-dir {data_dir}` to see what dropping "
                f"those rows would lose") from None

    def _persist_catalog(self) -> None:
        if self.storage is not None:
            ddl = [t.sql for t in self._tables.values()]
            ddl += [v.sql for v in self._views.values() if not v.anonymous]
            self.storage.set_catalog(ddl)
            self._cut(force=True)

    # ------------------------------------------------------------ SQL

    @_serialized
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        """Run one SQL statement; ``?`` in it take ``params`` in order.

        A SELECT read by key (its ``?`` or constants all top-level ``col = ...``) and an
        INSERT of ``?`` values are kept, by their text, as prepared statements
        (``prepare``): running the same text again is a lookup, or a bind, with no
        parse. ``tuning.PREPARED_CACHE`` texts are kept, the least recently run dropped."""
        self._check_open()
        values = arguments.params(params)
        cache = self._prepared
        if cache is not None:
            known = cache.get(sql)
            if known is not None:
                if known.generation == self._generation:
                    cache.move_to_end(sql)
                    return known.run(values)
                del cache[sql]
        stmt, result = self._execute_parsed(sql, values)
        if cache is not None and isinstance(stmt, (lp.Select, lp.Insert)):
            self._keep_prepared(sql)
        return result

    @_serialized
    def _execute_parsed(self, sql: str, params: Sequence[Any]) -> tuple[lp.Statement, Result]:
        """``execute`` without its prepared statements (what a Prepared falls back to):
        the statement's plan and its result."""
        self._check_open()
        stmt = sql_frontend.parse(sql, self._catalog, arguments.params(params),
                                  lift_constants=True)
        return stmt, self._run(stmt, sql)

    def _keep_prepared(self, sql: str) -> None:
        """Keep ``sql`` prepared for ``execute`` if that makes its runs parse-free."""
        assert self._prepared is not None
        try:
            p = Prepared(self, sql, pin=False)
        except Error:
            return
        if p._keyed is None and p._insert is None:
            return
        self._prepared[sql] = p
        while len(self._prepared) > tuning.PREPARED_CACHE:
            self._prepared.popitem(last=False)

    @_serialized
    def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any]]) -> int:
        """Run one INSERT, DELETE or UPDATE once per parameter set; the rows it changed.
        An INSERT's rows, of all the sets, are one write: all of them, or none."""
        return self.execute_batch([(sql, p) for p in seq_of_params])

    @_serialized
    def execute_batch(self, statements: Iterable[tuple[str, Sequence[Any]]]) -> int:
        """Run INSERT, DELETE and UPDATE statements, each ``(sql, params)``; the rows
        they changed. INSERTs that all go into one table are one write: every row, or
        none. Others run in turn, each one a write of its own."""
        self._check_open()
        stmts = [(sql_frontend.parse(sql, self._catalog, arguments.params(p)), sql)
                 for sql, p in statements]
        if not stmts:
            return 0
        if not all(isinstance(st, (lp.Insert, lp.Delete, lp.Update)) for st, _ in stmts):
            raise ProgrammingError("executemany takes an INSERT, DELETE or UPDATE; "
                                   "run a query with execute")
        inserts = [st for st, _ in stmts if isinstance(st, lp.Insert)]
        if len(inserts) == len(stmts) and len({st.table.lower() for st in inserts}) == 1:
            rows = [tuple(evaluate_constant(e) for e in row) for st in inserts for row in st.rows]
            self.table(inserts[0].table).insert(rows)
            return len(rows)
        return sum(self._run(st, sql).rowcount for st, sql in stmts)

    @_serialized
    def _count_changes(self, sql: str, params: Sequence[Any]) -> int:
        """The rows an INSERT, DELETE or UPDATE would change now, without changing them."""
        stmt = self.parse(sql, params)
        if isinstance(stmt, lp.Insert):
            return len(stmt.rows)
        if isinstance(stmt, (lp.Delete, lp.Update)):
            return len(self._matching(stmt.table, stmt.where)[1])
        if isinstance(stmt, lp.InsertSelect):
            raise NotSupportedError("INSERT ... SELECT cannot be counted before it runs; "
                                    "run it outside a transaction block")
        raise ProgrammingError(f"{type(stmt).__name__} changes no rows")

    @_serialized
    def prepare(self, sql: str) -> "Prepared":
        """``sql`` parsed once, to run many times with different ``?`` values
        (``Prepared.run``); says its parameters' and columns' types before it runs.
        Raises what ``execute`` would for SQL it cannot take."""
        self._check_open()
        if not isinstance(sql, str):
            raise TypeMismatchError(f"SQL must be a str, got {type(sql).__name__}")
        return Prepared(self, sql)

    def cursor(self) -> "Cursor":
        """A DB-API 2.0 cursor (noria_py/dbapi.py) over this database."""
        self._check_open()
        return Cursor(self)

    def commit(self) -> None:
        """Nothing to do: every statement is applied (and logged) when it returns."""
        self._check_open()

    def rollback(self) -> None:
        """Refused: every statement is applied when it runs (``NotSupportedError``)."""
        raise NotSupportedError("noria-py applies each statement when it runs; there is "
                                "no transaction to roll back")

    @_serialized
    def parse(self, sql: str, params: Sequence[Any] = ()) -> lp.Statement:
        """The front end's plan of one SQL statement (a ``sql_frontend.plan`` statement),
        checked against this database's tables and views, without running it: e.g. a
        SELECT's ``query`` says which tables it reads (its ``Scan`` nodes) and whether it
        is ordered. ``params``: values for its ``?``. Raises what ``execute`` would raise
        for SQL it cannot take."""
        self._check_open()
        return sql_frontend.parse(sql, self._catalog, arguments.params(params))

    def _run(self, stmt, sql: str) -> Result:
        """One parsed statement."""
        if isinstance(stmt, lp.Select):
            return self._select(stmt)
        if isinstance(stmt, lp.Insert):
            rows = [tuple(evaluate_constant(e) for e in row) for row in stmt.rows]
            self.table(stmt.table).insert(rows)
            return Result(rowcount=len(rows))
        if isinstance(stmt, lp.InsertSelect):
            return self._insert_select(stmt)
        if isinstance(stmt, lp.NoOp):
            return Result(rowcount=0)
        if isinstance(stmt, lp.Delete):
            return self._delete(stmt)
        if isinstance(stmt, lp.Update):
            return self._update(stmt)
        if isinstance(stmt, lp.CreateTable):
            self._create_table(stmt, sql)
            return Result(rowcount=0)
        if isinstance(stmt, lp.CreateView):
            self._create_view(stmt)
            return Result(rowcount=0)
        if isinstance(stmt, lp.DropView):
            self._drop_view(stmt.name, stmt.if_exists)
            return Result(rowcount=0)
        if isinstance(stmt, lp.DropTable):
            self._drop_table(stmt.name, stmt.if_exists)
            return Result(rowcount=0)
        raise Error(f"cannot execute {type(stmt).__name__}")

    def _create_table(self, stmt: lp.CreateTable, sql: str, persist: bool = True) -> None:
        self._generation += 1
        name = stmt.schema.name.lower()
        if name in self._tables or name in self._views:
            if stmt.if_not_exists and name in self._tables:
                return
            raise AlreadyExistsError(f"a table or view named {stmt.schema.name!r} already exists")
        node = self.planner.add_table(stmt.schema)
        self.runtime.announce(("table", stmt.schema))
        self.runtime.settle(self.planner.take_fresh())
        self._tables[name] = _TableEntry(stmt.schema, node, sql)
        if persist:
            self._persist_catalog()

    def _create_view(self, stmt: lp.CreateView, persist: bool = True, anonymous: bool = False) -> "View":
        return self._create_views([stmt], persist, anonymous)[0]

    @_serialized
    def create_views(self, statements: Sequence[str | lp.CreateView], *,
                     keep_going: bool = False) -> list["View | Exception"]:
        """Create many views as one change of the graph: each is planned in turn, then
        all of them are initialized from the tables' rows in one pass, where a CREATE
        VIEW each would initialize (walking the graph) once per view.

        ``statements`` are CREATE VIEW statements, as SQL or as ``parse`` plans them;
        they read tables and views that exist already (not one another). Returns one
        ``View`` per statement, in order. At the first statement that cannot be parsed or
        planned, the views before it are created and its error is raised, as if each
        had been executed on its own; with ``keep_going`` the others are created all the
        same, and its place in the list holds the exception (a ``noria_py.Error`` for
        SQL the engine does not support, any other for a bug)."""
        self._check_open()
        return self._create_views(statements, keep_going=keep_going)

    def _create_views(self, statements: Sequence[str | lp.CreateView], persist: bool = True,
                      anonymous: bool = False, keep_going: bool = False,
                      restore: Callable[[str, list[str], set[str]],
                                        tuple[set[str], set[str]]] | None = None,
                      ) -> list:
        """``create_views``; ``anonymous`` views are the engine's own (a SELECT's, see
        ``_select_view``): not listed, not persisted, dropped with their tables.
        ``restore(name, readers, fresh)`` fills the nodes a view's plan made (``fresh``)
        from elsewhere (a reopen's checkpoints on disk) instead of from its tables,
        returning (the nodes it filled, the stateful ones among them), or two empty sets."""
        self.runtime.wait()                 # a migration starts from a quiet graph
        out: list = []
        planned: list[_ViewEntry] = []
        planned_names: set[str] = set()     # (a set: thousands of views in one call)
        failed: Exception | None = None
        for stmt in statements:
            try:
                if isinstance(stmt, str):
                    parsed = self.parse(stmt)
                    if not isinstance(parsed, lp.CreateView):
                        raise Error(f"not a CREATE VIEW statement: {type(parsed).__name__}")
                    stmt = parsed
                name = stmt.name.lower()
                if name in self._views or name in self._tables or name in planned_names:
                    raise AlreadyExistsError(
                        f"a table or view named {stmt.name!r} already exists")
                readers = self.planner.add_view(name, stmt.query)
            except Exception as err:        # noqa: BLE001 - raised below or handed back
                if not keep_going:
                    failed = err
                    break
                out.append(err)
                continue
            self.runtime.announce(("view", name, stmt.query))
            planned.append(_ViewEntry(name, stmt.query, readers, stmt.sql, anonymous,
                                      reads=stmt.reads))
            planned_names.add(name)
            out.append(planned[-1])
        if planned:
            fresh = self.planner.take_fresh()
            if self._partial is not None:
                self._partial.recheck()     # (a shared partial operator becomes full)
                for entry in planned:
                    for r in entry.readers:
                        self._partial.install(r, fresh)
            filled: set[str] = set()
            adopted: set[str] = set()
            if restore is not None:
                for entry in planned:
                    nodes, stateful = restore(entry.name, entry.readers, fresh)
                    filled |= nodes
                    adopted |= stateful
            try:
                initialize(self.graph_, fresh - filled, self.runtime.table)
                if adopted:
                    cast(EmbeddedRuntime, self.runtime).settle(fresh, adopted)
                else:
                    self.runtime.settle(fresh)
            except BaseException:           # (in a cluster: a worker lost meanwhile)
                self._remove_nodes([r for e in planned for r in e.readers])
                raise
            for entry in planned:
                self._views[entry.name] = entry
            if not anonymous:
                self._generation += 1
            if persist and not anonymous:
                self._persist_catalog()
        if failed is not None:
            raise failed
        return [self.view(x.name) if isinstance(x, _ViewEntry) else x for x in out]

    def _drop_view(self, name: str, if_exists: bool = False) -> None:
        entry = self._views.get(name.lower())
        if entry is None:
            if if_exists:
                return
            raise UnknownViewError(f"no view named {name!r}")
        users = [v.name for v in self._views.values() if entry.name in v.reads]
        if users:
            raise DependentViewsError(f"cannot drop view {name!r}: views {users} read it; "
                                      "drop them first")
        self.runtime.wait()
        for sub in [s for s in self._subscriptions if s.view == entry.name]:
            sub.fail(f"view {entry.name!r} was dropped")
        if not entry.anonymous:
            self._generation += 1
        del self._views[entry.name]
        if entry.handle is not None:
            entry.handle._dropped()
        self._anonymous = {q: n for q, n in self._anonymous.items() if n != entry.name}
        self._remove_nodes(entry.readers)
        self._persist_catalog()

    def _remove_nodes(self, readers: list[str]) -> None:
        """Take a view's readers, and every node left without children, out of the
        graph, the runtime and (in a cluster) the workers' graphs."""
        if self._partial is not None:
            for r in readers:
                self._partial.remove(r)
        self.planner.remove(readers, self.runtime.remove)
        self.runtime.announce(("remove", list(readers)))
        self.runtime.refresh_clocks()

    def _drop_table(self, name: str, if_exists: bool = False) -> None:
        entry = self._tables.get(name.lower())
        if entry is None:
            if if_exists:
                return
            raise UnknownTableError(f"no table named {name!r}")
        self._generation += 1
        users = [v.name for v in self._views.values()
                 if entry.node in self._upstream(v.readers) and not v.anonymous]
        if users:
            raise DependentViewsError(f"cannot drop table {name!r}: views {users} read it; "
                                      "drop them first")
        self.runtime.wait()
        for v in [v for v in self._views.values() if v.anonymous
                  and entry.node in self._upstream(v.readers)]:
            self._drop_view(v.name)
        self.planner.drop_table(name)
        self.graph_.remove(entry.node)
        self.runtime.remove(entry.node)
        self.runtime.announce(("drop_table", name, entry.node))
        self.runtime.refresh_clocks()
        del self._tables[name.lower()]
        entry.dropped = True
        if self.storage is not None:
            self.storage.drop_table(name.lower())
        self._persist_catalog()

    def _upstream(self, node_ids: Iterable[str]) -> set[str]:
        seen: set[str] = set()
        stack = list(node_ids)
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self.graph_[n].parents)
        return seen

    def _select(self, stmt: lp.Select) -> Result:
        return self._read(*self._select_view(stmt))

    def _select_view(self, stmt: lp.Select) -> tuple["View", lp.Select, "View | None"]:
        """The view that answers a SELECT, installed if new (the part of a read that
        changes the catalog; the cluster server holds its lock only for this).

        Ad-hoc queries share views: the front end plans a query's top-level
        ``col = constant`` conjuncts as lookup keys, so queries differing only in those
        constants have one plan, and one view, read with different keys. Unnamed views
        not read for ``tuning.ADHOC_IDLE`` seconds, and beyond the
        ``tuning.ADHOC_VIEWS`` most recently read, are dropped when another is made.
        The third view answers when the first's lookup finds nothing (``Select.otherwise``:
        a keyed aggregate without GROUP BY)."""
        otherwise = None
        if stmt.otherwise is not None:
            otherwise = self._query_view(stmt.otherwise, stmt.sql)
        return self._query_view(stmt.query, stmt.sql, keep=otherwise), stmt, otherwise

    def _query_view(self, query: lp.Query, sql: str, keep: "View | None" = None) -> "View":
        """The unnamed view of ``query``, made if new (``keep`` is not dropped for it)."""
        name = self._anonymous.get(query)
        if name is None:
            self._evict_queries(room=1, keep=keep.name if keep is not None else None)
            name = f"_query{len(self._anonymous) + 1}"
            while name in self._views:
                name += "_"
            self._create_view(lp.CreateView(name, query, sql), anonymous=True)
            self._anonymous[query] = name
        self._views[name].last_used = time.monotonic()
        return self.view(name)

    def _evict_queries(self, room: int = 0, keep: str | None = None) -> None:
        """Drop the unnamed views of ad-hoc queries that are idle too long, then the least
        recently read beyond ``tuning.ADHOC_VIEWS - room``; a view being read stays, and
        so does ``keep``."""
        now = time.monotonic()
        cached = sorted((self._views[n] for n in self._anonymous.values()),
                        key=lambda e: e.last_used)
        over = len(cached) - max(0, tuning.ADHOC_VIEWS - room)
        for entry in cached:
            if entry.pins or entry.name == keep:
                continue
            if over > 0 or now - entry.last_used > tuning.ADHOC_IDLE:
                self._drop_view(entry.name)
                over -= 1

    @_serialized
    def queries(self) -> list[dict[str, Any]]:
        """The unnamed views that ad-hoc SELECTs made and may reuse, least recently read
        first: each one's ``name`` (for ``drop_query``), ``sql`` (of the query that made
        it; later ones may differ in key constants), ``idle`` (seconds since its last
        read) and ``nodes`` (the graph nodes only it uses)."""
        now = time.monotonic()
        out = []
        for entry in sorted((self._views[n] for n in self._anonymous.values()),
                            key=lambda e: e.last_used):
            out.append({"name": entry.name, "sql": entry.sql,
                        "idle": round(now - entry.last_used, 3),
                        "nodes": len(self.planner.owned(entry.readers))})
        return out

    @_serialized
    def drop_query(self, name: str | None = None) -> None:
        """Drop one ad-hoc query's unnamed view (a name ``queries()`` lists), or, with
        none, all of them; a later identical query makes it again."""
        names = list(self._anonymous.values()) if name is None else [name]
        for n in names:
            if n not in self._anonymous.values():
                raise UnknownViewError(f"no ad-hoc query view named {n!r}; see db.queries()")
            self._drop_view(n)

    @staticmethod
    def _read(v: "View", stmt: lp.Select, otherwise: "View | None" = None) -> Result:
        if stmt.query.arity:
            if len(stmt.params) != stmt.query.arity:
                raise ArityError(f"the query has {stmt.query.arity} ? parameters, "
                                 f"got {len(stmt.params)} values")
            rows = v.lookup(*stmt.params)
            if not rows and otherwise is not None:
                rows = otherwise.all()
        else:
            rows = v.all()
        return Result(v.columns, rows, v.types)

    def _insert_select(self, stmt: lp.InsertSelect) -> Result:
        """INSERT ... SELECT: the query's current rows, read from a short-lived view."""
        name = "_insert_select"
        while name in self._views:
            name += "_"
        self._create_view(lp.CreateView(name, stmt.query, ""), anonymous=True)
        try:
            self.runtime.wait()
            got = self.view(name).all()
        finally:
            self._drop_view(name)
        width = len(self._tables[stmt.table.lower()].schema.columns)
        rows = []
        for r in got:
            row = [None] * width
            for p, v in zip(stmt.positions, r):
                row[p] = v
            rows.append(tuple(row))
        self.table(stmt.table).insert(rows)
        return Result(rowcount=len(rows))

    def _matching(self, table: str, where) -> tuple[_TableEntry, list[tuple]]:
        entry = self._tables[table.lower()]
        rows = self.runtime.matching(entry.node, where)
        if rows is None:                # DIV0: PostgreSQL's / by zero fails the write
            raise DivisionByZeroError(f"division by zero in the WHERE of a write to "
                                      f"{table!r} (nothing was written)")
        return entry, rows

    def _delete(self, stmt: lp.Delete) -> Result:
        entry, rows = self._matching(stmt.table, stmt.where)
        if rows:
            self._write(entry, (), rows)
        return Result(rowcount=len(rows))

    def _update(self, stmt: lp.Update) -> Result:
        entry, rows = self._matching(stmt.table, stmt.where)
        assign = dict(stmt.assignments)
        newrow = compile_row(tuple(assign.get(i, Col(i, c.type))
                                   for i, c in enumerate(entry.schema.columns)))
        new = [tuple(newrow(r)) for r in rows]
        if rows:
            self._write(entry, new, rows)
        return Result(rowcount=len(rows))

    # ------------------------------------------------------------ writes

    def _write(self, entry: _TableEntry, inserts: Sequence, deletes: Sequence,
               arrays=None) -> None:
        """A validated write: rows to insert and delete, or (``arrays``) columns to insert
        that ``Base.arrays_from_arrow`` accepted."""
        self._check_open()
        base: Base = self.graph_[entry.node].op
        self.runtime.check_writable(entry.node, entry.schema.name)
        if getattr(self.runtime, "at_workers", False):
            # a cluster whose bases' workers validate (``serve --writes worker``): the
            # rows checked one by one here, the table's rules there
            # (``ClusterRuntime.forward``)
            if arrays is None:
                dels, ins = base.check_rows(deletes), base.check_rows(inserts)
                batch = Batch.changes(dels, ins)
            else:
                batch = base.prepare_arrays(arrays)
            if batch:               # (counted by the runtime: ``taken_writes``)
                self.runtime.forward(entry.node, batch)
                self._publish()
            return
        batch = base.prepare(inserts, deletes) if arrays is None else base.prepare_arrays(arrays)
        if not batch:
            return
        if self.storage is not None:
            self.storage.log_batch(entry.schema.name.lower(), batch)
        self._writes += 1
        self.runtime.write(entry.node, batch)
        if self._partial is not None:
            self._partial.evict()           # (a write may have grown keys held)
        self._publish()
        if self.storage is not None:
            # a base applies each write as it accepts it, so its rows are the log's
            # state now; every copy of a duplicated row is kept
            snapped = self.storage.maybe_snapshot(
                lambda: {name: self.graph_[t.node].op.stored_rows()
                         for name, t in self._tables.items()})
            if self._disk is not None:
                self._cut(force=snapped)

    # ------------------------------------------------------------ handles

    @_serialized
    def table(self, name: str) -> "Table":
        """The handle of table ``name`` (``UnknownTableError`` if there is none)."""
        self._check_open()
        entry = self._tables.get(arguments.name(name, "table").lower())
        if entry is None:
            raise UnknownTableError(f"no table named {name!r}")
        return Table(self, entry)

    @_serialized
    def view(self, name: str) -> "View":
        """The handle of view ``name`` (``UnknownViewError`` if there is none)."""
        self._check_open()
        entry = self._views.get(arguments.name(name, "view").lower())
        if entry is None:
            raise UnknownViewError(f"no view named {name!r}")
        if entry.handle is None:
            entry.handle = View(self, entry)
        return entry.handle

    @_serialized
    def tables(self) -> list[str]:
        """The names of the tables."""
        return [t.schema.name for t in self._tables.values()]

    @_serialized
    def views(self) -> list[str]:
        """The names of the named views (not the ad-hoc queries' unnamed ones: ``queries()``)."""
        return [v.name for v in self._views.values() if not v.anonymous]

    # ------------------------------------------------------------ runtime

    @_serialized
    def wait(self) -> None:
        """Return once every accepted write is reflected in every view."""
        self._check_open()
        self.runtime.wait()
        if self._partial is not None:
            self._partial.evict()
        self._publish()

    @_serialized
    def memory(self, bases: bool = True) -> dict[str, int]:
        """Bytes of state per stateful node shard (node id -> bytes; ``bases=False``
        leaves out the base tables, which ``memory_limit`` does not bound).

        Measured by walking each operator's state (noria_py/memory.py): numpy arrays
        count their ``nbytes``; dicts, lists, tuples, sets and sorted containers their
        ``sys.getsizeof`` plus their elements', all of them up to 64 and an evenly
        spaced sample of 64 scaled up beyond (a per-row estimate). A row shared by two
        nodes (a base's and a reader's) counts in both. Within a factor of 2 of the
        process's allocations (tracemalloc) for the engine's shapes of state
        (tests/test_memory.py). A partial node (reader, aggregate, join) counts the
        keys it holds, and a base the indexes its upqueries built. In a cluster, each
        worker measures the node shards it hosts, and the controller the base tables
        (their rows and upquery indexes are there): the same shape as embedded."""
        self._check_open()
        ids = [nid for nid in self.graph_.topological()
               if self.graph_[nid].op.stateful and (bases or self.graph_[nid].kind != "base")]
        return self.runtime.memory(ids)     # (in a cluster: each worker measures its own)

    # ------------------------------------------------------------ subscriptions

    @_serialized
    def subscribe(self, view: str, key: Any = None, *, callback: Callable[..., Any] | None = None,
                  buffer: int | None = None) -> Subscription:
        """The changes of ``view`` (or of the rows ``lookup(key)`` reads), pushed as they
        happen: an iterator of ``Change``s, the first a snapshot (noria_py/subscribe.py).
        ``callback``: called on each change (and, last, on the ``SubscriptionError``
        that ends it) in a thread of its own. ``buffer``: changes held for a subscriber
        before it is ended for falling behind (``tuning.SUBSCRIBE_BUFFER``)."""
        self._check_open()
        v = self.view(view)
        if v._partial and key is None:
            raise NotSupportedError(f"view {v.name!r} is partial (connect(partial=True) or "
                                    "serve --partial): its readers hold only the keys read; "
                                    "subscribe to one key (subscribe(view, key)), which is "
                                    "then held, or to a view of the same query without ?, "
                                    "which is never partial")
        size = buffer_size(buffer)
        ids = v._entry.readers
        key_t: tuple | None = None
        if key is not None:
            if not v.key_arity:
                raise ArityError(f"view {v.name!r} has no ? parameters; subscribe without a key")
            if v._bounds:
                raise NotSupportedError(f"view {v.name!r} has range parameters (col > ? and "
                                        "the like): subscribe to the whole view")
            key_t = arguments.plain_key(tuple(key) if isinstance(key, (tuple, list)) else (key,))
            if len(key_t) != v.key_arity:
                raise ArityError(f"view {v.name!r} takes {v.key_arity} key value(s), got {len(key_t)}")
            ids = [ids[v._shard(key_t[0] if v.key_arity == 1 else key_t)]]
        reader = v._readers[0]
        sub = Subscription(v.name, key_t, reader.key, reader.visible, size, self._unsubscribe)
        # no write lands between the snapshot and listening, none counted that is not
        # in it (a cluster's writes at the workers held: ``Runtime.hold``); what the
        # readers applied before goes to the subscriptions there are (a quiet point),
        # not to this one, whose snapshot has it
        with self.runtime.hold():
            self.runtime.wait()             # the snapshot: every accepted write in it
            self.runtime.publish(self._flush)
            if v._partial and key_t is not None:    # the key held (filled by the snapshot's
                held = self.graph_[ids[0]].op       # read) and never evicted while listened to
                sub.pinned = (held, v._held_key(key_t))
                cast(Partial, self._partial).pin(*sub.pinned)
            rows = v.all() if key_t is None else v.lookup(*key_t)
            sub.put(Change(self._progress(), [(r, 1) for r in rows]))
            sub.readers = list(ids)
            try:
                for nid in ids:
                    self.runtime.listen(nid, sub)
            except BaseException:
                self._unsubscribe(sub)
                raise
            self._subscriptions.append(sub)
        if self.runtime.asynchronous and self._publisher is None:
            self._publisher = threading.Thread(target=self._publish_quiet_points, daemon=True,
                                               name="noria-publisher")
            self._publisher.start()
        if callback is not None:
            sub.run_callback(callback)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subscriptions:
                self._subscriptions.remove(sub)
            if sub.pinned is not None and self._partial is not None:
                self._partial.unpin(*sub.pinned)
                sub.pinned = None
            for nid in sub.readers:
                self.runtime.unlisten(nid, sub)

    def _publish_quiet_points(self) -> None:
        """A cluster's subscriptions (noria_py/subscribe.py): a quiet point every
        ``tuning.SUBSCRIBE_EVERY`` seconds that a listened reader changed
        (``Runtime.publish`` holds the writers back meanwhile, so progress is exact)."""
        while not self._closed:
            time.sleep(tuning.SUBSCRIBE_EVERY)
            if not self._subscriptions:
                continue
            try:
                self.runtime.publish(self._flush)
            except Error as exc:            # a worker lost: its readers' subscriptions end
                log.info("subscriptions: no quiet point this time: %s", exc)

    def _publish(self) -> None:
        """A quiet point: each subscription queues what its readers applied since (a
        cluster's come from ``_publish_quiet_points``)."""
        if self._subscriptions and not self.runtime.asynchronous and self.runtime.pending() == 0:
            self._flush(self.runtime.taken_writes)

    def _flush(self, taken: int) -> None:
        """Each subscription queues what its readers applied since the last quiet point,
        numbered with the writes accepted: this database's own and ``taken``, those its
        runtime took without it as of the quiet point (``Runtime.publish``)."""
        for sub in list(self._subscriptions):
            sub.flush(self._writes + taken)

    def _progress(self) -> int:
        """The writes accepted so far: the database's own, and those a runtime took
        without it (``Runtime.taken_writes``: a cluster's writes at the workers)."""
        return self._writes + self.runtime.taken_writes

    @_serialized
    def graph(self) -> list[dict]:
        """The dataflow graph: a dict per node shard (``id``, ``kind``, ``parents``, ``children``, ...)."""
        out = []
        for n in self.graph_.topological():
            d = self.graph_[n].describe()
            d.update(self.runtime.describe(n))      # a cluster adds worker and pid
            out.append(d)
        return out

    @_serialized
    def fail(self, node_id: str) -> None:
        """Crash a node: its state, inbox and logs are gone."""
        self._node(node_id)
        self.runtime.crash(node_id)
        self._failed.add(node_id)

    @overload
    def recover(self, node_id: str, strategy: str | None = ...) -> RecoveryReport: ...
    @overload
    def recover(self, node_id: None = ..., strategy: str | None = ...) -> list[RecoveryReport]: ...

    @_serialized
    def recover(self, node_id: str | None = None,
                strategy: str | None = None) -> RecoveryReport | list[RecoveryReport]:
        """Bring a failed node back; without one, every failed node, in topological order
        (a node a neighbour's recovery brings back is a no-op). A recovery that refuses
        raises RecoveryError and leaves the node failed; without a node, tree clocks'
        refusals are retried once the rest are back, and what they still refuse is
        rebuilt with lineage (logged; ``RecoveryReport.fallback`` says why).
        ``strategy``: by default the regime's own (``regimes.STRATEGIES``)."""
        allowed = regimes.STRATEGIES[self.regime]
        if strategy is None:
            strategy = allowed[0]
        if strategy not in allowed:
            known = {s for ss in regimes.STRATEGIES.values() for s in ss}
            raise RecoveryError(
                f"unknown recovery strategy {strategy!r}; choose 'treeclock', 'lineage' or 'spark'"
                if strategy not in known else
                f"strategy {strategy!r} is not available in regime {self.regime!r}; "
                f"choose {' or '.join(map(repr, allowed))}")
        if node_id is None:
            return self._recover_all(strategy)
        self._node(node_id)
        if self.runtime.automatic_recovery:
            return self._awaited_recovery(node_id)
        if node_id in self._failed and self.runtime.alive(node_id):
            self._failed.discard(node_id)      # a neighbour's recovery brought it back
            return RecoveryReport(node=node_id, strategy=strategy, seconds=0.0)
        if strategy == "lineage":
            report = lineage.recover(self.graph_, self.runtime, node_id)
        elif strategy == "treeclock":
            with self._reads_open(node_id):
                report = treeclock.recover(self.graph_, self.runtime, node_id)
        elif strategy == "spark":
            report = spark.recover(self, node_id)
        elif strategy == "coordinated":
            report = coordinated.recover(self.graph_, self.runtime, node_id)
        elif strategy == "falkirk":
            report = falkirk.recover(self.graph_, self.runtime, node_id)
        elif strategy in ("uncoordinated", "cic"):
            report = uncoordinated_recovery.recover(self.graph_, self.runtime, node_id, strategy)
        elif strategy == "causal":
            with self._reads_open(node_id):
                report = causal.recover(self.graph_, self.runtime, node_id)
        self._failed.discard(node_id)
        self._recoveries.append(report)
        self._publish()
        return report

    def _reads_open(self, node_id: str) -> "AbstractContextManager[None]":
        """Lookups go on during a tree-clock or causal recovery of ``node_id`` (they
        read the views as they stand: those below a failed node lag until it is back,
        as between ``fail`` and ``recover``) when it changes no reader: these
        recoveries restore ``node_id`` and its failed ancestors and only queue what
        they send on, which the next run of the queues delivers (``wait`` or the next
        write, under the lock). Not when
        one of those nodes is a reader (restored in place), a base (``recover_base``
        delivers its history at once), or partial state is on (a restored partial
        node makes its reader's keys holes: ``partial.py``, rule 6)."""
        lock = self._lock
        if not isinstance(lock, _DatabaseLock) or self._partial is not None:
            return nullcontext()
        todo, seen = [node_id], set()
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                node = self.graph_[n]
                if node.kind in ("reader", "base"):
                    return nullcontext()
                todo.extend(p for p in node.parents if not self.runtime.alive(p))
        return lock.open_reads()

    def _recover_all(self, strategy: str) -> list[RecoveryReport]:
        """Every failed node, in topological order. With tree clocks, a node they
        refuse (more adjacent failures than the clocks' depth, a log already trimmed)
        is left failed, as every refusal leaves it, and tried again after the others;
        if they still refuse, it is rebuilt with lineage rather than left to the user."""
        down = [n for n in self.graph_.topological() if not self.runtime.alive(n)]
        self._failed.update(down)
        reports: list[RecoveryReport] = []
        refused: dict[str, str] = {}
        for n in down:
            try:
                reports.append(self.recover(n, strategy))
            except RecoveryError as exc:
                if strategy != "treeclock" or self.runtime.automatic_recovery:
                    raise
                refused[n] = str(exc)
        for n, why in refused.items():
            try:
                reports.append(self.recover(n, strategy))
                continue
            except RecoveryError as exc:
                why = str(exc)
            log.warning("tree clocks cannot recover %s (%s): rebuilding it with lineage", n, why)
            report = self.recover(n, "lineage")
            report.fallback = why
            reports.append(report)
        return reports

    def _awaited_recovery(self, node_id: str) -> RecoveryReport:
        """A cluster recovers lost nodes on its own (with the strategy it was started
        with): wait for that, and return the report that covers ``node_id``."""
        self.runtime.wait_recovered(node_id=node_id)
        for r in reversed(self._recoveries):
            if r.node == node_id or node_id in r.purged or node_id in r.rolled_back:
                return r                 # (a rollback's report is about its first node)
        auto = [r for r in self._recoveries if r.automatic]
        if auto:
            return auto[-1]          # it came back with a neighbour's recovery
        raise RecoveryError(f"node {node_id} has not failed; nothing to recover")

    @_serialized
    def record_recovery(self, report: RecoveryReport) -> None:
        """Note a recovery a runtime did on its own (a cluster's, after a worker died)."""
        self._recoveries.append(report)

    @_serialized
    def recoveries(self) -> list[RecoveryReport]:
        """The recoveries done so far, oldest first (``RecoveryReport``s)."""
        return list(self._recoveries)

    def _node(self, node_id: str):
        if node_id not in self.graph_:
            raise UnknownNodeError(f"no node {node_id!r} in the graph; see db.graph()")
        return self.graph_[node_id]

    @_serialized
    def close(self) -> None:
        """Close the database (its data directory's files, with one); later calls raise ``ClosedError``."""
        if not self._closed:
            self._closed = True
            for sub in list(self._subscriptions):
                sub.close()
            if self.storage is not None:
                try:
                    if self._disk is not None and all(
                            d.alive for d in cast(EmbeddedRuntime, self.runtime).domains.values()):
                        self.runtime.wait()
                        self._cut(force=True)
                finally:
                    self.storage.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this database handle is closed")

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_DUMMIES: dict[SqlType | None, Any] = {
    SqlType.INT: 0, SqlType.FLOAT: 0.0, SqlType.TEXT: "", SqlType.BOOL: False,
    SqlType.DATE: datetime.date(2000, 1, 1), SqlType.TIMESTAMP: datetime.datetime(2000, 1, 1),
    SqlType.TIMESTAMPTZ: datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc), None: "",
}


class Prepared:
    """One statement parsed once (``Database.prepare``) and run with ``?`` values.

    A SELECT whose every ``?`` is a lookup key (a top-level ``col = ?``), or that has no
    ``?``, keeps its view: each ``run`` is a lookup, with no parse and no plan (the view
    is pinned, so no other ad-hoc query evicts it, until ``close``). Any other statement
    is parsed at each run with its values, which become constants of its plan. A view
    dropped meanwhile (``drop_query``, DDL) is planned again at the next run.

    ``param_types``: the type each ``?`` takes from its context, None where nothing says
    (``sql_frontend.parameter_types``). ``columns``/``types``: a SELECT's, None for a
    statement that returns no rows (or a SELECT whose columns depend on its values).
    ``command``: the statement's first word, upper-case (``SELECT``, ``INSERT``, ...).
    ``query``: a SELECT's plan, where ``columns`` are known (what the PostgreSQL front
    end reads its columns' types from: ``pg.types.numeric_oids``).
    """

    def __init__(self, db: Database, sql: str, pin: bool = True) -> None:
        self.sql = sql
        self._db = db
        self._pin = pin
        self.generation = db._generation    # the catalog it was planned against
        words = sql.lstrip(" \t\r\n(").split(None, 1)
        self.command = words[0].upper() if words else ""
        self.param_types: list[SqlType | None] = sql_frontend.parameter_types(sql, db._catalog)
        self.columns: list[str] | None = None
        self.types: list[SqlType] | None = None
        self.query: lp.Query | None = None
        self._keyed: tuple[View, lp.Select, View | None] | None = None
        self._insert = sql_frontend.insert_template(sql, db._catalog)
        if self._insert is not None:
            return
        dummies = tuple(_DUMMIES[t] for t in self.param_types)
        try:
            stmt = sql_frontend.parse(sql, db._catalog, dummies, lift_constants=True)
        except (TypeMismatchError, ArityError):
            if not dummies:
                raise
            return                  # (a stand-in value did not fit: the run's values decide)
        if isinstance(stmt, lp.Select):
            q = self.query = stmt.query
            self.columns = list(q.names)
            self.types = [c.type for c in q.root.columns[:q.visible]]
            if not dummies or (q.arity and len(stmt.params) == len(dummies)):
                self._keep(stmt)

    def _keep(self, stmt: lp.Select) -> None:
        view, stmt, otherwise = self._db._select_view(stmt)
        self._keyed = (view, stmt, otherwise)
        if self._pin:
            for v in (view, otherwise):
                if v is not None:
                    v._entry.pins += 1

    def run(self, params: Sequence[Any] = ()) -> Result:
        """The statement with ``params`` for its ``?`` (as ``execute`` runs it)."""
        if self.generation != self._db._generation:
            self._replan()
        keyed = self._keyed
        if keyed is None:
            if self._insert is not None:
                rows = self._insert.bind(params)
                self._db.table(self._insert.table).insert(rows)
                return Result(rowcount=len(rows))
            return self._db._execute_parsed(self.sql, params)[1]
        view, stmt, otherwise = keyed
        view._entry.last_used = time.monotonic()    # (an ad-hoc view: read, so kept longer)
        if len(params) != len(self.param_types):
            raise ArityError(f"the statement has {len(self.param_types)} parameters (?) but "
                             f"{len(params)} values were given")
        try:
            if params and otherwise is None:        # the hot path: a lookup, as _read does
                return Result(view.columns, view.lookup(*params), view.types)
            return Database._read(view, replace(stmt, params=tuple(params)) if params else stmt,
                                  otherwise)
        except UnknownViewError:
            # its ad-hoc view was dropped (evicted, drop_query): plan it again, once
            self._replan()
            if self._keyed is None or self._keyed[0] is view:
                raise
            return self.run(params)

    def lookup_view(self) -> "View | None":
        """The view whose ``lookup`` with the run's values is this statement's answer
        (a SELECT whose every ``?`` is a lookup key or a range parameter, needing no
        second view), else None. A cluster's client reads it at the reader's worker
        (``RemotePrepared``)."""
        if self.generation != self._db._generation:
            self._replan()
        keyed = self._keyed
        if keyed is None or keyed[2] is not None or not self.param_types:
            return None
        return keyed[0]

    def _replan(self) -> None:
        """Plan the statement again against the catalog as it is now."""
        with self._db._lock:
            self.close()
            self._insert = None     # (if planning fails, runs parse in full until it works)
            self.__init__(self._db, self.sql, self._pin)  # type: ignore[misc]

    def count(self, params: Sequence[Any] = ()) -> int:
        """The rows this INSERT, DELETE or UPDATE would change now with ``params``, without
        changing them (what a transaction block reports before its COMMIT)."""
        if self._insert is not None and len(params) == len(self._insert.slots):
            return self._insert.rows
        return self._db._count_changes(self.sql, params)

    def rows(self, params: Sequence[Any]) -> tuple[str, list[tuple]] | None:
        """An INSERT ... VALUES: its table and the rows it would insert with ``params``
        (not checked yet: the table's insert checks them); None for anything else."""
        if self.generation != self._db._generation:
            self._replan()
        if self._insert is not None:
            return self._insert.table, self._insert.bind(params)
        if self.command != "INSERT":
            return None
        stmt = self._db.parse(self.sql, params)
        if not isinstance(stmt, lp.Insert):
            return None
        return stmt.table, [tuple(evaluate_constant(x) for x in row) for row in stmt.rows]

    def close(self) -> None:
        """Release the view this statement keeps (an ad-hoc one may then be evicted)."""
        if self._keyed is not None and self._pin:
            with self._db._lock:
                for v in (self._keyed[0], self._keyed[2]):
                    if v is not None:
                        v._entry.pins = max(0, v._entry.pins - 1)
        self._keyed = None


class Table:
    """Writes to one base table."""

    def __init__(self, db: Database, entry: _TableEntry) -> None:
        self._db = db
        self._lock = db._lock
        self._table_entry = entry
        self.name = entry.schema.name
        self.columns = [c.name for c in entry.schema.columns]
        self.schema = entry.schema
        self.sql = entry.sql
        pk = [entry.schema.columns[i] for i in entry.schema.primary_key]
        self._check_key = arguments.KeyCheck(f"the primary key of table {self.name!r}",
                                             [c.name for c in pk], [c.type for c in pk])

    @property
    def _entry(self) -> _TableEntry:
        """The table's entry; every call on a handle of a dropped table refuses."""
        entry = self._table_entry
        if entry.dropped:
            raise UnknownTableError(f"table {self.name!r} was dropped; this handle writes and "
                                    f"reads nothing (db.table({self.name!r}) gives the table of "
                                    "that name, if one was created since)")
        return entry

    @_serialized
    def primary_keys(self) -> set[tuple]:
        """The primary-key tuples now in the table (a copy)."""
        if not self._entry.schema.primary_key:
            return set()
        return set(self._db.runtime.primary_keys(self._entry.node))

    @_serialized
    def rows(self) -> list[tuple]:
        """Every row now in the table (a copy; a row held twice is there twice)."""
        return [r for r, c in self._db.runtime.table(self._entry.node) for _ in range(c)]

    @_serialized
    def insert(self, rows: Iterable[Sequence]) -> None:
        """Add rows (tuples in column order), or a DataFrame or Arrow table (as
        ``insert_arrow``); all or nothing."""
        if is_frame(rows):
            return self.insert_arrow(rows)
        self._db._write(self._entry, arguments.many(rows, f"the rows for table {self.name!r}"), ())

    @_serialized
    def insert_arrow(self, table) -> None:
        """Add the rows of a ``pyarrow.Table`` whose columns match this table's (by name),
        or of anything Arrow takes as one (``arrowio.as_arrow_table``: pandas and polars
        DataFrames, DuckDB relations, anything with ``__arrow_c_stream__``). Numeric
        columns without NULLs, into a table kept as columns, go in as arrays, never as
        Python rows; anything else is checked row by row, as ``insert`` does."""
        table = as_arrow_table(table)
        cols = arrow_columns(table, self.columns, self.name)
        arrays = self._db.graph_[self._entry.node].op.arrays_from_arrow(cols)
        if arrays is None:
            self.insert(column_rows(cols))
        elif len(table):
            self._db._write(self._entry, (), (), arrays)

    @_serialized
    def insert_columns(self, columns: Sequence[Any]) -> None:
        """Add rows given as one array per column, in table order (NumPy arrays, or
        anything ``numpy.asarray`` takes), all of one length; all or nothing. int64 and
        float64 columns go in as arrays, with no Python object per value,
        where ``insert_arrow`` would take them as arrays (the cluster server's
        ``insert_columns`` request comes here); anything else is checked row by row,
        as ``insert`` checks rows."""
        arrays = arguments.columns(columns, self.columns, self.name)
        taken = self._db.graph_[self._entry.node].op.arrays_from_numbers(arrays)
        if taken is None:
            self.insert(list(zip(*[a.tolist() for a in arrays])))
        elif len(arrays[0]):
            self._db._write(self._entry, (), (), taken)

    @_serialized
    def delete(self, rows: Iterable[Sequence]) -> None:
        """Remove whole rows; each removes one matching row; all or nothing."""
        self._db._write(self._entry, (), arguments.many(rows, f"the rows for table {self.name!r}"))

    @_serialized
    def delete_keys(self, keys: Iterable) -> None:
        """Remove the rows with these primary keys (a scalar per key, or a tuple)."""
        schema = self._entry.schema
        if not schema.primary_key:
            raise Error(f"table {self.name!r} has no primary key; use delete(rows)")
        given = arguments.many(keys, f"the primary keys for table {self.name!r}")
        wanted = []
        unhashable = None           # (the first: after the keys before it are looked up)
        for k in given:
            kt = canon_row(arguments.plain_key(tuple(k) if isinstance(k, (tuple, list)) else (k,)))
            try:
                hash(kt)
            except TypeError:
                unhashable = kt
                break
            wanted.append(kt)
        rows = self._db.runtime.rows_by_key(self._entry.node, wanted) if wanted else []
        # (the first key refused says why, in the order given)
        for k, kt, row in zip(given, wanted, rows):
            if row is None:
                self._check_key(kt)
                raise RowNotFoundError(f"table {self.name!r} has no row with primary key {k!r}")
        if unhashable is not None:  # the check says what is wrong with it
            self._check_key(unhashable)
            raise TypeMismatchError(f"table {self.name!r}: {unhashable!r} cannot be a "
                                    "primary key")
        self._db._write(self._entry, (), rows)

    @_serialized
    def __len__(self) -> int:
        return self._db.runtime.table_size(self._entry.node)


#: the types of a key looked up as it is (others go through ``arguments.plain``)
_PLAIN_KEYS = frozenset({int, float, str, bool, type(None), datetime.date})


class View(ViewFrames):
    """Reads of one materialized view."""

    def __init__(self, db: Database, entry: _ViewEntry) -> None:
        self._db = db
        self._lock = db._lock
        self._entry = entry
        q = entry.query
        self.name = entry.name
        self.columns = list(q.names)
        self.types = [c.type for c in q.root.columns[:q.visible]]
        self.key_arity = q.arity
        self._readers: list[Reader] = [db.graph_[r].op for r in entry.readers]
        #: whether the readers hold only the keys read (noria_py/partial.py)
        self._partial = bool(self._readers) and self._readers[0].partial
        #: sharded, its readers see division-by-zero markers: a row whose key is the
        #: marker sits in one shard and fails the reads of every shard (ops/reader.py)
        self._pg_shards = len(self._readers) > 1 and self._readers[0].pg
        self._sort = order_key(q.order) if q.order else None
        key = [q.root.columns[i] for i in q.key]
        self._key_types = [c.type for c in key]
        what = f"the ? of {entry.sql[:80]!r}" if entry.anonymous else f"view {self.name!r}"
        self._check_key = arguments.KeyCheck(what, [c.name for c in key], [c.type for c in key])
        #: the range parameters (``Query.bounds``): each one's comparison, the slot of
        #: its value among a read's values and its column's type; the other slots are
        #: the equality key's (``_range``; a cluster's client checks reads the same way)
        self._bounds = [(b.op, b.slot, q.root.columns[b.column].type) for b in q.bounds]
        self._check_range = (arguments.RangeCheck(what, self._check_key, self._bounds, q.arity)
                             if q.bounds else None)
        self._key_fits = self._check_key.fits

    def _dropped(self) -> None:
        """The view was dropped: every read of this handle refuses from now on."""
        self._readers = [cast(Reader, _Dropped(self.name))] * len(self._readers)

    def _shard(self, key) -> int:
        """The index of the reader shard that holds ``key``."""
        n = len(self._readers)
        return 0 if n == 1 else shard_of(key if isinstance(key, tuple) else (key,), n)

    def _reader_for(self, key) -> Reader:
        readers = self._readers
        if len(readers) == 1:
            return readers[0]
        return readers[self._shard(key)]

    def lookup(self, *key) -> list[tuple]:
        """Rows whose ``?`` columns equal ``key`` (one value per ``?``); for a view with
        range parameters, whose columns compare with them (``col > ?``: docs/sql.md)."""
        if self._bounds:
            return self._range(key)
        if len(key) != self.key_arity:
            if not self.key_arity:
                raise ArityError(f"view {self.name!r} has no ? parameters; read it with all()")
            raise ArityError(f"view {self.name!r} takes {self.key_arity} key value(s), got {len(key)}")
        k = key[0] if len(key) == 1 else key
        if type(k) not in _PLAIN_KEYS:      # numpy, Decimal, pandas, datetimes, tuples
            k = arguments.plain_key(k)
            key = k if len(key) != 1 else (k,)
        lock = self._lock
        before = lock.version
        rows = None
        if not before & 1 or lock.reads_open:   # no write under way: read without the lock
            try:
                rows = self._reader_for(k).lookup(k)
            except Exception:               # noqa: BLE001 - read again, below, to raise it
                rows = None
            if lock.version != before:
                rows = None
        if rows is None:
            with lock:                      # a write ran meanwhile (_DatabaseLock), or a hole
                try:
                    rows = self._reader_for(k).lookup(k)
                except TypeError:           # unhashable: the check says what is wrong with it
                    self._check_key(key)
                    raise
                if rows is None:            # a hole of a partial reader: an upquery
                    if type(k) not in self._key_fits:
                        self._check_key(key)
                    rows = self._fill(k, [k])[0]
        if not rows and type(k) not in self._key_fits:
            self._check_key(key)    # (a key the check refuses finds nothing: arguments.py)
        if self._pg_shards:
            rows = self._other_shards(k, rows)
        return rows

    def _other_shards(self, k: Any, rows: list[tuple]) -> list[tuple]:
        """``rows``, or a row of markers where another shard holds a row whose key is
        the marker (``Reader.poisoned``)."""
        own = self._reader_for(k)
        for r in self._readers:
            if r is not own and r.poisoned and r._fails(k):
                return [(DIV0,) * len(self.columns)]
        return rows

    def _range(self, params: tuple) -> list[tuple]:
        """``lookup`` of a view with range parameters: a range scan of its reader's
        sorted index (ops/reader.py), under the database's lock (the first one builds
        the index)."""
        assert self._check_range is not None
        params = tuple(p if type(p) in _PLAIN_KEYS else arguments.plain_key(p) for p in params)
        k, bounds = self._check_range(params)
        with self._lock:
            if self._check_range.key_slots:
                return self._reader_for(k).range_lookup(k, bounds)
            rows = [r for reader in self._readers for r in reader.range_lookup(k, bounds)]
        if self._sort is not None and len(self._readers) > 1:
            rows.sort(key=self._sort)
        return rows

    def _fill(self, k, keys: list) -> list[list[tuple]]:
        """Upqueries for ``keys``, holes of the reader of ``k``'s shard (lock held)."""
        manager = self._db._partial
        assert manager is not None
        return manager.fill(*self._ask(k, keys))

    def _ask(self, k, keys: list) -> tuple[str, list]:
        """The reader node of ``k``'s shard, and ``keys`` as it holds them (stored)."""
        reader = self._reader_for(k)
        rid = next(r for r, op in zip(self._entry.readers, self._readers) if op is reader)
        types = self._key_types
        if len(types) == 1:
            keys = [_stored(x, types[0]) for x in keys]
        else:
            keys = [tuple(_stored(x, t) for x, t in zip(key, types)) for key in keys]
        return rid, keys

    def _held_key(self, key: tuple) -> Any:
        """A key of this partial view as its reader holds it (``Reader.fill``): stored
        values (``_stored``), NaN canonical, bare for one column."""
        types = self._key_types
        k = tuple(_stored(x, t) for x, t in zip(key, types))
        k = canon_row(k)
        return k[0] if len(types) == 1 else k

    def _unlocked(self, read: Callable[[], _R]) -> _R | None:
        """``read()`` without the database's lock where the seqlock allows, as
        ``lookup`` reads (no write under way, or a recovery that changes no reader
        holding the lock: ``_DatabaseLock``); None when it must be read under the lock:
        a write ran meanwhile, or the read failed (it may have met a write half done;
        read again under the lock, it raises what is wrong). For the reads of a
        whole view or of many keys; ``lookup`` has the same steps inline (its 1 µs
        would feel a call)."""
        lock = self._lock
        before = lock.version
        if before & 1 and not lock.reads_open:
            return None
        try:
            out = read()
        except Exception:               # noqa: BLE001 - read again under the lock
            return None
        return out if lock.version == before else None

    def lookup_many(self, keys: Iterable) -> list[list[tuple]]:
        """``lookup`` of each key (a tuple per key where the view takes more than one)."""
        keys = arguments.many(keys, f"the keys for view {self.name!r}")
        if self._bounds:
            return [self.lookup(*k) if isinstance(k, (tuple, list)) else self.lookup(k)
                    for k in keys]
        if not set(map(type, keys)) <= _PLAIN_KEYS:
            keys = [arguments.plain_key(k) for k in keys]
        if self.key_arity == 1 and not self._partial:
            out = self._unlocked(lambda: self._rows_of(keys))
            if out is not None:
                return self._checked(keys, out)
        with self._lock:
            return self._lookup_many(keys)

    def _rows_of(self, keys: list) -> list[Any]:
        """Each key's rows in its reader shard (None: a hole of a partial reader)."""
        readers = self._readers
        if len(readers) == 1:
            return readers[0].lookup_many(keys)
        return [self._reader_for(k).lookup(k) for k in keys]

    def _checked(self, keys: list, out: list[Any]) -> list[list[tuple]]:
        """``out``, once each key that found nothing has passed the key check (a key
        the check refuses finds nothing: arguments.py)."""
        if not all(out):
            fits = self._key_fits
            for k, rows in zip(keys, out):
                if not rows and type(k) not in fits:
                    self._check_key((k,))
        return out

    def _lookup_many(self, keys: list) -> list[list[tuple]]:
        """``lookup_many`` under the database's lock: holes filled by upqueries."""
        if self.key_arity != 1:
            return [self.lookup(*k) if isinstance(k, (tuple, list)) else self.lookup(k)
                    for k in keys]
        try:
            out = self._rows_of(keys)
        except TypeError:
            for k in keys:
                self._check_key((k,))
            raise
        if self._partial and None in out:   # holes: one upquery pass per reader shard
            self._fill_holes(keys, out)
        return self._checked(keys, out)

    def _fill_holes(self, keys: list, out: list[Any]) -> None:
        """Each ``keys[i]`` whose ``out[i]`` is None (a hole) upqueried, one pass per
        reader shard, its rows put in ``out[i]``."""
        fits = self._key_fits
        holes: dict[int, list[int]] = {}
        for i, (k, rows) in enumerate(zip(keys, out)):
            if rows is None:
                if type(k) not in fits:
                    self._check_key((k,))
                holes.setdefault(id(self._reader_for(k)), []).append(i)
        manager = self._db._partial
        assert manager is not None
        asks = [self._ask(keys[idx[0]], [keys[i] for i in idx]) for idx in holes.values()]
        for idx, filled in zip(holes.values(), manager.fill_all(asks)):
            for i, rows in zip(idx, filled):
                out[i] = rows

    def _upquery(self, keys: Iterable) -> list[list[tuple]]:
        """The rows of ``keys`` (one key column), which a client read as holes of this
        partial view's readers at their workers (runtime/cluster/server.py's
        ``upquery``): upqueried without reading the readers again here, a round trip
        each. A key filled since is answered from its reader's state by its worker
        (a fill for a key held is not applied: never counted twice)."""
        keys = arguments.many(keys, f"the keys for view {self.name!r}")
        if not set(map(type, keys)) <= _PLAIN_KEYS:
            keys = [arguments.plain_key(k) for k in keys]
        out: list[Any] = [None] * len(keys)
        with self._lock:
            self._fill_holes(keys, out)
        return self._checked(keys, out)

    def all(self) -> list[tuple]:
        """Every row of the view."""
        if not self._partial:
            rows = self._unlocked(self._all)
            if rows is not None:
                return rows
        with self._lock:
            return self._all()

    def _all(self) -> list[tuple]:
        if self._partial:
            manager = self._db._partial
            assert manager is not None
            rows = [r for rid in self._entry.readers for r in manager.all_rows(rid)]
            if self._sort is not None and len(self._readers) > 1:
                rows.sort(key=self._sort)
            return rows
        if len(self._readers) == 1:
            return self._readers[0].all()
        rows = [r for reader in self._readers for r in reader.all()]
        if self._sort is not None:
            q = self._entry.query
            # rows are already trimmed to visible columns; sort keys index only those
            if all(o.column < q.visible for o in q.order):
                rows.sort(key=self._sort)
        return rows

    def __repr__(self) -> str:
        return f"View({self.name!r}, columns={self.columns})"


def _stored(value: Any, typ: SqlType) -> Any:
    """A key value as a column of ``typ`` stores it (an int-valued float or a bool in an
    INT column, an int in a FLOAT one), so that an upquery's rows carry the stored value
    where they are built from the key (an aggregate's group columns), as a full
    reader's would."""
    t = type(value)
    if typ is SqlType.INT and (t is bool or (t is float and value.is_integer())):
        return int(value)
    if typ is SqlType.FLOAT and t in (int, bool):
        return float(value)
    return value


class _Dropped:
    """Stands for the readers of a dropped view in the handles that read it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _refuse(self, *_args) -> list:
        raise UnknownViewError(f"view {self.name!r} was dropped; this handle reads nothing "
                               f"(db.view({self.name!r}) gives the view of that name, if one "
                               "was created since)")

    lookup = lookup_many = all = _refuse


def connect(url: str | None = None, *, data_dir: str | None = None, shards: int = 1,
            seed: int | None = None, clocks: bool | None = None,
            checkpoints: bool | None = None, token: str | None = None, partial: bool = False,
            memory_limit: int | None = None, regime: str | dict[str, str] | None = None,
            barrier_every: int | None = None, barrier_seconds: float | None = None,
            tls: str | bool | None = None, determinant_depth: int | None = None,
            standby: bool = False):
    """Open an engine: embedded in this process (no url), or a client of a cluster
    (``noria://host:port``; ``token``, or $NORIA_TOKEN, when the server has one;
    ``tls``, or the URL's ``?tls=``, for a cluster served with TLS: the CA file its
    certificate is checked against, or True for the system's CAs).
    ``checkpoints=False`` turns off the stateful nodes' checkpoints (they are on with
    clocks: tree-clock recovery of a stateful node starts from its own checkpoint).
    ``data_dir``: the tables are durable there, and (with checkpoints, not partial) the
    views' checkpoints too, from which a reopen restores the views
    (``Database.reopened`` says how; docs/recovery.md, "On disk").
    ``partial=True``: the readers of parameterized views, and the aggregates and
    joins on their key that feed them alone, hold only the keys read, filled by
    upqueries; ``memory_limit`` (bytes) bounds what they hold, least recently read
    keys evicted first (docs/partial.md; in every regime, docs/regimes.md "Partial
    state"; a cluster serves it in the treeclock regime only). ``regime``: the fault-tolerance regime,
    ``treeclock`` (the default), ``lineage``, ``coordinated`` (with
    ``barrier_every`` writes or ``barrier_seconds`` between its checkpoints),
    ``uncoordinated``, ``cic``, ``causal`` (``determinant_depth``: how many edges
    down a node's determinants are kept, None for all; ``standby=True``: warm standbys
    of the stateful shards) or ``falkirk``, also given as a dict of per-node policies
    (``{"default": "lazy", "view_or_node": "eager", ...}``; docs/regimes.md)."""
    if url is not None:
        if (data_dir is not None or shards != 1 or seed is not None
                or (clocks is not None and not clocks)
                or (checkpoints is not None and not checkpoints) or partial or memory_limit is not None
                or regime is not None or barrier_every is not None
                or barrier_seconds is not None or determinant_depth is not None or standby):
            if regime is not None:
                regimes.check(regime)       # an unknown or unbuilt name says so first
            raise ArgumentError("data_dir, shards, seed, clocks, checkpoints, partial, "
                                "memory_limit and regime are the server's settings "
                                "(noria-py serve); connect to a URL with only a token")
        return connect_url(url, token, tls)
    if tls is not None:
        raise ArgumentError("tls is for connecting to a cluster (noria://...); an embedded "
                            "engine has no connections")
    return Database(data_dir=data_dir, shards=shards, seed=seed, clocks=clocks,
                    checkpoints=checkpoints, partial=partial, memory_limit=memory_limit,
                    regime="treeclock" if regime is None else regime,
                    barrier_every=barrier_every, barrier_seconds=barrier_seconds,
                    determinant_depth=determinant_depth, standby=standby)


def catalog_problems(catalog: list[str], tables: dict[str, list[tuple]]) -> dict[str, tuple[list[tuple], str]]:
    """For ``noria_py.storage.repair``: the tables whose stored rows ``catalog`` (its
    CREATE statements) does not accept, each with the rows it does accept (in order;
    of rows with one primary key, the first) and why: a table the catalog does not
    list keeps none."""
    db = Database()
    out: dict[str, tuple[list[tuple], str]] = {}
    try:
        db._create_catalog_tables(catalog)
        for name, rows in tables.items():
            if not rows:
                continue
            entry = db._tables.get(name.lower())
            if entry is None:
                out[name] = ([], "catalog.json does not list this table")
                continue
            op = db.graph_[entry.node].op
            try:
                op.prepare(rows)
                continue
            except Error as exc:
                first = str(exc)
            kept: list[tuple] = []
            keys: set[tuple] = set()
            for row in rows:
                try:
                    (checked,) = op.check_rows([row])
                except Error:
                    continue
                if op.pk:
                    key = op.key_of(checked)
                    if key in keys:
                        continue
                    keys.add(key)
                kept.append(row)
            out[name] = (kept, f"they do not match its definition in catalog.json (first: {first})")
    finally:
        db.close()
    return out
