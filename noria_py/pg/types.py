"""PostgreSQL's names for the engine's types, and their text and binary forms on the wire.

Each ``SqlType`` goes out as one PostgreSQL type (``OIDS``): INT as ``int8`` (the engine's
INT is 64-bit, as BIGINT), FLOAT as ``float8``, TEXT as ``text``, BOOL, DATE, TIMESTAMP
and TIMESTAMPTZ as themselves (``timestamptz`` written in UTC, ``+00``). The text forms are PostgreSQL 15's output with its defaults
(``DateStyle`` ISO, ``extra_float_digits`` 1): ``t``/``f``, the shortest float that
reads back exactly, ``Infinity``/``NaN``, ``2024-01-02 03:04:05.5``. The binary forms
are the ones ``typsend``/``typrecv`` use (big-endian; dates and timestamps count from
2000-01-01).

Parameters come in with the type the client names (its OID), or with none (0, or
``unknown``/``text`` for an untyped literal), in which case the statement's context
decides (``sql_frontend.parameter_types``) and text is taken as it is.

Invariant: ``decode(oid, fmt, encode(oid, fmt, v)) == v`` for every value the engine
holds (tests/pg/test_types.py checks it with hypothesis).
"""
from __future__ import annotations

import datetime
import decimal
import math
import struct
from typing import Any, Callable

from sql_frontend.typerules import parse_temporal, read_bool
from sql_frontend.types import SqlType

from ..divzero import DIV0
from ..errors import DataError, DivisionByZeroError, NotSupportedError
from ..numeric import PgNumeric, avg_numeric  # noqa: F401 - avg_numeric: the front end's name

BOOL, INT8, INT2, INT4, TEXT, OID, FLOAT4, FLOAT8, UNKNOWN = 16, 20, 21, 23, 25, 26, 700, 701, 705
BPCHAR, VARCHAR, DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC, NAME, CHAR = 1042, 1043, 1082, 1114, 1184, 1700, 19, 18

OIDS: dict[SqlType, int] = {
    SqlType.INT: INT8, SqlType.FLOAT: FLOAT8, SqlType.TEXT: TEXT, SqlType.BOOL: BOOL,
    SqlType.DATE: DATE, SqlType.TIMESTAMP: TIMESTAMP, SqlType.TIMESTAMPTZ: TIMESTAMPTZ,
    SqlType.NULL: TEXT,
}

def result_oids(types: list[SqlType], rows: list[tuple]) -> list[int] | None:
    """The type OID of each column of a result whose FLOAT columns hold AVGs of
    integers, which go out as ``numeric`` (OID 1700, as PostgreSQL's ``avg`` of
    integers); None if it has none (each column then is ``oid_of`` its type). Told by
    the values, for a result whose plan is not known (``numeric_oids`` says it from
    the plan, value or none: a statement over a cluster's connection): a FLOAT column
    is an AVG of integers when its first non-NULL value is one."""
    out = None
    for i, t in enumerate(types):
        if t is SqlType.FLOAT:
            for r in rows:
                v = r[i]
                if v is not None:
                    if isinstance(v, PgNumeric):
                        if out is None:
                            out = [oid_of(x) for x in types]
                        out[i] = NUMERIC
                    break
    return out


