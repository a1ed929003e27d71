"""Inner and left equi-joins (noria_py/ops/join.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Join

from .helpers import Tracker, dels, ins, ms

L, R = 0, 1
PAD = (None, None)


def join(kind: str) -> Tracker:
    # left rows: (id, key, lv)   right rows: (key, rv)
    return Tracker(Join(kind, (1,), (0,), 3, 2))


# ---------------------------------------------------------------- inner join

def test_inner_join_basic_both_orders():
    j = join("inner")
    assert not j.feed(L, ins((1, "a", 10)))
    out = j.feed(R, ins(("a", "x")))
    assert list(out) == [((1, "a", 10, "a", "x"), 1)]
    out = j.feed(L, ins((2, "a", 20), (3, "b", 30)))
    assert list(out) == [((2, "a", 20, "a", "x"), 1)]
    j.check()
    assert j.state() == {(1, "a", 10, "a", "x"): 1, (2, "a", 20, "a", "x"): 1}


def test_inner_join_multiple_matches_and_deletes():
    j = join("inner")
    j.feed(R, ins(("a", "x"), ("a", "y")))
    out = j.feed(L, ins((1, "a", 0)))
    assert ms(out) == {(1, "a", 0, "a", "x"): 1, (1, "a", 0, "a", "y"): 1}
    out = j.feed(R, dels(("a", "x")))
    assert list(out) == [((1, "a", 0, "a", "x"), -1)]
    out = j.feed(L, dels((1, "a", 0)))
    assert list(out) == [((1, "a", 0, "a", "y"), -1)]
    assert j.state() == {}
    j.check()


def test_inner_join_duplicates_multiply():
    j = join("inner")
    j.feed(L, ins((1, "a", 0), (1, "a", 0)))
    out = j.feed(R, ins(("a", "x"), ("a", "x")))
    assert ms(out) == {(1, "a", 0, "a", "x"): 4}
    out = j.feed(L, dels((1, "a", 0)))
    assert ms(out) == {(1, "a", 0, "a", "x"): -2}
    j.check()
    assert j.state() == {(1, "a", 0, "a", "x"): 2}


def test_inner_join_null_keys_match_nothing():
    j = join("inner")
    assert not j.feed(L, ins((1, None, 0)))
    assert not j.feed(R, ins((None, "x")))
    assert not j.feed(L, ins((2, None, 0)))
    assert not j.feed(R, dels((None, "x")))
    assert not j.feed(L, dels((1, None, 0)))
    j.check()
    assert j.state() == {}


def test_inner_join_multiplicities_in_signs():
    j = join("inner")
    j.feed(R, Batch([("a", "x")], [2]))
    out = j.feed(L, Batch([(1, "a", 0)], [3]))
    assert list(out) == [((1, "a", 0, "a", "x"), 6)]
    out = j.feed(R, Batch([("a", "x")], [-1]))
    assert list(out) == [((1, "a", 0, "a", "x"), -3)]
    j.check()


def test_compound_keys_and_null_in_one_part():
    j = Tracker(Join("inner", (0, 1), (1, 0), 3, 3))
    j.feed(L, ins((1, "a", "l1"), (1, None, "l2"), (2, "a", "l3")))
    out = j.feed(R, ins(("a", 1, "r1"), (None, 1, "r2"), ("a", 2, "r3"), ("b", 1, "r4")))
    assert ms(out) == {(1, "a", "l1", "a", 1, "r1"): 1, (2, "a", "l3", "a", 2, "r3"): 1}
    j.check()


def test_cross_join_with_empty_keys():
    j = Tracker(Join("inner", (), (), 1, 1))
    j.feed(L, ins((1,), (None,)))
    out = j.feed(R, ins(("x",), ("y",)))
    assert ms(out) == {(1, "x"): 1, (1, "y"): 1, (None, "x"): 1, (None, "y"): 1}
    j.feed(L, dels((None,)))
    j.check()
    assert j.state() == {(1, "x"): 1, (1, "y"): 1}


def test_join_int_and_float_keys_match():
    j = join("inner")
    j.feed(L, ins((1, 1, 0)))
    out = j.feed(R, ins((1.0, "x")))
    assert ms(out) == {(1, 1, 0, 1.0, "x"): 1}


# ---------------------------------------------------------------- left join

def test_left_row_without_match_is_padded():
    j = join("left")
    out = j.feed(L, ins((1, "a", 0)))
    assert list(out) == [((1, "a", 0) + PAD, 1)]
    j.check()


def test_padding_replaced_when_right_arrives_and_restored_when_it_goes():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    out = j.feed(R, ins(("a", "x")))
    assert ms(out) == {(1, "a", 0) + PAD: -1, (1, "a", 0, "a", "x"): 1}
    assert j.state() == {(1, "a", 0, "a", "x"): 1}
    # a second match does not touch the padding
    out = j.feed(R, ins(("a", "y")))
    assert list(out) == [((1, "a", 0, "a", "y"), 1)]
    # deleting one of two matches: still no padding
    out = j.feed(R, dels(("a", "x")))
    assert list(out) == [((1, "a", 0, "a", "x"), -1)]
    # deleting the last match brings the padding back
    out = j.feed(R, dels(("a", "y")))
    assert ms(out) == {(1, "a", 0, "a", "y"): -1, (1, "a", 0) + PAD: 1}
    assert j.state() == {(1, "a", 0) + PAD: 1}
    j.check()


def test_left_row_arriving_after_its_matches():
    j = join("left")
    j.feed(R, ins(("a", "x"), ("a", "y"), ("b", "z")))
    out = j.feed(L, ins((1, "a", 0)))
    assert ms(out) == {(1, "a", 0, "a", "x"): 1, (1, "a", 0, "a", "y"): 1}
    out = j.feed(L, dels((1, "a", 0)))
    assert ms(out) == {(1, "a", 0, "a", "x"): -1, (1, "a", 0, "a", "y"): -1}
    assert j.state() == {}
    j.check()


def test_duplicate_left_rows_padding():
    j = join("left")
    j.feed(L, ins((1, "a", 0), (1, "a", 0)))
    assert j.state() == {(1, "a", 0) + PAD: 2}
    out = j.feed(R, ins(("a", "x")))
    assert ms(out) == {(1, "a", 0) + PAD: -2, (1, "a", 0, "a", "x"): 2}
    out = j.feed(L, dels((1, "a", 0)))
    assert ms(out) == {(1, "a", 0, "a", "x"): -1}
    out = j.feed(R, dels(("a", "x")))
    assert ms(out) == {(1, "a", 0, "a", "x"): -1, (1, "a", 0) + PAD: 1}
    assert j.state() == {(1, "a", 0) + PAD: 1}
    j.check()


def test_several_left_rows_on_one_key():
    j = join("left")
    j.feed(L, ins((1, "a", 0), (2, "a", 1), (3, "b", 2)))
    out = j.feed(R, ins(("a", "x")))
    assert ms(out) == {(1, "a", 0) + PAD: -1, (2, "a", 1) + PAD: -1,
                       (1, "a", 0, "a", "x"): 1, (2, "a", 1, "a", "x"): 1}
    assert j.state() == {(1, "a", 0, "a", "x"): 1, (2, "a", 1, "a", "x"): 1, (3, "b", 2) + PAD: 1}
    j.check()


def test_left_null_key_always_padded_right_null_key_ignored():
    j = join("left")
    out = j.feed(L, ins((1, None, 0)))
    assert list(out) == [((1, None, 0) + PAD, 1)]
    assert not j.feed(R, ins((None, "x")))
    assert j.state() == {(1, None, 0) + PAD: 1}
    j.check()
    out = j.feed(L, ins((2, None, 0)))
    assert list(out) == [((2, None, 0) + PAD, 1)]
    assert not j.feed(R, dels((None, "x")))
    out = j.feed(L, dels((1, None, 0)))
    assert list(out) == [((1, None, 0) + PAD, -1)]
    j.check()
    assert j.state() == {(2, None, 0) + PAD: 1}


def test_left_row_deleted_while_padded():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    out = j.feed(L, dels((1, "a", 0)))
    assert list(out) == [((1, "a", 0) + PAD, -1)]
    # a right row now pads nothing
    assert not j.feed(R, ins(("a", "x")))
    assert j.state() == {}
    j.check()


def test_right_delete_and_reinsert_in_one_batch_keeps_match():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    j.feed(R, ins(("a", "x")))
    # an upstream aggregate's -old/+new for the same key
    out = j.feed(R, Batch([("a", "x"), ("a", "y")], [-1, 1]))
    assert ms(out) == {(1, "a", 0, "a", "x"): -1, (1, "a", 0, "a", "y"): 1}
    assert j.state() == {(1, "a", 0, "a", "y"): 1}
    j.check()


def test_right_insert_and_delete_in_one_batch_nets_to_nothing():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    out = j.feed(R, Batch([("a", "x"), ("a", "x")], [1, -1]))
    assert ms(out) == {}
    assert j.state() == {(1, "a", 0) + PAD: 1}
    j.check()


def test_left_join_right_multiplicity_signs():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    out = j.feed(R, Batch([("a", "x")], [2]))
    assert ms(out) == {(1, "a", 0) + PAD: -1, (1, "a", 0, "a", "x"): 2}
    out = j.feed(R, Batch([("a", "x")], [-2]))
    assert ms(out) == {(1, "a", 0) + PAD: 1, (1, "a", 0, "a", "x"): -2}
    j.check()


def test_left_row_inserted_and_deleted_in_one_batch():
    j = join("left")
    out = j.feed(L, Batch([(1, "a", 0), (1, "a", 0)], [1, -1]))
    assert ms(out) == {}
    assert j.state() == {}
    assert not j.feed(R, ins(("a", "x")))
    j.check()


def test_reset_forgets_state():
    j = join("left")
    j.feed(L, ins((1, "a", 0)))
    j.feed(R, ins(("a", "x")))
    j.op.reset()
    assert not j.op.snapshot()
    out = j.op.process(L, ins((2, "a", 0)))
    assert list(out) == [((2, "a", 0) + PAD, 1)]


def test_describe():
    assert Join("left", (1,), (0,), 3, 2).describe() == "left join [1]=[0]"
    assert Join("inner", (1,), (0,), 3, 2).stateful


# ---------------------------------------------------------------- properties

def recompute(kind, lm: dict, rm: dict, lkeys, rkeys, rwidth) -> dict:
    out: dict = {}
    for l, lc in lm.items():
        k = tuple(l[i] for i in lkeys)
        matched = False
        if None not in k:
            for r, rc in rm.items():
                if tuple(r[i] for i in rkeys) == k:
                    matched = True
                    out[l + r] = out.get(l + r, 0) + lc * rc
        if not matched and kind == "left":
            p = l + (None,) * rwidth
            out[p] = out.get(p, 0) + lc
    return {r: c for r, c in out.items() if c}


key = st.none() | st.integers(0, 2)
left_row = st.tuples(st.integers(0, 2), key)
right_row = st.tuples(key, st.integers(0, 1))
op = st.tuples(st.sampled_from([L, R]), st.booleans(), left_row, right_row)


@pytest.mark.parametrize("kind", ["inner", "left"])
@settings(max_examples=50, deadline=None)
@given(batches=st.lists(st.lists(op, min_size=1, max_size=5), max_size=10))
def test_random_join_matches_recomputation(kind, batches):
    j = Tracker(Join(kind, (1,), (0,), 2, 2))
    models = {L: {}, R: {}}
    for ops in batches:
        # a batch per port; a delete only of a row the model holds (after earlier ops)
        pending = {L: Batch(), R: Batch()}
        for port, is_delete, lrow, rrow in ops:
            row = lrow if port == L else rrow
            m = models[port]
            if is_delete and m.get(row, 0) > 0:
                m[row] -= 1
                if not m[row]:
                    del m[row]
                pending[port].add(row, -1)
            else:
                m[row] = m.get(row, 0) + 1
                pending[port].add(row, 1)
        for port in (R, L) if len(ops) % 2 else (L, R):
            if pending[port]:
                j.feed(port, pending[port])
        j.check()
        assert j.state() == recompute(kind, models[L], models[R], (1,), (0,), 2)


# ---------------------------------------------------------------- dense form

def _keyed_batch(model: dict, actions) -> Batch:
    """Deltas for one side keyed by column 0: "set" inserts a key's row or replaces it
    (-old then +new, as an aggregate does), "del" removes it, "dup" adds a second row
    for the key (which dense form refuses)."""
    out = Batch()
    for action, k, v in actions:
        held = [r for r in model if r[0] == k]
        row = (k, v)
        if action == "del" and held:
            out.add(held[0], -1)
            model[held[0]] -= 1
        elif action == "set" and row not in model:
            if held:
                out.add(held[0], -1)
                model[held[0]] -= 1
            out.add(row, 1)
            model[row] = model.get(row, 0) + 1
        elif action == "dup" and held and row not in model:
            out.add(row, 1)
            model[row] = 1
        for r in [r for r, c in model.items() if c == 0]:
            del model[r]
    return out


actions = st.lists(st.tuples(st.sampled_from(["set"] * 6 + ["del"] * 2 + ["dup"]),
                             st.one_of(st.integers(0, 5), st.none()) | st.integers(0, 5),
                             st.integers(0, 3)), max_size=6)


@pytest.mark.parametrize("dense_min", [1, 32], ids=["as-columns", "row-by-row"])
@pytest.mark.parametrize("kind", ["inner", "left"])
@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.tuples(st.sampled_from([L, R]), actions), max_size=14))
def test_dense_form_matches_recomputation_and_dict_form(kind, dense_min, batches):
    """Keyed sides (one row a key, replaced as -old/+new) through a join in dense form,
    every batch big enough for it, and through one held in dicts from the start: the
    same output, the same snapshot, and what recomputation gives, including after a
    NULL key or a second row per key has moved the dense one to dicts. Batches go
    through the array path (every batch big enough) or the row-by-row one."""
    from unittest import mock

    from noria_py import tuning
    arrays = Tracker(Join(kind, (0,), (0,), 2, 2))
    dicts = Tracker(Join(kind, (0,), (0,), 2, 2))
    for side in dicts.op.sides:
        side.to_general()
    models = {L: {}, R: {}}
    with mock.patch.object(tuning, "ARRAY_MIN", dense_min):
        for port, acts in batches:
            b = _keyed_batch(models[port], acts)
            if not b:
                continue
            assert ms(arrays.feed(port, b)) == ms(dicts.feed(port, b))
            arrays.check()
            assert arrays.state() == recompute(kind, models[L], models[R], (0,), (0,), 2)


def test_big_keyed_batches_stay_dense_and_come_out_as_columns():
    import numpy as np
    j = Join("left", (0,), (0,), 2, 2)
    out = j.process(L, Batch.inserts([(k, f"t{k}") for k in range(100)]))
    assert all(s.form == "dense" for s in j.sides) and out.cols is not None
    assert ms(out) == {(k, f"t{k}", None, None): 1 for k in range(100)}
    counts = Batch.columnar([np.arange(50), np.full(50, 1)], np.ones(50, dtype=np.int64))
    out = j.process(R, counts)
    assert all(s.form == "dense" for s in j.sides)
    assert ms(out) == {**{(k, f"t{k}", k, 1): 1 for k in range(50)},
                       **{(k, f"t{k}", None, None): -1 for k in range(50)}}
    keys = np.repeat(np.arange(50), 2)
    bump = Batch.columnar([keys, np.tile([1, 2], 50)], np.tile([-1, 1], 50))
    out = j.process(R, bump)
    assert ms(out) == {**{(k, f"t{k}", k, 1): -1 for k in range(50)},
                       **{(k, f"t{k}", k, 2): 1 for k in range(50)}}
    assert len(j.snapshot()) == 100 and all(s.form == "dense" for s in j.sides)
    # a small batch goes row by row, still in dense form
    out = j.process(R, Batch.deletes([(0, 2)]))
    assert all(s.form == "dense" for s in j.sides) and out.cols is None
    assert ms(out) == {(0, "t0", 0, 2): -1, (0, "t0", None, None): 1}
    # a second right row for a key: the right side in dicts from now on, the left one
    # still in arrays, the answers unchanged
    out = j.process(R, Batch.inserts([(1, 7)]))
    assert [s.form for s in j.sides] == ["dense", "general"] and ms(out) == {(1, "t1", 1, 7): 1}
    assert ms(j.snapshot()) == {**{(k, f"t{k}", k, 2): 1 for k in range(1, 50)},
                                **{(k, f"t{k}", None, None): 1 for k in range(50, 100)},
                                (0, "t0", None, None): 1, (1, "t1", 1, 7): 1}


@pytest.mark.parametrize("kind", ["inner", "left"])
def test_a_right_row_removed_before_it_arrived_matches_nothing(kind):
    """Deltas out of order: the right side holds a count below zero in transit, which a
    left row arriving then must not match (in either form of the right side)."""
    for general in (False, True):
        j = Join(kind, (0,), (0,), 2, 2)
        if general:
            j.sides[R].to_general()
        j.process(R, dels((1, "x")))
        out = j.process(L, ins((1, "a")))
        assert ms(out) == ({} if kind == "inner" else {(1, "a", None, None): 1})
        out = j.process(R, ins((1, "x")))       # it arrives: nothing held, nothing to match
        assert ms(j.snapshot()) == ({} if kind == "inner" else {(1, "a", None, None): 1})


def test_a_negative_key_in_a_big_batch_matches_no_row_of_a_dense_side():
    """The side a columnar batch with a negative key arrives at leaves the dense form;
    the other side, still in arrays, must find no row for that key (a negative index
    would wrap around to the end of its arrays)."""
    import numpy as np
    j = Join("inner", (0,), (0,), 2, 2)
    j.process(L, ins((10, "a")))
    j.process(L, ins((1021, "b")))          # arrays of 1024: -3 would read entry 1021
    assert j.sides[L].form == "dense"
    batch = Batch.columnar([np.full(40, -3), np.arange(40)], np.ones(40, dtype=np.int64))
    assert not j.process(R, batch)
    assert [s.form for s in j.sides] == ["dense", "general"]
    assert ms(j.process(L, ins((-3, "c")))) == {(-3, "c", -3, i): 1 for i in range(40)}


@pytest.mark.parametrize("kind", ["inner", "left"])
def test_a_row_of_markers_is_passed_on_matched_or_not(kind):
    """``poison``: a row of division-by-zero markers (a WHERE that divided by zero) on
    either side of an inner join, or the right side of a left join, is passed on as a
    row of markers, matched or not; its retraction takes it back, and ``snapshot``
    (the Tracker's check) holds one for each such row held. Without ``poison`` (the
    Python API's plans) it matches no real row, as before."""
    from noria_py.divzero import DIV0
    bad_l, bad_r, out = (DIV0,) * 3, (DIV0,) * 2, (DIV0,) * 5
    j = Tracker(Join(kind, (1,), (0,), 3, 2, poison=True))
    j.feed(R, ins(("a", "x")))
    j.feed(L, ins((1, "a", 10)))
    left = list(j.feed(L, ins(bad_l)))
    assert left == ([(out, 1)] if kind == "inner" else [(bad_l + PAD, 1)])
    # (passed on, and matched with the left row of markers: both are rows of markers)
    assert j.feed(R, ins(bad_r)).multiset() == (
        {out: 2} if kind == "inner" else {bad_l + PAD: -1, out: 2})
    j.check()
    j.feed(R, dels(bad_r))
    j.check()
    j.feed(L, dels(bad_l))
    assert j.acc == {(1, "a", 10, "a", "x"): 1}
    plain = Tracker(Join(kind, (1,), (0,), 3, 2))
    plain.feed(R, ins(("a", "x")))
    assert list(plain.feed(L, ins(bad_l))) == ([] if kind == "inner" else [(bad_l + PAD, 1)])


#: a column's values: ints (kept int64), floats with NaN (float64), or mixed (objects)
column_values = st.sampled_from([
    st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=False, width=32),
    st.one_of(st.integers(-3, 3), st.floats(allow_nan=True, width=32),
              st.sampled_from(["x", "y"]), st.none())])


