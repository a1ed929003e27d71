"""SELECT DISTINCT (noria_py/ops/distinct.py)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import Distinct

from .helpers import Tracker, dels, ins, random_batch


def test_duplicates_emitted_once():
    d = Tracker(Distinct())
    out = d.feed(0, ins((1, "a"), (1, "a"), (2, None)))
    assert list(out) == [((1, "a"), 1), ((2, None), 1)]
    assert not d.feed(0, ins((1, "a")))
    assert d.state() == {(1, "a"): 1, (2, None): 1}
    d.check()


def test_row_stays_until_last_copy_deleted():
    d = Tracker(Distinct())
    d.feed(0, ins((1,), (1,), (1,)))
    assert not d.feed(0, dels((1,)))
    assert not d.feed(0, dels((1,)))
    out = d.feed(0, dels((1,)))
    assert list(out) == [((1,), -1)]
    assert d.state() == {} and d.op.counts == {}
    out = d.feed(0, ins((1,)))
    assert list(out) == [((1,), 1)]
    d.check()


def test_null_rows_are_distinct_values_like_any_other():
    d = Tracker(Distinct())
    d.feed(0, ins((None, None), (None, None), (None, 1)))
    assert d.state() == {(None, None): 1, (None, 1): 1}
    out = d.feed(0, dels((None, None), (None, None)))
    assert list(out) == [((None, None), -1)]
    d.check()


def test_multiplicity_signs_and_cancelling_batch():
    d = Tracker(Distinct())
    out = d.feed(0, Batch([(1,)], [5]))
    assert list(out) == [((1,), 1)]
    assert not d.feed(0, Batch([(2,), (2,)], [1, -1]))
    assert not d.feed(0, Batch([(1,)], [-4]))
    out = d.feed(0, Batch([(1,), (3,)], [-1, 2]))
    assert list(out) == [((1,), -1), ((3,), 1)]
    d.check()


def test_delete_and_reinsert_in_one_batch_emits_nothing():
    d = Tracker(Distinct())
    d.feed(0, ins((1,)))
    assert not d.feed(0, Batch([(1,), (1,)], [-1, 1]))
    d.check()


def test_transient_negative_count_within_a_batch():
    # a retraction that arrives before its insertion in the same batch nets to nothing
    d = Tracker(Distinct())
    assert not d.feed(0, Batch([(1,), (1,)], [-1, 1]))
    assert d.op.counts == {}
    d.check()


def test_reset():
    d = Distinct()
    d.process(0, ins((1,)))
    d.reset()
    assert not d.snapshot()
    assert d.stateful


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.tuples(st.booleans(), st.tuples(st.none() | st.integers(0, 2),
                                                             st.none() | st.integers(0, 1))),
                         min_size=1, max_size=6), max_size=12))
def test_random_distinct_matches_recomputation(ops):
    d = Tracker(Distinct())
    model: dict = {}
    for batch_ops in ops:
        out = d.feed(0, random_batch(model, batch_ops))
        assert all(s in (1, -1) for s in out.signs)
        d.check()
        assert d.state() == {r: 1 for r in model}


rows = st.tuples(st.none() | st.integers(0, 3), st.integers(0, 1))
signed = st.lists(st.tuples(rows, st.integers(-2, 3).filter(bool)), max_size=12)


@settings(max_examples=100, deadline=None)
@given(st.lists(signed, min_size=1, max_size=4), signed, signed)
def test_load_input_restores_what_process_built(history, more, extra):
    """A restore (``load_input`` of ``contents``) gives the state ``process`` built,
    with no output; so does loading a batch with repeated rows or ones that cancel, or
    onto a state that is not empty. Afterwards both answer a batch the same."""
    built = Distinct()
    for b in history:
        built.process(0, Batch([r for r, _ in b], [s for _, s in b]))
    restored = Distinct()
    restored.process = _no_process          # type: ignore[method-assign]
    for b in built.contents():
        restored.load_input(0, b)
    assert restored.counts == built.counts
    del restored.process
    # any batch (a row repeated, or cancelled), onto a state or not
    batch = Batch([r for r, _ in more], [s for _, s in more])
    for op in (built, restored):
        op.process(0, batch)
    loaded = Distinct()
    loaded.load_input(0, Batch([r for r, _ in extra], [s for _, s in extra]))
    loaded.load_input(0, batch)
    reference = Distinct()
    reference.process(0, Batch([r for r, _ in extra], [s for _, s in extra]))
    reference.process(0, batch)
    assert loaded.counts == reference.counts
    nxt = Batch([r for r, _ in extra], [s for _, s in extra])
    assert list(restored.process(0, nxt)) == list(built.process(0, nxt))


def _no_process(port, batch):
    raise AssertionError("a restore went through process (building output it throws away)")


@settings(max_examples=100, deadline=None)
@given(st.lists(signed, min_size=1, max_size=4), signed)
def test_load_counts_takes_a_checkpoints_counts_over(history, more):
    """A checkpoint's row -> count (``CheckpointStore.latest``'s copy, never 0) becomes
    the state as it is, no row hashed again; a second port's (a UNION's) adds up. The
    restored operator then answers a batch as the one that built the state."""
    built = Distinct()
    for b in history:
        built.process(0, Batch([r for r, _ in b], [s for _, s in b]))
    counts = dict(built.counts)
    restored = Distinct()
    restored.process = _no_process          # type: ignore[method-assign]
    restored.load_counts(0, counts)
    assert restored.counts is counts        # (taken over: the restore is the store's copy)
    restored.load_counts(1, dict(built.counts))
    assert restored.counts == {r: 2 * c for r, c in built.counts.items()}
    del restored.process
    for b in built.contents():              # (the reference: the same counts twice)
        built.load_input(1, b)
    batch = Batch([r for r, _ in more], [s for _, s in more])
    assert list(restored.process(0, batch)) == list(built.process(0, batch))
