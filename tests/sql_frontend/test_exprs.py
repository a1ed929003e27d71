import datetime

import pytest

from sql_frontend import (
    ArityError,
    Call,
    Col,
    Lit,
    SqlType,
    TypeMismatchError,
    UnknownColumnError,
    UnsupportedError,
    parse,
)

from .helpers import expr, query

I, T, F, B, N = SqlType.INT, SqlType.TEXT, SqlType.FLOAT, SqlType.BOOL, SqlType.NULL  # noqa: E741
a, b, c, d = Col(0, I, "a"), Col(1, I, "b"), Col(2, T, "c"), Col(3, F, "d")


def call(op, *args, t=B):
    return Call(op, tuple(args), t)


def test_literals(cat):
    assert expr("1", cat) == Lit(1, I)
    assert expr("1.5", cat) == Lit(1.5, F)
    assert expr("'x'", cat) == Lit("x", T)
    assert expr("TRUE", cat) == Lit(True, B)
    assert expr("FALSE", cat) == Lit(False, B)
    assert expr("NULL", cat) == Lit(None, N)
    assert expr("DATE '2020-01-02'", cat) == Lit(datetime.date(2020, 1, 2), SqlType.DATE)
    assert expr("TIMESTAMP '2020-01-02 03:04:05'", cat) == \
        Lit(datetime.datetime(2020, 1, 2, 3, 4, 5), SqlType.TIMESTAMP)
    assert expr("-3", cat) == Lit(-3, I)


def test_arithmetic_and_types(cat):
    assert expr("a + b * 2", cat) == call("add", a, call("mul", b, Lit(2, I), t=I), t=I)
    assert expr("a - d", cat) == call("sub", a, d, t=F)
    assert expr("a / b", cat) == call("div", a, b, t=I)
    assert expr("a % 2", cat) == call("mod", a, Lit(2, I), t=I)
    assert expr("-a", cat) == call("neg", a, t=I)
    assert expr("a + NULL", cat).type == I
    assert expr("20 DIV 3", cat) == call("div", Lit(20, I), Lit(3, I), t=I)


def test_comparisons_and_logic(cat):
    assert expr("a = b", cat) == call("eq", a, b)
    assert expr("a <> b", cat) == call("ne", a, b)
    assert expr("a != b", cat) == call("ne", a, b)
    assert expr("a < d", cat) == call("lt", a, d)
    assert expr("a <= b", cat) == call("le", a, b)
    assert expr("a > b", cat) == call("gt", a, b)
    assert expr("a >= b", cat) == call("ge", a, b)
    assert expr("a = 1 AND b = 2 AND c = 'x'", cat).args[2] == call("eq", c, Lit("x", T))
    assert expr("a = 1 OR NOT b = 2", cat) == call(
        "or", call("eq", a, Lit(1, I)), call("not", call("eq", b, Lit(2, I))))
    assert expr("a IS NULL", cat) == call("is_null", a)
    assert expr("a IS NOT NULL", cat) == call("is_not_null", a)
    assert expr("NOT (a IS NULL)", cat) == call("is_not_null", a)


def test_case(cat):
    assert expr("CASE WHEN a > 1 THEN 'x' ELSE 'y' END", cat) == call(
        "case", call("gt", a, Lit(1, I)), Lit("x", T), Lit("y", T), t=T)
    assert expr("CASE a WHEN 1 THEN 2 WHEN 3 THEN 4.5 END", cat) == call(
        "case", call("eq", a, Lit(1, I)), Lit(2, I), call("eq", a, Lit(3, I)), Lit(4.5, F),
        Lit(None, N), t=F)


def test_functions(cat):
    assert expr("COALESCE(b, a, 0)", cat) == call("coalesce", b, a, Lit(0, I), t=I)
    assert expr("IFNULL(b, d)", cat) == call("coalesce", b, d, t=F)
    assert expr("NULLIF(a, 1)", cat) == call("nullif", a, Lit(1, I), t=I)
    assert expr("ABS(d)", cat) == call("abs", d, t=F)
    assert expr("LOWER(c)", cat) == call("lower", c, t=T)
    assert expr("UPPER(c)", cat) == call("upper", c, t=T)
    assert expr("LENGTH(c)", cat) == call("length", c, t=I)


def test_in_between_like_concat_cast(cat):
    assert expr("a IN (1, 2)", cat) == call("in", a, Lit(1, I), Lit(2, I))
    assert expr("a NOT IN (1, 2)", cat) == call("not", call("in", a, Lit(1, I), Lit(2, I)))
    assert expr("a BETWEEN 1 AND 5", cat) == call(
        "and", call("ge", a, Lit(1, I)), call("le", a, Lit(5, I)))
    assert expr("a NOT BETWEEN 1 AND 5", cat).op == "not"
    assert expr("c LIKE 'a%'", cat) == call("like", c, Lit("a%", T))
    assert expr("c NOT LIKE 'a%'", cat) == call("not", call("like", c, Lit("a%", T)))
    assert expr("c || 'x'", cat) == call("concat", c, Lit("x", T), t=T)
    assert expr("c || a", cat) == call("concat", c, call("cast", a, t=T), t=T)
    assert expr("CAST(a AS TEXT)", cat) == call("cast", a, t=T)
    assert expr("CAST(c AS DOUBLE)", cat) == call("cast", c, t=F)
    assert expr("CAST(a AS SIGNED)", cat) == a
    assert expr("CAST(NULL AS INTEGER)", cat) == Lit(None, I)
    assert expr("CAST('2021-05-06' AS DATE)", cat) == Lit(datetime.date(2021, 5, 6),
                                                          SqlType.DATE)


