"""Client reads at the reader's worker: each worker serves lookups in the readers it
hosts on a port of its own, so a read does not go through the controller.

The port takes the same handshake as the controller's (``wire.server_handshake``, the
cluster's token, role ``client``). A request is ``["read", id, [[node, [key, ...]],
...]]``: keys of one or more reader node shards, each key a value, or an array for a
view of several ``?``. It is answered ``["ok", id, [answer, ...]]``, an answer per
node, in order: a list of rows per key, or, for many int keys of a reader in the dense
form (``Reader.dense_parts``), the same rows as columns (``pack_dense``: which keys hold
a row, and each column's values, int64 and float64 ones as their bytes), which the
client makes rows (``rows_found``) with no per-row work at the worker or in msgpack;
``["moved", id, message]`` when a node named is not
hosted here or is down (being recovered): the client asks the controller where the
node is now and sends again, or ``["error", id, error class name, message]``.

Invariants, and why:

- **Only readers hosted now are read.** A request names reader node shards by id, and
  a node is read only if this worker's domain of it is alive; anything else is
  ``moved``, never an empty answer (a stale placement is refreshed, never answered
  wrongly). A worker whose controller connection ended (``stop``) answers nothing more.
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
- **Read-after-wait.** ``db.wait()`` returns once every worker has processed every
  message relayed before its pings; a read sent after that reads state these messages
  made, as a read through the controller (a request queued behind them) did.
"""
from __future__ import annotations

import collections
import logging
import socket
import ssl
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...errors import Error, OperationalError
from ...nan import column_list
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


class NotHere(OperationalError):
    """A read named a node this worker does not host, or hosts down: ``moved``."""


class _Read:
    __slots__ = ("groups", "done", "result", "error", "cancelled")

    def __init__(self, groups: Sequence[Any]) -> None:
        self.groups = groups
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

    def answer(self, groups: Sequence[Any]) -> list[Any]:
        """The rows of each key of each ``[node, keys]`` group (any thread); raises
        ``NotHere`` for a node not hosted and up here."""
        req: _Read | None = None
        while True:
            before = self.version
            if not before & 1:
                try:
                    out = self._lookup(groups)
                except Exception:       # noqa: BLE001 - mid-change, maybe: read again
                    out = None
                if self.version == before:
                    if out is None:     # (an error between frames: it is real)
                        out = self._lookup(groups)
                    if req is not None:
                        req.cancelled = True
                    return out
            if req is None:
                req = _Read(groups)
                self.pending.append(req)
            if req.done.wait(RETRY_EVERY):
                if req.error is not None:
                    raise req.error
                return cast("list[Any]", req.result)

    def serve_pending(self) -> None:
        """Answer the reads queued so far (the message thread, between frames)."""
        pending = self.pending
        for _ in range(len(pending)):
            req = pending.popleft()
            if req.cancelled:
                continue
            try:
                req.result = self._lookup(req.groups)
            except BaseException as e:  # noqa: BLE001 - the reader's thread raises it
                req.error = e
            req.done.set()

    def _lookup(self, groups: Sequence[Any]) -> list[Any]:
        if not self.open:
            raise NotHere("this worker has stopped")
        out = []
        domains = self.domains
        for nid, keys in groups:
            d = domains.get(nid)
            if d is None:
                d = self.old.get(nid)
            if d is None or not d.alive or d.node.kind != "reader":
                raise NotHere(f"node {nid} is not served by this worker now")
            # (keys as msgpack decodes them: a view of several ? takes arrays as tuples)
            op = cast("Reader", d.node.op)
            keys = list(keys)
            found = op.dense_parts(keys)
            out.append(op.lookup_many(keys) if found is None else pack_dense(*found))
        return out

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


def rows_found(found: Any) -> list[list[tuple[Any, ...]] | None]:
    """A group's answer as the rows of each key (the client's side): from columns
    (``pack_dense``) or from lists of rows, None for a key a partial reader does not
    hold (a hole: the client asks the controller, which upqueries it,
    ``runtime/cluster/partial.py``). ``wire.ProtocolError`` if it is neither."""
    if type(found) is not dict:
        if type(found) is not tuple:
            raise wire.ProtocolError("a read's answer: expected rows or columns")
        return [None if rows is None else list(rows) for rows in found]
    hit, cols = found.get("hit"), found.get("cols")
    if type(hit) is not bytes or type(cols) is not tuple or len(found) != 2:
        raise wire.ProtocolError("a read's answer in columns: expected hit and cols")
    held = np.frombuffer(hit, dtype=np.uint8)
    n = int(np.count_nonzero(held))
    columns: list[Sequence[Any]] = []
    for c in cols:
        if type(c) is tuple and len(c) == 3 and c[0] == "a" and c[1] in codec.COLUMN_DTYPES \
                and type(c[2]) is bytes and len(c[2]) == 8 * n:
            columns.append(column_list(np.frombuffer(c[2], dtype=np.dtype(c[1]))))
        elif type(c) is tuple and len(c) == 2 and c[0] == "v" and type(c[1]) is tuple \
                and len(c[1]) == n:
            columns.append(c[1])
        else:
            raise wire.ProtocolError("a read's answer in columns: a malformed column")
    if not columns:
        raise wire.ProtocolError("a read's answer in columns: no column")
    return cast("list[list[tuple[Any, ...]] | None]", rows_by_key(held.astype(bool), columns))


def _check_request(f: Any) -> tuple[int, list[Any]]:
    if not (type(f) is tuple and len(f) == 3 and f[0] == "read" and type(f[1]) is int
            and type(f[2]) is tuple
            and all(type(g) is tuple and len(g) == 2 and type(g[0]) is str
                    and type(g[1]) is tuple for g in f[2])):
        raise wire.ProtocolError("expected [\"read\", id, [[node, [key, ...]], ...]]")
    return f[1], list(f[2])


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
        self.admission.serve(self.sock, self._connection, "read")

    def _connection(self, sock: socket.socket) -> None:
        conn = wire.Connection(sock)
        try:
            wire.server_handshake(conn, self.token, role_expected="client")
            self._serve(conn)
        except wire.ConnectionClosed:
            pass
        except (OSError, wire.ProtocolError) as e:
            log.warning("closed read connection from %s: %s", conn.peer, e)
        finally:
            conn.close()

    def _serve(self, conn: wire.Connection) -> None:
        answer = self.reads.answer
        while True:
            rid, groups = _check_request(conn.recv())
            try:
                rows = answer(groups)
            except NotHere as e:
                conn.send(["moved", rid, str(e)])
            except Error as e:
                conn.send(["error", rid, type(e).__name__, str(e)])
            except Exception as e:      # (a key the reader cannot take: unhashable, ...)
                conn.send(["error", rid, "Error", f"{type(e).__name__}: {e}"])
            else:
                conn.send(["ok", rid, rows])

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
