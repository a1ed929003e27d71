"""Keyed state as arrays while each key holds one row (noria_py/ops/dense.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py import tuning
from noria_py.batch import Batch
from noria_py.ops import dense
from noria_py.ops.dense import DenseRows, batch_columns, batch_keys, grown_size, int_keys
from noria_py.tuning import DENSE_LIMIT


def arr(*xs):
    return np.array(xs, dtype=np.int64)


def obj(*xs):
    return dense.object_column(list(xs))


def held(d: DenseRows) -> dict:
    return dict(d.items())


def test_insert_replace_delete_and_flips():
    d = DenseRows(2)
    gone, came = d.apply(arr(3, 5), [arr(3, 5), obj("a", "b")], arr(1, 1))
    assert held(d) == {3: (3, "a"), 5: (5, "b")} and len(d) == 2
    assert gone.tolist() == [] and sorted(came.tolist()) == [3, 5]
    # -old/+new for 3 (no flip), 5 removed (gone), 7 added (came)
    gone, came = d.apply(arr(3, 3, 5, 7), [arr(3, 3, 5, 7), obj("a", "c", "b", "d")],
                         arr(-1, 1, -1, 1))
    assert held(d) == {3: (3, "c"), 7: (7, "d")} and len(d) == 2
    assert gone.tolist() == [5] and came.tolist() == [7]
    assert d.get(3) == (3, "c") and d.get(5) is None and d.get(10 ** 9) is None
    assert d.get(True) is None and d.get(3.0) is None      # only ints (callers convert)
    assert d.parts[1][5] is None                            # no stale reference kept


def test_new_row_before_removal_of_old_is_accepted_in_one_batch():
    d = DenseRows(1)
    d.apply(arr(1), [obj("x")], arr(1))
    assert d.apply(arr(1, 1), [obj("y", "x")], arr(1, -1)) is not None
    assert held(d) == {1: ("y",)}


@pytest.mark.parametrize("keys,parts,signs", [
    (arr(1), [obj("x")], arr(1)),                      # a second row for key 1
    (arr(2), [obj("x")], arr(-1)),                     # removing a row not held
    (arr(1), [obj("zzz")], arr(-1)),                   # removing a different row
    (arr(4, 4), [obj("p", "q")], arr(1, 1)),           # two rows for one key
    (arr(1, 1), [obj("x", "x")], arr(-1, -1)),         # removing twice
    (arr(4), [obj("p")], arr(2)),                      # a count above one
    (arr(-1), [obj("p")], arr(1)),                     # a negative key
    (arr(DENSE_LIMIT), [obj("p")], arr(1)),      # a key too big for arrays
])
def test_refused_batches_change_nothing(keys, parts, signs):
    d = DenseRows(1)
    d.apply(arr(1, 2), [obj("x", None)], arr(1, 1))
    # a good row first: refusal must undo nothing because nothing was done
    ok_then_bad = (np.concatenate([arr(9), keys]), [np.concatenate([obj("n"), parts[0]])],
                   np.concatenate([arr(1), signs]))
    for batch in ((keys, parts, signs), ok_then_bad):
        assert d.apply(*batch) is None
        assert held(d) == {1: ("x",), 2: (None,)} and len(d) == 2


def test_removal_matches_none_and_mixed_dtypes():
    d = DenseRows(2)
    d.apply(arr(1, 2), [arr(1, 2), obj(None, 7)], arr(1, 1))
    # the held 7 is an int in an object array; the removal brings an int64 array
    assert d.apply(arr(1, 2), [arr(1, 2), np.array([None, 7], dtype=object)], arr(-1, -1))
    assert held(d) == {}


def test_grown_size_and_gather_beyond_the_arrays():
    assert grown_size(arr(), 0) == 0
    assert grown_size(arr(5), 0) == 1024
    assert grown_size(arr(5), 1024) == 1024
    assert grown_size(arr(5000), 1024) == 10000
    assert grown_size(arr(-1), 1024) is None
    d = DenseRows(1)
    d.apply(arr(3), [obj("x")], arr(1))
    hit, parts = d.gather(arr(3, 4, 5_000_000))
    assert hit.tolist() == [True, False, False] and parts[0].tolist() == ["x"]
    hit, parts = d.gather(arr())
    assert hit.tolist() == [] and parts[0].tolist() == []


def test_int_keys_takes_only_python_ints():
    assert int_keys([1, 2]).tolist() == [1, 2]
    for bad in ([1, None], [1, True], [1, 2.0], ["1"], [1 << 70]):
        assert int_keys(bad) is None


def test_batch_keys_and_columns():
    keys, cols, signs = batch_columns(Batch([(1, "a"), (2, None)], [1, -1]), 0)
    assert keys.tolist() == [1, 2] and cols[1].tolist() == ["a", None]
    assert signs.tolist() == [1, -1]
    assert batch_keys(Batch.inserts([("x", 1)]), 0) is None
    assert batch_keys(Batch.columnar([np.array([1.0])], np.array([1])), 0) is None
    assert batch_keys(Batch.columnar([obj(4, 5)], np.array([1, 1])), 0).tolist() == [4, 5]
    assert batch_keys(Batch.columnar([obj(4, None)], np.array([1, 1])), 0) is None


def _expected(model: dict, batch) -> dict | None:
    """The rule: each key removed at most once and added at most once; a removal takes
    the row held; an addition goes to a key empty once the removals are done."""
    adds = [(k, v) for k, v, s in batch if s == 1]
    dels = [(k, v) for k, v, s in batch if s == -1]
    if len({k for k, _ in adds}) != len(adds) or len({k for k, _ in dels}) != len(dels):
        return None
    new = dict(model)
    for k, v in dels:
        if new.get(k) != ((v,),):
            return None
        del new[k]
    for k, v in adds:
        if k in new:
            return None
        new[k] = ((v,),)
    return new


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["a", "b", None]),
                                   st.sampled_from([1, -1])), max_size=8), max_size=12))
def test_random_batches_match_a_dict_model(batches):
    """Accepted batches leave what a {key: row} model does; refused ones change nothing."""
    d = DenseRows(1)
    model: dict = {}
    for batch in batches:
        want = _expected(model, batch)
        res = d.apply(arr(*[k for k, _, _ in batch]),
                      [dense.object_column([(v,) for _, v, _ in batch])],
                      arr(*[s for _, _, s in batch]))
        assert (res is None) == (want is None)
        if want is not None:
            gone, came = res
            assert set(gone.tolist()) == set(model) - set(want)
            assert set(came.tolist()) == set(want) - set(model)
            model = want
        assert held(d) == model and len(d) == len(model)


def test_parts_stay_typed_until_a_value_does_not_fit():
    d = DenseRows(2)
    d.apply(arr(1, 2), [arr(1, 2), np.array([0.5, 1.5])], arr(1, 1))
    assert [p.dtype for p in d.parts] == [np.int64, np.float64]
    assert d.get(1) == (1, 0.5) and type(d.get(1)[0]) is int
    # a few rows, one at a time: an int into the float part, a bool, a None, a huge int
    d.apply_rows([3], [(3, 2.5)], [1])
    assert [p.dtype for p in d.parts] == [np.int64, np.float64]
    for key, row in ((4, (4, 7)), (5, (True, 1.0)), (6, (6, None)), (7, (1 << 70, 1.0))):
        assert d.apply_rows([key], [row], [1]) is not None
        assert d.get(key) == row and [type(v) for v in d.get(key)] == [type(v) for v in row]
    assert d.parts[1].dtype == object and d.parts[0].dtype == object
    assert held(d)[1] == (1, 0.5) and held(d)[3] == (3, 2.5)
    # an object column through the array path turns a typed part into objects
    e = DenseRows(1)
    e.apply(arr(1), [arr(10)], arr(1))
    e.apply(arr(2), [obj("x")], arr(1))
    assert e.parts[0].dtype == object and held(e) == {1: (10,), 2: ("x",)}
    # once empty, the next batch may type the part again
    e.apply(arr(1, 2), [obj(10, "x")], arr(-1, -1))
    e.apply(arr(5), [arr(50)], arr(1))
    assert e.parts[0].dtype == np.int64 and held(e) == {5: (50,)}


def test_an_object_part_takes_typed_values_without_a_copy():
    d = DenseRows(1)
    d.apply_rows([1], [("x",)], [1])                # an object part
    d.apply_rows([1, 1], [("x",), (5,)], [-1, 1])
    part = d.parts[0]
    assert part.dtype == object
    d.apply(arr(2, 3), [arr(6, 7)], arr(1, 1))
    assert d.parts[0] is part and held(d) == {1: (5,), 2: (6,), 3: (7,)}
    assert [type(v) for (v,) in held(d).values()] == [int] * 3


def test_row_by_row_into_an_empty_state_types_the_parts():
    d = DenseRows(3)
    d.apply_rows([1, 2], [(1, 2.5, "a"), (2, 3.5, "b")], [1, 1])
    assert [p.dtype for p in d.parts] == [np.int64, np.float64, object]
    assert held(d) == {1: (1, 2.5, "a"), 2: (2, 3.5, "b")}


@settings(max_examples=100, deadline=None)
@given(st.booleans(),
       st.lists(st.lists(st.tuples(st.integers(0, 6), st.sampled_from([1, 2.5, "a", None]),
                                   st.sampled_from([1, -1])), max_size=8), max_size=12))
def test_rows_one_at_a_time_match_a_sequential_model(key_part, batches):
    """apply_rows takes a batch delta by delta; one refused delta leaves the state as the
    batch found it (values of several types: typed parts turn into objects on the way)."""
    # with key_part, rows are read with the key in place of part 0 (which holds it)
    d = DenseRows(2, key=0 if key_part else None)
    model: dict = {}
    for batch in batches:
        want = dict(model)
        for k, v, s in batch:
            row = (k, v)
            if s == 1 and k not in want:
                want[k] = row
            elif s == -1 and want.get(k) == row:
                del want[k]
            else:
                want = None
                break
        res = d.apply_rows([k for k, _, _ in batch], [(k, v) for k, v, _ in batch],
                           [s for _, _, s in batch])
        assert (res is None) == (want is None)
        if want is not None:
            gone, came = res
            assert set(gone) == set(model) - set(want) and set(came) == set(want) - set(model)
            model = want
        assert dict(d.items()) == model and len(d) == len(model)
        for k in range(7):
            assert d.get(k) == model.get(k)


def test_a_key_part_is_read_from_the_key():
    # the part named as the key is never read for a row: the key stands in for it
    d = DenseRows(3, key=1)
    d.apply(np.array([4, 9]), [np.array(["a", "b"], dtype=object), np.array([4, 9]),
                               np.array([0.5, None], dtype=object)], np.array([1, 1]))
    d.parts[1][:] = -1          # what the array holds no longer matters
    assert d.get(4) == ("a", 4, 0.5) and d.get(9) == ("b", 9, None)
    assert d.get(4)[:2] == ("a", 4) and d.get(5) is None and d.get(10 ** 9) is None


# ---------------------------------------------------------------- NaN (noria_py/nan.py)

def test_a_nan_in_a_float_part_is_removed_and_read_as_the_one_nan():
    """A float part holds NaN as bits: removing the row it is in (given another NaN) is
    accepted, and reading a row back gives the engine's one NaN, as arrays and as rows."""
    import math
    d = DenseRows(2, key=0)
    d.apply(arr(1, 2), [arr(1, 2), np.array([np.nan, 0.5])], arr(1, 1))
    assert d.kinds[1] is float
    assert d.row(1)[1] is math.nan and held(d)[1][1] is math.nan
    assert d.apply(arr(1), [arr(1), np.array([-np.nan])], arr(-1)) is not None
    assert held(d) == {2: (2, 0.5)}
    d.apply_rows([3], [(3, math.nan)], [1])
    assert d.apply_rows([3], [(3, math.nan)], [-1]) == ([3], [])
    d.apply(arr(4), [arr(4), np.array([np.nan])], arr(1))
    d.apply_rows([5], [(5, "text")], [1])                  # the part turns to objects
    assert d.kinds[1] is None and d.row(4)[1] is math.nan
    assert d.apply(arr(4), [arr(4), np.array([np.nan])], arr(-1)) is not None
    d.apply(arr(6), [arr(6), np.array([np.nan])], arr(1))  # floats into objects
    assert d.row(6)[1] is math.nan and held(d)[6][1] is math.nan


