"""``$1`` in a range place through the PostgreSQL front end: a range parameter
(docs/sql.md, "Range parameters"), every bound read from one view."""
from __future__ import annotations

from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")


@pytest.mark.parametrize("prepare", [False, True])
def test_range_parameters_through_psycopg(served: Any, conn: Any, prepare: bool) -> None:
    db = served[0]
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, f FLOAT)")
    conn.execute("INSERT INTO t VALUES " + ", ".join(
        f"({i}, {i % 6 if i % 5 else 'NULL'}, {i / 4})" for i in range(30)))
    cur = conn.cursor()
    for lo in range(-1, 7):
        cur.execute("SELECT id FROM t WHERE a > %s AND a <= %s ORDER BY id", (lo, lo + 2),
                    prepare=prepare)
        assert cur.fetchall() == [(i,) for i in range(30) if i % 5 and lo < i % 6 <= lo + 2]
        cur.execute("SELECT id, f FROM t WHERE f BETWEEN %s AND %s ORDER BY f DESC",
                    (lo, lo + 1.5), prepare=prepare)
        assert cur.fetchall() == [(i, i / 4) for i in reversed(range(30))
                                  if lo <= i / 4 <= lo + 1.5]
    assert len(db.queries()) == 2
