"""One NaN object inside the engine (noria_py/nan.py)."""
from __future__ import annotations

import math
import struct

import numpy as np

from noria_py.nan import (
    NAN,
    as_objects,
    canon,
    canon_deep,
    canon_row,
    column_list,
    concat,
    equal_values,
    has_nan,
)


def other_nan() -> float:
    """A NaN that is not the engine's object, with other bits (negative, a payload)."""
    return struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]


def test_the_one_nan_is_math_nan():
    assert NAN is math.nan


def test_canon_makes_any_nan_the_one_and_leaves_the_rest():
    assert canon(other_nan()) is NAN
    assert canon(float("nan")) is NAN
    for v in (None, 0.0, -0.0, math.inf, 3, "nan", ()):
        assert canon(v) is v


def test_canon_row_rebuilds_only_rows_with_a_nan():
    row = (1, 2.5, None)
    assert canon_row(row) is row
    got = canon_row((1, other_nan(), float("nan")))
    assert got[0] == 1 and got[1] is NAN and got[2] is NAN
    assert {canon_row((other_nan(),)): 1}.get(canon_row((float("nan"),))) == 1


def test_has_nan():
    assert not has_nan([])
    assert not has_nan([1.0, None, 0.0, -0.0])
    assert has_nan([1.0, None, other_nan()])
    # infinities of both signs sum to NaN: the exact check still says no
    assert not has_nan([math.inf, -math.inf, None])
    assert not has_nan([1e308, 1e308, -math.inf])


def test_column_list_makes_each_nan_the_one():
    a = np.array([1.0, np.nan, -np.nan, 2.0])
    got = column_list(a)
    assert got[0] == 1.0 and got[3] == 2.0
    assert got[1] is NAN and got[2] is NAN
    assert column_list(np.array([3, 4], dtype=np.int64)) == [3, 4]


def test_as_objects_and_concat_keep_the_one_nan():
    got = as_objects(np.array([np.nan, 1.0]))
    assert got.dtype == object and got[0] is NAN and got[1] == 1.0
    mixed = concat([np.array([np.nan, 2.0]), np.array([None, "x"], dtype=object)])
    assert mixed.dtype == object and mixed[0] is NAN and list(mixed[1:]) == [2.0, None, "x"]
    floats = concat([np.array([np.nan]), np.array([1.0])])
    assert floats.dtype == np.float64 and np.isnan(floats[0])


def test_equal_values_takes_nan_as_equal():
    a = np.array([1.0, np.nan, 2.0])
    assert equal_values(a, np.array([1.0, np.nan, 2.0]))
    assert not equal_values(a, np.array([1.0, np.nan, 3.0]))
    assert not equal_values(a, np.array([1.0, 1.0, 2.0]))
    objs = np.empty(2, dtype=object)
    objs[:] = [NAN, None]
    other = np.empty(2, dtype=object)
    other[:] = [other_nan(), None]
    assert equal_values(objs, other)
    assert not equal_values(np.array([1, 2]), np.array([1, 3]))


def test_canon_deep_reaches_keys_values_and_nesting():
    got = canon_deep(({other_nan(): [float("nan"), (1, other_nan())]}, "x"))
    (k, v), = got[0].items()
    assert k is NAN and v[0] is NAN and v[1][0] == 1 and v[1][1] is NAN
    assert got[1] == "x"
