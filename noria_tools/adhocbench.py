"""``noria-py bench adhoc``: what ad-hoc SELECTs cost the writes that follow them.

A table of ``--rows`` rows ``(id, a)``; then ``--queries`` distinct ad-hoc queries, each
``SELECT id, a FROM t WHERE a > i`` (a range: one view, read by a range scan of its
reader's sorted index) or, with ``--shape key``, ``SELECT id FROM t WHERE a = i`` (one
view, read by key); after some of them, the median time of 21 inserts of 100 rows, and
the graph's node count. Before unnamed views were bounded, 200 range queries left 401
nodes and a 100-row insert 30-40× slower; before range parameters, each range query
was a view of its own, 16 kept (docs/benchmarks.md).
Each query's answer is checked against a count of the rows.

``--cluster WORKERS``: the same against a cluster (``noria-py serve`` with that many
workers, started here: ``launch.Cluster``), the queries through its client; an insert's
time there is the insert and the ``wait()`` that sees it in every view (what more
views cost a write happens after the controller's answer), and the queries' seconds are
printed too (each new view is a catalog change at every worker).
"""
from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import noria_py
from noria_py.runtime.cluster.launch import Cluster


def insert_ms(db: Any, table: Any, start: int, rows: int = 100, runs: int = 21,
              wait: bool = False) -> tuple[float, int]:
    """The median ms of ``runs`` inserts of ``rows`` rows (each with ``db.wait()`` if
    ``wait``), and the next free id."""
    times = []
    for _ in range(runs):
        batch = [(start + j, j % 1000) for j in range(rows)]
        start += rows
        t0 = time.perf_counter()
        table.insert(batch)
        if wait:
            db.wait()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3, start


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench adhoc")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--shape", choices=("range", "key"), default="range")
    p.add_argument("--cluster", type=int, default=0, metavar="WORKERS",
                   help="against a cluster of this many workers (0: embedded)")
    args = p.parse_args(argv)
    if not args.cluster:
        return run(noria_py.connect(), args)
    with Cluster(workers=args.cluster) as cluster:
        db = noria_py.connect(cluster.url)
        try:
            return run(db, args)
        finally:
            db.close()


def run(db: Any, args: argparse.Namespace) -> int:
    wait = bool(args.cluster)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    table = db.table("t")
    table.insert([(i, i % 1000) for i in range(args.rows)])
    held = Counter(i % 1000 for i in range(args.rows))       # a -> rows
    nxt = args.rows
    if wait:
        db.wait()
    ms, nxt = insert_ms(db, table, nxt, wait=wait)
    held.update(j % 1000 for j in range(100) for _ in range(21))
    print(f"{'queries':>8} {'insert ms':>10} {'nodes':>6} {'queries s':>10}")
    print(f"{0:>8} {ms:>10.2f} {len(db.graph()):>6} {0:>10.2f}")
    spent = 0.0                 # (the queries' seconds, so far)
    marks = {1, 16, 50, 200, 1000, 5000, args.queries}
    for i in range(1, args.queries + 1):
        c = (i - 1) % 1000
        t0 = time.perf_counter()
        if args.shape == "range":
            got = db.execute(f"SELECT id, a FROM t WHERE a > {c}").fetchall()
            assert len(got) == sum(n for a, n in held.items() if a > c), c
        else:
            got = db.execute(f"SELECT id FROM t WHERE a = {c}").fetchall()
            assert len(got) == held[c], c
        spent += time.perf_counter() - t0
        if i in marks:
            ms, nxt = insert_ms(db, table, nxt, wait=wait)
            held.update(j % 1000 for j in range(100) for _ in range(21))
            print(f"{i:>8} {ms:>10.2f} {len(db.graph()):>6} {spent:>10.2f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(__import__("sys").argv[1:]))
