"""Values from the Python data stack taken at the door (noria_py/arguments.py): numpy
scalars, pandas Timestamps and missing values, Decimals, and aware datetimes, converted
to the engine's own types in writes, parameters and keys; and the Decimal rule."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

import noria_py
from noria_py import TypeMismatchError
from noria_py.arguments import params, plain, plain_key
from noria_py.nan import NAN

UTC = dt.timezone.utc
PARIS = ZoneInfo("Europe/Paris")


# ---------------------------------------------------------------- plain

@pytest.mark.parametrize("given, want", [
    (np.bool_(True), True), (np.int8(-3), -3), (np.uint64(2 ** 64 - 1), 2 ** 64 - 1),
    (np.int64(5), 5), (np.float32(0.5), 0.5), (np.float64(1.25), 1.25), (np.str_("é"), "é"),
    (np.datetime64("2024-01-02"), dt.date(2024, 1, 2)),
    (np.datetime64("2024-01"), dt.date(2024, 1, 1)),
    (np.datetime64("2024-01-02T03:04:05.123456"), dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    (np.datetime64("2024-01-02T03:04:05.123456000", "ns"), dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    (pd.Timestamp("2024-01-02 03:04:05.5"), dt.datetime(2024, 1, 2, 3, 4, 5, 500000)),
    (pd.Timestamp("2024-07-01 12:00", tz="Europe/Paris"), dt.datetime(2024, 7, 1, 10, tzinfo=UTC)),
    (dt.datetime(2024, 1, 1, 12, tzinfo=PARIS), dt.datetime(2024, 1, 1, 11, tzinfo=UTC)),
    (Decimal("5"), 5), (Decimal("5.00"), 5), (Decimal("-0"), 0), (Decimal("1E+2"), 100),
    (Decimal("9223372036854775807"), 2 ** 63 - 1), (Decimal("1.5"), 1.5),
    (Decimal("0.1"), 0.1), (Decimal("1E+19"), 1e19), (Decimal("-Infinity"), -math.inf),
])
def test_values_of_the_data_stack_become_the_engines_own(given, want):
    got = plain(given)
    assert got == want and type(got) is type(want)
    if isinstance(got, dt.datetime) and got.tzinfo is not None:
        assert got.tzinfo is UTC


@pytest.mark.parametrize("missing", [pd.NaT, pd.NA, np.datetime64("NaT"), np.datetime64("NaT", "ns")])
def test_pandas_and_numpy_missing_values_are_null(missing):
    assert plain(missing) is None


@pytest.mark.parametrize("nan", [np.float64("nan"), np.float32("nan"), Decimal("NaN"), Decimal("-sNaN")])
def test_every_nan_is_the_one_nan(nan):
    assert plain(nan) is NAN


@pytest.mark.parametrize("value, why", [
    (pd.Timestamp("2024-01-01 00:00:00.000000001"), "has nanoseconds"),
    (pd.Timestamp("2024-01-01 00:00:00.000000001", tz="UTC"), "has nanoseconds"),
    (np.datetime64("2024-01-01T00:00:00.000000001"), "has nanoseconds"),
    (np.datetime64("12000-01-01"), "outside the years 1-9999"),
    (Decimal("1e400"), "outside the range of a FLOAT"),
])
def test_a_value_the_engine_cannot_hold_exactly_is_refused_not_rounded(value, why):
    with pytest.raises(TypeMismatchError, match=why):
        plain(value)


@pytest.mark.parametrize("value", [b"x", 1 + 2j, np.complex128(1), np.timedelta64(1, "s"),
                                   dt.timedelta(1), [1], None, "x", dt.date(2024, 1, 1),
                                   dt.datetime(2024, 1, 1)])
def test_other_values_are_left_for_the_checks(value):
    assert plain(value) is value


def test_keys_keep_what_plain_refuses_and_parameters_refuse_it_by_position():
    ns = pd.Timestamp("2024-01-01 00:00:00.000000001")
    assert plain_key((np.int64(1), ns)) == (1, ns)
    assert params((np.int64(1), Decimal("2.5"))) == (1, 2.5)
    assert params(np.float64(2.0)) == (2.0,)
    with pytest.raises(TypeMismatchError, match="parameter 2: .* has nanoseconds"):
        params([1, ns])
    with pytest.raises(TypeMismatchError, match="parameters must be a list or tuple"):
        params(np.array([1, 2]))


# ---------------------------------------------------------------- through the API

@pytest.fixture(params=[1, 4], ids=["shards1", "shards4"])
def db(request):
    d = noria_py.connect(shards=request.param)
    d.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT, f FLOAT, s TEXT, ok BOOL, d DATE, "
              "ts TIMESTAMP, tz TIMESTAMPTZ, x DECIMAL(10, 2))")
    d.execute("CREATE VIEW by_n AS SELECT id FROM t WHERE n = ?")
    d.execute("CREATE VIEW by_f AS SELECT id FROM t WHERE f = ?")
    d.execute("CREATE VIEW by_s_ok AS SELECT id FROM t WHERE s = ? AND ok = ?")
    d.execute("CREATE VIEW by_d_ts AS SELECT id FROM t WHERE d = ? AND ts = ?")
    d.execute("CREATE VIEW by_tz AS SELECT id FROM t WHERE tz = ?")
    d.execute("CREATE VIEW n_by_x AS SELECT x, COUNT(*) AS c FROM t WHERE x = ? GROUP BY x")
    yield d
    d.close()


PLAIN_ROW = (1, 7, 0.5, "a", True, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3),
             dt.datetime(2024, 1, 2, 2, tzinfo=UTC), 2.5)
STACK_ROW = (np.int64(1), Decimal("7.00"), np.float32(0.5), np.str_("a"), np.bool_(True),
             np.datetime64("2024-01-02"), pd.Timestamp("2024-01-02 03:00"),
             pd.Timestamp("2024-01-02 03:00", tz="Europe/Paris"), Decimal("2.50"))


def _types(row):
    return [type(v) for v in row]


def test_a_row_of_the_data_stack_is_stored_as_the_equal_python_row(db):
    db.table("t").insert([STACK_ROW])
    (got,) = db.table("t").rows()
    assert got == PLAIN_ROW and _types(got) == _types(PLAIN_ROW)
    assert got[7].tzinfo is UTC
    db.table("t").delete([STACK_ROW])                  # the same row, as the stack gives it
    assert len(db.table("t")) == 0
    db.table("t").insert([PLAIN_ROW])
    db.table("t").delete_keys([np.int32(1)])
    assert len(db.table("t")) == 0


def test_statements_take_them_as_parameters(db):
    marks = ", ".join("?" * 9)
    db.execute(f"INSERT INTO t VALUES ({marks})", STACK_ROW)
    assert db.execute("SELECT * FROM t").fetchall() == [PLAIN_ROW]
    db.execute("UPDATE t SET f = ?, x = ? WHERE id = ?", (np.float64(1.5), Decimal("0.1"), np.uint8(1)))
    assert db.execute("SELECT f, x FROM t WHERE n = ?", (np.int16(7),)).fetchall() == [(1.5, 0.1)]
    cur = db.cursor()
    cur.executemany(f"INSERT INTO t VALUES ({marks})",
                    [(np.int64(i), *STACK_ROW[1:]) for i in (2, 3)])
    assert cur.rowcount == 2
    db.execute("DELETE FROM t WHERE tz = ? AND id > ?", (pd.Timestamp("2024-01-02 02:00", tz="UTC"), np.int64(1)))
    assert db.execute("SELECT id FROM t").fetchall() == [(1,)]
    assert _types(db.execute("SELECT * FROM t").fetchall()[0]) == _types(PLAIN_ROW)


def test_lookups_with_them_find_what_the_equal_python_value_finds(db):
    db.table("t").insert([PLAIN_ROW, (2, -1, 2.0, "b", False, None, None,
                                      dt.datetime(2024, 1, 2, 2, 1, tzinfo=UTC), 1.0)])
    db.wait()
    for view, keys, plain_keys in [
            ("by_n", [(np.int64(7),), (Decimal("7"),), (np.uint8(7),)], (7,)),
            ("by_f", [(np.float32(0.5),), (Decimal("0.5"),)], (0.5,)),
            ("by_f", [(np.int64(2),), (Decimal("2.000"),)], (2,)),
            ("by_s_ok", [(np.str_("a"), np.bool_(True))], ("a", True)),
            ("by_d_ts", [(np.datetime64("2024-01-02"), np.datetime64("2024-01-02T03:00"))],
             (dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3))),
            ("by_tz", [(pd.Timestamp("2024-01-02 03:00", tz="Europe/Paris"),),
                       (dt.datetime(2024, 1, 1, 21, tzinfo=ZoneInfo("America/New_York")),)],
             (dt.datetime(2024, 1, 2, 2, tzinfo=UTC),)),
            ("n_by_x", [(Decimal("2.5"),), (np.float64(2.5),)], (2.5,))]:
        v = db.view(view)
        want = v.lookup(*plain_keys)
        assert want, view
        for key in keys:
            assert v.lookup(*key) == want, (view, key)
            assert v.lookup_many([key if len(key) > 1 else key[0]]) == [want], (view, key)
    sql = "SELECT id FROM t WHERE n = ?"
    assert db.execute(sql, (np.int64(7),)).fetchall() == db.execute(sql, (7,)).fetchall() == [(1,)]
    assert db.view("by_n").lookup(Decimal("7.5")) == []          # equals no INT
    assert db.view("by_n").lookup(Decimal("1e400")) == []        # (kept as it is: found nothing)
    assert db.view("by_tz").lookup(pd.Timestamp("2024-01-02 02:00:00.000000001", tz="UTC")) == []


@pytest.mark.parametrize("value, col, why", [
    (Decimal("1.5"), 1, "column 'n' of table 't' is INT, got Decimal\\('1.5'\\)"),
    (Decimal("1E+19"), 1, "is INT, got Decimal"),
    (np.float64(1.0), 1, "is INT, got np.float64\\(1.0\\)"),
    (np.uint64(2 ** 64 - 1), 1, "is INT"),
    (np.str_("x"), 2, "is FLOAT"),
    (Decimal("1e400"), 2, "is FLOAT: Decimal\\('1E\\+400'\\) is outside the range of a FLOAT"),
    (np.int64(1), 3, "is TEXT"),
    (np.int64(1), 4, "is BOOL"),
    (np.datetime64("2024-01-02T03:00"), 5, "is DATE"),
    (np.datetime64("2024-01-02"), 6, "is TIMESTAMP"),
    (pd.Timestamp("2024-01-02 03:00", tz="UTC"), 6, "TIMESTAMPTZ to keep instants"),
    (pd.Timestamp("2024-01-02 03:00"), 7, "is TIMESTAMPTZ, .* without a time zone"),
    (pd.Timestamp("2024-01-02 00:00:00.000000001"), 6, "has nanoseconds"),
    (pd.NaT, 0, "NOT NULL, got NaT"),
])
def test_a_value_that_does_not_fit_its_column_is_refused_as_the_plain_one_is(db, value, col, why):
    row = list(PLAIN_ROW)
    row[col] = value
    with pytest.raises(TypeMismatchError, match=why):
        db.table("t").insert([PLAIN_ROW[:0] + (2,) + PLAIN_ROW[1:], tuple(row)])
    with pytest.raises(TypeMismatchError):
        db.execute(f"INSERT INTO t VALUES ({', '.join('?' * 9)})", row)
    assert len(db.table("t")) == 0


def test_missing_values_of_pandas_are_null(db):
    db.table("t").insert([(1, pd.NA, None, None, None, None, pd.NaT, np.datetime64("NaT"), None)])
    assert db.table("t").rows() == [(1,) + (None,) * 8]
