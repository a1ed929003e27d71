"""PostgreSQL's ``$n`` parameters, each ``?``'s type from its context, and PostgreSQL's
NULL order written out (sql_frontend/parameters.py, parse.py)."""
from __future__ import annotations

import pytest

from sql_frontend import ParseError, parameter_types, positional, postgres_order
from sql_frontend.catalog import DictCatalog
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

T = SqlType
CATALOG = DictCatalog({"t": TableSchema("t", (ColumnInfo("id", T.INT), ColumnInfo("f", T.FLOAT),
                                              ColumnInfo("s", T.TEXT), ColumnInfo("d", T.DATE)),
                                        (0,)),
                       "u": TableSchema("u", (ColumnInfo("id", T.TEXT), ColumnInfo("x", T.INT)))})


@pytest.mark.parametrize("sql, want, order", [
    ("SELECT * FROM t WHERE id = $1", "SELECT * FROM t WHERE id = ? ", [1]),
    ("SELECT $2, $1, $2", "SELECT ? , ? , ? ", [2, 1, 2]),
    ("SELECT '$1', \"$2\", $3 -- $4\n", "SELECT '$1', \"$2\", ?  -- $4\n", [3]),
    ("SELECT $12 /* $1 */", "SELECT ?   /* $1 */", [12]),
    ("SELECT 'it''s $1', $1", "SELECT 'it''s $1', ? ", [1]),
])
def test_dollar_parameters_become_question_marks_in_place(sql: str, want: str,
                                                          order: list[int]) -> None:
    assert positional(sql) == (want, order)


def test_mixing_dollar_and_question_mark_is_refused() -> None:
    with pytest.raises(ParseError, match="not both"):
        positional("SELECT $1, ?")


@pytest.mark.parametrize("sql, want", [
    ("SELECT * FROM t WHERE id = ? AND s > ?", [T.INT, T.TEXT]),
    ("SELECT * FROM t AS a JOIN u AS b ON a.s = b.id WHERE b.id = ? AND a.id = ?", [T.TEXT, T.INT]),
    ("SELECT * FROM t JOIN u ON t.s = u.id WHERE id = ?", [None]),     # id: INT or TEXT
    ("INSERT INTO t VALUES (?, ?, ?, ?)", [T.INT, T.FLOAT, T.TEXT, T.DATE]),
    ("INSERT INTO t (d, id) VALUES (?, ?), (?, ?)", [T.DATE, T.INT, T.DATE, T.INT]),
    ("UPDATE t SET f = ? WHERE d < ?", [T.FLOAT, T.DATE]),
    ("SELECT id FROM t WHERE f IN (?, ?) OR id BETWEEN ? AND 3", [T.FLOAT, T.FLOAT, T.INT]),
    ("SELECT id FROM t ORDER BY id LIMIT ? OFFSET ?", [T.INT, T.INT]),
    ("SELECT CAST(? AS DATE), ? + 1, ? ::int", [T.DATE, None, T.INT]),
    ("SELECT id FROM t WHERE f * ? > 1", [T.FLOAT]),
])
def test_each_parameter_takes_its_type_from_its_context(sql: str, want: list) -> None:
    assert parameter_types(sql, CATALOG) == want


@pytest.mark.parametrize("sql, want", [
    ("SELECT id FROM t ORDER BY f DESC", "SELECT id FROM t ORDER BY f DESC NULLS FIRST"),
    ("SELECT id FROM t ORDER BY f", "SELECT id FROM t ORDER BY f NULLS LAST"),
    ("SELECT id FROM t ORDER BY f DESC NULLS LAST", "SELECT id FROM t ORDER BY f DESC"),
    ("SELECT id FROM t WHERE s = 'order'", "SELECT id FROM t WHERE s = 'order'"),
    ("SELECT id FROM t", "SELECT id FROM t"),
])
def test_postgres_null_order_is_written_out(sql: str, want: str) -> None:
    assert postgres_order(sql) == want


@pytest.mark.parametrize("sql, slots", [
    ("INSERT INTO t (id, s) VALUES ($1::BIGINT, $2::VARCHAR)", ((0, 0), (0, 2))),
    ("INSERT INTO t (id, f) VALUES (CAST($1 AS INTEGER), $2::DOUBLE PRECISION)",
     ((0, 0), (0, 1))),
    ("INSERT INTO t (id) VALUES ($1), ($2::INT)", ((0, 0), (1, 0))),
    ("INSERT INTO t (id, f) VALUES ($1, $2::INT)", None),     # (a cast that converts)
    ("INSERT INTO t (id) VALUES ($1::FLOAT)", None),
    ("INSERT INTO t (id) VALUES ($1 + 1)", None),
])
def test_an_insert_of_parameters_cast_to_their_columns_types_is_a_template(sql, slots):
    """SQLAlchemy writes ``$1::BIGINT``: a cast to the column's own type changes nothing,
    so such an insert binds its values as a plain ``$1`` does (no parse per row); a
    cast to another type is the parse's to apply."""
    from sql_frontend import insert_template
    t = insert_template(positional(sql)[0], CATALOG)
    assert (t.slots if t is not None else None) == slots
