"""``noria-py bench adhoc``: what ad-hoc SELECTs cost the writes that follow them.

A table of ``--rows`` rows ``(id, a)``; then ``--queries`` distinct ad-hoc queries, each
``SELECT id, a FROM t WHERE a > i`` (a range: one view, read by a range scan of its
reader's sorted index) or, with ``--shape key``, ``SELECT id FROM t WHERE a = i`` (one
view, read by key); after some of them ("marks"), ``--runs`` inserts of 100 rows timed,
and the graph's node count. Before unnamed views were bounded, 200 range queries left
401 nodes and a 100-row insert 30-40× slower; before range parameters, each range query
was a view of its own, 16 kept (docs/benchmarks.md).
Each query's answer is checked against a count of the rows.

Issue 20's goal is the insert cost after 1,000 queries at most 1.2× the cost after the
first. Marks minutes apart on a shared machine drift by more than that, so (embedded)
a reference database in the same process holds the same table and only the first
query's view, and at each mark the same batches are inserted into both in turns
(``paired_insert_ms``, which goes first alternating): the ratio of the two, taken turn
by turn, is what the queries cost the writes, the machine's drift cancelled. Printed:
each mark's medians, that ratio, and at the end each mark's ratio over the first
query's mark's, beside the plain medians' ratio (what the marks apart give). Both
databases get the same rows, so the tables grow alike.

``--cluster WORKERS``: the same against a cluster (``noria-py serve`` with that many
workers, started here: ``launch.Cluster``), the queries through its client, with no
reference database; an insert's time there is the insert and the ``wait()`` that sees
it in every view (what more views cost a write happens after the controller's answer),
and the queries' seconds are printed too (each new view is a catalog change at every
worker).
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter
from typing import Any

import noria_py
from noria_py.runtime.cluster.launch import Cluster


def paired_insert_ms(pairs: list[tuple[Any, Any]], start: int, rows: int = 100,
                     runs: int = 41, wait: bool = False) -> tuple[list[float], float, int]:
    """``runs`` turns, each inserting the same ``rows`` rows into every ``(db, table)`` of
    ``pairs`` (the first going first in even turns, last in odd ones; each insert with
    ``db.wait()`` if ``wait``): the median ms of each table's inserts, the median over
    the turns of the first's time over the second's (nan with one table), and the next
    free id."""
    times: list[list[float]] = [[] for _ in pairs]
    for turn in range(runs):
        batch = [(start + j, j % 1000) for j in range(rows)]
        start += rows
        order = list(enumerate(pairs))
        for i, (db, table) in order if turn % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            table.insert(batch)
            if wait:
                db.wait()
            times[i].append(time.perf_counter() - t0)
    ratio = (statistics.median(a / b for a, b in zip(times[0], times[1]))
             if len(pairs) > 1 else math.nan)
    return [statistics.median(t) * 1e3 for t in times], ratio, start


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench adhoc")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--shape", choices=("range", "key"), default="range")
    p.add_argument("--runs", type=int, default=41,
                   help="inserts of 100 rows timed at each mark (each database)")
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


def _query(db: Any, shape: str, c: int, held: Counter) -> None:
    """The ad-hoc query of ``shape`` for constant ``c``, its answer checked against
    ``held`` (a -> rows)."""
    if shape == "range":
        got = db.execute(f"SELECT id, a FROM t WHERE a > {c}").fetchall()
        assert len(got) == sum(n for a, n in held.items() if a > c), c
    else:
        got = db.execute(f"SELECT id FROM t WHERE a = {c}").fetchall()
        assert len(got) == held[c], c


def _table(db: Any, rows: int) -> Any:
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    table = db.table("t")
    table.insert([(i, i % 1000) for i in range(rows)])
    return table


def run(db: Any, args: argparse.Namespace) -> int:
    wait = bool(args.cluster)
    pairs = [(db, _table(db, args.rows))]
    held = Counter(i % 1000 for i in range(args.rows))       # a -> rows
    if not wait:            # the reference: the same table and the first query's view
        ref = noria_py.connect()
        pairs.append((ref, _table(ref, args.rows)))
        _query(ref, args.shape, 0, held)
    nxt = args.rows
    if wait:
        db.wait()

    def mark() -> tuple[list[float], float]:
        nonlocal nxt
        ms, ratio, nxt = paired_insert_ms(pairs, nxt, runs=args.runs, wait=wait)
        held.update(j % 1000 for j in range(100) for _ in range(args.runs))
        return ms, ratio

    print(f"{'queries':>8} {'insert ms':>10} {'ref ms':>8} {'over ref':>9} {'nodes':>6} "
          f"{'queries s':>10}")

    def line(i: int, ms: list[float], ratio: float, spent: float) -> None:
        ref_ms, over = ((f"{ms[1]:>8.3f}", f"{ratio:>9.3f}") if len(ms) > 1
                        else (f"{'-':>8}", f"{'-':>9}"))
        print(f"{i:>8} {ms[0]:>10.3f} {ref_ms} {over} {len(db.graph()):>6} "
              f"{spent:>10.2f}", flush=True)

    ms, ratio = mark()
    line(0, ms, ratio, 0.0)
    spent = 0.0                 # (the queries' seconds, so far)
    marks = sorted({1, 16, 50, 200, 1000, 5000, args.queries} & set(range(1, args.queries + 1)))
    seen: dict[int, tuple[list[float], float]] = {}
    for i in range(1, args.queries + 1):
        t0 = time.perf_counter()
        _query(db, args.shape, (i - 1) % 1000, held)
        spent += time.perf_counter() - t0
        if i in marks:
            seen[i] = mark()
            line(i, *seen[i], spent)
    if 1 in seen and not wait:
        (first, r1) = seen[1]
        print("after each mark over after the first query: "
              + ", ".join(f"{i}: {seen[i][1] / r1:.3f} (plain medians {seen[i][0][0] / first[0]:.3f})"
                          for i in marks[1:]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(__import__("sys").argv[1:]))
