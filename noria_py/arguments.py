"""What a caller hands the Python API, checked at the door: the rows of a write, the keys
of a lookup or a delete, the parameters of a statement.

Every mistake here is a ``noria_py.Error`` naming the argument, never a TypeError from
deep inside (``insert(None)``), nor a silent wrong answer (``lookup("1")`` on an INT key
finding nothing, ``execute(sql, "abc")`` taking a string for its parameters).

Invariants: nothing here changes anything. A lookup's key is checked only when the view
holds no rows for it (``KeyCheck``), so a hit costs nothing more; that is sound because
every value the check refuses is one no key of the view can equal (a TEXT key's value
is a ``str``, never equal to a number; a DATE never equals a ``datetime``), so a refused
key could only ever have found nothing. What can be compared is not refused, and finds
what SQL's ``=`` finds: numbers of any Python type for a numeric key (INT, FLOAT, BOOL;
``1.5`` or ``2 ** 70`` for an INT key find nothing, as in PostgreSQL), any ``str`` for
TEXT (one with a lone surrogate finds nothing: no row holds one), ``None`` for any key
(nothing: ``col = NULL`` is never true).

Values from the Python data stack are taken as the engine's own Python types, converted
here at the door (``plain``; the write path's checks in ``ops/base.py`` call it for
any value that is not already one), so nothing inside the engine ever sees them: in
written and deleted rows, statement parameters (``execute``, ``executemany``) and lookup
and ``delete_keys`` keys, embedded and remote alike. A converted value then meets the
column's rules as the plain value would:

- numpy scalars: ``np.bool_`` is a ``bool``, any ``np.integer`` an ``int``, any
  ``np.floating`` a ``float`` (each NaN the one NaN: noria_py.nan), ``np.str_`` a
  ``str``; ``np.datetime64`` of a day unit or coarser (``'D'``, ``'W'``, ``'M'``,
  ``'Y'``) a ``datetime.date``, of a finer one a naive ``datetime.datetime``, and NaT
  NULL. Other numpy scalars (complex, bytes, timedelta64) are refused as before.
- ``pandas.Timestamp`` is the ``datetime.datetime`` it stands for (naive or aware, as
  it is), ``pandas.NaT`` and ``pandas.NA`` are NULL (as Arrow and DuckDB take them).
- ``decimal.Decimal``: an integral one below 10**19 in magnitude is an ``int`` (so
  ``Decimal('5')`` and ``Decimal('5.00')`` fit an INT column, as 5 does), any other
  a ``float`` (so ``Decimal('1.5')`` into an INT is refused as 1.5 is, and any Decimal
  into a FLOAT column, DECIMAL and NUMERIC included, is the nearest float); a NaN
  Decimal is the one NaN and an infinite one an infinity. A finite Decimal past the
  range of a float (``Decimal('1e400')``) is refused rather than made an infinity.
- An aware ``datetime`` (a ``pandas.Timestamp`` too), in any zone, is converted to
  UTC (``tzinfo`` is ``datetime.timezone.utc``): a TIMESTAMPTZ column holds UTC, and a
  lookup key given in another zone finds the same instant.

A time the engine cannot hold exactly is refused, never rounded: a ``pandas.Timestamp``
or ``np.datetime64`` with nanoseconds (the engine keeps microseconds, as PostgreSQL
does), or one outside ``datetime``'s years 1-9999. A naive ``datetime`` is never given
a zone: into a TIMESTAMPTZ column it is refused (PostgreSQL would assume the session's
zone; there is none here), as an aware one into a TIMESTAMP column is.
"""
from __future__ import annotations

import datetime
import decimal
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any, Callable

import numpy as np

from sql_frontend.typerules import TEMPORAL, parse_temporal
from sql_frontend.types import SqlType

from .errors import ArgumentError, ArityError, TypeMismatchError
from .nan import NAN

UTC = datetime.timezone.utc

_NOT_A_COLLECTION = (str, bytes, bytearray, memoryview, Mapping)


