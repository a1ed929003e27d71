"""noria-py: a Noria-style incremental dataflow engine for Python.

``connect()`` opens an engine; SQL views are compiled to dataflow graphs that keep
materialized results up to date as rows are written.
"""
from .client import Database, Table, View, connect
from .errors import (
    AlreadyExistsError,
    ArityError,
    ClosedError,
    CorruptionError,
    DependentViewsError,
    DuplicateKeyError,
    Error,
    ParseError,
    RecoveryError,
    RowNotFoundError,
    SqlError,
    StorageError,
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

__all__ = [
    "connect", "tune_gc", "Database", "Table", "View", "Result", "RecoveryReport",
    "Error", "SqlError", "ParseError", "UnsupportedError", "UnknownTableError",
    "UnknownColumnError", "UnknownViewError", "UnknownNodeError", "AlreadyExistsError",
    "TypeMismatchError", "ArityError", "DuplicateKeyError", "RowNotFoundError",
    "RecoveryError", "ClosedError", "StorageError", "CorruptionError", "DependentViewsError",
]
