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
"""
from __future__ import annotations

import datetime
import numbers
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any, Callable

from sql_frontend.types import SqlType

from .errors import ArityError, TypeMismatchError

_NOT_A_COLLECTION = (str, bytes, bytearray, memoryview, Mapping)


def many(values: Any, what: str) -> list:
    """``values`` (rows, keys) as a list: any iterable but a str, bytes or mapping,
    whose items are what the caller iterates (a dict's would be its keys)."""
    if isinstance(values, _NOT_A_COLLECTION) or not isinstance(values, Iterable):
        raise TypeMismatchError(f"{what} must come in a list (or another iterable), got "
                                f"{type(values).__name__} {_short(values)}")
    return list(values)


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
    taken for parameters (or it for one, where a tuple was meant)."""
    if values is None:
        return ()
    if isinstance(values, (list, tuple)):
        return tuple(values)
    if isinstance(values, (*_NOT_A_COLLECTION, Set)) or isinstance(values, Iterable):
        raise TypeMismatchError(f"parameters must be a list or tuple of values, got "
                                f"{type(values).__name__} {_short(values)}; for one value "
                                f"write ({_short(values)},)")
    return (values,)


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
    return None if isinstance(value, datetime.datetime) or value is None else "not a datetime.datetime"


def _anything(value: Any) -> None:
    return None


#: per key column type: why a value cannot equal one of its values, or None if it can
MISFIT: dict[SqlType, Callable[[Any], str | None]] = {
    SqlType.INT: _number, SqlType.FLOAT: _number, SqlType.BOOL: _number, SqlType.TEXT: _text,
    SqlType.DATE: _date, SqlType.TIMESTAMP: _timestamp, SqlType.NULL: _anything,
}

#: per key column type: the exact types whose every value fits it (a set lookup, where
#: ``MISFIT`` is a call: the check of a lookup that finds nothing tries this first)
FITS: dict[SqlType, frozenset[type]] = {
    SqlType.INT: frozenset({int, float, bool, type(None)}),
    SqlType.FLOAT: frozenset({int, float, bool, type(None)}),
    SqlType.BOOL: frozenset({int, float, bool, type(None)}),
    SqlType.TEXT: frozenset({str, type(None)}),
    SqlType.DATE: frozenset({datetime.date, type(None)}),
    SqlType.TIMESTAMP: frozenset({datetime.datetime, type(None)}),
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
