"""Every error class, with its position; and sqllogictest statements never crash."""
import pytest

from sql_frontend import (
    MAX_DEPTH,
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
    split_statements,
)
from sql_frontend.catalog import DictCatalog
from sql_frontend.expr import Call, Lit
from sql_frontend.types import INT_MAX, INT_MIN, SqlType

from .helpers import add_view, make_catalog, query


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
    ("CREATE TABLE d ()", UnsupportedError, (1, 14)),
    ("SELECT 9223372036854775808 FROM t", TypeMismatchError, (1, 8)),
    ("SELECT a FROM t WHERE b = -9223372036854775809", TypeMismatchError, (1, 28)),
    ("SELECT 'a\ud800' FROM t", ParseError, (1, 10)),
    ("SELECT a FROM t\nWHERE b = " + "+".join(["1"] * 200), UnsupportedError, (2, 11)),
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


@pytest.mark.parametrize("sql, message", [
    ("SELECT STRING_AGG(a, ',') FROM t", "function STRING_AGG()"),
    ("SELECT SUBSTR(c, 1, 2) FROM t", "function SUBSTR()"),
    ("SELECT a * FROM t", "incomplete MUL expression"),
    ("SUBSCRIBE v", "db.subscribe"),
    ("SUBSCRIBE TO v", "COPY (SUBSCRIBE view) TO STDOUT"),
])
def test_messages_name_what_the_user_wrote(cat, sql, message):
    with pytest.raises((ParseError, UnsupportedError)) as ei:
        parse(sql, cat)
    assert message in str(ei.value)
    assert "sqlglot" not in str(ei.value) and "<class" not in str(ei.value)


def test_create_materialized_view_is_create_view(cat):
    made = parse("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t", cat)
    plain = parse("CREATE VIEW mv AS SELECT a FROM t", cat)
    assert (made.name, made.query) == (plain.name, plain.query)
    with pytest.raises(UnsupportedError, match="MATERIALIZED"):
        parse("CREATE MATERIALIZED TABLE x (a INT)", cat)


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


# ---------------------------------------------------------------- what no later stage can take

def test_int_literals_hold_64_bits(cat):
    lo = query("SELECT -9223372036854775808 FROM t", cat).root.exprs[0]
    assert lo == Lit(INT_MIN, SqlType.INT)
    hi = query("SELECT 9223372036854775807 FROM t", cat).root.exprs[0]
    assert hi == Lit(INT_MAX, SqlType.INT)
    # a negation that leaves 64 bits is not folded: it is NULL when it runs
    neg = query("SELECT - -9223372036854775808 FROM t", cat).root.exprs[0]
    assert neg == Call("neg", (Lit(INT_MIN, SqlType.INT),), SqlType.INT)
    with pytest.raises(TypeMismatchError, match="9223372036854775808 is out of the INT range"):
        parse("INSERT INTO t VALUES (9223372036854775808, 1, 'x', 1.0)", cat)
    assert query("SELECT 9223372036854775808.0 FROM t", cat).root.exprs[0].type is SqlType.FLOAT


@pytest.mark.parametrize("sql", [
    "SELECT " + "+".join(["a"] * 3000) + " FROM t",              # a chain: one frame a term
    "SELECT " + "(" * 500 + "a" + ")" * 500 + " FROM t",          # sqlglot's parser recurses
    "SELECT " + "ABS(" * 500 + "a" + ")" * 500 + " FROM t",
    "SELECT a FROM t WHERE " + "NOT " * 3000 + "a = 1",
    "SELECT " + "- " * 3000 + "a FROM t",
    "SELECT " + "CASE WHEN a = 1 THEN " * 300 + "a" + " END" * 300 + " FROM t",
    "SELECT a FROM " + "(SELECT a FROM " * 200 + "t" + ") AS s" * 200,
    "SELECT a FROM t WHERE a IN (SELECT " + "+".join(["b"] * 3000) + " FROM t)",
])
def test_statements_nested_too_deeply_are_unsupported_not_a_crash(cat, sql):
    with pytest.raises(UnsupportedError, match="nests"):
        parse(sql, cat)


def test_deepest_accepted_statements_parse(cat):
    parse("SELECT " + "+".join(["a"] * (MAX_DEPTH - 5)) + " FROM t", cat)
    parse("SELECT " + "(" * 30 + "a" + ")" * 30 + " FROM t", cat)


def test_long_and_or_chains_count_as_one_level(cat):
    where = " AND ".join(f"(a = {i} OR b = {i})" for i in range(3000))
    q = query(f"SELECT a FROM t WHERE {where}", cat)
    assert len(q.root.input.predicate.args) == 3000


def test_views_over_views_deeper_than_the_limit_are_unsupported(cat):
    add_view(cat, "CREATE VIEW v0 AS SELECT a + 1 AS x FROM t")
    last = MAX_DEPTH - 2            # v0 is two relations deep (a Project of a Scan)
    for i in range(1, last + 1):
        add_view(cat, f"CREATE VIEW v{i} AS SELECT x + 1 AS x FROM v{i - 1}")
    with pytest.raises(UnsupportedError, match=f"plan nests {MAX_DEPTH + 1} relations deep"):
        parse(f"CREATE VIEW deeper AS SELECT x + 1 AS x FROM v{last}", cat)
    with pytest.raises(UnsupportedError, match="plan nests"):
        parse(f"SELECT x FROM v{last} WHERE x > 0", cat)


@pytest.mark.parametrize("sql", [None, b"SELECT 1", 7, ["SELECT 1"]])
def test_sql_that_is_not_a_str_is_a_parse_error(cat, sql):
    with pytest.raises(ParseError, match="SQL must be a str"):
        parse(sql, cat)
    with pytest.raises(ParseError, match="SQL must be a str"):
        split_statements(sql)


def test_a_lone_surrogate_anywhere_in_the_text_is_a_parse_error(cat):
    with pytest.raises(ParseError, match="lone surrogate") as ei:
        parse("SELECT a FROM t -- \udfff", cat)
    assert ei.value.position == (1, 20)
    with pytest.raises(ParseError, match="lone surrogate"):
        split_statements("SELECT '\ud83d'; SELECT 1")
    assert parse("SELECT '\U0001f600' FROM t", cat)      # a whole pair is a character
