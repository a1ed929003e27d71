"""Type rules: declared SQL types to ``SqlType``, and what each operator yields.

Kept apart from translation so the rules read as a table and the planner's
expectations (documented in ``expr.py``) can be checked against one place.
"""
from __future__ import annotations

import datetime
from typing import Any

from sqlglot import exp

from .types import SqlType

_DT = exp.DataType.Type

_DECLARED: dict[Any, SqlType] = {
    _DT.INT: SqlType.INT, _DT.BIGINT: SqlType.INT, _DT.SMALLINT: SqlType.INT,
    _DT.TINYINT: SqlType.INT, _DT.MEDIUMINT: SqlType.INT,
    _DT.FLOAT: SqlType.FLOAT, _DT.DOUBLE: SqlType.FLOAT, _DT.DECIMAL: SqlType.FLOAT,
    _DT.TEXT: SqlType.TEXT, _DT.VARCHAR: SqlType.TEXT, _DT.CHAR: SqlType.TEXT,
    _DT.NCHAR: SqlType.TEXT, _DT.NVARCHAR: SqlType.TEXT,
    _DT.BOOLEAN: SqlType.BOOL,
    _DT.DATE: SqlType.DATE,
    _DT.TIMESTAMP: SqlType.TIMESTAMP, _DT.DATETIME: SqlType.TIMESTAMP,
    _DT.TIMESTAMPTZ: SqlType.TIMESTAMPTZ,     # (also TIMESTAMP WITH TIME ZONE)
}
# MySQL-style CAST(x AS SIGNED) appears throughout sqllogictest; sqlglot keeps it user-defined
_USER_DEFINED = {"SIGNED": SqlType.INT, "UNSIGNED": SqlType.INT, "SIGNED INTEGER": SqlType.INT,
                 "UNSIGNED INTEGER": SqlType.INT}


def declared_type(dt: exp.DataType) -> SqlType | None:
    """The SqlType for a declared or CAST target type, or None when it has none."""
    if dt.this == _DT.USERDEFINED:
        return _USER_DEFINED.get(str(dt.args.get("kind") or "").upper())
    return _DECLARED.get(dt.this)


def value_type(value: Any) -> SqlType | None:
    """The SqlType of a Python value given as a parameter, or None if it has none."""
    if value is None:
        return SqlType.NULL
    if isinstance(value, bool):
        return SqlType.BOOL
    if isinstance(value, int):
        return SqlType.INT
    if isinstance(value, float):
        return SqlType.FLOAT
    if isinstance(value, str):
        return SqlType.TEXT
    if isinstance(value, datetime.datetime):
        return SqlType.TIMESTAMP if value.utcoffset() is None else SqlType.TIMESTAMPTZ
    if isinstance(value, datetime.date):
        return SqlType.DATE
    return None


#: the date and time types, whose values a text literal compared with (or written into)
#: one of them is read as
TEMPORAL = (SqlType.DATE, SqlType.TIMESTAMP, SqlType.TIMESTAMPTZ)


def family(t: SqlType) -> str:
    """Types in one family compare with each other; NULL is in every family. TIMESTAMPTZ
    is a family of its own: an instant compares with a DATE or a TIMESTAMP only in a
    time zone, and there is no session time zone (write a CAST, which reads them as
    UTC)."""
    if t in (SqlType.INT, SqlType.FLOAT, SqlType.BOOL):
        return "number"
    if t in (SqlType.DATE, SqlType.TIMESTAMP):
        return "time"
    if t == SqlType.TIMESTAMPTZ:
        return "instant"
    if t == SqlType.TEXT:
        return "text"
    return "null"


def comparable(a: SqlType, b: SqlType) -> bool:
    fa, fb = family(a), family(b)
    return fa == "null" or fb == "null" or fa == fb


def arithmetic(a: SqlType, b: SqlType) -> SqlType | None:
    """Result of + - * / % on two types, or None when they are not numbers."""
    if family(a) not in ("number", "null") or family(b) not in ("number", "null"):
        return None
    if a == SqlType.NULL and b == SqlType.NULL:
        return SqlType.NULL
    if SqlType.FLOAT in (a, b):
        return SqlType.FLOAT
    return SqlType.INT


def unify(types: list[SqlType]) -> SqlType | None:
    """The common type of CASE branches, COALESCE arguments or UNION columns (None: none)."""
    real = [t for t in types if t != SqlType.NULL]
    if not real:
        return SqlType.NULL
    fams = {family(t) for t in real}
    if len(fams) > 1:
        return None
    if len(set(real)) == 1:
        return real[0]
    fam = fams.pop()
    if fam == "number":
        return SqlType.FLOAT if SqlType.FLOAT in real else SqlType.INT
    if fam == "time":
        return SqlType.TIMESTAMP
    return real[0]


def read_bool(text: str) -> bool:
    """A truth value from text as PostgreSQL reads one (``t``, ``true``, ``yes``, ``on``,
    ``1`` and their opposites, any case); ValueError for other text."""
    t = text.strip().lower()
    if t in ("t", "true", "y", "yes", "on", "1"):
        return True
    if t in ("f", "false", "n", "no", "off", "0"):
        return False
    raise ValueError(text)


def parse_temporal(text: str, target: SqlType, as_utc: bool = False) -> datetime.date | None:
    """A DATE, TIMESTAMP or TIMESTAMPTZ value from its ISO text, or None if the text is
    not one. A TIMESTAMPTZ is in UTC; text without a UTC offset is one only ``as_utc``
    (a CAST reads it as UTC; a literal compared with or written into a TIMESTAMPTZ
    column must say its offset: there is no session time zone to assume)."""
    text = text.strip()
    try:
        if target == SqlType.DATE:
            if len(text) > 10:
                return datetime.datetime.fromisoformat(text).date()
            return datetime.date.fromisoformat(text)
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if target == SqlType.TIMESTAMPTZ:
        if value.utcoffset() is None:
            return value.replace(tzinfo=datetime.timezone.utc) if as_utc else None
        return value.astimezone(datetime.timezone.utc)
    # a TIMESTAMP is without a time zone: an offset in the text is dropped, as
    # PostgreSQL drops it (an aware datetime cannot be compared with the others)
    return value.replace(tzinfo=None)


def not_temporal(text: str, target: SqlType) -> str:
    """Why ``parse_temporal`` found no ``target`` in ``text`` (for a message)."""
    if target == SqlType.TIMESTAMPTZ and parse_temporal(text, target, as_utc=True) is not None:
        return (f"{text!r} is not a TIMESTAMPTZ: it has no UTC offset (write "
                f"'{text.strip()}+00', or CAST({text!r} AS TIMESTAMPTZ) to read it as UTC)")
    return f"{text!r} is not a {target.value}"
