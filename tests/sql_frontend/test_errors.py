"""Every error class, with its position; and sqllogictest statements never crash."""
import pytest

from sql_frontend import (
    AlreadyExistsError,
    ArityError,
    Error,
    ParseError,
    SqlError,
    TypeMismatchError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
    parse,
)
from sql_frontend.catalog import DictCatalog

from .helpers import make_catalog


@pytest.mark.parametrize("sql, cls, pos", [
    ("SELECT a FROM WHERE", ParseError, (1, 15)),
    ("SELECT a,\n (b FROM t", ParseError, (2, 5)),
    ("SELECT * FROM nope", UnknownTableError, (1, 15)),
    ("SELECT a FROM t WHERE\n  zz > 1", UnknownColumnError, (2, 3)),
    ("CREATE TABLE t (a INT)", AlreadyExistsError, (1, 14)),
    ("SELECT a FROM t WHERE c = 1", TypeMismatchError, (1, 23)),
    ("SELECT a FROM t GROUP BY a HAVING EXISTS (SELECT 1 FROM u)", UnsupportedError, (1, 35)),
    ("SELECT a FROM t\nORDER BY 9", SqlError, (2, 10)),
    ("PRAGMA foo", UnsupportedError, (1, 1)),
])
def test_errors_have_positions(cat, sql, cls, pos):
    with pytest.raises(cls) as ei:
        parse(sql, cat)
    assert ei.value.position == pos
    assert f"line {pos[0]}, column {pos[1]}" in str(ei.value)


def test_error_hierarchy():
    for cls in (ParseError, UnsupportedError, UnknownTableError, UnknownColumnError,
                AlreadyExistsError):
        assert issubclass(cls, SqlError) and issubclass(cls, Error)
    assert issubclass(TypeMismatchError, Error) and issubclass(ArityError, Error)


def test_parse_error_names_the_token(cat):
    with pytest.raises(ParseError, match="near 'WHERE'"):
        parse("SELECT a FROM WHERE", cat)
    with pytest.raises(ParseError):
        parse("SELECT 'unterminated FROM t", cat)


def test_sqlite_bare_columns_are_unsupported(cat):
    with pytest.raises(UnsupportedError, match="col|c must appear in GROUP BY"):
        parse("SELECT b, c FROM t GROUP BY b", cat)


SQLLOGICTEST = [
    "CREATE TABLE t1(a INTEGER, b INTEGER, c INTEGER, d INTEGER, e INTEGER)",
    "INSERT INTO t1(e,c,b,d,a) VALUES(103,102,100,101,104)",
    "SELECT a+b*2+c*3+d*4+e*5, (a+b+c+d+e)/5 FROM t1 ORDER BY 1,2",
    "SELECT CASE WHEN c>(SELECT avg(c) FROM t1) THEN a*2 ELSE b*10 END FROM t1 ORDER BY 1",
    ("SELECT a+b*2+c*3+d*4+e*5, CASE WHEN a<b-3 THEN 111 WHEN a<=b THEN 222\n"
     " WHEN a<b+3 THEN 333 ELSE 444 END, abs(b-c), (a+b+c+d+e)/5 FROM t1\n"
     " WHERE (e>c OR e<d) AND d>e AND EXISTS(SELECT 1 FROM t1 AS x WHERE x.b<t1.b)"),
    ("SELECT c, d-e, CASE a+1 WHEN b THEN 111 WHEN c THEN 222 WHEN d THEN 333 ELSE 555 END "
     "FROM t1 WHERE c BETWEEN b-2 AND d+2 ORDER BY 3,2,1"),
    "SELECT ALL - COUNT( ALL + + a ) AS col2, COUNT( ALL - - b ) FROM t1",
    ("SELECT DISTINCT - CAST( NULL AS SIGNED ) / - 0 col0 FROM t1 AS cor0 "
     "WHERE NOT ( - CAST( NULL AS SIGNED ) ) IS NOT NULL"),
    ("SELECT + + MIN( ALL - + 32 ) AS col0, + COUNT( * ) * + COUNT( * ) "
     "FROM ( t1 AS cor0 CROSS JOIN t1 cor1 )"),
    "SELECT DISTINCT 20 DIV - 97 FROM t1",
    "SELECT * FROM t1 AS cor0 WHERE NULL NOT IN ( + a, - b * - - 87 )",
    "SELECT a FROM t1 EXCEPT SELECT b FROM t1",
    "SELECT 1",
    "CREATE INDEX t1i0 ON t1(a)",
    "CREATE VIEW v1 AS SELECT a, b FROM t1 WHERE a > 1",
    "DROP VIEW v1",
    "DROP TABLE t1",
]


def test_sqllogictest_statements_parse_or_are_unsupported():
    cat = DictCatalog()
    ok = 0
    for sql in SQLLOGICTEST:
        try:
            st = parse(sql, cat)
        except UnsupportedError:
            continue
        ok += 1
        if hasattr(st, "schema"):
            cat.tables[st.schema.name] = st.schema
        if hasattr(st, "query") and hasattr(st, "name"):
            cat.views[st.name] = st.query
        if type(st).__name__ == "DropView":
            del cat.views[st.name]
    assert ok >= 12


def test_required_sqllogictest_statements():
    cat = DictCatalog()
    st = parse(SQLLOGICTEST[0], cat)
    cat.tables["t1"] = st.schema
    ins = parse(SQLLOGICTEST[1], cat)
    assert [e.value for e in ins.rows[0]] == [104, 100, 102, 101, 103]
    q = parse(SQLLOGICTEST[2], cat).query
    assert len(q.order) == 2 and q.names[1] == "(a + b + c + d + e) / 5"
    q = parse(SQLLOGICTEST[3], cat).query       # an uncorrelated scalar subquery
    assert len(q.names) == 1


def test_catalog_fixture_is_consistent():
    cat = make_catalog()
    assert cat.table("T").name == "t"
