import pytest

from sql_frontend import (
    Call,
    Col,
    Filter,
    Join,
    Lit,
    Project,
    Scan,
    SqlType,
    TopK,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
    parse,
)

from .helpers import add_view, find, query

I, T, B = SqlType.INT, SqlType.TEXT, SqlType.BOOL  # noqa: E741


def test_inner_join_on_keys(cat):
    q = query("SELECT t.a, u.y FROM t JOIN u ON t.a = u.x", cat)
    (j,) = find(q.root, Join)
    assert (j.kind, j.left_keys, j.right_keys) == ("inner", (0,), (0,))
    assert isinstance(j.left, Scan) and j.left.table == "t"
    assert isinstance(j.right, Scan) and j.right.table == "u"
    assert q.root.exprs == (Col(0, I, "a"), Col(5, T, "y"))
    assert len(j.columns) == 7


def test_join_keys_either_way_round_and_several(cat):
    q = query("SELECT * FROM t INNER JOIN w ON w.q = t.b AND t.a = w.p", cat)
    (j,) = find(q.root, Join)
    assert (j.left_keys, j.right_keys) == ((1, 0), (1, 0))
    assert q.names == ("a", "b", "c", "d", "p", "q", "r")


def test_inner_join_other_conditions_are_filters(cat):
    q = query("SELECT t.a FROM t JOIN w ON t.a = w.p AND t.b < w.q AND w.q > 3", cat)
    (j,) = find(q.root, Join)
    # the right-only condition filters the right input, the cross one sits above the join
    assert isinstance(j.right, Filter)
    assert j.right.predicate == Call("gt", (Col(1, I, "q"), Lit(3, I)), B)
    above = q.root.input
    assert isinstance(above, Filter)
    assert above.predicate == Call("lt", (Col(1, I, "b"), Col(5, I, "q")), B)


def test_comma_join_takes_keys_from_where(cat):
    q = query("SELECT t.a FROM t, u WHERE t.a = u.x AND t.c = 'k' AND u.y <> t.c", cat)
    (j,) = find(q.root, Join)
    assert (j.kind, j.left_keys, j.right_keys) == ("inner", (0,), (0,))
    assert isinstance(j.left, Filter)          # t.c = 'k' pushed to t
    assert j.left.predicate == Call("eq", (Col(2, T, "c"), Lit("k", T)), B)
    assert isinstance(q.root.input, Filter)    # u.y <> t.c stays above the join
    assert q.root.input.predicate.op == "ne"


def test_cross_join(cat):
    for sql in ("SELECT * FROM t CROSS JOIN w", "SELECT * FROM t, w",
                "SELECT * FROM t JOIN w ON t.b < w.q"):
        q = query(sql, cat)
        (j,) = find(q.root, Join)
        assert (j.left_keys, j.right_keys) == ((), ())


def test_three_tables(cat):
    q = query("SELECT article.title, vote.user_id, u.y FROM article "
              "JOIN vote ON article.id = vote.article_id "
              "JOIN u ON u.x = vote.user_id WHERE article.id > 2", cat)
    top, inner = find(q.root, Join)
    assert inner.left_keys == (0,) and inner.right_keys == (0,)
    assert isinstance(inner.left, Filter)      # article.id > 2 pushed to article
    assert top.left is inner and top.left_keys == (3,) and top.right_keys == (0,)
    assert q.root.exprs == (Col(1, T, "title"), Col(3, I, "user_id"), Col(5, T, "y"))


def test_three_tables_comma(cat):
    q = query("SELECT t.a FROM t, u, w WHERE w.p = u.x AND t.b = w.q", cat)
    top, inner = find(q.root, Join)
    # nothing relates t and u, so w joins second (t.b = w.q), then u (w.p = u.x)
    assert (inner.left_keys, inner.right_keys) == ((1,), (1,))
    assert (top.left_keys, top.right_keys) == ((4,), (0,))
    assert q.root.exprs == (Col(0, I, "a"),)       # columns back in FROM order below


def test_left_join(cat):
    q = query("SELECT t.a, u.y FROM t LEFT JOIN u ON t.a = u.x AND u.y = 'k'", cat)
    (j,) = find(q.root, Join)
    assert j.kind == "left" and j.left_keys == (0,) and j.right_keys == (0,)
    assert isinstance(j.right, Filter)
    assert j.right.predicate == Call("eq", (Col(1, T, "y"), Lit("k", T)), B)
    assert all(c.nullable for c in j.columns[4:])
    assert q.root.columns[1].nullable


