"""Client reads at the reader's worker: each worker serves lookups in the readers it
hosts on a port of its own, so a read does not go through the controller.

The port takes the same handshake as the controller's (``wire.server_handshake``, the
cluster's token, role ``client``); on Linux without TLS it is also a Unix socket in
the abstract namespace, which the TCP port's welcome names (``{"unix": name}``), for
clients on this machine (a shorter way through the kernel). A request is ``["read",
id, [[node, [key, ...]], ...]]``: keys of one or more reader node shards, each key a
value, or an array for a view of several ``?``; or int keys as int64 bytes
(``pack_keys``), read as an array. It is answered ``["ok", id, [answer, ...]]``, an answer per
node, in order: a list of rows per key, or, for many int keys of a reader in the dense
form (``Reader.dense_parts``), the same rows as columns (``pack_dense``: which keys hold
a row, and each column's values, int64 and float64 ones as their bytes), which the
client makes rows (``rows_found``) with no per-row work at the worker or in msgpack.
A ``lookup`` is ``["get", id, node, key]``, answered ``["ok", id, rows]`` (the key's
rows, None for a hole): no lists of groups and keys to make and check at either end.
With ``serve --partial --writes worker``, the holes a ``get`` or a ``read`` finds are
upqueried by the worker itself where it can (``Reads.miss``, ``Reads.miss_many``;
partial.py, "A miss without the controller") and answered with the rows once the
fill has landed; else as holes.
A read of a view with range parameters (``col > ?``) is ``["range", id, [node, ...],
key, [[op, value], ...]]`` (``range_rows``), answered ``["ok", id, rows]``, the rows of
every node named in turn, each node's sorted by the view's ORDER BY (the client merges).
Any request may be answered
``["moved", id, message]`` when a node named is not
hosted here or is down (being recovered): the client asks the controller where the
node is now and sends again, or ``["error", id, error class name, message]``.

Invariants, and why:

- **Only readers hosted now are read.** A request names reader node shards by id, and
  a node is read only if this worker's domain of it is alive, and, restored by a
  recovery, has had the messages held for it (its parents' replay) handled (``held``:
  direct channels); anything else is ``moved``, never an empty answer (a stale
  placement is refreshed, never answered wrongly). A worker whose controller
  connection ended (``stop``) answers nothing more.
- **A read never sees a frame half applied.** One thread (``Worker.run``) applies every
  frame from the controller; ``Reads.version`` is a seqlock's counter that this thread
  makes odd while it handles a frame and even between frames. A read thread reads
  without any lock and keeps its answer only if the version was even before and
  unchanged after (under the GIL, a read runs while the message thread is parked;
  parked mid-frame means an odd version). Otherwise the read is queued, and the
  message thread answers it between two frames, where nothing is half applied: a read
  waits for at most the frame under way, and never starves under a stream of frames
  (a lock would: the message thread takes it again before a waiting reader wakes).
- **Reads do not stall the messages for long.** The message thread spends time on
  reads only for those queued while it was in a frame, one request each between
  frames; a read that finds the version even (no frame under way: the common case
  with the messages idle) costs the message thread nothing but the GIL it shares.
- **A read is answered on its connection's thread**, under the seqlock above, not
  handed to the message thread (only a read that finds a frame under way is): that is
  safe because the read only reads (``Reader.lookup``, ``dense_parts``) and keeps its
  answer only if no frame began or ended meanwhile. So a read costs one system call
  to receive it and one to answer, and no thread hand-off.
- **A lookup's round trip wakes no thread, in a stream of lookups.** After answering
  a ``get``, the read thread polls its socket for up to ``NEXT_GET_SPIN_NS``
  (``wire.Connection.spin``: non-blocking receives, ``sched_yield`` between them)
  before it blocks, and the client polls for the answer as long (``remote.
  ANSWER_SPIN_NS``). A thread asleep in ``recv`` is woken by the kernel, and on this
  VM waking one on the other CPU, idle, costs tens of microseconds: whether the
  scheduler put the client and the read thread on one CPU or on two decided a run's
  ``lookup`` p50 (23-24 µs against 58-65 µs, pinned; polling, 30 against 15:
  docs/benchmarks.md, "Spinning for the answer"). What it costs: up to that long of
  a CPU after each lookup, at each end, by a thread that yields whenever anything
  else on its CPU wants it; the poll drops the GIL at each system call and ends
  after ``NEXT_GET_SPIN_NS``, so the message thread waits for the GIL at most that
  much longer. Only after a ``get``: a ``read`` of many keys, a range read or a
  write is not answered within microseconds.
- **Many rows are made with the collector paused.** A client's answer of many keys
  is a list and a tuple per key, all reachable until returned: made while Python's
  cyclic collector runs, they are walked by a young collection every 700 and pushed
  into the older generations, which then walk the whole heap every few such answers
  (2-3× the client's CPU a key, measured). ``collector_paused`` disables it while they
  are made (from ``PAUSE_GC_MIN`` keys) and enables it again, unless the caller had
  disabled it: nothing goes uncollected, one young collection runs after instead of
  dozens during. (It is process-wide: another thread's ``gc.disable()`` made during
  those milliseconds is undone.)
- **A range index built here is kept only if no frame began meanwhile.** The first
  range read of a reader builds its sorted index from its rows (``Reader.range_lookup``);
  a batch handled while there was none did not go into it, so an index a read thread
  built across a frame is dropped again (``unchanged``) and the next read builds it.
- **Read-after-wait.** ``db.wait()`` returns once every worker has processed every
  message relayed before its pings; a read sent after that reads state these messages
  made, as a read through the controller (a request queued behind them) did.
"""
from __future__ import annotations