def _side_batches(data, steps: int) -> list[Batch]:
    """Batches that leave one side of width 3 (key, two columns, each of a kind drawn
    from ``column_values``) holding one row at each of some keys 0-40, a later batch
    replacing rows as -old/+new."""
    kinds = data.draw(st.tuples(column_values, column_values))
    held: dict = {}
    out = []
    for _ in range(steps):
        rows = data.draw(st.dictionaries(st.integers(0, 40), st.tuples(*kinds), max_size=25))
        b = Batch()
        for k, row in rows.items():
            if k in held:
                b.add(held[k], -1)
            held[k] = (k, *row)
            b.add(held[k], 1)
        out.append(b)
    return out


@pytest.mark.parametrize("kind", ["inner", "left"])
@settings(max_examples=40, deadline=None)
@given(data=st.data(), steps=st.integers(1, 3))
def test_the_columnar_snapshot_is_the_row_snapshot(kind, data, steps):
    """A join with both sides in arrays (typed, or objects once values of two types
    met; NaN, NULL, text) snapshots in columns (``_dense_snapshot``) the very rows, in
    the same order and of the same types, with the same signs, as the row-by-row
    snapshot: NULL padding where a left join's key has no right row, the one NaN."""
    from unittest import mock

    from noria_py import tuning
    j = Join(kind, (0,), (0,), 3, 3)
    with mock.patch.object(tuning, "ARRAY_MIN", 1):
        for port in (L, R):
            for b in _side_batches(data, steps):
                j.process(port, b)
    assert all(s.form == "dense" for s in j.sides)
    fast, slow = j._dense_snapshot(), j._snapshot_rows()
    assert fast is not None and (fast.cols is not None or not fast)
    assert fast.rows == slow.rows and repr(fast.rows) == repr(slow.rows)
    assert fast.signs == slow.signs
    assert ms(j.snapshot()) == ms(slow)
