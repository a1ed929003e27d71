"""Values in PostgreSQL's text and binary formats: what goes out reads back as what went
in, and floats are written as PostgreSQL 15 writes them."""
from __future__ import annotations

import datetime
import math
import random
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noria_py.errors import DataError
from noria_py.pg import types as T

psycopg = pytest.importorskip("psycopg")

VALUES = {
    T.INT8: st.integers(-(1 << 63), (1 << 63) - 1),
    T.FLOAT8: st.floats(allow_nan=False),
    T.BOOL: st.booleans(),
    T.DATE: st.dates(),
    T.TIMESTAMP: st.datetimes(min_value=datetime.datetime(1000, 1, 1)),
    T.TEXT: st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0")),
}


@pytest.mark.parametrize("oid", sorted(VALUES))
@given(data=st.data())
def test_values_read_back_as_written(oid: int, data: Any) -> None:
    v = data.draw(VALUES[oid])
    assert T.decode(oid, True, T.binary_out(oid, v), 1) == v
    assert T.decode(oid, False, T.text_out(v), 1) == v


def test_nan_reads_back() -> None:
    assert math.isnan(T.decode(T.FLOAT8, False, T.text_out(math.nan), 1))
    assert math.isnan(T.decode(T.FLOAT8, True, T.binary_out(T.FLOAT8, math.nan), 1))


@pytest.mark.parametrize("oid, data", [(T.INT8, b"12x"), (T.BOOL, b"maybe"),
                                       (T.DATE, b"2024-13-01"), (T.INT4, b"\0\0")])
def test_a_value_not_of_its_type_is_a_data_error(oid: int, data: bytes) -> None:
    with pytest.raises(DataError, match="parameter \\$3"):
        T.decode(oid, oid == T.INT4, data, 3)


def test_numeric_parameters_in_binary() -> None:
    def numeric(digits: list[int], weight: int, sign: int, dscale: int) -> bytes:
        return struct.pack(f"!hhHh{len(digits)}h", len(digits), weight, sign, dscale, *digits)
    assert T.decode(T.NUMERIC, True, numeric([12, 3400], 0, 0, 2), 1) == 12.34
    assert T.decode(T.NUMERIC, True, numeric([1, 0], 1, 0x4000, 0), 1) == -10000
    assert T.decode(T.NUMERIC, True, numeric([], 0, 0, 0), 1) == 0


def test_floats_are_written_as_postgres_writes_them(postgres: Any) -> None:
    rng = random.Random(7)
    xs = [0.0, -0.0, 1.0, 100.0, 1e15, 1e14, 123456789012345.0, 1e-4, 1e-5, 0.1, 1 / 3,
          -2.5e-300, 1.7976931348623157e308, 5e-324, math.inf, -math.inf, math.nan]
    xs += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    xs += [rng.random() * 10 ** rng.randint(-30, 30) for _ in range(200)]
    with psycopg.connect(postgres.dsn) as c:
        want = [r[0] for r in c.execute("SELECT unnest(%s::float8[])::text", (xs,))]
    assert [T.float_text(x) for x in xs] == want