import collections
import contextlib
import gc
import logging
import os
import secrets
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Container, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sql_frontend.plan import RANGE_OPS

from ...errors import Error, OperationalError
from ...nan import as_objects, column_list, concat
from ...ops.dense import rows_by_key
from ...storage import codec
from . import wire

if TYPE_CHECKING:  # pragma: no cover
    from ...ops.reader import Reader
    from ..domain import Domain

log = logging.getLogger("noria_py.worker")

#: client read connections a worker serves at once (one more is refused)
MAX_READ_CONNECTIONS = 256
#: seconds a read found mid-frame waits for the message thread before trying again
#: without it (the message thread may have gone idle just before the read was queued)
RETRY_EVERY = 0.0005


#: nanoseconds a read thread stays awake for the next request after answering a ``get``
#: (module docstring: "A lookup's round trip wakes no thread")
NEXT_GET_SPIN_NS = 50_000

#: a client's answer of at least this many keys is made with Python's cyclic collector
#: paused (``collector_paused``)
PAUSE_GC_MIN = 512


class NotHere(OperationalError):
    """A read named a node this worker does not host, or hosts down: ``moved``."""


class _Read:
    __slots__ = ("read", "done", "result", "error", "cancelled")

    def __init__(self, read: Callable[[], Any]) -> None:
        self.read = read
        self.done = threading.Event()
        self.result: list[Any] | None = None
        self.error: BaseException | None = None
        self.cancelled = False