def _vote_rows(n: int) -> DenseRows:
    """The vote reader's shape: (id, title, votes), titles objects, votes typed."""
    d = DenseRows(3, key=0)
    keys = np.arange(n, dtype=np.int64)
    d.apply(keys, [keys, obj(*[f"article {i}" for i in range(n)]), keys * 0 + 1],
            np.ones(n, dtype=np.int64))
    return d


def _update(d: DenseRows, keys: list[int], new: list[tuple]) -> None:
    """Rewrite each key's row in place: its row out, ``new`` in, in one batch."""
    old = [d.get(k) for k in keys]
    rows = old + new
    assert d.apply(arr(*(keys + keys)), [dense.column([r[i] for r in rows]) for i in range(3)],
                   arr(*([-1] * len(keys) + [1] * len(keys)))) is not None


def test_a_delta_leaves_out_the_parts_rewritten_with_the_same_values():
    """The vote reader: a vote rewrites a row's count and its title, the very object it
    held; a checkpoint's delta carries the counts only, and brings a copy up to date."""
    live = _vote_rows(50)
    copy = live.copy()
    live.changed(arr())                         # (what the store holds: as of now)
    keys = [3, 7, 40]
    _update(live, keys, [(k, live.get(k)[1], 2) for k in keys])
    delta = live.changed(arr(*keys))
    assert delta.parts[0] is None and delta.parts[1] is None, "key and title left out"
    assert delta.parts[2] is not None and delta.parts[2].tolist() == [2, 2, 2]
    assert delta.present is None, "every key kept its row: no mask"
    copy.put(delta)
    assert held(copy) == held(live)
    # nothing changed since: the next delta leaves every part out
    assert all(p is None for p in live.changed(arr()).parts)


