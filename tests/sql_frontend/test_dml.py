import datetime

import pytest

from sql_frontend import (
    ArityError,
    Call,
    Col,
    Delete,
    Insert,
    Lit,
    SqlType,
    TypeMismatchError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
    Update,
    parse,
)

I, T, F, N = SqlType.INT, SqlType.TEXT, SqlType.FLOAT, SqlType.NULL  # noqa: E741


def test_insert_all_columns_many_rows(cat):
    st = parse("INSERT INTO t VALUES (1, 2, 'x', 1.5), (2, NULL, 'y', -3)", cat)
    assert isinstance(st, Insert) and st.table == "t"
    assert st.rows == (
        (Lit(1, I), Lit(2, I), Lit("x", T), Lit(1.5, F)),
        (Lit(2, I), Lit(None, N), Lit("y", T), Lit(-3, I)),
    )


def test_insert_named_columns_fill_nulls_in_table_order(cat):
    st = parse("INSERT INTO T (c, a) VALUES ('z', 7)", cat)
    assert st.rows == ((Lit(7, I), Lit(None, N), Lit("z", T), Lit(None, N)),)


def test_insert_params_bound_in_text_order(cat):
    st = parse("INSERT INTO t (b, a) VALUES (?, ?), (?, 4)", cat, (1, 2, 3))
    assert st.rows == ((Lit(2, I), Lit(1, I), Lit(None, N), Lit(None, N)),
                       (Lit(4, I), Lit(3, I), Lit(None, N), Lit(None, N)))
    st = parse("INSERT INTO u VALUES (?, ?, ?)", cat, (1, None, datetime.date(2020, 1, 2)))
    assert st.rows[0] == (Lit(1, I), Lit(None, N), Lit(datetime.date(2020, 1, 2), SqlType.DATE))


def test_insert_expressions_stay_expressions(cat):
    st = parse("INSERT INTO t (a, b) VALUES (1 + 2, -(3))", cat)
    assert st.rows[0][0] == Call("add", (Lit(1, I), Lit(2, I)), I)
    assert st.rows[0][1] == Lit(-3, I)


def test_insert_date_text_is_parsed(cat):
    st = parse("INSERT INTO u VALUES (1, 'a', '2020-01-31')", cat)
    assert st.rows[0][2] == Lit(datetime.date(2020, 1, 31), SqlType.DATE)
    st = parse("INSERT INTO w VALUES (1, 2, TIMESTAMP '2020-01-31 10:11:12')", cat)
    assert st.rows[0][2] == Lit(datetime.datetime(2020, 1, 31, 10, 11, 12), SqlType.TIMESTAMP)
    with pytest.raises(TypeMismatchError, match="not a DATE"):
        parse("INSERT INTO u VALUES (1, 'a', 'nope')", cat)


def test_insert_errors(cat):
    with pytest.raises(ArityError, match="2 parameters"):
        parse("INSERT INTO t (a, b) VALUES (?, ?)", cat, (1,))
    with pytest.raises(ArityError, match="3 values for 4 columns"):
        parse("INSERT INTO t VALUES (1, 2, 'x')", cat)
    with pytest.raises(UnknownColumnError, match="no column named zz") as ei:
        parse("INSERT INTO t (a, zz) VALUES (1, 2)", cat)
    assert ei.value.position == (1, 19)
    with pytest.raises(UnknownTableError, match="no such table: nope"):
        parse("INSERT INTO nope VALUES (1)", cat)
    with pytest.raises(TypeMismatchError, match="column a is INT, got TEXT"):
        parse("INSERT INTO t (a) VALUES ('x')", cat)
    with pytest.raises(ArityError, match="the SELECT gives"):
        parse("INSERT INTO t SELECT a FROM t", cat)
    with pytest.raises(UnknownColumnError):
        parse("INSERT INTO t (a) VALUES (b)", cat)
    with pytest.raises(TypeMismatchError, match="unsupported Python type"):
        parse("INSERT INTO t (a) VALUES (?)", cat, (object(),))


def test_delete(cat):
    st = parse("DELETE FROM t WHERE a = ? AND c = 'x'", cat, (5,))
    assert isinstance(st, Delete) and st.table == "t"
    assert st.where == Call("and", (
        Call("eq", (Col(0, I, "a"), Lit(5, I)), SqlType.BOOL),
        Call("eq", (Col(2, T, "c"), Lit("x", T)), SqlType.BOOL)), SqlType.BOOL)
    assert parse("DELETE FROM t", cat) == Delete("t", None)


def test_update(cat):
    st = parse("UPDATE t SET b = b + ?, c = 'z' WHERE a = ?", cat, (10, 3))
    assert isinstance(st, Update)
    assert st.assignments == (
        (1, Call("add", (Col(1, I, "b"), Lit(10, I)), I)),
        (2, Lit("z", T)))
    assert st.where == Call("eq", (Col(0, I, "a"), Lit(3, I)), SqlType.BOOL)


def test_update_errors(cat):
    with pytest.raises(UnknownColumnError, match="no such column: nope"):
        parse("UPDATE t SET nope = 1", cat)
    with pytest.raises(TypeMismatchError):
        parse("UPDATE t SET b = 'text'", cat)
    with pytest.raises(ArityError):
        parse("UPDATE t SET b = ?", cat)


def test_writes_to_views_are_unsupported(cat):
    cat.views["v"] = parse("CREATE VIEW v AS SELECT a FROM t", cat).query
    for sql in ("INSERT INTO v VALUES (1)", "DELETE FROM v", "UPDATE v SET a = 1"):
        with pytest.raises(UnsupportedError, match="read-only"):
            parse(sql, cat)
