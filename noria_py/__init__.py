"""noria-py: a Noria-style incremental dataflow engine for Python.

``connect()`` opens an engine; SQL views are compiled to dataflow graphs that keep
materialized results up to date as rows are written.
"""
from .client import Database, Table, View, connect
from .dbapi import (
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Cursor,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
    apilevel,
    paramstyle,
    threadsafety,
)
from .errors import (
    AlreadyExistsError,
    ArgumentError,
    ArityError,
    ClosedError,
    ConnectError,
    CorruptionError,
    DatabaseError,
    DataError,
    DependentViewsError,
    DivisionByZeroError,
    DuplicateKeyError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ParseError,
    ProgrammingError,
    RecoveryError,
    RegimeError,
    RowNotFoundError,
    SqlError,
    StorageError,
    SubscriptionError,
    TableLostError,
    TypeMismatchError,
    UnknownColumnError,
    UnknownNodeError,
    UnknownTableError,
    UnknownViewError,
    UnsupportedError,
)
from .gcpolicy import tune_gc
from .recovery import RecoveryReport
from .result import Result
from .subscribe import Change, Subscription

__all__ = [
    "connect", "tune_gc", "Database", "Table", "View", "Result", "RecoveryReport",
    "Error", "SqlError", "ParseError", "UnsupportedError", "UnknownTableError",
    "UnknownColumnError", "UnknownViewError", "UnknownNodeError", "AlreadyExistsError",
    "TypeMismatchError", "ArityError", "DuplicateKeyError", "RowNotFoundError",
    "RecoveryError", "ClosedError", "StorageError", "CorruptionError", "SubscriptionError", "ConnectError",
    "TableLostError",
    "DependentViewsError", "DivisionByZeroError", "ArgumentError", "RegimeError",
    "Change", "Subscription",
    # DB-API 2.0 (PEP 249): noria_py/dbapi.py
    "apilevel", "threadsafety", "paramstyle", "Cursor", "Warning", "InterfaceError",
    "DatabaseError", "DataError", "OperationalError", "IntegrityError", "InternalError",
    "ProgrammingError", "NotSupportedError", "STRING", "BINARY", "NUMBER", "DATETIME",
    "ROWID", "Date", "Time", "Timestamp", "DateFromTicks", "TimeFromTicks",
    "TimestampFromTicks", "Binary",
]

Warning = UserWarning       # PEP 249's Warning; noria-py raises none (noqa: A001)
