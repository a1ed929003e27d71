"""Range parameters in the front end (sql_frontend/select.py, ``Query.bounds``): which
top-level conjuncts ``col < ?`` (and, lifted, ``col < constant``) become a read's
bounds, in which order the read's values come, and where they stay filters."""
from __future__ import annotations

import pytest

from noria_py.storage.codec import packb, unpackb
from sql_frontend import TypeMismatchError, UnsupportedError, parse
from sql_frontend.plan import Bound, Filter, Project
from sql_frontend.wire import from_data, to_data

from .helpers import add_view


def lifted(sql: str, cat, **kw):
    return parse(sql, cat, lift_constants=True, **kw)


def test_range_constants_are_lifted_with_keys_in_text_order(cat):
    st = lifted("SELECT a FROM t WHERE 5 <= b AND c = 'x' AND b < -3 ORDER BY d", cat)
    q = st.query
    assert st.params == (5, "x", -3)
    assert q.key == (1,) and q.names == ("a",)
    assert q.bounds == (Bound(2, ">=", 0), Bound(2, "<", 2))
    assert q.param_columns() == (2, 1, 2)
    assert q.root.columns[2].name == "b" and q.root.columns[1].name == "c"
    # the constants are not filters: one plan for every bound
    assert q == lifted("SELECT a FROM t WHERE 7 <= b AND c = 'y' AND b < 9 ORDER BY d", cat).query
    assert not isinstance(q.root, Filter) and isinstance(q.root, Project)
    between = lifted("SELECT a FROM t WHERE b BETWEEN 1 AND 9", cat)
    assert between.params == (1, 9)
    assert [(b.op, b.slot) for b in between.query.bounds] == [(">=", 0), ("<=", 1)]


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t WHERE b > 5",                   # an aggregate
    "SELECT b, COUNT(*) FROM t WHERE b > 5 GROUP BY b",
    "SELECT DISTINCT a FROM t WHERE b > 5",
    "SELECT a FROM t WHERE b > 5 ORDER BY a LIMIT 3",
    "SELECT a FROM t WHERE b > 5 UNION SELECT x FROM u",     # compound
    "SELECT a FROM t WHERE b > 5 OR c = 'x'",                # not top-level
    "SELECT a FROM t WHERE b + 1 > 5",                       # not a column
    "SELECT a FROM t WHERE b > 2.5",                         # INT would take a float
    "SELECT x FROM u WHERE z > '2026-01-01'",                # a DATE from text: converted
    "SELECT a FROM t WHERE NOT b BETWEEN 1 AND 2",
])
def test_where_a_range_constant_stays_a_filter(cat, sql):
    assert lifted(sql, cat).query.bounds == (), sql


def test_a_range_constant_that_cannot_be_lifted_leaves_the_key_lifted(cat):
    st = lifted("SELECT a FROM t WHERE c = 'x' AND b > 2.5", cat)
    assert st.params == ("x",) and st.query.key and st.query.bounds == ()


def test_a_constant_of_another_type_is_refused_as_the_filter_would(cat):
    with pytest.raises(TypeMismatchError, match="compare"):
        lifted("SELECT a FROM t WHERE c > 5", cat)


def test_only_one_column_is_ranged(cat):
    st = lifted("SELECT a FROM t WHERE b > 1 AND d < 2.5 AND b <= 7", cat)
    assert st.params == (1, 7)
    assert {b.column for b in st.query.bounds} == {st.query.root.columns.index(
        next(c for c in st.query.root.columns if c.name == "b"))}


def test_a_views_range_parameters_and_the_cluster_refusal(cat):
    view = add_view(cat, "CREATE VIEW v AS SELECT a FROM t WHERE b > ? AND c = ? AND b <= ?")
    assert [(b.op, b.slot) for b in view.query.bounds] == [(">", 0), ("<=", 2)]
    assert view.query.key and view.query.arity == 3
    back = from_data(unpackb(packb(to_data(view.query))))   # a cluster's plans travel
    assert back == view.query and hash(back) == hash(view.query)
    with pytest.raises(UnsupportedError, match="parameter"):
        parse("CREATE VIEW vv AS SELECT a FROM t WHERE b > ?", cat, ranges=False)
    st = lifted("SELECT a FROM t WHERE b > 5", cat, ranges=False)
    assert st.query.bounds == () and st.params == ()


def test_a_select_with_range_parameters_keeps_them_unbound(cat):
    st = parse("SELECT a FROM t WHERE b > ? AND c = ?", cat, (3, "x"))
    assert st.params == (3, "x") and st.query.arity == 2
    st = parse("SELECT a FROM t WHERE b > ? GROUP BY a", cat, (3,))
    assert st.params == () and st.query.bounds == ()              # bound: a filter


def test_division_as_postgresql_does_keeps_the_filter(cat):
    st = parse("SELECT a FROM t WHERE PG_DIV(b, d) > 0 AND b > 5", cat, lift_constants=True)
    assert st.query.bounds == ()
