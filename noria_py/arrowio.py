"""Arrow at the engine's edge: the column types a plan's SQL types map to, and the rows
of a ``pyarrow.Table`` handed to ``insert_arrow``.

The embedded ``Table`` and the cluster client's ``RemoteTable`` both take Arrow tables,
so the matching of Arrow columns to a table's columns lives here, below both: neither
client module imports the other for it. It depends on nothing in the engine but its
errors, so any module may import it at the top.

Invariants: a table's Arrow columns are matched by name, ignoring case, and must be
exactly its columns (no missing, no extra); rows come out in the table's column order
as tuples of Python values (``to_pylist``), which is what ``insert`` takes. A plan's
NULL type has no Arrow type of its own here: each user decides what an all-NULL
column becomes (``pa.null()`` in a ``Result``, int64 for Spark).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from sql_frontend.types import SqlType

from .errors import ArityError, TypeMismatchError

ARROW_TYPES: dict[SqlType, pa.DataType] = {
    SqlType.INT: pa.int64(),
    SqlType.FLOAT: pa.float64(),
    SqlType.TEXT: pa.string(),
    SqlType.BOOL: pa.bool_(),
    SqlType.DATE: pa.date32(),
    SqlType.TIMESTAMP: pa.timestamp("us"),
}


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
    return list(zip(*[c.to_pylist() for c in columns]))


def arrow_rows(table: Any, columns: Sequence[str], name: str) -> list[tuple]:
    """The rows of a ``pyarrow.Table``, as ``arrow_columns`` matches them."""
    return column_rows(arrow_columns(table, columns, name))
