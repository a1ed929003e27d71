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