def test_a_delta_leaves_out_the_parts_a_few_rows_rewrote_with_the_same_values():
    """The same, for a batch of a few rows (``apply_rows``: at Figure 3's 80% load,
    inserts of a few votes came this way, and each then put the reader's titles in its
    next checkpoint); a row gained touches every part."""
    live = _vote_rows(50)
    copy = live.copy()
    live.changed(arr())
    keys = [3, 7]
    rows = [live.get(k) for k in keys]
    assert live.apply_rows(keys + keys, rows + [(k, live.get(k)[1], 5) for k in keys],
                           [-1, -1, 1, 1]) is not None
    delta = live.changed(arr(*keys))
    assert delta.parts[0] is None and delta.parts[1] is None, "key and title left out"
    assert delta.parts[2].tolist() == [5, 5] and delta.present is None
    copy.put(delta)
    assert held(copy) == held(live)
    assert live.apply_rows([60], [(60, "new", 1)], [1]) is not None
    delta = live.changed(arr(60))
    assert all(p is not None for p in delta.parts)
    assert delta.present is not None and delta.present.tolist() == [True]
    copy.put(delta)
    assert held(copy) == held(live) and len(copy) == len(live) == 51


@pytest.mark.parametrize("key_objects", [False, True])
def test_a_typed_key_parts_entries_in_a_delta_are_the_keys_themselves(key_objects):
    """A typed key part holds k at every key k: a delta hands ``keys`` as its entries,
    no gather (an object key part is gathered), and a copy brought up to date by it
    reads back the keys that came and went, typed or objects as the live state."""
    live = DenseRows(2, key=0)
    ks = obj(1, 2, 3) if key_objects else arr(1, 2, 3)
    live.apply(arr(1, 2, 3), [ks, obj("a", "b", "c")], arr(1, 1, 1))
    copy = live.copy()
    live.changed(arr())
    ks = obj(2, 5, 7) if key_objects else arr(2, 5, 7)
    assert live.apply(arr(2, 5, 7), [ks, obj("b", "e", "g")], arr(-1, 1, 1)) is not None
    delta = live.changed(arr(2, 5, 7))
    assert (delta.parts[0] is delta.keys) is not key_objects
    assert delta.parts[0].tolist() == ([None, 5, 7] if key_objects else [2, 5, 7])
    copy.put(delta)
    assert held(copy) == held(live) == {1: (1, "a"), 3: (3, "c"), 5: (5, "e"), 7: (7, "g")}
    assert copy.parts[0].dtype == live.parts[0].dtype


