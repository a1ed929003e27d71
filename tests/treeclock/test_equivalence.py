"""The Numba version and the reference give identical results on every operation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from treeclock import DiffLog, Layout

from .helpers import Run, both, children_of, scenarios, shapes

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(fast, ref, node, a, b):
    assert fast.to_paths(node, a) == ref.to_paths(node, b)


@SETTINGS
@given(scenarios(), st.data())
def test_every_operation_agrees(scenario, data):
    check_every_operation(scenario, data)


@pytest.mark.slow
@settings(SETTINGS, max_examples=3000)
@given(scenarios(max_messages=60), st.data())
def test_every_operation_agrees_long(scenario, data):
    check_every_operation(scenario, data)


def check_every_operation(scenario, data):
    graph, depth, messages = scenario
    for shape in shapes(graph):
        event(shape)
    event(f"depth {depth}")
    fast, ref = both(graph, depth)
    rf = Run(fast, graph, messages, combined=True)
    rr = Run(ref, graph, messages, combined=False)

    # Shape: same paths in the same order, same fingerprint.
    for n in graph:
        assert fast.paths(n) == ref.paths(n)
        assert fast.fingerprint(n) == ref.fingerprint(n)
        assert Layout(graph, n, depth).paths == ref.paths(n)

    # make_diff / receive: every diff of the run, and the clocks and logs.
    for (node, df), (_, dr) in zip(rf.diffs, rr.diffs):
        _same(fast, ref, node, df, dr)
        assert fast.encode_diff(node, df) == ref.encode_diff(node, dr)
    for n in graph:
        _same(fast, ref, n, rf.clocks[n], rr.clocks[n])
        assert len(rf.logs[n]) == len(rr.logs[n])
        for df, dr in zip(rf.logs[n], rr.logs[n]):
            _same(fast, ref, n, df, dr)

    # The other receive path agrees with make_diff + merge_into.
    rf2 = Run(fast, graph, messages, combined=False)
    rr2 = Run(ref, graph, messages, combined=True)
    for n in graph:
        assert np.array_equal(rf2.clocks[n], rf.clocks[n])
        assert np.array_equal(rf2.logs[n].rows, rf.logs[n].rows)
        assert rr2.clocks[n] == rr.clocks[n] and rr2.logs[n] == rr.logs[n]

    kids = children_of(graph)
    for n in graph:
        cf, cr = rf.clocks[n], rr.clocks[n]
        # time_at on every path.
        for path in ref.paths(n):
            assert fast.time_at(n, cf, path) == ref.time_at(n, cr, path)
        # merge of the clock with the node's last diff.
        _same(fast, ref, n, fast.merge(n, cf, rf.last[n]), ref.merge(n, cr, rr.last[n]))
        # bytes.
        assert fast.encode(n, cf) == ref.encode(n, cr)
        assert len(fast.encode(n, cf)) == fast.clock_nbytes(n)
        _same(fast, ref, n, fast.decode(n, ref.encode(n, cr)), ref.decode(n, fast.encode(n, cf)))
        _same(fast, ref, n, fast.decode_diff(n, ref.encode_diff(n, rr.last[n])),
              ref.decode_diff(n, fast.encode_diff(n, rf.last[n])))
        # apply_up_to over the node's own log, as DiffLog, 2-D array and list.
        t = data.draw(st.integers(0, len(rr.logs[n]) + 1), label="t")
        want = ref.apply_up_to(n, rr.logs[n], t)
        _same(fast, ref, n, fast.apply_up_to(n, rf.logs[n], t), want)
        _same(fast, ref, n, fast.apply_up_to(n, rf.logs[n].rows, t), want)
        _same(fast, ref, n, fast.apply_up_to(n, list(rf.logs[n]), t), want)
        # subtree under each parent.
        for p in graph[n]:
            _same(fast, ref, p, fast.subtree(n, cf, p), ref.subtree(n, cr, p))
        # Recovery of n: min over its children, then T*.
        if kids[n]:
            t_min = fast.min_time(n, {c: rf.clocks[c] for c in kids[n]})
            assert t_min == ref.min_time(n, {c: rr.clocks[c] for c in kids[n]})
            for t in (t_min, data.draw(st.integers(0, t_min + 2), label="t*")):
                _same(fast, ref, n,
                      fast.t_star(n, {c: rf.logs[c] for c in kids[n]}, t),
                      ref.t_star(n, {c: rr.logs[c] for c in kids[n]}, t))
            with_self = {c: rf.clocks[c] for c in kids[n]} | {n: cf}
            assert fast.min_time(n, with_self) == ref.min_time(n, {c: rr.clocks[c] for c in kids[n]} | {n: cr})


@SETTINGS
@given(scenarios(max_messages=12), st.data())
def test_from_paths_round_trip(scenario, data):
    graph, depth, messages = scenario
    fast, ref = both(graph, depth)
    rr = Run(ref, graph, messages, combined=True)
    for n in graph:
        arr = fast.from_paths(n, rr.clocks[n])
        assert fast.to_paths(n, arr) == rr.clocks[n]
        assert ref.from_paths(n, fast.to_paths(n, arr)) == rr.clocks[n]


def test_diff_log_grows_and_indexes():
    fast, _ = both({1: (), 2: (1,)}, 2)
    log = fast.new_log(2, capacity=1)
    clock = fast.zero(2)
    src = fast.make_diff(1, None, None, 1)
    for _ in range(5):
        fast.receive(2, 1, src, clock, log)
    assert isinstance(log, DiffLog) and len(log) == 5
    assert log.times.tolist() == [1, 2, 3, 4, 5]
    assert log[-1].tolist() == clock.tolist() == [5, 1]
    assert [d[0] for d in log] == [1, 2, 3, 4, 5]


def test_diff_log_extend_is_appends_in_one_copy():
    import numpy as np
    import pytest

    from treeclock import TreeClockError
    fast, _ = both({1: (), 2: (1,)}, 2)
    one, bulk = fast.new_log(2, capacity=1), fast.new_log(2, capacity=1)
    rows = np.array([[1, 1], [2, 1], [3, 2], [4, 2], [5, 3]], dtype=np.int64)
    for r in rows:
        one.append(r)
    bulk.extend(rows[:2])
    bulk.extend(rows[2:])
    bulk.extend(rows[:0])
    assert bulk.rows.tolist() == one.rows.tolist() == rows.tolist()
    rows[0, 0] = 99                                  # a copy, not a view
    assert bulk[0].tolist() == [1, 1]
    for bad in (rows[:, :1], rows.astype(np.int32), rows[0], rows.tolist()):
        with pytest.raises(TreeClockError):
            bulk.extend(bad)
    assert len(bulk) == 5
