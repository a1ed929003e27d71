"""Rows (tuples of Python values) to and from Arrow, typed by the plan's column types."""
from __future__ import annotations

from typing import Iterable, Sequence

import pyarrow as pa

from sql_frontend.types import SqlType

ARROW_TYPES = {
    SqlType.INT: pa.int64(),
    SqlType.FLOAT: pa.float64(),
    SqlType.TEXT: pa.string(),
    SqlType.BOOL: pa.bool_(),
    SqlType.DATE: pa.date32(),
    SqlType.TIMESTAMP: pa.timestamp("us"),
}


def arrow_type(t: SqlType | None) -> pa.DataType | None:
    return ARROW_TYPES.get(t) if t is not None else None


def rows_to_arrow(rows: Sequence[tuple], names: Sequence[str],
                  types: Sequence[SqlType | None]) -> pa.Table:
    """A table of ``rows``; a column whose plan type is unknown (NULL) is inferred."""
    cols = list(zip(*rows)) if rows else [()] * len(names)
    arrays = []
    for values, t in zip(cols, types):
        at = arrow_type(t)
        try:
            arr = pa.array(values, type=at) if at is not None else pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arr = pa.array(values)
        if pa.types.is_null(arr.type):
            arr = pa.array(values, type=pa.int64())     # all NULL: any type; Spark needs one
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=list(names))


def arrow_to_rows(table: pa.Table | pa.RecordBatch) -> list[tuple]:
    if table.num_rows == 0:
        return []
    return list(zip(*(c.to_pylist() for c in table.columns)))


def expand(counted: Iterable[tuple[tuple, int]]) -> list[tuple]:
    """(row, count) pairs as a list with each row repeated count times."""
    out: list[tuple] = []
    for r, c in counted:
        if c == 1:
            out.append(r)
        elif c > 1:
            out.extend([r] * c)
    return out
