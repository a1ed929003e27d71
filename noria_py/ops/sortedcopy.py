"""Copies of sorted multisets (sortedcontainers) without sorting again: for state shared
with a checkpoint until first changed (copy on write: ``topk.py``, ``accumulators.py``).

``SortedList(other)`` (what ``copy()`` does) sorts the values again and, for a
``SortedKeyList``, calls the key function once per value, in Python: a TopK row's key
is a tuple of wrappers, microseconds a row. A copy here copies the chunk lists as they
are (and the keys already computed), at memory speed: the invariants of the structure
(chunks sorted, ``_maxes`` the last value or key of each chunk, ``_len`` their total
length) hold in the copy because they held in the original; the positional index
(``_index``) is left empty, which the library rebuilds when it next needs it.

This reads sortedcontainers' private attributes (``tests/ops/test_sortedcopy.py`` checks
that copies equal their originals and change independently of them, with and without
keys, across chunk boundaries).
"""
from __future__ import annotations

from sortedcontainers import SortedKeyList, SortedList


def copy_sorted(s: SortedList) -> SortedList:
    """An independent copy of ``s`` (a ``SortedList`` or ``SortedKeyList``), equal to it,
    with no value sorted or key computed again."""
    c = object.__new__(type(s))
    c._len = s._len
    c._load = s._load
    c._lists = [chunk[:] for chunk in s._lists]
    c._maxes = s._maxes[:]
    c._index = []
    c._offset = 0
    if isinstance(s, SortedKeyList):
        c._key = s._key
        c._keys = [chunk[:] for chunk in s._keys]
    return c
