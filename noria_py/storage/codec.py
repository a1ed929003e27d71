"""Value encoding for stored rows: msgpack with extension types.

msgpack alone already keeps ``bool`` apart from ``int`` and ``float`` apart
from ``int`` (a float is always written as float64, so ``1.0`` comes back as
``1.0``), and it is a fixed, language-neutral format: unlike pickle, reading
a damaged or hostile file can produce garbage values or a decoding error,
never code execution. Dates and datetimes have no msgpack type, so they use
extension types with fixed-size little-endian payloads:

========  ==========================  =========================================
ext code  Python type                 payload
========  ==========================  =========================================
1         ``datetime.date``           ``<i``  proleptic Gregorian ordinal
2         naive ``datetime``          ``<iqB`` ordinal, microsecond of day, fold
3         aware ``datetime``          ``<iqBq`` as 2, then UTC offset in
                                      microseconds (the wall-clock time is
                                      stored, not UTC)
4         ``int`` past 64 bits        two's complement, big-endian, fewest
                                      bytes (``packb(big_ints=True)`` only)
5         the division-by-zero        empty (noria_py/divzero.py)
          marker ``DIV0``
6         ``ExactAvg`` (an exact      msgpack array [sum, count] of the AVG's
          AVG of integers)            integers (the sum as 4 past 64 bits)
7         ``PgNumeric`` (arithmetic   msgpack array [unscaled, scale] (the
          on such an AVG)             unscaled value as 4 past 64 bits)
========  ==========================  =========================================

``ExactAvg`` (noria_py/ops/accumulators.py: the PostgreSQL front end's AVG of integers,
sent as PostgreSQL's ``numeric``) is a float subclass, which msgpack writes as a plain
float without asking: so ``packb`` puts extension type 6 in its place wherever it is in
the object (``_carry_avgs``; a ``PgNumeric``, noria_py/numeric.py, type 7) and packs
again, once this process has made one (``PgNumeric.made``: until then nothing is looked
for, and a process without such views pays nothing), and only where the packed bytes
hold a float's tag (0xcb; none, no float). The search is in C over the common shapes (a list of row tuples is one pass over its
values), and costs about what packing does: in a process that has made an ``ExactAvg``,
a frame that holds a 0xcb byte takes about twice as long to pack.

An aware datetime comes back with a fixed-offset ``datetime.timezone``: the
offset and the instant survive, the zone's name and its future DST rules do
not (a ``zoneinfo`` zone cannot be rebuilt from an offset).

Integers must fit in msgpack's range, -2**63 .. 2**64-1; anything else is
refused with :class:`EncodeError` rather than silently changed: no table holds one (an
INT is 64 bits). Computed values may pass it (``SUM`` of an INT column is exact, as
PostgreSQL's ``SUM(bigint)``, a ``numeric``), so the cluster's wire packs with
``big_ints=True``: an integer outside msgpack's range becomes extension type 4, its
two's complement in the fewest big-endian bytes that hold it with its sign. Decoding
always reads it.

A float NaN is written as the bits it has, and every NaN read back is the engine's one
NaN object (``noria_py.nan``: decoding makes a new float object per value, and a NaN
finds itself in a dict only as that object): rows, keys and checkpoints from the log,
a snapshot or the cluster's wire are ready to match the rows in memory.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import operator
import re
import struct
from collections.abc import Callable
from typing import Any, cast

import msgpack
import numpy as np

from ..divzero import DIV0
from ..nan import canon_deep, column_list

__all__ = [
    "EXT_DATE",
    "EXT_DATETIME",
    "EXT_DATETIME_TZ",
    "EXT_BIGINT",
    "EncodeError",
    "DecodeError",
    "packb",
    "Packer",
    "unpackb",
    "check_rows",
    "rows_are_plain",
]

EXT_DATE = 1
EXT_DATETIME = 2
EXT_DATETIME_TZ = 3
EXT_BIGINT = 4
EXT_DIV0 = 5            # the division-by-zero marker (noria_py/divzero.py), no data
EXT_AVG = 6             # an ExactAvg (noria_py/ops/accumulators.py): [sum, count]
EXT_NUMERIC = 7         # a PgNumeric (noria_py/numeric.py): [unscaled, scale]

_DATE = struct.Struct("<i")
_DATETIME = struct.Struct("<iqB")
_DATETIME_TZ = struct.Struct("<iqBq")

_US_PER_SECOND = 1_000_000
_US_PER_DAY = 86_400 * _US_PER_SECOND


class EncodeError(ValueError):
    """A value that the storage format cannot represent faithfully."""


class DecodeError(ValueError):
    """Bytes that are not a valid encoding (damaged or foreign data)."""


def _default(obj: Any) -> msgpack.ExtType:
    # datetime is a subclass of date, so it must be tested first.
    if isinstance(obj, _dt.datetime):
        us = ((obj.hour * 60 + obj.minute) * 60 + obj.second) * _US_PER_SECOND + obj.microsecond
        offset = obj.utcoffset()
        if offset is None:
            return msgpack.ExtType(EXT_DATETIME, _DATETIME.pack(obj.toordinal(), us, obj.fold))
        off_us = (offset.days * 86_400 + offset.seconds) * _US_PER_SECOND + offset.microseconds
        return msgpack.ExtType(EXT_DATETIME_TZ, _DATETIME_TZ.pack(obj.toordinal(), us, obj.fold, off_us))
    if isinstance(obj, _dt.date):
        return msgpack.ExtType(EXT_DATE, _DATE.pack(obj.toordinal()))
    if obj is DIV0:
        return msgpack.ExtType(EXT_DIV0, b"")
    if isinstance(obj, int):
        raise OverflowError(f"integer {obj} is outside msgpack's range (-2**63 .. 2**64-1)")
    raise TypeError(f"cannot store a value of type {type(obj).__name__}: {obj!r:.80}")


def _default_big_ints(obj: Any) -> msgpack.ExtType:
    """``_default``, and an integer outside msgpack's range (msgpack hands it here) as
    extension type 4."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return msgpack.ExtType(EXT_BIGINT, obj.to_bytes(obj.bit_length() // 8 + 1, "big",
                                                        signed=True))
    return _default(obj)