class Reads:
    """The readers of one worker, as its read threads see them (module docstring)."""

    def __init__(self, domains: dict[str, Domain]) -> None:
        self.domains = domains          # (the worker's own dict: the message thread's)
        self.version = 0                # odd while the message thread is in a frame
        self.pending: collections.deque[_Read] = collections.deque()
        self.open = True                # False once the worker stopped working
        #: readers of a controller that was lost, read-only, until the next one's views
        #: are up (``keep_old``, ``drop_old``: restart.py); their ids are never reused
        self.old: dict[str, Domain] = {}
        #: nodes a recovery restored and whose held messages (their parents' replay
        #: among them) are not yet handled: up, but not yet what they were (the
        #: worker's ``holding``, direct channels), so ``moved``
        self.held: Container[str] = ()
        #: ``serve --writes worker``: a client's write to a base hosted here, handed to
        #: the message thread (``Worker.client_write``); None: writes go elsewhere
        #: (its last argument: called with the outcome on the message thread as soon
        #: as it is known, before the call returns it)
        self.write: Callable[[str, str, Sequence[Any], int, Callable[[Any], None]],
                             Any] | None = None
        #: ``serve --partial --writes worker``: a ``get`` that found a hole asks the
        #: worker's own upquery (``Worker.direct_miss``: the key's rows, or None, the
        #: hole, which the client upqueries through the controller; its last
        #: argument: called with the rows on the message thread as soon as the fill
        #: lands, before the call returns them); None: holes are answered as holes
        self.miss: Callable[[str, Any, Callable[[Any], None]], list[Any] | None] | None = None
        #: the same for a ``read``'s holes (``Worker.direct_miss_many``: per ``[node,
        #: keys]`` asked, each key's rows, None for a hole; or None, all holes)
        self.miss_many: Callable[[Sequence[tuple[str, list[Any]]]],
                                 list[list[Any] | None]] | None = None

    def answer(self, groups: Sequence[Any]) -> list[Any]:
        """The rows of each key of each ``[node, keys]`` group (any thread); raises
        ``NotHere`` for a node not hosted and up here."""
        return cast("list[Any]", self._between_frames(lambda: self._lookup(groups)))

    def answer_range(self, nids: Sequence[str], key: Any, bounds: Sequence[Any]
                     ) -> list[tuple[Any, ...]]:
        """The rows of a range read (``range_rows``) of each reader ``nids`` names, one
        list, each reader's in its order (the client merges them); as ``answer``."""
        def read() -> list[tuple[Any, ...]]:
            before = self.version

            def unchanged() -> bool:        # (no frame began meanwhile)
                return self.version == before
            return [r for nid in nids for r in range_rows(self._reader(nid), key, bounds,
                                                          unchanged)]
        return cast("list[tuple[Any, ...]]", self._between_frames(read))

    def _between_frames(self, read: Callable[[], Any]) -> Any:
        """``read()`` as no frame changed anything meanwhile (module docstring): made
        here while the version stays even across it, else by the message thread."""
        req: _Read | None = None
        while True:
            before = self.version
            if not before & 1:
                try:
                    out, ok = read(), True
                except Exception:       # noqa: BLE001 - mid-change, maybe: read again
                    ok = False
                if self.version == before:
                    if not ok:          # (an error between frames: it is real)
                        out = read()
                    if req is not None:
                        req.cancelled = True
                    return out
            if req is None:
                req = _Read(read)
                self.pending.append(req)
            if req.done.wait(RETRY_EVERY):
                if req.error is not None:
                    raise req.error
                return req.result

    def answer_one(self, nid: str, key: Any) -> list[Any] | None:
        """The rows of one key of reader ``nid`` (a ``lookup``; None: a hole of a
        partial reader): ``answer`` of one group of one key under the same seqlock,
        without the groups' lists; mid-frame, ``answer`` itself (which queues it)."""
        before = self.version
        if not before & 1:
            try:
                out = self._lookup_one(nid, key)
            except Exception:
                if self.version == before:
                    raise               # (no frame meanwhile: a real error)
            else:                       # (else mid-change, maybe: ``answer``)
                if self.version == before:
                    return out
        return cast("list[Any] | None", self.answer(((nid, (key,)),))[0][0])

    def serve_pending(self) -> None:
        """Answer the reads queued so far (the message thread, between frames)."""
        pending = self.pending
        for _ in range(len(pending)):
            req = pending.popleft()
            if req.cancelled:
                continue
            try:
                req.result = req.read()
            except BaseException as e:  # noqa: BLE001 - the reader's thread raises it
                req.error = e
            req.done.set()

    def _reader(self, nid: str) -> Reader:
        """Reader node shard ``nid``, if this worker serves it now; else ``NotHere``."""
        if not self.open:
            raise NotHere("this worker has stopped")
        d = self.domains.get(nid)
        if d is None:
            d = self.old.get(nid)
        if d is None or not d.alive or d.node.kind != "reader" or nid in self.held:
            raise NotHere(f"node {nid} is not served by this worker now")
        return cast("Reader", d.node.op)

    def _lookup(self, groups: Sequence[Any]) -> list[Any]:
        out = []
        for nid, keys in groups:
            # (keys as msgpack decodes them: a view of several ? takes arrays as tuples;
            # or int keys as int64 bytes, ``pack_keys``)
            op = self._reader(nid)
            if type(keys) is bytes:
                at = np.frombuffer(keys, dtype="<i8")
                found = op.dense_parts(at)
                out.append(op.lookup_many(at.tolist()) if found is None
                           else pack_dense(*found))
            elif len(keys) == 1:        # (a ``lookup``: never in columns)
                out.append(op.lookup_many(list(keys)))
            else:
                keys = list(keys)
                found = op.dense_parts(keys)
                out.append(op.lookup_many(keys) if found is None else pack_dense(*found))
        return out

    def _lookup_one(self, nid: str, key: Any) -> list[Any] | None:
        """``_lookup`` of one key: ``Reader.lookup``, what ``Reader.lookup_many`` calls
        for one key."""
        return cast("list[Any] | None", self._reader(nid).lookup(key))

    def keep_old(self) -> None:
        """The controller was lost (the worker's message thread has ended): its readers
        stay readable as they are, apart from the domains of the next controller (the
        same dict, emptied for them)."""
        self.version += 1
        # (merged: a controller lost before its views were up gave no client its ids)
        self.old = {**self.old, **{nid: d for nid, d in self.domains.items()
                                   if d.node.kind == "reader"}}
        self.domains.clear()
        self.version += 1

    def drop_old(self) -> None:
        """The next controller's views are up: reads of the old readers are ``moved``."""
        self.old = {}

    def close(self) -> None:
        """The worker stopped: no more answers; queued reads are told ``moved``."""
        self.open = False
        while self.pending:
            req = self.pending.popleft()
            req.error = NotHere("this worker has stopped")
            req.done.set()


