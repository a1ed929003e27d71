"""A TopK's sorted container: 40,000 NEXMark-shaped bid rows added under ``ORDER BY
price DESC, ts DESC`` (``ordering.order_key``: descending numbers negated, compared in
C); each round's result checked against a plain sort.

Run: .venv/bin/python -m pytest bench/test_ordering.py --benchmark-only
"""
from __future__ import annotations

import random

from sortedcontainers import SortedKeyList

from noria_py.ordering import order_key
from sql_frontend.plan import OrderKey

_rng = random.Random(1)
#: (auction, bidder, price, ts)
ROWS = [(_rng.randrange(1000), _rng.randrange(5000), _rng.randrange(10**6), i)
        for i in range(40_000)]
KEY = order_key([OrderKey(2, True, False), OrderKey(3, True, False)])
TOP = sorted(ROWS, key=lambda r: (-r[2], -r[3]))[:10]


def test_topk_container_adds_40000_rows_descending(benchmark):
    benchmark.group = "a TopK's container: 40,000 adds, ORDER BY price DESC, ts DESC"

    def fill() -> SortedKeyList:
        rows = SortedKeyList(key=KEY)
        for r in ROWS:
            rows.add(r)
        return rows

    got = benchmark.pedantic(fill, rounds=3, iterations=1)
    assert list(got[:10]) == TOP and len(got) == len(ROWS)
