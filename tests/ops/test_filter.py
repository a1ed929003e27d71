"""WHERE / HAVING (noria_py/ops/filter.py)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Filter
from sql_frontend.types import SqlType as T

from .helpers import call, col, lit, ms


def test_keeps_rows_where_predicate_is_true():
    f = Filter(call("gt", col(0), lit(2)))
    out = f.process(0, Batch.inserts([(1,), (3,), (5,), (2,)]))
    assert list(out) == [((3,), 1), ((5,), 1)]


def test_null_predicate_drops_row():
    f = Filter(call("gt", col(0), lit(2)))
    out = f.process(0, Batch.inserts([(None,), (3,)]))
    assert out.rows == [(3,)]
    g = Filter(call("not", call("gt", col(0), lit(2))))
    assert g.process(0, Batch.inserts([(None,), (3,), (1,)])).rows == [(1,)]


def test_is_null_predicate_keeps_nulls():
    f = Filter(call("is_null", col(1)))
    out = f.process(0, Batch.inserts([(1, None), (2, "x"), (3, None)]))
    assert out.rows == [(1, None), (3, None)]


def test_deletions_and_multiplicities_pass_with_their_signs():
    f = Filter(call("eq", col(0), lit("a", T.TEXT)))
    b = Batch([("a", 1), ("b", 2), ("a", 3), ("a", 1), (None, 4)], [1, 1, -1, 3, -2])
    out = f.process(0, b)
    assert list(out) == [(("a", 1), 1), (("a", 3), -1), (("a", 1), 3)]


def test_three_valued_and_or_in_filter():
    # a > 0 OR b > 0 : kept when either is TRUE, even if the other is NULL
    f = Filter(call("or", call("gt", col(0), lit(0)), call("gt", col(1), lit(0))))
    rows = [(1, None), (None, 1), (None, None), (0, None), (0, 0)]
    assert f.process(0, Batch.inserts(rows)).rows == [(1, None), (None, 1)]
    g = Filter(call("and", call("gt", col(0), lit(0)), call("gt", col(1), lit(0))))
    assert g.process(0, Batch.inserts(rows + [(1, 1)])).rows == [(1, 1)]


def test_empty_batch_and_stateless():
    f = Filter(call("eq", col(0), lit(1)))
    assert not f.process(0, Batch())
    assert not f.stateful
    import pytest
    with pytest.raises(NotImplementedError):
        f.snapshot()


def test_batch_is_not_mutated():
    f = Filter(call("eq", col(0), lit(1)))
    b = Batch([(1,), (2,)], [1, -1])
    f.process(0, b)
    assert b.rows == [(1,), (2,)] and b.signs == [1, -1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.tuples(st.none() | st.integers(-3, 3)), st.integers(-2, 2).filter(bool)),
                max_size=20))
def test_filter_commutes_with_accumulation(entries):
    """Filtering the deltas and summing equals summing and then filtering."""
    f = Filter(call("ge", col(0), lit(0)))
    b = Batch([r for r, _ in entries], [s for _, s in entries])
    got = ms(f.process(0, b))
    want = {r: c for r, c in b.multiset().items() if r[0] is not None and r[0] >= 0}
    assert got == want