def _from_parts(ordinal: int, us: int, fold: int, tz: _dt.tzinfo | None) -> _dt.datetime:
    if not 0 <= us < _US_PER_DAY or fold not in (0, 1):
        raise ValueError("datetime field out of range")
    d = _dt.date.fromordinal(ordinal)
    secs, micro = divmod(us, _US_PER_SECOND)
    mins, sec = divmod(secs, 60)
    hour, minute = divmod(mins, 60)
    return _dt.datetime(d.year, d.month, d.day, hour, minute, sec, micro, tzinfo=tz, fold=fold)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_DATE:
        (ordinal,) = _DATE.unpack(data)
        return _dt.date.fromordinal(ordinal)
    if code == EXT_DATETIME:
        ordinal, us, fold = _DATETIME.unpack(data)
        return _from_parts(ordinal, us, fold, None)
    if code == EXT_DATETIME_TZ:
        ordinal, us, fold, off_us = _DATETIME_TZ.unpack(data)
        tz = _dt.timezone(_dt.timedelta(microseconds=off_us))
        return _from_parts(ordinal, us, fold, tz)
    if code == EXT_DIV0 and not data:
        return DIV0
    if code == EXT_BIGINT:
        if not data:
            raise ValueError("an empty integer")
        return int.from_bytes(data, "big", signed=True)
    if code == EXT_AVG:
        parts = msgpack.unpackb(data, raw=False, use_list=False, ext_hook=_ext_hook)
        if (type(parts) is not tuple or len(parts) != 2 or type(parts[0]) is not int
                or type(parts[1]) is not int or parts[1] <= 0):
            raise ValueError("an AVG must be [sum, count], count > 0")
        return _avg_type()(*parts)
    if code == EXT_NUMERIC:
        parts = msgpack.unpackb(data, raw=False, use_list=False, ext_hook=_ext_hook)
        if (type(parts) is not tuple or len(parts) != 2 or type(parts[0]) is not int
                or type(parts[1]) is not int or not 0 <= parts[1] <= 1000):
            raise ValueError("a numeric must be [unscaled, scale], 0 <= scale <= 1000")
        from ..numeric import PgNumeric
        return PgNumeric(*parts)
    raise ValueError(f"unknown msgpack extension type {code}")


