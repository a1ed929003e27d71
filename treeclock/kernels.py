"""Numba kernels over flat int64 clock arrays.

A layout (:mod:`treeclock.layout`) fixes where each path's entry sits, so
every operation is a loop over a few small arrays. The kernels do no
checking: :class:`treeclock.TreeClocks` checks shapes and ids before it
calls them, once per Python call. ``cache=True`` keeps the compiled code in
``__pycache__`` so only the first process ever pays for compilation; every process
still pays for loading a kernel's code (3-10 ms) at its first call, so a kernel first
called mid-stream (compaction) is loaded when the clocks are built.

Names of positions used below:

* ``start``: position, in the receiver's layout, of the entry for the parent
  the message came from; the parent's subtree occupies ``start ..
  start + len(gather)`` (layouts are pre-order, so subtrees are contiguous);
* ``gather[k]``: position, in the parent's layout, of the entry that lands at
  ``start + k`` (the parent's clock cut one level shorter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numba import types

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    import numpy as np
    import numpy.typing as npt

    _F = TypeVar("_F", bound=Callable[..., object])
    _I64s = npt.NDArray[np.int64]

    def njit(*, cache: bool = ..., nogil: bool = ...) -> Callable[[_F], _F]:
        """``numba.njit`` as the type checker sees it (Numba has no type hints): the
        dispatcher it returns is called with the kernel's own Python signature."""
else:
    from numba import njit

__all__ = [
    "make_diff",
    "MAKE_DIFF_SIG",
    "RECEIVE_SIG",
    "entry_point",
    "merge_into",
    "merge",
    "make_diff_merge",
    "receive",
    "apply_up_to",
    "scatter_up_to",
    "chain_leaf",
    "chain_times",
    "diff_body",
    "expand_chain",
    "apply_paths",
    "APPLY_PATHS_SIG",
    "compact",
    "COMPACT_SIG",
    "min_value",
]


_C = types.Array(types.int64, 1, "C")
_C2 = types.Array(types.int64, 2, "C")
#: Any 1-D int64 array: strided, read-only or unaligned views included.
_ANY = types.Array(types.int64, 1, "A", readonly=True, aligned=False)
#: The one signature :meth:`treeclock.TreeClocks.make_diff` calls :func:`make_diff`
#: with: ``out`` and ``gather`` are arrays the library made (C-contiguous); the
#: caller's ``parent_diff`` may be any 1-D int64 array, read through its strides.
MAKE_DIFF_SIG = (_C, _ANY, types.int64, _C, types.int64)
#: The one signature :meth:`treeclock.TreeClocks.receive_fast` calls :func:`receive`
#: with: the clock, log rows and gather are arrays the library made (C-contiguous);
#: the parent's diff is read through its strides, whatever they are.
RECEIVE_SIG = (_C, _C2, types.int64, _ANY, types.int64, _C)


# No ``nogil``: the work is a ~20-entry copy, and dropping and retaking the GIL
# around it costs more than the copy (0.05 to 0.1 µs of a ~0.6 µs call).
@njit(cache=True)
def make_diff(out: _I64s, parent_diff: _I64s, start: int, gather: _I64s, new_time: int) -> None:
    """Write into ``out`` the diff: root ``new_time``, parent's diff under ``start``."""
    out[:] = 0
    out[0] = new_time
    for k in range(gather.shape[0]):
        out[start + k] = parent_diff[gather[k]]


def entry_point(dispatcher: _F, sig: tuple[object, ...]) -> _F:
    """``dispatcher``'s machine code for the argument types ``sig``, as a Python callable.

    Calling it skips Numba's dispatch (working out the arguments' Numba types and
    choosing a specialization), about 0.15 µs of a 0.3 µs call, and with it every
    type check: the arguments are converted as if they had exactly the types of
    ``sig``, so an array of another dtype or dimension is misread, not refused.
    Only call it with arguments already checked to fit ``sig``. Compiles (or loads
    from the ``cache=True`` cache) on first use; if this Numba has no
    ``Dispatcher.compile`` returning the entry point, returns ``dispatcher`` itself.
    """
    compile_ = getattr(dispatcher, "compile", None)
    fn = compile_(sig) if compile_ is not None else None
    return fn if callable(fn) else dispatcher


