"""A base table: the rows users write, and the root of every dataflow.

The base validates a whole write batch before touching anything, so a rejected batch
changes nothing; only then does it apply the batch and emit it downstream.

A table without a primary key that has only ever been inserted into (a log of votes,
clicks, events) keeps its rows as the write batches themselves, columnar where the
values allow: about 16 bytes a row of two INTs rather than ~200 as a dict of tuples,
and nothing to do per row on a write. The first delete, or the first caller that needs
``rows``, turns the table into the indexed form, a ``{row: count}`` dict, for good.

In a cluster with writes at the controller (``--writes controller``, the relay), the
controller's base holds each table's rows (it validates writes against them); the
base node on a worker only passes writes on, and holds none (``holds_rows``): the rows
are not kept twice, and a lost worker's base comes back without them. With writes at
the workers it is the other way round: the base on its worker holds the rows and
validates (runtime/cluster/writes.py), and the controller's holds none.
"""
from __future__ import annotations

import datetime
from operator import itemgetter
from typing import Iterator, Sequence, cast

import numpy as np

from sql_frontend.types import INT_MAX, INT_MIN, SqlType, TableSchema, is_text

from .. import tuning
from ..arguments import plain
from ..batch import Batch
from ..columns import ColumnChunk
from ..divzero import DIV0
from ..errors import (
    ArityError,
    DivisionByZeroError,
    DuplicateKeyError,
    RowNotFoundError,
    TypeMismatchError,
)
from ..nan import NAN, column_list, concat, has_nan
from .dense import object_column
from .operator import Operator
from .state import expand, index_add, index_batch, items, tuple_key

_DTYPES = {SqlType.INT: np.int64, SqlType.FLOAT: np.float64}
_I64 = np.iinfo(np.int64)


def _coerce(value, typ: SqlType):
    """The value as stored in a column of ``typ``, or raise TypeError."""
    t = type(value)
    if typ is SqlType.INT:
        if t is int and INT_MIN <= value <= INT_MAX:
            return value
    elif typ is SqlType.FLOAT:
        if t is float:
            return NAN if value != value else value     # the one NaN (noria_py.nan)
        if t is int:
            return float(value)
        if isinstance(value, float):        # an AVG of integers (ops.accumulators.ExactAvg)
            return float(value)
    elif typ is SqlType.TEXT:
        if t is str and is_text(value):
            return value
    elif typ is SqlType.BOOL:
        if t is bool:
            return value
    elif typ is SqlType.DATE:
        if t is datetime.date:
            return value
    elif typ is SqlType.TIMESTAMP:
        if t is datetime.datetime and value.tzinfo is None:
            return value
    elif typ is SqlType.TIMESTAMPTZ:
        if t is datetime.datetime and value.utcoffset() is not None:
            return value if value.tzinfo is _UTC else value.astimezone(_UTC)
    raise TypeError


_UTC = datetime.timezone.utc
#: the Python types the engine keeps (``arguments.plain`` converts the others it can)
_PLAIN = frozenset({int, float, str, bool, datetime.date, datetime.datetime})


def _why(v, typ: SqlType) -> str:
    """Why ``v`` (of a type the engine keeps) does not fit a column of ``typ``, beyond
    its type: for the message."""
    if type(v) is str:
        return " with a lone surrogate, which is not Unicode text"
    if type(v) is datetime.datetime:
        if typ is SqlType.TIMESTAMP and v.tzinfo is not None:
            return (" with a time zone: a TIMESTAMP has none, so the zone would be lost; "
                    "declare the column TIMESTAMPTZ to keep instants")
        if typ is SqlType.TIMESTAMPTZ and v.utcoffset() is None:
            return (" without a time zone: a TIMESTAMPTZ holds instants, and there is no "
                    "session time zone to assume; give it one, e.g. "
                    ".replace(tzinfo=datetime.timezone.utc)")
    return ""


