"""One PostgreSQL client's session: its prepared statements, portals, transaction and
settings, answering the simple and the extended query protocol over one engine.

The path of a query: Parse rewrites ``$n`` to ``?`` and prepares the statement once
(``Database.prepare``: a SELECT whose parameters are all lookup keys keeps its view, so
each Execute is a lookup in the reader, with no parse); Bind decodes the values by the
types the client named, or, where it named none, by the type the statement's context
gives (``types.decode``); Execute runs it and writes each row in the format the client
asked for. The simple protocol runs the same steps for each statement of a Query.

Transactions (PostgreSQL's ``BEGIN`` ... ``COMMIT``): the engine applies one batch of
writes to one table atomically (every view sees all of it or none of it), and that is
what a transaction block can hold:

- INSERTs into one table, any number of them, or one DELETE or UPDATE. They are
  checked and counted when they run, and applied at ``COMMIT`` as one batch; a write
  that would need a second batch (another table, a second DELETE) is refused with
  SQLSTATE 0A000, and the block fails as PostgreSQL's does after an error.
- Reads run at once, on what is committed: a read after a write of the same block is
  refused (0A000) rather than answered without the block's own writes.
- DDL runs at once (as in MySQL), and a ``ROLLBACK`` that would have to undo it says so
  with an error (0A000) after discarding the block's writes.
- ``SAVEPOINT``/``ROLLBACK TO``/``RELEASE`` mark and cut the block's pending writes.

Subscriptions (``COPY (SUBSCRIBE view) TO STDOUT``) stream from the subscription's own
thread through ``push``, which the server sets; while one runs, the session answers no
other message, and a cancel request (or the client falling behind) ends it.

Errors: each ``noria_py.Error`` goes out with the SQLSTATE of ``sqlstate()``; after an
error in the extended protocol, messages are skipped until Sync, as the protocol says.
"""
from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any, Callable

import sql_frontend
from sql_frontend import postgres_column_name
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

from .. import errors as e
from ..result import Result
from . import copy
from . import protocol as P
from . import types as T
from .catalog import Settings, Shadow, is_catalog_query
from .protocol import Body, ProtocolViolation


class InFailedTransactionError(e.OperationalError):
    """A statement in a transaction block after an error in it (25P02)."""


class CopyFailedError(e.OperationalError):
    """The client ended a COPY FROM STDIN with CopyFail (57014)."""


_SQLSTATES: list[tuple[type, str]] = [
    (InFailedTransactionError, "25P02"), (copy.CopyFormatError, "22P04"),
    (e.DivisionByZeroError, "22012"),
    (CopyFailedError, "57014"),
    (e.ParseError, "42601"), (e.UnknownTableError, "42P01"), (e.UnknownViewError, "42P01"),
    (e.UnknownColumnError, "42703"), (e.AlreadyExistsError, "42P07"),
    (e.DuplicateKeyError, "23505"), (e.DependentViewsError, "2BP01"),
    (e.TypeMismatchError, "42804"), (e.ArityError, "08P01"), (e.UnsupportedError, "0A000"),
    (e.NotSupportedError, "0A000"), (e.RowNotFoundError, "02000"), (e.DataError, "22000"),
    (e.IntegrityError, "23000"), (e.ClosedError, "57P01"), (e.SqlError, "42601"),
    (e.ProgrammingError, "42000"), (e.OperationalError, "58000"),
]


def sqlstate(err: BaseException) -> str:
    """PostgreSQL's error code for ``err``."""
    if isinstance(err, e.DataError) and "invalid input" in str(err):
        return "22P02"
    for cls, code in _SQLSTATES:
        if isinstance(err, cls):
            return code
    return "XX000"


