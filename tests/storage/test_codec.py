from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.storage import StorageError, codec

UTC = dt.timezone.utc
VALUES = [
    0,
    1,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    1.0,
    0.0,
    -0.0,
    1.5,
    1e300,
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    "",
    "plain",
    "ünïcødé \U0001f600 \x00 nul",
    dt.date(2024, 2, 29),
    dt.date.min,
    dt.date.max,
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime.min,
    dt.datetime.max,
    dt.datetime(2021, 11, 7, 1, 30, fold=1),
    dt.datetime(2024, 1, 1, 12, 0, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=-23, minutes=-59, microseconds=-1))),
]


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dt.datetime):
        # Field-wise: aware datetimes in a DST fold never compare equal
        # across zones (PEP 495), even when they denote the same instant.
        return (
            a.replace(tzinfo=None) == b.replace(tzinfo=None)
            and a.utcoffset() == b.utcoffset()
            and a.fold == b.fold
        )
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_each_value_type_round_trips_with_its_type(value):
    (back,) = codec.unpackb(codec.packb((value,)))
    assert same(back, value)


def test_nan_round_trips():
    (back,) = codec.unpackb(codec.packb((float("nan"),)))
    assert type(back) is float and math.isnan(back)


def test_bool_int_float_stay_distinct():
    assert codec.unpackb(codec.packb((1, 1.0, True, 0, 0.0, False))) == (1, 1.0, True, 0, 0.0, False)
    assert [type(v) for v in codec.unpackb(codec.packb((1, 1.0, True)))] == [int, float, bool]


def test_every_value_type_survives_a_restart(open_storage, tmp_path):
    s = open_storage()
    rows = [tuple(VALUES), (float("nan"),)] + [(v,) for v in VALUES]
    s.append("t", rows, [])
    s.close()
    got = open_storage().load().tables["t"]
    assert len(got) == len(rows)
    for want, back in zip(rows, got):
        assert len(want) == len(back) and all(same(a, b) for a, b in zip(want, back))


@pytest.mark.parametrize(
    "bad",
    [{"a": 1}, {1, 2}, [1, 2], (1, 2), 2**64, -(2**63) - 1, object(), dt.time(1, 2), bytearray(b"x")],
    ids=lambda v: type(v).__name__,
)
def test_unstorable_values_are_refused_before_writing(open_storage, bad):
    s = open_storage()
    s.append("t", [(1,)], [])
    size = s.log_bytes()
    with pytest.raises(StorageError, match="table 't'"):
        s.append("t", [(2,), (bad,)], [])
    assert s.log_bytes() == size and s.lsn == 1
    assert s.append("t", [(3,)], []) == 2
    s.close()
    assert open_storage().load().tables == {"t": [(1,), (3,)]}


def test_rows_must_be_tuples(open_storage):
    s = open_storage()
    with pytest.raises(StorageError, match="row must be a tuple"):
        s.append("t", ["ab"], [])
    with pytest.raises(StorageError, match="row must be a tuple"):
        s.append("t", [], [5])
    assert s.lsn == 0


def test_subclasses_of_value_types_are_stored_as_the_base_type(open_storage):
    import enum

    class Color(enum.IntEnum):
        RED = 1

    class Name(str):
        pass

    s = open_storage()
    s.append("t", [(Color.RED, Name("x"))], [])
    s.close()
    (row,) = open_storage().load().tables["t"]
    assert row == (1, "x") and type(row[0]) is int and type(row[1]) is str


scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(),
    st.dates(),
    st.datetimes(),
    st.datetimes(timezones=st.timezones()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(scalars, scalars, scalars), max_size=5))
def test_rows_round_trip_property(rows):
    back = codec.unpackb(codec.packb(rows))
    assert len(back) == len(rows)
    for want, got in zip(rows, back):
        assert all(same(a, b) for a, b in zip(want, got))


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 2**200, -(2**200), 2**63, -(2**63)],
                         ids=lambda v: f"{'-' if v < 0 else ''}{v.bit_length()}bits")
