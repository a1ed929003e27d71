"""A stable hash for sharding: the same value lands on the same shard in every process.

Python's ``hash()`` is salted per process for strings, so it cannot be used. Values
that compare equal in SQL hash alike: 1, 1.0 and True all go where 1 goes, so a join
between an INT and a FLOAT column finds its matches on one shard, and every NaN, whatever
its sign and payload bits, goes where the others go (NaN equals NaN in SQL: noria_py.nan).
"""
from __future__ import annotations

import datetime
import numbers
import struct
import zlib
from typing import Any

_MASK = (1 << 64) - 1
_NAN_HASH = zlib.crc32(b"NaN")
_DIV0_HASH = zlib.crc32(b"division by zero")     # (noria_py/divzero.py)


def value_hash(v: object) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v                  # unmasked, so that v % shards is the shard of an int key
    if isinstance(v, float):
        if v.is_integer():
            return int(v)
        if v != v:
            return _NAN_HASH
        return zlib.crc32(struct.pack("<d", v))
    if isinstance(v, str):
        return zlib.crc32(v.encode("utf-8", "surrogatepass"))
    if isinstance(v, datetime.datetime):
        return zlib.crc32(v.isoformat().encode())
    if isinstance(v, datetime.date):
        return v.toordinal()
    if isinstance(v, numbers.Number):
        return _other_number(v)
    if type(v).__name__ == "DivisionByZero":    # noria_py.divzero.DIV0 (this module
        return _DIV0_HASH                       # imports nothing of the package)
    raise TypeError(f"cannot shard on a value of type {type(v).__name__}")


def _other_number(v: Any) -> int:
    """Decimal, Fraction, complex, numpy's: where the int or float each equals goes (a
    lookup key may be one; a column's values never are)."""
    if isinstance(v, complex):
        if v.imag:
            return 0                  # (equals no value a column holds)
        v = v.real
    try:
        i = int(v)
    except (TypeError, ValueError, OverflowError):      # NaN, infinity
        i = None
    if i is not None and i == v:
        return i
    try:
        return value_hash(float(v))
    except (TypeError, ValueError, OverflowError):
        return 0


def key_hash(values: tuple) -> int:
    if len(values) == 1:
        return value_hash(values[0])
    h = 0
    for v in values:
        h = (h * 1_000_003 + value_hash(v)) & _MASK
    return h


def shard_of(values: tuple, shards: int) -> int:
    """The shard (0..shards-1) that owns rows whose key columns hold ``values``."""
    return key_hash(values) % shards
