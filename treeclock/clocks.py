"""The fast tree clocks: flat int64 arrays, Numba kernels, one layout per node.

:class:`TreeClocks` has the same operations, with the same meaning, as the
reference :class:`treeclock.reference.TreeClocks`; only the representation
differs (an array in the node's :class:`~treeclock.layout.Layout` order
instead of a dict keyed by path). Every public method checks its arguments
(node ids, edges, array shapes and dtypes) before handing the arrays to a
kernel, because a kernel given a wrong array would silently compute a wrong
clock, and recovery trusts clocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from struct import error as struct_error
from struct import pack_into
from typing import TYPE_CHECKING, cast

import numpy as np

from . import codec
from . import kernels as K
from .errors import TreeClockError, check_depth, normalize_graph
from .layout import Layout

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import TypeAlias

    from .codec import Encoded

    #: ``(start, gather, parent's clock shape or None for an input from outside,
    #: receiver's clock shape)``, as ``TreeClocks._edges`` holds it.
    _Edge: TypeAlias = tuple[int, np.ndarray, tuple[int] | None, tuple[int]]
    #: :meth:`TreeClocks.edge`: ``(start, gather)``.
    _FastEdge: TypeAlias = tuple[int, np.ndarray]
    #: A diff log as :meth:`TreeClocks.apply_up_to` and :meth:`TreeClocks.t_star` take it.
    _Diffs: TypeAlias = "DiffLog | np.ndarray | Iterable[np.ndarray]"

__all__ = ["TreeClocks", "DiffLog", "PathEdge", "receive_path"]

#: :meth:`TreeClocks.path_edge`: ``(leaves, depth + 1)`` for an edge from a parent,
#: ``(None, depth zeros)`` for an input from outside; what a receiver keeps per parent
#: to build its diffs as paths (``receive_path``).
PathEdge: TypeAlias = tuple[dict[int, int], int] | tuple[None, tuple[int, ...]]

_I64 = np.dtype(np.int64)
_ndarray = np.ndarray
_NO_DIFF = np.zeros(1, dtype=np.int64)  # stands in for the diff of an outside input
_empty = np.empty
_NO_GATHER = np.zeros(0, dtype=np.int64)
_MAX_TIME = 2**63 - 1


def _make_diff_first(out: np.ndarray, parent_diff: np.ndarray, start: int, gather: np.ndarray, new_time: int) -> None:
    """The process's first make_diff: bind ``_make_diff`` to the kernel's machine code.

    :meth:`TreeClocks.make_diff` calls the kernel's entry point for
    :data:`kernels.MAKE_DIFF_SIG` directly, without Numba's dispatch, which would
    only find that signature again (its arguments are checked to fit it first).
    Resolved on first use so that importing the package compiles nothing.
    """
    global _make_diff
    _make_diff = K.entry_point(K.make_diff, K.MAKE_DIFF_SIG)
    _make_diff(out, parent_diff, start, gather, new_time)


_make_diff = _make_diff_first   # a module global: one lookup less on the hot path


def _receive_first(clock: np.ndarray, rows: np.ndarray, n: int, parent_diff: np.ndarray, start: int,
                   gather: np.ndarray) -> int:
    """The process's first receive_fast: bind ``_receive`` to the kernel's machine code
    for :data:`kernels.RECEIVE_SIG`, as ``_make_diff_first`` does."""
    global _receive
    _receive = K.entry_point(K.receive, K.RECEIVE_SIG)
    return _receive(clock, rows, n, parent_diff, start, gather)


_receive = _receive_first


def _apply_paths_first(clock: np.ndarray, rows: np.ndarray, n: int, paths: np.ndarray, up: np.ndarray,
                       level: np.ndarray) -> int:
    """The process's first apply_paths: bind ``_apply_paths`` to the kernel's machine
    code for :data:`kernels.APPLY_PATHS_SIG`, as ``_make_diff_first`` does."""
    global _apply_paths
    _apply_paths = K.entry_point(K.apply_paths, K.APPLY_PATHS_SIG)
    return _apply_paths(clock, rows, n, paths, up, level)


_apply_paths = _apply_paths_first


def _load_compact() -> None:
    """Load :func:`kernels.compact`'s machine code for :data:`kernels.COMPACT_SIG`, once
    a process, when its first clocks are built: loading it from the ``cache=True``
    cache takes 3-10 ms, which at the first call would land on whichever write made a
    node's diff log reach ``COMPACT_AT`` diffs (docs/benchmarks.md, "The rare expensive
    inserts"). Only loaded, not bound as ``_apply_paths`` is: the calls keep Numba's
    dispatch, which reads a summary of another layout (checked for dtype and shape
    only) through its own specialization instead of misreading it."""
    global _compact_loaded
    if not _compact_loaded:
        K.entry_point(K.compact, K.COMPACT_SIG)     # (the entry point itself unused)
        _compact_loaded = True


_compact_loaded = False


def receive_path(edge: PathEdge, parent_path: tuple[int, ...] | None, new_time: int) -> tuple[int, ...]:
    """A receipt's diff as its path, from the diff the message carried (also a path).

    A diff is non-zero only along one path from the root (the receiver's own time,
    then the sender's, then the sender's sender's...), so it is fully given by the
    position of its deepest entry and ``depth + 1`` times from the root: the tuple
    ``(leaf, t_0, .., t_depth)``, the body :mod:`treeclock.codec` encodes. Building
    one is a dict lookup and a tuple, with no array touched;
    :meth:`TreeClocks.apply_paths` later writes many into a log and a clock in one
    kernel call. ``edge`` comes from :meth:`TreeClocks.path_edge`. Checks the path's
    length and leaf; its times are checked when applied.
    """
    # ``cut`` is an int when ``leaves`` is a dict, a tuple when it is None; the
    # ignores below are where this relies on that pairing or on the TypeError a
    # mismatch raises (no isinstance: this runs on every message).
    leaves, cut = edge
    if parent_path is None:
        if leaves is not None:
            raise TreeClockError("a message from a parent must carry its diff")
        return (0, new_time) + cut  # type: ignore[operator]
    try:
        if len(parent_path) != cut + 1:  # type: ignore[operator]
            raise IndexError
        leaf = leaves[parent_path[0]]  # type: ignore[index]
    except (KeyError, TypeError, IndexError):
        if leaves is None:
            raise TreeClockError("an input from outside the dataflow carries no diff") from None
        raise TreeClockError(f"malformed diff path {parent_path!r}: not depth + 2 ints ending "
                             "at an entry of the sender's clock") from None
    return (leaf, new_time) + parent_path[1:cut]  # type: ignore[index]


class DiffLog:
    """One node's diff log: its diffs in arrival order, rows of one 2-D array.

    Rows are stored contiguously so that T* and :meth:`TreeClocks.apply_up_to`
    scan the log in one kernel call; the array doubles when full. Rows handed
    out (``log[i]``, the return value of :meth:`TreeClocks.receive`) are views
    into the log: treat them as read-only.
    """

    __slots__ = ("node", "_rows", "_n")

    def __init__(self, node: int, size: int, capacity: int = 16) -> None:
        self.node = node
        self._rows = np.zeros((max(int(capacity), 1), size), dtype=np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"DiffLog(node={self.node}, len={self._n}, width={self._rows.shape[1]})"

    def _grow(self) -> None:
        rows = np.zeros((2 * self._rows.shape[0], self._rows.shape[1]), dtype=np.int64)
        rows[: self._n] = self._rows[: self._n]
        self._rows = rows

    def append(self, diff: np.ndarray) -> None:
        """Append a copy of ``diff`` (an array of this node's layout)."""
        if type(diff) is not np.ndarray or diff.dtype != _I64 or diff.shape != (self._rows.shape[1],):
            raise TreeClockError(f"diff for node {self.node}'s log must be an int64 array of {self._rows.shape[1]} entries")
        if self._n == self._rows.shape[0]:
            self._grow()
        self._rows[self._n] = diff
        self._n += 1

    def extend(self, diffs: np.ndarray) -> None:
        """Append a copy of each row of ``diffs`` (a 2-D int64 array of this node's
        layout), in one copy."""
        width = self._rows.shape[1]
        if type(diffs) is not np.ndarray or diffs.dtype != _I64 or diffs.ndim != 2 or diffs.shape[1] != width:
            raise TreeClockError(f"diffs for node {self.node}'s log must be an int64 array of rows of {width} entries")
        while self._n + len(diffs) > self._rows.shape[0]:
            self._grow()
        self._rows[self._n : self._n + len(diffs)] = diffs
        self._n += len(diffs)

    def clear(self) -> None:
        """Forget every diff (keeps the allocated rows)."""
        self._n = 0

    @property
    def rows(self) -> np.ndarray:
        """All diffs as a ``(len, size)`` view."""
        return self._rows[: self._n]

    @property
    def times(self) -> np.ndarray:
        """The node's time in each diff (the root column)."""
        return self._rows[: self._n, 0]

    def __getitem__(self, i: int) -> np.ndarray:
        if not -self._n <= i < self._n:
            raise IndexError(f"diff log of node {self.node} has {self._n} diffs, no index {i}")
        row: np.ndarray = self._rows[i % self._n]
        return row

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(self._n):
            yield self._rows[i]


class TreeClocks:
    """Tree clocks of every node of one dataflow graph, as flat int64 arrays.

    ``parents`` maps each node id to the tuple of its parents (a DAG; sources
    map to ``()``); ``depth`` is the number of edges kept below a clock's root
    (d - 1 concurrent failures are recoverable; Noria's prototype used 3).
    Layouts and the per-edge index maps are computed here, once.
    """

    def __init__(self, parents: Mapping[int, Iterable[int]], depth: int, previous: "TreeClocks | None" = None) -> None:
        self.graph = normalize_graph(parents)
        self.depth = check_depth(depth)
        # A growing graph (new nodes downstream) leaves every old node's upstream, and
        # so its layout, unchanged: ``previous`` lends those, so a rebuild costs only
        # the new nodes.
        reuse: dict[int, Layout] = {}
        if previous is not None and previous.depth == self.depth:
            stable = {n for n in self.graph if previous.graph.get(n) == self.graph[n]}
            changed = True
            while changed:           # a layout is reusable if its whole upstream is
                changed = False
                for n in list(stable):
                    if any(p not in stable for p in self.graph[n]):
                        stable.discard(n)
                        changed = True
            reuse = {n: previous.layouts[n] for n in stable}
        self.layouts: dict[int, Layout] = {n: reuse.get(n) or Layout(self.graph, n, self.depth, _checked=True)
                                           for n in self.graph}
        self._shapes = {n: (lay.size,) for n, lay in self.layouts.items()}
        # (receiver, parent) -> (start, gather, parent shape, receiver shape);
        # shapes as tuples so the hot path compares ``a.shape`` without building one.
        self._edges: dict[tuple[int, int | None], _Edge] = {}
        p: int | None  # a parent; None in the key of an input from outside
        for n, lay in self.layouts.items():
            if n in reuse:
                assert previous is not None  # (reuse is empty without it)
                for key in [(n, None)] + [(n, p) for p in self.graph[n]]:
                    if key in previous._edges:
                        self._edges[key] = previous._edges[key]
                continue
            if not self.graph[n]:
                self._edges[(n, None)] = (0, _NO_GATHER, None, (lay.size,))
            for p, start in lay.slot.items():
                pl = self.layouts[p]
                gather = [pl.index[path[1:]] for path in lay.paths[start : int(lay.end[start])]]
                self._edges[(n, p)] = (start, np.array(gather, dtype=np.int64), (pl.size,), (lay.size,))
        # The same edges as receiver -> {parent: edge}, for make_diff: two lookups by
        # int are ~0.05 µs cheaper than building and hashing a (receiver, parent) key.
        self._edges_to: dict[int, dict[int | None, _Edge]] = {}
        for (n, p), edge in self._edges.items():
            self._edges_to.setdefault(n, {})[p] = edge
        _load_compact()

    # -- shape ---------------------------------------------------------------

    def layout(self, node: int) -> Layout:
        try:
            if type(node) is not bool:
                return self.layouts[node]
        except (KeyError, TypeError):
            pass
        raise TreeClockError(f"unknown node {node!r}: it is not in the graph")

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(self.graph)

    def paths(self, node: int) -> tuple[tuple[int, ...], ...]:
        return self.layout(node).paths

    def size(self, node: int) -> int:
        return self.layout(node).size

    def fingerprint(self, node: int) -> int:
        return self.layout(node).fingerprint

    def clock_nbytes(self, node: int) -> int:
        """Encoded size of every clock of ``node``."""
        return codec.clock_nbytes(self.layout(node))

    def diff_nbytes(self) -> int:
        """Encoded size of every diff (the same for all nodes at this depth)."""
        return codec.diff_nbytes(self.depth)

    # -- checks ----------------------------------------------------------------

    def _arr(self, node: int, a: object, what: str = "clock") -> Layout:
        lay = self.layout(node)
        if type(a) is not _ndarray or a.dtype != _I64 or a.shape != (lay.size,):
            got = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
            raise TreeClockError(
                f"{what} of node {lay.root} must be an int64 array of {lay.size} entries, got {got}"
            )
        return lay

    def _edge(self, receiver: int, parent: int | None) -> _Edge:
        try:
            edge = self._edges.get((receiver, parent))
        except TypeError:
            edge = None
        if edge is not None:
            return edge
        self.layout(receiver)
        if parent is None:
            raise TreeClockError(f"node {receiver} has parents, so its input must come from one of them")
        self.layout(parent)
        raise TreeClockError(f"node {parent} is not a parent of node {receiver}")

    @staticmethod
    def _own_log(lay: Layout, log: object) -> None:
        """Refuse anything but the DiffLog of ``lay``'s node."""
        if type(log) is not DiffLog or log.node != lay.root or log._rows.shape[1] != lay.size:
            raise TreeClockError(f"log must be node {lay.root}'s DiffLog (from new_log({lay.root}))")

    @staticmethod
    def _time(t: object, what: str, minimum: int) -> int:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise TreeClockError(f"{what} must be an int, got {t!r}")
        if not minimum <= t <= _MAX_TIME:
            raise TreeClockError(f"{what} must be in {minimum}..2**63-1, got {t}")
        return int(t)

    def _rows(self, node: int, diffs: _Diffs) -> tuple[np.ndarray, int]:
        """A diff log given as DiffLog, 2-D array or sequence of arrays -> (rows, n)."""
        lay = self.layout(node)
        if isinstance(diffs, DiffLog):
            if diffs.node != lay.root or diffs._rows.shape[1] != lay.size:
                raise TreeClockError(f"diff log of node {diffs.node} given where node {lay.root}'s was expected")
            return diffs._rows, diffs._n
        if isinstance(diffs, np.ndarray) and diffs.ndim == 2:
            if diffs.dtype != _I64 or diffs.shape[1] != lay.size:
                raise TreeClockError(f"diffs of node {lay.root} must be int64 rows of {lay.size} entries")
            return diffs, diffs.shape[0]
        diffs = list(diffs)
        for d in diffs:
            self._arr(node, d, "diff")
        rows = np.stack(diffs) if diffs else np.zeros((0, lay.size), dtype=np.int64)
        return rows, len(diffs)

    # -- operations --------------------------------------------------------------

    def zero(self, node: int) -> np.ndarray:
        """The clock every node starts with: every entry 0."""
        return np.zeros(self.layout(node).size, dtype=np.int64)

    def new_log(self, node: int, capacity: int = 16) -> DiffLog:
        """An empty diff log for ``node``."""
        return DiffLog(self.layout(node).root, self.layouts[node].size, capacity)

    def make_diff(self, receiver: int, parent: int | None, parent_diff: np.ndarray | None, new_time: int) -> np.ndarray:
        """The diff ``receiver`` stores when it receives a message from ``parent``.

        Its root holds ``new_time``; under ``parent`` sits ``parent_diff`` (the
        diff the message carried), cut to the receiver's depth; every other
        entry is 0. ``parent=None`` (with ``parent_diff=None``) is an input
        from outside the dataflow, allowed only for a source node.
        """
        # Checks inlined (this is on the message path); the slow helpers only
        # run to confirm a failure and word the error.
        try:
            start, gather, pshape, shape = self._edges_to[receiver][parent]
        except (KeyError, TypeError):
            self._edge(receiver, parent)  # raises the precise error
            raise  # pragma: no cover
        if pshape is None:
            if parent_diff is not None:
                raise TreeClockError("an input from outside the dataflow carries no diff")
            parent_diff = _NO_DIFF
        elif type(parent_diff) is not _ndarray or parent_diff.dtype is not _I64 or parent_diff.shape != pshape:
            assert parent is not None  # (pshape is not None)
            self._arr(parent, parent_diff, "parent_diff")
            parent_diff = cast(np.ndarray, parent_diff)  # _arr returned: it is one
        if type(new_time) is not int or not 0 < new_time <= _MAX_TIME:
            new_time = self._time(new_time, "new_time", 1)
        # The kernel is called without Numba's type dispatch (see _make_diff_first), so
        # these checks are all that stands between it and a misread array: parent_diff
        # is now a 1-D int64 ndarray of the parent's size (any strides: the kernel
        # reads it as such), new_time an int in 1..2**63-1, and the rest is ours.
        out = _empty(shape, _I64)
        _make_diff(out, parent_diff, start, gather, new_time)
        return out

    def merge(self, node: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Entry-wise maximum of two clocks (or diffs) of ``node``, as a new array."""
        lay = self._arr(node, a, "a")
        self._arr(node, b, "b")
        out = np.empty(lay.size, dtype=np.int64)
        K.merge(out, a, b)
        return out

    def merge_into(self, node: int, clock: np.ndarray, diff: np.ndarray) -> np.ndarray:
        """Merge ``diff`` into ``clock`` in place; return ``clock``."""
        shape = self._shapes.get(node) if type(node) is int else None
        if (
            shape is None
            or type(clock) is not _ndarray or clock.dtype is not _I64 or clock.shape != shape
            or type(diff) is not _ndarray or diff.dtype is not _I64 or diff.shape != shape
        ):
            self._arr(node, clock)
            self._arr(node, diff, "diff")
        K.merge_into(clock, diff)
        return clock

    def receive(self, receiver: int, parent: int | None, parent_diff: np.ndarray | None, clock: np.ndarray,
                log: DiffLog | None = None) -> np.ndarray:
        """Everything a node does on receipt, in one kernel call.

        Builds the diff at time ``clock[0] + 1``, merges it into ``clock`` and
        appends it to ``log``; returns the diff (a view of the log's row).

        The checks are inlined; they are the same as
        :meth:`make_diff` and :meth:`merge_into` make. (The engine builds diffs as
        paths instead: :func:`receive_path`, :meth:`apply_paths`.)
        """
        try:
            start, gather, pshape, shape = self._edges[(receiver, parent)]
        except (KeyError, TypeError):
            self._edge(receiver, parent)  # raises the precise error
            raise  # pragma: no cover
        if pshape is None:
            if parent_diff is not None:
                raise TreeClockError("an input from outside the dataflow carries no diff")
            parent_diff = _NO_DIFF
        elif type(parent_diff) is not _ndarray or parent_diff.dtype is not _I64 or parent_diff.shape != pshape:
            assert parent is not None  # (pshape is not None)
            self._arr(parent, parent_diff, "parent_diff")
            parent_diff = cast(np.ndarray, parent_diff)  # _arr returned: it is one
        if type(clock) is not _ndarray or clock.dtype is not _I64 or clock.shape != shape:
            self._arr(receiver, clock)
        if log is None:
            rows = np.empty((1, shape[0]), dtype=np.int64)
            n = 0
        else:
            self._own_log(self.layouts[receiver], log)
            n = log._n
            if n == log._rows.shape[0]:
                log._grow()
            rows = log._rows
        if K.receive(clock, rows, n, parent_diff, start, gather) < 0:
            raise TreeClockError(f"time of node {receiver} would overflow int64")
        if log is not None:
            log._n = n + 1
        return rows[n]  # type: ignore[no-any-return]  # numpy types an int index as Any

    def edge(self, receiver: int, parent: int | None) -> _FastEdge:
        """The precomputed shape of edge ``parent -> receiver`` (``parent=None``: an
        input from outside), for :meth:`receive_fast`; checked once, here."""
        start, gather, _, _ = self._edge(receiver, parent)
        return start, gather

    def receive_fast(self, edge: _FastEdge, parent_diff: np.ndarray | None, clock: np.ndarray, log: DiffLog) -> np.ndarray:
        """:meth:`receive` without its argument checks, for a caller that only passes
        arrays this object made (the engine's own clocks, logs and the diffs its
        messages carry, decoded and checked where they enter): one kernel call and the
        log bookkeeping. Anything else is undefined behaviour; use :meth:`receive`."""
        start, gather = edge
        n = log._n
        if n == log._rows.shape[0]:
            log._grow()
        rows = log._rows
        if _receive(clock, rows, n, _NO_DIFF if parent_diff is None else parent_diff,
                    start, gather) < 0:
            raise TreeClockError("time would overflow int64")
        log._n = n + 1
        return rows[n]  # type: ignore[no-any-return]  # numpy types an int index as Any

    def path_edge(self, receiver: int, parent: int | None) -> PathEdge:
        """The edge ``parent -> receiver`` for :func:`receive_path`: where each of the
        parent's entries lands in the receiver's clock, one level deeper and cut to
        the depth (``parent=None``: an input from outside). Checked once, here."""
        start, gather, pshape, _ = self._edge(receiver, parent)
        if pshape is None:
            return None, (0,) * self.depth
        assert parent is not None  # (pshape is not None)
        lay = self.layouts[receiver]
        keep = self.depth + 1
        leaves = {pos: lay.index[((receiver,) + path)[:keep]]
                  for pos, path in enumerate(self.layouts[parent].paths)}
        return leaves, keep

    def apply_paths(self, node: int, paths: Sequence[int], clock: np.ndarray, log: DiffLog) -> None:
        """Append the diffs given as paths (:func:`receive_path`), flattened one after
        the other in ``paths`` (a sequence of ints), to ``log`` and merge them into
        ``clock``, in one kernel call. A malformed path raises, and then neither the
        log nor the clock has changed."""
        lay = self._arr(node, clock)
        width = self.depth + 2
        self._own_log(lay, log)
        flat = _empty(len(paths), dtype=_I64)
        try:        # checks and converts in one C loop, 3x faster than np.fromiter
            pack_into(f"{len(flat)}q", flat, 0, *paths)  # type: ignore[arg-type]  # numpy: a Buffer on 3.12+ only
        except struct_error:
            raise TreeClockError(f"diff paths of node {lay.root} must be int64 ints") from None
        if len(flat) % width:
            raise TreeClockError(f"diff paths of node {lay.root} come {width} ints each, got {len(flat)}")
        k = len(flat) // width
        n = log._n
        while n + k > log._rows.shape[0]:
            log._grow()
        # checked above: the clock is the node's, the log its DiffLog, flat ours; the
        # machine code for APPLY_PATHS_SIG takes the clock as contiguous and writable
        f = clock.flags
        kernel = _apply_paths if f.c_contiguous and f.writeable else K.apply_paths
        bad = kernel(clock, log._rows, n, flat.reshape(k, width), lay.up, lay.level)
        if bad:
            path = tuple(flat[(bad - 1) * width : bad * width].tolist())
            raise TreeClockError(f"malformed diff path {path} for node {lay.root}")
        log._n = n + k

    def compact(self, node: int, log: DiffLog, summary: np.ndarray, lows: Mapping[int, int]) -> int:
        """Fold into ``summary`` and drop from ``log`` every diff at or below a parent's
        low mark: ``lows`` maps parent node -> the time up to which every sibling has
        received that parent's messages (recovery of the parent resumes after it, so
        only the diffs' merge is still needed, for T*). One kernel call; returns how
        many diffs were dropped."""
        lay = self._arr(node, summary, "summary")
        self._own_log(lay, log)
        try:
            slots = np.array([lay.slot[p] for p in lows], dtype=np.int64)
            marks = np.array([self._time(t, "a low mark", 0) for t in lows.values()],
                             dtype=np.int64)
        except (KeyError, TypeError, AttributeError):
            raise TreeClockError(f"lows must map parents of node {lay.root} to times, "
                                 f"got {lows!r}") from None
        kept = K.compact(log._rows, log._n, slots, marks, summary)
        dropped, log._n = log._n - kept, kept
        return dropped

    def path_of(self, node: int, diff: np.ndarray) -> tuple[int, ...]:
        """A diff array as its path ``(leaf, t_0 .. t_depth)``."""
        lay = self._arr(node, diff, "diff")
        body = np.empty(self.depth + 2, dtype=np.int64)
        if K.diff_body(body, diff, lay.up, lay.level) < 0:
            raise TreeClockError(f"not a diff of node {lay.root}: its entries do not lie on one path")
        return tuple(body.tolist())

    def check_path(self, node: int, path: object) -> None:
        """Refuse ``path`` unless it is a diff of ``node`` as :func:`receive_path` builds
        it, by the rules :meth:`apply_paths` applies (one kernel, one set of rules), on
        a scratch clock and log: for a path that arrived from outside, checked on
        arrival a bad one changes nothing, where at the bulk write it would fail every
        later read of the receiver's clock."""
        try:
            if (type(path) is not tuple or len(path) != self.depth + 2
                    or not set(map(type, path)) <= {int}):
                raise TreeClockError("not a path")
            self.apply_paths(node, path, self.zero(node), self.new_log(node, 1))
        except TreeClockError:
            raise TreeClockError(f"malformed diff path {path!r} for node "
                                 f"{self.layout(node).root}") from None

    def time_at(self, node: int, clock: np.ndarray, path: Iterable[int]) -> int:
        """The time at ``path`` in ``node``'s clock, e.g. ``(C, B)`` or ``(C, B, A)``."""
        lay = self._arr(node, clock)
        return int(clock[lay.position(path)])

    def min_time(self, target: int, clocks: Mapping[int, np.ndarray]) -> int:
        """The least time of ``target`` across clocks ``{owner: clock}``.

        For an owner that is a child of ``target`` the entry read is
        ``(owner, target)``, the target-time of the last message the owner
        received from it; for ``owner == target`` it is the root.
        """
        target = self.layout(target).root
        if not isinstance(clocks, Mapping) or not clocks:
            raise TreeClockError("min_time needs a non-empty mapping owner -> clock")
        best: int | None = None
        pos: int | None
        for owner, clock in clocks.items():
            lay = self._arr(owner, clock)
            if owner == target:
                pos = 0
            else:
                pos = lay.slot.get(target)
                if pos is None:
                    raise TreeClockError(f"node {target} is not a parent of node {owner}")
            t = int(clock[pos])
            if best is None or t < best:
                best = t
        assert best is not None  # (clocks is not empty)
        return best

    def subtree(self, owner: int, clock: np.ndarray, node: int) -> np.ndarray:
        """The part of ``owner``'s clock under parent ``node``, as a clock of ``node``.

        It is one edge shallower than ``node``'s own clock, so the deepest
        level is 0 (unknown).
        """
        self._arr(owner, clock)
        lay = self.layout(node)
        if node == owner:
            return clock.copy()
        start, gather, _, _ = self._edge(owner, node)
        out = np.zeros(lay.size, dtype=np.int64)
        out[gather] = clock[start : start + gather.shape[0]]
        return out

    def apply_up_to(self, node: int, diffs: _Diffs, time: int) -> np.ndarray:
        """Merge, into a zero clock, every diff of ``node`` whose root time is <= ``time``."""
        time = self._time(time, "time", 0)
        rows, n = self._rows(node, diffs)
        out = self.zero(node)
        K.apply_up_to(out, rows, n, time)
        return out

    def t_star(self, failed: int, child_logs: Mapping[int, _Diffs], time: int) -> np.ndarray:
        """The seed's T*: the clock a restarted ``failed`` node starts from.

        From each child's diff log (``{child: diffs}``), take the subtree
        under ``failed`` of every diff whose ``(child, failed)`` entry is at
        most ``time`` (normally the :meth:`min_time` over the children), merge
        them into a zero clock of ``failed``, and set its root to ``time``.
        """
        out = self.zero(failed)
        time = self._time(time, "time", 0)
        if not isinstance(child_logs, Mapping):
            raise TreeClockError("t_star needs a mapping child -> diff log")
        for child, diffs in child_logs.items():
            start, gather, _, _ = self._edge(child, failed)
            rows, n = self._rows(child, diffs)
            K.scatter_up_to(out, rows, n, start, gather, time)
        out[0] = time
        return out

    # -- conversion and bytes ----------------------------------------------------

    def to_paths(self, node: int, clock: np.ndarray) -> dict[tuple[int, ...], int]:
        """The clock as ``{path: time}``, the reference version's representation."""
        lay = self._arr(node, clock)
        return dict(zip(lay.paths, clock.tolist()))

    def from_paths(self, node: int, mapping: Mapping[tuple[int, ...], int]) -> np.ndarray:
        """The array for a ``{path: time}`` mapping holding exactly ``node``'s paths."""
        lay = self.layout(node)
        if not isinstance(mapping, Mapping) or set(mapping) != set(lay.paths):
            raise TreeClockError(f"mapping does not have the paths of node {lay.root}'s clock at depth {self.depth}")
        out = np.array([self._time(mapping[p], f"time at {p}", 0) for p in lay.paths], dtype=np.int64)
        return out

    def encode(self, node: int, clock: np.ndarray) -> bytes:
        """Clock bytes: header, every entry as int64, CRC-32 (see :mod:`treeclock.codec`)."""
        return codec.encode_clock(self._arr(node, clock), clock)

    def decode(self, node: int, data: Encoded) -> np.ndarray:
        """The clock in ``data``; raises :class:`TreeClockError` on any corruption."""
        return codec.decode_clock(self.layout(node), data)

    def encode_diff(self, node: int, diff: np.ndarray) -> bytes:
        """Diff bytes: the diff's one path and its times, ``diff_nbytes()`` long."""
        return codec.encode_diff(self._arr(node, diff, "diff"), diff)

    def decode_diff(self, node: int, data: Encoded) -> np.ndarray:
        """The diff in ``data``; raises :class:`TreeClockError` on any corruption."""
        return codec.decode_diff(self.layout(node), data)