def numeric_oids(query: Any) -> list[int] | None:
    """The type OID of each visible column of ``query`` (an ``lp.Query``), ``numeric``
    where its expression is PostgreSQL's ``numeric``, whatever its values: an AVG of
    integers the front end wrote (``pgavg``: its value is an ``ExactAvg``, or NULL),
    and what passes such a column on unchanged (a plain column of a projection, a
    filter, DISTINCT, LIMIT, a join's side, a UNION all of whose inputs are, MIN and
    MAX of it, a GROUP BY of it), and arithmetic (``+ - * /``, unary ``-``, ``abs``) on
    such columns and integers (noria_py/numeric.py: its value is a ``PgNumeric``); a
    cast of one to ``double precision`` is not. None if no column is: each is
    ``oid_of`` its type. Walked without recursion: views over views nest deep."""
    from sql_frontend import plan as lp
    flags: dict[int, list[bool]] = {}
    todo: list[tuple[Any, bool]] = [(query.root, False)]
    while todo:
        rel, ready = todo.pop()
        if id(rel) in flags:
            continue
        inputs = [getattr(rel, f) for f in ("input", "left", "right") if hasattr(rel, f)]
        inputs += list(getattr(rel, "inputs", ()))
        if not ready:
            todo.append((rel, True))
            todo.extend((i, False) for i in inputs if id(i) not in flags)
            continue
        below = [flags[id(i)] for i in inputs]
        width = len(rel.columns)
        out = [False] * width
        if isinstance(rel, (lp.Filter, lp.Distinct, lp.TopK)):
            out = list(below[0])
        elif isinstance(rel, lp.Project):
            out = [_numeric_expr(x, below[0]) for x in rel.exprs]
        elif isinstance(rel, lp.Join):
            out = below[0] + below[1]
        elif isinstance(rel, (lp.Union_, lp.SetOp)):
            out = [all(b[i] for b in below) for i in range(width)]
        elif isinstance(rel, lp.Aggregate):
            ins = rel.input.columns
            out = [below[0][g] for g in rel.group_by]
            for a in rel.aggs:
                out.append(a.arg is not None and (
                    (a.func == "pgavg" and ins[a.arg].type is SqlType.INT)
                    or (a.func in ("min", "max") and below[0][a.arg])))
        flags[id(rel)] = out[:width] + [False] * (width - len(out))
    top = flags[id(query.root)][:query.visible]
    if not any(top):
        return None
    return [NUMERIC if n else oid_of(c.type) for n, c in zip(top, query.root.columns)]


#: the operators that keep an operand ``numeric`` (with integers or numerics beside it)
_NUMERIC_OPS = frozenset({"add", "sub", "mul", "div", "pgdiv", "neg", "abs"})


def _numeric_expr(e: Any, flags: list[bool]) -> bool:
    """Whether the expression ``e`` over columns ``flags`` (which are ``numeric``) is
    PostgreSQL's ``numeric`` (``numeric_oids``); without recursion."""
    from sql_frontend.expr import Call, Col
    known: dict[int, bool] = {}
    todo: list[tuple[Any, bool]] = [(e, False)]
    while todo:
        x, ready = todo.pop()
        if isinstance(x, Col):
            known[id(x)] = flags[x.index]
        elif not isinstance(x, Call) or x.op not in _NUMERIC_OPS:
            known[id(x)] = False
        elif not ready:
            todo.append((x, True))
            todo.extend((a, False) for a in x.args)
        else:
            args = [known[id(a)] for a in x.args]
            known[id(x)] = any(args) and all(n or a.type is SqlType.INT
                                             for n, a in zip(args, x.args))
    return known[id(e)]


#: ``typlen`` of each type in a RowDescription (-1: variable)
SIZES = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIMESTAMP: 8,
         TIMESTAMPTZ: 8, OID: 4}

NAMES = {BOOL: "boolean", INT2: "smallint", INT4: "integer", INT8: "bigint", TEXT: "text",
         FLOAT4: "real", FLOAT8: "double precision", DATE: "date", NUMERIC: "numeric",
         TIMESTAMP: "timestamp without time zone", TIMESTAMPTZ: "timestamp with time zone",
         VARCHAR: "character varying", UNKNOWN: "unknown"}

_EPOCH_DATE = datetime.date(2000, 1, 1)
_EPOCH = datetime.datetime(2000, 1, 1)
_EPOCH_TZ = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
_Q, _D, _I, _H, _F = struct.Struct("!q"), struct.Struct("!d"), struct.Struct("!i"), \
    struct.Struct("!h"), struct.Struct("!f")


def oid_of(t: SqlType) -> int:
    return OIDS.get(t, TEXT)


# ------------------------------------------------------------------ values out

