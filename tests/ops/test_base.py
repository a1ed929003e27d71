"""Base tables (noria_py/ops/base.py): validation, coercion, keys, and state."""
from __future__ import annotations

import datetime
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.errors import ArityError, DuplicateKeyError, RowNotFoundError, TypeMismatchError
from noria_py.ops import Base
from sql_frontend.types import SqlType as T

from .helpers import Tracker, ms, schema


def people() -> Base:
    return Base(schema("people", ("id", T.INT, False), ("score", T.FLOAT), ("name", T.TEXT),
                       ("ok", T.BOOL), pk=(0,)))


def typed_rows(b: Base) -> set:
    return {(r, tuple(map(type, r)), c) for r, c in b.rows.items()}


def write(b: Base, inserts=(), deletes=()) -> Batch:
    out = b.process(0, b.prepare(inserts, deletes))
    return out


def state_of(b: Base):
    return (dict(b.rows), typed_rows(b), dict(b.by_key), len(b))


def assert_rejected(b: Base, exc, inserts=(), deletes=()):
    before = state_of(b)
    with pytest.raises(exc):
        write(b, inserts, deletes)
    assert state_of(b) == before


# ---------------------------------------------------------------- basic writes

def test_insert_emits_batch_and_stores_rows():
    b = people()
    out = write(b, [(1, 2.5, "a", True), (2, None, None, None)])
    assert list(out) == [((1, 2.5, "a", True), 1), ((2, None, None, None), 1)]
    assert ms(b.snapshot()) == {(1, 2.5, "a", True): 1, (2, None, None, None): 1}
    assert len(b) == 2


def test_prepare_changes_nothing():
    b = people()
    batch = b.prepare([(1, 1.0, "a", True)])
    assert list(batch) == [((1, 1.0, "a", True), 1)]
    assert len(b) == 0 and not b.snapshot()
    # and the insert is still possible
    write(b, [(1, 1.0, "a", True)])
    assert len(b) == 1


def test_delete_emits_negative_and_removes():
    b = people()
    write(b, [(1, 1.0, "a", True), (2, 2.0, "b", False)])
    out = write(b, deletes=[(1, 1.0, "a", True)])
    assert list(out) == [((1, 1.0, "a", True), -1)]
    assert ms(b.snapshot()) == {(2, 2.0, "b", False): 1}
    assert (1,) not in b.by_key


def test_deletes_come_before_inserts_in_the_batch():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    batch = b.prepare(inserts=[(1, 5.0, "z", False)], deletes=[(1, 1.0, "a", True)])
    assert batch.signs == [-1, 1]
    assert batch.rows == [(1, 1.0, "a", True), (1, 5.0, "z", False)]


def test_list_rows_become_tuples():
    b = people()
    out = write(b, [[1, 1.0, "a", True]])
    assert out.rows == [(1, 1.0, "a", True)]
    assert type(out.rows[0]) is tuple


# ---------------------------------------------------------------- types

def test_int_is_coerced_to_float():
    b = people()
    out = write(b, [(1, 3, "a", True)])
    assert out.rows[0][1] == 3.0 and type(out.rows[0][1]) is float
    (row,) = b.rows
    assert type(row[1]) is float


def test_int_coercion_in_large_batches_and_mixed_columns():
    b = people()
    rows = [(i, i if i % 2 else float(i), "n", None) for i in range(50)] + [(50, None, None, None)]
    out = write(b, rows)
    assert all(type(r[1]) is float for r in out.rows[:50])
    assert out.rows[50][1] is None
    assert out.rows[3] == (3, 3.0, "n", None)


def test_delete_matches_after_coercion():
    b = people()
    write(b, [(1, 2.0, "a", None)])
    write(b, deletes=[(1, 2, "a", None)])        # 2 -> 2.0
    assert len(b) == 0


@pytest.mark.parametrize("row", [
    (True, 1.0, "a", True),          # bool is not an INT
    (1, True, "a", True),            # bool is not a FLOAT
    (1, 1.0, "a", 1),                # int is not a BOOL
    (1.0, 1.0, "a", True),           # float is not an INT
    ("1", 1.0, "a", True),           # str is not an INT
    (1, "1.0", "a", True),           # str is not a FLOAT
    (1, 1.0, 5, True),               # int is not TEXT
    (1, 1.0, b"a", True),            # bytes are not TEXT
    (2 ** 63, 1.0, "a", True),       # INT is 64-bit
    (-(2 ** 63) - 1, 1.0, "a", True),
])
@pytest.mark.parametrize("pad", [0, 40], ids=["one", "batch"])
def test_type_mismatch_rejected(row, pad):
    b = people()
    write(b, [(1000, 1.0, "x", False)])
    good = [(2000 + i, 1.0, "x", False) for i in range(pad)]
    assert_rejected(b, TypeMismatchError, good + [row])
    assert_rejected(b, TypeMismatchError, [row] + good)


