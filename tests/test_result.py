"""Results and views out as Arrow, pandas, polars and numpy (noria_py/result.py)."""
from __future__ import annotations

import datetime
import importlib

import numpy as np
import pyarrow as pa
import pytest

import noria_py

ROWS = [(1, 0.5, "a", True, datetime.date(2026, 1, 2), datetime.datetime(2026, 1, 2, 3, 4, 5)),
        (2, None, None, None, None, None),
        (2, 2.5, "c", False, datetime.date(2026, 2, 3), datetime.datetime(2026, 2, 3, 4, 5, 6))]


@pytest.fixture
def db() -> noria_py.Database:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (k INT, f FLOAT, s TEXT, b BOOLEAN, d DATE, ts TIMESTAMP)")
    db.table("t").insert(ROWS)
    db.execute("CREATE VIEW everything AS SELECT k, f, s, b, d, ts FROM t")
    db.execute("CREATE VIEW by_k AS SELECT k, f, s FROM t WHERE k = ?")
    return db


def test_a_view_as_arrow_keeps_every_type(db: noria_py.Database) -> None:
    table = db.view("everything").arrow()
    assert table.schema.types == [pa.int64(), pa.float64(), pa.string(), pa.bool_(),
                                  pa.date32(), pa.timestamp("us")]
    assert sorted(table.to_pylist(), key=lambda r: (r["k"], r["f"] is None)) == [
        dict(zip(["k", "f", "s", "b", "d", "ts"], r)) for r in
        sorted(ROWS, key=lambda r: (r[0], r[1] is None))]
    assert db.view("by_k").arrow(2).num_rows == 2
    assert db.view("by_k").arrow().num_rows == 3             # no key: every row
    with pytest.raises(noria_py.ArityError):
        db.view("by_k").arrow(1, 2)


def test_pandas_and_polars(db: noria_py.Database) -> None:
    frame = db.view("by_k").df(1)
    assert list(frame.columns) == ["k", "f", "s"] and frame.to_dict("records") == [
        {"k": 1, "f": 0.5, "s": "a"}]
    res = db.execute("SELECT k, SUM(f) AS total FROM t GROUP BY k")
    frame = res.df().sort_values("k")
    assert frame["total"].tolist() == [0.5, 2.5]
    pl = db.view("everything").pl()
    assert pl.shape == (3, 6) and pl.schema["ts"].__class__.__name__ == "Datetime"
    assert sorted(pl["k"].to_list()) == [1, 2, 2]


def test_fetchnumpy_takes_the_rows_not_fetched_yet(db: noria_py.Database) -> None:
    res = db.execute("SELECT k, f FROM t ORDER BY k, f NULLS LAST")
    assert res.fetchone() == (1, 0.5)
    arrays = res.fetchnumpy()
    assert arrays["k"].dtype == np.int64 and arrays["k"].tolist() == [2, 2]
    assert arrays["f"][0] == 2.5 and np.isnan(arrays["f"][1])
    assert res.fetchall() == []


def test_a_missing_library_says_how_to_install_it(db: noria_py.Database, monkeypatch) -> None:
    real = importlib.import_module

    def without_pandas(name: str, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", without_pandas)
    with pytest.raises(noria_py.NotSupportedError, match="pip install pandas"):
        db.view("everything").df()


def test_a_sum_past_64_bits_comes_out_exact_as_a_decimal() -> None:
    """SUM of an INT column is exact, as PostgreSQL's SUM(bigint) (a numeric): rows give
    the int, frames a decimal of scale 0 (DuckDB's HUGEINT in Arrow), where int64 would
    overflow; a column that fits stays int64."""
    import decimal
    top = 2**63 - 1
    db = noria_py.connect()
    db.execute("CREATE TABLE t (k INT, v INT)")
    db.execute("CREATE VIEW s AS SELECT k, SUM(v) AS s FROM t GROUP BY k")
    db.table("t").insert([(1, top)] * 3 + [(2, -top - 1)] * 2 + [(3, 5)])
    want = {1: 3 * top, 2: -2 * (top + 1), 3: 5}
    assert dict(db.view("s").all()) == want
    table = db.view("s").arrow()
    assert table.schema.types == [pa.int64(), pa.decimal128(38, 0)]
    assert {r["k"]: int(r["s"]) for r in table.to_pylist()} == want
    frame = db.execute("SELECT k, SUM(v) AS s FROM t GROUP BY k").df()
    assert {k: int(s) for k, s in zip(frame["k"], frame["s"])} == want
    assert dict(zip(*db.view("s").pl().to_dict(as_series=False).values())) == {
        k: decimal.Decimal(v) for k, v in want.items()}
    arrays = db.execute("SELECT k, SUM(v) AS s FROM t GROUP BY k").fetchnumpy()
    assert {int(k): int(s) for k, s in zip(arrays["k"], arrays["s"])} == want
    assert db.execute("SELECT SUM(v) AS s FROM t WHERE k = 3").arrow().schema.types == [pa.int64()]
