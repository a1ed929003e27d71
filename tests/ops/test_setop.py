"""EXCEPT and INTERSECT (noria_py/ops/setop.py)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops import SetOp

from .helpers import Tracker, dels, ins

LEFT, RIGHT = 0, 1


def test_except_follows_both_sides():
    t = Tracker(SetOp("except"))
    assert t.feed(LEFT, ins((1,), (1,), (2,), (None,))).multiset() == {(1,): 1, (2,): 1,
                                                                        (None,): 1}
    assert t.feed(RIGHT, ins((1,), (None,))).multiset() == {(1,): -1, (None,): -1}
    assert t.state() == {(2,): 1}
    # deleting the only right copy brings the row back; left copies do not matter
    assert t.feed(RIGHT, dels((1,))).multiset() == {(1,): 1}
    assert not t.feed(LEFT, dels((1,)))
    assert t.feed(LEFT, dels((1,))).multiset() == {(1,): -1}
    assert t.state() == {(2,): 1}
    t.check()


def test_intersect_needs_both_sides():
    t = Tracker(SetOp("intersect"))
    assert not t.feed(LEFT, ins((1, "a"), (2, "b")))
    assert t.feed(RIGHT, ins((1, "a"), (1, "a"))).multiset() == {(1, "a"): 1}
    assert not t.feed(RIGHT, dels((1, "a")))
    assert t.feed(RIGHT, dels((1, "a"))).multiset() == {(1, "a"): -1}
    assert t.state() == {} and t.op.counts == {(1, "a"): [1, 0], (2, "b"): [1, 0]}
    t.check()


def test_reset_forgets_state():
    op = SetOp("except")
    op.process(LEFT, ins((1,)))
    op.reset()
    assert op.counts == {} and not op.snapshot()


ops = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.integers(0, 3),
                         st.sampled_from([1, -1])), max_size=40)


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(["except", "intersect"]), steps=ops)
def test_matches_set_semantics(kind, steps):
    t = Tracker(SetOp(kind))
    bags = [{}, {}]
    for port, v, s in steps:
        if s < 0 and bags[port].get(v, 0) == 0:
            continue            # only delete rows that are there
        bags[port][v] = bags[port].get(v, 0) + s
        t.feed(port, Batch([(v,)], [s]))
        left = {k for k, c in bags[0].items() if c > 0}
        right = {k for k, c in bags[1].items() if c > 0}
        want = left - right if kind == "except" else left & right
        assert t.state() == {(k,): 1 for k in want}
    t.check()


signed = st.lists(st.tuples(st.integers(0, 1), st.tuples(st.integers(0, 3)),
                            st.integers(-2, 3).filter(bool)), max_size=12)


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(["except", "intersect"]), history=signed, nxt=signed)
def test_load_input_restores_what_process_built(kind, history, nxt):
    """``load_input`` of ``contents``, port by port, gives the counts ``process``
    built (without building its output); afterwards both answer a batch the same."""
    built = SetOp(kind)
    for port, r, s in history:
        built.process(port, Batch([r], [s]))
    restored = SetOp(kind)
    restored.process = _no_process          # type: ignore[method-assign]
    for port, b in enumerate(built.contents()):
        restored.load_input(port, b)
    assert restored.counts == built.counts
    del restored.process
    for port, r, s in nxt:
        assert list(restored.process(port, Batch([r], [s]))) == \
            list(built.process(port, Batch([r], [s])))
    assert restored.counts == built.counts


def _no_process(port, batch):
    raise AssertionError("a restore went through process (building output it throws away)")