def test_int_bounds_accepted():
    b = people()
    write(b, [(2 ** 63 - 1, None, None, None), (-(2 ** 63), None, None, None)])
    assert len(b) == 2


def test_int_too_large_for_float_column_is_a_type_error():
    # regression: float(10**400) raised OverflowError instead of TypeMismatchError
    b = people()
    assert_rejected(b, TypeMismatchError, [(1, 10 ** 400, "a", True)])
    assert_rejected(b, TypeMismatchError, [(i, 1.0, "a", True) for i in range(5)]
                    + [(9, 10 ** 400, "a", True)])


def test_date_and_timestamp_columns():
    b = Base(schema("ev", ("d", T.DATE), ("ts", T.TIMESTAMP)))
    d = datetime.date(2024, 1, 2)
    ts = datetime.datetime(2024, 1, 2, 3, 4)
    write(b, [(d, ts)])
    assert len(b) == 1
    assert_rejected(b, TypeMismatchError, [(ts, ts)])      # a datetime is not a DATE
    assert_rejected(b, TypeMismatchError, [(d, d)])        # a date is not a TIMESTAMP
    assert_rejected(b, TypeMismatchError, [("2024-01-02", ts)])



@pytest.mark.parametrize("n", [1, 40])          # one row, and a batch checked by columns
def test_a_timestamp_with_a_time_zone_is_refused(n):
    # regression: accepted, it made every comparison with a naive one a TypeError in views
    b = Base(schema("ev", ("id", T.INT), ("ts", T.TIMESTAMP)))
    aware = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
    rows = [(i, datetime.datetime(2024, 1, 1)) for i in range(n - 1)]
    with pytest.raises(TypeMismatchError, match="with a time zone"):
        b.prepare(rows + [(n, aware)])
    b.prepare(rows + [(n, None)])


@pytest.mark.parametrize("n", [1, 40])
@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc80"])
def test_a_str_with_a_lone_surrogate_is_not_text(n, text):
    # regression: accepted in memory, refused by a data directory's log (no UTF-8 form)
    b = people()
    rows = [(i, 1.0, "é", True) for i in range(n - 1)]
    assert_rejected(b, TypeMismatchError, rows + [(n, 1.0, text, True)])
    with pytest.raises(TypeMismatchError, match=f"row {n - 1}: .*lone surrogate"):
        b.prepare(rows + [(n, 1.0, text, True)])
    write(b, rows + [(n, 1.0, "\U0001f600 \ufeff \x00", True)])    # whole pairs, BOM, NUL: text


# ---------------------------------------------------------------- shape

@pytest.mark.parametrize("row", [(1, 1.0, "a"), (1, 1.0, "a", True, 5), ()])
def test_arity_rejected(row):
    b = people()
    assert_rejected(b, ArityError, [row])
    assert_rejected(b, ArityError, [(1, 1.0, "a", True), row])
    assert_rejected(b, ArityError, deletes=[row])


@pytest.mark.parametrize("row", ["ab", {"a": 1, "b": 2}, 5, None])
def test_row_that_is_not_a_tuple_rejected(row):
    # regression: the batch fast path turned "ab" into ('a', 'b')
    b = Base(schema("t", ("a", T.TEXT), ("b", T.TEXT)))
    assert_rejected(b, TypeMismatchError, [row])
    assert_rejected(b, TypeMismatchError, [("x", "y"), row])
    assert_rejected(b, TypeMismatchError, deletes=[row])
    assert len(b) == 0


# ---------------------------------------------------------------- NULLs

def test_not_null_column_rejects_null():
    b = Base(schema("t", ("a", T.INT, False), ("b", T.TEXT)))
    write(b, [(1, None)])
    assert_rejected(b, TypeMismatchError, [(None, "x")])
    assert_rejected(b, TypeMismatchError, [(2, "x")] * 30 + [(None, "x")])
    assert ms(b.snapshot()) == {(1, None): 1}


