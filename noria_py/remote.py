"""The client of a running ``noria-py serve``: the embedded API, over one connection.

Each call is one request to the controller and one answer; errors come back as the
same ``noria_py.Error`` subclasses the embedded engine raises (by name: nothing but
plain data crosses the network). An insert of ``COLUMNS_MIN`` rows or more whose
every column is all ints or all floats travels as int64/float64 columns
(``insert_columns``), which the controller takes as arrays; it checks them as it
checks rows, so either form gives the same rows or the same error.

Reads of a view by key (``RemoteView.lookup``, ``lookup_many``), and by range for a view
with range parameters (``col > ?``: ``_read_range``, checked here by the embedded
engine's ``arguments.RangeCheck``), go to the workers that host its reader shards, not
through the controller (``runtime/cluster/reads.py``). A
view's placement (its reader shards, in shard order, and each one's worker's read
address) is asked of the controller at the first read and kept; a key's shard is
``hashing.shard_of``, the stable hash the engine shards readers by. ``lookup`` sends
one ``get`` request (one key of one reader shard) to one worker. ``lookup_many``
sends one request per worker, to all of them before it waits for any (int keys as
int64 bytes, routed and put back in order with numpy; their rows made with the cyclic
collector paused: ``reads.collector_paused``). A worker on this machine is
read on its read port's Unix socket (``UNIX_SOCKETS``). A worker that
answers ``moved`` (the reader is not hosted there now, or is being recovered), or that
cannot be reached, makes the view's placement be asked again (the controller waits
for a reader being recovered, as a read through it would) and the read sent again: a
read is idempotent. After ``READ_TIMEOUT`` seconds of this, a ``RecoveryError``. A
worker silent for ``RECHECK_EVERY`` seconds (stopped, say, not dead: its connections
stay open) has the controller asked whether the reader is still there; once it is not,
the read goes where it is now.

A controller that went away (killed, and started again on its data directory:
``runtime/cluster/restart.py``) is dialed again for ``RECONNECT_TIMEOUT`` seconds,
then a ``ConnectError``. A call finding its connection ended before it sends (the
controller died between two calls) reconnects and is sent: it never ran. A call whose
connection ends after it was sent is sent again only when running it twice changes
nothing (``IDEMPOTENT``: reads, ``wait``); a write or statement raises
``ConnectError`` saying that it may or may not have been applied. Meanwhile reads
by key go on at the workers, which keep serving their readers as they were; after a
reconnection every view's placement is asked again (the new controller's readers).
"""
from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import secrets
import select
import socket
import struct
import threading
import time
from operator import itemgetter
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Sequence, TypeVar, cast
from urllib.parse import parse_qs, urlparse

import numpy as np
import pyarrow as pa

import sql_frontend
from sql_frontend import wire as plan_wire
from sql_frontend.plan import OrderKey
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

from . import arguments, errors
from .arrowio import arrow_columns, as_arrow_table, is_frame, to_ipc
from .dbapi import Cursor
from .errors import (
    ArgumentError,
    ArityError,
    ClosedError,
    ConnectError,
    Error,
    NotSupportedError,
    RecoveryError,
    TypeMismatchError,
    UnknownViewError,
)
from .hashing import shard_of
from .ordering import order_key
from .recovery import RecoveryReport
from .result import Result, ViewFrames
from .runtime.cluster import tokens, wire
from .runtime.cluster.reads import pack_keys, rows_found, rows_in_order
from .subscribe import Change, Subscription, buffer_size
from .tls import client_context as tls_client_context
from .tls import client_option as tls_client_option
from .tls import connect as tls_connect

DEFAULT_PORT = 7878
#: seconds a read goes on asking where its reader is (and for a worker's answer)
#: before a RecoveryError: as long as a read through the controller waits for it
READ_TIMEOUT = 60.0
#: seconds without a worker's answer after which the client asks the controller whether
#: the reader is still there (a worker stopped, not dead, is replaced meanwhile)
RECHECK_EVERY = 2.0
#: nanoseconds a ``lookup`` polls for its answer before it sleeps in ``recv``
#: (``wire.Connection.spin``; runtime/cluster/reads.py: "A lookup's round trip wakes
#: no thread")
ANSWER_SPIN_NS = 100_000
#: seconds a write is sent again while its base's worker says ``moved`` (a recovery)
WRITE_MOVED_TIMEOUT = 60.0
#: (``RemoteDatabase._write_places``: not asked yet)
_ASK: Any = object()


class _Lost(Exception):
    """(``RemoteDatabase._write_at``: the connection broke after the write was sent, or
    the worker answered ``doubt``: its controller connection ended, the controller
    restarted, or its worker was declared lost while it lived on)"""

#: seconds to connect to a worker's read port (the controller's: ``connect(timeout=)``)
CONNECT_TIMEOUT = 5.0
#: seconds a client dials a controller that went away (restarted: restart.py) before
#: a ConnectError
RECONNECT_TIMEOUT = 30.0
#: a worker's read port reached on a loopback address is read on the Unix socket its
#: welcome names (Linux: the abstract namespace, that of the network the loopback
#: address is in), a shorter way through the kernel than TCP; False: TCP always
UNIX_SOCKETS = True
#: ``lookup_many`` of at least this many int keys sends them as int64 bytes, which a
#: worker reads as an array (``reads.pack_keys``; a dense reader's ``DENSE_MANY``)
PACK_KEYS = 32
#: requests sent again on a new connection when the old one ended before their answer:
#: running one twice changes nothing
IDEMPOTENT = frozenset({"table", "schema", "keys", "count", "view", "lookup", "upquery",
                        "all", "tables", "views", "wait", "graph", "recoveries", "queries",
                        "placement", "regime", "writes", "write_placement",
                        "write_landed"})


def _report(d: dict) -> RecoveryReport:
    known = {k: d[k] for k in ("node", "strategy", "seconds", "replayed_messages", "purged",
                               "rows", "automatic") if k in d}
    r = RecoveryReport(**known)
    r.purged = list(r.purged)
    for k, v in d.items():
        if k not in known:
            setattr(r, k, v)
    return r


_T = TypeVar("_T")


def _rows(rows) -> list[tuple]:
    return [tuple(r) for r in rows]


