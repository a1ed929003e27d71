"""Tree-clock operations, Numba version against the reference, at depth 3 and fan-in 4.

The graph is four layers of four nodes, each node reading from all four nodes
of the layer above, so a layer-3 node's clock is the full tree of fan-in 4
and depth 3: 1 + 4 + 16 + 64 = 85 entries. Every timing goes through the
public Python call, argument checks and Numba dispatch included; kernels are
compiled (or loaded from the cache) before timing.

    .venv/bin/python -m pytest bench/test_treeclock.py --benchmark-only -q
"""

from __future__ import annotations

import pytest

from treeclock import ReferenceTreeClocks, TreeClocks

WIDTH = 4
DEPTH = 3
GRAPH = {layer * WIDTH + i: tuple((layer - 1) * WIDTH + j for j in range(WIDTH)) if layer else () for layer in range(4) for i in range(WIDTH)}
RECEIVER = 3 * WIDTH  # a layer-3 node
PARENT = 2 * WIDTH  # one of its parents
GRANDPARENT = 2 * WIDTH - 1  # the parent PARENT heard from last in each round
CHILDREN = tuple(3 * WIDTH + i for i in range(WIDTH))  # PARENT's four children
LOG_LEN = 256
VERSIONS = {"numba": TreeClocks, "reference": ReferenceTreeClocks}