def range_rows(op: Reader, key: Any, bounds: Sequence[Any],
               unchanged: Callable[[], bool] | None = None) -> list[tuple[Any, ...]]:
    """A range read of reader ``op`` as a request carries it (``["range", id, [node,
    ...], key, [[op, value], ...]]``; the client checked the values: ``arguments.
    RangeCheck``): ``Reader.range_lookup`` of the equality key (``()`` without one, a
    value for one column, an array for more) and the bounds. ``unchanged``: as
    ``range_lookup`` takes it (a read thread's). ``wire.ProtocolError`` for a bound
    that is not ``[op, value]`` of ``plan.RANGE_OPS``; ``Error`` for a reader without
    range parameters."""
    if op.range_column is None:
        raise Error("this view has no range parameters (col > ?): read it with lookup")
    if not all(type(b) in (tuple, list) and len(b) == 2 and b[0] in RANGE_OPS for b in bounds):
        raise wire.ProtocolError("a range read's bounds: expected [[op, value], ...]")
    return op.range_lookup(key, [(b[0], b[1]) for b in bounds], unchanged)


def pack_dense(hit: np.ndarray, parts: list[np.ndarray]) -> dict[str, Any]:
    """A group's answer in columns (``Reader.dense_parts``): ``{"hit": one byte a key,
    1 where it holds a row, "cols": [column, ...]}``, a column of the rows held, in key
    order, as ``["a", dtype, bytes]`` (int64 or float64: its little-endian bytes) or
    ``["v", [value, ...]]``."""
    cols: list[list[Any]] = []
    for p in parts:
        if p.dtype.kind in "if":
            dt = p.dtype.newbyteorder("<")
            cols.append(["a", dt.str, np.ascontiguousarray(p, dtype=dt).tobytes()])
        else:
            cols.append(["v", p.tolist()])
    return {"hit": hit.astype(np.uint8).tobytes(), "cols": cols}