def test_primary_key_column_is_implicitly_not_null():
    b = Base(schema("t", ("a", T.INT, True), ("b", T.TEXT), pk=(0,)))
    assert_rejected(b, TypeMismatchError, [(None, "x")])
    write(b, [(1, None)])
    assert len(b) == 1


def test_nullable_columns_accept_null_everywhere():
    b = Base(schema("t", ("a", T.INT), ("b", T.FLOAT), ("c", T.TEXT), ("d", T.BOOL),
                    ("e", T.DATE), ("f", T.TIMESTAMP)))
    write(b, [(None,) * 6, (None,) * 6])
    assert ms(b.snapshot()) == {(None,) * 6: 2}
    write(b, deletes=[(None,) * 6])
    assert ms(b.snapshot()) == {(None,) * 6: 1}


# ---------------------------------------------------------------- primary keys

def test_duplicate_primary_key_with_existing_row():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    assert_rejected(b, DuplicateKeyError, [(1, 2.0, "b", False)])
    assert_rejected(b, DuplicateKeyError, [(1, 1.0, "a", True)])     # even the same row
    assert_rejected(b, DuplicateKeyError, [(2, None, None, None), (1, None, None, None)])


def test_duplicate_primary_key_within_one_batch():
    b = people()
    assert_rejected(b, DuplicateKeyError, [(1, 1.0, "a", True), (1, 2.0, "b", False)])
    assert_rejected(b, DuplicateKeyError, [(1, 1.0, "a", True), (1, 1.0, "a", True)])
    assert len(b) == 0


def test_compound_primary_key():
    b = Base(schema("t", ("a", T.INT), ("b", T.TEXT), ("v", T.INT), pk=(0, 1)))
    write(b, [(1, "x", 0), (1, "y", 0), (2, "x", 0)])
    assert_rejected(b, DuplicateKeyError, [(1, "x", 5)])
    assert b.by_key[(1, "y")] == (1, "y", 0)


def test_delete_and_reinsert_same_key_in_one_batch():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    out = write(b, [(1, 9.0, "new", False)], deletes=[(1, 1.0, "a", True)])
    assert list(out) == [((1, 1.0, "a", True), -1), ((1, 9.0, "new", False), 1)]
    assert ms(b.snapshot()) == {(1, 9.0, "new", False): 1}
    assert b.by_key == {(1,): (1, 9.0, "new", False)}
    # the key is taken again
    assert_rejected(b, DuplicateKeyError, [(1, 0.0, "x", None)])


def test_delete_and_reinsert_identical_row_in_one_batch():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    write(b, [(1, 1.0, "a", True)], deletes=[(1, 1.0, "a", True)])
    assert ms(b.snapshot()) == {(1, 1.0, "a", True): 1}
    assert b.by_key == {(1,): (1, 1.0, "a", True)}
    write(b, deletes=[(1, 1.0, "a", True)])
    assert len(b) == 0 and b.by_key == {}


def test_delete_one_key_reinsert_it_twice_rejected():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    assert_rejected(b, DuplicateKeyError, [(1, 2.0, None, None), (1, 3.0, None, None)],
                    deletes=[(1, 1.0, "a", True)])


def test_freed_key_can_be_reused_later():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    write(b, deletes=[(1, 1.0, "a", True)])
    write(b, [(1, 2.0, "b", False)])
    assert b.by_key == {(1,): (1, 2.0, "b", False)}


# ---------------------------------------------------------------- deletes

def test_deleting_a_missing_row_rejected():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    assert_rejected(b, RowNotFoundError, deletes=[(2, 1.0, "a", True)])
    assert_rejected(b, RowNotFoundError, deletes=[(1, 1.5, "a", True)])   # same key, other row
    assert_rejected(b, RowNotFoundError, deletes=[(1, 1.0, "a", True), (1, 1.0, "a", True)])
    # a rejected delete batch with inserts changes nothing either
    assert_rejected(b, RowNotFoundError, [(5, None, None, None)], deletes=[(7, None, None, None)])


def test_duplicate_rows_without_primary_key():
    b = Base(schema("t", ("a", T.INT), ("b", T.TEXT)))
    write(b, [(1, "x"), (1, "x"), (1, None)])
    assert ms(b.snapshot()) == {(1, "x"): 2, (1, None): 1}
    assert len(b) == 3
    write(b, deletes=[(1, "x")])
    assert ms(b.snapshot()) == {(1, "x"): 1, (1, None): 1}
    write(b, deletes=[(1, "x"), (1, None)])
    assert len(b) == 0
    assert_rejected(b, RowNotFoundError, deletes=[(1, "x")])