def many(values: Any, what: str) -> list:
    """``values`` (rows, keys) as a list: any iterable but a str, bytes or mapping,
    whose items are what the caller iterates (a dict's would be its keys)."""
    if isinstance(values, _NOT_A_COLLECTION) or not isinstance(values, Iterable):
        raise TypeMismatchError(f"{what} must come in a list (or another iterable), got "
                                f"{type(values).__name__} {_short(values)}")
    return list(values)


def columns(values: Any, names: Sequence[str], table: str) -> list[np.ndarray]:
    """``Table.insert_columns``'s columns: one array per column of ``table`` (whose
    columns are ``names``), each one-dimensional, all of one length."""
    arrays = [np.asarray(c) for c in many(values, f"the columns for table {table!r}")]
    if len(arrays) != len(names):
        raise ArityError(f"{len(arrays)} columns for table {table!r}, which has "
                         f"{len(names)}: {list(names)}")
    if any(a.ndim != 1 for a in arrays) or len({len(a) for a in arrays}) > 1:
        raise ArgumentError(f"the columns for table {table!r} must be one-dimensional "
                            f"and of one length, got shapes {[a.shape for a in arrays]}")
    return arrays


def name(value: Any, kind: str) -> str:
    """The name of a table or view, which must be a str."""
    if not isinstance(value, str):
        raise TypeMismatchError(f"a {kind} name must be a str, got {type(value).__name__} "
                                f"{_short(value)}")
    return value


def params(values: Any) -> tuple:
    """A statement's parameters: a list or tuple of values, or None for none. A single
    value that is not a collection is taken as the one parameter (``execute(sql, 5)``);
    a str, bytes, mapping, set or other iterable is refused, as its parts would be
    taken for parameters (or it for one, where a tuple was meant). Each value comes
    out ``plain``."""
    if values is None:
        return ()
    if isinstance(values, (list, tuple)):
        return tuple(_param(v, n) for n, v in enumerate(values))
    if isinstance(values, (*_NOT_A_COLLECTION, Set, np.ndarray)) or isinstance(values, Iterable):
        raise TypeMismatchError(f"parameters must be a list or tuple of values, got "
                                f"{type(values).__name__} {_short(values)}; for one value "
                                f"write ({_short(values)},)")
    return (_param(values, 0),)


def _param(value: Any, n: int) -> Any:
    if type(value) in _PLAIN:
        return value
    try:
        return plain(value)
    except TypeMismatchError as exc:
        raise TypeMismatchError(f"parameter {n + 1}: {exc}") from None


#: the engine's own Python types, which ``plain`` returns as they are (a ``datetime``
#: is not among them: an aware one is converted to UTC)
_PLAIN = frozenset({int, float, str, bool, type(None), datetime.date})

#: numpy datetime64 units of a day or coarser: their values are dates
_DAY_UNITS = frozenset({"D", "W", "M", "Y"})

#: an integral Decimal this far from zero or farther is a float (no INT holds it)
_DECIMAL_INT_DIGITS = 19


