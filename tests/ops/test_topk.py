"""ORDER BY ... LIMIT / OFFSET per partition (noria_py/ops/topk.py)."""
from __future__ import annotations

import functools
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import TopK
from sql_frontend.plan import OrderKey

from .helpers import Tracker, dels, ins, ms, random_batch


def K(order, limit, offset=0, partition=()):
    return Tracker(TopK(tuple(order), limit, offset, tuple(partition)))


ASC0 = OrderKey(0)
DESC0 = OrderKey(0, descending=True, nulls_first=False)


def test_limit_keeps_smallest():
    t = K([ASC0], 2)
    out = t.feed(0, ins((5,), (3,), (9,), (1,)))
    assert ms(out) == {(1,): 1, (3,): 1}
    out = t.feed(0, ins((2,)))
    assert ms(out) == {(3,): -1, (2,): 1}
    assert not t.feed(0, ins((7,)))            # outside the window: nothing
    t.check()


def test_deleting_inside_top_k_refills_from_the_rest():
    t = K([ASC0], 2)
    t.feed(0, ins((5,), (3,), (9,), (1,)))
    out = t.feed(0, dels((1,)))
    assert ms(out) == {(1,): -1, (5,): 1}
    out = t.feed(0, dels((3,), (5,)))
    assert ms(out) == {(3,): -1, (5,): -1, (9,): 1}
    assert t.state() == {(9,): 1}
    out = t.feed(0, dels((9,)))
    assert ms(out) == {(9,): -1}
    assert t.state() == {} and t.op.parts == {}
    t.check()


def test_deleting_outside_the_window_emits_nothing():
    t = K([ASC0], 1)
    t.feed(0, ins((1,), (2,), (3,)))
    assert not t.feed(0, dels((3,)))
    t.check()


def test_offset():
    t = K([ASC0], 2, offset=1)
    t.feed(0, ins((10,), (20,), (30,), (40,)))
    assert t.state() == {(20,): 1, (30,): 1}
    out = t.feed(0, ins((5,)))                  # shifts the window
    assert ms(out) == {(30,): -1, (10,): 1}
    out = t.feed(0, dels((5,)))
    assert ms(out) == {(10,): -1, (30,): 1}
    out = t.feed(0, dels((10,)))               # 20 is now first and skipped
    assert ms(out) == {(20,): -1, (40,): 1}
    assert t.state() == {(30,): 1, (40,): 1}
    t.check()


def test_offset_without_limit():
    t = K([ASC0], None, offset=2)
    t.feed(0, ins((1,), (2,), (3,), (4,)))
    assert t.state() == {(3,): 1, (4,): 1}
    t.feed(0, dels((1,)))
    assert t.state() == {(4,): 1}
    t.check()


def test_offset_past_the_end_and_limit_zero():
    t = K([ASC0], 5, offset=10)
    assert not t.feed(0, ins((1,), (2,)))
    z = K([ASC0], 0)
    assert not z.feed(0, ins((1,), (2,)))
    t.check()
    z.check()


def test_no_limit_no_offset_keeps_everything():
    t = K([ASC0], None)
    t.feed(0, ins((2,), (1,), (1,)))
    assert t.state() == {(1,): 2, (2,): 1}
    t.check()


def test_partitions_are_independent():
    t = K([OrderKey(1)], 1, partition=[0])
    t.feed(0, ins(("a", 5), ("a", 3), ("b", 7), (None, 1), (None, 0)))
    assert t.state() == {("a", 3): 1, ("b", 7): 1, (None, 0): 1}
    out = t.feed(0, dels(("a", 3)))
    assert ms(out) == {("a", 3): -1, ("a", 5): 1}
    out = t.feed(0, dels(("b", 7)))
    assert ms(out) == {("b", 7): -1}
    assert ("b",) not in t.op.parts
    t.check()


def test_compound_partition():
    t = K([OrderKey(2)], 1, partition=[0, 1])
    t.feed(0, ins((1, 1, 9), (1, 1, 8), (1, 2, 7), (2, 1, 6)))
    assert t.state() == {(1, 1, 8): 1, (1, 2, 7): 1, (2, 1, 6): 1}
    t.check()


