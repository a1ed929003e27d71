"""GROUP BY with COUNT / SUM / AVG (noria_py/ops/aggregate.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Aggregate

from .helpers import Tracker, agg, dels, ins, ms, random_batch, recompute_aggregate

COUNT_STAR = agg("count_star")


def A(group_by, *aggs) -> Tracker:
    return Tracker(Aggregate(group_by, tuple(aggs)))


# ---------------------------------------------------------------- global aggregates

def test_global_aggregate_of_nothing_has_one_row():
    a = A((), COUNT_STAR, agg("count", 0), agg("sum", 0), agg("avg", 0))
    assert list(a.op.snapshot()) == [((0, 0, None, None), 1)]


def test_global_aggregate_always_exactly_one_row():
    a = A((), COUNT_STAR, agg("sum", 0))
    assert a.state() == {(0, None): 1}          # the row that exists before any input
    out = a.feed(0, ins((5,), (None,)))
    assert ms(out) == {(0, None): -1, (2, 5): 1}
    out = a.feed(0, dels((5,)))
    assert ms(out) == {(2, 5): -1, (1, None): 1}
    out = a.feed(0, dels((None,)))
    assert ms(out) == {(1, None): -1, (0, None): 1}
    assert a.state() == {(0, None): 1}
    a.check()
    assert len(a.op.snapshot()) == 1


def test_global_aggregate_unchanged_batch_emits_nothing():
    a = A((), COUNT_STAR)
    assert a.state() == {(0,): 1}
    assert not a.feed(0, Batch([(1,), (1,)], [1, -1]))
    assert not a.feed(0, Batch())
    a.check()


# ---------------------------------------------------------------- NULL handling

def test_count_sum_avg_skip_nulls():
    a = A((0,), COUNT_STAR, agg("count", 1), agg("sum", 1), agg("avg", 1))
    a.feed(0, ins(("g", 1), ("g", None), ("g", 4)))
    assert a.state() == {("g", 3, 2, 5, 2.5): 1}
    a.check()


def test_sum_and_avg_of_only_nulls_are_null_count_is_zero():
    a = A((0,), COUNT_STAR, agg("count", 1), agg("sum", 1), agg("avg", 1))
    a.feed(0, ins(("g", None), ("g", None)))
    assert a.state() == {("g", 2, 0, None, None): 1}
    a.feed(0, ins(("g", 3)))
    assert a.state() == {("g", 3, 1, 3, 3.0): 1}
    a.feed(0, dels(("g", 3)))
    assert a.state() == {("g", 2, 0, None, None): 1}
    a.check()


def test_sum_of_zero_is_zero_not_null():
    a = A((), agg("sum", 0))
    a.feed(0, ins((0,), (5,), (-5,)))
    assert ms(a.op.snapshot()) == {(0,): 1}


def test_null_group_key_is_a_group():
    a = A((0,), COUNT_STAR, agg("sum", 1))
    a.feed(0, ins((None, 1), (None, 2), ("x", 3)))
    assert a.state() == {(None, 2, 3): 1, ("x", 1, 3): 1}
    a.feed(0, dels((None, 1), (None, 2)))
    assert a.state() == {("x", 1, 3): 1}
    a.check()


# ---------------------------------------------------------------- grouped behaviour

def test_group_appears_and_disappears():
    a = A((0,), COUNT_STAR, agg("sum", 1))
    out = a.feed(0, ins(("a", 1)))
    assert list(out) == [(("a", 1, 1), 1)]
    out = a.feed(0, ins(("a", 2)))
    assert list(out) == [(("a", 1, 1), -1), (("a", 2, 3), 1)]
    out = a.feed(0, dels(("a", 1), ("a", 2)))
    assert list(out) == [(("a", 2, 3), -1)]
    assert a.state() == {}
    assert "a" not in [k[0] for k in a.op.groups]
    a.check()


def test_at_most_two_rows_per_group_per_batch():
    a = A((0,), COUNT_STAR, agg("sum", 1))
    a.feed(0, ins(("a", 1)))
    out = a.feed(0, ins(("a", 1), ("a", 2), ("a", 3), ("b", 1)))
    assert ms(out) == {("a", 1, 1): -1, ("a", 4, 7): 1, ("b", 1, 1): 1}
    assert len(out) == 3


def test_unchanged_output_emits_nothing():
    a = A((0,), agg("sum", 1))
    a.feed(0, ins(("a", 2)))
    # a NULL changes the group's row count but not SUM
    assert not a.feed(0, ins(("a", None)))
    assert not a.feed(0, Batch([("a", 7), ("a", 7)], [1, -1]))
    a.check()


def test_insert_then_delete_new_group_in_one_batch():
    a = A((0,), COUNT_STAR, agg("sum", 1))
    assert not a.feed(0, Batch([("n", 1), ("n", 1)], [1, -1]))
    assert a.op.groups == {}
    a.check()


def test_multi_column_group_by_and_output_order():
    a = A((2, 0), COUNT_STAR, agg("sum", 1))
    a.feed(0, ins((1, 10, "x"), (1, 20, "x"), (2, 5, "x"), (1, 1, None)))
    assert a.state() == {("x", 1, 2, 30): 1, ("x", 2, 1, 5): 1, (None, 1, 1, 1): 1}
    a.check()


def test_multiplicities_in_signs():
    a = A((0,), COUNT_STAR, agg("sum", 1), agg("avg", 1))
    a.feed(0, Batch([("a", 2)], [3]))
    assert a.state() == {("a", 3, 6, 2.0): 1}
    a.feed(0, Batch([("a", 2), ("a", 5)], [-2, 1]))
    assert a.state() == {("a", 2, 7, 3.5): 1}
    a.check()


def test_avg_is_float_and_sum_keeps_type():
    a = A((), agg("sum", 0), agg("avg", 0))
    a.feed(0, ins((1,), (2,)))
    (row,) = a.op.snapshot().rows
    assert row == (3, 1.5) and type(row[0]) is int and type(row[1]) is float
    p = A((), agg("pgavg", 0))              # the PostgreSQL front end's AVG: exact
    p.feed(0, ins((1,), (2,)))
    ((v,),) = p.op.snapshot().rows
    assert v == 1.5 and (v.total, v.count) == (3, 2)
    b = A((), agg("sum", 0))
    b.feed(0, ins((1.5,), (2.0,)))
    assert b.op.snapshot().rows == [(3.5,)]


def test_float_sum_retraction():
    a = A((0,), agg("sum", 1), agg("avg", 1))
    a.feed(0, ins(("g", 0.5), ("g", 0.25)))
    a.feed(0, dels(("g", 0.25)))
    assert a.state() == {("g", 0.5, 0.5): 1}
    a.check()


# ---------------------------------------------------------------- COUNT-only fast path

@pytest.mark.parametrize("func,arg", [("count_star", None), ("count", 1)])
def test_count_only_path(func, arg):
    a = A((0,), agg(func, arg))
    assert a.op.count_only
    out = a.feed(0, ins(("a", 1), ("a", 2), ("b", 1)))
    assert ms(out) == {("a", 2): 1, ("b", 1): 1}
    out = a.feed(0, dels(("a", 1)))
    assert list(out) == [(("a", 2), -1), (("a", 1), 1)]
    out = a.feed(0, dels(("a", 2)))
    assert list(out) == [(("a", 1), -1)]
    assert a.state() == {("b", 1): 1}
    a.feed(0, ins((None, 5)))
    assert a.state() == {("b", 1): 1, (None, 1): 1}
    a.check()


def test_count_only_count_column_skips_nulls():
    a = A((0,), agg("count", 1))
    out = a.feed(0, ins(("a", None), ("a", None)))
    assert list(out) == [(("a", 0), 1)]
    out = a.feed(0, ins(("a", 3)))
    assert list(out) == [(("a", 0), -1), (("a", 1), 1)]
    # a NULL arriving changes nothing visible
    assert not a.feed(0, ins(("a", None)))
    out = a.feed(0, dels(("a", 3)))
    assert list(out) == [(("a", 1), -1), (("a", 0), 1)]
    out = a.feed(0, dels(("a", None), ("a", None), ("a", None)))
    assert list(out) == [(("a", 0), -1)]
    assert a.state() == {}
    a.check()


@pytest.mark.parametrize("func,arg", [("count_star", None), ("count", 1)])
def test_count_only_keeps_no_empty_groups(func, arg):
    a = A((0,), agg(func, arg))
    assert not a.feed(0, Batch([("a", 1), ("a", 1)], [1, -1]))
    a.feed(0, ins(("b", 1)))
    a.feed(0, dels(("b", 1)))
    assert not a.op.snapshot()
    assert len(a.op.counts) == 0 and dict(a.op.counts.items()) == {} and not a.op.nulls
    a.check()


# ---------------------------------------------------------------- DISTINCT

def test_count_sum_avg_distinct_with_retractions():
    a = A((0,), agg("count", 1, True), agg("sum", 1, True), agg("avg", 1, True),
          agg("count", 1), agg("sum", 1))
    a.feed(0, ins(("g", 1), ("g", 1), ("g", 2), ("g", None)))
    assert a.state() == {("g", 2, 3, 1.5, 3, 4): 1}
    a.feed(0, dels(("g", 1)))                 # one copy of 1 remains
    assert a.state() == {("g", 2, 3, 1.5, 2, 3): 1}
    a.feed(0, dels(("g", 1)))                 # now 1 is gone
    assert a.state() == {("g", 1, 2, 2.0, 1, 2): 1}
    a.feed(0, ins(("g", 1)))
    assert a.state() == {("g", 2, 3, 1.5, 2, 3): 1}
    a.feed(0, dels(("g", 1), ("g", 2)))
    assert a.state() == {("g", 0, None, None, 0, None): 1}   # the NULL row keeps the group
    a.feed(0, dels(("g", None)))
    assert a.state() == {}
    a.check()


def test_count_distinct_not_on_fast_path():
    a = A((0,), agg("count", 1, True))
    assert not a.op.count_only
    a.feed(0, ins(("g", 5), ("g", 5), ("g", None)))
    assert a.state() == {("g", 1): 1}
    a.feed(0, Batch([("g", 5)], [-2]))
    assert a.state() == {("g", 0): 1}
    a.check()


def test_global_distinct_aggregates():
    a = A((), agg("count", 0, True), agg("sum", 0, True))
    assert a.state() == {(0, None): 1}
    a.feed(0, ins((3,), (3,), (4,)))
    assert a.state() == {(2, 7): 1}
    a.feed(0, dels((3,), (3,), (4,)))
    assert a.state() == {(0, None): 1}
    a.check()


def test_reset_and_describe():
    a = Aggregate((0,), (COUNT_STAR, agg("sum", 1, True)))
    a.process(0, ins(("a", 1)))
    a.reset()
    assert not a.snapshot()
    assert a.describe() == "aggregate by [0]: count_star(), sum(distinct)(1)"
    g = Aggregate((), (COUNT_STAR,))
    g.process(0, ins((1,)))
    g.reset()
    assert list(g.snapshot()) == [((0,), 1)]


# ---------------------------------------------------------------- properties

AGG_SETS = [
    ((0,), (COUNT_STAR,)),
    ((0,), (agg("count", 1),)),
    ((0,), (COUNT_STAR, agg("count", 1), agg("sum", 1), agg("avg", 1))),
    ((), (COUNT_STAR, agg("count", 1), agg("sum", 1), agg("avg", 1))),
    ((0,), (agg("count", 1, True), agg("sum", 1, True), agg("avg", 1, True))),
    ((0, 2), (COUNT_STAR, agg("sum", 1))),
    ((), (agg("sum", 1, True), agg("count", 2, True))),
]

row = st.tuples(st.none() | st.integers(0, 2), st.none() | st.integers(-2, 3),
                st.none() | st.sampled_from(["a", "b"]))


def run_random(group_by, aggs, ops):
    a = Tracker(Aggregate(group_by, aggs))
    model: dict = {}
    assert a.state() == recompute_aggregate(group_by, aggs, {})
    for batch_ops in ops:
        out = a.feed(0, random_batch(model, batch_ops))
        # at most one retraction and one insertion per group
        keys = [tuple(x[: len(group_by)]) for x in out.rows]
        assert all(keys.count(k) <= 2 for k in keys)
        a.check()
        assert a.state() == recompute_aggregate(group_by, aggs, model)


@pytest.mark.parametrize("group_by,aggs", AGG_SETS)
@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.lists(st.tuples(st.booleans(), row), min_size=1, max_size=5), max_size=10))
def test_random_aggregate_matches_recomputation(group_by, aggs, ops):
    run_random(group_by, aggs, ops)


@pytest.mark.parametrize("func,arg", [("count_star", None), ("count", 1)])
def test_count_only_multiplicity_signs(func, arg):
    a = A((0,), agg(func, arg))
    out = a.feed(0, Batch([("a", 1), ("a", None)], [3, 2]))
    assert list(out) == [(("a", 5 if arg is None else 3), 1)]
    out = a.feed(0, Batch([("a", 1)], [-2]))
    assert ms(out) == {("a", 5 if arg is None else 3): -1, ("a", 3 if arg is None else 1): 1}
    a.check()


# ---------------------------------------------------------------- columnar input

def _as_columns(batch: Batch) -> Batch:
    """The batch as a base emits it: int64 columns where there is no NULL."""
    import numpy as np
    cols = []
    for col in zip(*batch.rows):
        if None in col:
            a = np.empty(len(col), dtype=object)
            a[:] = col
        else:
            a = np.array(col, dtype=np.int64)
        cols.append(a)
    return Batch.columnar(cols, np.array(batch.signs, dtype=np.int64))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([None, 1]),
       st.lists(st.tuples(st.booleans(), st.lists(st.tuples(
           st.integers(-3, 3), st.one_of(st.none(), st.integers(0, 5)),
           st.sampled_from([1, -1])), min_size=1, max_size=8)), max_size=10))
def test_count_of_columns_matches_count_of_rows(arg, batches):
    """COUNT(*) and COUNT(x) on columnar batches (vectorized, or the row path when x has
    a NULL) emit what they emit on the same batches as rows; counts may go negative in
    transit, as when deltas arrive out of order."""
    by_rows = Aggregate((0,), (agg("count_star") if arg is None else agg("count", arg),))
    by_cols = Aggregate((0,), (agg("count_star") if arg is None else agg("count", arg),))
    for columnar, rows in batches:
        b = Batch([r[:2] for r in rows], [r[2] for r in rows])
        want = by_rows.process(0, b)
        got = by_cols.process(0, _as_columns(b) if columnar else b)
        assert ms(got) == ms(want)
        assert dict(by_cols.counts.items()) == dict(by_rows.counts.items())
        assert by_cols.nulls == by_rows.nulls
    assert ms(by_cols.snapshot()) == ms(by_rows.snapshot())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.tuples(
    st.integers(0, 5), st.sampled_from([1, -1])), min_size=1, max_size=40)), max_size=10))
def test_count_in_an_array_matches_count_in_a_dict(batches):
    """COUNT(*) over small non-negative keys keeps its counts in an array, fed columnar
    batches (vectorized) and small row batches (plain Python) alike."""
    in_dict = Aggregate((0,), (agg("count_star"),))
    in_dict.counts.to_general()                      # (leaves the array form at once)
    in_array = Aggregate((0,), (agg("count_star"),))
    for columnar, rows in batches:
        b = Batch([(k,) for k, _ in rows], [s for _, s in rows])
        want = in_dict.process(0, b)
        got = in_array.process(0, _as_columns(b) if columnar else b)
        assert ms(got) == ms(want)
    assert in_array.counts.form == "dense" and in_dict.counts.form == "general"
    assert ms(in_array.snapshot()) == ms(in_dict.snapshot())
    assert dict(in_array.counts.items()) == dict(in_dict.counts.items())
    assert len(in_array.counts) == len(in_dict.counts)
