"""Diffs built as paths (receive_path) and applied in bulk (apply_paths) give exactly the
clocks and logs of one array receipt per message (receive)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treeclock import TreeClockError, TreeClocks, receive_path

from .helpers import diff_of, scenarios


@settings(max_examples=150, deadline=None)
@given(scenarios(max_messages=40), st.data())
def test_paths_applied_in_bulk_match_array_receipts(scenario, data):
    graph, depth, messages = scenario
    tc = TreeClocks(graph, depth)
    clocks = {n: tc.zero(n) for n in graph}
    logs = {n: tc.new_log(n) for n in graph}
    last = {}
    p_clocks = {n: tc.zero(n) for n in graph}
    p_logs = {n: tc.new_log(n) for n in graph}
    p_last, pending = {}, {n: [] for n in graph}
    for receiver, parent in messages:
        if parent is not None and parent not in last:
            continue            # a node sends only after it has received (time >= 1)
        diff = tc.receive(receiver, parent, last.get(parent), clocks[receiver], logs[receiver])
        last[receiver] = diff
        path = receive_path(tc.path_edge(receiver, parent), p_last.get(parent), len(logs[receiver]))
        assert path == tc.path_of(receiver, diff)
        assert np.array_equal(diff_of(tc, receiver, path), diff)
        p_last[receiver] = path
        pending[receiver].extend(path)
        if data.draw(st.booleans()):        # flush at random points
            tc.apply_paths(receiver, pending[receiver], p_clocks[receiver], p_logs[receiver])
            pending[receiver] = []
    for n in graph:
        tc.apply_paths(n, pending[n], p_clocks[n], p_logs[n])
        assert np.array_equal(p_clocks[n], clocks[n])
        assert np.array_equal(p_logs[n].rows, logs[n].rows)


def _chain():
    tc = TreeClocks({1: (), 2: (1,), 3: (2,)}, 2)
    p1 = receive_path(tc.path_edge(1, None), None, 1)
    p2 = receive_path(tc.path_edge(2, 1), p1, 1)
    return tc, p1, p2


def test_path_shape():
    tc, p1, p2 = _chain()
    assert p1 == (0, 1, 0, 0)
    assert p2 == (tc.layout(2).position((2, 1)), 1, 1, 0)
    p3 = receive_path(tc.path_edge(3, 2), p2, 5)
    assert p3 == (tc.layout(3).position((3, 2, 1)), 5, 1, 1)
    # at depth 2 the next hop drops the oldest time: the path is cut, never longer
    tc4 = TreeClocks({1: (), 2: (1,), 3: (2,), 4: (3,)}, 2)
    q = receive_path(tc4.path_edge(4, 3), p3, 7)
    assert q == (tc4.layout(4).position((4, 3, 2)), 7, 5, 1)


@pytest.mark.parametrize("bad, why", [
    ((9, 1, 1, 0), "sender's clock"),
    (("x", 1, 1, 0), "sender's clock"),
    ((1, 1, 1), "depth \\+ 2"),
    ((1, 1, 1, 0, 0), "depth \\+ 2"),
    (None, "must carry"),
])
def test_receive_path_refuses_a_path_not_of_the_sender(bad, why):
    tc, _, _ = _chain()
    with pytest.raises(TreeClockError, match=why):
        receive_path(tc.path_edge(3, 2), bad, 1)


def test_outside_input_carries_no_path():
    tc, p1, _ = _chain()
    with pytest.raises(TreeClockError, match="outside"):
        receive_path(tc.path_edge(1, None), p1, 2)


@pytest.mark.parametrize("paths, why", [
    ((1, 1, 1), "4 ints each, got 7"),      # not a whole path
    ((1, 2, -1, 0), "malformed"),            # negative time
    ((0, 2, 3, 0), "malformed"),             # a time past the path's end
    ((1, 2, 0, 0), "malformed"),             # the path ends in a zero
    ((7, 2, 1, 0), "malformed"),             # no such entry
    ((1, 2, 1.5, 0), "ints"),
    ((1, 2, 2**63, 0), "ints"),
])
def test_apply_paths_refuses_malformed_and_changes_nothing(paths, why):
    tc, _, p2 = _chain()
    clock, log = tc.zero(2), tc.new_log(2)
    tc.apply_paths(2, p2, clock, log)
    before = clock.copy()
    with pytest.raises(TreeClockError, match=why):
        tc.apply_paths(2, p2 + paths, clock, log)     # a good path first: not applied either
    assert np.array_equal(clock, before) and len(log) == 1


def test_apply_paths_checks_its_arrays():
    tc, p1, _ = _chain()
    with pytest.raises(TreeClockError, match="DiffLog"):
        tc.apply_paths(1, p1, tc.zero(1), tc.new_log(2))
    with pytest.raises(TreeClockError, match="clock of node 1"):
        tc.apply_paths(1, p1, tc.zero(2), tc.new_log(1))


def test_apply_paths_grows_the_log():
    tc, p1, _ = _chain()
    clock, log = tc.zero(1), tc.new_log(1, capacity=1)
    paths = [x for t in range(1, 40) for x in receive_path(tc.path_edge(1, None), None, t)]
    tc.apply_paths(1, paths, clock, log)
    assert len(log) == 39 and clock[0] == 39 and log.times.tolist() == list(range(1, 40))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 12), st.lists(st.integers(-1, 3), min_size=3, max_size=5))
def test_check_path_refuses_exactly_what_apply_paths_refuses(leaf, times):
    tc = TreeClocks({1: (), 2: (1,), 3: (2,), 4: (2, 3)}, 2)
    path = (leaf, *times)
    try:
        diff_of(tc, 4, path)
        applies = True
    except TreeClockError:
        applies = False
    if applies:
        tc.check_path(4, path)
    else:
        with pytest.raises(TreeClockError, match="malformed"):
            tc.check_path(4, path)


def test_apply_paths_on_a_strided_clock_reads_it_through_its_strides():
    tc, p1, p2 = _chain()
    want, log = tc.zero(2), tc.new_log(2)
    tc.apply_paths(2, p2, want, log)
    wide = np.zeros(2 * len(want), dtype=np.int64)
    strided = wide[::2]                      # the node's size, every other entry
    tc.apply_paths(2, p2, strided, tc.new_log(2))
    assert np.array_equal(strided, want) and not wide[1::2].any()
