"""What ``execute`` returns: rows with their column names, DB-API style."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from sql_frontend.types import SqlType

from .arrowio import ARROW_TYPES

_ARROW = {**ARROW_TYPES, SqlType.NULL: pa.null()}    # a NULL-typed column holds only NULLs


def arrow_type(t: SqlType) -> pa.DataType:
    return _ARROW[t]


class Result:
    def __init__(self, columns: Sequence[str] = (), rows: list[tuple] | None = None,
                 types: Sequence[SqlType] = (), rowcount: int = -1) -> None:
        self.columns = list(columns)
        self.rows = rows if rows is not None else []
        self.types = list(types)
        self.rowcount = rowcount if rowcount >= 0 else len(self.rows)
        self._pos = 0

    def fetchall(self) -> list[tuple]:
        rest = self.rows[self._pos:]
        self._pos = len(self.rows)
        return rest

    def fetchone(self) -> tuple | None:
        if self._pos >= len(self.rows):
            return None
        self._pos += 1
        return self.rows[self._pos - 1]

    def __iter__(self):
        while (row := self.fetchone()) is not None:
            yield row

    def arrow(self) -> pa.Table:
        cols: list[Sequence] = list(zip(*self.rows)) if self.rows else [[] for _ in self.columns]
        arrays = []
        for i, name in enumerate(self.columns):
            t = arrow_type(self.types[i]) if i < len(self.types) else None
            arrays.append(pa.array(list(cols[i]), type=t))
        return pa.Table.from_arrays(arrays, names=self.columns)

    def __repr__(self) -> str:
        return f"Result(columns={self.columns}, rows={len(self.rows)})"
