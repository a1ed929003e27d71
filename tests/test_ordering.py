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
