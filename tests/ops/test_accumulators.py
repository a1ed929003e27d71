"""Per-group accumulators (noria_py/ops/accumulators.py)."""
from __future__ import annotations

import math

import pytest

from noria_py.ops import accumulators as acc
from noria_py.storage.codec import packb, unpackb

from .helpers import agg


def feed(a, *updates):
    for v, s in updates:
        a.update(v, s)
    return a.value()


def test_count_skips_null_and_retracts():
    c = acc.Count()
    assert c.value() == 0
    assert feed(c, (1, 1), (None, 1), (2, 3)) == 4
    assert feed(c, (2, -3), (None, -1)) == 1


def test_sum():
    s = acc.Sum()
    assert s.value() is None                  # SUM of no rows is NULL
    assert feed(s, (None, 1)) is None         # SUM of only NULLs is NULL
    assert feed(s, (4, 2), (-1, 1)) == 7
    assert feed(s, (4, -2), (-1, -1)) is None
    assert feed(s, (0, 1)) == 0


def test_avg():
    a = acc.Avg()
    assert a.value() is None
    assert feed(a, (1, 1), (2, 1), (None, 5)) == 1.5
    assert feed(a, (2, -1)) == 1.0
    assert feed(a, (1, -1)) is None


@pytest.mark.parametrize("cls,pick", [(acc.Min, min), (acc.Max, max)])
def test_min_max_with_duplicates(cls, pick):
    m = cls()
    assert m.value() is None
    assert feed(m, (3, 1), (1, 2), (5, 1), (None, 4)) == pick(3, 1, 5)
    feed(m, (1, -1))
    assert m.value() == pick(3, 1, 5)          # one copy of 1 is left
    feed(m, (1, -1), (5, -1))
    assert m.value() == 3
    feed(m, (3, -1))
    assert m.value() is None
    feed(m, (None, -4))
    assert m.value() is None


@pytest.mark.parametrize("inner,expected", [(acc.Count, [2, 2, 1, 0]), (acc.Sum, [5, 5, 3, None]),
                                            (acc.Avg, [2.5, 2.5, 3.0, None])])
def test_distinct_feeds_each_value_once(inner, expected):
    d = acc.Distinct(inner())
    got = [feed(d, (2, 1), (3, 1), (2, 1), (None, 1)),
           feed(d, (2, -1)),
           feed(d, (2, -1)),
           feed(d, (3, -1), (None, -1))]
    assert got == expected
    assert d.counts == {}


def test_distinct_multiplicity_signs():
    d = acc.Distinct(acc.Sum())
    assert feed(d, (4, 3)) == 4
    assert feed(d, (4, -2)) == 4
    assert feed(d, (4, -1)) is None


@pytest.mark.parametrize("func,cls", [("count", acc.Count), ("count_star", acc.Count),
                                      ("sum", acc.Sum), ("avg", acc.Avg), ("min", acc.Min),
                                      ("max", acc.Max)])
def test_make(func, cls):
    a = acc.make(agg(func, 0))
    assert type(a) is cls
    if func in ("count", "sum", "avg"):
        d = acc.make(agg(func, 0, True))
        assert type(d) is acc.Distinct and type(d.inner) is cls


def test_base_accumulator_is_abstract():
    with pytest.raises(NotImplementedError):
        acc.Accumulator().update(1, 1)
    with pytest.raises(NotImplementedError):
        acc.Accumulator().value()


def test_float_sums_are_exact_and_order_independent():
    from noria_py.ops.accumulators import Avg, Sum
    a, b = Sum(), Sum()
    values = [0.1, 1e16, -1e16, 0.2, 3.3, 1e-300]
    for v in values:
        a.update(v, 1)
    for v in reversed(values):
        b.update(v, 1)
    import math
    assert a.value() == b.value() == math.fsum(values)      # exactly rounded
    a.update(1e16, -1)
    a.update(1e16, 1)
    assert a.value() == b.value()
    m = Avg()
    for v in (0.1, 0.2, 0.4):
        m.update(v, 1)
    m.update(0.4, -1)
    assert m.value() == math.fsum([0.1, 0.2]) / 2


def test_float_sum_overflow_and_infinities():
    import math

    from noria_py.ops.accumulators import Sum
    s = Sum()
    s.update(1e308, 1)
    s.update(1e308, 1)
    assert s.value() == math.inf
    t = Sum()
    t.update(math.inf, 1)
    t.update(-math.inf, 1)
    assert math.isnan(t.value())
    t.update(-math.inf, -1)
    assert t.value() == math.inf
    t.update(math.inf, -1)
    assert t.value() is None          # no values left: SUM is NULL


# ---------------------------------------------------------------- to_data / from_data
# (how an aggregate's checkpoint crosses the network to the cluster's store)

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_values = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.floats(allow_nan=True),
                    st.none())


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["count", "sum", "avg", "min", "max", "dsum", "dcount",
                             "pgcount", "pgstar"]),
       updates=st.lists(st.tuples(_values, st.sampled_from([1, 1, 2, -1])), max_size=30))