@njit(cache=True, nogil=True)
def merge_into(clock: _I64s, diff: _I64s) -> None:
    """``clock = max(clock, diff)`` entry-wise, in place."""
    for i in range(clock.shape[0]):
        if diff[i] > clock[i]:
            clock[i] = diff[i]


@njit(cache=True, nogil=True)
def merge(out: _I64s, a: _I64s, b: _I64s) -> None:
    for i in range(out.shape[0]):
        out[i] = a[i] if a[i] >= b[i] else b[i]


@njit(cache=True, nogil=True)
def make_diff_merge(out: _I64s, clock: _I64s, parent_diff: _I64s, start: int, gather: _I64s, new_time: int) -> None:
    """:func:`make_diff` then :func:`merge_into` the clock, in one call.

    Only the root and the parent's subtree of the diff can be non-zero, so
    only those entries of the clock need the maximum.
    """
    out[:] = 0
    out[0] = new_time
    if new_time > clock[0]:
        clock[0] = new_time
    for k in range(gather.shape[0]):
        v = parent_diff[gather[k]]
        out[start + k] = v
        if v > clock[start + k]:
            clock[start + k] = v


@njit(cache=True)     # (no nogil: see make_diff)
def receive(clock: _I64s, rows: _I64s, n: int, parent_diff: _I64s, start: int, gather: _I64s) -> int:
    """A node's whole receipt: diff at time ``clock[0] + 1`` into ``rows[n]``, merged.

    Returns the new time, or -1 (and changes nothing) if it would overflow.
    The caller has made sure ``rows`` has a row ``n``.
    """
    if clock[0] == 9223372036854775807:
        return -1
    new_time: int = clock[0] + 1
    make_diff_merge(rows[n], clock, parent_diff, start, gather, new_time)
    return new_time


@njit(cache=True, nogil=True)
def apply_up_to(out: _I64s, rows: _I64s, n: int, time: int) -> None:
    """Merge into ``out`` each of the first ``n`` rows whose root is <= ``time``."""
    for r in range(n):
        if rows[r, 0] <= time:
            for i in range(out.shape[0]):
                if rows[r, i] > out[i]:
                    out[i] = rows[r, i]


@njit(cache=True, nogil=True)
def scatter_up_to(out: _I64s, rows: _I64s, n: int, start: int, gather: _I64s, time: int) -> None:
    """For T*: merge the subtree at ``start`` of each child diff whose entry there is <= ``time``.

    ``out`` is in the failed node's layout; ``gather`` maps the child's
    subtree positions to it.
    """
    for r in range(n):
        if rows[r, start] <= time:
            for k in range(gather.shape[0]):
                v = rows[r, start + k]
                p = gather[k]
                if v > out[p]:
                    out[p] = v


@njit(cache=True, nogil=True)
def chain_leaf(diff: _I64s, up: _I64s, level: _I64s) -> int:
    """Position of the deepest non-zero entry, if all non-zeros lie on its path.

    Returns 0 for an all-zero (or root-only) diff, -1 when the non-zero
    entries do not lie on one path, -2 when an entry is negative.
    """
    leaf = 0
    for i in range(diff.shape[0]):
        if diff[i] < 0:
            return -2
        if diff[i] != 0 and level[i] > level[leaf]:
            leaf = i
    # Mark the chain by walking up from the leaf; then every non-zero must be on it.
    for i in range(1, diff.shape[0]):
        if diff[i] != 0:
            p = leaf
            while p > i:
                p = up[p]
            if p != i:
                return -1
    return leaf


@njit(cache=True, nogil=True)
def chain_times(out: _I64s, diff: _I64s, leaf: int, up: _I64s, level: _I64s) -> None:
    """Times along the path root..leaf into ``out[0..]`` (``out`` pre-zeroed)."""
    p = leaf
    while p >= 0:
        out[level[p]] = diff[p]
        p = up[p]


