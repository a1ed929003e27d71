"""Logical plans survive to_data -> msgpack -> from_data equal and with equal hashes."""
import datetime

import pytest

from noria_py.storage.codec import packb, unpackb
from sql_frontend import (
    AggCall,
    Col,
    ColumnInfo,
    CreateView,
    Lit,
    Query,
    Scan,
    SqlType,
    TableSchema,
    parse,
)
from sql_frontend.wire import from_data, to_data

from .helpers import add_view

CORPUS = [
    "SELECT a, b FROM t",
    "SELECT * FROM t WHERE a > 3 AND c LIKE 'x%' OR d IS NULL",
    "SELECT a + b * 2, -d, b / 3, a % 2, c || 'z', LOWER(c), LENGTH(c) FROM t",
    "SELECT CAST(b AS FLOAT), COALESCE(c, 'none'), NULLIF(a, 0), ABS(d) FROM t",
    "SELECT CASE WHEN a > 1 THEN 'big' WHEN a IS NULL THEN NULL ELSE 'small' END FROM t",
    "SELECT CASE a WHEN 1 THEN 10 WHEN 2 THEN 20 ELSE 0 END FROM t",
    "SELECT a FROM t WHERE b IN (1, 2, 3) AND a NOT IN (4, 5)",
    "SELECT x, y FROM u WHERE z = DATE '2024-02-29' OR z > DATE '1999-12-31'",
    "SELECT p FROM w WHERE r < TIMESTAMP '2024-01-02 03:04:05.678901'",
    "SELECT a FROM t WHERE d = 1.5 AND c = 'it''s' AND b <> -9223372036854775808",
    "SELECT a FROM t WHERE c IS NOT NULL AND NOT (b = 2)",
    "SELECT t.a, u.y FROM t JOIN u ON t.a = u.x",
    "SELECT t.a, u.y FROM t LEFT JOIN u ON t.a = u.x AND t.b = u.x",
    "SELECT t.a, u.y FROM t, u",
    "SELECT t.a, t2.b FROM t JOIN t AS t2 ON t.a = t2.b",
    ("SELECT article.title, COUNT(*) AS votes FROM article JOIN vote "
     "ON article.id = vote.article_id GROUP BY article.title"),
    "SELECT b, COUNT(*), COUNT(c), SUM(a), AVG(d), MIN(c), MAX(d) FROM t GROUP BY b",
    "SELECT b, COUNT(DISTINCT a), SUM(DISTINCT a) FROM t GROUP BY b HAVING COUNT(*) > 1",
    "SELECT COUNT(*) FROM t",
    "SELECT DISTINCT b, c FROM t",
    "SELECT a, b FROM t ORDER BY b DESC, a LIMIT 10",
    "SELECT a, b FROM t ORDER BY b LIMIT 5 OFFSET 2",
    "SELECT a FROM t ORDER BY a DESC",
    "SELECT a FROM t UNION SELECT x FROM u",
    "SELECT a FROM t UNION ALL SELECT x FROM u UNION ALL SELECT p FROM w",
    "SELECT a FROM t EXCEPT SELECT x FROM u",
    "SELECT a, b FROM t INTERSECT SELECT x, x FROM u",
    "SELECT a FROM t WHERE a IN (SELECT x FROM u)",
    "SELECT a FROM t WHERE a NOT IN (SELECT x FROM u WHERE y > 'm')",
    "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.x = t.a)",
    "SELECT a, (SELECT COUNT(*) FROM u WHERE u.x < t.b) FROM t",
    "SELECT a FROM t WHERE b > (SELECT AVG(x) FROM u)",
    "SELECT a, c FROM t WHERE b = ?",
    "SELECT a, c FROM t WHERE b = ? AND c = ?",
    "SELECT b, COUNT(*) FROM t WHERE b = ? GROUP BY b",
    "SELECT a, b FROM t WHERE c = ? ORDER BY b DESC LIMIT 3",
    "SELECT 1, 'x', NULL, TRUE, FALSE, 2.5",
    "SELECT a FROM t WHERE (b > 1) = TRUE",
]


@pytest.mark.parametrize("sql", CORPUS)
def test_query_round_trip(cat, sql):
    view = add_view(cat, f"CREATE VIEW v AS {sql}")
    assert isinstance(view, CreateView)
    for value in (view, view.query):
        back = from_data(unpackb(packb(to_data(value))))
        assert back == value
        assert hash(back) == hash(value)
        assert type(back) is type(value)


def test_queries_over_views_and_select_params(cat):
    add_view(cat, "CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote "
                  "GROUP BY article_id")
    st = parse("SELECT article.title, votes.n FROM article JOIN votes "
               "ON article.id = votes.article_id WHERE article.id = ?", cat, (7,))
    back = from_data(unpackb(packb(to_data(st))))
    assert back == st and hash(back) == hash(st)
    assert back.params == (7,)


def test_table_schemas_round_trip(cat):
    for schema in cat.tables.values():
        back = from_data(unpackb(packb(to_data(schema))))
        assert back == schema and hash(back) == hash(schema)
        assert isinstance(back, TableSchema) and isinstance(back.columns, tuple)


def test_literal_values_keep_their_types():
    values = [None, True, False, 0, -1, 2**63 - 1, -2**63, 1.0, -0.5, "", "é",
              b"\x00raw", datetime.date(1, 1, 1), datetime.datetime(2024, 2, 29, 23, 59, 59, 1),
              datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=-5)))]
    for v in values:
        lit = Lit(v, SqlType.NULL)
        back = from_data(unpackb(packb(to_data(lit))))
        assert back == lit and type(back.value) is type(v)
    assert to_data(SqlType.INT) == {"$e": "SqlType", "v": "INT"}
    assert from_data(to_data(AggCall("count", 0, False, SqlType.INT))).type is SqlType.INT


def test_tuples_stay_tuples_and_nested():
    q = Query(Scan("t", (ColumnInfo("a", SqlType.INT),)), ("a",), key=(0,))
    data = to_data(q)
    assert data["$"] == "Query" and data["key"] == [0]
    back = from_data(data)                       # lists (not only msgpack tuples) decode
    assert back == q and isinstance(back.root.columns, tuple) and back.key == (0,)


def test_unknown_class_refused():
    data = to_data(Col(0, SqlType.INT))
    data["$"] = "Popen"
    with pytest.raises(ValueError, match="unknown plan class 'Popen'"):
        from_data(data)
    with pytest.raises(ValueError, match="unknown plan enum 'Signals'"):
        from_data({"$e": "Signals", "v": 9})
    with pytest.raises(ValueError, match="not a SqlType"):
        from_data({"$e": "SqlType", "v": "BLOB"})
    with pytest.raises(ValueError, match="no field"):
        from_data({"$": "Col", "index": 0, "type": {"$e": "SqlType", "v": "INT"}, "evil": 1})
    with pytest.raises(ValueError, match="tagged"):
        from_data({"index": 0})
    with pytest.raises(ValueError, match="bad Col"):
        from_data({"$": "Col"})


def test_unknown_values_refused_on_encode():
    with pytest.raises(ValueError, match="type list"):
        to_data(Lit([1, 2], SqlType.INT))
    with pytest.raises(ValueError, match="type object"):
        to_data(object())