def test_delete_both_copies_in_one_batch():
    b = Base(schema("t", ("a", T.INT),))
    write(b, [(1,), (1,)])
    write(b, deletes=[(1,), (1,)])
    assert len(b) == 0
    assert b.rows == {}


def test_reset_forgets_everything():
    b = people()
    write(b, [(1, 1.0, "a", True)])
    b.reset()
    assert len(b) == 0 and b.by_key == {} and not b.snapshot()
    write(b, [(1, 1.0, "a", True)])
    assert len(b) == 1


def test_describe_and_flags():
    b = people()
    assert b.stateful and b.kind == "base"
    assert b.describe() == "base people"


# ---------------------------------------------------------------- properties

small_row = st.tuples(st.integers(0, 4), st.none() | st.integers(0, 1), st.none() | st.sampled_from(["a", "b"]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(small_row, min_size=1, max_size=4)), max_size=12))
def test_random_writes_snapshot_equals_emitted(ops):
    """No primary key: the snapshot always equals the sum of every emitted delta, and
    a rejected write never changes anything."""
    b = Base(schema("t", ("a", T.INT), ("b", T.FLOAT), ("c", T.TEXT)))
    tr = Tracker(b)
    model: dict = {}
    for is_delete, rows in ops:
        coerced = [(a, None if x is None else float(x), c) for a, x, c in rows]
        if is_delete:
            need: dict = {}
            for r in coerced:
                need[r] = need.get(r, 0) + 1
            ok = all(model.get(r, 0) >= n for r, n in need.items())
            if not ok:
                before = dict(b.rows)
                with pytest.raises(RowNotFoundError):
                    b.prepare(deletes=rows)
                assert b.rows == before
                continue
            tr.feed(0, b.prepare(deletes=rows))
            for r in coerced:
                model[r] -= 1
                if not model[r]:
                    del model[r]
        else:
            tr.feed(0, b.prepare(inserts=rows))
            for r in coerced:
                model[r] = model.get(r, 0) + 1
        tr.check()
        assert tr.state() == model
        assert len(b) == sum(model.values())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 5), max_size=3),
                          st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=3)),
                max_size=12))
def test_random_primary_key_writes(ops):
    """With a primary key, a write succeeds exactly when the model says it should."""
    b = Base(schema("t", ("k", T.INT), ("v", T.INT), pk=(0,)))
    tr = Tracker(b)
    model: dict = {}      # key -> row
    for del_keys, inserts in ops:
        deletes = [model.get(k, (k, 99)) for k in del_keys]
        expect_missing = (any(k not in model for k in del_keys)
                          or len(set(del_keys)) != len(del_keys))
        after = {k: r for k, r in model.items() if k not in set(del_keys)}
        ins_keys = [k for k, _ in inserts]
        expect_dup = len(set(ins_keys)) != len(ins_keys) or any(k in after for k in ins_keys)
        before = state_of(b)
        if expect_missing:
            with pytest.raises(RowNotFoundError):
                b.prepare(inserts, deletes)
        elif expect_dup:
            with pytest.raises(DuplicateKeyError):
                b.prepare(inserts, deletes)
        else:
            tr.feed(0, b.prepare(inserts, deletes))
            model = after
            for r in inserts:
                model[r[0]] = r
        if expect_missing or expect_dup:
            assert state_of(b) == before
        tr.check()
        assert tr.state() == {r: 1 for r in model.values()}
        assert b.by_key == {(k,): r for k, r in model.items()}


def test_int_range_checked_in_batches_with_nulls():
    b = Base(schema("t", ("a", T.INT), ("b", T.INT)))
    assert_rejected(b, TypeMismatchError, [(None, 1), (2 ** 63, 2), (3, None)])
    assert_rejected(b, TypeMismatchError, [(None, None), (1, -(2 ** 63) - 1)])
    write(b, [(None, 1), (2 ** 63 - 1, None)])
    assert ms(b.snapshot()) == {(None, 1): 1, (2 ** 63 - 1, None): 1}