class World:
    """Clocks and logs after a few hundred messages, for one version."""

    def __init__(self, cls):
        tc = self.tc = cls(GRAPH, DEPTH)
        self.clocks = {n: tc.zero(n) for n in GRAPH}
        self.logs = {n: tc.new_log(n) for n in GRAPH}
        last = {n: tc.zero(n) for n in GRAPH}
        # Round-robin: every node receives from each parent in turn.
        for r in range(LOG_LEN // WIDTH):
            for layer in range(4):
                for i in range(WIDTH):
                    n = layer * WIDTH + i
                    for p in GRAPH[n] or (None,):
                        carried = None if p is None else last[p]
                        last[n] = tc.receive(n, p, carried, self.clocks[n], self.logs[n])
        self.last = last
        self.parent_diff = last[PARENT]
        self.diff = last[RECEIVER]
        self.clock = self.clocks[RECEIVER]
        self.clock_bytes = tc.encode(RECEIVER, self.clock)
        self.diff_bytes = tc.encode_diff(RECEIVER, self.diff)


_worlds: dict = {}


@pytest.fixture(params=list(VERSIONS), ids=list(VERSIONS))
def world(request):
    if request.param not in _worlds:
        _worlds[request.param] = World(VERSIONS[request.param])
    return _worlds[request.param]


def test_make_diff(benchmark, world):
    benchmark.group = "make_diff (depth 3, fan-in 4)"
    tc, pd = world.tc, world.parent_diff
    t = world.tc.time_at(RECEIVER, world.clock, (RECEIVER,)) + 1
    # The first call loads the kernel from Numba's cache (~3 ms). pytest-benchmark
    # calibrates on its first call and sets rounds = 1 s / that, which left the
    # Numba version ~300 rounds (under 1 ms of samples) against the reference's
    # ~40,000: warm up outside the timing, as the module docstring promises.
    tc.make_diff(RECEIVER, PARENT, pd, t)
    benchmark(tc.make_diff, RECEIVER, PARENT, pd, t)


def test_merge_into(benchmark, world):
    benchmark.group = "merge_into (depth 3, fan-in 4)"
    tc = world.tc
    clock = tc.merge(RECEIVER, world.clock, world.diff)
    benchmark(tc.merge_into, RECEIVER, clock, world.diff)


def test_make_diff_then_merge(benchmark, world):
    benchmark.group = "make_diff + merge_into, two calls (depth 3, fan-in 4)"
    tc, pd = world.tc, world.parent_diff
    clock = tc.merge(RECEIVER, world.clock, world.diff)

    def op():
        tc.merge_into(RECEIVER, clock, tc.make_diff(RECEIVER, PARENT, pd, 1000))

    benchmark(op)


def test_receive_fast(benchmark, world):
    """receive() without argument checks: what the engine calls for its own arrays."""
    benchmark.group = "receive_fast: the engine's unchecked receive (depth 3, fan-in 4)"
    tc, pd = world.tc, world.parent_diff
    clock = tc.merge(RECEIVER, world.clock, world.diff)
    log = tc.new_log(RECEIVER)
    edge = tc.edge(RECEIVER, PARENT)
    receive_fast = tc.receive_fast

    def op():
        if len(log) >= 4096:
            log.clear()
        receive_fast(edge, pd, clock, log)

    benchmark(op)


def test_receive_path(benchmark, world):
    """What the engine does per message since session 7: the diff as a path (a tuple),
    applied to the log and clock 32 at a time (the cost of that call shared out)."""
    from treeclock import receive_path
    benchmark.group = "receive_path + apply_paths / 32: the engine's receipt (depth 3, fan-in 4)"
    tc = world.tc
    if not hasattr(tc, "path_edge"):
        pytest.skip("the reference version builds no paths")
    clock = tc.merge(RECEIVER, world.clock, world.diff)
    log = tc.new_log(RECEIVER)
    edge = tc.path_edge(RECEIVER, PARENT)
    parent_path = tc.path_of(PARENT, world.parent_diff)
    state = {"t": int(clock[0]), "pending": []}

    def op():
        state["t"] += 1
        state["pending"] += receive_path(edge, parent_path, state["t"])
        if len(state["pending"]) >= 32 * (tc.depth + 2):
            if len(log) >= 4096:
                log.clear()
            tc.apply_paths(RECEIVER, state["pending"], clock, log)
            state["pending"] = []

    benchmark(op)


def test_compact(benchmark, world):
    """Diff-log compaction (session 8: one kernel call): a 256-diff log, the first half
    of each parent's messages below its low mark."""
    benchmark.group = "compact: fold 128 of 256 diffs into the summary (depth 3, fan-in 4)"
    tc = world.tc
    if not hasattr(tc, "compact"):
        pytest.skip("the reference version has no compaction")
    rows = world.logs[RECEIVER].rows
    lay = tc.layout(RECEIVER)
    lows = {p: int(rows[:, lay.slot[p]].max()) // 2 for p in GRAPH[RECEIVER]}

    def setup():
        log = tc.new_log(RECEIVER, len(rows))
        log.extend(rows)
        return (log, tc.zero(RECEIVER)), {}

    def op(log, summary):
        tc.compact(RECEIVER, log, summary, lows)

    benchmark.pedantic(op, setup=setup, rounds=2000)


def test_receive(benchmark, world):
    """make_diff + merge + log append; the Numba version does it in one kernel call."""
    benchmark.group = "receive = make_diff + merge + log append (depth 3, fan-in 4)"
    tc, pd = world.tc, world.parent_diff
    clock = tc.merge(RECEIVER, world.clock, world.diff)
    log = tc.new_log(RECEIVER)
    receive = tc.receive

    def op():
        if len(log) >= 4096:  # keep memory flat; same cost for both versions
            log.clear()
        receive(RECEIVER, PARENT, pd, clock, log)

    benchmark(op)


def test_time_at(benchmark, world):
    benchmark.group = "time_at (C, B, A) (depth 3, fan-in 4)"
    path = (RECEIVER, PARENT, GRANDPARENT)
    assert world.tc.time_at(RECEIVER, world.clock, path) > 0
    benchmark(world.tc.time_at, RECEIVER, world.clock, path)


def test_min_time(benchmark, world):
    benchmark.group = "min_time over 4 children (depth 3, fan-in 4)"
    clocks = {c: world.clocks[c] for c in CHILDREN}
    benchmark(world.tc.min_time, PARENT, clocks)


def test_apply_up_to(benchmark, world):
    benchmark.group = f"apply_up_to over a {LOG_LEN}-diff log (depth 3, fan-in 4)"
    log = world.logs[RECEIVER]
    assert len(log) == LOG_LEN
    benchmark(world.tc.apply_up_to, RECEIVER, log, LOG_LEN // 2)


def test_t_star(benchmark, world):
    benchmark.group = f"t_star from 4 children's {LOG_LEN}-diff logs (depth 3, fan-in 4)"
    tc = world.tc
    t_min = tc.min_time(PARENT, {c: world.clocks[c] for c in CHILDREN})
    logs = {c: world.logs[c] for c in CHILDREN}
    benchmark(tc.t_star, PARENT, logs, t_min)


def test_encode_clock(benchmark, world):
    benchmark.group = "encode clock (85 entries, 704 bytes)"
    benchmark(world.tc.encode, RECEIVER, world.clock)


def test_decode_clock(benchmark, world):
    benchmark.group = "decode clock (85 entries, 704 bytes)"
    benchmark(world.tc.decode, RECEIVER, world.clock_bytes)


def test_encode_diff(benchmark, world):
    benchmark.group = "encode diff (depth 3: 64 bytes)"
    assert len(world.diff_bytes) == 64
    benchmark(world.tc.encode_diff, RECEIVER, world.diff)


def test_decode_diff(benchmark, world):
    benchmark.group = "decode diff (depth 3: 64 bytes)"
    benchmark(world.tc.decode_diff, RECEIVER, world.diff_bytes)
