"""Misses and hits of partial TopK and DISTINCT views against full ones
(docs/partial.md, "Figures").

One table ``t (id INT PRIMARY KEY, a INT, b INT)`` of 100,000 rows, 10 a value of ``a``
(10,000 values); for each view (the rows of ``a``, their top 3 by ``b``, their distinct
``(a, b)``), partial and full: 1,000 values of ``a`` read once (misses where partial:
upqueries), then 20 times more (hits); CPU µs a lookup (the first pass; the minimum of
the others) and the views' bytes (``db.memory(bases=False)``). Run it with the tree to
measure on ``PYTHONPATH``:

    cd /tmp && PYTHONPATH=<tree> <venv>/bin/python -m noria_tools.partialtopk
"""
from __future__ import annotations

import random
import time

import noria_py

VIEWS = {
    "rows": "SELECT id, b FROM t WHERE a = ?",
    "topk": "SELECT id, b FROM t WHERE a = ? ORDER BY b DESC, id LIMIT 3",
    "distinct": "SELECT DISTINCT a, b FROM t WHERE a = ?",
}


def one(sql: str, partial: bool) -> tuple[float, float, int]:
    """(first read µs, hit µs, views' bytes) of the view ``sql``."""
    db = noria_py.connect(partial=partial)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute(f"CREATE VIEW v AS {sql}")
    db.table("t").insert([(i, i % 10000, i % 97) for i in range(100000)])
    v = db.view("v")
    v.lookup(0)                     # (a partial view's base index built here)
    keys = random.Random(1).sample(range(1, 10000), 1000)
    start = time.process_time()
    for k in keys:
        v.lookup(k)
    first = (time.process_time() - start) / len(keys) * 1e6
    best = float("inf")
    for _ in range(20):
        start = time.process_time()
        for k in keys:
            v.lookup(k)
        best = min(best, (time.process_time() - start) / len(keys) * 1e6)
    return first, best, sum(db.memory(bases=False).values())


def main() -> None:
    for name, sql in VIEWS.items():
        for partial in (True, False):
            first, hit, views = one(sql, partial)
            mode = "partial" if partial else "full"
            print(f"{name:9} {mode:8} first read {first:7.1f} us  hit {hit:5.2f} us  "
                  f"views {views:>12,} bytes")


if __name__ == "__main__":
    main()