@contextlib.contextmanager
def collector_paused(n: int, least: int = PAUSE_GC_MIN) -> Iterator[None]:
    """Python's cyclic collector paused while the answer of ``n`` keys is made (at
    least ``least``; where it was enabled), then enabled again (module
    docstring)."""
    if n < least or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def rows_found(found: Any) -> list[list[tuple[Any, ...]] | None]:
    """A group's answer as the rows of each key (the client's side): from columns
    (``pack_dense``) or from lists of rows, None for a key a partial reader does not
    hold (a hole: the client asks the controller, which upqueries it,
    ``runtime/cluster/partial.py``). ``wire.ProtocolError`` if it is neither."""
    if type(found) is not dict:
        if type(found) is not tuple:
            raise wire.ProtocolError("a read's answer: expected rows or columns")
        with collector_paused(len(found)):
            return [None if rows is None else list(rows) for rows in found]
    hit, cols = _columns(found)
    with collector_paused(len(hit)):
        return cast("list[list[tuple[Any, ...]] | None]",
                    rows_by_key(hit, [column_list(c) if isinstance(c, np.ndarray) else c
                                      for c in cols]))


def _columns(found: dict[str, Any]) -> tuple[np.ndarray, list[np.ndarray | tuple[Any, ...]]]:
    """An answer in columns (``pack_dense``): which keys hold a row, and each column
    of those rows, an array (int64, float64) or a tuple of values."""
    hit, cols = found.get("hit"), found.get("cols")
    if type(hit) is not bytes or type(cols) is not tuple or len(found) != 2:
        raise wire.ProtocolError("a read's answer in columns: expected hit and cols")
    held = np.frombuffer(hit, dtype=np.uint8)
    n = int(np.count_nonzero(held))
    columns: list[np.ndarray | tuple[Any, ...]] = []
    for c in cols:
        if type(c) is tuple and len(c) == 3 and c[0] == "a" and c[1] in codec.COLUMN_DTYPES \
                and type(c[2]) is bytes and len(c[2]) == 8 * n:
            columns.append(np.frombuffer(c[2], dtype=np.dtype(c[1])))
        elif type(c) is tuple and len(c) == 2 and c[0] == "v" and type(c[1]) is tuple \
                and len(c[1]) == n:
            columns.append(c[1])
        else:
            raise wire.ProtocolError("a read's answer in columns: a malformed column")
    if not columns:
        raise wire.ProtocolError("a read's answer in columns: no column")
    return held.astype(bool), columns


def pack_keys(keys: np.ndarray) -> bytes:
    """Int keys as a request carries them (a group's keys as bytes): int64, little-endian."""
    return np.ascontiguousarray(keys, dtype="<i8").tobytes()


def rows_in_order(n: int, parts: Sequence[tuple[np.ndarray, Any]]
                  ) -> list[list[tuple[Any, ...]] | None]:
    """The rows of each of ``n`` keys from the answers of groups of them (the client's
    side of a ``lookup_many`` over several reader shards): ``parts`` holds, per group,
    the positions of its keys among the ``n`` (ascending) and its answer. Answers all
    in columns are put in key order as arrays (no Python step per key but the rows'
    making, ``rows_by_key``); else key by key. ``wire.ProtocolError`` for a malformed
    answer, or one of another length than its keys."""
    with collector_paused(n):
        return _rows_in_order(n, parts)


