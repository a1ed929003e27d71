"""Every error a user can cause, under one base class: ``noria_py.Error``.

The SQL-level classes come from the front end (which must not import the engine);
the engine adds its own below.
"""
from sql_frontend.errors import (  # noqa: F401  (re-exported)
    AlreadyExistsError,
    ArityError,
    Error,
    ParseError,
    SqlError,
    TypeMismatchError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
)


class DuplicateKeyError(Error):
    """An insert would give two rows the same primary key."""


class DependentViewsError(Error):
    """DROP TABLE or DROP VIEW (with IF EXISTS too) of something other views read; the
    message names them, to be dropped first."""


class RowNotFoundError(Error):
    """A delete names a row (or key) the table does not hold."""


class UnknownViewError(Error):
    """A read names a view that does not exist."""


class UnknownNodeError(Error):
    """fail/recover names a node id that is not in the graph."""


class RecoveryError(Error):
    """A recovery cannot be carried out as asked (the message says what to do instead)."""


class ClosedError(Error):
    """The database handle was closed."""


class StorageError(Error):
    """The data directory cannot be used (locked by another process, unreadable)."""


class CorruptionError(StorageError):
    """A data directory's files are damaged in a way a crash cannot explain (a bad record
    with data after it, a damaged or missing log, a catalog that does not match the
    data): opening is refused, the message names the file and byte offset, and
    ``noria-py repair --data-dir DIR`` says what dropping the damage would lose."""


class RequestError(Error):
    """A request to a server is not one it serves, or its arguments are not of the
    types the method takes (a client other than ours, or a value ours passed through)."""
