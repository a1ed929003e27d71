"""Laws of tree clocks, checked on both versions, plus hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treeclock import ReferenceTreeClocks, TreeClocks, clock_nbytes, diff_nbytes

from .helpers import Run, both, dags, scenarios

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VERSIONS = [TreeClocks, ReferenceTreeClocks]


@st.composite
def node_and_clocks(draw, k=3):
    """A graph, a depth, one of its nodes and ``k`` random clocks of that node."""
    graph = draw(dags())
    depth = draw(st.integers(1, 4))
    node = draw(st.sampled_from(sorted(graph)))
    size = ReferenceTreeClocks(graph, depth).size(node)
    times = st.lists(st.integers(0, 2**62), min_size=size, max_size=size)
    return graph, depth, node, [draw(times) for _ in range(k)]


def _clocks(tc, node, lists):
    return [tc.from_paths(node, dict(zip(tc.paths(node), values))) for values in lists]


def _eq(tc, node, a, b):
    return tc.to_paths(node, a) == tc.to_paths(node, b)


@pytest.mark.parametrize("cls", VERSIONS, ids=["numba", "reference"])
@SETTINGS
@given(case=node_and_clocks())
def test_merge_is_commutative_associative_idempotent(cls, case):
    graph, depth, node, lists = case
    tc = cls(graph, depth)
    a, b, c = _clocks(tc, node, lists)
    m = tc.merge
    assert _eq(tc, node, m(node, a, b), m(node, b, a))
    assert _eq(tc, node, m(node, m(node, a, b), c), m(node, a, m(node, b, c)))
    assert _eq(tc, node, m(node, a, a), a)
    # merge_into is merge, in place.
    want = m(node, a, b)
    assert _eq(tc, node, tc.merge_into(node, a, b), want)
    assert _eq(tc, node, a, want)


@pytest.mark.parametrize("cls", VERSIONS, ids=["numba", "reference"])
@SETTINGS
@given(scenario=scenarios())
def test_clocks_only_grow_and_sizes_stay_constant(cls, scenario):
    graph, depth, messages = scenario
    tc = cls(graph, depth)
    run = Run(tc, graph, messages, combined=True)
    for node, before, after in run.history:
        b, a = tc.to_paths(node, before), tc.to_paths(node, after)
        assert all(a[p] >= b[p] for p in b), "a clock went back"
        assert a[(node,)] == b[(node,)] + 1, "a receipt advances the node's time by one"
    for node, diff in run.diffs:
        # Truncation: whatever the history, a diff has the layout's size, and
        # its bytes the constant sizes.
        assert len(tc.to_paths(node, diff)) == tc.size(node)
        assert len(tc.encode_diff(node, diff)) == diff_nbytes(depth)
        # A diff is the receiver's time plus the sender's diff cut one level:
        # its non-zero entries lie on one path (what encode_diff relies on).
        nonzero = [p for p, t in tc.to_paths(node, diff).items() if t]
        longest = max(nonzero, key=len)
        assert all(longest[: len(p)] == p for p in nonzero)
        assert max(map(len, tc.to_paths(node, diff))) <= depth + 1
    for node in graph:
        assert len(tc.encode(node, run.clocks[node])) == tc.clock_nbytes(node)


@SETTINGS
@given(graph=dags(), depth=st.integers(1, 4))
def test_layout_size_counts_paths(graph, depth):
    """Size of a clock = number of paths of at most ``depth`` edges, counted by recursion."""

    def count(node, d):
        return 1 + (sum(count(p, d - 1) for p in graph[node]) if d else 0)

    fast = TreeClocks(graph, depth)
    for node in graph:
        lay = fast.layout(node)
        assert lay.size == count(node, depth)
        assert clock_nbytes(lay) == 24 + 8 * lay.size
        # Pre-order: each entry's subtree is the contiguous range [i, end[i]).
        for i in range(lay.size):
            inside = [j for j in range(lay.size) if lay.paths[j][: len(lay.paths[i])] == lay.paths[i]]
            assert inside == list(range(i, int(lay.end[i])))


# --- hand-computed examples ---------------------------------------------------

A, B, C, D = 1, 2, 3, 4
DIAMOND_WITH_SHORTCUT = {A: (), B: (A,), C: (A,), D: (B, C, A)}


@pytest.mark.parametrize("cls", VERSIONS, ids=["numba", "reference"])
def test_diamond_with_shortcut_by_hand(cls):
    tc = cls(DIAMOND_WITH_SHORTCUT, 2)
    assert tc.paths(D) == ((D,), (D, B), (D, B, A), (D, C), (D, C, A), (D, A))
    clock = {n: tc.zero(n) for n in DIAMOND_WITH_SHORTCUT}
    log = {n: tc.new_log(n) for n in DIAMOND_WITH_SHORTCUT}
    a1 = tc.receive(A, None, None, clock[A], log[A])  # A: write 1
    a2 = tc.receive(A, None, None, clock[A], log[A])  # A: write 2
    b1 = tc.receive(B, A, a1, clock[B], log[B])  # B gets A's message at A=1
    c1 = tc.receive(C, A, a2, clock[C], log[C])  # C gets A's message at A=2
    d1 = tc.receive(D, B, b1, clock[D], log[D])
    d2 = tc.receive(D, A, a2, clock[D], log[D])  # the shortcut edge
    d3 = tc.receive(D, C, c1, clock[D], log[D])
    assert tc.to_paths(D, d1) == {(D,): 1, (D, B): 1, (D, B, A): 1, (D, C): 0, (D, C, A): 0, (D, A): 0}
    assert tc.to_paths(D, d2) == {(D,): 2, (D, B): 0, (D, B, A): 0, (D, C): 0, (D, C, A): 0, (D, A): 2}
    assert tc.to_paths(D, d3) == {(D,): 3, (D, B): 0, (D, B, A): 0, (D, C): 1, (D, C, A): 2, (D, A): 0}
    assert tc.to_paths(D, clock[D]) == {(D,): 3, (D, B): 1, (D, B, A): 1, (D, C): 1, (D, C, A): 2, (D, A): 2}
    assert tc.time_at(D, clock[D], (D, C, A)) == 2
    # B fails: D is its only child; D last heard from B at B=1, so T* for B
    # says B had processed A's message 1.
    t_min = tc.min_time(B, {D: clock[D]})
    assert t_min == 1
    assert tc.to_paths(B, tc.t_star(B, {D: log[D]}, t_min)) == {(B,): 1, (B, A): 1}
    # A fails: children B, C, D last heard from A at 1, 2, 2.
    assert tc.min_time(A, {B: clock[B], C: clock[C], D: clock[D]}) == 1


@pytest.mark.parametrize("cls", VERSIONS, ids=["numba", "reference"])
def test_seed_figure_1_chain_truncates(cls):
    """A -> B -> C -> H at depth 2: H's diff keeps C and B, and drops A."""
    graph = {A: (), B: (A,), C: (B,), D: (C,)}
    tc = cls(graph, 2)
    last = {n: tc.zero(n) for n in graph}
    clocks = {n: tc.zero(n) for n in graph}
    for _ in range(3):
        last[A] = tc.receive(A, None, None, clocks[A])
    last[B] = tc.receive(B, A, last[A], clocks[B])
    last[C] = tc.receive(C, B, last[B], clocks[C])
    last[C] = tc.receive(C, B, last[B], clocks[C])
    last[D] = tc.receive(D, C, last[C], clocks[D])
    assert tc.to_paths(C, last[C]) == {(C,): 2, (C, B): 1, (C, B, A): 3}
    assert tc.to_paths(D, last[D]) == {(D,): 1, (D, C): 2, (D, C, B): 1}
    assert tc.size(D) == 3


def test_numba_arrays_are_plain_int64():
    fast, _ = both(DIAMOND_WITH_SHORTCUT, 3)
    d = fast.make_diff(A, None, None, 7)
    assert d.dtype == np.int64 and d.shape == (1,) and d.tolist() == [7]
    assert fast.diff_nbytes() == diff_nbytes(3) == 64
