import pytest

from sql_frontend import (
    AlreadyExistsError,
    CreateTable,
    CreateView,
    DropTable,
    DropView,
    ParseError,
    SqlType,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
    parse,
    split_statements,
)
from sql_frontend.catalog import DictCatalog


def test_create_table_types():
    st = parse("CREATE TABLE T1 (a INT, b INTEGER, c BIGINT, d SMALLINT, e TINYINT, f FLOAT, "
               "g DOUBLE, h REAL, i DECIMAL(10,2), j NUMERIC, k TEXT, l VARCHAR(20), "
               "m CHAR(3), n BOOL, o BOOLEAN, p DATE, q TIMESTAMP)", DictCatalog())
    assert isinstance(st, CreateTable)
    assert st.schema.name == "t1"
    types = [c.type for c in st.schema.columns]
    assert types == [SqlType.INT] * 5 + [SqlType.FLOAT] * 5 + [SqlType.TEXT] * 3 + \
        [SqlType.BOOL] * 2 + [SqlType.DATE, SqlType.TIMESTAMP]
    assert all(c.nullable for c in st.schema.columns)
    assert st.schema.primary_key == ()


def test_create_table_keeps_declared_column_case():
    st = parse("CREATE TABLE t (MyCol INT)", DictCatalog())
    assert st.schema.columns[0].name == "MyCol"
    assert st.schema.index_of("mycol") == 0


def test_primary_key_column_and_table_level():
    st = parse("CREATE TABLE t (a INT PRIMARY KEY, b TEXT NOT NULL, c INT)", DictCatalog())
    assert st.schema.primary_key == (0,)
    assert [c.nullable for c in st.schema.columns] == [False, False, True]
    st = parse("CREATE TABLE t (a INT, b INT, c INT NULL, PRIMARY KEY (b, a))", DictCatalog())
    assert st.schema.primary_key == (1, 0)
    assert [c.nullable for c in st.schema.columns] == [False, False, True]


def test_if_not_exists(cat):
    st = parse("CREATE TABLE IF NOT EXISTS t (a INT)", cat)
    assert st.if_not_exists
    with pytest.raises(AlreadyExistsError, match="(?i)table t already exists") as ei:
        parse("CREATE TABLE T (a INT)", cat)
    assert ei.value.position == (1, 14)


def test_unsupported_constraints_are_named():
    for sql, what in [("CREATE TABLE t (a INT UNIQUE)", "UNIQUE"),
                      ("CREATE TABLE t (a INT DEFAULT 3)", "DEFAULT"),
                      ("CREATE TABLE t (a INT CHECK (a > 0))", "CHECK"),
                      ("CREATE TABLE t (a BLOB)", "BLOB"),
                      ("CREATE TABLE t AS SELECT 1", "AS SELECT")]:
        with pytest.raises(UnsupportedError, match=what):
            parse(sql, DictCatalog())


def test_foreign_key_is_accepted():
    st = parse("CREATE TABLE t (a INT REFERENCES u(x))", DictCatalog())
    assert st.schema.columns[0].name == "a"


def test_duplicate_and_unknown_pk_columns():
    with pytest.raises(AlreadyExistsError, match="(?i)duplicate column name: a"):
        parse("CREATE TABLE t (a INT, A TEXT)", DictCatalog())
    with pytest.raises(UnknownColumnError, match="PRIMARY KEY names unknown column z"):
        parse("CREATE TABLE t (a INT, PRIMARY KEY (z))", DictCatalog())


def test_create_view(cat):
    st = parse("CREATE VIEW V1 AS SELECT a, b FROM t;", cat)
    assert isinstance(st, CreateView)
    assert st.name == "v1"
    assert st.query.names == ("a", "b")
    assert st.sql == "CREATE VIEW V1 AS SELECT a, b FROM t"


def test_create_view_name_taken(cat):
    with pytest.raises(AlreadyExistsError, match="table t already exists"):
        parse("CREATE VIEW t AS SELECT a FROM t", cat)
    cat.views["v"] = parse("CREATE VIEW v AS SELECT a FROM t", cat).query
    with pytest.raises(AlreadyExistsError, match="view v already exists"):
        parse("CREATE VIEW v AS SELECT a FROM t", cat)
    with pytest.raises(AlreadyExistsError, match="view v already exists"):
        parse("CREATE TABLE v (a INT)", cat)


def test_drop(cat):
    assert parse("DROP TABLE T", cat) == DropTable("t", False)
    assert parse("DROP TABLE IF EXISTS nope", cat) == DropTable("nope", True)
    cat.views["v"] = parse("CREATE VIEW v AS SELECT a FROM t", cat).query
    assert parse("DROP VIEW v", cat) == DropView("v", False)
    assert parse("DROP VIEW IF EXISTS zz", cat) == DropView("zz", True)
    with pytest.raises(UnknownTableError, match="no such table: nope") as ei:
        parse("DROP TABLE nope", cat)
    assert ei.value.position == (1, 12)
    with pytest.raises(UnknownTableError, match="it is a view"):
        parse("DROP TABLE v", cat)
    with pytest.raises(UnknownTableError, match="no such view: t .it is a table"):
        parse("DROP VIEW t", cat)


def test_other_statements_unsupported(cat):
    for sql in ("CREATE UNIQUE INDEX i ON t(a)", "PRAGMA foo", "ALTER TABLE t ADD COLUMN e INT"):
        with pytest.raises(UnsupportedError):
            parse(sql, cat)


def test_one_statement_only(cat):
    parse("SELECT a FROM t;", cat)
    with pytest.raises(ParseError, match="more than one statement"):
        parse("SELECT a FROM t; SELECT b FROM t", cat)
    with pytest.raises(ParseError, match="no SQL statement"):
        parse("  ; ", cat)


def test_split_statements():
    script = "CREATE TABLE t (a TEXT);\nINSERT INTO t VALUES ('x;y');\n-- c;\n SELECT 1 ;"
    assert split_statements(script) == [
        "CREATE TABLE t (a TEXT)", "INSERT INTO t VALUES ('x;y')", "-- c;\n SELECT 1"]
    assert split_statements("") == []
