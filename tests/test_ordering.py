"""Total orders over rows with NULLs (noria_py/ordering.py)."""
from __future__ import annotations

from noria_py.ordering import order_key, row_key
from sql_frontend.plan import OrderKey


def test_row_key_nulls_first_then_values():
    rows = [(2, None), (None, 5), (1, "b"), (1, None), (None, None)]
    assert sorted(rows, key=row_key) == [(None, None), (None, 5), (1, None), (1, "b"), (2, None)]


def test_order_key_ascending_and_descending_with_nulls():
    rows = [(3,), (None,), (1,), (2,)]
    assert sorted(rows, key=order_key([OrderKey(0)])) == [(None,), (1,), (2,), (3,)]
    assert sorted(rows, key=order_key([OrderKey(0, nulls_first=False)])) == [(1,), (2,), (3,), (None,)]
    assert sorted(rows, key=order_key([OrderKey(0, True, False)])) == [(3,), (2,), (1,), (None,)]
    assert sorted(rows, key=order_key([OrderKey(0, True, True)])) == [(None,), (3,), (2,), (1,)]


def test_order_key_descending_strings_and_tie_break():
    rows = [("b", 2), ("a", 1), ("b", 1), ("c", None), ("c", 0)]
    key = order_key([OrderKey(0, descending=True, nulls_first=False)])
    assert sorted(rows, key=key) == [("c", None), ("c", 0), ("b", 1), ("b", 2), ("a", 1)]


def test_equal_rows_have_equal_keys_and_different_rows_do_not():
    key = order_key([OrderKey(1, descending=True)])
    assert key((1, "x")) == key((1, "x"))
    assert key((1, "x")) != key((2, "x"))
    assert not (key((1, "x")) < key((1, "x")))
    assert hash(key((1, "x"))) == hash(key((1, "x")))


def test_no_order_is_whole_row_order():
    key = order_key([])
    assert sorted([(2,), (None,), (1,)], key=key) == [(None,), (1,), (2,)]


NAN, INF = float("nan"), float("inf")


def _shape(rows):
    """Rows with NaN spelled out, to compare orders (NaN != NaN)."""
    return [tuple("NaN" if v is not None and v != v else v for v in r) for r in rows]


def test_nan_sorts_above_every_number_ascending_and_first_descending():
    rows = [(1.0,), (NAN,), (None,), (INF,), (-INF,), (float("nan"),), (0.0,)]
    asc = sorted(rows, key=order_key([OrderKey(0)]))
    assert _shape(asc) == [(None,), (-INF,), (0.0,), (1.0,), (INF,), ("NaN",), ("NaN",)]
    asc_nulls_last = sorted(rows, key=order_key([OrderKey(0, nulls_first=False)]))
    assert _shape(asc_nulls_last)[-3:] == [("NaN",), ("NaN",), (None,)]
    desc = sorted(rows, key=order_key([OrderKey(0, True, False)]))
    assert _shape(desc) == [("NaN",), ("NaN",), (INF,), (1.0,), (0.0,), (-INF,), (None,)]
    desc_nulls_first = sorted(rows, key=order_key([OrderKey(0, True, True)]))
    assert _shape(desc_nulls_first)[:3] == [(None,), ("NaN",), ("NaN",)]


def test_nan_ties_break_on_the_rest_of_the_row():
    rows = [(NAN, 3), (NAN, 1), (2.0, 9), (NAN, 2)]
    got = sorted(rows, key=order_key([OrderKey(0)]))
    assert [r[1] for r in got] == [9, 1, 2, 3]
    assert _shape(sorted(rows, key=row_key)) == [(2.0, 9), ("NaN", 1), ("NaN", 2), ("NaN", 3)]


def _reference_cmp(order):
    """ORDER BY ``order`` spelled out as a comparison, one column at a time (NULLs by
    ``nulls_first``, NaN above every number, descending the other way round), ties by
    ``row_key``: what ``order_key`` must agree with."""
    import functools

    def rank(v, o):
        if v is None:
            return 0 if o.nulls_first else 4
        if v != v:
            return 1 if o.descending else 3
        return 2

    def cmp(a, b):
        for o in order:
            x, y = a[o.column], b[o.column]
            rx, ry = rank(x, o), rank(y, o)
            if rx != ry:
                return -1 if rx < ry else 1
            if rx == 2 and x != y:
                less = x < y
                return (1 if less else -1) if o.descending else (-1 if less else 1)
        ka, kb = row_key(a), row_key(b)
        return (ka > kb) - (ka < kb)
    return functools.cmp_to_key(cmp)


def test_order_key_agrees_with_a_plain_comparison():
    """Random rows of numbers (ints past 64 bits, -0.0, inf, NaN, bools), text and
    NULLs under random ORDER BY lists: ``order_key`` (descending numbers negated,
    other values wrapped) sorts them as the plain comparison does."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    number = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.booleans())
    rows = st.lists(st.tuples(st.one_of(st.none(), number), st.one_of(st.none(), st.text(max_size=2)),
                              st.one_of(st.none(), st.integers(-3, 3))), max_size=12)
    orders = st.lists(st.builds(OrderKey, st.integers(0, 2), st.booleans(), st.booleans()),
                      max_size=3)

    @settings(max_examples=100, deadline=None)
    @given(rows, orders)
    def check(rows, order):
        got = sorted(rows, key=order_key(order))
        want = sorted(rows, key=_reference_cmp(order))
        assert _shape(got) == _shape(want)

    check()
