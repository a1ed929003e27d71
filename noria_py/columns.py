"""Rows handed over as columns: the in-memory type that the engine and storage share.

A base table that only ever received inserts keeps them as the write batches
themselves, columnar where the values allow (see :mod:`noria_py.ops.base`). When
storage snapshots such a table it should store those arrays' bytes rather than build
and encode a Python tuple per row, so the base hands the arrays over as a
:class:`ColumnChunk` among its rows, and :mod:`noria_py.storage.snapshot` writes a
chunk as one columns record.

The type lives here, next to neither side, so that the dependency runs one way: the
operators never import the storage format (they only say "these rows are columns"),
and the storage format (:mod:`noria_py.storage.codec`, which decides how the arrays'
bytes are laid out on disk) depends on this module, not on the operators.

Invariants: a chunk holds at least one array; all its arrays are 1-D, of one length
(its number of rows), and of dtype int64 or float64; each row is present once (a
chunk carries no signs: it only ever stands for insertions). The chunk does not check
them itself: the base builds chunks only from batches that pass
``Batch.is_numeric_insert``, and the codec's ``pack_columns`` refuses anything else
before a byte is written.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ColumnChunk"]


class ColumnChunk:
    """Rows given as int64/float64 arrays of one length, one array per column."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: Iterable[np.ndarray]) -> None:
        self.arrays: tuple[np.ndarray, ...] = tuple(arrays)

    def __len__(self) -> int:
        return len(self.arrays[0]) if self.arrays else 0
