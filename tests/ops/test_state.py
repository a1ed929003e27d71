"""Keyed buckets (noria_py/ops/state.py): one bare row, or a {row: count} dict."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

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
