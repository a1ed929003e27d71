"""NaN, as PostgreSQL has it: one value, equal to itself, above every other number.

In SQL (PostgreSQL, DuckDB) a FLOAT NaN equals NaN, sorts above every other value
(+inf included), and groups, joins, deduplicates and is looked up like any other
value. Python's NaN does none of that: ``nan == nan`` is False, ``nan < x`` and
``nan > x`` are both False (so a sort or a ``SortedList`` holding one is corrupt), and
since Python 3.10 ``hash(nan)`` is its ``id``, so a dict finds a NaN key only under
the very same object. The engine therefore keeps two rules:

1. **One object.** Inside the engine every float NaN is the one object ``NAN``
   (``math.nan`` itself). Python's containers compare by identity before equality
   (``x is y or x == y``: dicts, sets, ``tuple ==``, ``list.count``), so with one
   object a NaN finds itself as a dict key, in a row tuple, in a bucket: the base's
   multiset of rows, primary keys, group keys, DISTINCT, join keys and reader keys
   need no code of their own. A NaN is made the one object wherever a Python float
   comes into the engine:

   - written rows and deleted rows (``Base.check_rows``), Arrow input read as rows
     (``arrowio.column_rows``), lookup keys (``Reader.lookup``, ``delete_keys``);
   - floats made from numpy arrays (``column_list``: a columnar batch read as rows, a
     dense state's arrays read back, stored columns read back; ``ops.dense``: a dense
     row read by key) and object arrays made from float ones (``as_objects``,
     ``concat``), since each ``tolist``/``item``/``astype(object)`` makes a new float
     object per value. An object array therefore never holds another NaN;
   - floats computed by expressions (``expression``: arithmetic, ``ABS``, ``CAST``
     of FLOAT type) and by aggregates (SUM and AVG give ``math.nan``);
   - everything msgpack decodes (``storage.codec.unpackb``: the write-ahead log,
     snapshots, and the cluster's wire, rows, keys and checkpoints alike).

2. **Explicit order.** Where floats are compared rather than matched, NaN is handled
   by name: sort keys (``ordering``: NaN after +inf ascending, first descending; NULLs
   keep their own place), SQL comparisons of FLOAT operands (``expression``: NaN = NaN
   is TRUE, NaN > any other number is TRUE), MIN/MAX (``accumulators``: NaN counted
   apart from the sorted values, so deleting it reveals the real extreme), array
   equality (``equal_values``) and the sharding hash (``hashing``: every NaN, whatever
   its bits, on one shard).

A NaN's sign and payload bits are not kept: every NaN is the same value, as in SQL.
New code that makes Python floats out of arrays or bytes goes through these helpers
(``tests/differential/test_nan.py`` writes NaNs of several bit patterns, as new objects,
through every view shape, against DuckDB).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["NAN", "canon", "canon_row", "has_nan", "column_list", "as_objects", "concat",
           "equal_values", "canon_deep"]

#: the one NaN object inside the engine
NAN: float = math.nan


def canon(v: Any) -> Any:
    """``v``, or ``NAN`` if it is a NaN (any other value, None included, unchanged).
    For scalars only: a tuple holding two different NaN objects is unequal to itself."""
    return NAN if v != v else v


def canon_row(row: tuple) -> tuple:
    """``row`` with each NaN made ``NAN`` (the same tuple if it holds none)."""
    for v in row:
        if v != v:
            return tuple([NAN if x != x else x for x in row])
    return row


def has_nan(values: Sequence) -> bool:
    """Whether ``values`` (floats and None: a FLOAT column) hold a NaN. A sum in C
    first: only a NaN (or infinities of both signs) makes it NaN, so a column without
    one costs no Python step per value."""
    try:
        total = sum(values)
    except TypeError:                     # a NULL: skipped (as are zeros; NaN is truthy)
        total = sum(filter(None, values))
    return total != total and any(v != v for v in values)


def column_list(a: np.ndarray) -> list:
    """``a.tolist()``, with each NaN made ``NAN``. (An object array holds only ``NAN``
    already: every one is built from Python values that do, or by ``as_objects`` and
    ``concat`` from float arrays.)"""
    out = a.tolist()
    if a.dtype.kind == "f":
        for i in np.flatnonzero(np.isnan(a)).tolist():
            out[i] = NAN
    return out


def as_objects(a: np.ndarray) -> np.ndarray:
    """``a.astype(object)``, each NaN of a float array made ``NAN``."""
    out = a.astype(object)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if nan.any():
            out[nan] = NAN
    return out


def concat(parts: Sequence[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)``; where float arrays meet object ones (objects come
    out), each NaN made ``NAN``."""
    out = np.concatenate(parts)
    if out.dtype == object and any(p.dtype.kind == "f" for p in parts):
        nan = out != out
        if nan.any():
            out[nan] = NAN
    return out


def equal_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one length hold equal values pairwise, NaN equal to NaN."""
    eq = a == b
    if eq.all():
        return True
    if a.dtype.kind not in "fO" or b.dtype.kind not in "fO":
        return False
    miss = ~eq
    return bool(((a[miss] != a[miss]) & (b[miss] != b[miss])).all())


def canon_deep(obj: Any) -> Any:
    """``obj`` (what msgpack decodes: tuples, lists, dicts and scalars) with each NaN
    made ``NAN``, rebuilt where it holds one."""
    t = type(obj)
    if t is float:
        return NAN if obj != obj else obj
    if t is tuple:
        return tuple([canon_deep(x) for x in obj])
    if t is list:
        return [canon_deep(x) for x in obj]
    if t is dict:
        return {canon_deep(k): canon_deep(v) for k, v in obj.items()}
    return obj