def _rows_in_order(n: int, parts: Sequence[tuple[np.ndarray, Any]]
                   ) -> list[list[tuple[Any, ...]] | None]:
    if not all(type(found) is dict for _, found in parts):
        out: list[list[tuple[Any, ...]] | None] = [[] for _ in range(n)]
        for at, found in parts:
            rows = rows_found(found)
            if len(rows) != len(at):
                raise wire.ProtocolError("a read's answer: not one per key asked")
            for i, r in zip(at.tolist(), rows):
                out[i] = r
        return out
    hit = np.zeros(n, dtype=bool)
    held: list[np.ndarray] = []
    columns: list[list[np.ndarray | tuple[Any, ...]]] = []
    for at, found in parts:
        h, cols = _columns(found)
        if len(h) != len(at) or (columns and len(cols) != len(columns[0])):
            raise wire.ProtocolError("a read's answer in columns: not one per key asked, "
                                     "or not the columns of the others")
        hit[at] = h
        held.append(at[h])
        columns.append(cols)
    order = np.argsort(np.concatenate(held), kind="stable")   # (the rows, in key order)
    merged: list[list[Any]] = []
    for c in range(len(columns[0])):
        pieces = [_array(cols[c]) for cols in columns]
        if len({p.dtype for p in pieces}) > 1:      # (an int64 piece stays ints)
            pieces = [as_objects(p) for p in pieces]
        col = concat(pieces)
        merged.append(column_list(col[order]))
    return cast("list[list[tuple[Any, ...]] | None]", rows_by_key(hit, merged))


def _array(values: np.ndarray | tuple[Any, ...]) -> np.ndarray:
    """A column as an array: values as a one-dimensional object array (never a
    deeper one)."""
    if isinstance(values, np.ndarray):
        return values
    return np.fromiter(values, dtype=object, count=len(values))


def _check_request(f: Any) -> tuple[int, tuple[Any, ...]]:
    if type(f) is tuple and len(f) == 3 and f[0] == "read" and type(f[1]) is int \
            and type(f[2]) is tuple:
        for g in f[2]:
            if not (type(g) is tuple and len(g) == 2 and type(g[0]) is str
                    and (type(g[1]) is tuple
                         or (type(g[1]) is bytes and len(g[1]) % 8 == 0))):
                break
        else:
            return f[1], f[2]
    raise wire.ProtocolError("expected [\"read\", id, [[node, [key, ...] or int64 "
                             "bytes], ...]]")


#: a write's outcome when its worker's message thread ended with its controller lost
#: before the write was known durable: it may be in the logs on disk, which the next
#: controller takes. Answered ``["doubt", id, why]``; the client then asks that
#: controller whether it landed (``write_landed``, by its tag) and sends it again if not
IN_DOUBT = ("doubt", "the worker taking this write lost its controller before the write "
            "was known to be durable")


def _write_answer(rid: int, base: str, said: Any) -> list[Any]:
    """The answer to write ``rid`` to ``base`` from what ``Worker.accept`` said."""
    if said is None:
        return ["moved", rid, f"base {base} does not take writes at this worker now"]
    if said is IN_DOUBT:
        return [IN_DOUBT[0], rid, IN_DOUBT[1]]
    if said:
        return ["error", rid, str(said[0]), str(said[1])]
    return ["ok", rid, None]


def _send_answer(conn: wire.Connection, rid: int, read: Callable[..., Any],
                 *args: Any) -> None:
    """``read(*args)``'s answer to request ``rid``: ``["ok", rid, rows]``, ``["moved",
    rid, why]`` (not hosted here, or down), or ``["error", rid, class name, message]``."""
    try:
        rows = read(*args)
    except NotHere as e:
        conn.send(["moved", rid, str(e)])
    except Error as e:
        conn.send(["error", rid, type(e).__name__, str(e)])
    except Exception as e:          # (a key the reader cannot take: unhashable, ...)
        conn.send(["error", rid, "Error", f"{type(e).__name__}: {e}"])
    else:
        conn.send(["ok", rid, rows])