def _plain_rows(rows: Any, what: str) -> list:
    """Rows to send, their values the engine's own types (``arguments.plain``: numpy's,
    pandas', Decimals have no wire form), for the server to check. A row that is not a
    tuple or list goes as it is, for the server to refuse."""
    return [[arguments.plain(v) for v in r] if isinstance(r, (tuple, list)) else r
            for r in arguments.many(rows, what)]


#: values that go as they are (``arguments.plain`` returns them unchanged)
_PLAIN = frozenset({int, float, str, bool, type(None), datetime.date})


#: an insert of at least this many rows whose columns are all Python ints or all
#: floats goes as columns (``insert_columns``), smaller ones as rows: the size from
#: which a base keeps a write as columns (``tuning.ARRAY_MIN``'s default)
COLUMNS_MIN = 32


def _int_float_columns(rows: list, arity: int) -> list[list[Any]] | None:
    """``rows`` as the columns of a batch on the wire (``wire.encode_batch``'s: ``["i",
    int64 bytes]`` or ``["f", float64 bytes]``), or None to send them as rows: fewer
    than ``COLUMNS_MIN``, a row not a tuple or list of ``arity`` values, or a column
    not all ``int`` (exactly: a bool is not one) within int64, or all ``float`` with no
    NaN. Such columns are exactly the rows' values, and the server checks them against
    the table's types as it checks rows, so a write takes the same path to the same
    result either way; the server just makes no Python object per value (the
    controller's decoding and checking of rows was most of its CPU per write)."""
    if len(rows) < COLUMNS_MIN or arity == 0:
        return None
    kinds = set(map(type, rows))
    if not kinds <= {tuple, list} or set(map(len, rows)) != {arity}:
        return None
    out: list[list[Any]] = []
    for i in range(arity):
        col = list(map(itemgetter(i), rows))
        seen = set(map(type, col))
        try:
            if seen == {int}:
                out.append(wire.encode_numbers(np.array(col, dtype=np.int64)))
            elif seen == {float}:
                a = np.array(col, dtype=np.float64)
                if np.isnan(a).any():
                    return None
                out.append(wire.encode_numbers(a))
            else:
                return None
        except OverflowError:           # an int past int64: the server names it
            return None
    return out


def _plain_key(key: Any) -> Any:
    """A key to send: a value, or a list for a tuple or list of values, each
    ``arguments.plain`` (one it refuses, which the embedded engine would look up and
    find nothing for, has no wire form: it is refused here)."""
    if isinstance(key, (tuple, list)):
        return [arguments.plain(v) for v in key]
    return arguments.plain(key)


def _give_up_after(sock: socket.socket, seconds: float) -> None:
    """Blocking reads and writes on ``sock`` that fail (``BlockingIOError``) after
    ``seconds``: a worker stopped, not dead, is not waited for forever. The socket's own
    options, not ``settimeout``, which makes Python poll() before each call (4 µs a
    read here)."""
    tv = struct.pack("ll", int(seconds), int(seconds % 1 * 1e6))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    except OSError:                          # (another layout of struct timeval)
        sock.settimeout(seconds)


def _loopback(host: str) -> bool:
    """Whether ``host`` (an address) is this machine's loopback."""
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class _Stale(Exception):
    """A view's placement is out of date (a worker said ``moved``, or is gone)."""


class _Link:
    """The connection to one worker's read port, made at its first use; one request
    at a time (``lock``)."""

    __slots__ = ("address", "lock", "conn")

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.lock = threading.Lock()
        self.conn: wire.Connection | None = None

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _Placement:
    """Where a view's reader shards are (``Server.m_placement``)."""

    __slots__ = ("nodes", "links", "check", "fits", "generation", "ranged", "sort")

    def __init__(self, nodes: list[str], links: list[_Link] | None,
                 check: arguments.KeyCheck, generation: int = 0,
                 ranged: arguments.RangeCheck | None = None,
                 sort: Callable[[tuple], Any] | None = None) -> None:
        self.nodes = nodes
        self.links = links                  # None: read through the controller
        self.check = check
        self.fits = check.fits
        #: the controller connection it was asked on (``RemoteDatabase._generation``)
        self.generation = generation
        #: a view with range parameters: its reads' check (None: reads by key), and the
        #: ORDER BY merging several shards' rows (None: none, or by a hidden column)
        self.ranged = ranged
        self.sort = sort


