"""The keyed multiset every stateful operator indexes its rows in: key -> {row: count}."""
from __future__ import annotations


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
