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