def test_float_primary_key_int_and_float_are_the_same_key():
    b = Base(schema("t", ("k", T.FLOAT), pk=(0,)))
    write(b, [(1,)])
    assert_rejected(b, DuplicateKeyError, [(1.0,)])
    write(b, deletes=[(1.0,)])
    assert len(b) == 0


# ---------------------------------------------------------------- insert-only tables

def events() -> Base:
    return Base(schema("events", ("a", T.INT), ("b", T.FLOAT), ("c", T.TEXT)))


def test_insert_only_table_keeps_its_batches_as_columns(monkeypatch):
    from noria_py import tuning
    monkeypatch.setattr(tuning, "ARRAY_MIN", 1)       # (small writes stay rows)
    b = events()
    out = write(b, [(1, 2, "x"), (1, 2.0, "x"), (None, 0.5, None)])
    assert b._rows is None and len(b.chunks) == 1
    a, f, t = out.cols
    assert a.dtype == object and f.dtype.name == "float64" and t.dtype == object  # a NULL in a
    write(b, [(3, 1.5, "y")])
    assert b.chunks[-1].cols[0].dtype.name == "int64"
    assert len(b) == 4 and b._rows is None
    assert ms(b.snapshot()) == {(1, 2.0, "x"): 2, (None, 0.5, None): 1, (3, 1.5, "y"): 1}
    assert sorted(b.all_rows(), key=repr) == sorted(
        [(1, 2.0, "x"), (1, 2.0, "x"), (None, 0.5, None), (3, 1.5, "y")], key=repr)
    monkeypatch.setattr(tuning, "ARRAY_MIN", 32)
    assert write(b, [(4, 0.0, "z")]).cols is None and b._rows is None


def test_first_delete_indexes_an_insert_only_table():
    b = events()
    write(b, [(1, 2.0, "x"), (1, 2.0, "x")])
    write(b, [(2, 0.0, "y")])
    out = write(b, deletes=[(1, 2.0, "x")])
    assert ms(out) == {(1, 2.0, "x"): -1}
    assert b._rows is not None and b.chunks == []
    assert b.rows == {(1, 2.0, "x"): 1, (2, 0.0, "y"): 1} and len(b) == 2
    assert_rejected(b, RowNotFoundError, deletes=[(2, 0.0, "y"), (2, 0.0, "y")])
    write(b, [(5, 5.0, "z")])               # indexed for good: no columnar batch now
    assert b.rows[(5, 5.0, "z")] == 1 and b.chunks == []


def test_rejected_delete_leaves_an_insert_only_table_whole():
    b = events()
    write(b, [(1, 2.0, "x")])
    with pytest.raises(RowNotFoundError):
        write(b, deletes=[(7, 7.0, "q")])
    assert ms(b.snapshot()) == {(1, 2.0, "x"): 1} and len(b) == 1


def test_primary_keyed_table_is_indexed_from_the_start():
    b = people()
    out = write(b, [(1, 1.0, "a", True)])
    assert out.cols is None and b._rows == {(1, 1.0, "a", True): 1}


def test_row_batches_append_to_an_insert_only_table():
    b = events()                             # as on restart: rows read back from the log
    b.process(0, Batch.inserts([(1, 1.0, "a")]))
    write(b, [(2, 2.0, "b")])
    assert b._rows is None and len(b) == 2
    assert ms(b.snapshot()) == {(1, 1.0, "a"): 1, (2, 2.0, "b"): 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.integers(0, 3), st.sampled_from(
    [None, 1.0, 2.5])), min_size=1, max_size=4)), max_size=12))
def test_insert_only_then_indexed_matches_a_multiset(steps):
    from collections import Counter
    b = Base(schema("t", ("a", T.INT), ("b", T.FLOAT)))
    model: Counter = Counter()
    for delete, rows in steps:
        if delete:
            want = Counter(rows)
            if any(model[r] < c for r, c in want.items()):
                with pytest.raises(RowNotFoundError):
                    write(b, deletes=rows)
            else:
                write(b, deletes=rows)
                model -= want
        else:
            write(b, rows)
            model += Counter(rows)
        assert len(b) == sum(model.values())
        assert ms(b.snapshot()) == dict(+model)


# ---------------------------------------------------------------- NaN (noria_py/nan.py)

def _nan(bits: str = "010000000000f8ff") -> float:
    """A NaN that is not the engine's object (negative, with a payload)."""
    return struct.unpack("<d", bytes.fromhex(bits))[0]


