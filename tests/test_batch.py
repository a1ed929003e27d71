"""The signed-delta batch format (noria_py/batch.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import EMPTY, Batch


def test_default_batch_is_empty():
    b = Batch()
    assert b.rows == [] and b.signs == []
    assert len(b) == 0
    assert not b
    assert list(b) == []


def test_a_slice_of_a_batch_is_its_entries_there_columns_kept():
    cols = [np.arange(6, dtype=np.int64), np.arange(6, 12, dtype=np.int64)]
    b = Batch.columnar(cols, np.array([1, 2, 1, 1, 3, 1], dtype=np.int64))
    part = b.sliced(2, 5)
    assert part.cols is not None and part.rows == [(2, 8), (3, 9), (4, 10)]
    assert part.signs == [1, 1, 3] and len(b.sliced(4, 99)) == 2
    rows = Batch([(1,), (2,), (3,)], [1, -1, 2])
    assert list(rows.sliced(1, 3)) == [((2,), -1), ((3,), 2)]


def test_rows_without_signs_are_insertions():
    b = Batch([(1,), (2,)])
    assert b.signs == [1, 1]
    assert list(b) == [((1,), 1), ((2,), 1)]


def test_inserts_and_deletes_constructors():
    i = Batch.inserts(iter([(1, "a"), (2, None)]))
    assert i.rows == [(1, "a"), (2, None)]
    assert i.signs == [1, 1]
    d = Batch.deletes([(1, "a")])
    assert d.rows == [(1, "a")]
    assert d.signs == [-1]


def test_add_and_extend():
    b = Batch()
    b.add((1,))
    b.add((2,), -3)
    assert list(b) == [((1,), 1), ((2,), -3)]
    c = Batch([(3,)], [2])
    b.extend(c)
    assert list(b) == [((1,), 1), ((2,), -3), ((3,), 2)]
    assert c.rows == [(3,)] and c.signs == [2]       # the source is not changed
    assert len(b) == 3 and bool(b)


def test_separate_batches_do_not_share_lists():
    a, b = Batch(), Batch()
    a.add((1,))
    assert len(b) == 0


def test_consolidated_merges_drops_zero_and_keeps_first_seen_order():
    b = Batch([(2,), (1,), (2,), (3,), (1,), (None,)], [1, 1, 2, 1, -1, -1])
    c = b.consolidated()
    assert list(c) == [((2,), 3), ((3,), 1), ((None,), -1)]
    # the original is untouched
    assert b.signs == [1, 1, 2, 1, -1, -1]


def test_consolidated_of_cancelling_batch_is_empty():
    b = Batch([(1, None), (1, None)], [1, -1])
    assert not b.consolidated()
    assert b.multiset() == {}


def test_multiset():
    b = Batch([(1,), (2,), (1,), (2,)], [2, 1, 1, -1])
    assert b.multiset() == {(1,): 3}


def test_multiset_treats_sql_equal_values_alike():
    # 1, 1.0 and True are the same dict key, as SQL equality wants
    b = Batch([(1,), (1.0,)], [1, -1])
    assert b.multiset() == {}


def test_negated_is_a_new_batch():
    b = Batch([(1,), (2,)], [1, -2])
    n = b.negated()
    assert list(n) == [((1,), -1), ((2,), 2)]
    assert b.signs == [1, -2]
    assert n.rows is not b.rows
    assert n.negated().multiset() == b.multiset()


def test_repr_shows_signs():
    b = Batch([(1, "a"), (2, None)], [1, -2])
    assert repr(b) == "Batch[+1(1, 'a'), -2(2, None)]"


def test_empty_constant():
    assert len(EMPTY) == 0 and not EMPTY


rows = st.tuples(st.integers(0, 3), st.none() | st.sampled_from(["a", "b"]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(rows, st.integers(-3, 3).filter(bool)), max_size=20))
def test_consolidated_matches_multiset(entries):
    b = Batch([r for r, _ in entries], [s for _, s in entries])
    c = b.consolidated()
    assert dict(zip(c.rows, c.signs)) == b.multiset()
    assert len(set(c.rows)) == len(c.rows)
    assert all(c.signs)
    # consolidated + negated original sums to nothing
    both = Batch(list(c.rows), list(c.signs))
    both.extend(b.negated())
    assert both.multiset() == {}


# ---------------------------------------------------------------- columnar batches

def _columnar():
    import numpy as np
    obj = np.empty(3, dtype=object)
    obj[:] = ["a", None, "c"]
    return Batch.columnar([np.array([1, 2, 3]), np.array([0.5, 1.0, -2.0]), obj],
                          np.array([1, -1, 2]))


def test_columnar_batch_reads_as_python_rows():
    b = _columnar()
    assert len(b) == 3 and b
    assert b.rows == [(1, 0.5, "a"), (2, 1.0, None), (3, -2.0, "c")]
    assert [tuple(map(type, r)) for r in b.rows][0] == (int, float, str)   # not numpy scalars
    assert b.signs == [1, -1, 2] and type(b.signs[0]) is int
    assert b.multiset() == {(1, 0.5, "a"): 1, (2, 1.0, None): -1, (3, -2.0, "c"): 2}


def test_columnar_to_rows_does_not_keep_the_rows():
    b = _columnar()
    assert b.to_rows() == [(1, 0.5, "a"), (2, 1.0, None), (3, -2.0, "c")]
    assert b._rows is None and b.cols is not None


def test_changing_a_columnar_batch_turns_it_into_rows():
    b = _columnar()
    b.add((4, 0.0, "d"), -1)
    assert b.cols is None and b.sign_array is None
    assert b.rows[-1] == (4, 0.0, "d") and b.signs == [1, -1, 2, -1]
    c = _columnar()
    c.extend(Batch([(9, 9.0, "z")]))
    assert len(c) == 4 and c.rows[-1] == (9, 9.0, "z")


def test_columnar_batch_of_no_columns():
    import numpy as np
    b = Batch.columnar([], np.array([1, 1]))
    assert b.rows == [(), ()] and len(b) == 2


def test_undoing_takes_a_keyed_state_back_row_by_row():
    """Applied row by row to a state of one row a key that refuses a second row, a
    batch's ``undoing`` brings back the state before it (a replaced row -old/+new is
    put back as -new/+old), and leaves the batch as it was; columnar batches too."""
    import numpy as np

    def apply(state: dict, batch: Batch) -> None:
        for r, s in batch:
            if s < 0:
                assert state.pop(r[0]) == r
            else:
                assert r[0] not in state
                state[r[0]] = r
    before = {1: (1, "a"), 2: (2, "b")}
    b = Batch([(1, "a"), (1, "x"), (3, "c"), (2, "b")], [-1, 1, 1, -1])
    state = dict(before)
    apply(state, b)
    apply(state, b.undoing())
    assert state == before and b.signs == [-1, 1, 1, -1]
    c = Batch.columnar([np.array([1, 1]), np.array([5, 6])], np.array([-1, 1]))
    assert list(c.undoing()) == [((1, 6), -1), ((1, 5), 1)]


def test_concat_joins_columns_of_one_dtype_and_keeps_each_values_type_otherwise():
    ints = Batch.columnar([np.array([1, 2]), np.array([3, 4])], np.array([1, -1]))
    more = Batch.columnar([np.array([5]), np.array([6])], np.array([1]))
    both = Batch.concat([ints, more])
    assert both.cols is not None and [c.dtype for c in both.cols] == [np.int64, np.int64]
    assert list(both) == [((1, 3), 1), ((2, 4), -1), ((5, 6), 1)]
    assert Batch.concat([ints]) is ints
    # int and float in one column would make floats: joined as rows, each value as it was
    floats = Batch.columnar([np.array([1.5]), np.array([7])], np.array([1]))
    mixed = Batch.concat([ints, floats])
    assert mixed.cols is None and list(mixed) == [((1, 3), 1), ((2, 4), -1), ((1.5, 7), 1)]
    assert [type(v) for v in mixed.rows[0]] == [int, int]
    # objects (a NULL) beside ints: one object column, the ints still ints
    nulls = Batch.columnar([np.array([None], dtype=object), np.array([8])], np.array([1]))
    obj = Batch.concat([ints, nulls])
    assert obj.cols is not None and obj.cols[0].dtype == object
    assert obj.rows == [(1, 3), (2, 4), (None, 8)] and type(obj.rows[0][0]) is int
    rows = Batch([(9, 9)], [-1])
    assert list(Batch.concat([rows, ints])) == [((9, 9), -1), ((1, 3), 1), ((2, 4), -1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1),
                          st.lists(st.tuples(st.integers(0, 3), st.sampled_from([1, -1])), max_size=4),
                          st.booleans()), max_size=12))
def test_joined_runs_keep_each_ports_entries_in_order(parts):
    """``joined_runs`` (a restarting aggregate's inputs): per port, the same entries in
    the same order as the parts one after another, each run of one port one batch."""
    from noria_py.runtime.domain import joined_runs
    inputs = []
    for port, entries, columnar in parts:
        rows, signs = [(k, k * 10) for k, _ in entries], [s for _, s in entries]
        b = (Batch.columnar([np.array([r[0] for r in rows], dtype=np.int64),
                             np.array([r[1] for r in rows], dtype=np.int64)],
                            np.array(signs, dtype=np.int64))
             if columnar else Batch(rows, signs))
        inputs.append((port, b))
    out = joined_runs(inputs)
    for port in (0, 1):
        assert [e for p, b in out if p == port for e in b] == [
            e for p, b in inputs if p == port for e in b]
    assert all(len(b) for _, b in out)
    assert all(a != b for (a, _), (b, _) in zip(out, out[1:]))
