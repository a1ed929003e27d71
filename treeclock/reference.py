"""The reference tree clock: plain Python, written to be obviously correct.

A clock is a ``dict`` from *path* to time. A path is a tuple of node ids that
starts at the clock's owner and walks upstream, one parent at a time:
``(C,)`` is C's own time, ``(C, B)`` is B's entry in C's clock, ``(C, B, A)`` is
A's entry under B. A clock of node N at depth d has one key for every path
that starts at N and follows at most ``d`` parent edges, and no other key.
Nothing here is clever; the fast version in
:mod:`treeclock.clocks` must agree with this module on every input, and the
tests check that it does.

The order of :meth:`TreeClocks.paths` (pre-order, parents in the order the
graph lists them) is the order of entries in the fast version's flat arrays
and in the encoded bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .codec import HEADER, KIND_CLOCK, KIND_DIFF, MAGIC, VERSION
from .errors import TreeClockError, check_depth, normalize_graph

if TYPE_CHECKING:
    from .codec import Encoded

__all__ = ["TreeClocks"]

Path = tuple[int, ...]
Clock = dict[Path, int]


class TreeClocks:
    """Tree clocks of every node of one dataflow graph, as dicts of path -> time.

    ``parents`` maps each node id to the tuple of its parents (a DAG; sources
    map to ``()``); ``depth`` is the number of edges kept below the root.
    """

    def __init__(self, parents: Mapping[int, Iterable[int]], depth: int) -> None:
        self.graph = normalize_graph(parents)
        self.depth = check_depth(depth)
        self._paths = {node: self._enumerate(node, self.depth) for node in self.graph}

    # -- shape ---------------------------------------------------------------

    def _enumerate(self, node: int, depth: int) -> list[Path]:
        """All paths from ``node`` upstream of at most ``depth`` edges, pre-order."""
        out: list[Path] = [(node,)]
        if depth > 0:
            for parent in self.graph[node]:
                for path in self._enumerate(parent, depth - 1):
                    out.append((node,) + path)
        return out

    def _node(self, node: int) -> int:
        try:
            known = node in self.graph and not isinstance(node, bool)
        except TypeError:  # unhashable
            known = False
        if not known:
            raise TreeClockError(f"unknown node {node!r}: it is not in the graph")
        return node

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(self.graph)

    def parents_of(self, node: int) -> tuple[int, ...]:
        return self.graph[self._node(node)]

    def paths(self, node: int) -> tuple[Path, ...]:
        return tuple(self._paths[self._node(node)])

    def size(self, node: int) -> int:
        return len(self._paths[self._node(node)])

    def fingerprint(self, node: int) -> int:
        """CRC-32 of the clock's shape; encoded bytes carry it (see codec)."""
        paths = self._paths[self._node(node)]
        where = {path: i for i, path in enumerate(paths)}
        blob = struct.pack("<q", self.depth)
        blob += b"".join(struct.pack("<q", path[-1]) for path in paths)
        blob += b"".join(struct.pack("<q", where.get(path[:-1], -1)) for path in paths)
        return zlib.crc32(blob)

    def clock_nbytes(self, node: int) -> int:
        """Encoded size of every clock of ``node``."""
        return HEADER.size + 8 * self.size(node) + 4

    def diff_nbytes(self) -> int:
        """Encoded size of every diff (the same for all nodes at this depth)."""
        return HEADER.size + 8 * (self.depth + 2) + 4

    # -- checks ----------------------------------------------------------------

    def _clock(self, node: int, clock: object, what: str = "clock") -> Clock:
        node = self._node(node)
        if not isinstance(clock, dict):
            raise TreeClockError(f"{what} of node {node} must be a dict of path -> time")
        if set(clock) != set(self._paths[node]):
            raise TreeClockError(f"{what} does not have the paths of node {node}'s clock at depth {self.depth}")
        for path, time in clock.items():
            if isinstance(time, bool) or not isinstance(time, int) or time < 0:
                raise TreeClockError(f"{what} of node {node}: time at {path} must be an int >= 0, got {time!r}")
        return clock

    @staticmethod
    def _time(time: object, what: str, minimum: int) -> int:
        if isinstance(time, bool) or not isinstance(time, int):
            raise TreeClockError(f"{what} must be an int, got {time!r}")
        if not minimum <= time < 2**63:
            raise TreeClockError(f"{what} must be in {minimum}..2**63-1, got {time}")
        return time

    # -- operations --------------------------------------------------------------

    def zero(self, node: int) -> Clock:
        """The clock every node starts with: every entry 0."""
        return {path: 0 for path in self._paths[self._node(node)]}

    def new_log(self, node: int) -> list[Clock]:
        """An empty diff log for ``node`` (here a plain list of diffs)."""
        self._node(node)
        return []

    def make_diff(self, receiver: int, parent: int | None, parent_diff: Clock | None, new_time: int) -> Clock:
        """The diff ``receiver`` stores when it receives a message from ``parent``.

        Its root holds ``new_time``; under ``parent`` sits ``parent_diff`` (the
        diff the message carried), cut to the receiver's depth; every other
        entry is 0. ``parent=None`` (with ``parent_diff=None``) is an input
        from outside the dataflow, allowed only for a source node.
        """
        receiver = self._node(receiver)
        new_time = self._time(new_time, "new_time", 1)
        diff = self.zero(receiver)
        diff[(receiver,)] = new_time
        if parent is None:
            if self.graph[receiver]:
                raise TreeClockError(f"node {receiver} has parents, so its input must come from one of them")
            if parent_diff is not None:
                raise TreeClockError("an input from outside the dataflow carries no diff")
            return diff
        self._node(parent)
        if parent not in self.graph[receiver]:
            raise TreeClockError(f"node {parent} is not a parent of node {receiver}")
        parent_diff = self._clock(parent, parent_diff, "parent_diff")
        for path, time in parent_diff.items():
            if len(path) <= self.depth:  # one edge more below the receiver
                diff[(receiver,) + path] = time
        return diff

    def merge(self, node: int, a: Clock, b: Clock) -> Clock:
        """Entry-wise maximum of two clocks (or diffs) of ``node``."""
        self._clock(node, a, "a")
        self._clock(node, b, "b")
        return {path: max(a[path], b[path]) for path in a}

    def merge_into(self, node: int, clock: Clock, diff: Clock) -> Clock:
        """Merge ``diff`` into ``clock`` in place; return ``clock``."""
        self._clock(node, clock)
        self._clock(node, diff, "diff")
        for path in clock:
            clock[path] = max(clock[path], diff[path])
        return clock

    def receive(self, receiver: int, parent: int | None, parent_diff: Clock | None, clock: Clock,
                log: list[Clock] | None = None) -> Clock:
        """Everything a node does on receipt: diff at its time + 1, merge, log."""
        self._clock(receiver, clock)
        diff = self.make_diff(receiver, parent, parent_diff, clock[(receiver,)] + 1)
        self.merge_into(receiver, clock, diff)
        if log is not None:
            log.append(diff)
        return diff

    def edge(self, receiver: int, parent: int | None) -> tuple[int, int | None]:
        """The edge ``parent -> receiver``, for :meth:`receive_fast` (checked here)."""
        self.make_diff(receiver, parent, None if parent is None else self.zero(parent), 1)
        return (receiver, parent)

    def receive_fast(self, edge: tuple[int, int | None], parent_diff: Clock | None, clock: Clock,
                     log: list[Clock] | None) -> Clock:
        """Same as :meth:`receive` (the fast version skips its checks; this one need not)."""
        return self.receive(edge[0], edge[1], parent_diff, clock, log)

    def time_at(self, node: int, clock: Clock, path: Iterable[int]) -> int:
        """The time at ``path`` in ``node``'s clock, e.g. ``(C, B)`` or ``(C, B, A)``."""
        self._clock(node, clock)
        path = tuple(path)
        if path not in clock:
            raise TreeClockError(f"path {path} is not in node {node}'s clock at depth {self.depth}")
        return clock[path]

    def min_time(self, target: int, clocks: Mapping[int, Clock]) -> int:
        """The least time of ``target`` across clocks ``{owner: clock}``.

        For an owner that is a child of ``target`` the entry read is
        ``(owner, target)``, the target-time of the last message the owner
        received from it; for ``owner == target`` it is the root.
        """
        target = self._node(target)
        if not isinstance(clocks, Mapping) or not clocks:
            raise TreeClockError("min_time needs a non-empty mapping owner -> clock")
        times: list[int] = []
        for owner, clock in clocks.items():
            self._clock(owner, clock)
            if owner == target:
                times.append(clock[(owner,)])
            elif target in self.graph[owner]:
                times.append(clock[(owner, target)])
            else:
                raise TreeClockError(f"node {target} is not a parent of node {owner}")
        return min(times)

    def subtree(self, owner: int, clock: Clock, node: int) -> Clock:
        """The part of ``owner``'s clock under parent ``node``, as a clock of ``node``.

        It is one edge shallower than ``node``'s own clock, so the deepest
        level is 0 (unknown).
        """
        self._clock(owner, clock)
        self._node(node)
        if node == owner:
            return dict(clock)
        if node not in self.graph[owner]:
            raise TreeClockError(f"node {node} is not a parent of node {owner}")
        out = self.zero(node)
        for path, time in clock.items():
            if len(path) >= 2 and path[1] == node:
                out[path[1:]] = time
        return out

    def apply_up_to(self, node: int, diffs: Iterable[Clock], time: int) -> Clock:
        """Merge, into a zero clock, every diff of ``node`` whose root time is <= ``time``."""
        time = self._time(time, "time", 0)
        out = self.zero(node)
        for diff in diffs:
            self._clock(node, diff, "diff")
            if diff[(node,)] <= time:
                self.merge_into(node, out, diff)
        return out

    def t_star(self, failed: int, child_logs: Mapping[int, Iterable[Clock]], time: int) -> Clock:
        """The seed's T*: the clock a restarted ``failed`` node starts from.

        From each child's diff log (``{child: diffs}``), take the subtree
        under ``failed`` of every diff whose ``(child, failed)`` entry is at
        most ``time`` (normally the :meth:`min_time` over the children), merge
        them into a zero clock of ``failed``, and set its root to ``time``.
        """
        failed = self._node(failed)
        time = self._time(time, "time", 0)
        if not isinstance(child_logs, Mapping):
            raise TreeClockError("t_star needs a mapping child -> diff log")
        out = self.zero(failed)
        for child, diffs in child_logs.items():
            self._node(child)
            if failed not in self.graph[child]:
                raise TreeClockError(f"node {failed} is not a parent of node {child}")
            for diff in diffs:
                self._clock(child, diff, "diff")
                if diff[(child, failed)] <= time:
                    self.merge_into(failed, out, self.subtree(child, diff, failed))
        out[(failed,)] = time
        return out

    # -- conversion and bytes ----------------------------------------------------

    def to_paths(self, node: int, clock: Clock) -> Clock:
        return dict(self._clock(node, clock))

    def from_paths(self, node: int, mapping: Mapping[Path, int]) -> Clock:
        return dict(self._clock(node, dict(mapping)))

    def _header(self, node: int, kind: int, count: int) -> bytes:
        return HEADER.pack(MAGIC, VERSION, kind, node, self.depth, 0, self.fingerprint(node), count)

    def encode(self, node: int, clock: Clock) -> bytes:
        """Clock bytes: header, every time as int64 in path order, CRC-32."""
        self._clock(node, clock)
        paths = self._paths[node]
        body = struct.pack(f"<{len(paths)}q", *(clock[p] for p in paths))
        blob = self._header(node, KIND_CLOCK, len(paths)) + body
        return blob + struct.pack("<I", zlib.crc32(blob))

    def _leaf(self, node: int, diff: Clock) -> Path:
        """The one path all non-zero entries of a diff lie on (its deepest non-zero)."""
        nonzero = [p for p, t in diff.items() if t != 0]
        if not nonzero:
            return (node,)
        deepest = max(len(p) for p in nonzero)
        leaves = [p for p in nonzero if len(p) == deepest]
        if len(leaves) > 1 or any(leaves[0][: len(p)] != p for p in nonzero):
            raise TreeClockError(
                f"not a diff of node {node}: its non-zero entries do not lie on one path (encode it as a clock)"
            )
        return leaves[0]

    def encode_diff(self, node: int, diff: Clock) -> bytes:
        """Diff bytes: a diff is one path of times, so store that path only.

        Header, the position of the path's last entry, then ``depth + 1``
        times from the root (0 past the end of the path), CRC-32.
        """
        self._clock(node, diff, "diff")
        leaf = self._leaf(node, diff)
        times = [diff[leaf[: i + 1]] for i in range(len(leaf))]
        times += [0] * (self.depth + 1 - len(times))
        body = struct.pack("<q", self._paths[node].index(leaf)) + struct.pack(f"<{self.depth + 1}q", *times)
        blob = self._header(node, KIND_DIFF, self.depth + 2) + body
        return blob + struct.pack("<I", zlib.crc32(blob))

    def _open(self, node: int, data: Encoded, kind: int, count: int) -> tuple[int, ...]:
        node = self._node(node)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TreeClockError(f"encoded tree clock must be bytes, got {type(data).__name__}")
        data = bytes(data)
        want = HEADER.size + 8 * count + 4
        name = "clock" if kind == KIND_CLOCK else "diff"
        if len(data) != want:
            raise TreeClockError(f"corrupt tree {name} bytes: node {node} needs {want} bytes, got {len(data)}")
        if data[:2] != MAGIC:
            raise TreeClockError(f"corrupt tree {name} bytes: bad magic {data[:2]!r}")
        (crc,) = struct.unpack("<I", data[-4:])
        if zlib.crc32(data[:-4]) != crc:
            raise TreeClockError(f"corrupt tree {name} bytes: checksum mismatch")
        _, version, got_kind, root, depth, _, fp, got_count = HEADER.unpack(data[: HEADER.size])
        if version != VERSION:
            raise TreeClockError(f"tree {name} bytes have format version {version}, expected {VERSION}")
        if got_kind != kind:
            raise TreeClockError(f"bytes hold a {'clock' if got_kind == KIND_CLOCK else 'diff'}, not a {name}")
        if root != node:
            raise TreeClockError(f"bytes hold a {name} of node {root}, not of node {node}")
        if depth != self.depth:
            raise TreeClockError(f"bytes hold a {name} of depth {depth}, not {self.depth}")
        if fp != self.fingerprint(node) or got_count != count:
            raise TreeClockError(f"bytes hold a {name} of node {node} for a different graph shape")
        return struct.unpack(f"<{count}q", data[HEADER.size : -4])

    def decode(self, node: int, data: Encoded) -> Clock:
        paths = self._paths[self._node(node)]
        values = self._open(node, data, KIND_CLOCK, len(paths))
        if any(v < 0 for v in values):
            raise TreeClockError("corrupt tree clock bytes: negative time")
        return dict(zip(paths, values))

    def decode_diff(self, node: int, data: Encoded) -> Clock:
        paths = self._paths[self._node(node)]
        leaf_pos, *times = self._open(node, data, KIND_DIFF, self.depth + 2)
        if not 0 <= leaf_pos < len(paths):
            raise TreeClockError(f"corrupt tree diff bytes: path position {leaf_pos} out of range")
        if any(t < 0 for t in times):
            raise TreeClockError("corrupt tree diff bytes: negative time")
        leaf = paths[leaf_pos]
        if any(times[len(leaf) :]):
            raise TreeClockError("corrupt tree diff bytes: times past the end of the path")
        if len(leaf) > 1 and times[len(leaf) - 1] == 0:
            # The encoder stores the path to the deepest non-zero entry.
            raise TreeClockError("corrupt tree diff bytes: path ends in a zero time")
        diff = self.zero(node)
        for i in range(len(leaf)):
            diff[leaf[: i + 1]] = times[i]
        return diff
