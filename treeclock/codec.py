"""Bytes for clocks and diffs: constant size per layout, checked on the way in.

Both kinds share a 20-byte little-endian header and end in a CRC-32 of
everything before it::

    offset size field
    0      2    magic b"TC"
    2      1    format version (1)
    3      1    kind: 0 clock, 1 diff
    4      4    root node id (u32)
    8      2    depth (u16)
    10     2    reserved, 0
    12     4    layout fingerprint (u32, CRC-32 of the clock's shape)
    16     4    number of int64 values that follow (u32)
    20     8*n  the values
    20+8n  4    CRC-32 of bytes 0 .. 20+8n

* A **clock** stores every entry in layout order: ``24 + 8 * size`` bytes.
* A **diff** is a single path of times (a node's diff holds its own time and,
  under the parent the message came from, that parent's diff, which is again
  a path), so it stores the path's last entry and ``depth + 1`` times from the
  root: ``24 + 8 * (depth + 2)`` bytes whatever the graph, 64 bytes at depth 3.

The fingerprint ties bytes to one graph shape: a clock encoded under one
graph or depth never decodes as a (wrong) clock under another.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

import numpy as np

from . import kernels as K
from .errors import TreeClockError
from .layout import Layout

__all__ = [
    "MAGIC",
    "VERSION",
    "KIND_CLOCK",
    "KIND_DIFF",
    "HEADER",
    "clock_nbytes",
    "diff_nbytes",
    "encode_clock",
    "decode_clock",
    "encode_diff",
    "decode_diff",
]

MAGIC = b"TC"
VERSION = 1
KIND_CLOCK = 0
KIND_DIFF = 1
HEADER = struct.Struct("<2sBBIHHII")
_CRC = struct.Struct("<I")
_NAMES = {KIND_CLOCK: "clock", KIND_DIFF: "diff"}
_LE_I8 = np.dtype("<i8")

if TYPE_CHECKING:
    from typing import TypeAlias

    #: What decoding accepts: the bytes types; anything else is refused.
    Encoded: TypeAlias = bytes | bytearray | memoryview


def clock_nbytes(layout: Layout) -> int:
    """Encoded size of any clock of this layout."""
    return HEADER.size + 8 * layout.size + 4


def diff_nbytes(depth: int) -> int:
    """Encoded size of any diff at this depth (independent of the graph)."""
    return HEADER.size + 8 * (depth + 2) + 4


def _header(layout: Layout, kind: int) -> bytes:
    h = layout._cache.get(kind)
    if h is None:
        count = layout.size if kind == KIND_CLOCK else layout.depth + 2
        h = HEADER.pack(MAGIC, VERSION, kind, layout.root, layout.depth, 0, layout.fingerprint, count)
        layout._cache[kind] = h
    return h


def _seal(header: bytes, body: bytes) -> bytes:
    return b"".join((header, body, _CRC.pack(zlib.crc32(body, zlib.crc32(header)))))


def encode_clock(layout: Layout, clock: np.ndarray) -> bytes:
    if K.min_value(clock) < 0:
        raise TreeClockError(f"clock of node {layout.root} has a negative time")
    return _seal(_header(layout, KIND_CLOCK), clock.astype("<i8", copy=False).tobytes())


def encode_diff(layout: Layout, diff: np.ndarray) -> bytes:
    body = np.empty(layout.depth + 2, dtype=np.int64)
    leaf = K.diff_body(body, diff, layout.up, layout.level)
    if leaf == -2:
        raise TreeClockError(f"diff of node {layout.root} has a negative time")
    if leaf < 0:
        raise TreeClockError(
            f"not a diff of node {layout.root}: its non-zero entries do not lie on one path (encode it as a clock)"
        )
    return _seal(_header(layout, KIND_DIFF), body.astype("<i8", copy=False).tobytes())


def _open(layout: Layout, data: Encoded, kind: int) -> np.ndarray:
    """Check ``data`` against the layout and return its int64 values (a copy)."""
    name = _NAMES[kind]
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TreeClockError(f"encoded tree {name} must be bytes, got {type(data).__name__}")
    if type(data) is not bytes:
        data = bytes(data)
    header = _header(layout, kind)
    count = layout.size if kind == KIND_CLOCK else layout.depth + 2
    want = HEADER.size + 8 * count + 4
    if len(data) != want:
        raise TreeClockError(f"corrupt tree {name} bytes: node {layout.root} needs {want} bytes, got {len(data)}")
    if data[:2] != MAGIC:
        raise TreeClockError(f"corrupt tree {name} bytes: bad magic {data[:2]!r}")
    if zlib.crc32(data[:-4]) != _CRC.unpack_from(data, want - 4)[0]:
        raise TreeClockError(f"corrupt tree {name} bytes: checksum mismatch")
    if data[: HEADER.size] != header:
        _, version, got_kind, root, depth, _, _, _ = HEADER.unpack_from(data)
        if version != VERSION:
            raise TreeClockError(f"tree {name} bytes have format version {version}, expected {VERSION}")
        if got_kind != kind:
            raise TreeClockError(f"bytes hold a {_NAMES.get(got_kind, '?')}, not a {name}")
        if root != layout.root:
            raise TreeClockError(f"bytes hold a {name} of node {root}, not of node {layout.root}")
        if depth != layout.depth:
            raise TreeClockError(f"bytes hold a {name} of depth {depth}, not {layout.depth}")
        raise TreeClockError(f"bytes hold a {name} of node {layout.root} for a different graph shape")
    return np.frombuffer(data, _LE_I8, count, HEADER.size).astype(np.int64)


def decode_clock(layout: Layout, data: Encoded) -> np.ndarray:
    values = _open(layout, data, KIND_CLOCK)
    if K.min_value(values) < 0:
        raise TreeClockError("corrupt tree clock bytes: negative time")
    return values


def decode_diff(layout: Layout, data: Encoded) -> np.ndarray:
    values = _open(layout, data, KIND_DIFF)
    leaf = values[0]
    if not 0 <= leaf < layout.size:
        raise TreeClockError(f"corrupt tree diff bytes: path position {leaf} out of range")
    out = np.empty(layout.size, dtype=np.int64)
    code = K.expand_chain(out, leaf, values[1:], layout.up, layout.level)
    if code:
        problem = {1: "negative time", 2: "times past the end of the path", 3: "path ends in a zero time"}[code]
        raise TreeClockError(f"corrupt tree diff bytes: {problem}")
    return out
