"""DB-API 2.0 (PEP 249): cursors over a database, and the module globals, type objects
and constructors the PEP names.

A connection is what ``noria_py.connect()`` returns (an embedded ``Database``, or a
``RemoteDatabase`` for a cluster): both have ``cursor()``, ``commit()``,
``rollback()`` and ``close()``, and the cursor runs statements through the
connection's ``execute``, so the two behave alike.

What PEP 249 leaves to the database, decided here:

- ``paramstyle`` is ``qmark``: ``?`` anywhere a value may stand. In a SELECT, those of
  top-level ``col = ?`` conjuncts are the lookup key of the SELECT's view, read by key;
  the others are values (docs/sql.md).
- Every statement is applied when ``execute`` returns (written to the log first, with a
  data directory), so ``commit()`` has nothing to do; ``rollback()`` raises
  ``NotSupportedError``: there is no open transaction to undo.
- ``executemany`` of an INSERT, DELETE or UPDATE takes all its parameter sets as one
  statement: every row, or none (a refused one leaves the table as it was).
- ``threadsafety`` is 2: threads may share the module and connections, not cursors
  (client.py's module docstring).
- ``description`` gives each column's name and type code (a SQL type name, ``"INT"``,
  ``"TEXT"``, ...; it compares equal to ``NUMBER``, ``STRING`` or ``DATETIME``); the
  other five fields are None. ``rowcount`` is the rows a write changed or a SELECT
  returned.
"""
from __future__ import annotations

import datetime
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from .errors import InterfaceError, NotSupportedError, ProgrammingError
from .result import Result

apilevel = "2.0"
threadsafety = 2
paramstyle = "qmark"


class _Executes(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result: ...
    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> int: ...


class DBAPITypeObject:
    """A PEP 249 type object: equal to each type code (SQL type name) it covers."""

    def __init__(self, *codes: str) -> None:
        self.codes = frozenset(codes)

    def __eq__(self, other: object) -> bool:
        return other in self.codes if isinstance(other, str) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.codes)


STRING = DBAPITypeObject("TEXT")
BINARY = DBAPITypeObject()
NUMBER = DBAPITypeObject("INT", "FLOAT", "BOOL")
DATETIME = DBAPITypeObject("DATE", "TIMESTAMP", "TIMESTAMPTZ")
ROWID = DBAPITypeObject()

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:  # noqa: N802 - the PEP's name
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:  # noqa: N802
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:  # noqa: N802
    return Timestamp(*time.localtime(ticks)[:6])


def Binary(data: bytes) -> bytes:  # noqa: N802
    raise NotSupportedError("noria-py has no binary column type")


class Cursor:
    """Runs statements on its connection and holds the last one's rows."""

    arraysize = 1

    def __init__(self, connection: _Executes) -> None:
        self.connection = connection
        self.description: tuple[tuple[Any, ...], ...] | None = None
        self.rowcount = -1
        self.lastrowid = None
        self._result: Result | None = None
        self._closed = False

    def execute(self, operation: str, parameters: Sequence[Any] = ()) -> "Cursor":
        """Run one statement with ``parameters`` for its ``?``; the rows, if any, to fetch."""
        self._check()
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Sequence):
            raise ProgrammingError(f"parameters must be a sequence (paramstyle qmark), "
                                   f"got {type(parameters).__name__}")
        self._take(self.connection.execute(operation, tuple(parameters)))
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Sequence[Any]]) -> "Cursor":
        """Run one INSERT, DELETE or UPDATE once per parameter set (an INSERT's rows: one write)."""
        self._check()
        sets = [tuple(p) for p in seq_of_parameters]
        self._result, self.description = None, None
        self.rowcount = self.connection.executemany(operation, sets)
        return self

    def _take(self, result: Result) -> None:
        self._result = result
        self.rowcount = result.rowcount
        self.description = tuple((name, result.types[i].value if i < len(result.types) else None,
                                  None, None, None, None, None)
                                 for i, name in enumerate(result.columns)) or None

    def _rows(self) -> Result:
        self._check()
        if self._result is None or self.description is None:
            raise ProgrammingError("no rows to fetch: the last statement was not a query")
        return self._result

    def fetchone(self) -> tuple | None:
        """The next row of the last query, or None after the last."""
        return self._rows().fetchone()

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        """The next ``size`` rows (``arraysize`` by default), fewer at the end."""
        result = self._rows()
        n = self.arraysize if size is None else size
        out: list[tuple] = []
        while len(out) < n and (row := result.fetchone()) is not None:
            out.append(row)
        return out

    def fetchall(self) -> list[tuple]:
        """The rows of the last query not fetched yet."""
        return self._rows().fetchall()

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._rows())

    def setinputsizes(self, sizes: Any) -> None:
        """Accepted and ignored, as PEP 249 allows."""

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        """Accepted and ignored, as PEP 249 allows."""

    def close(self) -> None:
        """Close the cursor; later calls raise ``InterfaceError``."""
        self._closed = True
        self._result = None

    def _check(self) -> None:
        if self._closed:
            raise InterfaceError("this cursor is closed")

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
