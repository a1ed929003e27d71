import pytest

from sql_frontend import (
    AggCall,
    Aggregate,
    ArityError,
    Call,
    Col,
    Distinct,
    Filter,
    Lit,
    OrderKey,
    Project,
    Scan,
    SqlError,
    SqlType,
    TopK,
    TypeMismatchError,
    Union_,
    UnsupportedError,
    parse,
)

from .helpers import add_view, find, query

I, T, F, B = SqlType.INT, SqlType.TEXT, SqlType.FLOAT, SqlType.BOOL  # noqa: E741


# ---------------------------------------------------------------- aggregates

def test_group_by_with_every_aggregate(cat):
    q = query("SELECT b, COUNT(*), COUNT(c), COUNT(DISTINCT c), SUM(a), AVG(a), MIN(c), "
              "MAX(d), SUM(d) FROM t GROUP BY b", cat)
    (agg,) = find(q.root, Aggregate)
    assert isinstance(agg.input, Scan)
    assert agg.group_by == (1,)
    assert agg.aggs == (
        AggCall("count_star", None, False, I), AggCall("count", 2, False, I),
        AggCall("count", 2, True, I), AggCall("sum", 0, False, I),
        AggCall("avg", 0, False, F), AggCall("min", 2, False, T),
        AggCall("max", 3, False, F), AggCall("sum", 3, False, F))
    assert q.root.exprs == tuple(Col(i, c.type, c.name) for i, c in enumerate(agg.columns))


def test_global_aggregate(cat):
    q = query("SELECT COUNT(*) FROM t", cat)
    (agg,) = find(q.root, Aggregate)
    assert agg.group_by == ()
    assert not q.root.columns[0].nullable


def test_aggregates_inside_expressions_having_order(cat):
    q = query("SELECT b, SUM(a) + 1 AS s1 FROM t GROUP BY b HAVING COUNT(*) > 1 "
              "ORDER BY MAX(a) DESC", cat)
    (agg,) = find(q.root, Aggregate)
    assert [x.func for x in agg.aggs] == ["sum", "count_star", "max"]
    having = q.root.input
    assert isinstance(having, Filter)
    assert having.predicate == Call("gt", (Col(2, I, "COUNT(*)"), Lit(1, I)), B)
    assert q.root.exprs[1] == Call("add", (Col(1, I, "SUM(a)"), Lit(1, I)), I)
    assert q.root.exprs[2] == Col(3, I, "MAX(a)")           # hidden ORDER BY column
    assert q.hidden == 1 and q.order == (OrderKey(2, True, False),)


def test_group_by_expression_and_aggregate_argument_expression(cat):
    q = query("SELECT a % 3, SUM(b * 2) FROM t GROUP BY a % 3", cat)
    (agg,) = find(q.root, Aggregate)
    pre = agg.input
    assert isinstance(pre, Project)
    assert pre.exprs == (Call("mod", (Col(0, I, "a"), Lit(3, I)), I),
                         Call("mul", (Col(1, I, "b"), Lit(2, I)), I))
    assert agg.group_by == (0,) and agg.aggs[0].arg == 1
    assert q.names == ("a % 3", "SUM(b * 2)")


def test_group_by_position_and_alias(cat):
    for sql in ("SELECT b + 1 AS k, COUNT(*) FROM t GROUP BY 1",
                "SELECT b + 1 AS k, COUNT(*) FROM t GROUP BY k"):
        (agg,) = find(query(sql, cat).root, Aggregate)
        assert agg.input.exprs == (Call("add", (Col(1, I, "b"), Lit(1, I)), I),)


def test_ungrouped_column_is_an_error(cat):
    with pytest.raises(SqlError, match="column c must appear in GROUP BY") as ei:
        parse("SELECT b, c FROM t GROUP BY b", cat)
    assert ei.value.position == (1, 11)
    with pytest.raises(SqlError, match="not allowed in WHERE"):
        parse("SELECT a FROM t WHERE COUNT(*) > 1", cat)
    with pytest.raises(SqlError, match="HAVING without GROUP BY"):
        parse("SELECT a FROM t HAVING a > 1", cat)