def _ended(conn: wire.Connection) -> bool:
    """Whether the server sent something, or hung up, on a connection between two
    calls: it only ever does that to end it (a ``bye``, or its end)."""
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class RemoteDatabase:
    """``noria_py.connect("noria://host:port")``. A controller that went away is
    dialed again for ``reconnect`` seconds (a ``serve --data-dir`` started again comes
    back at the same address), then ``ConnectError``; a write under way when it went
    away raises ``ConnectError`` (applied whole, or not at all: read to know), and
    reads of views already read go on at the workers meanwhile."""

    def __init__(self, host: str, port: int, token: str | None = None,
                 timeout: float | None = None, tls: str | bool | None = None,
                 reconnect: float = RECONNECT_TIMEOUT) -> None:
        self.address = (host, port)
        self._token, self._timeout = token, timeout
        #: seconds a controller that went away is dialed again (module docstring)
        self._reconnect_timeout = reconnect
        #: connections to the controller made after one ended: a placement asked on an
        #: earlier one is asked again
        self._generation = 0
        # (``tls``: a CA file, or True for the system's: every connection, the workers'
        # read ports included, is TLS, checked against it: noria_py/tls.py)
        tls = tls_client_option(tls)
        self._tls = None if tls is None else tls_client_context(tls)
        self._conn = self._connect()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._links: dict[tuple[str, int], _Link] = {}     # workers' read ports
        #: table -> (its base node, its worker's link), or None: written through the
        #: controller (``_write``)
        self._write_places: dict[str, tuple[str, _Link, list[Any]] | None] = {}

    def _connect(self, address: tuple[str, int] | None = None,
                 timeout: float | None = None,
                 welcome: dict[str, Any] | None = None) -> wire.Connection:
        """A connection to the controller, or to a worker's read port at ``address``,
        past the handshake (what the server's welcome said, into ``welcome``)."""
        address = address or self.address
        sock = socket.create_connection(address, timeout=timeout or self._timeout)
        if self._tls is not None:
            sock = tls_connect(sock, self._tls, address[0])
        sock.settimeout(None)
        conn = wire.Connection(sock)
        try:
            said = wire.client_handshake(conn, self._token, {"role": "client"})
            if welcome is not None:
                welcome.update(said)
        except wire.ConnectionClosed:
            conn.close()
            if self._tls is not None:
                raise
            raise ConnectError(f"{address[0]}:{address[1]} closed the connection before "
                               "its challenge; a server started with --tls-cert speaks only "
                               "TLS: connect with tls=(its CA file)") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _reconnect(self) -> None:
        """A new connection to the controller, dialed for ``RECONNECT_TIMEOUT`` seconds
        (a controller restarting on its data directory takes a few): else
        ``ConnectError``."""
        self._conn.close()
        deadline = time.monotonic() + self._reconnect_timeout
        while True:
            try:
                self._conn = self._connect()
                break
            except wire.AuthError as e:
                raise ConnectError(f"the server at {self.address[0]}:{self.address[1]} "
                                   f"refused this client on reconnecting: {e}") from None
            except (OSError, wire.ProtocolError) as e:
                if time.monotonic() > deadline:
                    raise ConnectError(
                        f"the server at {self.address[0]}:{self.address[1]} went away and "
                        f"did not come back within {self._reconnect_timeout:.0f} s ({e})"
                    ) from None
                time.sleep(0.05)
        self._generation += 1

    # ------------------------------------------------------------ writes at the workers

    def _write(self, table: str, method: str, args: list[Any]) -> None:
        """A table write: at its base's worker when the server takes writes there
        (``serve --writes worker``; asked once per table, again after ``moved``), else
        the request ``method`` to the controller. Answered once durable. A worker lost
        after the write was sent, or the controller (a restart: the worker answers
        ``doubt``): the controller, the restarted one with it, says whether it landed
        (done) or not (sent again, with the same tag, where the base is now); a
        ``ConnectError`` only where it cannot tell: it may or may not have been
        applied."""
        deadline = time.monotonic() + WRITE_MOVED_TIMEOUT
        tag = secrets.randbits(62) or 1     # (its name in the history: ``write_landed``)
        while True:
            where = self._write_places.get(table, _ASK)
            if where is _ASK:
                said = self._call("write_placement", table)
                where = None
                if said is not None:
                    node, (host, port) = said
                    address = (host or self.address[0], port)
                    link = self._links.get(address)
                    if link is None:
                        link = self._links.setdefault(address, _Link(address))
                    where = (str(node), link, [host, port])
                self._write_places[table] = where
            if where is None:
                self._call(method, table, *args)
                return
            why = self._write_at(cast("tuple[str, _Link, list[Any]]", where), method, args, tag)
            if why is None:
                return
            self._write_places.pop(table, None)     # (moved: ask where it is now)
            if isinstance(why, _Lost) and self._landed(table, tag, where, deadline, why):
                return
            if time.monotonic() > deadline:
                raise RecoveryError(f"table {table!r} took no write for "
                                    f"{WRITE_MOVED_TIMEOUT:.0f} s: {why}")
            time.sleep(0.01)

    def _landed(self, table: str, tag: int, where: tuple[str, _Link, list[Any]],
                deadline: float, lost: BaseException) -> bool:
        """A write whose worker's connection broke before its answer, or that it
        answered ``doubt``: whether the history took it (done), or not (False: it was
        never applied, send it again), asked of the controller until it knows
        (``Server.m_write_landed``: once the base is up elsewhere, by the tags its log
        took; a restarted controller's base is another node, and the tags in the
        workers' logs say). Sound because a worker declared lost is fenced first: no
        live worker takes its frames after, so its write is in the log the base is
        restored from, or nowhere (``ClusterRuntime.forward`` asks the same)."""
        while True:
            said = self._call("write_landed", table, tag, where[2], where[0])
            if said is not None:
                return bool(said)
            if time.monotonic() > deadline:
                raise ConnectError(f"{lost}: it may or may not have been applied") from None
            time.sleep(0.05)

    def _write_at(self, where: tuple[str, _Link, list[Any]], method: str, args: list[Any],
                  tag: int) -> Any:
        """One write at a base's worker: None once done, a ``_Lost`` if the connection
        broke after it was sent or the worker answered ``doubt`` (its controller was
        lost: ``_landed`` says whether it was applied), or why it was not taken there
        (nothing written: ask where the base is now)."""
        node, link, _ = where
        with link.lock:
            try:
                if link.conn is None:
                    link.conn = self._read_port(link.address)
            except (OSError, wire.ProtocolError) as e:
                link.drop()
                return f"{link.address[0]}:{link.address[1]}: {e}"
            conn = link.conn
            rid = next(self._ids)
            try:
                conn.send(["write", rid, node, method, args, tag])
                while True:
                    try:
                        f = conn.recv()
                        break
                    except (socket.timeout, BlockingIOError):
                        continue        # (a write waits for its history, not for a view)
            except (OSError, wire.ProtocolError) as e:
                link.drop()
                return _Lost(f"the connection to the worker at {link.address[0]}:"
                             f"{link.address[1]} was lost during a write to it ({e})")
            if f[1] == rid:
                if f[0] == "ok":
                    return None
                if f[0] == "moved":
                    return str(f[2])
                if f[0] == "doubt":     # (its controller lost: the next one says)
                    return _Lost(f"the worker at {link.address[0]}:{link.address[1]}: "
                                  f"{f[2]}")
                if f[0] == "error":
                    raise errors.named(f[2], f[3])
            link.drop()
        raise wire.ProtocolError(f"unexpected answer {f[0]!r} to a write from {link.address}")

    # ------------------------------------------------------------ reads at the workers

    def _placement(self, view: str) -> _Placement:
        nodes, addresses, (what, names, types), ranged = self._call("placement", view)
        generation = self._generation
        check = arguments.KeyCheck(what, list(names), [SqlType(t) for t in types])
        range_check, sort = None, None
        if ranged is not None:
            bounds, order = ranged
            range_check = arguments.RangeCheck(
                what, check, [(op, slot, SqlType(t)) for op, slot, t in bounds],
                len(names) + len(bounds))
            if order:
                sort = order_key([OrderKey(c, d, f) for c, d, f in order])
        links: list[_Link] | None = None
        if all(a is not None for a in addresses):
            links = []
            for host, port in addresses:
                address = (host or self.address[0], port)     # "": the controller's host
                link = self._links.get(address)
                if link is None:
                    link = self._links.setdefault(address, _Link(address))
                links.append(link)
        return _Placement(list(nodes), links, check, generation, range_check, sort)

    def _read_at(self, view: str, where: _Placement, keys: list,
                 arity: int) -> list[list[tuple] | None]:
        """The rows of each key (as sent: a value, or a list of values), read at the
        workers hosting their reader shards: one request per worker, all sent before
        any answer is awaited; None for a key a partial reader does not hold. Raises
        ``_Stale`` when the placement is out of date."""
        links, nodes = cast(list[_Link], where.links), where.nodes
        n = len(nodes)
        ints = None
        if arity == 1 and len(keys) >= PACK_KEYS and set(map(type, keys)) <= {int}:
            try:
                ints = np.array(keys, dtype=np.int64)
            except OverflowError:               # (an int past 64 bits: sent as it is)
                pass
        if n == 1:
            found = rows_found(self._ask(view, where, links[0], "read", [
                [nodes[0], keys if ints is None else pack_keys(ints)]])[0])
            if len(found) != len(keys):
                raise wire.ProtocolError("a read's answer: not one per key asked")
            return found
        if ints is not None:
            shard = ints % n                    # (hashing.value_hash of an int is itself)
        elif arity == 1 and set(map(type, keys)) <= {int}:
            shard = np.array([k % n for k in keys])
        else:
            shard = np.array([self._shard(where, k, arity, n) for k in keys])
        asks: dict[_Link, list[list[Any]]] = {}
        at: list[np.ndarray] = []
        for s in range(n):
            mine = np.flatnonzero(shard == s)
            if len(mine):
                sent = (pack_keys(ints[mine]) if ints is not None
                        else [keys[i] for i in mine.tolist()])
                asks.setdefault(links[s], []).append([nodes[s], sent])
            at.append(mine)
        answers = self._exchange(view, where, {link: [g] for link, g in asks.items()})
        parts = []
        taken = dict.fromkeys(asks, 0)
        for s in range(n):
            if len(at[s]):
                link = links[s]
                parts.append((at[s], answers[link][taken[link]]))
                taken[link] += 1
        return rows_in_order(len(keys), parts)

    def _read_one(self, view: str, where: _Placement, key: Any,
                  arity: int) -> list[tuple] | None:
        """The rows of one key (``lookup``), None for a hole of a partial reader: one
        ``get`` request to one worker (``reads.ReadServer``). Raises ``_Stale`` as
        ``_read_at`` does."""
        nodes = where.nodes
        n = len(nodes)
        if n == 1:
            s = 0
        elif arity == 1 and type(key) is int:
            s = key % n                    # (hashing.value_hash of an int is itself)
        else:
            s = self._shard(where, key, arity, n)
        rows = self._ask(view, where, cast(list[_Link], where.links)[s], "get", nodes[s], key)
        if rows is None:
            return None
        if type(rows) is not tuple:
            raise wire.ProtocolError("a read's answer: expected rows")
        return list(rows)

    def _read_range(self, view: str, where: _Placement, key: Any,
                    bounds: list[tuple[str, Any]]) -> list[tuple]:
        """A range read (``arguments.RangeCheck``'s ``key`` and ``bounds``) at the
        workers: with an equality key, at its shard alone; without, at every shard (one
        ``range`` request per worker, naming its shards), the rows merged by the view's
        ORDER BY. Raises ``_Stale`` as ``_read_at`` does."""
        nodes, links = where.nodes, cast(list[_Link], where.links)
        n = len(nodes)
        ranged = cast(arguments.RangeCheck, where.ranged)
        asks: dict[_Link, list[Any]] = {}
        if ranged.key_slots:
            s = 0 if n == 1 else self._shard(where, key, len(ranged.key_slots), n)
            asks[links[s]] = [[nodes[s]], key, bounds]
        else:
            for link, node in zip(links, nodes):
                asks.setdefault(link, [[], key, bounds])[0].append(node)
        answers = self._exchange(view, where, asks, "range")
        if any(type(a) is not tuple for a in answers.values()):
            raise wire.ProtocolError("a range read's answer: expected rows")
        rows = [r for a in answers.values() for r in a]
        if n > 1 and not ranged.key_slots and where.sort is not None:
            rows.sort(key=where.sort)
        return rows

    @staticmethod
    def _shard(where: _Placement, k: Any, arity: int, n: int) -> int:
        """The reader shard of key ``k``, as the engine's ``View._shard`` picks it."""
        try:
            return shard_of(tuple(k) if arity > 1 else (k,), n)
        except TypeError as e:          # no stable hash: not the value of a column
            where.check(tuple(k) if arity > 1 and isinstance(k, list) else (k,))
            raise TypeMismatchError(f"{where.check.what}: cannot look up {k!r}: {e}") from None

    def _exchange(self, view: str, where: _Placement, asks: dict[_Link, list[Any]],
                  kind: str = "read") -> dict[_Link, Any]:
        """Send each worker its request ``[kind, id, *args]`` (``"read"``: ``[groups]``,
        its ``[node, keys]`` groups; ``"range"``: ``[nodes, key, bounds]``), then take
        each one's answer. Raises ``_Stale`` if a worker is gone or says ``moved``, or
        is silent for ``RECHECK_EVERY`` seconds while the controller places the view
        elsewhere."""
        if len(asks) == 1:
            ((link, args),) = asks.items()
            return {link: self._ask(view, where, link, kind, *args)}
        order = sorted(asks, key=lambda link: link.address)    # (one lock order: no deadlock)
        for link in order:
            link.lock.acquire()
        try:
            sent: list[tuple[_Link, int]] = []
            stale = ""                           # why the placement is out of date
            for link in order:
                try:
                    if link.conn is None:
                        link.conn = self._read_port(link.address)
                    rid = next(self._ids)
                    link.conn.send([kind, rid, *asks[link]])
                    sent.append((link, rid))
                except (OSError, wire.ProtocolError) as e:
                    link.drop()                  # (the worker is gone: ask where now)
                    stale = f"{link.address[0]}:{link.address[1]}: {e}"
            answers: dict[_Link, Any] = {}
            error = None
            for link, rid in sent:
                try:
                    f = self._answer(view, where, link)
                except (OSError, wire.ProtocolError) as e:
                    link.drop()
                    stale = f"{link.address[0]}:{link.address[1]}: {e}"
                    continue
                if f[0] == "ok" and f[1] == rid:
                    answers[link] = f[2]
                elif f[0] == "moved" and f[1] == rid:
                    stale = str(f[2])
                elif f[0] == "error" and f[1] == rid:
                    error = errors.named(f[2], f[3])
                else:
                    link.drop()
                    stale = f"unexpected answer {f[0]!r} from {link.address}"
        finally:
            for link in order:
                link.lock.release()
        if error is not None:
            raise error
        if stale:
            raise _Stale(stale)
        return answers

    def _ask(self, view: str, where: _Placement, link: _Link, kind: str, *args: Any) -> Any:
        """``_exchange`` with one worker: its answer to the request ``[kind, id,
        *args]`` (``"read"``, groups; ``"get"``, node, key), the same way."""
        with link.lock:
            try:
                conn = link.conn
                if conn is None:
                    conn = link.conn = self._read_port(link.address)
                rid = next(self._ids)
                conn.send([kind, rid, *args])
                if kind == "get":           # (due in microseconds: not asleep for it)
                    conn.spin(ANSWER_SPIN_NS)
                f = self._answer(view, where, link)
            except (OSError, wire.ProtocolError) as e:
                link.drop()                      # (the worker is gone: ask where now)
                raise _Stale(f"{link.address[0]}:{link.address[1]}: {e}") from None
            if f[1] == rid:
                if f[0] == "ok":
                    return f[2]
                if f[0] == "moved":
                    raise _Stale(str(f[2]))
                if f[0] == "error":
                    raise errors.named(f[2], f[3])
            link.drop()
        raise _Stale(f"unexpected answer {f[0]!r} from {link.address}")

    def _read_port(self, address: tuple[str, int]) -> wire.Connection:
        """A connection to the worker's read port at ``address``: on this machine (a
        loopback address) and without TLS, its Unix socket, which the port's welcome
        names (``UNIX_SOCKETS``), else the TCP connection."""
        welcome: dict[str, Any] = {}
        conn = self._connect(address, CONNECT_TIMEOUT, welcome)
        name = welcome.get("unix")
        if (UNIX_SOCKETS and type(name) is str and self._tls is None
                and _loopback(conn.sock.getpeername()[0])):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(CONNECT_TIMEOUT)
                sock.connect(name)
                sock.settimeout(None)
                local = wire.Connection(sock)
                wire.client_handshake(local, self._token, {"role": "client"})
            except (OSError, wire.ProtocolError):
                sock.close()                # (another network namespace, say: TCP, then)
            else:
                conn.close()
                conn = local
        _give_up_after(conn.sock, RECHECK_EVERY)
        return conn

    def _answer(self, view: str, where: _Placement, link: _Link) -> Any:
        """The next frame from ``link``'s worker; while it is silent, every
        ``RECHECK_EVERY`` seconds, the controller is asked where the view's readers are:
        a ``socket.timeout`` once they are no longer where ``where`` says."""
        conn = cast(wire.Connection, link.conn)
        while True:
            try:
                return conn.recv()
            except (socket.timeout, BlockingIOError):      # (BlockingIOError: _give_up_after)
                now = self._placement(view).links
                if now is None or [x.address for x in now] != [
                        x.address for x in cast(list[_Link], where.links)]:
                    raise
                # (still placed there: a long read, or a worker not yet found hung)

    def _call(self, method: str, *args) -> Any:
        if self._closed:
            raise ClosedError("this database handle is closed")
        with self._lock:
            rid = next(self._ids)
            frame = ["call", rid, method, list(args)]
            if _ended(self._conn):
                self._reconnect()       # (nothing sent yet: safe for any request)
            try:
                self._conn.send(frame)
            except OSError:
                pass                # (closed by the server: what it sent last says why)
            try:
                f = self._conn.recv()
            except (OSError, wire.ProtocolError) as e:
                if method not in IDEMPOTENT:
                    raise ConnectError(
                        f"the connection to the server at {self.address[0]}:"
                        f"{self.address[1]} was lost during {method!r} ({e}): it may or "
                        "may not have been applied; the next call reconnects") from None
                self._reconnect()
                try:
                    self._conn.send(frame)
                    f = self._conn.recv()
                except (OSError, wire.ProtocolError) as e:
                    raise ConnectError(f"the connection to the server at {self.address[0]}:"
                                       f"{self.address[1]} was lost again during {method!r} "
                                       f"({e})") from None
            if f[0] == "bye":
                # the server closed an idle connection without reading this request:
                # send it again on a new one
                self._conn.close()
                self._conn = self._connect()
                self._conn.send(["call", rid, method, list(args)])
                f = self._conn.recv()
        if f[0] == "ok":
            return f[2]
        raise errors.named(f[2], f[3])

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        """Run one SQL statement on the server; ``?`` take ``params`` in order."""
        columns, rows, types, rowcount, *typed = self._call("execute", sql,
                                                            list(arguments.params(params)))
        res = Result(columns, _rows(rows), [SqlType(t) for t in types], rowcount)
        if typed:       # (a SELECT: the PostgreSQL types its plan says, Result.plan_oids)
            res.typed, res.plan_oids = True, typed[0]
        return res

    def table(self, name: str) -> "RemoteTable":
        """The handle of the server's table ``name``."""
        return RemoteTable(self, name, list(self._call("table", name)))

    def view(self, name: str) -> "RemoteView":
        """The handle of the server's view ``name``."""
        columns, types, arity = self._call("view", name)
        return RemoteView(self, name, list(columns), [SqlType(t) for t in types], arity)

    def tables(self) -> list[str]:
        """The names of the server's tables."""
        return list(self._call("tables"))

    def views(self) -> list[str]:
        """The names of the server's named views."""
        return list(self._call("views"))

    def wait(self) -> None:
        """Return once every write the server accepted is reflected in every view."""
        self._call("wait")

    def graph(self) -> list[dict]:
        """The cluster's dataflow graph, a dict per node shard (with its ``worker`` and ``pid``)."""
        out = []
        for d in self._call("graph"):
            d = dict(d)
            d["parents"], d["children"] = list(d["parents"]), list(d["children"])
            out.append(d)
        return out

    def memory(self, bases: bool = True) -> dict[str, int]:
        """``Database.memory`` on the server: bytes per stateful node shard (node id ->
        bytes), each measured by the worker hosting it (a base table by the controller,
        which keeps its rows); ``bases=False`` leaves out the base tables."""
        if type(bases) is not bool:
            raise ArgumentError(f"bases must be True or False, got {bases!r}")
        return {str(k): int(v) for k, v in self._call("memory", bases).items()}

    def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any]]) -> int:
        """``Database.executemany`` on the server: an INSERT's rows as one write."""
        return int(self._call("executemany", sql,
                              [list(arguments.params(p)) for p in seq_of_params]))

    def execute_batch(self, statements: Iterable[tuple[str, Sequence[Any]]]) -> int:
        """``Database.execute_batch`` for statements of one SQL text (``executemany``);
        others are refused, as they could not be one write here."""
        items = list(statements)
        if not items:
            return 0
        if len({sql for sql, _ in items}) != 1:
            raise NotSupportedError("a batch of different statements is not supported over "
                                    "a cluster connection; send them one by one")
        return self.executemany(items[0][0], [p for _, p in items])

    def prepare(self, sql: str) -> "RemotePrepared":
        """``Database.prepare`` over the connection: parameter types from the server's
        catalog; the statement runs on the server at each ``run``."""
        return RemotePrepared(self, sql)

    def cursor(self) -> Cursor:
        """A DB-API 2.0 cursor (noria_py/dbapi.py) over this connection."""
        return Cursor(self)

    def commit(self) -> None:
        """Nothing to do: the server applies each statement when it runs."""

    def rollback(self) -> None:
        """Refused: the server applies each statement when it runs (``NotSupportedError``)."""
        raise NotSupportedError("noria-py applies each statement when it runs; there is "
                                "no transaction to roll back")

    def subscribe(self, view: str, key: Any = None, *, callback: Callable[..., Any] | None = None,
                  buffer: int | None = None) -> Subscription:
        """``Database.subscribe`` on the server, over a connection of its own: the
        changes come as the server's quiet points find them (noria_py/subscribe.py).
        ``buffer`` changes are held at either end before the subscription is ended for
        falling behind; a lost connection ends it too. ``close()`` hangs up."""
        if self._closed:
            raise ClosedError("this database handle is closed")
        size = buffer_size(buffer)
        wire_key = None if key is None else _plain_key(key if isinstance(key, (tuple, list))
                                                       else (key,))
        conn = self._connect()
        try:
            conn.send(["call", 1, "subscribe", [view, wire_key, size]])
            f = conn.recv()
        except BaseException:
            conn.close()
            raise
        if f[0] != "ok":
            conn.close()
            raise errors.named(f[2], f[3])
        key_t = None if wire_key is None else tuple(wire_key)
        sub = Subscription(view, key_t, (), 0, size, lambda _: conn.close())

        def receive() -> None:
            try:
                while True:
                    f = conn.recv()
                    if f[0] == "change":
                        sub.put(Change(f[1], [(tuple(row), diff) for row, diff in f[2]]))
                    elif f[0] == "end":
                        sub.fail(f[2])
                        return
                    else:
                        raise wire.ProtocolError(f"unexpected frame {f[0]!r} in a subscription")
            except (OSError, wire.ProtocolError) as e:
                if not sub.ended:
                    sub.fail(f"the connection to the server was lost ({e}); subscribe again")
            finally:
                conn.close()
        threading.Thread(target=receive, daemon=True, name=f"subscribe-{view}").start()
        if callback is not None:
            sub.run_callback(callback)
        return sub

    def queries(self) -> list[dict]:
        """The server's unnamed views of ad-hoc queries (``Database.queries``)."""
        return [dict(d) for d in self._call("queries")]

    def drop_query(self, name: str | None = None) -> None:
        """``Database.drop_query`` on the server."""
        self._call("drop_query", name)

    def fail(self, node_id: str) -> None:
        """Fail a node shard: SIGKILL the worker hosting it (its other nodes go with it)."""
        self._call("fail", node_id)

    def recover(self, node_id: str, strategy: str | None = None) -> RecoveryReport:
        """Recover a failed node on the server (the cluster also recovers by itself,
        with the strategy of its regime, the default)."""
        return _report(self._call("recover", node_id, strategy))

    def recoveries(self) -> list[RecoveryReport]:
        """The recoveries the cluster did, oldest first."""
        return [_report(d) for d in self._call("recoveries")]

    @property
    def regime(self) -> str:
        """The cluster's fault-tolerance regime (``noria-py serve --regime``), as
        ``Database.regime`` says it for an embedded engine."""
        return str(self._call("regime"))

    @property
    def writes(self) -> str:
        """Where the cluster validates and takes writes (``noria-py serve --writes``):
        ``"worker"``, at each table's base's worker, which this client then writes to,
        or ``"controller"``; with ``serve --writes auto``, what it chose."""
        return str(self._call("writes"))

    def close(self) -> None:
        """Close the connection; later calls raise ``ClosedError``."""
        if not self._closed:
            self._closed = True
            self._conn.close()
            for link in list(self._links.values()):
                with link.lock:
                    link.drop()

    def __enter__(self) -> "RemoteDatabase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteTable:
    def __init__(self, db: RemoteDatabase, name: str, columns: list[str]) -> None:
        self._db = db
        self.name = name
        self.columns = columns

    @property
    def schema(self) -> TableSchema:
        return plan_wire.from_data(self._db._call("schema", self.name)[1])

    @property
    def sql(self) -> str:
        return self._db._call("schema", self.name)[0]

    def primary_keys(self) -> set[tuple]:
        return {tuple(k) for k in self._db._call("keys", self.name)}

    def insert(self, rows: Iterable[Sequence]) -> None:
        if is_frame(rows):
            return self.insert_arrow(rows)
        what = f"the rows for table {self.name!r}"
        rows = arguments.many(rows, what)
        cols = _int_float_columns(rows, len(self.columns))
        if cols is not None:
            self._db._write(self.name, "insert_columns", [len(rows), cols])
        else:
            self._db._write(self.name, "insert", [_plain_rows(rows, what)])

    def insert_columns(self, columns: Sequence[Any]) -> None:
        """As the embedded ``Table.insert_columns``: int64 and float64 arrays travel as
        their bytes (``insert_columns``), anything else as rows."""
        arrays = arguments.columns(columns, self.columns, self.name)
        if all(a.dtype in (np.int64, np.float64) for a in arrays):
            self._db._write(self.name, "insert_columns",
                            [len(arrays[0]), [wire.encode_numbers(a) for a in arrays]])
        else:
            self.insert(list(zip(*[a.tolist() for a in arrays])))

    def insert_arrow(self, table) -> None:
        """As the embedded ``Table.insert_arrow``: the columns travel as an Arrow IPC
        stream and the server inserts them as arrays where the table takes them."""
        cols = arrow_columns(as_arrow_table(table), self.columns, self.name)
        if len(cols[0]):
            self._db._write(self.name, "insert_arrow",
                            [to_ipc(pa.Table.from_arrays(cols, names=self.columns))])

    def delete(self, rows: Iterable[Sequence]) -> None:
        self._db._call("delete", self.name, _plain_rows(rows, f"the rows for table {self.name!r}"))

    def delete_keys(self, keys: Iterable) -> None:
        self._db._call("delete_keys", self.name,
                       [_plain_key(k) for k in
                        arguments.many(keys, f"the primary keys for table {self.name!r}")])

    def __len__(self) -> int:
        return self._db._call("count", self.name)