def plain(value: Any) -> Any:
    """``value`` as the engine's own Python type (the module doc lists the conversions):
    values of other types than those it converts are returned as they are, for the
    caller's check to refuse. Raises ``TypeMismatchError`` for a value of a converted
    type that the engine cannot hold exactly (nanoseconds, out of range)."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is datetime.datetime:
        return _utc(value)
    if isinstance(value, np.generic):
        return _numpy(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if t.__module__.startswith("pandas"):
        return _pandas(value)
    if isinstance(value, datetime.datetime):        # a subclass (pendulum, ...)
        return _utc(_datetime(value))
    if isinstance(value, datetime.date):
        return datetime.date(value.year, value.month, value.day)
    return value


def plain_key(key: Any) -> Any:
    """A lookup key (a value, or a tuple of values) with each value ``plain``; a value
    ``plain`` refuses (nanoseconds, a Decimal past a float's range) is kept as it is:
    it equals no value a column holds, so its lookup finds nothing, as SQL's ``=``
    would (the module doc: a key that can be compared is not refused)."""
    if isinstance(key, tuple):
        return tuple(map(_key_value, key))
    return _key_value(key)


def _key_value(value: Any) -> Any:
    try:
        return plain(value)
    except TypeMismatchError:
        return value


def _utc(value: datetime.datetime) -> datetime.datetime:
    """A datetime, aware ones in UTC (``tzinfo`` the ``datetime.timezone.utc``)."""
    if value.tzinfo is None or value.tzinfo is UTC or value.utcoffset() is None:
        return value
    return value.astimezone(UTC)


def _numpy(value: np.generic) -> Any:
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.timedelta64):           # (an np.integer: refused as it is)
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        f = float(value)
        return NAN if f != f else f
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            return None
        unit = np.datetime_data(value.dtype)[0]
        if unit in _DAY_UNITS:
            out = value.astype("datetime64[D]").item()
            if isinstance(out, datetime.date):
                return out
        else:
            us = value.astype("datetime64[us]")
            if us != value:
                raise TypeMismatchError(f"{_short(value)} has nanoseconds, which a "
                                        f"timestamp does not hold (microseconds): round it "
                                        f"first")
            out = us.item()
            if isinstance(out, datetime.datetime):
                return out
        raise TypeMismatchError(f"{_short(value)} is outside the years 1-9999 a date or "
                                f"timestamp holds")
    return value


def _decimal(value: decimal.Decimal) -> Any:
    if value.is_nan():
        return NAN
    if value.is_infinite():
        return math.inf if value > 0 else -math.inf
    if value.adjusted() < _DECIMAL_INT_DIGITS and value == value.to_integral_value():
        return int(value)
    f = float(value)
    if math.isinf(f):
        raise TypeMismatchError(f"{_short(value)} is outside the range of a FLOAT (a "
                                f"64-bit float)")
    return f


def _pandas(value: Any) -> Any:
    name = type(value).__name__
    if name in ("NaTType", "NAType"):
        return None
    if isinstance(value, datetime.datetime):          # pandas.Timestamp
        if getattr(value, "nanosecond", 0):
            raise TypeMismatchError(f"{_short(value)} has nanoseconds, which a timestamp "
                                    f"does not hold (microseconds): round it first, "
                                    f"e.g. ts.floor('us')")
        return _utc(_datetime(value))
    return value


def _datetime(value: datetime.datetime) -> datetime.datetime:
    """A datetime of a subclass (pandas', pendulum's) as a ``datetime.datetime``."""
    return datetime.datetime(value.year, value.month, value.day, value.hour, value.minute,
                             value.second, value.microsecond, tzinfo=value.tzinfo,
                             fold=value.fold)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any) -> str | None:
    return None if isinstance(value, numbers.Number) or value is None else "not a number"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) or value is None else "not a str"


def _date(value: Any) -> str | None:
    if value is None or isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return None
    return "not a datetime.date"


def _timestamp(value: Any) -> str | None:
    if value is None or isinstance(value, datetime.datetime) and value.tzinfo is None:
        return None
    if isinstance(value, datetime.datetime):
        return "a datetime with a time zone, where a TIMESTAMP has none (TIMESTAMPTZ holds instants)"
    return "not a datetime.datetime"


def _timestamptz(value: Any) -> str | None:
    if value is None or isinstance(value, datetime.datetime) and value.utcoffset() is not None:
        return None
    if isinstance(value, datetime.datetime):
        return ("a datetime without a time zone, where a TIMESTAMPTZ needs one: e.g. "
                ".replace(tzinfo=datetime.timezone.utc)")
    return "not a datetime.datetime"


def _anything(value: Any) -> None:
    return None


#: per key column type: why a value cannot equal one of its values, or None if it can
MISFIT: dict[SqlType, Callable[[Any], str | None]] = {
    SqlType.INT: _number, SqlType.FLOAT: _number, SqlType.BOOL: _number, SqlType.TEXT: _text,
    SqlType.DATE: _date, SqlType.TIMESTAMP: _timestamp, SqlType.TIMESTAMPTZ: _timestamptz,
    SqlType.NULL: _anything,
}

#: per key column type: the exact types whose every value fits it (a set lookup, where
#: ``MISFIT`` is a call: the check of a lookup that finds nothing tries this first)
FITS: dict[SqlType, frozenset[type]] = {
    SqlType.INT: frozenset({int, float, bool, type(None)}),
    SqlType.FLOAT: frozenset({int, float, bool, type(None)}),
    SqlType.BOOL: frozenset({int, float, bool, type(None)}),
    SqlType.TEXT: frozenset({str, type(None)}),
    SqlType.DATE: frozenset({datetime.date, type(None)}),
    SqlType.TIMESTAMP: frozenset({type(None)}),      # (a datetime fits if it is naive)
    SqlType.TIMESTAMPTZ: frozenset({type(None)}),    # (a datetime fits if it is aware)
    SqlType.NULL: frozenset(),
}


class KeyCheck:
    """Checks a key against the types of the columns it looks up: ``what`` names the
    looked-up thing in messages ("view 'v'", "the primary key of table 't'").
    ``fits``: for a key of one column, the exact types that fit it (``FITS``), for a
    caller to try before the call (empty for keys of more columns)."""

    def __init__(self, what: str, names: Sequence[str], types: Sequence[SqlType]) -> None:
        self.what = what
        self.names = list(names)
        self.types = list(types)
        self.misfits = [MISFIT[t] for t in types]
        self.fits = FITS[types[0]] if len(types) == 1 else frozenset()

    def __call__(self, key: tuple) -> None:
        """Raise if ``key`` (one value per key column) cannot be a key of these columns."""
        if len(key) != len(self.types):
            raise ArityError(f"{self.what} has a key of {len(self.types)} value(s) "
                             f"({', '.join(self.names)}), got {len(key)}: {_short(key)}")
        for name, typ, misfit, value in zip(self.names, self.types, self.misfits, key):
            why = misfit(value)
            if why is not None:
                raise TypeMismatchError(f"{self.what}: key column {name!r} is {typ.value}, got "
                                        f"{_short(value)} ({type(value).__name__}: {why})")


#: a range read as its reader takes it (``Reader.range_lookup``): the equality key (``()``
#: for none, a value for one column, a tuple for more) and the ``(op, value)`` bounds
RangeRead = tuple[Any, list[tuple[str, Any]]]


class RangeCheck:
    """The values of a read of a view with range parameters (``Query.bounds``, docs/sql.md)
    checked and split, for the embedded ``View`` and a cluster's ``RemoteView`` alike:
    ``bounds`` holds each range parameter's comparison, slot among the read's values
    and column type; the other slots are the equality key's, checked by ``key``."""

    def __init__(self, what: str, key: KeyCheck, bounds: Sequence[tuple[str, int, SqlType]],
                 arity: int) -> None:
        self.what = what
        self.key = key
        self.bounds = [(op, slot, typ) for op, slot, typ in bounds]
        self.arity = arity
        taken = {slot for _, slot, _ in self.bounds}
        self.key_slots = [i for i in range(arity) if i not in taken]

    def __call__(self, params: Sequence[Any]) -> RangeRead:
        """``params`` (one value per ``?``, plain: ``plain_key``) as a range read; raises
        ``ArityError`` for the wrong count, ``TypeMismatchError`` for a value that does
        not compare with its column as the filter's would (a DATE's ISO text is a date)."""
        if len(params) != self.arity:
            raise ArityError(f"{self.what} takes {self.arity} value(s), got {len(params)}")
        eq = tuple(params[i] for i in self.key_slots)
        if eq:
            self.key(eq)
        bounds = []
        for op, slot, typ in self.bounds:
            value = params[slot]
            if type(value) is str and typ in TEMPORAL:      # ISO text, as a filter reads it
                parsed = parse_temporal(value, typ)
                if parsed is None:
                    raise TypeMismatchError(f"{self.what}: {value!r} is not a "
                                            f"{typ.value} (a range parameter)")
                value = parsed
            elif value is not None:
                why = MISFIT[typ](value)
                if why is not None:
                    raise TypeMismatchError(f"{self.what}: a range parameter on a column "
                                            f"of type {typ.value}, got {_short(value)} "
                                            f"({type(value).__name__}: {why})")
            bounds.append((op, value))
        return (() if not eq else eq[0] if len(eq) == 1 else eq), bounds