def typed_columns(types: Sequence[SqlType], rows: Sequence[tuple],
                  checked: list | None = None) -> list[np.ndarray]:
    """Rows of values of ``types`` (checked) as arrays: int64 or float64 where a column
    has no NULL, objects otherwise (``checked``: their columns and NULL flags, if
    known). A column at a time: ``zip(*rows)`` would take the rows as arguments."""
    if checked is None:
        checked = [(col, None in col) for col in
                   (tuple(map(itemgetter(i), rows)) for i in range(len(types)))]
    out = []
    for typ, (col, has_null) in zip(types, checked):
        dtype = _DTYPES.get(typ)
        if dtype is not None and not has_null:
            out.append(np.array(col, dtype=dtype))
        else:
            out.append(object_column(col))
    return out


def _expanded(chunk: Batch) -> Iterator[tuple]:
    """A chunk's rows, each as many times as its sign says (chunks hold insertions),
    built without being kept on the chunk."""
    for r, c in zip(chunk.to_rows(), chunk.signs):
        yield from [r] * c


class ChunkIndex:
    """An index on one int column (``col``) of an insert-only table kept as its write
    batches (``chunks``), which it never moves: for each distinct key of the first
    ``upto`` batches, the numbers of the batches holding it (``ids``, uint16 while
    there are at most 65,536 batches, else uint32), stored one key after another
    (CSR): key ``k``'s batches are ``ids[starts[i]:starts[i+1]]``, where ``i`` is
    ``k - lo`` if the keys are dense (``keys`` None: their range is under twice their
    number, so ``starts`` by key costs at most 8 bytes a distinct key) or ``k``'s
    place in the sorted distinct ``keys`` otherwise. At ten rows a key in batches of
    1,000 that is about 2.4 bytes a row, where every row's key and position cost 16.

    A lookup finds the key's batches and compares only those batches' key columns
    with it (numpy, ~1,000 rows each), then the key columns of the batches written
    since, kept end to end (``tail_keys``: 8 bytes a row written since, extended at
    lookups, one numpy comparison for them all); once those hold more than a
    sixteenth of the rows (and over ``TAIL_MIN``), the next lookup builds everything
    again (a stable sort of every key) and empties the tail: amortized O(log n) per
    row written, and nothing done by a write.

    Invariants: batches only ever append to ``chunks`` while the table is insert-only
    (a batch is never edited once sent), so batch ``ci`` and its rows stay where the
    index saw them; the answer is every row of the key with its sign (a batch's rows
    are insertions, a sign its count), because every batch holding the key is in
    ``ids`` or in the tail."""

    TAIL_MIN = 4096

    def __init__(self, col: int) -> None:
        self.col = col
        self.upto = 0                   # batches indexed
        self.rows_upto = 0              # rows (entries) in them
        self.lo = 0                     # the dense form's first key
        self.keys: np.ndarray | None = None
        self.starts: np.ndarray = np.zeros(1, dtype=np.uint32)
        self.ids: np.ndarray = np.zeros(0, dtype=np.uint16)
        #: the key columns of the batches after ``upto`` end to end, and where each
        #: batch's begins (one more entry than batches)
        self.tail_keys = np.zeros(0, dtype=np.int64)
        self.tail_starts = np.zeros(1, dtype=np.int64)

    def _key_column(self, chunk: Batch) -> np.ndarray | None:
        cols = chunk.cols
        if cols is not None:
            c = cols[self.col]
            return c if c.dtype == np.int64 else None
        values = [r[self.col] for r in chunk.rows]
        if not all(type(v) is int for v in values):
            return None
        return np.array(values, dtype=np.int64)

    def _rebuild(self, chunks: list[Batch]) -> bool:
        parts = []
        for ch in chunks:
            k = self._key_column(ch)
            if k is None:
                return False
            parts.append(k)
        keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        id_type = np.uint16 if len(parts) <= 1 << 16 else np.uint32
        ids = np.repeat(np.arange(len(parts), dtype=id_type), [len(p) for p in parts])[order]
        del order
        # one entry a (key, batch): the stable sort left each key's batch numbers rising
        new = np.ones(len(keys), dtype=bool)
        new[1:] = (keys[1:] != keys[:-1]) | (ids[1:] != ids[:-1])
        keys, ids = keys[new], ids[new]
        new = np.ones(len(keys), dtype=bool)
        new[1:] = keys[1:] != keys[:-1]
        first = np.flatnonzero(new)             # where each distinct key's entries begin
        distinct = keys[first]
        del keys
        n = len(ids)
        start_type = np.uint32 if n < 1 << 32 else np.int64
        span = int(distinct[-1]) - int(distinct[0]) + 1 if len(distinct) else 0
        if span < 2 * len(distinct):            # dense: ``starts`` by key - lo
            self.lo, self.keys = int(distinct[0]), None
            counts = np.zeros(span, dtype=np.int64)
            counts[distinct - self.lo] = np.diff(np.append(first, n))
            self.starts = np.zeros(span + 1, dtype=start_type)
            self.starts[1:] = np.cumsum(counts)
        else:
            self.keys = distinct
            self.starts = np.append(first, n).astype(start_type)
        self.ids = ids
        self.upto = len(chunks)
        self.tail_keys = np.zeros(0, dtype=np.int64)
        self.tail_starts = np.zeros(1, dtype=np.int64)
        self.rows_upto = sum(len(p) for p in parts)
        return True

    def _batches(self, key: int) -> list[int]:
        """The numbers of the indexed batches holding ``key``."""
        if self.keys is None:
            i = key - self.lo
            if not 0 <= i < len(self.starts) - 1:
                return []
        else:
            i = int(np.searchsorted(self.keys, key))
            if i == len(self.keys) or self.keys[i] != key:
                return []
        return self.ids[int(self.starts[i]):int(self.starts[i + 1])].tolist()

    def rows(self, chunks: list[Batch], key) -> Batch | None:
        """The rows under ``key``, or None where this index cannot answer (a key
        column that is not all ints: the caller uses a dict index)."""
        if self.upto > len(chunks) or self.upto == 0:  # (the first: chunks only grow)
            if not self._rebuild(chunks):
                return None
        if not self._extend_tail(chunks):
            return None
        if len(self.tail_keys) > max(self.TAIL_MIN, self.rows_upto // 16):
            if not self._rebuild(chunks):
                return None
        if type(key) is not int:        # an int column: only an int-equal key matches
            if (type(key) is float and key.is_integer()) or type(key) is bool:
                key = int(key)
            else:
                return Batch()
        if not _I64.min <= key <= _I64.max:
            return Batch()
        rows: list[tuple] = []
        signs: list[int] = []
        for ci in self._batches(key):
            ch = chunks[ci]
            _take(ch, np.flatnonzero(self._key_column(ch) == key), rows, signs)
        at = np.flatnonzero(self.tail_keys == key)      # the batches written since
        if len(at):
            which = np.searchsorted(self.tail_starts, at, side="right") - 1
            for t in np.unique(which).tolist():
                _take(chunks[self.upto + t], at[which == t] - self.tail_starts[t], rows, signs)
        return Batch(rows, signs)

    def _extend_tail(self, chunks: list[Batch]) -> bool:
        """Append the key columns of the batches written since the last lookup to
        ``tail_keys``, so that a lookup compares the key with every batch after
        ``upto`` in one numpy operation (one a batch cost a miss ~6 ms at 600
        batches); False if one of them is not all ints."""
        done = self.upto + len(self.tail_starts) - 1
        if done >= len(chunks):
            return True
        new = [self._key_column(ch) for ch in chunks[done:]]
        if any(k is None for k in new):
            return False
        parts = cast("list[np.ndarray]", new)
        ends = len(self.tail_keys) + np.cumsum([len(k) for k in parts])
        self.tail_keys = np.concatenate([self.tail_keys, *parts])
        self.tail_starts = np.concatenate([self.tail_starts, ends])
        return True


def _take(chunk: Batch, at: np.ndarray, rows: list[tuple], signs: list[int]) -> None:
    """Append the rows of ``chunk`` at positions ``at``, with their signs."""
    if chunk.cols is not None:
        rows.extend(zip(*[column_list(c[at]) for c in chunk.cols]))
        signs.extend(chunk.sign_array[at].tolist())     # type: ignore[index]  # columnar
    else:
        for i in at.tolist():
            rows.append(chunk.rows[i])
            signs.append(chunk.signs[i])


class Base(Operator):
    kind = "base"
    stateful = True
    #: False: writes pass through, nothing is kept (a cluster worker's base node)
    holds_rows = True

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.types = [c.type for c in schema.columns]
        self.not_null = [not c.nullable or i in schema.primary_key
                         for i, c in enumerate(schema.columns)]
        self.pk = schema.primary_key
        self.reset()

    def reset(self) -> None:
        self._rows: dict[tuple, int] | None = {} if self.pk else None
        self.chunks: list[Batch] = []      # the insert-only form: the batches written
        self.n = 0                         # rows in ``chunks``
        self.by_key: dict[tuple, tuple] = {}
        #: key columns -> key tuple -> bucket of rows (state.bucket_add): the indexes
        #: partial readers' upqueries read (noria_py/partial.py), built at the first
        #: upquery on those columns and kept up to date by ``process``; forgotten with the
        #: rows (a reset), and built again at the next upquery
        self.indexes: dict[tuple[int, ...], dict] = {}
        #: the same for a table kept as its write batches (``ChunkIndex``)
        self.chunk_indexes: dict[tuple[int, ...], ChunkIndex] = {}

    @property
    def rows(self) -> dict[tuple, int]:
        """Row -> number of copies (the table turns indexed, see the module doc)."""
        rows = self._rows
        if rows is None:
            rows = self._rows = {}
            for chunk in self.chunks:
                for r, s in zip(chunk.to_rows(), chunk.signs):
                    rows[r] = rows.get(r, 0) + s
            self.chunks = []
            self.n = 0
            self.chunk_indexes = {}
        return rows

    def stored_rows(self) -> Iterator:
        """Every row, for a snapshot to store: rows, and where the table is kept as
        int64/float64 columns, ``ColumnChunk``s of them (stored as bytes)."""
        if self._rows is not None:
            yield from self.all_rows()
            return
        for chunk in self.chunks:
            if chunk.is_numeric_insert():       # (columnar)
                yield ColumnChunk(cast("tuple[np.ndarray, ...]", chunk.cols))
            else:
                yield from _expanded(chunk)

    def all_rows(self) -> list[tuple]:
        """Every row, each as many times as it is present."""
        out: list[tuple] = []
        if self._rows is None:
            for chunk in self.chunks:
                out.extend(_expanded(chunk))
        else:
            expand(self._rows, out)
        return out

    # ------------------------------------------------------------ validation

    def check_row(self, row: Sequence, n: int) -> tuple:
        """Row ``n`` of a write, coerced to the column types; raises on any problem."""
        cols = self.schema.columns
        if not isinstance(row, (tuple, list)):
            raise TypeMismatchError(
                f"row {n} for table {self.schema.name!r} must be a tuple, got {type(row).__name__}")
        if len(row) != len(cols):
            raise ArityError(f"row {n} for table {self.schema.name!r} has {len(row)} values, "
                             f"the table has {len(cols)} columns")
        out: list[object] = []
        for i, v in enumerate(row):
            if v is None:
                if self.not_null[i]:
                    raise TypeMismatchError(f"row {n}: column {cols[i].name!r} of table "
                                            f"{self.schema.name!r} is NOT NULL, got NULL")
                out.append(None)
                continue
            given = v
            if type(v) not in _PLAIN:      # numpy, pandas, Decimal: arguments.plain
                if v is DIV0:
                    raise DivisionByZeroError(
                        f"division by zero: row {n}, column {cols[i].name!r} of table "
                        f"{self.schema.name!r} (nothing was written)")
                try:
                    v = plain(v)
                except TypeMismatchError as exc:
                    raise TypeMismatchError(
                        f"row {n}: column {cols[i].name!r} of table {self.schema.name!r} "
                        f"is {self.types[i].value}: {exc}") from None
                if v is None:              # (NaT, NA)
                    if self.not_null[i]:
                        raise TypeMismatchError(f"row {n}: column {cols[i].name!r} of table "
                                                f"{self.schema.name!r} is NOT NULL, got "
                                                f"{given!r}")
                    out.append(None)
                    continue
            try:
                out.append(_coerce(v, self.types[i]))
            except (TypeError, OverflowError):     # OverflowError: an int too big for FLOAT
                raise TypeMismatchError(
                    f"row {n}: column {cols[i].name!r} of table {self.schema.name!r} is "
                    f"{self.types[i].value}, got {given!r} ({type(given).__name__}"
                    f"{_why(v, self.types[i])})") from None
        return tuple(out)

    _ALLOWED: dict[SqlType, set[type]] = {
        SqlType.INT: {int}, SqlType.FLOAT: {float}, SqlType.TEXT: {str}, SqlType.BOOL: {bool},
        SqlType.DATE: {datetime.date}, SqlType.TIMESTAMP: {datetime.datetime},
        SqlType.TIMESTAMPTZ: {datetime.datetime},
    }

    def check_rows(self, rows: Sequence[Sequence]) -> list[tuple]:
        """Every row checked and coerced, column by column (the fast path for big batches);
        on any problem, the row-by-row check finds it and names it."""
        return self._check_rows(rows)[0]

    def _check_rows(self, rows: Sequence[Sequence]) -> tuple[list[tuple], list | None]:
        """``check_rows``, and the checked rows' columns (tuples) with whether each holds
        a NULL, when the column-by-column check passed them unchanged (else None)."""
        if not rows:
            return [], None
        kinds = set(map(type, rows))
        if not kinds <= {tuple, list}:            # (subclasses too) check_row names the bad one
            if not all(isinstance(r, (tuple, list)) for r in rows):
                return self._one_by_one(rows)
            kinds.add(list)
        if kinds != {tuple}:
            rows = [r if type(r) is tuple else tuple(r) for r in rows]
        ncols = len(self.types)
        if set(map(len, rows)) != {ncols}:
            return self._one_by_one(rows)
        coerce = []
        # (one pass per column: ``zip(*rows)`` takes the rows as a million arguments,
        # 5 s for 1e6 rows of two INTs, where this takes 0.3 s)
        columns = [tuple(map(itemgetter(i), rows)) for i in range(ncols)]
        has_null = []
        for i, col in enumerate(columns):
            typ = self.types[i]
            seen = set(map(type, col))
            nulls = type(None) in seen
            has_null.append(nulls)
            if nulls:
                if self.not_null[i]:
                    return self._one_by_one(rows)
                seen.discard(type(None))
            if seen <= self._ALLOWED[typ]:
                if typ is SqlType.INT and seen:
                    vals = [v for v in col if v is not None] if nulls else col
                    if vals and (min(vals) < INT_MIN or max(vals) > INT_MAX):
                        return self._one_by_one(rows)
                elif typ is SqlType.TEXT and seen:
                    vals = [v for v in col if v is not None] if nulls else col
                    if not is_text("".join(vals)):     # (one check for the whole column)
                        return self._one_by_one(rows)
                elif typ is SqlType.TIMESTAMP and seen:
                    if any(v is not None and v.tzinfo is not None for v in col):
                        return self._one_by_one(rows)
                elif typ is SqlType.TIMESTAMPTZ and seen:
                    if any(v is not None and v.tzinfo is not _UTC for v in col):
                        return self._one_by_one(rows)     # (naive, or to convert to UTC)
                elif typ is SqlType.FLOAT and seen and has_nan(col):
                    coerce.append(i)                # each NaN made the one NaN, below
                continue
            if typ is SqlType.FLOAT and seen <= {float, int}:
                coerce.append(i)
                continue
            return self._one_by_one(rows)
        if coerce:
            out = []
            try:
                for r in rows:
                    r = list(r)
                    for i in coerce:
                        v = r[i]
                        if v is not None:
                            v = float(v)
                            r[i] = NAN if v != v else v
                    out.append(tuple(r))
            except OverflowError:                      # an int too big for a FLOAT
                return self._one_by_one(rows)
            return out, None
        # callers pass a list: by now, one of tuples
        return cast("list[tuple]", rows), list(zip(columns, has_null))

    def _one_by_one(self, rows: Sequence[Sequence]) -> tuple[list[tuple], None]:
        return [self.check_row(r, n) for n, r in enumerate(rows)], None

    def key_of(self, row: tuple) -> tuple:
        return self._key_of(row)

    @property
    def pk(self) -> tuple[int, ...]:
        """The primary key's column positions (empty: none)."""
        return self._pk

    @pk.setter
    def pk(self, cols: tuple[int, ...]) -> None:
        self._pk = tuple(cols)
        self._key_of = tuple_key(self._pk)      # row -> its key tuple, in C

    def prepare(self, inserts: Sequence[Sequence] = (), deletes: Sequence[Sequence] = ()) -> Batch:
        """The validated delta for a write (deletes first, then inserts); no state changes."""
        dels = self.check_rows(deletes)
        ins, checked = self._check_rows(inserts)
        pending: dict[tuple, int] = {}
        for n, r in enumerate(dels):
            have = self.rows.get(r, 0) + pending.get(r, 0)
            if have <= 0:
                raise RowNotFoundError(f"cannot delete row {n} {r!r}: table "
                                       f"{self.schema.name!r} holds no such row")
            pending[r] = pending.get(r, 0) - 1
        if self.pk:
            key_of = self._key_of
            freed = set(map(key_of, dels))
            keys = list(map(key_of, ins))
            # the common case in C: no key twice, none held (or each held one deleted
            # first); otherwise row by row, to name the first offending row
            if len(set(keys)) < len(keys) or not self.by_key.keys().isdisjoint(
                    keys if not freed else [k for k in keys if k not in freed]):
                seen: set[tuple] = set()
                for n, k in enumerate(keys):
                    if k in seen or (k in self.by_key and k not in freed):
                        raise DuplicateKeyError(f"row {n}: primary key {k!r} already exists "
                                                f"in table {self.schema.name!r}")
                    seen.add(k)
        if not dels and self._rows is None and len(ins) >= tuning.ARRAY_MIN:
            return Batch.columnar(self.columns(ins, checked), np.ones(len(ins), dtype=np.int64))
        return Batch.changes(dels, ins)

    def arrays_from_arrow(self, cols: Sequence) -> list[np.ndarray] | None:
        """Arrow columns (in table order) as arrays this table can take without a check
        per value, or None: only while it is kept as columns, and only INT columns of
        signed (or up to 32-bit unsigned) integers and FLOAT columns of numbers, with no
        NULL. (Anything else goes through ``check_rows``, which names any problem.)"""
        import pyarrow.types as pat
        if self._rows is not None:
            return None
        out = []
        for typ, col in zip(self.types, cols):
            t = col.type
            if col.null_count:
                return None
            small_int = pat.is_signed_integer(t) or (pat.is_unsigned_integer(t) and t.bit_width <= 32)
            if typ is SqlType.INT and small_int:
                out.append(np.asarray(col.to_numpy(), dtype=np.int64))
            elif typ is SqlType.FLOAT and (pat.is_floating(t) or pat.is_integer(t)):
                out.append(np.asarray(col.to_numpy(), dtype=np.float64))
            else:
                return None
        return out

    def arrays_from_numbers(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray] | None:
        """``arrays_from_arrow`` for int64 and float64 arrays (a cluster client's
        ``insert_columns``): the same columns taken, or None (then checked as rows)."""
        if self._rows is not None or len(arrays) != len(self.types):
            return None
        out = []
        for typ, a in zip(self.types, arrays):
            if typ is SqlType.INT and a.dtype == np.int64:
                out.append(a)
            elif typ is SqlType.FLOAT and a.dtype in (np.int64, np.float64):
                out.append(a.astype(np.float64, copy=False))
            else:
                return None
        return out

    def prepare_arrays(self, arrays: list[np.ndarray]) -> Batch:
        """The delta for inserting ``arrays_from_arrow``'s columns (no state changes)."""
        return Batch.columnar(arrays, np.ones(len(arrays[0]), dtype=np.int64))

    def columns(self, rows: list[tuple], checked: list | None = None) -> list[np.ndarray]:
        """Checked rows as arrays (``typed_columns``; ``checked``: their columns and
        NULL flags, if known)."""
        return typed_columns(self.types, rows, checked)

    # ------------------------------------------------------------ operator

    def process(self, port: int, batch: Batch) -> Batch:
        if not self.holds_rows:
            return batch
        if self.indexes:
            rows, signs = batch.rows, batch.signs
            for cols, index in self.indexes.items():
                index_batch(index, map(tuple_key(cols), rows), rows, signs)
        return self._apply(batch)

    def index_rows(self, cols: tuple[int, ...], key: tuple | None) -> Batch:
        """The rows whose ``cols`` equal ``key``, as a batch of insertions (each row's
        count its sign): an upquery's answer. ``key`` None: every row.

        The primary key needs no index of its own (``by_key`` is one). While the table
        is kept as its write batches (insert-only) and the key is one column of ints,
        the index is a ``ChunkIndex`` (for each key, the numbers of the batches
        holding it: about 2.4 bytes a row at ten rows a key; nothing done per write);
        otherwise a dict, key -> rows, built from the rows at the first call and kept
        up to date by ``process``. The first delete drops the ``ChunkIndex`` with the
        batches (the table turns indexed: ``rows``)."""
        if key is None:
            return self.snapshot()
        pk = self.pk
        if pk and self._rows is not None and sorted(cols) == sorted(pk):
            # the primary key: its own map (``by_key``) is the index, one row a key
            row = self.by_key.get(tuple(key[cols.index(c)] for c in pk))
            return Batch() if row is None else Batch([row], [1])
        if self._rows is None and cols not in self.indexes and len(cols) == 1:
            sorted_index = self.chunk_indexes.get(cols)
            if sorted_index is None:
                sorted_index = self.chunk_indexes[cols] = ChunkIndex(cols[0])
            found = sorted_index.rows(self.chunks, key[0])
            if found is not None:
                return found
        self.chunk_indexes.pop(cols, None)      # (rows now in a dict, or keys not all ints)
        index = self.indexes.get(cols)
        if index is None:
            index = self.indexes[cols] = {}
            keyf = tuple_key(cols)
            for r in self.all_rows():
                index_add(index, keyf(r), r, 1)
        bucket = index.get(key)
        if bucket is None:
            return Batch()
        return Batch([r for r, _ in items(bucket)], [c for _, c in items(bucket)])

    def _apply(self, batch: Batch) -> Batch:
        if self._rows is None:
            signs = batch.sign_array
            if signs is not None and len(signs) and signs.min() > 0:
                self.chunks.append(batch)
                self.n += int(signs.sum())
                return batch
            if signs is None and min(batch.signs, default=1) > 0:
                self.chunks.append(batch)
                self.n += sum(batch.signs)
                return batch
        rows = self.rows
        pk, key_of, by_key = self.pk, self._key_of, self.by_key
        for r, s in zip(batch.rows, batch.signs):
            c = rows.get(r, 0) + s
            if c > 0:
                rows[r] = c
                if pk and s > 0:
                    by_key[key_of(r)] = r
            else:
                rows.pop(r, None)
                if pk:
                    by_key.pop(key_of(r), None)
        return batch

    def snapshot(self) -> Batch:
        if not self.holds_rows:
            raise RuntimeError(f"base {self.schema.name} keeps no rows here: its rows are "
                               "the controller's")
        if self._rows is None:
            chunks = self.chunks
            first = chunks[0].cols if chunks else None
            if first is not None and all(c.cols is not None and len(c.cols) == len(first)
                                         for c in chunks):
                cols = [concat(parts) for parts in zip(*(c.cols for c in chunks))]
                return Batch.columnar(cols, np.concatenate([c.sign_array for c in chunks]))
            rows: list[tuple] = []
            signs: list[int] = []
            for c in chunks:
                rows.extend(c.to_rows())
                signs.extend(c.signs)
            return Batch(rows, signs)
        return Batch(list(self._rows), list(self._rows.values()))

    def parts(self) -> list[Batch]:
        """The table as batches that add up to it, joining none: its write batches
        while it is kept as them (shared, never copied: no batch is changed once
        written), else one batch of its rows (``snapshot``). A copy of a big table
        (a base's log sent whole, a replica's log promoted) costs nothing per row."""
        if self.holds_rows and self._rows is None:
            return list(self.chunks)
        return [self.snapshot()]

    def __len__(self) -> int:
        if self._rows is None:
            return self.n
        return sum(self._rows.values())

    def describe(self) -> str:
        return f"base {self.schema.name}"