_exact_avg: Any = None
_pg_numeric: Any = None


def _avg_type() -> Any:
    """``ExactAvg`` (and ``PgNumeric`` into ``_pg_numeric``), imported when first needed
    (the operators import this module)."""
    global _exact_avg, _pg_numeric
    if _exact_avg is None:
        from ..numeric import PgNumeric
        from ..ops.accumulators import ExactAvg
        _exact_avg, _pg_numeric = ExactAvg, PgNumeric
    return _exact_avg


_CONTAINERS = frozenset({list, tuple, dict})


def _carry_avgs(obj: Any, avg: type) -> Any:
    """``obj`` with each ``avg`` in it, in lists, tuples and dicts at any depth, made
    extension type 6 (and each ``PgNumeric``, ``avg``'s base, type 7); ``obj`` itself
    (not copied) where it holds none."""
    t = type(obj)
    if t is avg:
        return msgpack.ExtType(EXT_AVG, packb((obj.total, obj.count), big_ints=True))
    if t is _pg_numeric:
        return msgpack.ExtType(EXT_NUMERIC, packb(obj.exact(), big_ints=True))
    if t is dict:
        carried = {k: _carry_avgs(v, avg) for k, v in obj.items()}
        return obj if all(map(operator.is_, carried.values(), obj.values())) else carried
    if t is not list and t is not tuple:
        return obj
    kinds = set(map(type, obj))
    if kinds == {tuple}:                # rows: their values looked at in one pass
        inner = set(map(type, itertools.chain.from_iterable(obj)))
        if avg not in inner and _pg_numeric not in inner and not inner & _CONTAINERS:
            return obj
    elif avg not in kinds and _pg_numeric not in kinds and not kinds & _CONTAINERS:
        return obj
    out = [_carry_avgs(v, avg) for v in obj]
    if all(map(operator.is_, out, obj)):
        return obj
    return out if t is list else tuple(out)


def packb(obj: Any, big_ints: bool = False) -> bytes:
    """Encode ``obj``; the one place that fixes the packer options, so that
    every file in the data directory is written the same way. ``big_ints``: integers
    outside msgpack's range are written as extension type 4 instead of refused (the
    cluster's wire, not the data directory). An ``ExactAvg`` is written as extension
    type 6 (the module docstring)."""
    try:
        def pack(o: Any) -> bytes:
            return msgpack.packb(o, default=_default_big_ints if big_ints else _default,
                                 use_bin_type=True, use_single_float=False, strict_types=False)
        return _avgs_carried(obj, pack(obj), pack)
    except (TypeError, OverflowError, ValueError, UnicodeEncodeError) as exc:
        raise EncodeError(str(exc)) from exc


def _avgs_carried(obj: Any, data: bytes, pack: Callable[[Any], bytes]) -> bytes:
    """``data`` (``obj`` packed by ``pack``), packed again with each ``ExactAvg`` in it as
    extension type 6 where it holds one (the module docstring)."""
    avg = _exact_avg or _avg_type()
    if _pg_numeric.made and b"\xcb" in data:       # (a float is 0xcb and 8 bytes: none, no AVG)
        carried = _carry_avgs(obj, avg)
        if carried is not obj:
            return pack(carried)
    return data


class Packer:
    """``packb`` with one msgpack packer kept (for one thread at a time): its buffer is
    made once, not at each call (a 256 KB allocation each time: a small frame's
    encoding twice as slow). The same options and errors as ``packb``; after a payload
    of more than ``KEEP`` bytes the buffer it grew to is let go."""

    KEEP = 1 << 20

    def __init__(self, big_ints: bool = False) -> None:
        self.big_ints = big_ints
        self._pack = self._packer()

    def _packer(self) -> Callable[[Any], bytes]:
        return msgpack.Packer(default=_default_big_ints if self.big_ints else _default,
                              use_bin_type=True, use_single_float=False,
                              strict_types=False).pack

    def __call__(self, obj: Any) -> bytes:
        try:
            out: bytes = self._pack(obj)     # (on an error, msgpack empties its buffer)
            out = _avgs_carried(obj, out, self._pack)
        except (TypeError, OverflowError, ValueError, UnicodeEncodeError) as exc:
            raise EncodeError(str(exc)) from exc
        if len(out) > self.KEEP:
            self._pack = self._packer()
        return out


