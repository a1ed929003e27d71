"""Keyed state shared by the stateful operators: key extraction, and the keyed multiset
(key -> bucket of rows, see ``index_add``) they index rows in."""
from __future__ import annotations

from operator import itemgetter
from typing import Callable, Iterable

from ..expression import columns_getter

tuple_key = columns_getter    # row -> the tuple of its key columns


def bare_key(cols: tuple[int, ...]) -> Callable[[tuple], object]:
    """Like ``tuple_key``, but a one-column key is the bare value: no tuple to build and
    hash per row (the join's hot path)."""
    if len(cols) == 1:
        return itemgetter(cols[0])
    return tuple_key(cols)


def bucket_add(bucket, row: tuple, sign: int):
    """``bucket`` with ``sign`` copies of ``row`` added (negative removes): the new
    bucket, or None when it is empty.

    A bucket holding one copy of one row, by far the commonest (a key of a grouped or
    primary-keyed relation), is the bare row rather than a one-entry dict: a third of
    the memory, and no dict to build and drop when an aggregate swaps -old for +new.
    Anything else (copies, several rows, a count below zero in transit) is a
    ``{row: count}`` dict, changed in place. Readers of buckets go through ``items``,
    ``count`` and ``expand``."""
    if bucket is None:
        return row if sign == 1 else {row: sign}
    if type(bucket) is tuple:
        if sign == -1 and bucket == row:
            return None
        bucket = {bucket: 1}
    c = bucket.get(row, 0) + sign
    if c:
        bucket[row] = c
        return bucket
    del bucket[row]
    if not bucket:
        return None
    if len(bucket) == 1:                    # back to one row: bare again if one copy
        (last, n), = bucket.items()
        if n == 1:
            return last
    return bucket


def index_add(index: dict, key, row: tuple, sign: int) -> None:
    """Add ``sign`` copies of ``row`` under ``key`` (negative removes); empty buckets go
    (see ``bucket_add``)."""
    bucket = bucket_add(index.get(key), row, sign)
    if bucket is None:
        index.pop(key, None)
    else:
        index[key] = bucket


def index_batch(index: dict, keys: Iterable, rows: Iterable[tuple], signs: Iterable[int]) -> None:
    """``index_add`` for each (key, row, sign) in turn, its two commonest cases inline
    (a row arriving at an empty key, the one row of a key leaving): a reader's per-row
    hot loop."""
    get = index.get
    for k, r, s in zip(keys, rows, signs):
        had = get(k)
        if had is None and s == 1:
            index[k] = r
        elif s == -1 and type(had) is tuple and had == r:
            del index[k]
        else:
            index_add(index, k, r, s)


def items(bucket) -> Iterable[tuple[tuple, int]]:
    """(row, count) pairs of a bucket."""
    return ((bucket, 1),) if type(bucket) is tuple else bucket.items()


def count(bucket) -> int:
    """The number of rows in a bucket (0 for none)."""
    if bucket is None:
        return 0
    return 1 if type(bucket) is tuple else sum(bucket.values())


def expand(bucket, out: list[tuple]) -> None:
    """Append each row of ``bucket`` (a bucket, or any {row: count}) as many times as it
    is present."""
    if type(bucket) is tuple:
        out.append(bucket)
        return
    for r, c in bucket.items():
        if c == 1:
            out.append(r)
        elif c > 1:
            out.extend([r] * c)
