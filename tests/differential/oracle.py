"""Differential testing support: the same tables in DuckDB, and result normalization."""
from __future__ import annotations

import decimal
from collections import Counter

import duckdb


def normalize(rows) -> Counter:
    """A multiset of rows, floats rounded so that summation order does not matter."""
    out = Counter()
    for r in rows:
        vals = []
        for v in r:
            if isinstance(v, decimal.Decimal):
                v = float(v)
            if isinstance(v, float):
                v = round(v, 6) + 0.0
                if v.is_integer():
                    v = int(v)
            vals.append(v)
        out[tuple(vals)] += 1
    return out


class Oracle:
    """DuckDB holding the same rows as the engine's tables."""

    def __init__(self, ddl: list[str]) -> None:
        self.con = duckdb.connect()
        for sql in ddl:
            self.con.execute(sql)

    def load(self, tables: dict[str, list[tuple]]) -> None:
        for name, rows in tables.items():
            self.con.execute(f"DELETE FROM {name}")
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                self.con.executemany(f"INSERT INTO {name} VALUES ({marks})", [list(r) for r in rows])

    def query(self, sql: str, params=()) -> Counter:
        return normalize(self.con.execute(sql, list(params)).fetchall())
