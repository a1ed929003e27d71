"""MIN and MAX per group (noria_py/ops/extremum.py)."""
from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Extremum

from .helpers import Tracker, agg, dels, ins, ms, random_batch, recompute_aggregate

MIN, MAX = agg("min", 1), agg("max", 1)


def E(group_by=(0,), *aggs) -> Tracker:
    return Tracker(Extremum(group_by, tuple(aggs) or (MIN, MAX)))


def test_kind():
    e = Extremum((0,), (MIN,))
    assert e.kind == "extremum" and e.stateful
    assert e.describe() == "extremum by [0]: min(1)"


def test_min_max_basic():
    e = E()
    out = e.feed(0, ins(("g", 5), ("g", 3), ("g", 9)))
    assert list(out) == [(("g", 3, 9), 1)]
    e.check()


def test_deleting_current_min_and_max_reveals_next():
    e = E()
    e.feed(0, ins(("g", 5), ("g", 3), ("g", 9), ("g", 7)))
    out = e.feed(0, dels(("g", 3)))
    assert list(out) == [(("g", 3, 9), -1), (("g", 5, 9), 1)]
    out = e.feed(0, dels(("g", 9)))
    assert list(out) == [(("g", 5, 9), -1), (("g", 5, 7), 1)]
    out = e.feed(0, dels(("g", 5)))
    assert list(out) == [(("g", 5, 7), -1), (("g", 7, 7), 1)]
    out = e.feed(0, dels(("g", 7)))
    assert list(out) == [(("g", 7, 7), -1)]
    assert e.state() == {}
    e.check()


def test_duplicate_extremes_survive_deleting_one_copy():
    e = E()
    e.feed(0, ins(("g", 1), ("g", 1), ("g", 4), ("g", 8), ("g", 8)))
    assert e.state() == {("g", 1, 8): 1}
    assert not e.feed(0, dels(("g", 1), ("g", 8)))       # ties remain: nothing changes
    assert e.state() == {("g", 1, 8): 1}
    out = e.feed(0, dels(("g", 1)))
    assert list(out) == [(("g", 1, 8), -1), (("g", 4, 8), 1)]
    out = e.feed(0, dels(("g", 8)))
    assert list(out) == [(("g", 4, 8), -1), (("g", 4, 4), 1)]
    e.check()


def test_multiplicity_signs():
    e = E()
    e.feed(0, Batch([("g", 2), ("g", 6)], [3, 2]))
    e.feed(0, Batch([("g", 2)], [-2]))
    assert e.state() == {("g", 2, 6): 1}
    e.feed(0, Batch([("g", 2), ("g", 6)], [-1, -1]))
    assert e.state() == {("g", 6, 6): 1}
    e.check()


def test_extreme_replaced_in_one_batch():
    e = E()
    e.feed(0, ins(("g", 5)))
    out = e.feed(0, Batch([("g", 5), ("g", 6)], [-1, 1]))
    assert list(out) == [(("g", 5, 5), -1), (("g", 6, 6), 1)]
    e.check()


def test_nulls_are_skipped():
    e = E((0,), agg("count_star"), MIN, MAX)
    e.feed(0, ins(("g", None), ("g", 4), ("g", None), ("g", 2)))
    assert e.state() == {("g", 4, 2, 4): 1}
    e.feed(0, dels(("g", 4), ("g", 2)))
    assert e.state() == {("g", 2, None, None): 1}      # only NULLs: MIN/MAX are NULL
    e.feed(0, ins(("g", -1)))
    assert e.state() == {("g", 3, -1, -1): 1}
    e.check()


def test_global_min_max_of_nothing_is_null():
    e = E((), MIN, MAX)
    assert e.state() == {(None, None): 1}
    e.feed(0, ins((0, 3), (0, None)))
    assert e.state() == {(3, 3): 1}
    e.feed(0, dels((0, 3), (0, None)))
    assert e.state() == {(None, None): 1}
    e.check()


def test_text_and_date_values():
    e = E()
    e.feed(0, ins(("g", "pear"), ("g", "Apple"), ("g", "apple")))
    assert e.state() == {("g", "Apple", "pear"): 1}     # binary (case-sensitive) order
    e.feed(0, dels(("g", "Apple")))
    assert e.state() == {("g", "apple", "pear"): 1}
    d = E()
    d1, d2 = datetime.date(2020, 1, 1), datetime.date(2021, 1, 1)
    d.feed(0, ins(("g", d2), ("g", d1)))
    assert d.state() == {("g", d1, d2): 1}
    e.check()
    d.check()


def test_float_values_and_negative():
    e = E()
    e.feed(0, ins(("g", -0.5), ("g", 2.25), ("g", -3.0)))
    assert e.state() == {("g", -3.0, 2.25): 1}
    e.feed(0, dels(("g", -3.0)))
    assert e.state() == {("g", -0.5, 2.25): 1}
    e.check()


def test_separate_groups_do_not_interfere():
    e = E()
    e.feed(0, ins(("a", 1), ("b", 100), ("a", 50), (None, 7)))
    out = e.feed(0, dels(("a", 1)))
    assert list(out) == [(("a", 1, 50), -1), (("a", 50, 50), 1)]
    assert e.state() == {("a", 50, 50): 1, ("b", 100, 100): 1, (None, 7, 7): 1}
    e.check()


@pytest.mark.parametrize("group_by,aggs", [
    ((0,), (MIN, MAX)),
    ((), (MIN, MAX, agg("count_star"))),
    ((0,), (MAX, agg("sum", 1), agg("min", 2))),
])
@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.lists(st.tuples(st.booleans(), st.tuples(
    st.none() | st.integers(0, 1), st.none() | st.integers(-2, 2),
    st.none() | st.sampled_from(["a", "b", "c"]))), min_size=1, max_size=5), max_size=12))
def test_random_min_max_matches_recomputation(group_by, aggs, ops):
    e = Tracker(Extremum(group_by, aggs))
    model: dict = {}
    assert e.state() == recompute_aggregate(group_by, aggs, model)
    for batch_ops in ops:
        e.feed(0, random_batch(model, batch_ops))
        e.check()
        assert e.state() == recompute_aggregate(group_by, aggs, model)
        assert ms(e.op.snapshot()) == e.state()


def test_nan_is_the_max_until_it_goes():
    """MAX is NaN while the group holds one, MIN ignores it unless it is all there is
    (PostgreSQL; rows hold the engine's one NaN, noria_py/nan.py)."""
    import math
    e = E()
    e.feed(0, ins(("g", 1.0), ("g", math.nan), ("g", -math.inf), ("h", math.nan)))
    assert ms(e.op.snapshot()) == {("g", -math.inf, math.nan): 1, ("h", math.nan, math.nan): 1}
    out = e.feed(0, dels(("g", math.nan), ("g", -math.inf)))
    assert ms(out) == {("g", -math.inf, math.nan): -1, ("g", 1.0, 1.0): 1}
    e.feed(0, dels(("h", math.nan)))
    assert ms(e.op.snapshot()) == {("g", 1.0, 1.0): 1}
    e.check()