#: what a msgpack float whose exponent bits are all ones (a NaN or an infinity) starts
#: with: where none is found, the payload holds no NaN (the check costs one scan in C)
_MAYBE_NAN = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]|\xca[\x7f\xff][\x80-\xff]")
#: its two halves, searched one after the other: each starts with one literal byte,
#: which the regex engine skips to by a fast scan, where the alternation tried every
#: position (~16 us a KB on raw int64 bytes; 16 KB: 255 us against 15 us by numpy)
_MAYBE_NAN64 = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")
_MAYBE_NAN32 = re.compile(rb"\xca[\x7f\xff][\x80-\xff]")
#: payloads at least this long are scanned with numpy instead (a columnar batch or a
#: snapshot chunk carries raw int64 bytes): the halves cost 3.4 us at 4 KB against
#: numpy's 13.6, 12 against 18 at 16 KB, the same at 32 KB, more above (a batch of
#: 1,000 votes as columns is 16 KB; process time, 2026-11-26, load 7)
_SCAN_BY_ARRAY = 1 << 15
_SCAN_BLOCK = 1 << 18


def maybe_nan(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` may hold a msgpack float whose exponent bits are all ones (NaN
    or an infinity): ``_MAYBE_NAN``'s match, found the quicker way for the length."""
    if len(data) < _SCAN_BY_ARRAY:
        return _MAYBE_NAN64.search(data) is not None or _MAYBE_NAN32.search(data) is not None
    whole = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, len(whole), _SCAN_BLOCK):      # (bounded temporaries)
        a = whole[start:start + _SCAN_BLOCK + 2]          # (3-byte windows across blocks)
        lead, third = a[:-2], a[2:]
        found = ((lead == 0xcb) & (third >= 0xf0)) | ((lead == 0xca) & (third >= 0x80))
        found &= (a[1:-1] & 0x7f) == 0x7f
        if found.any():
            return True
    return False


#: ``unpackb`` looks for a NaN in the decoded object (``nan_in``) instead of scanning
#: the bytes (``maybe_nan``) when the payload is at least this long (below, the scan
#: takes a microsecond or less), and it holds at most one value for every
#: ``NAN_WALK_BYTES`` of its bytes (else it scans). A value looked at costs about
#: what scanning 20-60 bytes does (``set(map(type, ...))`` in C), so an object within
#: that bound costs about the scan's time or less, and one past it is given up before
#: any large array is looked at; a columnar batch (a few dozen values over kilobytes
#: of raw int64 bytes: the cluster's data messages, a write, a log's group) costs
#: 2-4 us instead of the scan's 5-45 (frames of 8-32 KB of the vote workload, the
#: quickest of 5 repeats, load 9)
NAN_WALK_MIN = 2048
NAN_WALK_BYTES = 48
_NESTED = frozenset({tuple, list, dict})


def nan_in(obj: Any, budget: int) -> bool | None:
    """Whether ``obj`` (what msgpack decodes) holds a float NaN where ``canon_deep``
    would replace it (in tuples, lists and dicts, keys too; a float subclass, as
    ``ExactAvg``, is not one), looking at no more than ``budget`` values; None, having
    looked at next to nothing, when it holds more (the caller then scans the bytes:
    ``maybe_nan``). Exact, unlike the scan, which also matches a float's tag inside a
    string or raw column bytes (then ``canon_deep`` changes nothing)."""
    t = type(obj)
    if t is float:
        return obj != obj
    if t not in _NESTED:
        return False
    stack = [obj]
    while stack:
        o = stack.pop()
        if type(o) is dict:
            stack.append(tuple(o))
            stack.append(tuple(o.values()))
            continue
        budget -= len(o)
        if budget < 0:
            return None
        kinds = set(map(type, o))
        if float in kinds:
            for v in o:
                if type(v) is float and v != v:
                    return True
        if not kinds.isdisjoint(_NESTED):
            stack.extend([v for v in o if type(v) in _NESTED])
    return False


def unpackb(data: bytes | bytearray | memoryview) -> Any:
    """Decode bytes written by :func:`packb`; arrays come back as tuples, so
    rows compare equal to the tuples that were written, and each NaN is the one NaN
    (found by ``nan_in`` where the object has few containers, else by the bytes'
    scan, ``maybe_nan``; ``canon_deep`` only where one may be)."""
    try:
        obj = msgpack.unpackb(data, raw=False, use_list=False, ext_hook=_ext_hook, strict_map_key=False)
    except Exception as exc:  # msgpack raises a zoo of types on garbage input
        raise DecodeError(f"undecodable payload: {exc}") from exc
    nan = nan_in(obj, len(data) // NAN_WALK_BYTES) if len(data) >= NAN_WALK_MIN else None
    if nan or (nan is None and maybe_nan(data)):
        obj = canon_deep(obj)
    return obj


_VALUE_TYPES = frozenset({int, float, str, bool, type(None), _dt.date, _dt.datetime, bytes})
_VALUE_BASES = (int, float, str, _dt.date, bytes)
_ROW_TYPES = frozenset({tuple, list})


def check_rows(rows: "list | tuple") -> str | None:
    """Why ``rows`` cannot be stored, or ``None`` if they can.

    Checked before anything is written because a value that encodes but
    cannot be replayed (a dict, say) would otherwise turn a good record into
    a "bad" one at recovery and hide every later batch. The common case is
    two set comparisons done in C.
    """
    if not rows:
        return None
    if not set(map(type, rows)) <= _ROW_TYPES:
        for row in rows:
            if not isinstance(row, (tuple, list)):
                return f"a row must be a tuple, not {type(row).__name__}: {row!r:.80}"
    kinds = set(map(type, itertools.chain.from_iterable(rows)))
    if not kinds <= _VALUE_TYPES:
        for kind in kinds - _VALUE_TYPES:
            if not issubclass(kind, _VALUE_BASES):
                return f"cannot store a value of type {kind.__name__}"
    return None


def rows_are_plain(rows: tuple) -> bool:
    """Whether decoded ``rows`` are tuples of scalar values only (what
    :func:`check_rows` lets through), so that replay can hash them."""
    if not set(map(type, rows)) <= {tuple}:
        return False
    return set(map(type, itertools.chain.from_iterable(rows))) <= _VALUE_TYPES


# ---------------------------------------------------------------- columns

#: the column types stored as bytes (log.py's columns record, snapshot.py's columns
#: record): little-endian int64 (INT) and float64 (FLOAT)
COLUMN_DTYPES = ("<i8", "<f8")


def pack_columns(arrays) -> tuple[int, tuple]:
    """(n, ((dtype, bytes), ...)) for arrays of n values each; EncodeError if they are not
    1-D int64/float64 arrays of one length (at least one)."""
    if not arrays:
        raise EncodeError("no columns")
    n = len(arrays[0])
    parts = []
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.ndim != 1 or len(a) != n:
            raise EncodeError(f"columns must be 1-D arrays of {n} values")
        dt = a.dtype.newbyteorder("<")
        if dt.str not in COLUMN_DTYPES:
            raise EncodeError(f"cannot store a column of dtype {a.dtype} (int64 or float64 only)")
        parts.append((dt.str, np.ascontiguousarray(a, dtype=dt).tobytes()))
    return n, tuple(parts)


def columns_ok(n: object, parts: object) -> bool:
    """Whether ``(n, parts)`` has the shape ``pack_columns`` gives (checked without
    decoding a value)."""
    return (type(n) is int and n >= 0 and type(parts) is tuple and len(parts) > 0
            and all(type(p) is tuple and len(p) == 2 and p[0] in COLUMN_DTYPES
                    and type(p[1]) is bytes and len(p[1]) == 8 * n for p in parts))


def unpack_columns(n: object, parts: object) -> list[tuple] | None:
    """The rows of ``pack_columns``'s output, as Python ints and floats; None if it is
    malformed."""
    if not columns_ok(n, parts):
        return None
    checked = cast("tuple[tuple[str, bytes], ...]", parts)   # the shape columns_ok checked
    return list(zip(*[column_list(np.frombuffer(data, dtype=np.dtype(dt))) for dt, data in checked]))