@pytest.mark.parametrize("n", [1, 40], ids=["few", "batch"])
def test_nan_rows_are_the_one_nan_and_deletable(n):
    """Every NaN written is the one NaN, so a row holding one is found again by a delete
    that hands over another NaN object (the row-by-row and column checks alike)."""
    b = events()
    rows = [(i, float("nan"), "x") for i in range(n)] + [(None, 1, None)]
    write(b, rows)
    assert all(r[1] is math.nan for r in b.rows if r[0] is not None)
    out = write(b, deletes=[(i, _nan(), "x") for i in range(n)])
    assert len(out) == n and b.rows == {(None, 1.0, None): 1}
    write(b, [(1, -float("nan"), "y"), (1, _nan("000000000000f87f"), "y")])
    assert b.rows[(1, math.nan, "y")] == 2
    assert b.check_row((1, _nan(), "z"), 0)[1] is math.nan          # the row-by-row check


def test_nan_rows_kept_as_columns_are_deletable(monkeypatch):
    from noria_py import tuning
    monkeypatch.setattr(tuning, "ARRAY_MIN", 1)
    b = events()
    write(b, [(1, float("nan"), "x"), (2, 2.0, "y")])
    assert b._rows is None                           # columnar: a float64 array holds it
    write(b, deletes=[(1, _nan(), "x")])
    assert b.rows == {(2, 2.0, "y"): 1}


def test_nan_primary_key_is_unique_and_deletable_by_key():
    """As in PostgreSQL, a NaN in a FLOAT primary key is one key value."""
    b = Base(schema("k", ("k", T.FLOAT), ("v", T.INT), pk=(0,)))
    write(b, [(float("nan"), 1), (1.5, 2)])
    assert_rejected(b, DuplicateKeyError, inserts=[(_nan(), 3)])
    assert_rejected(b, DuplicateKeyError, inserts=[(0.0, 1), (float("nan"), 3)])
    write(b, deletes=[(_nan(), 1)], inserts=[(float("nan"), 4)])
    assert b.by_key == {(math.nan,): (math.nan, 4), (1.5,): (1.5, 2)}
    write(b, deletes=[(float("nan"), 4)])
    assert b.by_key == {(1.5,): (1.5, 2)} and len(b) == 1


# ---------------------------------------------------------------- upquery indexes


@pytest.mark.parametrize("seed", range(5))
def test_index_rows_match_a_scan_in_both_forms(seed, monkeypatch):
    """``Base.index_rows`` (a ChunkIndex while the table is insert-only, a dict once it
    is not) answers as a scan of the rows would, across re-sorts of its chunks."""
    import random

    from noria_py.ops.base import ChunkIndex
    monkeypatch.setattr(ChunkIndex, "TAIL_MIN", 20)
    rng = random.Random(seed)
    base = Base(schema("t", ("a", T.INT), ("b", T.INT)))
    for step in range(60):
        n = rng.choice([1, 5, 40, 100])
        rows = [(rng.randrange(15), rng.randrange(3)) for _ in range(n)]
        if seed == 4 and step == 40:            # a delete: the table turns into a dict
            base.process(0, base.prepare(deletes=[base.all_rows()[0]]))
        base.process(0, base.prepare(rows))
        for k in (rng.randrange(-1, 16), 3):
            got = base.index_rows((0,), (k,))
            want = sorted(r for r in base.all_rows() if r[0] == k)
            assert sorted(r for r, s in zip(got.rows, got.signs) for _ in range(s)) == want
    assert (base._rows is None) == (seed != 4)
    assert bool(base.chunk_indexes) == (seed != 4)


def test_index_rows_of_keys_an_int_column_never_holds():
    base = Base(schema("t", ("a", T.INT), ("b", T.INT)))
    base.process(0, base.prepare([(i % 7, i) for i in range(100)]))
    for k in (1.5, float("nan"), "x", 2**70, -2**70):
        assert not base.index_rows((0,), (k,))
    assert sorted(base.index_rows((0,), (3.0,)).rows) == sorted((3, i) for i in range(3, 100, 7))
    assert base.chunk_indexes and not base.indexes     # no dict index built for them


