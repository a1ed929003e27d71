"""The client of a running ``noria-py serve``: the embedded API, over one connection.

Each call is one request to the controller and one answer; errors come back as the
same ``noria_py.Error`` subclasses the embedded engine raises (by name: nothing but
plain data crosses the network).
"""
from __future__ import annotations

import itertools
import os
import socket
import threading
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import urlparse

import sql_frontend
from sql_frontend import wire as plan_wire
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

from . import arguments, errors
from .arrowio import arrow_rows, as_arrow_table, is_frame
from .dbapi import Cursor
from .errors import ArityError, ClosedError, ConnectError, Error, NotSupportedError
from .recovery import RecoveryReport
from .result import Result, ViewFrames
from .runtime.cluster import tokens, wire
from .subscribe import Change, Subscription, buffer_size

DEFAULT_PORT = 7878


def _error(name: str, message: str) -> Error:
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Error)):
        cls = Error
    return cls(message)


def _report(d: dict) -> RecoveryReport:
    known = {k: d[k] for k in ("node", "strategy", "seconds", "replayed_messages", "purged",
                               "rows", "automatic") if k in d}
    r = RecoveryReport(**known)
    r.purged = list(r.purged)
    for k, v in d.items():
        if k not in known:
            setattr(r, k, v)
    return r


def _rows(rows) -> list[tuple]:
    return [tuple(r) for r in rows]


def _plain_rows(rows: Any, what: str) -> list:
    """Rows to send, their values the engine's own types (``arguments.plain``: numpy's,
    pandas', Decimals have no wire form), for the server to check. A row that is not a
    tuple or list goes as it is, for the server to refuse."""
    return [[arguments.plain(v) for v in r] if isinstance(r, (tuple, list)) else r
            for r in arguments.many(rows, what)]


def _plain_key(key: Any) -> Any:
    """A key to send: a value, or a list for a tuple or list of values, each
    ``arguments.plain`` (one it refuses, which the embedded engine would look up and
    find nothing for, has no wire form: it is refused here)."""
    if isinstance(key, (tuple, list)):
        return [arguments.plain(v) for v in key]
    return arguments.plain(key)


class RemoteDatabase:
    """``noria_py.connect("noria://host:port")``."""

    def __init__(self, host: str, port: int, token: str | None = None,
                 timeout: float | None = None) -> None:
        self.address = (host, port)
        self._token, self._timeout = token, timeout
        self._conn = self._connect()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False

    def _connect(self) -> wire.Connection:
        sock = socket.create_connection(self.address, timeout=self._timeout)
        sock.settimeout(None)
        conn = wire.Connection(sock)
        wire.client_handshake(conn, self._token, {"role": "client"})
        return conn

    def _call(self, method: str, *args) -> Any:
        if self._closed:
            raise ClosedError("this database handle is closed")
        with self._lock:
            rid = next(self._ids)
            try:
                self._conn.send(["call", rid, method, list(args)])
            except OSError:
                pass                # (closed by the server: what it sent last says why)
            f = self._conn.recv()
            if f[0] == "bye":
                # the server closed an idle connection without reading this request:
                # send it again on a new one
                self._conn.close()
                self._conn = self._connect()
                self._conn.send(["call", rid, method, list(args)])
                f = self._conn.recv()
        if f[0] == "ok":
            return f[2]
        raise _error(f[2], f[3])

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        """Run one SQL statement on the server; ``?`` take ``params`` in order."""
        columns, rows, types, rowcount = self._call("execute", sql, list(arguments.params(params)))
        return Result(columns, _rows(rows), [SqlType(t) for t in types], rowcount)

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
            raise _error(f[2], f[3])
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

    def close(self) -> None:
        """Close the connection; later calls raise ``ClosedError``."""
        if not self._closed:
            self._closed = True
            self._conn.close()

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
        self._db._call("insert", self.name, _plain_rows(rows, f"the rows for table {self.name!r}"))

    def insert_arrow(self, table) -> None:
        self.insert(arrow_rows(as_arrow_table(table), self.columns, self.name))

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

    def lookup(self, *key) -> list[tuple]:
        if len(key) != self.key_arity:
            if not self.key_arity:
                raise ArityError(f"view {self.name!r} has no ? parameters; read it with all()")
            raise ArityError(f"view {self.name!r} takes {self.key_arity} key value(s), got {len(key)}")
        k = _plain_key(key[0] if len(key) == 1 else key)
        return _rows(self._db._call("lookup", self.name, [k])[0])

    def lookup_many(self, keys: Iterable) -> list[list[tuple]]:
        keys = [_plain_key(k) for k in arguments.many(keys, f"the keys for view {self.name!r}")]
        return [_rows(r) for r in self._db._call("lookup", self.name, keys)]

    def all(self) -> list[tuple]:
        return _rows(self._db._call("all", self.name))

    def __repr__(self) -> str:
        return f"RemoteView({self.name!r}, columns={self.columns})"


def connect_url(url: str, token: str | None = None) -> RemoteDatabase:
    u = urlparse(url)
    if u.scheme != "noria" or not u.hostname:
        raise ConnectError(f"cannot connect to {url!r}: expected noria://HOST:PORT")
    port = u.port or DEFAULT_PORT
    if token is None:   # ($NORIA_TOKEN, else the file a local server wrote: tokens.py)
        token = os.environ.get("NORIA_TOKEN") or tokens.read_token(u.hostname, port)
    try:
        return RemoteDatabase(u.hostname, port, token)
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
    (``param_types``, ``columns``, ``run``, ``count``, ``rows``, ``close``), without the
    embedded fast paths: each run is one request to the server."""

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

    def run(self, params: Sequence[Any] = ()) -> Result:
        if self._insert is not None:
            rows = self._insert.bind(params)
            self._db.table(self._insert.table).insert(rows)
            return Result(rowcount=len(rows))
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
        """Nothing is kept on the server for it."""
