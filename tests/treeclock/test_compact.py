"""Compaction folds the diffs at or below a parent's low mark into the summary, and keeps
the rest in order: the same as the array expression it replaced."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treeclock import TreeClockError, TreeClocks, receive_path

# node 3 has two parents, 1 and 2 (each a source)
GRAPH = {1: (), 2: (), 3: (1, 2)}


def _log(tc, sends):
    """Node 3's log after receiving from 1 and 2 in the order ``sends``."""
    paths = {1: [], 2: []}
    last = {}
    flat = []
    for t, p in enumerate(sends, 1):
        if p not in last:
            last[p] = receive_path(tc.path_edge(p, None), None, 1)
        else:
            last[p] = receive_path(tc.path_edge(p, None), None, last[p][1] + 1)
        paths[p].append(last[p])
        flat.extend(receive_path(tc.path_edge(3, p), last[p], t))
    clock, log = tc.zero(3), tc.new_log(3)
    tc.apply_paths(3, flat, clock, log)
    return log


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([1, 2]), max_size=60), st.integers(0, 40), st.integers(0, 40))
def test_compact_matches_the_array_reference(sends, low1, low2):
    tc = TreeClocks(GRAPH, 2)
    log = _log(tc, sends)
    rows = log.rows.copy()
    lay = tc.layout(3)
    drop = np.zeros(len(rows), dtype=bool)
    for p, low in ((1, low1), (2, low2)):
        col = rows[:, lay.slot[p]]
        drop |= (col > 0) & (col <= low)
    summary = tc.zero(3)
    summary[0] = 7                          # an earlier summary is kept, merged into
    want = np.maximum(summary, rows[drop].max(axis=0)) if drop.any() else summary.copy()
    assert tc.compact(3, log, summary, {1: low1, 2: low2}) == drop.sum()
    assert np.array_equal(log.rows, rows[~drop])
    assert np.array_equal(summary, want)


def test_compact_refuses_what_is_not_a_parent_or_a_time():
    tc = TreeClocks(GRAPH, 2)
    log = _log(tc, [1, 2, 1])
    summary = tc.zero(3)
    with pytest.raises(TreeClockError, match="parents of node 3"):
        tc.compact(3, log, summary, {3: 1})
    with pytest.raises(TreeClockError, match="low mark"):
        tc.compact(3, log, summary, {1: -1})
    with pytest.raises(TreeClockError, match="DiffLog"):
        tc.compact(3, tc.new_log(1), summary, {1: 1})
    assert len(log) == 3 and not summary.any()
