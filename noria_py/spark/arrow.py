"""Rows (tuples of Python values) to and from Arrow, typed by the plan's column types,
for Spark: a column whose plan type is unknown is inferred, and one of only NULLs gets
a type all the same (Spark needs one). The SQL-to-Arrow type map itself is the
engine's (``noria_py.arrowio``), shared with ``Result.arrow`` and ``insert_arrow``."""
from __future__ import annotations

import datetime
import decimal
from typing import Iterable, Sequence

import pyarrow as pa

from sql_frontend.types import SqlType

from ..arrowio import ARROW_TYPES, arrow_array, column_rows


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
            arr = arrow_array(list(values), at) if at is not None else pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arr = pa.array(values)
        if pa.types.is_null(arr.type):
            arr = pa.array(values, type=pa.int64())     # all NULL: any type; Spark needs one
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=list(names))


def arrow_to_rows(table: pa.Table | pa.RecordBatch,
                  types: Sequence[SqlType | None] | None = None) -> list[tuple]:
    """The rows of a Spark result, as the engine holds values of the plan's ``types``: a
    decimal of scale 0 (an exact SUM of an INT column: ``translate``; the engine has no
    DECIMAL) as a Python int; a time as its column's type holds it, whichever of
    Spark's two timestamp types the result has (in the session's zone, UTC): naive for
    TIMESTAMP, in ``datetime.timezone.utc`` for TIMESTAMPTZ."""
    rows = column_rows(table.columns)
    if any(pa.types.is_decimal(c.type) and c.type.scale == 0 for c in table.columns):
        rows = [tuple(int(v) if isinstance(v, decimal.Decimal) else v for v in r) for r in rows]
    times = {i: t for i, t in enumerate(types or ())
             if t in (SqlType.TIMESTAMP, SqlType.TIMESTAMPTZ)}
    if times and rows:
        rows = [tuple(_time(v, times[i]) if i in times else v for i, v in enumerate(r))
                for r in rows]
    return rows


def _time(v: object, t: SqlType) -> object:
    if not isinstance(v, datetime.datetime):
        return v
    if t is SqlType.TIMESTAMP:
        return v if v.tzinfo is None else v.astimezone(_UTC).replace(tzinfo=None)
    return v.replace(tzinfo=_UTC) if v.tzinfo is None else v.astimezone(_UTC)


_UTC = datetime.timezone.utc


def expand(counted: Iterable[tuple[tuple, int]]) -> list[tuple]:
    """(row, count) pairs as a list with each row repeated count times."""
    out: list[tuple] = []
    for r, c in counted:
        if c == 1:
            out.append(r)
        elif c > 1:
            out.extend([r] * c)
    return out
