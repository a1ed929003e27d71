"""A reader's range parameters: its sorted index and ``range_lookup`` (ops/reader.py).

The rule checked: a range read answers exactly as the filter ``col op value`` does in
the engine (NULL never matches, NaN equals NaN and is above every other number), for
every row written since, deleted or not, before and after the index is built, and
after the index is dropped by a reset or a checkpoint's load.
"""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.nan import NAN
from noria_py.ops import Reader
from sql_frontend.plan import OrderKey

from .helpers import dels, ins


def _passes(v, op: str, b) -> bool:
    """The engine's comparison of ``v op b`` (noria_py/expression.py's NaN-aware one)."""
    if v is None or b is None:
        return False
    vn, bn = v != v, b != b
    if op == ">":
        return (vn and not bn) or (not vn and not bn and v > b)
    if op == ">=":
        return vn or (not bn and v >= b)
    if op == "<":
        return (bn and not vn) or (not vn and not bn and v < b)
    return bn or (not vn and v <= b)


def test_a_range_read_is_a_scan_of_the_rows_that_pass():
    r = Reader((), 2, 2, range_column=1)
    r.process(0, ins((1, 5), (2, None), (3, 1), (4, 5), (5, 9)))
    assert sorted(r.range_lookup((), [(">", 1)])) == [(1, 5), (4, 5), (5, 9)]
    assert sorted(r.range_lookup((), [(">=", 5), ("<=", 5)])) == [(1, 5), (4, 5)]
    assert r.range_lookup((), [(">", 5), ("<=", 5)]) == []          # empty
    assert r.range_lookup((), [(">", 9), ("<", 1)]) == []           # crossed
    assert r.range_lookup((), [(">", None)]) == []                  # NULL bound: nothing
    assert sorted(r.range_lookup((), [])) == [(1, 5), (3, 1), (4, 5), (5, 9)]   # no NULL row
    r.process(0, dels((4, 5)))                                      # kept up to date
    r.process(0, ins((6, 2)))
    assert sorted(r.range_lookup((), [(">", 1), ("<", 9)])) == [(1, 5), (6, 2)]


def test_equality_key_then_range_nan_above_every_number():
    r = Reader((0,), 2, 3, order=(OrderKey(2, descending=True),), range_column=1)
    rows = [("x", 1.0, 1), ("x", NAN, 2), ("x", math.inf, 3), ("y", 2.0, 4), (None, 3.0, 5),
            ("x", None, 6)]
    r.process(0, ins(*rows))
    assert r.range_lookup("x", [(">", 0.5)]) == [("x", math.inf), ("x", NAN), ("x", 1.0)]
    assert r.range_lookup("x", [(">=", float("nan"))]) == [("x", NAN)]   # any NaN object
    assert r.range_lookup("x", [(">", NAN)]) == []
    assert r.range_lookup("x", [("<", NAN)]) == [("x", math.inf), ("x", 1.0)]
    assert r.range_lookup(None, [(">", 0)]) == []
    assert r.range_lookup("z", [(">", 0)]) == []


def test_the_index_is_rebuilt_after_a_reset_and_a_load():
    r = Reader((), 2, 2, range_column=1)
    r.process(0, ins((1, 5), (2, 7)))
    assert r.range_lookup((), [(">", 5)]) == [(2, 7)]
    snapshot = r.contents()
    r.reset()
    assert r.range_lookup((), [(">", 0)]) == []
    for batch in snapshot:
        r.load_input(0, batch)
    assert r.range_lookup((), [(">", 5)]) == [(2, 7)]
    r.process(0, ins((3, 6)))
    assert r.range_lookup((), [(">=", 6)]) == [(3, 6), (2, 7)]


values = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([1.5, math.inf, -math.inf]),
                   st.just(float("nan")))
bound_values = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, math.inf, float("nan")]))
ops = st.sampled_from([">", ">=", "<", "<="])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2), values), max_size=25),
       st.lists(st.tuples(ops, bound_values), min_size=1, max_size=2), st.booleans())
def test_range_reads_match_the_filter(writes, bounds, early):
    """Random inserts and deletes (of rows present), the index built before them
    (``early``) or by the read after; each read's rows are the filter's."""
    r = Reader((0,), 3, 3, range_column=2)
    held: list[tuple] = []
    if early:
        r.range_lookup(0, [])
    for n, (insert, k, v) in enumerate(writes):
        v = NAN if v != v else v
        if insert or not held:
            row = (k, n, v)
            held.append(row)
            r.process(0, Batch([row], [1]))
        else:
            row = held.pop(n % len(held))
            r.process(0, Batch([row], [-1]))
    canon = [(op, NAN if b != b else b) for op, b in bounds]
    for k in range(3):
        want = sorted((row for row in held if row[0] == k
                       and all(_passes(row[2], op, b) for op, b in canon)),
                      key=lambda row: row[1])
        assert sorted(r.range_lookup(k, bounds), key=lambda row: row[1]) == want


def test_an_index_built_beside_a_batch_is_not_kept():
    """A cluster worker's read thread builds the index beside the message thread
    (runtime/cluster/reads.py): a batch applied after the read took the rows, while
    there was no index to put it in, must not be missing from the index later reads
    use; ``unchanged`` (the seqlock's "no frame began") false drops the index."""
    r = Reader((), 2, 2, range_column=1)
    r.process(0, ins((1, 5), (2, 7)))
    taken = r.state.rows

    def rows_then_a_batch():
        out = taken()
        r.process(0, ins((3, 6)))       # (the message thread, between the two)
        return out
    r.state.rows = rows_then_a_batch
    assert sorted(r.range_lookup((), [(">", 0)], unchanged=lambda: False)) == [(1, 5), (2, 7)]
    r.state.rows = taken
    assert sorted(r.range_lookup((), [(">", 0)])) == [(1, 5), (2, 7), (3, 6)]
    r.process(0, ins((4, 9)))
    assert sorted(r.range_lookup((), [(">=", 6)], unchanged=lambda: True)) == [(2, 7), (3, 6),
                                                                             (4, 9)]
    r.process(0, dels((3, 6)))          # (kept this time: the batch goes into it)
    assert sorted(r.range_lookup((), [(">=", 6)])) == [(2, 7), (4, 9)]