@pytest.mark.parametrize("by_rows", [False, True])
@pytest.mark.parametrize("old, new", [
    (1, 1.0), (1.0, 1), (1, True), (0.0, -0.0), (-0.0, 0.0), ("ab", "".join(["a", "b"])),
])
def test_a_part_rewritten_with_equal_values_of_another_kind_or_object_is_in_the_delta(
        old, new, by_rows):
    """Equal is not the same: 1 and 1.0 and True, 0.0 and -0.0, two equal strings,
    the copy a checkpoint restores must read back what the state read; as arrays
    (``apply``) or row by row (``apply_rows``)."""
    live = DenseRows(2, key=0)
    live.apply(arr(1, 2), [arr(1, 2), dense.column([old, old])], arr(1, 1))
    copy = live.copy()
    live.changed(arr())
    if by_rows:
        assert live.apply_rows([1, 1], [live.get(1), (1, new)], [-1, 1]) is not None
    else:
        assert live.apply(arr(1, 1), [arr(1, 1), dense.column([live.get(1)[1], new])],
                          arr(-1, 1)) is not None
    delta = live.changed(arr(1))
    assert delta.parts[1] is not None
    copy.put(delta)
    assert repr(sorted(held(copy).items())) == repr(sorted(held(live).items()))


@pytest.mark.parametrize("key_objects", [False, True])
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(
    st.lists(st.tuples(st.integers(0, 12),
                       st.sampled_from(["same", "insert-or-remove", 1, 1.0, True, -0.0, 0.0,
                                        "s", "fresh s", None])),
             max_size=10, unique_by=lambda x: x[0]),
    st.booleans(), st.booleans()), min_size=1, max_size=14))
