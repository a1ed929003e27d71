"""A TreeClocks rebuilt from a previous one (as the engine does when views are added)
behaves exactly like one built from scratch."""
import numpy as np

from treeclock import TreeClocks


def test_rebuild_with_previous_matches_fresh():
    g1 = {1: (), 2: (1,), 3: (2,), 4: (2,)}
    g2 = {**g1, 5: (3, 4), 6: (5,), 7: (1,)}
    old = TreeClocks(g1, 3)
    grown = TreeClocks(g2, 3, previous=old)
    fresh = TreeClocks(g2, 3)
    for n in g2:
        assert grown.paths(n) == fresh.paths(n)
    assert grown.layout(3) is old.layout(3)          # reused, not rebuilt
    # same results on a message sequence
    for tc in (grown, fresh):
        clocks = {n: tc.zero(n) for n in g2}
        d1 = tc.receive(1, None, None, clocks[1])
        d2 = tc.receive(2, 1, d1, clocks[2])
        d3 = tc.receive(3, 2, d2, clocks[3])
        d4 = tc.receive(4, 2, d2, clocks[4])
        d5 = tc.receive(5, 3, d3, clocks[5])
        d5 = tc.receive(5, 4, d4, clocks[5])
        tc.receive(6, 5, d5, clocks[6])
        tc._result = clocks[6].copy()
    assert np.array_equal(grown._result, fresh._result)


def test_changed_upstream_is_not_reused():
    old = TreeClocks({1: (), 2: (1,)}, 2)
    new = TreeClocks({1: (), 9: (), 2: (1, 9)}, 2, previous=old)
    assert new.layout(2) is not old.layout(2)
    assert new.paths(2) == TreeClocks({1: (), 9: (), 2: (1, 9)}, 2).paths(2)


def test_receive_fast_matches_receive():
    from treeclock import ReferenceTreeClocks
    g = {1: (), 2: (1,), 3: (1,), 4: (2, 3)}
    for cls in (TreeClocks, ReferenceTreeClocks):
        tc = cls(g, 3)
        slow = {n: tc.zero(n) for n in g}
        fast = {n: tc.zero(n) for n in g}
        slow_log, fast_log = tc.new_log(4), tc.new_log(4)
        last_slow, last_fast = {}, {}
        for step, (n, p) in enumerate([(1, None), (2, 1), (3, 1), (4, 2), (1, None), (3, 1),
                                       (4, 3), (2, 1), (4, 2), (4, 3)] * 3):
            pd_s = None if p is None else last_slow[p]
            pd_f = None if p is None else last_fast[p]
            last_slow[n] = tc.receive(n, p, pd_s, slow[n], slow_log if n == 4 else None)
            edge = tc.edge(n, p)
            last_fast[n] = tc.receive_fast(edge, pd_f, fast[n], fast_log if n == 4 else tc.new_log(n))
        for n in g:
            assert tc.to_paths(n, slow[n]) == tc.to_paths(n, fast[n])
        assert len(slow_log) == len(fast_log) == 12


def test_edge_checks_once():
    import pytest

    from treeclock import TreeClockError
    tc = TreeClocks({1: (), 2: (1,)}, 2)
    with pytest.raises(TreeClockError):
        tc.edge(1, 2)          # 2 is not a parent of 1
    with pytest.raises(TreeClockError):
        tc.edge(2, None)       # 2 has parents: no input from outside


def test_make_diff_after_rebuild_matches_fresh():
    """make_diff has its own index of the edges; a rebuild must fill it for reused nodes too."""
    g1 = {1: (), 2: (1,), 3: (2,), 4: (2,)}
    g2 = {**g1, 5: (3, 4), 6: (5,), 7: (1,)}
    grown = TreeClocks(g2, 3, previous=TreeClocks(g1, 3))
    fresh = TreeClocks(g2, 3)
    for tc in (grown, fresh):
        last = {1: tc.make_diff(1, None, None, 1)}
        for n, p in [(2, 1), (3, 2), (4, 2), (5, 3), (5, 4), (6, 5), (7, 1)]:
            last[n] = tc.make_diff(n, p, last[p], 2)
        tc._result = {n: d.tolist() for n, d in last.items()}
    assert grown._result == fresh._result
    assert set(grown._edges_to) == set(g2)