class RemoteView(ViewFrames):
    def __init__(self, db: RemoteDatabase, name: str, columns: list[str],
                 types: list[SqlType], key_arity: int) -> None:
        self._db = db
        self.name = name
        self.columns = columns
        self.types = types
        self.key_arity = key_arity
        self._where: _Placement | None = None     # where its readers are, once asked

    def lookup(self, *key) -> list[tuple]:
        """Rows whose ``?`` columns equal ``key``, read at the reader's worker; for a view
        with range parameters, whose columns compare with them (``col > ?``: docs/sql.md)."""
        if self._placed().ranged is not None:
            return self._range(key)
        if len(key) != self.key_arity:
            if not self.key_arity:
                raise ArityError(f"view {self.name!r} has no ? parameters; read it with all()")
            raise ArityError(f"view {self.name!r} takes {self.key_arity} key value(s), got {len(key)}")
        k = key[0] if len(key) == 1 else key
        if type(k) not in _PLAIN:
            k = _plain_key(k)
        return self._read([k], True)[0]

    def _placed(self) -> _Placement:
        """Where the view's readers are, asked if not known (or asked on a connection
        to a controller since lost)."""
        where = self._where
        if where is None or where.generation != self._db._generation:
            where = self._where = self._db._placement(self.name)
        return where

    def _range(self, params: tuple) -> list[tuple]:
        """``lookup`` of a view with range parameters: checked here as the embedded
        ``View`` checks it (``arguments.RangeCheck``), read at the workers
        (``RemoteDatabase._read_range``)."""
        params = tuple(p if type(p) in _PLAIN else _plain_key(p) for p in params)

        def read(where: _Placement) -> list[tuple]:
            if where.ranged is None:        # (dropped, and made again without them)
                raise _Stale(f"view {self.name!r} has no range parameters now")
            key, bounds = where.ranged(params)
            if where.links is None:         # a worker without a read port
                return _rows(self._db._call("lookup", self.name, [list(params)])[0])
            return self._db._read_range(self.name, where, key, bounds)
        return self._retried(read)

    def lookup_many(self, keys: Iterable) -> list[list[tuple]]:
        """``lookup`` of each key (a tuple per key where the view takes more than one):
        one request per worker hosting some of them."""
        keys = arguments.many(keys, f"the keys for view {self.name!r}")
        if keys and self._placed().ranged is not None:
            return [self.lookup(*k) if isinstance(k, (tuple, list)) else self.lookup(k)
                    for k in keys]
        if not set(map(type, keys)) <= _PLAIN:
            keys = [_plain_key(k) for k in keys]
        if self.key_arity != 1:
            for k in keys:
                got = len(k) if isinstance(k, list) else 1
                if got != self.key_arity:
                    raise ArityError(f"view {self.name!r} takes {self.key_arity} key "
                                     f"value(s), got {got}")
        return self._read(keys) if keys else []

    def _read(self, keys: list, one: bool = False) -> list[list[tuple]]:
        """Read ``keys`` (``one``: the one key of a ``lookup``) where the view's readers
        are (module docstring): the placement asked again, and the read sent again,
        while it is out of date."""
        def read(where: _Placement) -> tuple[_Placement, list[list[tuple] | None]]:
            if where.links is None:              # a worker without a read port
                return where, [_rows(r) for r in self._db._call("lookup", self.name, keys)]
            if one:
                found = self._db._read_one(self.name, where, keys[0], self.key_arity)
                if found is not None:
                    return where, [found]
                out: list[list[tuple] | None] = [None]
            else:
                out = self._db._read_at(self.name, where, keys, self.key_arity)
            holes = [i for i, rows in enumerate(out) if rows is None]
            if holes:           # a partial view's misses: upqueried by the controller
                filled = self._db._call("upquery", self.name, [keys[i] for i in holes])
                for i, rows in zip(holes, filled):
                    out[i] = _rows(rows)
            return where, out
        where, out = self._retried(read)
        fits, check = where.fits, where.check
        if one or not set(map(type, keys)) <= fits:
            for k, rows in zip(keys, out):
                if not rows and type(k) not in fits:     # (arguments.py: what it refuses)
                    check(tuple(k) if self.key_arity > 1 else (k,))
        return cast("list[list[tuple]]", out)     # (no hole is left: filled above)

    def _retried(self, read: Callable[[_Placement], _T]) -> _T:
        """``read(placement)``, the placement asked again, and the read made again, while
        it is out of date (``_Stale``; module docstring): ``RecoveryError`` after
        ``READ_TIMEOUT`` seconds of that."""
        if self._db._closed:                     # (a placement kept: not asked again)
            raise ClosedError("this database handle is closed")
        deadline = None
        while True:
            try:
                return read(self._placed())
            except _Stale as why:
                self._where = None
                now = time.monotonic()
                if deadline is None:
                    deadline = now + READ_TIMEOUT
                elif now > deadline:
                    raise RecoveryError(f"view {self.name!r}: its reader could not be read "
                                        f"for {READ_TIMEOUT:.0f} s ({why})") from None
                else:
                    time.sleep(0.01)             # (asked again at once the first time)

    def all(self) -> list[tuple]:
        return _rows(self._db._call("all", self.name))

    def __repr__(self) -> str:
        return f"RemoteView({self.name!r}, columns={self.columns})"


