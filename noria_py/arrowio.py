"""Arrow at the engine's edge: the column types a plan's SQL types map to, and the rows
of a ``pyarrow.Table`` handed to ``insert_arrow``.

The embedded ``Table`` and the cluster client's ``RemoteTable`` both take Arrow tables,
so the matching of Arrow columns to a table's columns lives here, below both: neither
client module imports the other for it. It depends on nothing in the engine but its
errors and ``nan``, so any module may import it at the top.

Invariants: a table's Arrow columns are matched by name, ignoring case, and must be
exactly its columns (no missing, no extra); rows come out in the table's column order
as tuples of Python values (``to_pylist``, each NaN the one NaN: noria_py.nan), which
is what ``insert`` takes (and what Spark recovery feeds operators directly). A plan's
NULL type has no Arrow type of its own here: each user decides what an all-NULL
column becomes (``pa.null()`` in a ``Result``, int64 for Spark).

Between a cluster client and its server an Arrow table travels as an Arrow IPC stream
(``to_ipc`` / ``from_ipc``): columns stay columns, with no per-row Python work on either
side, and nothing is pickled; a stream read back is validated in full before use.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from sql_frontend.types import SqlType

from .errors import ArityError, TypeMismatchError
from .nan import canon, has_nan

ARROW_TYPES: dict[SqlType, pa.DataType] = {
    SqlType.INT: pa.int64(),
    SqlType.FLOAT: pa.float64(),
    SqlType.TEXT: pa.string(),
    SqlType.BOOL: pa.bool_(),
    SqlType.DATE: pa.date32(),
    SqlType.TIMESTAMP: pa.timestamp("us"),
    SqlType.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}


_INT64 = pa.int64()


def arrow_array(values: list, t: pa.DataType | None) -> pa.Array:
    """``values`` as an Arrow array of type ``t``; an INT column (int64) holding a value
    past 64 bits (a SUM of an INT column is exact, as PostgreSQL's ``SUM(bigint)``, a
    ``numeric``) as ``decimal128(38, 0)``, as DuckDB writes its HUGEINT (76 digits,
    ``decimal256``, where 38 are not enough)."""
    try:
        return pa.array(values, type=t)
    except (OverflowError, pa.ArrowInvalid):
        if t != _INT64:
            raise
        ints = [v for v in values if type(v) is int]
        if len(ints) + values.count(None) != len(values) or all(
                -(1 << 63) <= v < (1 << 63) for v in ints):
            raise
        digits = max(len(str(abs(v))) for v in ints)
        return pa.array(values, type=pa.decimal128(38, 0) if digits <= 38 else pa.decimal256(76, 0))


def arrow_columns(table: Any, columns: Sequence[str], name: str) -> list:
    """The columns of a ``pyarrow.Table`` (or ``RecordBatch``) in the order of ``columns``
    (matched by name, ignoring case); every column must be there once, and no other."""
    if not isinstance(table, (pa.Table, pa.RecordBatch)):
        raise TypeMismatchError(f"insert_arrow into table {name!r} takes a pyarrow.Table, got "
                                f"{type(table).__name__} (use insert for rows)")
    names = [c.lower() for c in table.column_names]
    twice = sorted({c for c in table.column_names if names.count(c.lower()) > 1})
    if twice:
        raise ArityError(f"arrow table columns {table.column_names} name {twice} more than "
                         f"once (ignoring case), for table {name!r}")
    missing = [c for c in columns if c.lower() not in names]
    extra = [c for c in table.column_names if c.lower() not in {x.lower() for x in columns}]
    if missing or extra:
        raise ArityError(f"arrow table columns {table.column_names} do not match table "
                         f"{name!r} columns {list(columns)}")
    return [table.column(names.index(c.lower())) for c in columns]


def column_rows(columns: Iterable[Any]) -> list[tuple]:
    """Arrow columns (or arrays) of equal length as a list of row tuples."""
    return list(zip(*[_values(c) for c in columns]))


def _values(column: Any) -> list:
    """An Arrow column's values, each NaN the one NaN."""
    values = column.to_pylist()
    if pa.types.is_floating(column.type) and has_nan(values):
        values = [canon(v) for v in values]
    return values


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as the bytes of an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    """The table of an Arrow IPC stream (``to_ipc``), validated in full; a
    ``TypeMismatchError`` if the bytes are not a valid stream."""
    try:
        table = ipc.open_stream(pa.py_buffer(data)).read_all()
        table.validate(full=True)
    except (pa.ArrowException, ValueError, OSError) as e:
        raise TypeMismatchError(f"not a valid Arrow IPC stream: {e}") from None
    return table


def arrow_rows(table: Any, columns: Sequence[str], name: str) -> list[tuple]:
    """The rows of a ``pyarrow.Table``, as ``arrow_columns`` matches them."""
    return column_rows(arrow_columns(table, columns, name))


def as_arrow_table(data: Any) -> Any:
    """``data`` as a ``pyarrow.Table`` when it is tabular data Arrow can take: a
    ``RecordBatch``, anything that speaks the Arrow PyCapsule stream interface
    (``__arrow_c_stream__``: pandas 2.2+, polars, DuckDB relations, other Arrow
    libraries), or an older pandas or polars DataFrame; anything else as it is (for
    the caller to refuse)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    module = type(data).__module__.split(".")[0]
    if module == "pandas" and type(data).__name__ == "DataFrame":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars" and type(data).__name__ == "DataFrame":
        return data.to_arrow()
    return data


def is_frame(data: Any) -> bool:
    """Whether ``data`` is tabular data ``as_arrow_table`` converts (not rows)."""
    return as_arrow_table(data) is not data or isinstance(data, pa.Table)
