"""Bad input raises TreeClockError with a clear message, never a wrong clock."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treeclock import Layout, ReferenceTreeClocks, TreeClockError, TreeClocks

from .helpers import Run, scenarios

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VERSIONS = [TreeClocks, ReferenceTreeClocks]
IDS = ["numba", "reference"]
A, B, C, D = 1, 2, 3, 4
DIAMOND = {A: (), B: (A,), C: (A,), D: (B, C)}


def test_error_is_a_value_error():
    assert issubclass(TreeClockError, ValueError)


@pytest.mark.parametrize(
    "graph, match",
    [
        ({1: (2,), 2: (1,)}, "cycle"),
        ({1: (1,)}, "cycle"),
        ({1: (2,)}, "not in the graph"),
        ({1: (), 2: (1, 1)}, "twice"),
        ({-1: ()}, "out of range"),
        ({"a": ()}, "int node id"),
        ({True: ()}, "int node id"),
        ({1: 5}, "tuple"),
        ([(1, ())], "mapping"),
    ],
)
@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_bad_graphs(cls, graph, match):
    with pytest.raises(TreeClockError, match=match):
        cls(graph, 2)


@pytest.mark.parametrize("depth", [0, 17, -1, 2.0, True, None])
@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_bad_depth(cls, depth):
    with pytest.raises(TreeClockError, match="depth"):
        cls(DIAMOND, depth)


def test_layout_checks_its_root():
    with pytest.raises(TreeClockError, match="unknown node 9"):
        Layout(DIAMOND, 9, 2)
    assert Layout(DIAMOND, D, 2).position((D, B, A)) == 2
    with pytest.raises(TreeClockError, match="not in node 4's clock"):
        Layout(DIAMOND, D, 2).position((D, A))


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_unknown_node_everywhere(cls):
    tc = cls(DIAMOND, 2)
    z = tc.zero(D)
    log = tc.new_log(D)
    calls = [
        lambda: tc.zero(9),
        lambda: tc.new_log(9),
        lambda: tc.size(9),
        lambda: tc.paths(9),
        lambda: tc.make_diff(9, A, tc.zero(A), 1),
        lambda: tc.make_diff(D, 9, tc.zero(A), 1),
        lambda: tc.receive(9, A, tc.zero(A), z),
        lambda: tc.merge(9, z, z),
        lambda: tc.merge_into(9, z, z),
        lambda: tc.time_at(9, z, (9,)),
        lambda: tc.min_time(9, {D: z}),
        lambda: tc.min_time(B, {9: z}),
        lambda: tc.subtree(D, z, 9),
        lambda: tc.apply_up_to(9, log, 1),
        lambda: tc.t_star(9, {D: log}, 1),
        lambda: tc.t_star(B, {9: log}, 1),
        lambda: tc.encode(9, z),
        lambda: tc.decode(9, tc.encode(D, z)),
        lambda: tc.encode_diff(9, z),
        lambda: tc.decode_diff(9, tc.encode_diff(D, z)),
        lambda: tc.to_paths(9, z),
        lambda: tc.from_paths(9, {}),
        lambda: tc.zero([1]),
    ]
    for call in calls:
        with pytest.raises(TreeClockError, match="unknown node"):
            call()


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_diff_from_a_node_that_is_not_a_parent(cls):
    tc = cls(DIAMOND, 2)
    clock = tc.zero(D)
    before = tc.to_paths(D, clock)
    for call in (
        lambda: tc.make_diff(D, A, tc.zero(A), 1),  # grandparent, not a parent
        lambda: tc.receive(D, A, tc.zero(A), clock),
        lambda: tc.make_diff(B, C, tc.zero(C), 1),  # sibling
        lambda: tc.make_diff(A, D, tc.zero(D), 1),  # child
        lambda: tc.make_diff(D, D, tc.zero(D), 1),  # itself
        lambda: tc.subtree(D, clock, A),
        lambda: tc.min_time(A, {D: clock}),
        lambda: tc.t_star(A, {D: tc.new_log(D)}, 0),
    ):
        with pytest.raises(TreeClockError, match="not a parent of node"):
            call()
    assert tc.to_paths(D, clock) == before, "a refused receipt must not touch the clock"
    with pytest.raises(TreeClockError, match="has parents"):
        tc.make_diff(B, None, None, 1)
    with pytest.raises(TreeClockError, match="carries no diff"):
        tc.make_diff(A, None, tc.zero(A), 1)


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_bad_times_and_shapes(cls):
    tc = cls(DIAMOND, 2)
    for t in (0, -1, 1.5, "1", None, True, 2**63):
        with pytest.raises(TreeClockError, match="new_time"):
            tc.make_diff(B, A, tc.zero(A), t)
    for t in (-1, 2.0):
        with pytest.raises(TreeClockError, match="time"):
            tc.apply_up_to(D, tc.new_log(D), t)
    # A clock of another node (wrong shape) is refused, not misread.
    with pytest.raises(TreeClockError):
        tc.make_diff(D, B, tc.zero(D), 1)
    with pytest.raises(TreeClockError):
        tc.merge(D, tc.zero(D), tc.zero(B))
    with pytest.raises(TreeClockError):
        tc.apply_up_to(D, [tc.zero(B)], 1)
    with pytest.raises(TreeClockError, match="path"):
        tc.time_at(D, tc.zero(D), (D, A))
    with pytest.raises(TreeClockError, match="path"):
        tc.time_at(D, tc.zero(D), (B, A))
    with pytest.raises(TreeClockError, match="non-empty"):
        tc.min_time(B, {})
    with pytest.raises(TreeClockError):
        tc.from_paths(D, {(D,): 1})


def test_numba_rejects_wrong_arrays():
    tc = TreeClocks(DIAMOND, 2)
    for bad in ([0, 0, 0], np.zeros(5, dtype=np.int32), np.zeros((1, 5), dtype=np.int64), np.zeros(4, dtype=np.int64)):
        with pytest.raises(TreeClockError, match="int64 array of 5 entries"):
            tc.merge_into(D, tc.zero(D), bad)
        with pytest.raises(TreeClockError, match="int64 array of 5 entries"):
            tc.receive(D, B, tc.zero(B), bad)
    with pytest.raises(TreeClockError, match="DiffLog"):
        tc.receive(D, B, tc.zero(B), tc.zero(D), tc.new_log(C))
    with pytest.raises(TreeClockError, match="diff log of node 3"):
        tc.apply_up_to(D, tc.new_log(C), 1)
    with pytest.raises(TreeClockError, match="negative"):
        tc.encode(D, np.full(5, -1, dtype=np.int64))
    clock = tc.zero(D)
    clock[0] = 2**63 - 1
    with pytest.raises(TreeClockError, match="overflow"):
        tc.receive(D, B, tc.zero(B), clock)


def test_numba_make_diff_refuses_wrong_arrays():
    """make_diff's kernel runs without Numba's type dispatch: its own checks must hold."""
    tc = TreeClocks(DIAMOND, 2)
    good = tc.zero(B)  # B's clock: 2 entries, (B,) and (B, A)

    class Sub(np.ndarray):
        pass

    bad_arrays = [
        [0, 0],
        (0, 0),
        None,
        np.zeros(2, dtype=np.int32),
        np.zeros(2, dtype=np.uint64),
        np.zeros(2, dtype=np.float64),
        np.zeros(2, dtype=">i8"),  # int64, but not in native byte order
        np.zeros((1, 2), dtype=np.int64),
        np.zeros((2, 1), dtype=np.int64),
        np.zeros(3, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.int64(0),
        good.view(Sub),
        tc.zero(D),  # another node's clock
    ]
    for bad in bad_arrays:
        with pytest.raises(TreeClockError, match="parent_diff of node 2 must be an int64 array of 2 entries"):
            tc.make_diff(D, B, bad, 1)
    for t in (0, -1, 2**63, 1.0, "1", True, np.float64(1), None):
        with pytest.raises(TreeClockError, match="new_time"):
            tc.make_diff(D, B, good, t)


def test_numba_make_diff_reads_any_int64_view():
    """Strided, reversed, broadcast, read-only or unaligned int64 views are read right."""
    tc = TreeClocks(DIAMOND, 2)
    ref = ReferenceTreeClocks(DIAMOND, 2)
    b = tc.from_paths(B, {(B,): 7, (B, A): 5})
    expected = ref.make_diff(D, B, tc.to_paths(B, b), 9)
    assert expected == {(D,): 9, (D, B): 7, (D, B, A): 5, (D, C): 0, (D, C, A): 0}
    wide = np.zeros((2, 4), dtype=np.int64)
    wide[:, 2] = b
    readonly = b.copy()
    readonly.flags.writeable = False
    raw = bytearray(b.nbytes + 1)
    unaligned = np.frombuffer(raw, dtype=np.int64, count=2, offset=1)
    raw[1:] = b.tobytes()
    assert not unaligned.flags.aligned
    views = {
        "contiguous": b,
        "strided": wide[:, 2],
        "reversed": b[::-1].copy()[::-1],
        "read-only": readonly,
        "unaligned": unaligned,
        "from bytes": np.frombuffer(b.tobytes(), dtype="<i8"),
        "equal dtype, other object": b.view(np.dtype("int64", metadata={"m": 1})),
    }
    for name, view in views.items():
        for t in (9, np.int64(9), np.uint32(9)):
            diff = tc.make_diff(D, B, view, t)
            assert tc.to_paths(D, diff) == expected, name
    const = np.broadcast_to(np.int64(4), (2,))  # stride 0
    assert tc.make_diff(D, B, const, 9).tolist() == [9, 4, 4, 0, 0]
    # Each call returns a new array, never a view of its input or of an earlier result.
    d1, d2 = tc.make_diff(D, B, b, 9), tc.make_diff(D, B, b, 9)
    d1[:] = -1
    assert tc.to_paths(D, d2) == expected and b.tolist() == [7, 5]


def test_make_diff_calls_the_compiled_entry_point():
    """The speed of make_diff rests on calling the kernel's entry point, not the dispatcher;
    an older or newer Numba without ``Dispatcher.compile`` falls back to the dispatcher."""
    from numba.core import config

    from treeclock import clocks
    from treeclock import kernels as K

    if config.DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT: the kernels are plain Python functions")
    tc = TreeClocks(DIAMOND, 2)
    tc.make_diff(A, None, None, 1)
    assert clocks._make_diff is not clocks._make_diff_first
    assert clocks._make_diff is not K.make_diff, "make_diff fell back to Numba's dispatcher"

    class NoCompile:
        def __call__(self, *args):
            return None

    plain = NoCompile()
    assert K.entry_point(plain, K.MAKE_DIFF_SIG) is plain


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_encode_diff_refuses_a_clock(cls):
    tc = cls(DIAMOND, 2)
    clock = tc.from_paths(D, {(D,): 2, (D, B): 1, (D, B, A): 1, (D, C): 1, (D, C, A): 1})
    with pytest.raises(TreeClockError, match="one path"):
        tc.encode_diff(D, clock)


# --- corrupt bytes -----------------------------------------------------------


@SETTINGS
@given(scenarios(max_messages=15), st.data())
def test_any_changed_byte_is_caught(scenario, data):
    graph, depth, messages = scenario
    fast, ref = TreeClocks(graph, depth), ReferenceTreeClocks(graph, depth)
    run = Run(fast, graph, messages, combined=True)
    node = data.draw(st.sampled_from(sorted(graph)))
    for blob, kind in ((fast.encode(node, run.clocks[node]), ""), (fast.encode_diff(node, run.last[node]), "_diff")):
        i = data.draw(st.integers(0, len(blob) - 1))
        flip = data.draw(st.integers(1, 255))
        bad = blob[:i] + bytes([blob[i] ^ flip]) + blob[i + 1 :]
        cut = blob[: data.draw(st.integers(0, len(blob) - 1))]
        for tc in (fast, ref):
            decode = getattr(tc, "decode" + kind)
            for corrupt in (bad, cut, blob + b"\0"):
                with pytest.raises(TreeClockError):
                    decode(node, corrupt)


def _reseal(blob: bytes, offset: int, fmt: str, value) -> bytes:
    """Change a field and fix the checksum, as a buggy or hostile writer would."""
    body = bytearray(blob[:-4])
    struct.pack_into(fmt, body, offset, value)
    return bytes(body) + struct.pack("<I", zlib.crc32(bytes(body)))


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_well_sealed_but_wrong_bytes(cls):
    tc = cls(DIAMOND, 2)
    a1 = tc.make_diff(A, None, None, 1)
    b1 = tc.make_diff(B, A, a1, 1)
    d1 = tc.make_diff(D, B, b1, 1)
    clock = tc.encode(D, d1)
    diff = tc.encode_diff(D, d1)
    assert tc.to_paths(D, tc.decode_diff(D, diff)) == tc.to_paths(D, d1)
    cases = [
        (clock, "decode", D, "magic", _reseal(clock, 0, "<2s", b"XX")),
        (clock, "decode", D, "version", _reseal(clock, 2, "<B", 9)),
        (clock, "decode", D, "hold a diff", _reseal(clock, 3, "<B", 1)),
        (clock, "decode", D, "negative", _reseal(clock, 20, "<q", -5)),
        (clock, "decode", D, "different graph shape", _reseal(clock, 12, "<I", 12345)),
        (diff, "decode_diff", D, "out of range", _reseal(diff, 20, "<q", 99)),
        (diff, "decode_diff", D, "negative", _reseal(diff, 28, "<q", -1)),
        (diff, "decode_diff", D, "past the end", _reseal(diff, 20, "<q", 1)),
        (diff, "decode_diff", D, "ends in a zero", _reseal(diff, 44, "<q", 0)),
    ]
    for _, method, node, match, bad in cases:
        with pytest.raises(TreeClockError, match=match):
            getattr(tc, method)(node, bad)
    # Bytes of another node (same length: diff bytes depend on the depth only).
    with pytest.raises(TreeClockError, match="bytes"):
        tc.decode(B, clock)
    with pytest.raises(TreeClockError, match="of node 4, not of node 2"):
        tc.decode_diff(B, diff)
    with pytest.raises(TreeClockError, match="must be bytes"):
        tc.decode(D, "not bytes")


@pytest.mark.parametrize("cls", VERSIONS, ids=IDS)
def test_bytes_from_another_graph_are_refused(cls):
    """Same node and size, but another graph or depth: refused, not misread."""
    tc1 = cls({1: (), 2: (), 3: (1, 2)}, 1)
    blob = tc1.encode(3, tc1.from_paths(3, {(3,): 1, (3, 1): 5, (3, 2): 0}))
    swapped = cls({1: (), 2: (), 3: (2, 1)}, 1)
    assert len(blob) == swapped.clock_nbytes(3)
    with pytest.raises(TreeClockError, match="different graph shape"):
        swapped.decode(3, blob)
    deeper = cls({1: (), 2: (), 3: (1, 2)}, 2)  # sources: the same three paths
    assert len(blob) == deeper.clock_nbytes(3)
    with pytest.raises(TreeClockError, match="depth 1, not 2"):
        deeper.decode(3, blob)