def test_dates_compare_with_text_literals(cat):
    z = Col(2, SqlType.DATE, "z")
    assert expr("z > '2020-01-01'", cat, table="u") == call(
        "gt", z, Lit(datetime.date(2020, 1, 1), SqlType.DATE))
    with pytest.raises(TypeMismatchError):
        expr("z > 'soon'", cat, table="u")


def test_text_literals_compared_with_numbers_are_read_as_numbers(cat):
    """As PostgreSQL reads an untyped literal (DuckDB and SQLite agree): a = '5' is a = 5."""
    a = Col(0, SqlType.INT, "a")
    assert expr("a = '5'", cat) == call("eq", a, Lit(5, SqlType.INT))
    assert expr("' 7' < a", cat) == call("lt", Lit(7, SqlType.INT), a)
    assert expr("a IN ('1', 2)", cat) == call("in", a, Lit(1, SqlType.INT), Lit(2, SqlType.INT))
    for bad in ("a = '5.0'", "a = 'five'", "a = '99999999999999999999'"):
        with pytest.raises(TypeMismatchError, match="invalid input for INT"):
            expr(bad, cat)


def test_type_mismatches_name_the_expression(cat):
    with pytest.raises(TypeMismatchError, match=r"cannot compare TEXT with INT in c = 1") as ei:
        expr("c = 1", cat)
    assert ei.value.position == (1, 8)
    with pytest.raises(TypeMismatchError, match=r"arithmetic on TEXT and INT in c \+ 1"):
        expr("c + 1", cat)
    with pytest.raises(TypeMismatchError, match="LIKE needs text"):
        expr("a LIKE 'x'", cat)
    with pytest.raises(TypeMismatchError, match="CASE mixes"):
        expr("CASE WHEN a = 1 THEN 'x' ELSE 2 END", cat)
    with pytest.raises(TypeMismatchError):
        expr("a IN (1, 'x')", cat)
    with pytest.raises(TypeMismatchError, match="SUM of TEXT"):
        expr("SUM(c)", cat)
    with pytest.raises(TypeMismatchError, match="TEXT used as a condition"):
        query("SELECT a FROM t WHERE c", cat)


def test_output_names(cat):
    q = query("SELECT a, b AS bee, a + 1, COUNT(*) AS n, t.c FROM t GROUP BY a, b, c", cat)
    assert q.names == ("a", "bee", "a + 1", "n", "c")
    assert query("SELECT A FROM t", cat).names == ("a",)
    assert query("SELECT count(*) FROM t", cat).names == ("COUNT(*)",)


def test_unsupported_expressions_are_named(cat):
    cases = {
        "SELECT ROW_NUMBER() OVER (ORDER BY a) FROM t": "window function",
        "SELECT a FROM t GROUP BY a HAVING EXISTS (SELECT 1 FROM u)": "EXISTS",
        "SELECT a FROM t JOIN u ON a IN (SELECT x FROM u)": r"IN \(subquery\)",
        "SELECT (SELECT x FROM u) FROM t": "scalar subquery that may give several rows",
        "SELECT foo(a) FROM t": r"function FOO\(\)",
        "SELECT c ILIKE 'x' FROM t": "ILIKE",
        "SELECT a IS TRUE FROM t": "IS TRUE",
        "CREATE VIEW v AS SELECT a FROM t WHERE b = ? + 1": r"parameter \?",
        "CREATE VIEW v AS SELECT a FROM t WHERE b = ? OR a = 1": r"parameter \?",
    }
    for sql, what in cases.items():
        with pytest.raises(UnsupportedError, match=what) as ei:
            parse(sql, cat)
        assert ei.value.position is not None, sql


def test_a_selects_parameters_outside_its_key_are_bound_as_values(cat):
    """A SELECT (answered now) binds every ``?`` that is not a top-level ``col = ?``
    conjunct or a range parameter (``c > ?``) as a value; a view's must be keys."""
    sel = parse("SELECT a FROM t WHERE b = ? + 1 AND a = ? AND c <> ?", cat, (1, 2, "x"))
    assert sel.params == (2,)
    assert sel.query.key and len(sel.query.key) == 1
    with pytest.raises(ArityError, match="2 parameters"):
        parse("SELECT a FROM t WHERE b = ? OR a = ?", cat, (1,))
    with pytest.raises(ArityError):
        parse("SELECT a FROM t WHERE b = ? + 1", cat)


def test_unknown_and_ambiguous_columns(cat):
    with pytest.raises(UnknownColumnError, match="no such column: nope") as ei:
        parse("SELECT a,\n  nope FROM t", cat)
    assert ei.value.position == (2, 3)
    with pytest.raises(UnknownColumnError, match="no such column: zz.a"):
        parse("SELECT zz.a FROM t", cat)
    with pytest.raises(UnknownColumnError, match="ambiguous column name: a") as ei:
        parse("SELECT a FROM t JOIN t AS t2 ON t.a = t2.a", cat)
    assert ei.value.position == (1, 8)