def connect_url(url: str, token: str | None = None,
                tls: str | bool | None = None) -> RemoteDatabase:
    """``noria://HOST:PORT``, optionally ``?tls=CA file`` (or ``?tls=true``: the
    system's CAs), which ``tls`` overrides."""
    u = urlparse(url)
    if u.scheme != "noria" or not u.hostname:
        raise ConnectError(f"cannot connect to {url!r}: expected noria://HOST:PORT")
    port = u.port or DEFAULT_PORT
    query = parse_qs(u.query, keep_blank_values=True)
    unknown = set(query) - {"tls"}
    if unknown:
        raise ConnectError(f"cannot connect to {url!r}: unknown option "
                           f"{sorted(unknown)[0]!r} (the URL takes ?tls=CA file)")
    if tls is None and "tls" in query:
        tls = query["tls"][-1]
    if token is None:   # ($NORIA_TOKEN, else the file a local server wrote: tokens.py)
        token = os.environ.get("NORIA_TOKEN") or tokens.read_token(u.hostname, port)
    try:
        return RemoteDatabase(u.hostname, port, token, tls=tls)
    except OSError as e:
        raise ConnectError(f"cannot connect to {url}: {e}") from None


class _RemoteCatalog:
    """The server's tables and views, as the front end's ``Catalog`` reads them (a view
    by its visible columns: enough to type parameters)."""

    def __init__(self, db: RemoteDatabase) -> None:
        self._db = db

    def table(self, name: str) -> TableSchema | None:
        try:
            return plan_wire.from_data(self._db._call("schema", name)[1])
        except Error:
            return None

    def view(self, name: str) -> Any:
        if name.lower() not in {v.lower() for v in self._db.views()}:
            return None
        columns, types, _arity = self._db._call("view", name)
        cols = tuple(ColumnInfo(c, SqlType(t)) for c, t in zip(columns, types))
        return SimpleNamespace(names=tuple(columns), root=SimpleNamespace(columns=cols))