_WORD = re.compile(r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*([A-Za-z]+)(?:\s+([A-Za-z]+))?", re.S)
_TX = {"BEGIN": "BEGIN", "START": "BEGIN", "COMMIT": "COMMIT", "END": "COMMIT",
       "ROLLBACK": "ROLLBACK", "ABORT": "ROLLBACK"}
_WRITES = ("INSERT", "DELETE", "UPDATE")
_READY = {status: P.ready(status) for status in (b"I", b"T", b"E")}
_H, _I = struct.Struct("!h"), struct.Struct("!i")
_ENDS = ("COMMIT", "END", "ROLLBACK", "ABORT")
#: what follows a prepared read's Bind (``Session.prepared_read``): Describe of the
#: unnamed portal, Execute of all its rows, Sync
_READ_TAIL = (b"D" + _I.pack(6) + b"P\0" + b"E" + _I.pack(9) + b"\0" + _I.pack(0)
              + b"S" + _I.pack(4))
_TAIL_LEN = len(_READ_TAIL)
#: CommandComplete of a SELECT of 0..63 rows, made once (every prepared read sends one)
_SELECTED = [P.command_complete(f"SELECT {n}") for n in range(64)]
_TO = re.compile(r"\s*ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\b", re.I)
_NAME = re.compile(r"(\w+)\s*;?\s*$")


@dataclasses.dataclass
class Statement:
    """A parsed statement (named, or the unnamed one), as Parse or a Query made it."""
    sql: str                          # as the client wrote it
    qsql: str                         # with ? for $n
    command: str                      # first word, upper-case
    order: list[int]                  # the $n of each ? in the rewritten SQL
    oids: list[int]                   # the type OID of each $n, 1..N
    prepared: Any = None              # Database.prepare's, for an engine statement
    special: str = ""                 # "tx", "set", "catalog", "subscribe", "empty"; "": engine
    columns: list[str] | None = None
    types: list[SqlType] | None = None
    described: dict[tuple[int, ...], bytes] = dataclasses.field(default_factory=dict)
    name: str = ""                    # its name, once a prepared read knows it
    #: its columns' types are known from its plan (``types.numeric_oids``), whatever
    #: the values: then ``result_oids`` (None: each column's type's OID)
    typed: bool = False
    result_oids: list[int] | None = None

    def result_fields(self, formats: list[int]) -> list[tuple[str, int, int, int]] | None:
        if self.columns is None or self.types is None:
            return None
        return _fields(self.columns, self.types, formats, None, self.result_oids)

    def _mine(self, columns: list[str], types: list[SqlType]) -> bool:
        return columns == self.columns and types == self.types

    def oids_of(self, res: Result) -> list[int] | None:
        """The type OIDs of ``res``'s columns (None: each its type's): from the plan
        where it is known, else from the values (``types.result_oids``)."""
        if self.typed and self._mine(res.columns, res.types):
            return self.result_oids
        if res.typed:                   # (over a cluster: as the controller's plan says)
            return res.plan_oids
        return T.result_oids(res.types, res.rows)

    def row_description(self, columns: list[str], types: list[SqlType], formats: list[int]
                        ) -> bytes:
        """The RowDescription of a result of this statement (kept: a prepared statement
        is described at every Execute)."""
        key = tuple(formats)
        mine = self._mine(columns, types)
        if mine and key in self.described:
            return self.described[key]
        out = P.row_description(_fields(columns, types, formats, None,
                                        self.result_oids if mine else None))
        if mine:
            self.described[key] = out
        return out


@dataclasses.dataclass
class Portal:
    """A statement bound to its values; ``result`` once it ran, ``sent`` rows so far."""
    statement: Statement
    params: tuple
    formats: list[int]
    result: Result | None = None
    tag: str = ""
    sent: int = 0
    copy_head: bytes = b""              # a subscription's CopyOutResponse
    oids: list[int] | None = None       # its columns' types as described (types.result_oids)


def _fields(columns: list[str], types: list[SqlType], formats: list[int],
            oids: list[int | None] | None = None, result_oids: list[int] | None = None
            ) -> list[tuple[str, int, int, int]]:
    """A RowDescription's fields, a column the query did not name named as PostgreSQL
    names it (``count``, ``?column?``: sql_frontend/pgnames.py); ``oids`` overrides a
    column's type (a catalog query's arrays, sent in text); ``result_oids`` are the
    columns' types where an AVG of integers is ``numeric`` (``types.result_oids``)."""
    out = []
    for i, (name, t) in enumerate(zip(columns, types)):
        given = oids[i] if oids is not None else None
        if given is not None:
            oid, fmt = given, 0
        else:
            oid = T.oid_of(t) if result_oids is None else result_oids[i]
            fmt = _format(formats, i)
        out.append((postgres_column_name(name), oid, T.SIZES.get(oid, -1), fmt))
    return out


def _format(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i] if i < len(formats) else 0


def _read_bind(data: bytes) -> tuple[str, str, list[int], list[bytes | None], list[int]]:
    """A Bind's portal and statement names, parameter formats, raw values and result
    formats (read with struct directly: Bind is on the path of every prepared read)."""
    try:
        end = data.index(b"\0")
        portal_name = data[:end].decode()
        start, end = end + 1, data.index(b"\0", end + 1)
        name = data[start:end].decode()
        (nf,) = _H.unpack_from(data, end + 1)
        pos = end + 3
        fmts = list(struct.unpack_from(f"!{nf}h", data, pos)) if nf > 0 else []
        (n,) = _H.unpack_from(data, pos + 2 * max(nf, 0))
        pos += 2 * max(nf, 0) + 2
        raw: list[bytes | None] = []
        for _ in range(n):
            (length,) = _I.unpack_from(data, pos)
            pos += 4
            if length < 0:
                raw.append(None)
                continue
            if pos + length > len(data):
                raise ProtocolViolation("Bind message too short")
            raw.append(data[pos:pos + length])
            pos += length
        (nr,) = _H.unpack_from(data, pos)
        result_fmts = list(struct.unpack_from(f"!{nr}h", data, pos + 2)) if nr > 0 else []
    except (ValueError, struct.error, UnicodeDecodeError):
        raise ProtocolViolation("malformed Bind message") from None
    return portal_name, name, fmts, raw, result_fmts


def _data_rows(res: Result, formats: list[int], start: int, end: int,
               result_oids: list[int] | None = None) -> list[bytes]:
    """DataRow messages of ``res.rows[start:end]`` in ``formats``, binary values in the
    type of ``result_oids`` (the RowDescription's; None: each column's type's)."""
    binary = [_format(formats, i) == 1 for i in range(len(res.columns))]
    text_out, binary_out, data_row = T.text_out, T.binary_out, P.data_row
    rows = res.rows[start:end]
    if not any(binary):
        return [data_row([None if v is None else text_out(v) for v in row]) for row in rows]
    oids = result_oids or [T.oid_of(t) for t in res.types]
    return [data_row([None if v is None else binary_out(oids[i], v) if binary[i] else text_out(v)
                      for i, v in enumerate(row)]) for row in rows]


@dataclasses.dataclass
class _FastRead:
    """What every Bind of a client's prepared read repeats, read once from the first
    (``Session.prepared_read``): the bytes between the statement's name and the first
    value (parameter formats and count), each value's decoder, and the bytes after the
    last value (result formats). A Bind whose bytes there differ is read in full again."""
    statement: Statement
    head: bytes
    decoders: list[Callable[[bytes], Any]]
    order: list[int] | None             # the $n of each ?, None if 1, 2, 3, ...
    tail: bytes
    formats: list[int]
    binary: bool                        # some result column in binary
    floats: bool                        # some result column FLOAT, its type not known
    oids: list[int] | None = None       # the columns' types, where known (``Statement``)
    described: bytes = b""              # BindComplete and RowDescription, once known


def _decoder(oid: int, binary: bool, position: int) -> Callable[[bytes], Any]:
    """``types.decode`` of one parameter; ``int`` itself for an integer in text (it
    reads bytes, and what it refuses sends the Bind the general way, which says why)."""
    if not binary and oid in (T.INT2, T.INT4, T.INT8):
        return int
    return lambda raw: T.decode(oid, binary, raw, position)


class Session:
    """Answers one client's messages; ``handle`` returns the bytes to send back."""

    def __init__(self, db: Any, startup: dict[str, str] | None = None,
                 shadow: Shadow | None = None) -> None:
        self.db = db
        self.settings = Settings(startup)
        self.shadow = shadow or Shadow()
        self.statements: dict[str, Statement] = {}
        self.portals: dict[str, Portal] = {}
        self.status = b"I"              # ReadyForQuery: I idle, T in a block, E failed block
        self.skipping = False           # after an error in the extended protocol
        self._pending: list[tuple[Statement, tuple]] = []
        self._pending_table: tuple[str, str] | None = None
        self._ddl_in_block: str | None = None
        self._savepoints: list[tuple[str, int, str | None]] = []
        self._cache: dict[str, Statement] = {}  # unnamed statements by SQL text
        self._fast: dict[bytes, _FastRead] = {}  # prepared reads, by statement name
        self.terminated = False
        self._extended = False          # the last message was of the extended protocol
        #: writes bytes to the client from another thread (a subscription's); the
        #: second argument ends the connection's subscription mode. Set by the server.
        self.push: Callable[[bytes, bool], None] | None = None
        self.subscription: Any = None
        self.copy_in: _CopyIn | None = None     # a COPY FROM STDIN taking its data

    # ------------------------------------------------------------ dispatch

    def handle(self, kind: bytes, body: bytes) -> list[bytes]:
        if self.skipping and kind not in (b"S", b"X"):
            return []
        if self.subscription is not None and kind != b"X":
            return []                   # streaming a subscription: nothing else is answered
        if self.copy_in is not None and kind != b"X":
            try:
                return self._copy_data(kind, body)
            except e.Error as err:
                self.copy_in = None
                return self._failed(err) + ([] if self._extended else [P.ready(self.status)])
        handler = self._HANDLERS.get(kind)
        if handler is None:
            raise ProtocolViolation(f"invalid frontend message type {kind!r}")
        try:
            return handler(self, Body(body))
        except e.Error as err:
            return self._failed(err)

    def _failed(self, err: e.Error) -> list[bytes]:
        """The ErrorResponse for ``err``; a block in progress fails, and the extended
        protocol skips to the next Sync."""
        if self.status == b"T":
            self.status = b"E"
        text, position = str(err), None
        if isinstance(err, e.SqlError) and err.position is not None and err.sql:
            text = text.rsplit(" (at line", 1)[0]
            line, column = err.position         # PostgreSQL's: a 1-based character index
            position = sum(len(x) + 1 for x in err.sql.split("\n")[:line - 1]) + column
        self.skipping = self._extended
        return [P.error_response("ERROR", sqlstate(err), text, position=position)]

    # ------------------------------------------------------------ simple query

    def _query(self, body: Body) -> list[bytes]:
        self._extended = False
        sql = body.cstr()
        try:
            parts = sql_frontend.split_statements(sql)
        except e.Error:
            parts = [sql]
        parts = [p for p in parts if p.strip()]
        if not parts:
            return [P.EMPTY_QUERY, P.ready(self.status)]
        return self._statements(parts)

    def _statements(self, parts: list[str]) -> list[bytes]:
        """A simple Query's statements in turn, up to the first error, then
        ReadyForQuery; a COPY FROM STDIN stops here and goes on when its data is in."""
        out: list[bytes] = []
        for i, part in enumerate(parts):
            try:
                st = self._prepare(part, [])
                portal = Portal(st, (), [])
                self._run(portal)
                if st.special == "subscribe":
                    return out + [portal.copy_head]
                if self.copy_in is not None:        # COPY FROM STDIN: the data comes next
                    self.copy_in.rest = parts[i + 1:]
                    return out + [portal.copy_head]
                out.append(portal.copy_head)        # COPY TO STDOUT: its lines (or b"")
                res = portal.result
                if res is not None and res.columns and st.special != "tx":
                    portal.oids = st.oids_of(res)
                    out.append(P.row_description(_fields(
                        res.columns, res.types, [], getattr(res, "pg_oids", None),
                        portal.oids)))
                    out.extend(self._rows(portal, 0))
                out.append(P.command_complete(portal.tag))
            except e.Error as err:
                out.extend(self._failed(err))
                break
        out.append(P.ready(self.status))
        return out

    # ------------------------------------------------------------ extended query

    def _parse(self, body: Body) -> list[bytes]:
        self._extended = True
        name, sql = body.cstr(), body.cstr()
        oids = [body.int32() for _ in range(max(0, body.int16()))]
        if name and name in self.statements:
            raise e.ProgrammingError(f'prepared statement "{name}" already exists')
        st = self._cache.get(sql) if not name else None
        if st is None or st.oids[:len(oids)] != oids and any(oids):
            st = self._prepare(sql, oids)
            if not name:
                self._cache = {sql: st}
        self.statements[name] = st
        return [P.PARSE_COMPLETE]

    def _bind(self, body: Body) -> list[bytes]:
        portal_name, name, fmts, raw, result_fmts = _read_bind(body.data)
        st = self._statement(name)
        self.portals[portal_name] = Portal(st, self._params(st, name, fmts, raw), result_fmts)
        return [P.BIND_COMPLETE]

    def _params(self, st: Statement, name: str, fmts: list[int],
                raw: list[bytes | None]) -> tuple:
        """A Bind's values as the statement's ``?`` take them, in order."""
        n = len(raw)
        if n != len(st.oids):
            raise e.ArityError(f"bind message supplies {n} parameters, but prepared statement "
                               f'"{name}" requires {len(st.oids)}')
        values = [T.decode(st.oids[i], _format(fmts, i) == 1, raw[i], i + 1) for i in range(n)]
        return tuple(values[k - 1] for k in st.order)

    def prepared_read(self, data: bytes, pos: int) -> tuple[bytes, int] | None:
        """What a driver sends for each prepared read, in one packet: Bind of the unnamed
        portal to a prepared SELECT, Describe of that portal, Execute of all its rows and
        Sync, outside a transaction block. Answered in one pass with the bytes the four
        handlers would send (tests/pg/test_prepared_read.py), without making a portal: it
        is the path of every prepared lookup, where the handlers' own work was most of
        the server's. What a statement's Binds repeat is read once (``_FastRead``): a
        read decodes its values, looks up, and writes the rows. Returns the answer and
        the position after the Sync; None for anything else, or any error, having
        changed nothing: the messages then go the general way, which answers the same or
        says what is wrong."""
        if (self.status != b"I" or self.skipping or self.subscription is not None
                or self.copy_in is not None or data[pos + 5:pos + 6] != b"\0"):
            return None
        try:
            (length,) = _I.unpack_from(data, pos + 1)
            end = pos + 1 + length
            if data[end:end + _TAIL_LEN] != _READ_TAIL:
                return None
            cut = data.index(b"\0", pos + 6, end)
            name = data[pos + 6:cut]
            fast = self._fast.get(name)
            for fresh in (False, True):     # (a Bind unlike the last: read it in full)
                p = cut + 1
                if fresh or fast is None or data[p:p + len(fast.head)] != fast.head \
                        or self.statements.get(fast.statement.name) is not fast.statement:
                    fast = self._fast_read(data[pos + 5:end], name)
                    if fast is None:
                        return None
                p += len(fast.head)
                values: list[Any] = []
                for decode in fast.decoders:
                    (n,) = _I.unpack_from(data, p)
                    p += 4
                    if n < 0:
                        values.append(None)
                    else:
                        values.append(decode(data[p:p + n]))
                        p += n
                if data[p:end] == fast.tail:
                    break
            else:
                return None
            st = fast.statement
            params = tuple(values) if fast.order is None else tuple(values[k - 1]
                                                                    for k in fast.order)
            res = st.prepared.run(params)
            rows = res.rows
            if fast.floats or res.columns != st.columns:
                oids = T.result_oids(res.types, rows)
                keep = oids is None and res.columns == st.columns
            else:
                oids, keep = fast.oids, True
            if keep and fast.described:
                head = [fast.described]
            else:
                if not res.columns:
                    return None
                head = [P.BIND_COMPLETE, P.row_description(
                    _fields(res.columns, res.types, fast.formats, None, oids))]
                if keep:
                    fast.described = b"".join(head)
            if fast.binary or oids is not None:
                out = _data_rows(res, fast.formats, 0, len(rows), oids)
            else:
                text_out, data_row = T.text_out, P.data_row
                out = [data_row([None if v is None else text_out(v) for v in row])
                       for row in rows]
        except (e.Error, ProtocolViolation, ValueError, struct.error):
            return None
        n = len(rows)
        out.append(_SELECTED[n] if n < 64 else P.command_complete(f"SELECT {n}"))
        out.append(_READY[b"I"])
        if self.portals:
            self.portals.clear()            # (as the Sync would: portals end with it)
        return b"".join(head + out), end + _TAIL_LEN

    def _fast_read(self, bind: bytes, name: bytes) -> _FastRead | None:
        """A ``_FastRead`` of the Bind message ``bind`` (its body), kept for the next
        Binds of its statement; None if its statement is not a prepared SELECT."""
        portal, sname, fmts, raw, result_fmts = _read_bind(bind)
        st = self.statements.get(sname)
        if portal or st is None or st.special or st.command != "SELECT" or st.prepared is None \
                or st.columns is None or st.types is None or len(raw) != len(st.oids):
            return None
        st.name = sname
        start = len(name) + 2               # (the portal's empty name, the statement's name)
        nf = _H.unpack_from(bind, start)[0]
        head = bind[start:start + 2 + 2 * max(nf, 0) + 2]
        tail = bind[len(bind) - 2 - 2 * max(len(result_fmts), 0):]
        ncols = len(st.columns)
        fast = _FastRead(
            st, head, [_decoder(st.oids[i], _format(fmts, i) == 1, i + 1) for i in range(len(raw))],
            None if st.order == list(range(1, len(st.order) + 1)) else list(st.order),
            tail, result_fmts, any(_format(result_fmts, i) == 1 for i in range(ncols)),
            not st.typed and SqlType.FLOAT in st.types, st.result_oids)
        if len(self._fast) > 256:
            self._fast.clear()
        self._fast[name] = fast
        return fast

    def _describe(self, body: Body) -> list[bytes]:
        what, name = body.byte(), body.cstr()
        if what == b"S":
            st = self._statement(name)
            fields = st.result_fields([])
            return [P.parameter_description(st.oids),
                    P.row_description(fields) if fields is not None else P.NO_DATA]
        if what != b"P":
            raise ProtocolViolation(f"invalid DESCRIBE message subtype {what!r}")
        portal = self._portal(name)
        if portal.statement.command == "SELECT" or portal.statement.special in ("catalog", "set"):
            if portal.result is None:
                self._run(portal)
            res = portal.result
            if res is not None and res.columns:
                oids = getattr(res, "pg_oids", None)
                if oids is not None:
                    return [P.row_description(_fields(res.columns, res.types, [], oids))]
                st = portal.statement
                portal.oids = st.oids_of(res)
                if portal.oids is not None and not (st.typed and portal.oids is st.result_oids):
                    return [P.row_description(_fields(res.columns, res.types, portal.formats,
                                                      None, portal.oids))]
                return [portal.statement.row_description(res.columns, res.types, portal.formats)]
        return [P.NO_DATA]

    def _execute(self, body: Body) -> list[bytes]:
        name, limit = body.cstr(), body.int32()
        portal = self._portal(name)
        if portal.result is None:
            self._run(portal)
        if portal.statement.special in ("subscribe", "copy"):
            if self.copy_in is not None:
                return [portal.copy_head]
            return [portal.copy_head, P.command_complete(portal.tag)]
        out = self._rows(portal, limit)
        if limit > 0 and portal.result is not None and portal.sent < len(portal.result.rows):
            out.append(P.PORTAL_SUSPENDED)
        else:
            out.append(P.command_complete(portal.tag))
        return out

    def _sync(self, body: Body) -> list[bytes]:
        self.skipping = False
        if self.status == b"I" and self.portals:
            self.portals.clear()        # portals end with their transaction
        return [_READY[self.status]]

    def _close(self, body: Body) -> list[bytes]:
        what, name = body.byte(), body.cstr()
        if what == b"S":
            st = self.statements.pop(name, None)
            if st is not None and st.prepared is not None and name:
                st.prepared.close()
        else:
            self.portals.pop(name, None)
        return [P.CLOSE_COMPLETE]

    def _flush(self, body: Body) -> list[bytes]:
        return []

    def _terminate(self, body: Body) -> list[bytes]:
        self.terminated = True
        return []

    def _statement(self, name: str) -> Statement:
        st = self.statements.get(name)
        if st is None:
            raise e.ProgrammingError(f'prepared statement "{name}" does not exist')
        return st

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise e.ProgrammingError(f'portal "{name}" does not exist')
        return portal

    _HANDLERS: dict[bytes, Callable[["Session", Body], list[bytes]]] = {
        b"Q": _query, b"P": _parse, b"B": _bind, b"D": _describe, b"E": _execute,
        b"S": _sync, b"C": _close, b"H": _flush, b"X": _terminate,
    }

    # ------------------------------------------------------------ statements

    def _prepare(self, sql: str, declared: list[int]) -> Statement:
        m = _WORD.match(sql)
        command = m.group(1).upper() if m else ""
        second = (m.group(2) or "").upper() if m else ""
        qsql, order = sql_frontend.positional(sql)
        count = max(order, default=0)
        oids = [declared[i] if i < len(declared) else 0 for i in range(count)]
        st = Statement(sql, qsql, command, order, oids)
        if not sql.strip().rstrip(";").strip():
            st.special = "empty"
        elif command in _TX or command == "SAVEPOINT" or command == "RELEASE":
            st.special = "tx"
        elif command in ("SET", "SHOW", "RESET", "DEALLOCATE") or (command == "DISCARD"
                                                                 and second == "ALL"):
            st.special = "set"
            if command == "SHOW":
                st.columns, st.types = [second.lower() or "setting"], [SqlType.TEXT]
        elif _SUBSCRIBE.match(sql):
            st.special = "subscribe"
        elif command == "COPY":
            st.special = "copy"
        elif is_catalog_query(qsql) and command in ("SELECT", "WITH", "VALUES", "("):
            st.special = "catalog"
        else:
            st.prepared = self.db.prepare(_postgres(qsql))
            types = st.prepared.param_types
            for pos, k in enumerate(order):
                if not oids[k - 1] or oids[k - 1] in (T.UNKNOWN,):
                    if pos < len(types) and types[pos] is not None:
                        oids[k - 1] = T.oid_of(types[pos])
            st.columns, st.types = st.prepared.columns, st.prepared.types
            query = getattr(st.prepared, "query", None)     # (none over a cluster)
            if query is not None and st.columns is not None:
                st.typed, st.result_oids = True, T.numeric_oids(query)
            elif getattr(st.prepared, "typed", False) and st.columns is not None:
                # over a cluster: the types its plan says, from the controller
                st.typed, st.result_oids = True, st.prepared.plan_oids
        st.oids = [o if o and o != T.UNKNOWN else T.TEXT for o in oids]
        return st

    def _run(self, portal: Portal) -> None:
        st = portal.statement
        if self.status == b"E" and not (st.special == "tx" and st.command in _ENDS):
            raise InFailedTransactionError("current transaction is aborted, commands ignored until "
                                      "end of transaction block")
        if st.special == "empty":
            portal.result, portal.tag = Result(), ""
        elif st.special == "tx":
            portal.tag = self._transaction(st)
            portal.result = Result()
        elif st.special == "set":
            if st.command == "DISCARD":
                self._deallocate(None)
                portal.result, portal.tag = Result(), "DISCARD ALL"
                return
            if st.command == "DEALLOCATE":
                m = re.match(r"\s*DEALLOCATE\s+(?:PREPARE\s+)?(\"[^\"]+\"|\w+)\s*;?\s*$", st.sql,
                             re.I)
                if m is None:
                    raise e.ParseError("DEALLOCATE takes a statement name or ALL", st.sql, None)
                name = m.group(1)
                self._deallocate(None if name.upper() == "ALL" else name.strip('"'))
                portal.result, portal.tag = Result(), "DEALLOCATE"
                return
            answered = self.settings.answer(st.sql)
            if answered is None:
                raise e.UnsupportedError(f"unsupported: {st.sql.strip()[:60]}", st.sql, None)
            portal.tag, portal.result = answered
        elif st.special == "subscribe":
            self._subscribe(portal)
        elif st.special == "copy":
            self._copy(portal)
        elif st.special == "catalog":
            portal.result = self.shadow.query(st.qsql, self._schema(), self.settings,
                                              portal.params)
            portal.formats = []             # (catalog answers go out in text)
            portal.tag = f"SELECT {len(portal.result.rows)}"
        elif self.status == b"T" and st.command in _WRITES:
            portal.result, portal.tag = self._buffer(st, portal.params)
        else:
            if self.status == b"T" and st.command not in ("SELECT", "WITH", "VALUES"):
                self._ddl_in_block = self._ddl_in_block or st.command
                if self._pending:
                    raise e.NotSupportedError(f"{st.command} after a write in one transaction "
                                              "is not supported: COMMIT first")
            elif self.status == b"T" and self._pending:
                raise e.NotSupportedError("a read after a write in one transaction is not "
                                          "supported (it would not see the write): COMMIT first")
            res = st.prepared.run(portal.params)
            portal.result = res
            portal.tag = _tag(st.command, st.sql, res)

    def _rows(self, portal: Portal, limit: int) -> list[bytes]:
        res = portal.result
        if res is None or not res.columns:
            return []
        end = len(res.rows) if limit <= 0 else min(len(res.rows), portal.sent + limit)
        if portal.oids is None and portal.statement.special != "catalog":   # (not described)
            portal.oids = portal.statement.oids_of(res)
        out = _data_rows(res, portal.formats, portal.sent, end, portal.oids)
        portal.sent = end
        return out

    # ------------------------------------------------------------ transactions

    def _transaction(self, st: Statement) -> str:
        word = _TX.get(st.command, st.command)
        if word == "BEGIN":
            if self.status == b"I":
                self.status = b"T"
            return "BEGIN"
        if word in ("SAVEPOINT", "RELEASE") or (word == "ROLLBACK" and _TO.match(st.sql)):
            return self._savepoint(word, st.sql)
        pending, ddl, failed = self._pending, self._ddl_in_block, self.status == b"E"
        self._pending, self._pending_table, self._ddl_in_block = [], None, None
        self._savepoints = []
        self.status = b"I"
        if word == "COMMIT":
            if failed:
                return "ROLLBACK"
            self._apply(pending)
            return "COMMIT"
        if ddl is not None:
            raise e.NotSupportedError(f"ROLLBACK cannot undo the {ddl} run in this "
                                      "transaction: DDL is applied when it runs (the "
                                      "block's writes were discarded)")
        return "ROLLBACK"

    def _savepoint(self, word: str, sql: str) -> str:
        """SAVEPOINT, RELEASE and ROLLBACK TO: a savepoint is a place in the block's
        pending writes; rolling back to it drops those written since."""
        m = _NAME.search(sql)
        name = m.group(1).lower() if m else ""
        if self.status == b"I":
            raise e.ProgrammingError(f"{word} can only be used in transaction blocks")
        if word == "SAVEPOINT":
            self._savepoints.append((name, len(self._pending), self._ddl_in_block))
            return "SAVEPOINT"
        names = [n for n, _, _ in self._savepoints]
        if name not in names:
            raise e.ProgrammingError(f'savepoint "{name}" does not exist')
        at = len(names) - 1 - names[::-1].index(name)
        _, kept, ddl = self._savepoints[at]
        if word == "RELEASE":
            del self._savepoints[at:]
            return "RELEASE"
        if self._ddl_in_block != ddl:
            raise e.NotSupportedError(f"ROLLBACK TO cannot undo the {self._ddl_in_block} run "
                                      "since the savepoint: DDL is applied when it runs")
        del self._savepoints[at + 1:]
        del self._pending[kept:]
        if not self._pending:
            self._pending_table = None
        self.status = b"T"
        return "ROLLBACK"

    def _buffer(self, st: Statement, params: tuple, table: str | None = None
                ) -> tuple[Result, str]:
        table = table if table is not None else _target(st)
        kind = "INSERT" if st.command == "INSERT" else "CHANGE"
        if self._pending and (kind == "CHANGE" or self._pending_table != (kind, table)):
            raise e.NotSupportedError(
                "a transaction block may hold INSERTs into one table or one DELETE or UPDATE "
                "(the engine applies one batch atomically); COMMIT before this "
                f"{st.command}")
        count = st.prepared.count(params)
        self._pending.append((st, params))
        self._pending_table = (kind, table)
        res = Result(rowcount=count)
        return res, _tag(st.command, st.sql, res)

    def _apply(self, pending: list[tuple[Statement, tuple]]) -> None:
        if not pending:
            return
        first = pending[0][0]
        if first.command == "INSERT" and len(pending) > 1:
            bound = [st.prepared.rows(params) for st, params in pending]
            if any(b is None for b in bound) or len({b[0].lower() for b in bound if b}) != 1:
                raise e.NotSupportedError("these INSERTs cannot be applied as one write")
            self.db.table(bound[0][0]).insert([r for b in bound if b for r in b[1]])
        else:
            first.prepared.run(pending[0][1])

    def _schema(self) -> list[tuple[str, TableSchema]]:
        """The engine's tables and views, for the catalog's shadow."""
        out: list[tuple[str, TableSchema]] = []
        for name in self.db.tables():
            out.append(("table", self.db.table(name).schema))
        for name in self.db.views():
            v = self.db.view(name)
            cols = tuple(ColumnInfo(c, t) for c, t in zip(v.columns, v.types))
            out.append(("view", TableSchema(name, cols)))
        return out

    def _deallocate(self, name: str | None) -> None:
        """Forget prepared statement ``name`` (None: every named one)."""
        if name is not None and name not in self.statements:
            raise e.ProgrammingError(f'prepared statement "{name}" does not exist')
        for key in [name] if name is not None else [k for k in self.statements if k]:
            st = self.statements.pop(key)
            if st.prepared is not None:
                st.prepared.close()

    # ------------------------------------------------------------ COPY

    def _copy(self, portal: Portal) -> None:
        """COPY ... FROM STDIN: answer CopyInResponse and take the data (``_copy_data``);
        COPY ... TO STDOUT: the rows as CopyData, whole (module ``copy``)."""
        sql = portal.statement.sql
        m = copy.COPY_FROM.match(sql)
        if m is not None:
            fmt = copy.parse_options(m.group("opts"))
            schema = self.db.table(m.group("table").strip('"')).schema
            positions = copy.columns_of(schema, m.group("cols"))
            self.copy_in = _CopyIn(schema, positions, fmt)
            n = len(positions)
            portal.copy_head = P.message(b"G", b"\0" + struct.pack("!h", n) + b"\0\0" * n)
            portal.result, portal.tag = Result(), ""
            return
        m = copy.COPY_TO.match(sql)
        if m is None:
            raise e.UnsupportedError("unsupported: COPY takes FROM STDIN or TO STDOUT (no "
                                     "files on the server)", sql, None)
        fmt = copy.parse_options(m.group("opts"))
        if m.group("query"):
            res = self.db.prepare(_postgres(m.group("query"))).run(())
            names, types, rows = res.columns, res.types, res.rows
        else:
            table = self.db.table(m.group("table").strip('"'))
            positions = copy.columns_of(table.schema, m.group("cols"))
            names = [table.schema.columns[i].name for i in positions]
            types = [table.schema.columns[i].type for i in positions]
            rows = [tuple(r[i] for i in positions) for r in table.rows()]
        n = len(names)
        lines = copy.write_rows(rows, types, fmt, names)
        portal.copy_head = b"".join([P.message(b"H", b"\0" + struct.pack("!h", n) + b"\0\0" * n),
                                     *(P.message(b"d", line) for line in lines),
                                     P.message(b"c")])
        portal.result, portal.tag = Result(), f"COPY {len(rows)}"

    def _copy_data(self, kind: bytes, body: bytes) -> list[bytes]:
        """A message while a COPY FROM STDIN takes its data."""
        cin = self.copy_in
        assert cin is not None
        if kind == b"d":
            cin.data.append(body)
            return []
        if kind in (b"H", b"S"):
            return []                   # (the protocol says: ignored during COPY IN)
        if kind == b"f":
            raise CopyFailedError(f"COPY from stdin failed: {Body(body).cstr()}")
        if kind != b"c":
            raise ProtocolViolation(f"unexpected message type {kind!r} during COPY from stdin")
        rows = copy.read_rows(b"".join(cin.data), cin.format, cin.schema, cin.positions)
        simple, rest = not self._extended, cin.rest
        st = Statement(f"COPY {cin.schema.name}", f"COPY {cin.schema.name}", "INSERT", [], [],
                       prepared=_CopyRows(self.db, cin.schema.name, rows))
        if self.status == b"T":
            self._buffer(st, (), table=cin.schema.name.lower())
        else:
            self.db.table(cin.schema.name).insert(rows)
        self.copy_in = None
        out = [P.command_complete(f"COPY {len(rows)}")]
        if simple and rest is not None:     # the statements after it in the same Query
            out += self._statements(rest)
        return out

    # ------------------------------------------------------------ subscriptions

    def _subscribe(self, portal: Portal) -> None:
        """``SUBSCRIBE [TO] view`` or ``COPY (SUBSCRIBE [TO] view) TO STDOUT``: COPY's
        text format, one line per changed row, ``progress``, ``diff`` (+1 or -1), then
        the view's columns; the first lines are the view's rows now. It runs until the
        client hangs up; a subscriber that falls behind gets an error and the end of
        the COPY (noria_py/subscribe.py)."""
        if self.push is None:
            raise e.NotSupportedError("SUBSCRIBE needs a connection that can be written to")
        if self.status != b"I":
            raise e.NotSupportedError("SUBSCRIBE runs outside a transaction block")
        m = _SUBSCRIBE.match(portal.statement.sql)
        assert m is not None
        view = self.db.view(m.group(1).strip('"'))
        push = self.push
        ncols = len(view.columns) + 2
        head = P.message(b"H", b"\0" + struct.pack("!h", ncols) + b"\0\0" * ncols)

        ended: list[Any] = []       # the error that ended it; then the subscription
        held: list[Any] = []

        def changed(change: Any) -> None:
            if ended:
                return
            if isinstance(change, e.SubscriptionError):
                push(P.error_response("ERROR", "57014", str(change)) + P.ready(b"I"), True)
                return
            lines = []
            try:
                for row, diff in change.rows:
                    fields = [str(change.progress), str(diff)]
                    fields += ["\\N" if v is None else copy.escape(T.text_out(v).decode())
                               for v in row]
                    lines.append(P.message(b"d", ("\t".join(fields) + "\n").encode()))
            except e.DivisionByZeroError as err:    # a row computed through a / by zero
                ended.append(err)
                push(b"".join(lines) + P.error_response("ERROR", "22012", str(err))
                     + P.ready(b"I"), True)
                if held:
                    held[0].close()
                return
            push(b"".join(lines), False)

        self.subscription = sub = self.db.subscribe(view.name, callback=changed)
        held.append(sub)
        if ended:                   # (it ended before it was held)
            sub.close()
        portal.copy_head = head
        portal.result = Result()

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None
        for st in self.statements.values():
            if st.prepared is not None:
                st.prepared.close()
        self.statements.clear()


def _postgres(sql: str) -> str:
    """``sql`` with PostgreSQL's meaning where the engine's differs: NULLs sort last
    ascending (``postgres_order``), a division by zero is an error, not NULL
    (``postgres_division``, noria_py/divzero.py)."""
    return sql_frontend.postgres_division(sql_frontend.postgres_order(sql))


_SUBSCRIBE = re.compile(r"\s*(?:COPY\s*\(\s*)?SUBSCRIBE\s+(?:TO\s+)?(\"[^\"]+\"|\w+)\s*"
                        r"(?:\)\s*TO\s+STDOUT\s*)?;?\s*$", re.I)


def _target(st: Statement) -> str:
    m = re.search(r"\b(?:INTO|FROM|UPDATE)\s+(\"[^\"]+\"|[\w.]+)", st.sql, re.I)
    return m.group(1).strip('"').lower() if m else ""


def _tag(command: str, sql: str, res: Result) -> str:
    if command == "SELECT" or command in ("WITH", "VALUES", "TABLE"):
        return f"SELECT {len(res.rows)}"
    if command == "INSERT":
        return f"INSERT 0 {res.rowcount}"
    if command in ("DELETE", "UPDATE"):
        return f"{command} {res.rowcount}"
    m = _WORD.match(sql)
    if m and m.group(2):
        words = sql.split()
        if command in ("CREATE", "DROP") and words[1].upper() in ("OR", "MATERIALIZED"):
            return f"{command} VIEW"
        return f"{command} {m.group(2).upper()}"
    return command


@dataclasses.dataclass
class _CopyIn:
    schema: TableSchema
    positions: list[int]
    format: copy.Format
    data: list[bytes] = dataclasses.field(default_factory=list)
    rest: list[str] | None = None       # a simple Query's statements after the COPY


class _CopyRows:
    """The rows of a COPY FROM in a transaction block, as a pending INSERT."""

    def __init__(self, db: Any, table: str, rows: list[tuple]) -> None:
        self.db, self.table, self._rows = db, table, rows
        self.sql = f"COPY {table}"

    def count(self, params: tuple = ()) -> int:
        return len(self._rows)

    def rows(self, params: tuple = ()) -> tuple[str, list[tuple]]:
        return self.table, self._rows

    def run(self, params: tuple = ()) -> Result:
        self.db.table(self.table).insert(self._rows)
        return Result(rowcount=len(self._rows))

    def close(self) -> None:
        """Nothing to release."""
