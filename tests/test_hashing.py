"""Stable sharding hashes (noria_py/hashing.py)."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
import zlib
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.hashing import key_hash, shard_of, value_hash


def test_none_hashes_to_zero():
    assert value_hash(None) == 0


def test_one_one_float_and_true_hash_alike():
    assert value_hash(1) == value_hash(1.0) == value_hash(True) == 1
    assert value_hash(0) == value_hash(0.0) == value_hash(-0.0) == value_hash(False) == 0
    assert value_hash(-7) == value_hash(-7.0) == -7


def test_other_numbers_hash_as_the_int_or_float_they_equal():
    # a lookup key may be one: it must reach the shard of the rows it equals
    assert value_hash(Decimal(7)) == value_hash(Fraction(14, 2)) == value_hash(7)
    assert value_hash(Fraction(1, 2)) == value_hash(Decimal("0.5")) == value_hash(0.5)
    assert value_hash(Decimal("2.0")) == 2 and value_hash(complex(3, 0)) == 3
    assert value_hash(Decimal(2 ** 70 + 1)) == 2 ** 70 + 1
    assert value_hash(Decimal("Infinity")) == value_hash(float("inf"))


def test_int_hash_is_the_int_itself():
    assert value_hash(12345) == 12345
    assert value_hash(2 ** 70) == 2 ** 70
    for shards in (1, 2, 3, 7):
        for v in (-5, 0, 4, 2 ** 64 + 3):
            assert shard_of((v,), shards) == v % shards


def test_non_integral_float_hash():
    assert value_hash(1.5) == zlib.crc32(b"\x00\x00\x00\x00\x00\x00\xf8?")
    assert value_hash(1.5) != value_hash(1)
    assert value_hash(float("inf")) == value_hash(float("inf"))


def test_string_hash_is_crc32_of_utf8():
    assert value_hash("abc") == zlib.crc32(b"abc") == 891568578
    assert value_hash("") == 0
    assert value_hash("é") == zlib.crc32("é".encode())
    assert value_hash("a") != value_hash("b")


def test_lone_surrogate_string_hashes():
    assert value_hash("\ud800") == zlib.crc32("\ud800".encode("utf-8", "surrogatepass"))


def test_dates_and_timestamps():
    d = datetime.date(2024, 3, 1)
    assert value_hash(d) == d.toordinal()
    ts = datetime.datetime(2024, 3, 1, 12, 30)
    assert value_hash(ts) == zlib.crc32(b"2024-03-01T12:30:00")
    assert value_hash(ts) == value_hash(datetime.datetime(2024, 3, 1, 12, 30))


def test_unsupported_type_raises():
    with pytest.raises(TypeError):
        value_hash(b"bytes")
    with pytest.raises(TypeError):
        value_hash([1])


def test_key_hash_single_is_value_hash():
    for v in (None, 3, -3, 2.5, "x", True):
        assert key_hash((v,)) == value_hash(v)


def test_key_hash_compound_sql_equal_keys_alike():
    assert key_hash((1, "a")) == key_hash((1.0, "a")) == key_hash((True, "a"))
    assert key_hash((1, None)) == key_hash((1.0, None))
    assert key_hash((1, 2)) != key_hash((2, 1))
    assert 0 <= key_hash((2 ** 80, -(2 ** 80))) < 2 ** 64
    assert key_hash(()) == 0


def test_shard_of_in_range():
    for v in (-10, -1, 0, 1, 10, 1.5, -2.5, "s", None, (1, 2)):
        key = v if isinstance(v, tuple) else (v,)
        for n in (1, 2, 5):
            assert 0 <= shard_of(key, n) < n
    assert shard_of(("anything",), 1) == 0


def test_hash_is_stable_across_processes():
    # a fresh interpreter with another string-hash seed; hashing.py is loaded on its own
    # (it needs only the standard library) to keep the child quick
    import noria_py.hashing as h
    code = ("import importlib.util as u, sys;"
            "s = u.spec_from_file_location('h', sys.argv[1]); m = u.module_from_spec(s);"
            "s.loader.exec_module(m);"
            "print(m.key_hash(('hello',)), m.key_hash(('a', 2, 2.5, None)))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, h.__file__], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.split() == [str(key_hash(("hello",))), str(key_hash(("a", 2, 2.5, None)))]
    assert out.split()[0] == str(zlib.crc32(b"hello"))


@settings(max_examples=80, deadline=None)
@given(st.integers(-(2 ** 53), 2 ** 53), st.integers(1, 16))
def test_int_and_equal_float_same_shard(v, n):
    assert shard_of((v,), n) == shard_of((float(v),), n)
    assert shard_of((v, "k"), n) == shard_of((float(v), "k"), n)


def test_every_nan_hashes_alike_and_apart_from_infinities():
    import struct
    nans = [float("nan"), -float("nan"), float("inf") - float("inf")] + [
        struct.unpack("<d", bytes.fromhex(h))[0]
        for h in ("010000000000f87f", "000000000000f8ff", "ffffffffffffff7f")]
    assert len({value_hash(v) for v in nans}) == 1
    assert value_hash(nans[0]) not in (value_hash(float("inf")), value_hash(-float("inf")))
    for shards in (2, 3, 4, 7):
        assert len({shard_of((v, 1), shards) for v in nans}) == 1
