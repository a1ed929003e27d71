"""What ``execute`` returns: rows with their column names, DB-API style."""
from __future__ import annotations

import importlib
from typing import Any, Sequence

import pyarrow as pa

from sql_frontend.types import SqlType

from .arrowio import ARROW_TYPES, arrow_array
from .errors import NotSupportedError

_ARROW = {**ARROW_TYPES, SqlType.NULL: pa.null()}    # a NULL-typed column holds only NULLs


def arrow_type(t: SqlType) -> pa.DataType:
    return _ARROW[t]


class Result:
    #: a cluster's answer to a SELECT: ``plan_oids`` is what its plan says of its
    #: columns' PostgreSQL types (``pg.types.numeric_oids``; None: each its type's)
    typed = False
    plan_oids: list[int] | None = None

    def __init__(self, columns: Sequence[str] = (), rows: list[tuple] | None = None,
                 types: Sequence[SqlType] = (), rowcount: int = -1) -> None:
        self.columns = list(columns)
        self.rows = rows if rows is not None else []
        self.types = list(types)
        self.rowcount = rowcount if rowcount >= 0 else len(self.rows)
        self._pos = 0

    def fetchall(self) -> list[tuple]:
        """The rows not fetched yet."""
        rest = self.rows[self._pos:]
        self._pos = len(self.rows)
        return rest

    def fetchone(self) -> tuple | None:
        """The next row, or None after the last."""
        if self._pos >= len(self.rows):
            return None
        self._pos += 1
        return self.rows[self._pos - 1]

    def __iter__(self):
        while (row := self.fetchone()) is not None:
            yield row

    def arrow(self) -> pa.Table:
        """Every row (not only those not fetched yet) as a ``pyarrow.Table``, each column
        of its SQL type's Arrow type (an INT column holding a value past 64 bits, a SUM's,
        as a decimal: ``arrow_array``)."""
        cols: list[Sequence] = list(zip(*self.rows)) if self.rows else [[] for _ in self.columns]
        arrays = []
        for i, name in enumerate(self.columns):
            t = arrow_type(self.types[i]) if i < len(self.types) else None
            arrays.append(arrow_array(list(cols[i]), t))
        return pa.Table.from_arrays(arrays, names=self.columns)

    def df(self) -> Any:
        """Every row as a pandas ``DataFrame`` (needs pandas)."""
        _need("pandas", "df()")
        return self.arrow().to_pandas()

    def pl(self) -> Any:
        """Every row as a polars ``DataFrame`` (needs polars)."""
        polars = _need("polars", "pl()")
        return polars.from_arrow(self.arrow())

    def fetchnumpy(self) -> dict[str, Any]:
        """The rows not fetched yet, as one numpy array per column (by name), as DuckDB's
        ``fetchnumpy``; a column with NULLs is an object array, or float with NaN."""
        rest = Result(self.columns, self.fetchall(), self.types)
        table = rest.arrow()
        return {name: table.column(i).to_numpy(zero_copy_only=False)
                for i, name in enumerate(self.columns)}

    def __repr__(self) -> str:
        return f"Result(columns={self.columns}, rows={len(self.rows)})"


class ViewFrames:
    """A view handle's reads as frames, for ``View`` and the cluster's ``RemoteView``:
    each takes a key (the rows of ``lookup(*key)``) or none (every row, ``all()``)."""

    columns: list[str]
    types: list[SqlType]

    def lookup(self, *key: Any) -> list[tuple]:
        raise NotImplementedError

    def all(self) -> list[tuple]:
        raise NotImplementedError

    def result(self, *key: Any) -> Result:
        """The rows as a ``Result``: ``.arrow()``, ``.df()``, ``.pl()``, ``.fetchnumpy()``."""
        return Result(self.columns, self.lookup(*key) if key else self.all(), self.types)

    def arrow(self, *key: Any) -> pa.Table:
        return self.result(*key).arrow()

    def df(self, *key: Any) -> Any:
        """A pandas ``DataFrame`` (needs pandas)."""
        return self.result(*key).df()

    def pl(self, *key: Any) -> Any:
        """A polars ``DataFrame`` (needs polars)."""
        return self.result(*key).pl()


def _need(module: str, what: str) -> Any:
    """An optional library, or an error that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise NotSupportedError(f"{what} needs {module}, which is not installed: "
                                f"pip install {module} (or noria-py[dataframes])") from None