def test_big_ints_travel_only_where_asked(value):
    """The cluster's wire (``big_ints=True``) carries integers past msgpack's 64 bits (a
    SUM of an INT column passes them) as extension type 4; the data directory refuses
    them (no table holds one)."""
    back = codec.unpackb(codec.packb([value, (1, value)], big_ints=True))
    assert back == (value, (1, value)) and type(back[0]) is int
    if not -(2**63) <= value <= 2**64 - 1:
        with pytest.raises(codec.EncodeError, match="outside msgpack's range"):
            codec.packb(value)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 20000), st.integers(0, 40000),
       st.sampled_from([b"\xcb\x7f\xf0", b"\xcb\xff\xff", b"\xca\x7f\x80", b"\xca\xff\xc0",
                        b"\xcb\x7f\xef", b"\xca\x7e\x80", b"\xcb\xfe\xf8", b""]))
def test_the_nan_scan_finds_what_the_pattern_finds(seed, size, at, planted):
    """``maybe_nan`` scans a long payload with numpy, a short one with the regular
    expression's two halves: the same answer as the whole expression, at every length
    around the switch (random bytes, with 0xca/0xcb leads here and there, and a
    planted near-miss or match)."""
    import numpy as np

    from noria_py.storage.codec import _MAYBE_NAN, _SCAN_BY_ARRAY, maybe_nan
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    data = data.replace(b"\xcb\x7f", b"\xcb\x00").replace(b"\xcb\xff", b"\xcb\x00") \
        .replace(b"\xca\x7f", b"\xca\x00").replace(b"\xca\xff", b"\xca\x00")
    data = data[:at] + planted + data[at:]
    for cut in (len(data), _SCAN_BY_ARRAY - 1, _SCAN_BY_ARRAY, _SCAN_BY_ARRAY + 1, 2048, 3):
        part = data[:cut]
        assert maybe_nan(part) == (_MAYBE_NAN.search(part) is not None), (cut, planted)
        assert maybe_nan(memoryview(part)) == maybe_nan(bytearray(part))


def test_the_nan_scan_looks_across_its_blocks():
    from noria_py.storage import codec
    block = codec._SCAN_BLOCK
    for at in (block - 3, block - 2, block - 1, block, 2 * block - 1):
        data = bytearray(2 * block + 10)
        data[at:at + 3] = b"\xcb\x7f\xf8"
        assert codec.maybe_nan(bytes(data)), at
    assert not codec.maybe_nan(bytes(2 * block + 10))


def test_an_exact_avg_travels_exact_wherever_it_is():
    """An ``ExactAvg`` (a float subclass, which msgpack would write as a float) comes
    back an ``ExactAvg`` with its sum and count, in rows, columns, maps and alone; its
    sum past 64 bits too; other values and shapes are left as they were."""
    from noria_py.ops.accumulators import ExactAvg
    small, big = ExactAvg(3, 2), ExactAvg(2**70 + 1, 3)
    for big_ints in (False, True):
        for value in [small, [(1, small), (2, 2.5)], ("x", {"r": [(big, None)], 3: (small,)}),
                      [(1, "a"), (small, [big])], [(1, "a"), (2, [big])],
                      ["o", [small, 2.5, None]]]:
            back = codec.unpackb(codec.packb(value, big_ints=big_ints))
            flat = [back]
            avgs = []
            while flat:
                v = flat.pop()
                if isinstance(v, dict):
                    flat.extend(v.values())
                elif isinstance(v, (list, tuple)):
                    flat.extend(v)
                elif isinstance(v, float) and v in (1.5, big):
                    avgs.append(v)
            assert avgs and all(type(v) is ExactAvg for v in avgs), value
            assert {(v.total, v.count) for v in avgs} <= {(3, 2), (2**70 + 1, 3)}
    assert type(codec.unpackb(codec.packb([(2.5,)]))[0][0]) is float
    for bad in [b"", codec.packb((1,)), codec.packb((1, 0)), codec.packb(("1", 2))]:
        with pytest.raises(codec.DecodeError):
            codec.unpackb(codec.packb(codec.msgpack.ExtType(codec.EXT_AVG, bad)))