def test_ties_broken_by_whole_row_whatever_the_insertion_order():
    rows = [(1, "c"), (1, "a"), (1, "b"), (0, "z"), (1, None)]
    results = set()
    for perm in itertools.permutations(rows):
        t = K([ASC0], 3)
        for r in perm:
            t.feed(0, ins(r))
        results.add(frozenset(t.state().items()))
        t.check()
    # ties on column 0 are broken by the whole row, NULLs first
    assert results == {frozenset({((0, "z"), 1), ((1, None), 1), ((1, "a"), 1)})}


def test_ties_refill_deterministically():
    t = K([ASC0], 2)
    t.feed(0, ins((1, "b"), (1, "d"), (1, "a"), (1, "c")))
    assert t.state() == {(1, "a"): 1, (1, "b"): 1}
    out = t.feed(0, dels((1, "a")))
    assert ms(out) == {(1, "a"): -1, (1, "c"): 1}
    t.check()


def test_duplicate_rows_in_window():
    t = K([ASC0], 3)
    t.feed(0, ins((1,), (1,), (2,), (2,)))
    assert t.state() == {(1,): 2, (2,): 1}
    out = t.feed(0, dels((1,)))
    assert ms(out) == {(1,): -1, (2,): 1}
    assert t.state() == {(1,): 1, (2,): 2}
    t.check()


def test_multiplicity_signs():
    t = K([ASC0], 2)
    t.feed(0, Batch([(3,), (1,)], [2, 3]))
    assert t.state() == {(1,): 2}
    t.feed(0, Batch([(1,)], [-2]))
    assert t.state() == {(1,): 1, (3,): 1}
    t.check()


def test_descending_nulls_last():
    t = K([DESC0], 3)
    t.feed(0, ins((None,), (1,), (5,), (None,), (3,)))
    assert t.state() == {(5,): 1, (3,): 1, (1,): 1}
    t.feed(0, dels((5,), (3,)))
    assert t.state() == {(1,): 1, (None,): 2}
    t.check()


def test_descending_nulls_first():
    t = K([OrderKey(0, descending=True, nulls_first=True)], 2)
    t.feed(0, ins((1,), (None,), (5,), (3,)))
    assert t.state() == {(None,): 1, (5,): 1}
    t.feed(0, dels((None,)))
    assert t.state() == {(5,): 1, (3,): 1}
    t.check()


def test_ascending_nulls_first_and_last():
    first = K([ASC0], 2)
    first.feed(0, ins((2,), (None,), (1,)))
    assert first.state() == {(None,): 1, (1,): 1}
    last = K([OrderKey(0, nulls_first=False)], 2)
    last.feed(0, ins((2,), (None,), (1,)))
    assert last.state() == {(1,): 1, (2,): 1}


def test_descending_text_and_ties_within_descending():
    t = K([OrderKey(0, descending=True, nulls_first=False)], 2)
    t.feed(0, ins(("b", 2), ("c", 1), ("c", 0), (None, 9), ("a", 5)))
    # DESC on column 0; the tie between the "c" rows goes to the smaller whole row
    assert t.state() == {("c", 0): 1, ("c", 1): 1}
    t.feed(0, dels(("c", 0)))
    assert t.state() == {("c", 1): 1, ("b", 2): 1}
    t.check()


def test_multi_key_order():
    t = K([OrderKey(0), OrderKey(1, descending=True, nulls_first=False)], 3)
    t.feed(0, ins((1, 1), (1, 3), (1, None), (0, 0), (2, 9)))
    assert t.state() == {(0, 0): 1, (1, 3): 1, (1, 1): 1}
    t.feed(0, dels((1, 3)))
    assert t.state() == {(0, 0): 1, (1, 1): 1, (1, None): 1}
    t.check()


def test_reset_and_describe():
    t = TopK((ASC0,), 3, 1, (0,))
    t.process(0, ins((1,)))
    t.reset()
    assert not t.snapshot() and t.parts == {}
    assert t.describe() == "topk 3 offset 1 per [0]"
    assert t.stateful


# ---------------------------------------------------------------- properties

def _cmp_val(a, b):
    return (a > b) - (a < b)