class ReadServer:
    """The worker's port for client reads: one thread per connection."""

    def __init__(self, reads: Reads, host: str, port: int, token: str | None,
                 max_connections: int = MAX_READ_CONNECTIONS,
                 tls: ssl.SSLContext | None = None) -> None:
        self.reads = reads
        self.token = token
        # (the cluster's TLS, when it has one: every connection's)
        self.admission = wire.Admission(max_connections, log, kind="read ", tls=tls)
        self.sock = socket.create_server((host, port))
        self.address: tuple[str, int] = cast("tuple[str, int]", self.sock.getsockname()[:2])
        #: the same port as a Unix socket, for clients on this machine (no TLS then)
        self.unix: socket.socket | None = None
        self.unix_name: str | None = None
        if tls is None and sys.platform == "linux":
            self.unix_name = f"\0noria-py-read-{os.getpid()}-{secrets.token_hex(8)}"
            self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.unix.bind(self.unix_name)
            self.unix.listen()
            self.admission.serve(self.unix, self._connection, "read")
        self.admission.serve(self.sock, self._connection, "read")

    def _connection(self, sock: socket.socket) -> None:
        conn = wire.Connection(sock)
        try:
            # (a client that reached the TCP port from this machine may read on the
            # Unix socket instead: ``UNIX_SOCKETS``)
            wire.server_handshake(conn, self.token, role_expected="client", welcome=(
                {"unix": self.unix_name} if self.unix_name and sock.family != socket.AF_UNIX
                else None))
            self._serve(conn)
        except wire.ConnectionClosed:
            pass
        except (OSError, wire.ProtocolError) as e:
            log.warning("closed read connection from %s: %s", conn.peer, e)
        finally:
            conn.close()

    def _serve(self, conn: wire.Connection) -> None:
        answer, recv, spin = self.reads.answer, conn.recv, conn.spin
        while True:
            f = recv()
            if type(f) is tuple and len(f) == 4 and f[0] == "get":
                self._get(conn, f)
                spin(NEXT_GET_SPIN_NS)      # (a client's next lookup, due soon: awake)
                continue
            if type(f) is tuple and len(f) == 5 and f[0] == "range":
                self._range(conn, f)
                continue
            if type(f) is tuple and f and f[0] == "write":
                self._write(conn, f)
                continue
            rid, groups = _check_request(f)
            _send_answer(conn, rid, answer if self.reads.miss_many is None
                         else self._read_or_fill, groups)

    def _read_or_fill(self, groups: Sequence[Any]) -> list[Any]:
        """A ``read``'s answer, its holes upqueried by the worker itself where it can
        (``Reads.miss_many``: one upquery per reader shard, sent together); those it
        cannot are answered holes (None), which the client upqueries through the
        controller. A partial reader's answer is never in columns (``dense_parts``)."""
        out = self.reads.answer(groups)
        many = self.reads.miss_many
        asks: list[tuple[int, list[int], list[Any]]] = []
        for g, ((nid, keys), found) in enumerate(zip(groups, out)):
            if type(found) is list and None in found:
                if type(keys) is bytes:
                    keys = np.frombuffer(keys, dtype="<i8").tolist()
                holes = [i for i, rows in enumerate(found) if rows is None]
                asks.append((g, holes, [keys[i] for i in holes]))
        if asks and many is not None:
            filled = many([(groups[g][0], ks) for g, _, ks in asks])
            for (g, holes, _), rows in zip(asks, filled):
                if rows is not None:
                    for i, r in zip(holes, rows):
                        out[g][i] = r
        return out

    def _write(self, conn: wire.Connection, f: tuple[Any, ...]) -> None:
        """``["write", id, base, method, args, tag]`` (``serve --writes worker``; ``tag``,
        the client's random name for it, goes with it to the history): answered ``["ok",
        id, None]`` once durable and passed on, ``["error", ...]`` if refused (nothing
        changed), ``["moved", ...]`` if the base is not here (nothing written),
        ``["doubt", ...]`` if the controller was lost meanwhile (``IN_DOUBT``)."""
        if not (len(f) == 6 and type(f[1]) is int and type(f[2]) is str
                and type(f[3]) is str and type(f[4]) is tuple and type(f[5]) is int):
            raise wire.ProtocolError('expected ["write", id, base, method, args, tag]')
        rid = f[1]
        write = self.reads.write
        lock = threading.Lock()
        sent: list[tuple[bytes, bool]] = []

        def at_once(said: Any) -> None:     # (the message thread: never waits here)
            with lock:
                if not sent:
                    sent.append(conn.send_now(_write_answer(rid, f[2], said)))
        said = None if write is None else write(f[2], f[3], f[4], f[5], at_once)
        with lock:
            if not sent:
                sent.append((b"", False))
                conn.send(_write_answer(rid, f[2], said))
            elif sent[0][0]:
                conn.send_rest(*sent[0])

    def _get(self, conn: wire.Connection, f: tuple[Any, ...]) -> None:
        """``["get", id, node, key]``, a ``lookup``: answered ``["ok", id, rows]`` (the
        key's rows, None for a hole), or as a ``read`` is."""
        rid, nid = f[1], f[2]
        if type(rid) is not int or type(nid) is not str:
            raise wire.ProtocolError('expected ["get", id, node, key]')
        miss = self.reads.miss
        if miss is None:
            _send_answer(conn, rid, self.reads.answer_one, nid, f[3])
            return
        try:
            rows = self.reads.answer_one(nid, f[3])
        except Exception:               # noqa: BLE001 - (rare) read again, answered as ever
            _send_answer(conn, rid, self.reads.answer_one, nid, f[3])
            return
        if rows is None:                # (a hole: the worker's own upquery)
            self._fill(conn, rid, nid, f[3], miss)
        else:
            conn.send(["ok", rid, rows])

    def _fill(self, conn: wire.Connection, rid: int, nid: str, key: Any,
              miss: Callable[[str, Any, Callable[[Any], None]], list[Any] | None]) -> None:
        """A ``get`` that found a hole, upqueried by the worker itself where it can
        (``Reads.miss``): answered ``["ok", id, rows]`` by the message thread as soon
        as the fill lands (as a write's answer is: ``_write``), or the hole (None)."""
        lock = threading.Lock()
        sent: list[tuple[bytes, bool]] = []

        def at_once(rows: Any) -> None:     # (the message thread: never waits here)
            with lock:
                if not sent:
                    sent.append(conn.send_now(["ok", rid, rows]))
        rows = miss(nid, key, at_once)
        with lock:
            if not sent:
                sent.append((b"", False))
                conn.send(["ok", rid, rows])
            elif sent[0][0]:
                conn.send_rest(*sent[0])

    def _range(self, conn: wire.Connection, f: tuple[Any, ...]) -> None:
        """``["range", id, [node, ...], key, [[op, value], ...]]``, a read of a view with
        range parameters (``range_rows``) at some of its reader shards: answered ``["ok",
        id, rows]`` (those of every node named, in turn), or as a ``read`` is."""
        rid, nids, bounds = f[1], f[2], f[4]
        if type(rid) is not int or type(nids) is not tuple or type(bounds) is not tuple \
                or not all(type(n) is str for n in nids):
            raise wire.ProtocolError('expected ["range", id, [node, ...], key, bounds]')
        _send_answer(conn, rid, self.reads.answer_range, nids, f[3], bounds)

    def close(self) -> None:
        for sock in (self.sock, self.unix):
            if sock is not None:
                self.admission.stop(sock)