def test_deltas_of_rewrites_in_place_bring_a_copy_up_to_date(key_objects, plan):
    """Batches that rewrite rows in place (with the value held, an equal one of another
    kind or object, or another), insert and remove, each applied as arrays (``apply``)
    or row by row (``apply_rows``, a batch of a few rows), and at random points a delta
    of the keys changed since the last one put into a copy: the copy reads back exactly
    what the live rows read (``repr``: 1 is not 1.0 nor True, -0.0 is not 0.0)."""
    live = DenseRows(3, key=0)
    copy = live.copy()
    changed: set[int] = set()
    marks = dense.KeyMarks()            # (what the state marks as it applies)
    for ops, sync, by_rows in plan:
        keys, signs, rows = [], [], []
        for k, what in ops:
            row = live.get(k)
            if what == "insert-or-remove":
                keys.append(k)
                signs.append(-1 if row is not None else 1)
                rows.append(row if row is not None else (k, "s", k))
                continue
            if row is None:
                continue
            value = (row[1] if what == "same" else "".join(["s"]) if what == "fresh s"
                     else what)
            keys += [k, k]
            signs += [-1, 1]
            rows += [row, (k, value, row[2] if k % 2 else k * 10 + len(keys))]
        if keys and by_rows:
            assert live.apply_rows(keys, rows, signs, marks) is not None
            changed.update(keys)
        elif keys:
            cols = [dense.column([r[i] for r in rows]) for i in range(3)]
            if key_objects:     # (a key column that came as objects)
                cols[0] = dense.object_column([r[0] for r in rows])
            res = live.apply(np.array(keys, dtype=np.int64), cols,
                             np.array(signs, dtype=np.int64), marks)
            assert res is not None
            changed.update(keys)
        if sync:
            # the state marked each key the batches wrote (each once a batch: an update
            # is one mark, not two)
            taken = marks.take()
            assert taken.tolist() == sorted(changed)
            copy.put(live.changed(taken))
            changed = set()
            assert len(copy) == len(live)
            assert repr(sorted(held(copy).items())) == repr(sorted(held(live).items()))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.lists(st.integers(0, 300), max_size=8), st.booleans(),
                                st.sampled_from(["add", "take", "clear"])), max_size=40),
       held=st.sampled_from([1, 2, 5, tuning.MARKS_HELD]))
def test_key_marks_take_every_key_added_since_the_last_take(steps, held):
    """Keys held as they come (arrays or lists), marked at ``take`` or once ``MARKS_HELD``
    batches' keys have piled up: ``take`` gives the union of the keys added since the
    last one (or the last ``clear``), ascending, and ``bool`` says whether there is
    any. One ``KeyMarks`` serves every step, its bool array kept: an array's keys come
    with the tightest bound (one past the largest), a list's with none, so a take after
    one of larger keys reads a shorter prefix than the array holds, and must find it
    cleared."""
    shipped, tuning.MARKS_HELD = tuning.MARKS_HELD, held
    try:
        marks, want = dense.KeyMarks(), set()
        for keys, as_list, then in steps:
            marks.add(list(keys) if as_list else np.array(keys, dtype=np.int64),
                      0 if as_list else max(keys, default=-1) + 1)
            want.update(keys)
            assert bool(marks) == bool(want)
            if then == "take":
                assert marks.take().tolist() == sorted(want)
                want = set()
                assert not marks
            elif then == "clear":
                marks.clear()
                want = set()
                assert not marks
        assert marks.take().tolist() == sorted(want)
        assert not marks.marked.any()           # (all False between takes)
    finally:
        tuning.MARKS_HELD = shipped