def test_a_kept_packer_writes_what_packb_writes_and_survives_its_errors():
    """``codec.Packer`` (a cluster connection's): the same bytes and errors as
    ``packb``, its buffer emptied after an error and let go after a big payload."""
    values = [[1, "x", None, 2.5, True], [2**70, -(2**65)], {"d": dt.date(2020, 1, 2)},
              [b"\x00" * 10]]
    pack = codec.Packer(big_ints=True)
    for v in values:
        assert pack(v) == codec.packb(v, big_ints=True)
    with pytest.raises(codec.EncodeError):
        pack([1, object()])
    assert pack([3]) == codec.packb([3])             # (nothing of the failed value left)
    with pytest.raises(codec.EncodeError):
        codec.Packer()([2**70])                      # (without big_ints, as packb)
    big = [b"x" * (codec.Packer.KEEP + 1)]
    assert pack(big) == codec.packb(big) and pack([4]) == codec.packb([4])
    from noria_py.ops.accumulators import ExactAvg
    rows = [(1, ExactAvg(3, 2)), (2, 2.5)]          # (an exact AVG carried as packb does)
    assert pack(rows) == codec.packb(rows, big_ints=True)
    assert type(codec.unpackb(pack(rows))[0][1]) is ExactAvg


def _nans(obj) -> list[float]:
    """Every float NaN in ``obj`` where ``canon_deep`` looks (tuples, lists, dicts)."""
    if type(obj) is float:
        return [obj] if obj != obj else []
    if type(obj) in (tuple, list):
        return [n for v in obj for n in _nans(v)]
    if type(obj) is dict:
        return [n for kv in obj.items() for v in kv for n in _nans(v)]
    return []


_LEAVES = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.just(float("nan")),
                    st.text(max_size=3), st.none(), st.binary(max_size=40), st.booleans())
_NESTED = st.recursive(
    _LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=6), st.tuples(inner, inner),
                                     st.dictionaries(st.one_of(st.integers(0, 9), st.floats()),
                                                     inner, max_size=3)),
    max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(_NESTED, st.integers(0, 60))
def test_the_nan_walk_finds_a_nan_wherever_canon_deep_would_change_one(obj, budget):
    """``nan_in`` answers whether a NaN is anywhere ``canon_deep`` replaces one (nested
    in tuples, lists, dict keys and values, not inside bytes or strings), or None
    (give up: the caller scans the bytes); with room enough it never gives up."""
    found = codec.nan_in(obj, budget)
    assert found is None or found == bool(_nans(obj))
    assert codec.nan_in(obj, 10_000) == bool(_nans(obj))


def test_a_long_payload_is_walked_and_its_nans_are_the_one_nan():
    """A payload long enough to be walked instead of scanned (``NAN_WALK_MIN``): raw
    column bytes full of 0xcb 0x7f 0xf8 (a float NaN's bytes, which the scan takes for
    one) and no NaN come back unchanged; a NaN nested in a dict key, a dict value, a
    list or a tuple, next to such bytes, comes back as the one ``NAN`` object."""
    from noria_py.nan import NAN
    raw = b"\xcb\x7f\xf8\x00\x00\x00\x00\x00" * 512          # (4 KB: a walk)
    assert len(codec.packb(["c", [["i", raw]], 7])) >= codec.NAN_WALK_MIN
    assert codec.maybe_nan(raw)                              # (the scan: a false match)
    assert codec.nan_in(codec.unpackb(codec.packb(["c", [["i", raw]], 7])), 100) is False
    for where in (lambda n: {n: 1}, lambda n: {1: n}, lambda n: [[1, n]], lambda n: (2, (n,))):
        back = codec.unpackb(codec.packb(["c", [["i", raw]], where(float("nan"))]))
        (nan,) = _nans(back)
        assert nan is NAN
    # past the walk's budget (many small arrays): the scan finds it all the same
    rows = [(i, float("nan") if i == 700 else 1.5) for i in range(1000)]
    back = codec.unpackb(codec.packb(rows))
    assert back[700][1] is NAN and codec.nan_in(back, len(codec.packb(rows)) // 48) is None
