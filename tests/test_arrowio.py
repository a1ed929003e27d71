"""Arrow at the engine's edge (noria_py/arrowio.py)."""
from __future__ import annotations

import math

import pyarrow as pa
import pytest

import noria_py
from noria_py.arrowio import column_rows, from_ipc, to_ipc


def test_column_rows_make_each_nan_the_one_nan():
    """Rows read from Arrow (insert_arrow's row path, Spark recovery's results) hold the
    engine's one NaN (noria_py/nan.py)."""
    rows = column_rows([pa.array([1.0, float("nan"), None], pa.float64()),
                        pa.array([1, 2, 3], pa.int64())])
    assert rows[0] == (1.0, 1) and rows[1][0] is math.nan and rows[2] == (None, 3)
    assert column_rows([pa.array(["nan"])]) == [("nan",)]


# ---------------------------------------------------------------- frames in (issue 25)

def _frames() -> dict[str, object]:
    import duckdb
    import pandas as pd
    import polars as pl
    cols = {"id": [1, 2, 3], "f": [0.5, 1.5, None], "s": ["a", None, "c"]}
    table = pa.table(cols, schema=pa.schema([("id", pa.int64()), ("f", pa.float64()),
                                             ("s", pa.string())]))
    return {"pandas": pd.DataFrame(cols), "polars": pl.DataFrame(cols),
            "duckdb": duckdb.sql("SELECT * FROM (VALUES (1, 0.5::DOUBLE, 'a'), "
                                 "(2, 1.5::DOUBLE, NULL), (3, NULL, 'c')) v(id, f, s)"),
            "record batch": table.to_batches()[0], "arrow": table}


@pytest.mark.parametrize("kind", ["pandas", "polars", "duckdb", "record batch", "arrow"])
@pytest.mark.parametrize("how", ["insert_arrow", "insert"])
def test_dataframes_and_arrow_streams_go_in_as_arrow_tables(kind: str, how: str) -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (ID INT, f FLOAT, s TEXT)")
    db.execute("CREATE VIEW n AS SELECT COUNT(*) AS n, SUM(f) AS total FROM t")
    getattr(db.table("t"), how)(_frames()[kind])
    rows = sorted(db.table("t").rows(), key=lambda r: r[0])
    assert rows == [(1, 0.5, "a"), (2, 1.5, None), (3, None, "c")]     # (pandas' NaN: NULL)
    assert db.view("n").all() == [(3, 2.0)]


def test_a_frame_that_does_not_fit_changes_nothing() -> None:
    import pandas as pd
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, s TEXT)")
    db.table("t").insert([(1, "x")])
    with pytest.raises(noria_py.DuplicateKeyError):
        db.table("t").insert(pd.DataFrame({"id": [2, 1], "s": ["y", "z"]}))
    with pytest.raises(noria_py.ArityError):
        db.table("t").insert_arrow(pd.DataFrame({"id": [3], "other": ["w"]}))
    with pytest.raises(noria_py.TypeMismatchError):
        db.table("t").insert_arrow(pd.DataFrame({"id": ["3"], "s": ["w"]}))
    assert db.table("t").rows() == [(1, "x")]


def test_an_ipc_stream_round_trips_and_a_damaged_one_is_refused() -> None:
    """What a cluster client's ``insert_arrow`` sends: the table back as it was; bytes
    that are not a whole, valid stream are a TypeMismatchError, never a partial table."""
    table = pa.table({"a": pa.array([1, None, 3], pa.int64()), "s": ["x", None, "é"],
                      "f": [0.5, float("nan"), -1.0]})
    data = to_ipc(table)
    back = from_ipc(data)
    assert back.schema == table.schema and back.column("a").equals(table.column("a"))
    assert back.column("s").equals(table.column("s"))
    f = back.column("f").to_pylist()
    assert f[0] == 0.5 and math.isnan(f[1]) and f[2] == -1.0
    for bad in (b"", b"not arrow", data[:len(data) // 2], data[:-9]):
        with pytest.raises(noria_py.TypeMismatchError, match="not a valid Arrow IPC stream"):
            from_ipc(bad)
