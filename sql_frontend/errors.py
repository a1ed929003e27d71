"""The error hierarchy every user-caused failure is raised from.

It lives in the SQL front end because the front end must not import the engine,
yet its errors have to be ``noria_py.Error`` subclasses; ``noria_py`` re-exports
these classes and adds its own subclasses for engine-side errors.
"""
from __future__ import annotations


class Error(Exception):
    """Base class of every error a user of noria-py can cause (DB-API 2.0's ``Error``)."""


# DB-API 2.0 (PEP 249)'s exception classes, so that code written for any Python
# database catches ours: every class below and in noria_py.errors sits under one.

class InterfaceError(Error):
    """The interface was misused (a closed handle, a malformed request)."""


class DatabaseError(Error):
    """An error of the database itself."""


class DataError(DatabaseError):
    """A value does not fit (type, range) or names data that is not there."""


class OperationalError(DatabaseError):
    """The database cannot carry out the operation now (storage, a failed node)."""


class IntegrityError(DatabaseError):
    """A write would break a constraint (a primary key)."""


class InternalError(DatabaseError):
    """The database found itself in a state it should never be in."""


class ProgrammingError(DatabaseError):
    """The statement is wrong: bad SQL, an unknown name, the wrong parameters."""


class NotSupportedError(DatabaseError):
    """A feature the database does not offer."""


class SqlError(ProgrammingError):
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


class UnsupportedError(SqlError, NotSupportedError):
    """Valid SQL that noria-py cannot (yet) express as a dataflow; names the construct."""


class UnknownTableError(SqlError):
    """A statement names a table or view that does not exist."""


class UnknownColumnError(SqlError):
    """A statement names a column that does not exist (or is ambiguous)."""


class AlreadyExistsError(SqlError):
    """CREATE of a table or view whose name is taken, or a CREATE TABLE that gives
    two columns one name."""


class TypeMismatchError(DataError):
    """A value or expression does not fit the type it must have."""


class ArityError(ProgrammingError):
    """Wrong number of columns in a row, or of parameters for a statement."""
