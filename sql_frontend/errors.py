"""The error hierarchy every user-caused failure is raised from.

It lives in the SQL front end because the front end must not import the engine,
yet its errors have to be ``noria_py.Error`` subclasses; ``noria_py`` re-exports
these classes and adds its own subclasses for engine-side errors.
"""
from __future__ import annotations


class Error(Exception):
    """Base class of every error a user of noria-py can cause."""


class SqlError(Error):
    """Malformed or meaningless SQL. ``position`` is (line, column), 1-based, when known."""

    def __init__(self, message: str, sql: str | None = None,
                 position: tuple[int, int] | None = None) -> None:
        self.sql = sql
        self.position = position
        if position is not None:
            message = f"{message} (at line {position[0]}, column {position[1]})"
        super().__init__(message)


class ParseError(SqlError):
    """The text is not valid SQL."""


class UnsupportedError(SqlError):
    """Valid SQL that noria-py cannot (yet) express as a dataflow; names the construct."""


class UnknownTableError(SqlError):
    """A statement names a table or view that does not exist."""


class UnknownColumnError(SqlError):
    """A statement names a column that does not exist (or is ambiguous)."""


class AlreadyExistsError(SqlError):
    """CREATE of a table or view whose name is taken, or a CREATE TABLE that gives
    two columns one name."""


class TypeMismatchError(Error):
    """A value or expression does not fit the type it must have."""


class ArityError(Error):
    """Wrong number of columns in a row, or of parameters for a statement."""
