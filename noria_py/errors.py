"""Every error a user can cause, under one base class: ``noria_py.Error``.

The SQL-level classes come from the front end (which must not import the engine);
the engine adds its own below. Every class sits under one of DB-API 2.0's (PEP 249:
``InterfaceError``, ``DatabaseError`` and its ``DataError``, ``OperationalError``,
``IntegrityError``, ``InternalError``, ``ProgrammingError``, ``NotSupportedError``), so
code written for any Python database catches ours.
"""
from sql_frontend.errors import (  # noqa: F401  (re-exported)
    AlreadyExistsError,
    ArityError,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ParseError,
    ProgrammingError,
    SqlError,
    TypeMismatchError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
)


class DuplicateKeyError(IntegrityError):
    """An insert would give two rows the same primary key."""


class ArgumentError(ProgrammingError):
    """A setting or option outside what a function takes: a value not among its choices
    (``bench overhead``'s ``against=``, ``gc_mode=``), or one that needs another
    (``Server(host=...)`` beyond loopback without a token); the message names it."""


class RegimeError(ArgumentError):
    """``connect(regime=...)`` or ``noria-py serve --regime`` names a fault-tolerance
    regime that does not exist, or one this runtime does not offer (the message says
    which, and lists the regimes that are built); or falkirk's per-node dict names an
    unknown policy, or a table or a name no view or node has."""


class DependentViewsError(ProgrammingError):
    """DROP TABLE or DROP VIEW (with IF EXISTS too) of something other views read; the
    message names them, to be dropped first."""


class RowNotFoundError(DataError):
    """A delete names a row (or key) the table does not hold."""


class DivisionByZeroError(DataError):
    """PostgreSQL's division by zero (SQLSTATE 22012): a write whose values or WHERE
    divided by zero under the PostgreSQL front end's ``/`` and ``%``, or a result over
    the wire holding such a value (noria_py/divzero.py)."""


class UnknownViewError(ProgrammingError):
    """A read names a view that does not exist."""


class UnknownNodeError(ProgrammingError):
    """fail/recover names a node id that is not in the graph."""


class RecoveryError(OperationalError):
    """A recovery cannot be carried out as asked (the message says what to do instead)."""


class TableLostError(OperationalError):
    """A table of a cluster lost its acknowledged writes: the worker holding its base and
    the worker holding its log replica were lost together, with no data directory
    (``noria-py serve --data-dir``) to read its log from. Its reads and writes, and the
    reads of the views over it, raise this until it is dropped; never a shorter table."""


class ClosedError(InterfaceError):
    """The database handle was closed."""


class StorageError(OperationalError):
    """The data directory cannot be used (locked by another process, unreadable)."""


class CorruptionError(StorageError):
    """A data directory's files are damaged in a way a crash cannot explain (a bad record
    with data after it, a damaged or missing log, a catalog that does not match the
    data): opening is refused, the message names the file and byte offset, and
    ``noria-py repair --data-dir DIR`` says what dropping the damage would lose."""


class ConnectError(OperationalError):
    """``connect(url)`` cannot reach a server: the URL is not noria://HOST:PORT, or
    nothing answers there."""


class RequestError(InterfaceError):
    """A request to a server is not one it serves, or its arguments are not of the
    types the method takes (a client other than ours, or a value ours passed through)."""


class SubscriptionError(OperationalError):
    """A subscription ended: its subscriber fell too far behind, a reader of its view
    failed, or the view was dropped (the message says which); subscribe again."""


def named(name: str, message: str) -> Error:
    """The error a server or a worker sent by its class's name (``type(e).__name__``):
    that ``Error`` subclass of this module with ``message``, or ``Error`` itself for a
    name that is not one (nothing else is made from a name a peer sent)."""
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, Error)):
        cls = Error
    return cls(message)
