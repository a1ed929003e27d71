"""Hash sharding of a stream (noria_py/ops/sharder.py)."""
from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.hashing import shard_of
from noria_py.ops import Sharder


def where(outs, row) -> set[int]:
    return {i for i, b in enumerate(outs) if row in b.rows}


def test_one_output_per_shard_every_row_once_signs_kept():
    s = Sharder((0,), 4)
    assert s.splits and not s.stateful
    b = Batch([(i, "x") for i in range(20)] + [(3, "y")], [1] * 20 + [-2])
    outs = s.process(0, b)
    assert len(outs) == 4
    assert sum(len(o) for o in outs) == 21
    merged = Batch()
    for o in outs:
        merged.extend(o)
    assert merged.multiset() == b.multiset()
    for o in outs:
        for r, sign in o:
            assert sign == (-2 if r == (3, "y") else 1)
    # int keys land on key % shards
    for i, o in enumerate(outs):
        assert all(r[0] % 4 == i for r in o.rows)


def test_equal_keys_same_shard_including_1_1point0_and_true():
    for n in (2, 3, 5, 8):
        s = Sharder((1,), n)
        rows = [("a", 1), ("b", 1.0), ("c", True), ("d", 0), ("e", 0.0), ("f", False),
                ("g", -3), ("h", -3.0)]
        outs = s.process(0, Batch.inserts(rows))
        assert where(outs, ("a", 1)) == where(outs, ("b", 1.0)) == where(outs, ("c", True))
        assert where(outs, ("d", 0)) == where(outs, ("e", 0.0)) == where(outs, ("f", False))
        assert where(outs, ("g", -3)) == where(outs, ("h", -3.0))


def test_consistent_with_shard_of():
    vals = [None, 0, 7, -7, 2 ** 65, 1.5, -0.25, "abc", "", True,
            datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 5)]
    for n in (1, 3, 4):
        s = Sharder((0,), n)
        outs = s.process(0, Batch.inserts([(v, i) for i, v in enumerate(vals)]))
        for i, v in enumerate(vals):
            assert where(outs, (v, i)) == {shard_of((v,), n)}


def test_compound_key_routing():
    s = Sharder((0, 2), 5)
    rows = [(1, "p", "a"), (1.0, "q", "a"), (True, "r", "a"), (2, "s", "a"), (None, "t", None)]
    outs = s.process(0, Batch.inserts(rows))
    assert where(outs, rows[0]) == where(outs, rows[1]) == where(outs, rows[2])
    for r in rows:
        assert where(outs, r) == {shard_of((r[0], r[2]), 5)}


def test_null_keys_go_to_shard_zero():
    s = Sharder((0,), 3)
    outs = s.process(0, Batch.inserts([(None, 1), (None, 2)]))
    assert outs[0].rows == [(None, 1), (None, 2)]
    assert not outs[1] and not outs[2]


def test_single_shard_and_empty_key():
    s = Sharder((0,), 1)
    outs = s.process(0, Batch.inserts([(i,) for i in range(5)]))
    assert len(outs) == 1 and len(outs[0]) == 5
    e = Sharder((), 3)
    outs = e.process(0, Batch.inserts([(1,), ("x",)]))
    assert [len(o) for o in outs] == [2, 0, 0]


def test_strings_spread_over_shards():
    s = Sharder((0,), 4)
    outs = s.process(0, Batch.inserts([(f"user{i}",) for i in range(200)]))
    assert all(len(o) > 20 for o in outs)


def test_empty_batch_and_describe():
    s = Sharder((0, 1), 3)
    outs = s.process(0, Batch())
    assert len(outs) == 3 and not any(outs)
    assert s.describe() == "sharder[0, 1]x3"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-50, 50), st.booleans(),
                                    st.integers(-50, 50).map(float), st.sampled_from(["a", "b"])),
                          st.integers(0, 3)), max_size=30),
       st.integers(1, 6), st.booleans())
def test_random_equal_keys_share_a_shard(rows, n, compound):
    key = (0, 1) if compound else (0,)
    s = Sharder(key, n)
    outs = s.process(0, Batch.inserts(rows))
    assert sum(len(o) for o in outs) == len(rows)
    seen: dict = {}
    for i, o in enumerate(outs):
        for r in o.rows:
            k = tuple(r[j] for j in key)
            assert seen.setdefault(k, i) == i       # dict equality: 1 == 1.0 == True
            assert shard_of(k, n) == i


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.integers(-10**12, 10**12), st.integers(-3, 3),
                                             st.sampled_from([1, -1, 2])), min_size=1, max_size=40))
def test_columnar_batches_go_where_their_rows_would(shards, rows):
    """An int64 key column is split vectorized (negative keys too), to the shards the
    row path and shard_of pick, as columnar batches."""
    import numpy as np
    s = Sharder((0,), shards)
    b = Batch([r[:2] for r in rows], [r[2] for r in rows])
    c = Batch.columnar([np.array([r[0] for r in rows], dtype=np.int64),
                        np.array([r[1] for r in rows], dtype=np.int64)],
                       np.array([r[2] for r in rows], dtype=np.int64))
    by_rows, by_cols = s.process(0, b), s.process(0, c)
    assert len(by_cols) == shards
    for i, (o_rows, o_cols) in enumerate(zip(by_rows, by_cols)):
        assert o_cols.multiset() == o_rows.multiset()
        assert all(shard_of((r[0],), shards) == i for r in o_cols.rows)
        assert o_cols.cols is not None or not o_cols
