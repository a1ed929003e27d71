"""The materialized end of a view (noria_py/ops/reader.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Reader
from sql_frontend.plan import OrderKey

from .helpers import dels, ins, ms


def test_lookup_by_single_key():
    r = Reader((0,), 2, 2)
    out = r.process(0, ins((1, "a"), (1, "b"), (2, "c")))
    assert not out                                  # a reader emits nothing
    assert sorted(r.lookup(1)) == [(1, "a"), (1, "b")]
    assert r.lookup(2) == [(2, "c")]
    assert r.lookup(3) == []


def test_deletes_and_empty_keys_vanish():
    r = Reader((0,), 2, 2)
    r.process(0, ins((1, "a"), (1, "b")))
    r.process(0, dels((1, "a")))
    assert r.lookup(1) == [(1, "b")]
    r.process(0, dels((1, "b")))
    assert r.lookup(1) == []
    assert len(r.state) == 0 and r.state.rows() == []
    assert not r.snapshot()


def test_duplicates_are_returned_as_often_as_present():
    r = Reader((0,), 2, 2)
    r.process(0, Batch([(1, "a")], [3]))
    assert r.lookup(1) == [(1, "a")] * 3
    r.process(0, dels((1, "a")))
    assert r.lookup(1) == [(1, "a")] * 2
    assert r.all() == [(1, "a")] * 2


def test_null_key_finds_nothing_but_rows_are_kept():
    # col = NULL is never true: a NULL lookup finds nothing, a read of the whole view does
    r = Reader((0,), 2, 2)
    r.process(0, ins((None, 1), (None, None), (1, None)))
    assert r.lookup(None) == []
    assert r.lookup(1) == [(1, None)]
    assert sorted(r.all(), key=repr) == [(1, None), (None, 1), (None, None)]
    r.process(0, dels((None, 1), (None, None)))
    assert r.all() == [(1, None)]
    c = Reader((0, 1), 2, 2)
    c.process(0, ins((1, None), (1, 2)))
    assert c.lookup((1, None)) == []
    assert c.lookup((1, 2)) == [(1, 2)]


def test_int_and_float_keys_look_up_alike():
    r = Reader((0,), 2, 2)
    r.process(0, ins((1.0, "x")))
    assert r.lookup(1) == [(1.0, "x")]


def test_compound_key():
    r = Reader((1, 0), 3, 3)
    r.process(0, ins((1, "a", 10), (1, "b", 20), (2, "a", 30)))
    assert r.lookup(("a", 1)) == [(1, "a", 10)]
    assert r.lookup(("a", 2)) == [(2, "a", 30)]
    assert r.lookup((1, "a")) == []
    r.process(0, dels((1, "a", 10)))
    assert r.lookup(("a", 1)) == []


def test_empty_key_reads_whole_view():
    r = Reader((), 1, 1)
    r.process(0, ins((2,), (1,)))
    assert sorted(r.lookup(())) == [(1,), (2,)]


def test_hidden_key_columns_are_trimmed():
    # visible (name, score), hidden lookup key at position 2
    r = Reader((2,), 2, 3)
    r.process(0, ins(("a", 1, 7), ("b", 2, 7), ("c", 3, 8)))
    assert sorted(r.lookup(7)) == [("a", 1), ("b", 2)]
    assert sorted(r.all()) == [("a", 1), ("b", 2), ("c", 3)]
    # the snapshot keeps the full stored rows
    assert ms(r.snapshot()) == {("a", 1, 7): 1, ("b", 2, 7): 1, ("c", 3, 8): 1}


def test_reads_are_ordered():
    r = Reader((0,), 3, 3, order=(OrderKey(2, descending=True, nulls_first=False),))
    r.process(0, ins((1, "a", 5), (1, "b", None), (1, "c", 9), (1, "d", 5), (2, "e", 0)))
    assert r.lookup(1) == [(1, "c", 9), (1, "a", 5), (1, "d", 5), (1, "b", None)]
    assert r.all() == [(1, "c", 9), (1, "a", 5), (1, "d", 5), (2, "e", 0), (1, "b", None)]


def test_ordered_and_trimmed_read_sorts_on_hidden_column():
    r = Reader((0,), 1, 3, order=(OrderKey(2),))
    r.process(0, ins((1, "late", 9), (1, "early", 1), (1, "null", None)))
    assert r.lookup(1) == [(1,), (1,), (1,)]
    r2 = Reader((0,), 2, 3, order=(OrderKey(2),))
    r2.process(0, ins((1, "late", 9), (1, "early", 1), (1, "null", None)))
    assert r2.lookup(1) == [(1, "null"), (1, "early"), (1, "late")]


def test_reset():
    r = Reader((0,), 1, 1)
    r.process(0, ins((1,)))
    r.reset()
    assert r.lookup(1) == [] and not r.snapshot()
    assert r.stateful


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.tuples(st.none() | st.integers(0, 2),
                                                   st.integers(0, 2))), max_size=30))
def test_random_reader_holds_accumulated_input(ops):
    r = Reader((0,), 2, 2)
    model: dict = {}
    for is_delete, row in ops:
        if is_delete and model.get(row, 0) > 0:
            model[row] -= 1
            if not model[row]:
                del model[row]
            r.process(0, dels(row))
        else:
            model[row] = model.get(row, 0) + 1
            r.process(0, ins(row))
        assert ms(r.snapshot()) == model
        assert sorted(r.all(), key=repr) == sorted(
            (x for x, c in model.items() for _ in range(c)), key=repr)
        for k in (None, 0, 1, 2):
            want = sorted((x for x, c in model.items() if k is not None and x[0] == k
                           for _ in range(c)), key=repr)
            assert sorted(r.lookup(k), key=repr) == want


# ---------------------------------------------------------------- dense form

def test_dense_form_columnar_batches_and_lookups_of_int_like_keys():
    import numpy as np
    r = Reader((0,), 2, 3)
    cols = [np.arange(100), np.array([f"t{k}" for k in range(100)], dtype=object),
            np.arange(100) * 2]
    r.process(0, Batch.columnar(cols, np.ones(100, dtype=np.int64)))
    assert r.state.form == "dense" and len(r.state) == 100
    assert r.lookup(7) == [(7, "t7")]                          # trimmed to the visible two
    assert r.lookup(np.int64(7)) == r.lookup(7.0) == [(7, "t7")]
    assert r.lookup(True) == [(1, "t1")]                       # True == 1, as in a dict
    for missing in (7.5, "7", None, (7,), -1, 100, 10 ** 30, float("nan"), float("inf")):
        assert r.lookup(missing) == []
    # -old/+new for every key, in one columnar batch
    keys = np.repeat(np.arange(100), 2)
    bump = Batch.columnar([keys, np.repeat(cols[1], 2), np.stack([cols[2], cols[2] + 1], 1).ravel()],
                          np.tile([-1, 1], 100))
    r.process(0, bump)
    assert r.state.form == "dense" and len(r.all()) == 100
    assert ms(r.snapshot()) == {(k, f"t{k}", 2 * k + 1): 1 for k in range(100)}
    # a row for a key that holds one: dicts from now on, nothing lost
    r.process(0, ins((5, "again", 0)))
    assert r.state.form == "general"
    assert sorted(r.lookup(5)) == [(5, "again"), (5, "t5")]
    assert len(r.all()) == 101


def test_dense_refusal_of_a_removal_not_held_still_applies_it():
    r = Reader((0,), 2, 2)
    r.process(0, ins((1, "a")))
    # out of order (the removal before the insertion): counts go below zero in transit
    r.process(0, dels((2, "b")))
    assert r.state.form == "general" and r.lookup(2) == []
    r.process(0, ins((2, "b")))
    assert r.lookup(2) == [] and r.lookup(1) == [(1, "a")] and ms(r.snapshot()) == {(1, "a"): 1}


def test_select_list_applied_by_the_reader():
    # the view's SELECT list, folded into the reader: rows are stored and found projected
    from noria_py.ops import Project
    from sql_frontend.expr import Call, Col
    from sql_frontend.types import SqlType
    T = SqlType.TEXT
    select = Project((Col(2, SqlType.INT), Call("concat", (Col(1, T), Col(1, T)), T)))
    r = Reader((0,), 2, 2, select=select)
    r.process(0, ins((9, "a", 1), (8, None, 1), (7, "b", None)))
    assert sorted(r.lookup(1), key=repr) == sorted([(1, "aa"), (1, None)], key=repr)
    assert r.lookup(None) == []
    assert sorted(r.all(), key=repr) == sorted([(1, "aa"), (1, None), (None, "bb")], key=repr)
    r.process(0, dels((9, "a", 1), (7, "b", None)))
    assert r.lookup(1) == [(1, None)]
    assert r.all() == [(1, None)]


def test_dense_form_keeps_columns_not_row_tuples_nulls_and_deletions_included():
    """Each column in its own array (typed while its values allow), the row built when
    read: values come back as the Python values that went in, NULLs as None."""
    import numpy as np
    r = Reader((0,), 3, 3)
    n = 40
    counts = np.empty(n, dtype=object)
    counts[:] = [None if k % 3 == 0 else k for k in range(n)]       # a left join's padding
    cols = [np.arange(n), np.arange(n) * 0.5, counts]
    r.process(0, Batch.columnar(cols, np.ones(n, dtype=np.int64)))
    assert [p.dtype for p in r.state.dense.parts] == [np.int64, np.float64, object]
    row, = r.lookup(3)
    assert row == (3, 1.5, None) and type(row[0]) is int and type(row[1]) is float
    assert r.lookup(4) == [(4, 2.0, 4)]
    # padding swapped for a count, and a row deleted, in one columnar batch
    swap = Batch.columnar([np.array([3, 3, 4]), np.array([1.5, 1.5, 2.0]),
                           np.array([None, 7, 4], dtype=object)],
                          np.array([-1, 1, -1], dtype=np.int64))
    r.process(0, swap)
    assert r.lookup(3) == [(3, 1.5, 7)] and r.lookup(4) == []
    # a few rows, one at a time: NULL in, row out
    r.process(0, ins((4, None, None)))
    r.process(0, dels((5, 2.5, 5)))
    assert r.state.form == "dense"
    assert r.lookup(4) == [(4, None, None)] and r.lookup(5) == []
    want = {(k, k * 0.5, None if k % 3 == 0 else k): 1 for k in range(n) if k not in (3, 4, 5)}
    want[(3, 1.5, 7)] = want[(4, None, None)] = 1
    assert ms(r.snapshot()) == want and len(r.all()) == n - 1
    # a removal that does not match the row held: dicts from now on, nothing lost
    r.process(0, dels((6, 3.0, 99)))
    assert r.state.form == "general" and r.lookup(6) == [(6, 3.0, None)]


@pytest.mark.parametrize("visible", [2, 3])
def test_dense_lookup_many_equals_lookup_key_by_key(visible):
    """``lookup_many`` of many int keys reads the arrays at once: the same rows as
    ``lookup``, misses (negative, past the end, absent, past 64 bits) included, NaN as
    the one NaN, each answer a list of its own."""
    import numpy as np

    from noria_py.nan import NAN
    r = Reader((0,), visible, 3)
    n = 300
    floats = np.arange(n) * 0.5
    floats[7] = np.nan
    text = np.empty(n, dtype=object)
    text[:] = [None if k % 5 == 0 else f"t{k}" for k in range(n)]
    present = np.arange(n) % 4 != 1
    cols = [np.arange(n)[present], floats[present], text[present]]
    r.process(0, Batch.columnar(cols, np.ones(int(present.sum()), dtype=np.int64)))
    assert r.state.form == "dense"
    rng = np.random.default_rng(4)
    cap = len(r.state.dense.present)             # (negative keys that would wrap to rows)
    keys = rng.integers(-5, n + 20, 500).tolist() + [7, 1, -cap, -cap + 2, -1]
    for ks in (keys, keys + [10 ** 30, -(10 ** 30)]):   # (past 64 bits: key by key)
        many = r.lookup_many(ks)
        assert many == [r.lookup(k) for k in ks]
        assert any(many) and not all(many) and len(many[0]) <= 1
    assert r.lookup_many([7] * 40)[0][0][1] is NAN
    if visible == 3:
        assert r.lookup_many(list(range(40)))[8] == [(8, 4.0, "t8")]
    out = r.lookup_many([1] * 40)                # misses: not one shared list
    out[0].append("x")
    assert out[1] == []
    # an int64 array of keys (a cluster read's, any length): the same rows, in columns
    from noria_py.nan import column_list
    from noria_py.ops.dense import rows_by_key
    for ks in (keys, [7, 1, -1]):
        hit, parts = r.dense_parts(np.array(ks, dtype=np.int64))
        assert rows_by_key(hit, [column_list(p) for p in parts]) == [r.lookup(k) for k in ks]
    all_hit = [k for k in range(n) if present[k]]    # (every key a row: the short path)
    assert r.lookup_many(all_hit) == [r.lookup(k) for k in all_hit]