@example(kind="dsum", updates=[(float("nan"), 1)])    # (a NaN not the one object: found once)
def test_data_round_trip_keeps_the_state(kind, updates):
    from noria_py.divzero import DIV0
    from noria_py.ops.accumulators import Avg, Count, Distinct, Max, Min, PgCount, Sum, from_data
    from noria_py.storage.codec import packb, unpackb
    make = {"count": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max,
            "dsum": lambda: Distinct(Sum()), "dcount": lambda: Distinct(Count()),
            "pgcount": PgCount, "pgstar": lambda: PgCount(True)}[kind]
    if kind.startswith("pg"):       # (the division-by-zero marker among the values)
        updates = [(DIV0 if isinstance(v, float) and v < 0 else v, s) for v, s in updates]
    if kind in ("min", "max"):      # (comparable values only, as a column holds, and NaN)
        updates = [(v, s) for v, s in updates if isinstance(v, int) or v != v]
    # inside the engine every NaN is the one object math.nan (noria_py/nan.py), which is
    # what unpackb gives back; hypothesis makes NaNs of other objects and bit patterns
    updates = [(math.nan if v != v else v, s) for v, s in updates]
    acc = make()
    for v, s in updates:
        acc.update(v, s)
    back = from_data(unpackb(packb(acc.to_data())))
    assert type(back) is type(acc)
    assert repr(back.value()) == repr(acc.value())
    for v, s in updates[:5]:        # and it goes on the same way
        acc.update(v, -s)
        back.update(v, -s)
        assert repr(back.value()) == repr(acc.value())


def test_pg_count_is_the_marker_while_its_group_holds_one():
    """COUNT in a plan that divides as PostgreSQL does (noria_py/divzero.py): the
    marker while a value (COUNT(x)) or a row's probe column (COUNT(*)) is; NULL is
    skipped by COUNT(x) and counted by COUNT(*)."""
    from noria_py.divzero import DIV0
    from noria_py.ops.accumulators import PgCount
    for star, counted in ((False, 1), (True, 2)):
        c = PgCount(star)
        for v in (5, None):
            c.update(v, 1)
        assert c.value() == counted
        c.update(DIV0, 1)
        assert c.value() is DIV0
        c.update(DIV0, -1)                  # the row deleted: the group heals
        assert c.value() == counted


@pytest.mark.parametrize("bad", [[], ["count"], ["count", "3"], ["sum", "1", "x", 0, None, 1],
                                 ["pgcount", 1, 0, 1], ["pgcount", 1, "0", False],
                                 ["mode", 1], ["distinct", [[1, "a"]], ["count", 1]], "count"])
def test_from_data_refuses_what_to_data_does_not_write(bad):
    from noria_py.ops.accumulators import from_data
    with pytest.raises(ValueError):
        from_data(bad)


def test_data_keeps_sums_beyond_64_bits():
    from noria_py.ops.accumulators import Sum, from_data
    from noria_py.storage.codec import packb, unpackb
    s = Sum()
    for v in [(1 << 63) - 1] * 4 + [1e-300, 2.5]:
        s.update(v, 1)
    back = from_data(unpackb(packb(s.to_data())))
    assert back.value() == s.value() and back.total == 4 * ((1 << 63) - 1)


# ---------------------------------------------------------------- NaN (noria_py/nan.py)

@pytest.mark.parametrize("cls", [acc.Min, acc.Max])
def test_min_max_come_back_after_the_nan_goes(cls):
    """NaN is above every number (PostgreSQL): MAX is NaN while one is in, MIN only when
    every value is; deleting the NaN, given as another NaN object, reveals the real
    extreme."""
    a = cls()
    got = feed(a, (1.0, 1), (float("nan"), 1), (math.inf, 1), (-math.inf, 1))
    assert got is math.nan if cls is acc.Max else got == -math.inf
    assert feed(a, (float("nan"), -1)) == (math.inf if cls is acc.Max else -math.inf)
    assert feed(a, (math.inf, -1), (-math.inf, -1)) == 1.0
    assert feed(a, (1.0, -1), (float("nan"), 2)) is math.nan
    assert feed(a, (float("nan"), -1)) is math.nan
    assert feed(a, (float("nan"), -1)) is None
    b = cls()
    feed(b, (float("nan"), 1), (2.0, 1))
    back = acc.from_data(unpackb(packb(b.to_data())))
    assert repr(back.value()) == repr(b.value())
    assert feed(back, (float("nan"), -1)) == 2.0 and feed(b.copy(), (float("nan"), -1)) == 2.0


def test_distinct_counts_every_nan_once():
    d = acc.Distinct(acc.Count())
    assert feed(d, (math.nan, 1), (math.nan, 1), (1.0, 1)) == 2
    assert feed(d, (math.nan, -1)) == 2 and feed(d, (math.nan, -1)) == 1