def reference_sort(rows, order):
    """ORDER BY ``order`` written out by hand, ties broken by the whole row (NULLs first)."""
    def cmp(x, y):
        for o in order:
            a, b = x[o.column], y[o.column]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                # NULL vs value
                null_first = o.nulls_first
                return (-1 if null_first else 1) if a is None else (1 if null_first else -1)
            c = _cmp_val(a, b)
            if c:
                return -c if o.descending else c
        for a, b in zip(x, y):
            if a is None or b is None:
                if a is None and b is None:
                    continue
                return -1 if a is None else 1
            c = _cmp_val(a, b)
            if c:
                return c
        return 0
    return sorted(rows, key=functools.cmp_to_key(cmp))


def recompute(model: dict, order, limit, offset, partition) -> dict:
    parts: dict = {}
    for r, c in model.items():
        parts.setdefault(tuple(r[i] for i in partition), []).extend([r] * c)
    out: dict = {}
    for rows in parts.values():
        end = None if limit is None else offset + limit
        for r in reference_sort(rows, order)[offset:end]:
            out[r] = out.get(r, 0) + 1
    return out


CONFIGS = [
    ((OrderKey(1),), 2, 0, (0,)),
    ((OrderKey(1, descending=True, nulls_first=False),), 2, 1, (0,)),
    ((OrderKey(1, descending=True, nulls_first=True), OrderKey(2)), 3, 0, ()),
    ((OrderKey(2, nulls_first=False), OrderKey(1, descending=True)), None, 1, (0,)),
    ((OrderKey(1),), 1, 0, ()),
]


@pytest.mark.parametrize("order,limit,offset,partition", CONFIGS)
@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.lists(st.tuples(st.booleans(), st.tuples(
    st.none() | st.integers(0, 1), st.none() | st.integers(0, 3),
    st.none() | st.sampled_from(["x", "y"]))), min_size=1, max_size=5), max_size=12))
def test_random_topk_matches_recomputation(order, limit, offset, partition, ops):
    t = Tracker(TopK(order, limit, offset, partition))
    model: dict = {}
    for batch_ops in ops:
        t.feed(0, random_batch(model, batch_ops))
        t.check()
        assert t.state() == recompute(model, order, limit, offset, partition)


def test_reference_sort_agrees_with_a_shuffle():
    rows = [(None, 1, "a"), (1, None, "b"), (1, 2, None), (0, 2, "c"), (None, None, None)]
    order = (OrderKey(1, descending=True, nulls_first=False), OrderKey(0))
    expected = reference_sort(rows, order)
    assert expected == [(0, 2, "c"), (1, 2, None), (None, 1, "a"), (None, None, None),
                        (1, None, "b")]
    rnd = random.Random(1)
    for _ in range(5):
        shuffled = rows[:]
        rnd.shuffle(shuffled)
        t = TopK(order, 10, 0, ())
        t.process(0, Batch.inserts(shuffled))
        (part,) = t.parts.values()
        assert list(part) == expected


def test_nan_is_above_every_number_and_its_row_can_leave():
    """NaN sorts after +inf ascending and first descending (PostgreSQL; rows hold the
    engine's one NaN, noria_py/nan.py), and a NaN row deleted lets the next one in."""
    import math
    nan, inf = math.nan, math.inf
    asc = K([ASC0], 2)
    asc.feed(0, ins((nan, 1), (inf, 2), (nan, 3)))
    assert ms(asc.op.snapshot()) == {(inf, 2): 1, (nan, 1): 1}
    out = asc.feed(0, ins((1.0, 4)))
    assert ms(out) == {(nan, 1): -1, (1.0, 4): 1}
    asc.feed(0, dels((inf, 2), (1.0, 4)))
    assert ms(asc.op.snapshot()) == {(nan, 1): 1, (nan, 3): 1}
    asc.check()
    desc = K([DESC0], 1)
    desc.feed(0, ins((inf, 1), (nan, 2), (None, 3)))
    assert ms(desc.op.snapshot()) == {(nan, 2): 1}
    out = desc.feed(0, dels((nan, 2)))
    assert ms(out) == {(nan, 2): -1, (inf, 1): 1}
    desc.check()
