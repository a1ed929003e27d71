"""Column types of the logical plan, and the Python value each one holds."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import Enum


class SqlType(str, Enum):
    INT = "INT"              # int            (INT, BIGINT, SMALLINT, INTEGER, TINYINT)
    FLOAT = "FLOAT"          # float          (FLOAT, DOUBLE, REAL, DECIMAL, NUMERIC)
    TEXT = "TEXT"            # str            (TEXT, VARCHAR, CHAR)
    BOOL = "BOOL"            # bool           (BOOL, BOOLEAN)
    DATE = "DATE"            # datetime.date
    TIMESTAMP = "TIMESTAMP"  # datetime.datetime, naive
    TIMESTAMPTZ = "TIMESTAMPTZ"  # datetime.datetime, aware, in UTC (TIMESTAMP WITH TIME ZONE)
    NULL = "NULL"            # the type of a bare NULL literal; fits every column

    @property
    def numeric(self) -> bool:
        return self in (SqlType.INT, SqlType.FLOAT, SqlType.BOOL, SqlType.NULL)


#: the values an INT holds: a 64-bit signed integer, as in PostgreSQL's BIGINT and SQLite
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1



def is_text(value: str) -> bool:
    """Whether a str is Unicode text: no lone surrogate ('\\ud800'), which has no UTF-8
    form. TEXT holds only text (PostgreSQL refuses invalid UTF-8; a data directory's log
    could not store the rest), and SQL must be text."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


PYTHON_TYPES: dict[SqlType, tuple[type, ...]] = {
    SqlType.INT: (int,),
    SqlType.FLOAT: (float, int),
    SqlType.TEXT: (str,),
    SqlType.BOOL: (bool,),
    SqlType.DATE: (datetime.date,),
    SqlType.TIMESTAMP: (datetime.datetime,),
    SqlType.TIMESTAMPTZ: (datetime.datetime,),
}


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a table or of a relation in a plan."""
    name: str
    type: SqlType
    nullable: bool = True


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[int, ...] = ()     # column indices; () = no primary key

    def index_of(self, column: str) -> int | None:
        for i, c in enumerate(self.columns):
            if c.name.lower() == column.lower():
                return i
        return None