def test_left_join_where_on_right_side_stays_above(cat):
    q = query("SELECT t.a FROM t LEFT JOIN u ON t.a = u.x WHERE u.y IS NULL AND t.b = 1",
              cat)
    (j,) = find(q.root, Join)
    assert isinstance(j.left, Filter)          # t.b = 1 may go below a left join's left side
    assert isinstance(j.right, Scan)           # u.y IS NULL must not go below
    assert isinstance(q.root.input, Filter)
    assert q.root.input.predicate.op == "is_null"


def test_left_join_non_equi_is_unsupported(cat):
    with pytest.raises(UnsupportedError, match="LEFT JOIN condition t.b < u.x"):
        parse("SELECT t.a FROM t LEFT JOIN u ON t.a = u.x AND t.b < u.x", cat)
    with pytest.raises(UnsupportedError, match="LEFT JOIN condition"):
        parse("SELECT t.a FROM t LEFT JOIN u ON t.b = 1", cat)


def test_right_full_using_natural_unsupported(cat):
    for sql, what in [("SELECT * FROM t RIGHT JOIN u ON t.a = u.x", "RIGHT JOIN"),
                      ("SELECT * FROM t FULL OUTER JOIN u ON t.a = u.x", "FULL JOIN"),
                      ("SELECT * FROM t JOIN u USING (a)", "USING"),
                      ("SELECT * FROM t NATURAL JOIN u", "NATURAL")]:
        with pytest.raises(UnsupportedError, match=what):
            parse(sql, cat)


def test_computed_join_key_gets_a_column(cat):
    q = query("SELECT t.a FROM t JOIN w ON t.a + 1 = w.p", cat)
    (j,) = find(q.root, Join)
    assert isinstance(j.left, Project)
    assert j.left.exprs[-1] == Call("add", (Col(0, I, "a"), Lit(1, I)), I)
    assert j.left_keys == (4,) and j.right_keys == (0,)
    trim = q.root.input                         # the extra key column is dropped again
    assert isinstance(trim, Project) and len(trim.columns) == 7


def test_subquery_in_from(cat):
    q = query("SELECT s.total FROM (SELECT b, SUM(a) AS total FROM t GROUP BY b) AS s "
              "WHERE s.b = 1", cat)
    assert q.names == ("total",)
    f = q.root.input
    assert isinstance(f, Filter) and f.predicate == Call("eq", (Col(0, I, "b"), Lit(1, I)), B)
    q = query("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3) sub", cat)
    assert find(q.root, TopK)


def test_parenthesized_join(cat):
    q = query("SELECT * FROM ( t AS c0 CROSS JOIN w c1 )", cat)
    assert len(find(q.root, Join)) == 1
    q = query("SELECT * FROM u JOIN (t JOIN w ON t.a = w.p) ON u.x = t.b", cat)
    assert len(find(q.root, Join)) == 2


def test_view_in_from(cat):
    add_view(cat, "CREATE VIEW vc AS SELECT article_id, COUNT(*) AS votes FROM vote "
                  "WHERE article_id = ? GROUP BY article_id")
    add_view(cat, "CREATE VIEW hid AS SELECT user_id FROM vote WHERE article_id = ?")
    q = query("SELECT a.title, v.votes FROM article a LEFT JOIN vc v ON a.id = v.article_id",
              cat)
    (j,) = find(q.root, Join)
    assert j.right.columns[1].name == "votes"
    # a view with hidden columns is wrapped in a Project dropping them
    q = query("SELECT * FROM hid", cat)
    assert q.names == ("user_id",)
    inner = q.root.input
    assert isinstance(inner, Project) and len(inner.columns) == 1
    assert len(inner.input.columns) == 2


def test_unknown_table(cat):
    with pytest.raises(UnknownTableError, match="no such table or view: nope") as ei:
        parse("SELECT * FROM t JOIN nope ON t.a = nope.x", cat)
    assert ei.value.position == (1, 22)
    with pytest.raises(UnknownTableError, match="no such table in FROM: zz"):
        parse("SELECT zz.* FROM t", cat)


def test_qualified_star_and_alias(cat):
    q = query("SELECT x.*, u.y FROM t AS x JOIN u ON x.a = u.x", cat)
    assert q.names == ("a", "b", "c", "d", "y")
    with pytest.raises(UnknownColumnError):
        parse("SELECT t.a FROM t AS x", cat)   # the alias hides the table name
