"""Keyed state shared by the stateful operators: key extraction, and the keyed multiset
(key -> {row: count}) they index rows in."""
from __future__ import annotations

from operator import itemgetter
from typing import Callable

from ..expression import columns_getter

tuple_key = columns_getter    # row -> the tuple of its key columns


def bare_key(cols: tuple[int, ...]) -> Callable[[tuple], object]:
    """Like ``tuple_key``, but a one-column key is the bare value: no tuple to build and
    hash per row (the join's hot path)."""
    if len(cols) == 1:
        return itemgetter(cols[0])
    return tuple_key(cols)


def index_add(index: dict, key, row: tuple, sign: int) -> None:
    """Add ``sign`` copies of ``row`` under ``key`` (negative removes); empty buckets go."""
    bucket = index.get(key)
    if bucket is None:
        bucket = index[key] = {}
    c = bucket.get(row, 0) + sign
    if c:
        bucket[row] = c
    else:
        del bucket[row]
        if not bucket:
            del index[key]


def expand(bucket: dict[tuple, int], out: list[tuple]) -> None:
    """Append each row of ``bucket`` as many times as it is present."""
    for r, c in bucket.items():
        if c == 1:
            out.append(r)
        elif c > 1:
            out.extend([r] * c)
