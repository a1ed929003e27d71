"""Keyed buckets (noria_py/ops/state.py): one bare row, or a {row: count} dict."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.ops.state import count, expand, index_add, items


def test_one_row_is_kept_bare_and_more_become_a_dict():
    ix: dict = {}
    index_add(ix, 1, (1, "a"), 1)
    assert ix == {1: (1, "a")}
    index_add(ix, 1, (1, "a"), 1)                # a second copy
    assert ix == {1: {(1, "a"): 2}}
    index_add(ix, 1, (1, "a"), -2)
    assert ix == {}
    index_add(ix, 2, (2, "b"), 1)
    index_add(ix, 2, (2, "c"), 1)                # a second row
    assert ix == {2: {(2, "b"): 1, (2, "c"): 1}}
    index_add(ix, 2, (2, "b"), -1)               # back to one row: bare again
    assert ix[2] == (2, "c")
    index_add(ix, 2, (2, "b"), 1)
    index_add(ix, 3, (3, "x"), -1)               # removed before it arrived
    assert ix[3] == {(3, "x"): -1} and count(ix[3]) == -1
    index_add(ix, 3, (3, "x"), 1)
    assert 3 not in ix
    index_add(ix, 4, (4, "y"), 1)
    index_add(ix, 4, (4, "z"), -1)               # not the row held
    assert ix[4] == {(4, "y"): 1, (4, "z"): -1} and count(ix[4]) == 0
    index_add(ix, 4, (4, "y"), 1)
    index_add(ix, 4, (4, "z"), 1)                # one row, two copies: stays a dict
    assert ix[4] == {(4, "y"): 2}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from([1, -1, 2])),
                max_size=30))
def test_buckets_hold_the_multiset(ops):
    ix: dict = {}
    model: dict = {}
    for k, v, s in ops:
        index_add(ix, k, (k, v), s)
        c = model.setdefault(k, Counter())
        c[(k, v)] += s
    for k, c in model.items():
        want = {r: n for r, n in c.items() if n}
        got = dict(items(ix[k])) if k in ix else {}
        assert got == want
        assert count(ix.get(k)) == sum(want.values())
        out: list = []
        if k in ix:
            expand(ix[k], out)
        assert Counter(out) == Counter({r: n for r, n in want.items() if n > 0})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from([1, -1, 2])),
                max_size=30))
def test_index_batch_is_index_add_in_turn(ops):
    from noria_py.ops.state import index_batch
    one: dict = {}
    for k, v, s in ops:
        index_add(one, k, (k, v), s)
    batch: dict = {}
    index_batch(batch, [k for k, _, _ in ops], [(k, v) for k, v, _ in ops],
                [s for _, _, s in ops])
    assert batch == one


# ---------------------------------------------------------------- KeyedState, KeyedCounts

def _batch(deltas, columnar):
    """Rows (key, value) with signs, as rows or as columns."""
    import numpy as np

    from noria_py.batch import Batch
    from noria_py.ops.dense import column
    b = Batch([(k, v) for k, v, _ in deltas], [s for _, _, s in deltas])
    if not columnar or not deltas:
        return b
    return Batch.columnar([column(list(c)) for c in zip(*b.rows)],
                          np.array(b.signs, dtype=np.int64))


#: deltas that keep one row a key often (the dense form's shape) and break it sometimes
_deltas = st.lists(st.tuples(st.integers(0, 6) | st.sampled_from([-1, 2.5, "k", None]),
                             st.integers(0, 2), st.sampled_from([1, -1, 1, 2])),
                   max_size=12)


def _holds(model: dict, key) -> bool:
    """Whether ``key`` holds rows: its rows' counts add up to more than 0."""
    return sum(n for (k, _), n in model.items() if k == key) > 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_deltas, st.booleans()), max_size=8), st.sampled_from([1, 32]))
