"""``noria-py bench adhoc``: what ad-hoc SELECTs cost the writes that follow them.

A table of ``--rows`` rows ``(id, a)``; then ``--queries`` distinct ad-hoc queries, each
``SELECT id, a FROM t WHERE a > i`` (a range: one view, read by a range scan of its
reader's sorted index) or, with ``--shape key``, ``SELECT id FROM t WHERE a = i`` (one
view, read by key); after some of them, the median time of 21 inserts of 100 rows, and
the graph's node count. Before unnamed views were bounded, 200 range queries left 401
nodes and a 100-row insert 30-40× slower; before range parameters, each range query
was a view of its own, 16 kept (docs/benchmarks.md).
Each query's answer is checked against a count of the rows.
"""
from __future__ import annotations

import argparse
import time
from collections import Counter

import noria_py


def insert_ms(table: noria_py.Table, start: int, rows: int = 100, runs: int = 21) -> tuple[float, int]:
    times = []
    for _ in range(runs):
        batch = [(start + j, j % 1000) for j in range(rows)]
        start += rows
        t0 = time.perf_counter()
        table.insert(batch)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3, start


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench adhoc")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--shape", choices=("range", "key"), default="range")
    args = p.parse_args(argv)
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    table = db.table("t")
    table.insert([(i, i % 1000) for i in range(args.rows)])
    held = Counter(i % 1000 for i in range(args.rows))       # a -> rows
    nxt = args.rows
    ms, nxt = insert_ms(table, nxt)
    held.update(j % 1000 for j in range(100) for _ in range(21))
    print(f"{'queries':>8} {'insert ms':>10} {'nodes':>6}")
    print(f"{0:>8} {ms:>10.2f} {len(db.graph()):>6}")
    marks = {1, 16, 50, 200, 1000, 5000, args.queries}
    for i in range(1, args.queries + 1):
        c = (i - 1) % 1000
        if args.shape == "range":
            got = db.execute(f"SELECT id, a FROM t WHERE a > {c}").fetchall()
            assert len(got) == sum(n for a, n in held.items() if a > c), c
        else:
            got = db.execute(f"SELECT id FROM t WHERE a = {c}").fetchall()
            assert len(got) == held[c], c
        if i in marks:
            ms, nxt = insert_ms(table, nxt)
            held.update(j % 1000 for j in range(100) for _ in range(21))
            print(f"{i:>8} {ms:>10.2f} {len(db.graph()):>6}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(__import__("sys").argv[1:]))