def test_min_max_distinct_is_plain(cat):
    (agg,) = find(query("SELECT MIN(DISTINCT a), SUM(DISTINCT a) FROM t", cat).root,
                  Aggregate)
    assert agg.aggs[0].distinct is False and agg.aggs[1].distinct is True


# ---------------------------------------------------------------- distinct, union

def test_distinct(cat):
    q = query("SELECT DISTINCT b, c FROM t", cat)
    assert isinstance(q.root, Distinct) and isinstance(q.root.input, Project)


def test_union_and_union_all(cat):
    q = query("SELECT a, c FROM t UNION ALL SELECT x, y FROM u UNION ALL SELECT p, 'k' FROM w",
              cat)
    assert isinstance(q.root, Union_) and len(q.root.inputs) == 3
    assert q.names == ("a", "c")
    q = query("SELECT a FROM t UNION SELECT x FROM u UNION SELECT p FROM w", cat)
    assert isinstance(q.root, Distinct) and len(q.root.input.inputs) == 3
    q = query("SELECT a FROM t UNION SELECT x FROM u UNION ALL SELECT p FROM w", cat)
    assert isinstance(q.root, Union_)
    assert isinstance(q.root.inputs[0], Distinct)


def test_union_types_and_arity(cat):
    q = query("SELECT a FROM t UNION SELECT d FROM t", cat)
    assert q.root.columns[0].type == F
    with pytest.raises(SqlError, match="different numbers of columns"):
        parse("SELECT a, b FROM t UNION SELECT x FROM u", cat)
    with pytest.raises(TypeMismatchError, match="mixes"):
        parse("SELECT a FROM t UNION SELECT y FROM u", cat)


def test_union_order_limit(cat):
    q = query("SELECT a FROM t UNION SELECT x FROM u ORDER BY a DESC LIMIT 5", cat)
    assert isinstance(q.root, TopK) and q.root.limit == 5 and q.root.partition == ()
    assert q.order == (OrderKey(0, True, False),)
    with pytest.raises(UnsupportedError, match="on a compound SELECT"):
        parse("SELECT a FROM t UNION SELECT x FROM u ORDER BY a + 1", cat)
    with pytest.raises(UnsupportedError, match="INTERSECT ALL"):
        parse("SELECT a FROM t INTERSECT ALL SELECT x FROM u", cat)


# ---------------------------------------------------------------- order, limit

def test_order_by_without_limit_only_sets_order(cat):
    q = query("SELECT a, b AS bee FROM t ORDER BY bee DESC, 1, a + b", cat)
    assert isinstance(q.root, Project)
    assert q.order == (OrderKey(1, True, False), OrderKey(0, False, True),
                       OrderKey(2, False, True))
    assert q.hidden == 1 and q.names == ("a", "bee")
    assert q.root.exprs[2] == Call("add", (Col(0, I, "a"), Col(1, I, "b")), I)


def test_order_by_nulls(cat):
    q = query("SELECT a FROM t ORDER BY a DESC NULLS FIRST, b NULLS LAST", cat)
    assert q.order[0] == OrderKey(0, True, True)
    assert q.order[1] == OrderKey(1, False, False)


def test_limit_offset_topk(cat):
    q = query("SELECT a FROM t ORDER BY b LIMIT 10 OFFSET 5", cat)
    assert isinstance(q.root, TopK)
    assert (q.root.limit, q.root.offset, q.root.partition) == (10, 5, ())
    assert q.root.order == (OrderKey(1, False, True),) and q.hidden == 1
    q = query("SELECT a FROM t LIMIT 3", cat)
    assert q.root.order == () and q.root.limit == 3


def test_order_errors(cat):
    with pytest.raises(SqlError, match="ORDER BY term out of range: 3"):
        parse("SELECT a, b FROM t ORDER BY 3", cat)
    with pytest.raises(UnsupportedError, match="SELECT DISTINCT"):
        parse("SELECT DISTINCT a FROM t ORDER BY b", cat)
    with pytest.raises(UnsupportedError, match="LIMIT that is not an integer"):
        parse("SELECT a FROM t LIMIT a", cat)