def test_keyed_state_holds_the_multiset_in_either_form(batches, dense_min):
    """A state that starts dense and one held in its general form from the start, fed
    the same batches (as rows or columns, applied whole or row by row): both hold the
    multiset of every delta so far, read the same through get/items/rows/snapshot,
    report the same flips, and restore(snapshot()) gives an equal state."""
    from unittest import mock

    from noria_py import tuning
    from noria_py.ops.state import KeyedState
    fast, plain = KeyedState(2, (0,)), KeyedState(2, (0,))
    plain.to_general()
    model: Counter = Counter()
    with mock.patch.object(tuning, "ARRAY_MIN", dense_min):
        for deltas, columnar in batches:
            b = _batch(deltas, columnar)
            before = dict(model)
            for k, v, s in deltas:
                model[(k, v)] += s
            touched = {k for k, _, _ in deltas}
            was = {k for k in touched if _holds(before, k)}
            now = {k for k in touched if _holds(model, k)}
            for st_ in (fast, plain):
                gone, came = st_.apply(*st_.prepare(b), track=True)
                assert set(gone) == was - now and set(came) == now - was
    want = {r: n for r, n in model.items() if n}
    for s_ in (fast, plain):
        got: Counter = Counter()
        for _, bucket in s_.items():
            for r, c in items(bucket):
                got[r] += c
        assert dict(got) == want
        assert Counter(s_.rows()) == Counter({r: n for r, n in want.items() if n > 0})
        assert s_.snapshot().multiset() == want
        for k in {k for k, _ in want} | {0, 7, "x"}:
            bucket = s_.get(k)
            assert (dict(items(bucket)) if bucket is not None else {}) == \
                {r: n for r, n in want.items() if r[0] == k}
        again = KeyedState(2, (0,))
        again.restore(s_.snapshot())
        assert again.snapshot().multiset() == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 6) | st.sampled_from([-1, "k"]),
                                             st.sampled_from([1, -1, 2])), max_size=40),
                          st.booleans()), max_size=8))
def test_keyed_counts_in_an_array_match_a_dict(batches):
    """KeyedCounts in its array form and in its dict form, fed the same keys (as arrays
    where they are ints, or as lists): the same counts before and after for every key
    touched, and the same counts held."""
    import numpy as np

    from noria_py.ops.state import KeyedCounts
    fast, plain = KeyedCounts(), KeyedCounts()
    plain.to_general()
    model: Counter = Counter()
    for deltas, as_array in batches:
        keys, signs = [k for k, _ in deltas], [s for _, s in deltas]
        ints = all(type(k) is int for k in keys)
        before = dict(model)
        for k, s in deltas:
            model[k] += s
        for c in (fast, plain):
            if as_array and ints:
                got = c.add(np.array(keys, dtype=np.int64), np.array(signs, dtype=np.int64))
            else:
                got = c.add(keys, signs)
            touched, old, new = (g.tolist() if isinstance(g, np.ndarray) else g for g in got)
            assert sorted(touched, key=repr) == sorted(set(keys), key=repr)
            assert old == [before.get(k, 0) for k in touched]
            assert new == [model[k] for k in touched]
    want = {k: n for k, n in model.items() if n}
    for c in (fast, plain):
        assert dict(c.items()) == want and len(c) == len(want)
        assert all(c.get(k) == n for k, n in want.items()) and c.get(99) == 0
    if fast.form == "dense":
        keys, counts = fast.positive()
        assert dict(zip(keys.tolist(), counts.tolist())) == {k: n for k, n in want.items() if n > 0}


def test_a_state_kept_by_slot():
    """``KeyedState(..., slots=True)`` (a partial node's): rows applied under the slots
    the caller gives, kept whole (the key column included), read and dropped by slot,
    in arrays while each slot holds one row and in a dict afterwards; ``layout`` moves
    when a key's bytes may have changed without a write to it."""
    import numpy as np

    from noria_py.batch import Batch
    from noria_py.ops.state import KeyedState

    s = KeyedState(2, (0,), slots=True)
    batch = Batch.inserts([(1000 + i, f"v{i}") for i in range(40)])
    keys, batch = s.prepare_slots(np.arange(40), batch)
    assert isinstance(keys, np.ndarray) and batch.cols is not None
    s.apply(keys, batch)
    assert s.form == "dense" and s.get(3) == (1003, "v3") and len(s.dense.present) < 1000
    layout = s.layout()
    s.apply(*s.prepare_slots([40], Batch.inserts([(2000, "w")])))
    assert s.layout() == layout             # (the same types: no key's bytes moved)
    one = s.entry_bytes(3)
    assert one > 17 and s.entry_bytes(99) == 0
    s.drop(3)
    assert s.get(3) is None and len(s) == 40
    s.apply(*s.prepare_slots([4], Batch.inserts([(1004, "again")])))   # a second row
    assert s.form == "general" and s.layout() != layout
    assert sorted(s.get(4)) == [(1004, "again"), (1004, "v4")]
    assert s.entry_bytes(4) > one
    s.drop(4)
    assert s.get(4) is None and len(s) == 39
