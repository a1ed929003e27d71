"""Arrow at the engine's edge (noria_py/arrowio.py)."""
from __future__ import annotations

import math

import pyarrow as pa

from noria_py.arrowio import column_rows


def test_column_rows_make_each_nan_the_one_nan():
    """Rows read from Arrow (insert_arrow's row path, Spark recovery's results) hold the
    engine's one NaN (noria_py/nan.py)."""
    rows = column_rows([pa.array([1.0, float("nan"), None], pa.float64()),
                        pa.array([1, 2, 3], pa.int64())])
    assert rows[0] == (1.0, 1) and rows[1][0] is math.nan and rows[2] == (None, 3)
    assert column_rows([pa.array(["nan"])]) == [("nan",)]