@njit(cache=True, nogil=True)
def diff_body(body: _I64s, diff: _I64s, up: _I64s, level: _I64s) -> int:
    """Encoded body of a diff: ``[leaf, t_0 .. t_depth]`` into ``body``.

    Returns the leaf position, or the negative code of :func:`chain_leaf`.
    """
    leaf = chain_leaf(diff, up, level)
    if leaf < 0:
        return leaf
    body[:] = 0
    body[0] = leaf
    chain_times(body[1:], diff, leaf, up, level)
    return leaf


@njit(cache=True, nogil=True)
def expand_chain(out: _I64s, leaf: int, times: _I64s, up: _I64s, level: _I64s) -> int:
    """Rebuild a diff from a path and its times; 0 if fine, else an error code.

    1: a negative time; 2: a time past the end of the path; 3: the path
    ends in a zero (the encoder always ends it at the deepest non-zero).
    """
    for j in range(times.shape[0]):
        if times[j] < 0:
            return 1
        if j > level[leaf] and times[j] != 0:
            return 2
    if leaf != 0 and times[level[leaf]] == 0:
        return 3
    out[:] = 0
    p = leaf
    while p >= 0:
        out[p] = times[level[p]]
        p = up[p]
    return 0


_RO = types.Array(types.int64, 1, "C", readonly=True)
#: The one signature :meth:`treeclock.TreeClocks.apply_paths` calls :func:`apply_paths`
#: with: all arrays the library's own (a layout's ``up`` and ``level`` are read-only).
APPLY_PATHS_SIG = (_C, _C2, types.int64, _C2, _RO, _RO)


@njit(cache=True)
def apply_paths(clock: _I64s, rows: _I64s, n: int, paths: _I64s, up: _I64s, level: _I64s) -> int:
    """Expand each diff given as its path (a row of ``paths``: leaf, then the times
    from the root) into ``rows[n + i]``, then merge them all into ``clock``.

    Returns 0, or 1 + the index of the first malformed path; then nothing is merged
    (rows from ``n`` on may have been written: the caller has not counted them).
    """
    size = clock.shape[0]
    for i in range(paths.shape[0]):
        leaf = paths[i, 0]
        if leaf < 0 or leaf >= size:
            return i + 1
        if expand_chain(rows[n + i], leaf, paths[i, 1:], up, level) != 0:
            return i + 1
    for i in range(paths.shape[0]):
        p = paths[i, 0]
        while p >= 0:
            v = rows[n + i, p]
            if v > clock[p]:
                clock[p] = v
            p = up[p]
    return 0


#: The signature :meth:`treeclock.TreeClocks.compact` calls :func:`compact` with (the
#: log's rows, its length, the slots, the marks and the summary, all the library's own).
COMPACT_SIG = (_C2, types.int64, _C, _C, _C)


@njit(cache=True, nogil=True)
def compact(rows: _I64s, n: int, slots: _I64s, lows: _I64s, summary: _I64s) -> int:
    """Drop from ``rows[:n]`` every diff whose entry at some ``slots[j]`` is in
    1..``lows[j]``, merging the dropped ones into ``summary``; the kept ones move up,
    in order. Returns how many are kept."""
    k = 0
    for i in range(n):
        drop = False
        for j in range(slots.shape[0]):
            v = rows[i, slots[j]]
            if v > 0 and v <= lows[j]:
                drop = True
                break
        if drop:
            for c in range(rows.shape[1]):
                if rows[i, c] > summary[c]:
                    summary[c] = rows[i, c]
        else:
            if k != i:
                rows[k, :] = rows[i, :]
            k += 1
    return k


@njit(cache=True, nogil=True)
def min_value(a: _I64s) -> int:
    m: int = a[0]
    for i in range(1, a.shape[0]):
        if a[i] < m:
            m = a[i]
    return m
