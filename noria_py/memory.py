"""How many bytes a node shard's state takes: what ``Database.memory()`` reports.

The estimate walks the operator's attributes (``deep_size``):

- a numpy array counts its ``nbytes`` (and, for an object array, a sample of the
  objects it points to, as below); a view of another array (or of any object
  exposing memory: ``ndarray.base``) counts its header and its base, which the
  ids seen count once: ``DenseRows._bits``, the parts seen as 8-byte words, costs
  nothing more than the parts;
- a container (dict, list, tuple, set, deque, sortedcontainers' types) counts its own
  ``sys.getsizeof`` plus the deep size of its elements: all of them up to
  ``SAMPLE`` elements, else an evenly spaced sample of ``SAMPLE`` of them scaled up to
  the whole (a per-row estimate: rows of one state have one shape);
- any other object its ``getsizeof`` and, for one with a ``__dict__`` or
  ``__slots__``, its attributes; functions, methods, classes and modules count
  nothing (code, not state).

Invariants and why: an object reached twice within one node is counted once (ids
seen); objects shared *between* nodes (a row tuple a base and a reader both hold)
are counted in each, so the sum over nodes can exceed the process's growth, never
fall short of it by much. Small ints and one-character strings are Python's own
cached objects, counted anyway (a few bytes per row at most). tests/test_memory.py
holds the estimate to within a factor of 2 of tracemalloc's growth for the shapes the
engine keeps (a count per group, rows under a key, a partial reader).
"""
from __future__ import annotations

import sys
import types
from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import Any

import numpy as np

#: a container of more elements than this is measured on an evenly spaced sample
SAMPLE = 64

_SKIP = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
         type, types.LambdaType, types.BuiltinMethodType)
#: attributes that point at other things than the state (subscribers, the partial-state
#: manager, which reaches every reader, a partial operator's reader, a reader's path of
#: partial operators, a partial node's key map, which its path's nodes share: counted
#: once, as the ``_own`` of the node that made it, ops/holes.py)
_NOT_STATE = frozenset({"listeners", "manager", "owner", "path", "keymap"})
_ATOMS = (int, float, str, bytes, bool, type(None), complex)


def _sampled(items: Iterable[Any], n: int, seen: set[int], pairs: bool = False) -> int:
    """The deep size of ``n`` elements ``items`` yields (with ``pairs``, of both halves of
    each (key, value) pair): every one, or an evenly spaced sample."""
    if n > SAMPLE:
        picked = list(islice(items, 0, None, n // SAMPLE))[:SAMPLE]
    else:
        picked = list(items)
    if not picked:
        return 0
    if pairs:
        size = sum(deep_size(k, seen) + deep_size(v, seen) for k, v in picked)
    else:
        size = sum(deep_size(x, seen) for x in picked)
    return size if n <= SAMPLE else int(size * n / len(picked))


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes held by ``obj`` and what it reaches (the module docstring says how)."""
    if seen is None:
        seen = set()
    if isinstance(obj, _SKIP) or callable(obj) and not hasattr(obj, "__dict__"):
        return 0
    i = id(obj)
    if i in seen:
        return 0
    seen.add(i)
    if isinstance(obj, _ATOMS):
        return sys.getsizeof(obj)
    if isinstance(obj, np.ndarray):
        if obj.base is not None:        # a view: its memory is its base's, counted once
            return sys.getsizeof(obj) + deep_size(obj.base, seen)
        size = int(obj.nbytes)
        if obj.dtype == object and obj.size:
            size += _sampled(iter(obj.ravel()), obj.size, seen)
        return size
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        return size + _sampled(iter(obj.items()), len(obj), seen, pairs=True)
    if isinstance(obj, (tuple, list, set, frozenset, deque)):
        return size + _sampled(iter(obj), len(obj), seen)
    # sortedcontainers keep lists of lists (SortedList._lists) and a dict (SortedDict):
    # their attributes are walked below like any object's
    attrs: list[Any] = []
    d = getattr(obj, "__dict__", None)
    if d is not None:
        attrs.extend(v for k, v in d.items() if k not in _NOT_STATE)
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                attrs.append(getattr(obj, name))
    return size + sum(deep_size(a, seen) for a in attrs)


def node_bytes(op: Any) -> int:
    """The bytes of one operator's state (``deep_size`` of the operator). A base's
    upquery indexes (``Base.indexes``) hold its own rows: they count their dicts, keys
    and counts, not the rows again (a sample would not know those rows were seen)."""
    indexes = getattr(op, "indexes", None)
    if not indexes:
        return deep_size(op)
    seen = {id(indexes)}
    size = deep_size(op, seen)
    for index in indexes.values():
        size += sys.getsizeof(index)
        n = len(index)
        picked = list(islice(index.items(), 0, None, max(1, n // SAMPLE)))[:SAMPLE]
        if picked:
            part = sum(deep_size(k, seen) + _shell(b) for k, b in picked)
            size += int(part * n / len(picked))
    return size


def _shell(bucket: Any) -> int:
    """A base index's bucket without its rows (the base's): a {row: count} dict's own
    size and counts, nothing for a bare row."""
    if type(bucket) is tuple:
        return 0
    return sys.getsizeof(bucket) + sum(sys.getsizeof(c) for c in bucket.values())


def bucket_bytes(key: Any, bucket: Any) -> int:
    """A reader's entry for one key: the key, and its bucket of rows (a bare row tuple
    or a {row: count} dict), each row with its values (what eviction accounts). The
    values are atoms here (ints, floats, strings, dates...), so no walk is needed."""
    getsizeof = sys.getsizeof
    size = getsizeof(key)
    if type(key) is tuple:
        size += sum(map(getsizeof, key))
    if bucket is None:
        return size
    if type(bucket) is tuple:
        return size + getsizeof(bucket) + sum(map(getsizeof, bucket))
    size += getsizeof(bucket)
    for row, c in bucket.items():
        size += getsizeof(row) + sum(map(getsizeof, row)) + getsizeof(c)
    return size
