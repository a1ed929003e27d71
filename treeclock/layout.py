"""The fixed shape of one node's tree clock, as flat arrays.

The clock of node N at depth d has one entry per path that starts at N and
follows at most d parent edges. The graph and d never change while the
engine runs, so the set of paths never changes either: we number them once
(pre-order, parents in the order the graph lists them) and from then on a
clock is just an ``int64`` array indexed by that number. Pre-order keeps
every subtree contiguous, which is what lets a diff be built with one
gather and merged with one loop.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .errors import TreeClockError, check_depth, normalize_graph

__all__ = ["Layout", "MAX_ENTRIES"]

#: Refuse layouts larger than this: a clock rides on every message, and one
#: of a million entries means the depth or the fan-in is far too large.
MAX_ENTRIES = 1 << 20


class Layout:
    """Where each path of ``root``'s clock lives in the flat array.

    Attributes (all read-only by convention):

    * ``root``, ``depth``, ``size`` (number of entries);
    * ``node[i]``: the graph node whose time entry ``i`` holds;
    * ``up[i]``: the entry ``i`` hangs under (one step toward the root), -1 for the root;
    * ``level[i]``: number of edges from the root;
    * ``end[i]``: one past the last entry of ``i``'s subtree;
    * ``paths[i]`` and ``index[path]``: the path of entry ``i`` and back;
    * ``slot[p]``: entry of direct parent ``p`` (the ``(root, p)`` path);
    * ``fingerprint``: CRC-32 of the shape, written into encoded bytes so a
      clock is never decoded against a different graph.
    """

    __slots__ = ("root", "depth", "size", "node", "up", "level", "end", "paths", "index", "slot", "fingerprint", "_cache")

    def __init__(self, parents: Mapping[int, Sequence[int]], root: int, depth: int, *, _checked: bool = False) -> None:
        graph = parents if _checked else normalize_graph(parents)
        depth = check_depth(depth)
        if isinstance(root, bool) or root not in graph:
            raise TreeClockError(f"unknown node {root!r}: it is not in the graph")
        node: list[int]
        node, up, level = [], [], []
        stack = [(root, -1, 0)]
        while stack:
            n, u, lev = stack.pop()
            pos = len(node)
            node.append(n)
            up.append(u)
            level.append(lev)
            if len(node) > MAX_ENTRIES:
                raise TreeClockError(
                    f"clock of node {root} at depth {depth} has more than {MAX_ENTRIES} entries; lower the depth"
                )
            if lev < depth:
                for p in reversed(graph[n]):  # reversed: the stack pops them in graph order
                    stack.append((p, pos, lev + 1))
        size = len(node)
        end = list(range(1, size + 1))
        for i in range(size - 1, 0, -1):
            if end[i] > end[up[i]]:
                end[up[i]] = end[i]
        paths: list[tuple[int, ...]] = [(root,)]
        for i in range(1, size):
            paths.append(paths[up[i]] + (node[i],))
        self.root = root
        self.depth = depth
        self.size = size
        self.node = np.array(node, dtype=np.int64)
        self.up = np.array(up, dtype=np.int64)
        self.level = np.array(level, dtype=np.int64)
        self.end = np.array(end, dtype=np.int64)
        self.paths = tuple(paths)
        self.index = {path: i for i, path in enumerate(paths)}
        self.slot = {node[i]: i for i in range(1, size) if up[i] == 0}
        blob = np.int64(depth).astype("<i8").tobytes()
        blob += self.node.astype("<i8").tobytes() + self.up.astype("<i8").tobytes()
        self.fingerprint = zlib.crc32(blob)
        self._cache: dict[int, bytes] = {}  # encoded headers, filled by treeclock.codec
        for arr in (self.node, self.up, self.level, self.end):
            arr.flags.writeable = False

    def __repr__(self) -> str:
        return f"Layout(root={self.root}, depth={self.depth}, size={self.size})"

    def position(self, path: Iterable[int]) -> int:
        """Entry number of ``path`` (a tuple starting at the root)."""
        try:
            return self.index[tuple(path)]
        except (KeyError, TypeError):
            raise TreeClockError(f"path {path!r} is not in node {self.root}'s clock at depth {self.depth}") from None