_STEP = st.one_of(
    st.tuples(st.just("insert"),
              st.lists(st.tuples(st.integers(-3, 12),
                                 st.one_of(st.none(), st.integers(0, 3)),
                                 st.sampled_from(["x", "y", None])),
                       min_size=0, max_size=40)),
    st.tuples(st.just("copies"), st.tuples(st.integers(-3, 12), st.integers(1, 3))),
    st.tuples(st.just("read"), st.integers(-4, 14)),
    st.tuples(st.just("read_b"), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 1000)),
    st.tuples(st.just("store"), st.just(0)))


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(_STEP, max_size=30), array_min=st.sampled_from([1, 8, 1000]),
       tail_min=st.sampled_from([0, 5, 4096]))
def test_chunk_index_answers_as_a_dict_of_rows(steps, array_min, tail_min):
    """A model test: ``Base.index_rows`` on its sorted batches (``ChunkIndex``: row and
    columnar batches, NULLs in other columns, re-sorts at any tail, a second column's
    dict index, a delete turning the table indexed, rows written with a count) answers every key with exactly the
    rows, and their counts, of a plain dict of key -> rows; the table's rows stay the
    rows written."""
    from noria_py import tuning
    from noria_py.ops.base import ChunkIndex
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuning, "ARRAY_MIN", array_min)
        mp.setattr(ChunkIndex, "TAIL_MIN", tail_min)
        _check_chunk_index(steps)


def _check_chunk_index(steps) -> None:
    base = Base(schema("t", ("a", T.INT), ("b", T.INT), ("c", T.TEXT)))
    model: dict[int, list[tuple]] = {}
    for op, arg in steps:
        if op == "insert":
            base.process(0, base.prepare(arg))
            for r in arg:
                model.setdefault(r[0], []).append(r)
        elif op == "copies":                    # a row with a count (a log's replay)
            row = (arg[0], arg[1], "z")
            base.process(0, Batch([row], [arg[1]]))
            model.setdefault(row[0], []).extend([row] * arg[1])
        elif op == "delete":
            held = [r for rows in model.values() for r in rows]
            if held:
                r = held[arg % len(held)]
                base.process(0, base.prepare(deletes=[r]))
                model[r[0]].remove(r)
                assert not base.chunk_indexes       # dropped with the batches
        elif op == "store":
            assert sorted(base.all_rows(), key=repr) == sorted(
                (r for rows in model.values() for r in rows), key=repr)
        else:
            col = 0 if op == "read" else 1
            got = base.index_rows((col,), (arg,))
            want = [r for rows in model.values() for r in rows if r[col] == arg]
            assert sorted((r for r, s in zip(got.rows, got.signs) for _ in range(s)),
                          key=repr) == sorted(want, key=repr)
            assert all(s > 0 for s in got.signs)
    assert ms(base.snapshot()) == ms(Batch.inserts(r for rows in model.values() for r in rows))


@pytest.mark.parametrize("spread", [1, 1000, 2**40])
def test_chunk_index_dense_and_sparse_keys(spread):
    """Keys close together (``starts`` by key) and far apart (sorted distinct keys),
    each key in several batches, the first and the last key included: every row found,
    keys between and beyond held ones find none, and the index stays small."""
    base = Base(schema("t", ("a", T.INT), ("b", T.INT)))
    keys = [k * spread - 3 * spread for k in range(7)]
    for i in range(5):
        base.process(0, base.prepare([(k, i * 10 + j) for j, k in enumerate(keys)] * 2))
    for k in keys:
        got = base.index_rows((0,), (k,))
        assert sorted(got.rows) == sorted((k, i * 10 + keys.index(k))
                                          for i in range(5) for _ in range(2))
    for k in (keys[0] - 1, keys[-1] + 1, keys[0] + spread // 2 if spread > 1 else 10**9):
        assert not base.index_rows((0,), (k,))
    index = base.chunk_indexes[(0,)]
    assert (index.keys is None) == (spread == 1)
    assert len(index.ids) == 5 * len(keys)          # one entry a (key, batch)


def test_chunk_index_of_more_than_65536_batches():
    """Batch numbers past uint16 (70,000 one-row writes): 4-byte numbers, every row
    found."""
    base = Base(schema("t", ("a", T.INT), ("b", T.INT)))
    one = np.ones(1, dtype=np.int64)
    base.chunks = [Batch.columnar([np.array([i % 7]), np.array([i])], one)   # (70,000 writes)
                   for i in range(70_000)]
    base.n = 70_000
    got = base.index_rows((0,), (6,))
    assert sorted(r[1] for r in got.rows) == list(range(6, 70_000, 7))
    assert base.chunk_indexes[(0,)].ids.dtype == np.uint32