class RemotePrepared:
    """``Database.prepare``'s statement over a cluster connection: the same interface
    (``param_types``, ``columns``, ``run``, ``count``, ``rows``, ``close``).

    A SELECT that the server answers by a lookup in one view (every ``?`` a lookup key:
    ``Prepared.lookup_view``) is read at the workers hosting that view's readers, as
    ``RemoteView.lookup`` reads, not through the controller; the server keeps the view
    (pinned) until ``close`` or the connection's end, and a view dropped meanwhile is
    asked for again, once. An INSERT's rows are bound here and sent as a table insert.
    Anything else is one ``execute`` request to the server per run."""

    def __init__(self, db: RemoteDatabase, sql: str) -> None:
        self.sql = sql
        self._db = db
        words = sql.lstrip(" \t\r\n(").split(None, 1)
        self.command = words[0].upper() if words else ""
        catalog = _RemoteCatalog(db)
        self.param_types: list[SqlType | None] = sql_frontend.parameter_types(sql, catalog)
        self.columns: list[str] | None = None
        self.types: list[SqlType] | None = None
        self._insert = (sql_frontend.insert_template(sql, catalog)
                        if self.command == "INSERT" else None)
        self._view: RemoteView | None = None        # the view a keyed SELECT reads
        self._handle: int | None = None
        #: a keyed SELECT's columns' PostgreSQL type OIDs as the server's plan says
        #: (None: each its type's), once ``typed`` (``Result.plan_oids``)
        self.typed = False
        self.plan_oids: list[int] | None = None
        if self.command == "SELECT" and self.param_types:
            self._prepare_read()

    def _prepare_read(self) -> None:
        got = self._db._call("prepare_read", self.sql)
        if got is not None:
            self._handle, name, columns, types, arity, self.plan_oids = got
            self.typed = True       # (``plan_oids``: what its plan says, as Result.plan_oids)
            self.columns, self.types = list(columns), [SqlType(t) for t in types]
            self._view = RemoteView(self._db, name, self.columns, self.types, arity)

    def run(self, params: Sequence[Any] = ()) -> Result:
        if self._insert is not None:
            rows = self._insert.bind(params)
            self._db.table(self._insert.table).insert(rows)
            return Result(rowcount=len(rows))
        view = self._view
        if view is not None:
            if len(params) != len(self.param_types):
                raise ArityError(f"the statement has {len(self.param_types)} parameters (?) "
                                 f"but {len(params)} values were given")
            try:
                return Result(view.columns, view.lookup(*params), view.types)
            except UnknownViewError:
                # its ad-hoc view was dropped (DDL, drop_query): ask for it again, once
                self.close()
                self._prepare_read()
                if self._view is not None:
                    return Result(self._view.columns, self._view.lookup(*params),
                                  self._view.types)
        return self._db.execute(self.sql, params)

    def count(self, params: Sequence[Any] = ()) -> int:
        if self._insert is not None:
            return self._insert.rows
        raise NotSupportedError(f"{self.command} in a transaction block is not supported over "
                                "a cluster connection (it cannot be counted before it runs)")

    def rows(self, params: Sequence[Any]) -> tuple[str, list[tuple]] | None:
        if self._insert is None:
            return None
        return self._insert.table, self._insert.bind(params)

    def close(self) -> None:
        """Release the view the server keeps for a keyed SELECT (it may then be
        dropped as any ad-hoc query's view)."""
        handle, self._handle, self._view = self._handle, None, None
        if handle is not None and not self._db._closed:
            try:
                self._db._call("unprepare", handle)
            except (OSError, Error):
                pass                # (the connection's end releases it too)