def float_text(x: float) -> str:
    """``x`` as PostgreSQL's ``float8out`` writes it: the shortest digits that read back
    exactly, positional for decimal exponents -4 to 14, else ``1e+15``-style."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exp)              # the decimal point sits after this digit
    e10 = point - 1
    if -4 <= e10 < 15:
        if point <= 0:
            body = "0." + "0" * -point + ds
        elif point >= len(ds):
            body = ds + "0" * (point - len(ds))
        else:
            body = ds[:point] + "." + ds[point:]
    else:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        body = f"{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return ("-" if sign else "") + body


def _numeric_parts(v: PgNumeric) -> tuple[bool, str, str]:
    """Sign, integer digits and ``scale`` fraction digits of an exact numeric."""
    q, scale = v.exact()
    digits = str(abs(q)).rjust(scale + 1, "0")
    return q < 0, digits[:len(digits) - scale], digits[len(digits) - scale:]


def numeric_text(v: PgNumeric) -> str:
    """An exact numeric (an AVG of integers, arithmetic on one) in ``numeric``'s text format (``1.5000000000000000``)."""
    negative, whole, frac = _numeric_parts(v)
    return ("-" if negative else "") + whole + ("." + frac if frac else "")


def numeric_binary(v: PgNumeric) -> bytes:
    """An exact numeric in ``numeric``'s binary format: digit count, weight, sign, display
    scale, then base-10000 digits (no leading or trailing zero digits)."""
    negative, whole, frac = _numeric_parts(v)
    whole = whole.lstrip("0")
    ints = whole.rjust(-(-len(whole) // 4) * 4, "0")
    fracs = frac.ljust(-(-len(frac) // 4) * 4, "0")
    groups = [int(ints[i:i + 4]) for i in range(0, len(ints), 4)]
    weight = len(groups) - 1
    groups += [int(fracs[i:i + 4]) for i in range(0, len(fracs), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight, negative = 0, False
    head = struct.pack("!hhHh", len(groups), weight, 0x4000 if negative else 0, len(frac))
    return head + struct.pack(f"!{len(groups)}H", *groups)


def _timestamp_text(v: datetime.datetime) -> str:
    text = v.strftime("%Y-%m-%d %H:%M:%S") if v.year >= 1000 else v.isoformat(sep=" ")[:19]
    if v.microsecond:
        text += f".{v.microsecond:06d}".rstrip("0")
    if v.tzinfo is not None:
        off = v.utcoffset() or datetime.timedelta(0)
        mins = int(off.total_seconds()) // 60
        text += f"{'-' if mins < 0 else '+'}{abs(mins) // 60:02d}"
        if abs(mins) % 60:
            text += f":{abs(mins) % 60:02d}"
    return text


def text_out(v: Any) -> bytes:
    """A value in PostgreSQL's text format (the caller sends NULL as such)."""
    t = type(v)
    if t is int:                # (the commonest first: a bool is not one)
        return str(v).encode()
    if t is str:
        return v.encode()
    if v is True:
        return b"t"
    if v is False:
        return b"f"
    if isinstance(v, float):
        if t is not float and isinstance(v, PgNumeric):
            return numeric_text(v).encode()
        return float_text(v).encode()
    if isinstance(v, datetime.datetime):
        return _timestamp_text(v).encode()
    if isinstance(v, datetime.date):
        return v.isoformat().encode()
    if isinstance(v, str):
        return v.encode()
    if v is DIV0:
        raise DivisionByZeroError("division by zero")
    return str(v).encode()


def binary_out(oid: int, v: Any) -> bytes:
    """A value in the binary format of type ``oid``."""
    if v is DIV0:
        raise DivisionByZeroError("division by zero")
    if oid == INT8:
        return _Q.pack(int(v))
    if oid == FLOAT8:
        return _D.pack(float(v))
    if oid == NUMERIC and isinstance(v, PgNumeric):
        return numeric_binary(v)
    if oid == BOOL:
        return b"\x01" if v else b"\x00"
    if oid == DATE:
        return _I.pack((v - _EPOCH_DATE).days)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        delta = v - (_EPOCH if v.tzinfo is None else _EPOCH_TZ)
        return _Q.pack((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return text_out(v)


# ------------------------------------------------------------------ parameters in

def _int_text(s: str) -> int:
    return int(s.strip())


# (Python's float reads PostgreSQL's spellings too: "Infinity", "-Infinity", "NaN", " 1.5 ")
_float_text = float


def _numeric_text(s: str) -> int | float:
    """A ``numeric`` parameter: an int if written as one, else a float (the engine has
    no exact decimal type: DECIMAL columns are FLOAT)."""
    t = s.strip()
    try:
        return int(t)
    except ValueError:
        return _float_text(t)


def _date_text(s: str) -> datetime.date:
    v = parse_temporal(s.strip(), SqlType.DATE)
    if v is None:
        raise ValueError(s)
    return v


def _timestamp_in(s: str) -> datetime.datetime:
    v = parse_temporal(s.strip(), SqlType.TIMESTAMP)
    if not isinstance(v, datetime.datetime):
        raise ValueError(s)
    return v


def _timestamptz_in(s: str) -> datetime.datetime:
    """An instant: text with a UTC offset (PostgreSQL would read one without as the
    session's zone, which is UTC here)."""
    v = parse_temporal(s.strip(), SqlType.TIMESTAMPTZ, as_utc=True)
    if not isinstance(v, datetime.datetime):
        raise ValueError(s)
    return v


_TEXT_IN: dict[int, Callable[[str], Any]] = {
    INT2: _int_text, INT4: _int_text, INT8: _int_text, OID: _int_text,
    FLOAT4: _float_text, FLOAT8: _float_text, NUMERIC: _numeric_text, BOOL: read_bool,
    DATE: _date_text, TIMESTAMP: _timestamp_in, TIMESTAMPTZ: _timestamptz_in,
}


def _text_as_is(s: str) -> str:
    return s


def text_in(t: SqlType) -> Callable[[str], Any]:
    """How a value of type ``t`` is read from PostgreSQL's text form."""
    return _TEXT_IN.get(oid_of(t), _text_as_is)


def _numeric_binary(data: bytes) -> int | float:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", data)
    if sign == 0xC000:
        return math.nan
    if sign in (0xD000, 0xF000):
        return math.inf if sign == 0xD000 else -math.inf
    digits = struct.unpack_from(f"!{ndigits}h", data, 8)
    value = decimal.Decimal(0)
    for i, d in enumerate(digits):
        value += decimal.Decimal(d).scaleb(4 * (weight - i))
    if sign == 0x4000:
        value = -value
    return int(value) if dscale == 0 and value == value.to_integral_value() else float(value)


_BINARY_IN: dict[int, Callable[[bytes], Any]] = {
    INT2: lambda b: _H.unpack(b)[0], INT4: lambda b: _I.unpack(b)[0],
    INT8: lambda b: _Q.unpack(b)[0], OID: lambda b: struct.unpack("!I", b)[0],
    FLOAT4: lambda b: _F.unpack(b)[0], FLOAT8: lambda b: _D.unpack(b)[0],
    BOOL: lambda b: b != b"\x00", NUMERIC: _numeric_binary,
    DATE: lambda b: _EPOCH_DATE + datetime.timedelta(days=_I.unpack(b)[0]),
    TIMESTAMP: lambda b: _EPOCH + datetime.timedelta(microseconds=_Q.unpack(b)[0]),
    TIMESTAMPTZ: lambda b: _EPOCH_TZ + datetime.timedelta(microseconds=_Q.unpack(b)[0]),
}
_TEXTLIKE = {TEXT, VARCHAR, BPCHAR, NAME, CHAR, UNKNOWN, 0}


def decode(oid: int, binary: bool, data: bytes | None, position: int) -> Any:
    """Parameter ``$position`` as the engine's Python value. A value that is not one of
    its type raises ``DataError`` (PostgreSQL's 22P02)."""
    if data is None:
        return None
    try:
        if binary:
            if oid in _TEXTLIKE:
                return data.decode()
            if oid not in _BINARY_IN:
                raise NotSupportedError(f"parameter ${position}: binary format of type "
                                        f"{NAMES.get(oid, oid)} is not supported; send text")
            return _BINARY_IN[oid](data)
        text = data.decode()
        return _TEXT_IN[oid](text) if oid in _TEXT_IN else text
    except (ValueError, struct.error, UnicodeDecodeError, decimal.InvalidOperation,
            OverflowError) as err:
        raise DataError(f"invalid input for parameter ${position} of type "
                        f"{NAMES.get(oid, str(oid))}: {data[:40]!r}") from err