# ---------------------------------------------------------------- lookup keys

def test_key_from_where(cat):
    st = parse("SELECT a, b FROM t WHERE b = ? AND c = 'x'", cat, (4,))
    q = st.query
    assert st.params == (4,)
    assert q.key == (1,) and q.hidden == 0
    f = q.root.input
    assert isinstance(f, Filter)            # only c = 'x' remains a filter
    assert f.predicate == Call("eq", (Col(2, T, "c"), Lit("x", T)), B)


def test_hidden_key_column_and_key_order(cat):
    q = query("SELECT c FROM t WHERE ? = b AND a = ?", cat, (1, 2))
    assert q.names == ("c",)
    assert q.hidden == 2 and q.key == (1, 2)
    assert q.root.exprs == (Col(2, T, "c"), Col(1, I, "b"), Col(0, I, "a"))
    assert isinstance(q.root.input, Scan)


def test_key_extends_group_by(cat):
    q = query("SELECT COUNT(*) AS n FROM vote WHERE article_id = ?", cat, (1,))
    (agg,) = find(q.root, Aggregate)
    assert agg.group_by == (0,)
    assert q.names == ("n",) and q.hidden == 1 and q.key == (1,)
    q = query("SELECT article_id, COUNT(*) AS votes FROM vote WHERE article_id = ? "
              "GROUP BY article_id", cat, (1,))
    (agg,) = find(q.root, Aggregate)
    assert agg.group_by == (0,) and q.key == (0,) and q.hidden == 0


def test_key_partitions_topk(cat):
    q = query("SELECT user_id FROM vote WHERE article_id = ? ORDER BY user_id DESC LIMIT 3",
              cat, (1,))
    assert isinstance(q.root, TopK)
    assert q.root.partition == q.key == (1,)


def test_key_through_join_and_view(cat):
    add_view(cat, "CREATE VIEW awv AS SELECT article.id, article.title, vc.votes "
                  "FROM article LEFT JOIN (SELECT article_id, COUNT(*) AS votes FROM vote "
                  "GROUP BY article_id) AS vc ON article.id = vc.article_id "
                  "WHERE article.id = ?")
    q = cat.views["awv"]
    assert q.key == (0,) and q.names == ("id", "title", "votes")
    q = query("SELECT * FROM awv WHERE id = ?", cat, (3,))
    assert q.key == (0,)


def test_key_with_distinct(cat):
    q = query("SELECT DISTINCT b FROM t WHERE a = ?", cat, (1,))
    assert isinstance(q.root, Distinct) and q.hidden == 1


def test_key_param_count_and_misplaced_params(cat):
    with pytest.raises(ArityError, match="1 parameters"):
        parse("SELECT a FROM t WHERE b = ?", cat, ())
    with pytest.raises(ArityError):
        parse("SELECT a FROM t", cat, (1,))
    st = parse("CREATE VIEW v AS SELECT a FROM t WHERE b = ?", cat)
    assert st.query.key == (1,)
    misplaced = ("SELECT a FROM (SELECT a, b FROM t WHERE b = ?) s",
                 "SELECT a FROM t WHERE b = ? UNION SELECT x FROM u",
                 "SELECT a FROM t WHERE b + 1 > ?", "SELECT ? FROM t")
    for sql in misplaced:           # a view's ? must be keys
        with pytest.raises(UnsupportedError) as ei:
            parse(f"CREATE VIEW v AS {sql}", cat)
        assert ei.value.position is not None, sql
    for sql in misplaced:           # a SELECT's others are values
        st = parse(sql, cat, (1,))
        assert st.params == () and st.query.key == ()
    with pytest.raises(UnsupportedError) as ei:
        parse("SELECT a FROM t LIMIT ?", cat, (1,))
    assert ei.value.position is not None


def test_with_is_unsupported(cat):
    with pytest.raises(UnsupportedError, match="WITH"):
        parse("WITH x AS (SELECT a FROM t) SELECT a FROM x", cat)
