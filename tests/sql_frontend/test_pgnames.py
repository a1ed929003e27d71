"""PostgreSQL's names of unnamed result columns (sql_frontend/pgnames.py); the
differential test against a real PostgreSQL checks them through the wire too."""
from __future__ import annotations

import pytest

import noria_py
from sql_frontend import postgres_column_name


@pytest.mark.parametrize("select, want", [
    ("COUNT(*)", "count"), ("count(a)", "count"), ("SUM(a) AS total", "total"),
    ("a", "a"), ("t.a", "a"), ("a + 1", "?column?"), ("CAST(a AS TEXT)", "a"),
    ("a::text", "a"), ("CAST(1 AS INT)", "int4"), ("UPPER(b)", "upper"),
    ("COALESCE(b, 'x')", "coalesce"), ("CASE WHEN a > 0 THEN 1 END", "case"),
    ("(a)", "a"), ("1", "?column?"), ("'x'", "?column?"), ("a IS NULL", "?column?"),
    ('a AS "Total votes"', "Total votes"), ('a AS "my(col"', "my(col"),
])
def test_names_as_postgres_gives_them(select: str, want: str) -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (a INT, b TEXT)")
    name = db.execute(f"SELECT {select} FROM t").columns[0]
    assert postgres_column_name(name) == want
