"""``noria-py bench partial``: partial readers against full ones (docs/partial.md).

One table ``t (a INT, b INT)`` of ``--rows`` rows over ``--keys`` values of ``a`` and a
parameterized view on ``a`` (``--view rows``: ``SELECT b FROM t WHERE a = ?``, several
rows a key; ``--view count``: ``COUNT(*) ... GROUP BY a``, one; ``--view vote``: the
vote view, ``--keys`` articles LEFT JOIN the votes' counts, ``--rows`` votes). For each mode (full,
partial): the view is created, the rows are written in batches of ``--batch`` (timed:
"load"), ``--read`` of the keys are read once (misses in partial mode: upqueries) and
once more (hits), then ``--more`` further rows are written (timed: "writes after
reads": a partial reader drops the writes to keys it does not hold). Reported per mode:
the views' bytes (``db.memory(bases=False)``, the readers and, for ``count``, the
aggregate), the base's (its upquery index included), the medians of the read
latencies and the write seconds (wall clock; for the writes after reads, CPU seconds of
the process too, steadier on a shared machine), over ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

import numpy as np

from noria_py import connect
from noria_tools import workloads

VIEWS = {
    "rows": "SELECT b FROM t WHERE a = ?",
    "count": "SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a",
}


def _timed_inserts(db, table, chunks: list) -> tuple[float, float]:
    """Seconds to insert ``chunks`` into ``table`` and see them through every view: wall
    clock, and this process's CPU time (steadier on a machine other jobs share)."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for c in chunks:
        table.insert(c)
    db.wait()
    return time.perf_counter() - start, time.process_time() - cpu


def one_run(partial: bool, rows: int, keys: int, read: float, more: int, view: str,
            batch: int, seed: int) -> dict[str, float]:
    db = connect(partial=partial)
    if view == "vote":                  # the vote view: article LEFT JOIN counts, by id
        workloads.setup(db, keys)
        table, name = "vote", workloads.VIEW_NAME
    else:
        db.execute("CREATE TABLE t (a INT, b INT)")
        db.execute(f"CREATE VIEW v AS {VIEWS[view]}")
        table, name = "t", "v"
    rng = np.random.default_rng(seed)
    data = np.stack([rng.integers(0, keys, rows + more), rng.integers(0, 1 << 30, rows + more)],
                    axis=1).astype(np.int64)
    chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, rows, batch)]
    later = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(rows, rows + more, batch)]
    t = db.table(table)
    load, _ = _timed_inserts(db, t, chunks)
    v = db.view(name)
    read_keys = random.Random(seed).sample(range(keys), max(1, int(keys * read)))
    first, second = [], []
    for k in read_keys:
        s = time.perf_counter()
        v.lookup(k)
        first.append(time.perf_counter() - s)
    for k in read_keys:
        s = time.perf_counter()
        v.lookup(k)
        second.append(time.perf_counter() - s)
    writes, writes_cpu = _timed_inserts(db, t, later)
    kinds = {n["id"]: n["kind"] for n in db.graph()}
    mem = db.memory()
    out = {"load_s": load, "writes_s": writes, "writes_cpu_s": writes_cpu,
           "first_read_us": statistics.median(first) * 1e6,
           "second_read_us": statistics.median(second) * 1e6,
           "views_bytes": sum(b for n, b in mem.items() if kinds[n] != "base"),
           "base_bytes": sum(b for n, b in mem.items() if kinds[n] == "base")}
    db.close()
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench partial")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=10_000, help="distinct values of a")
    p.add_argument("--read", type=float, default=0.01, help="share of the keys read")
    p.add_argument("--more", type=int, default=None,
                   help="rows written after the reads (default: a tenth of --rows)")
    p.add_argument("--view", choices=[*sorted(VIEWS), "vote"], default="rows",
                   help="vote: the vote view (article LEFT JOIN vote counts; --keys "
                        "articles, --rows votes)")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    more = a.rows // 10 if a.more is None else a.more
    print(f"rows={a.rows} keys={a.keys} read={a.read:g} more={more} view={a.view} "
          f"batch={a.batch} repeat={a.repeat}")
    cols = ["views_bytes", "base_bytes", "load_s", "writes_s", "writes_cpu_s", "first_read_us",
            "second_read_us"]
    print(f"{'mode':8}" + "".join(f"{c:>16}" for c in cols))
    for partial in (False, True):
        runs = [one_run(partial, a.rows, a.keys, a.read, more, a.view, a.batch, seed)
                for seed in range(a.repeat)]
        med = {c: statistics.median(r[c] for r in runs) for c in cols}
        cells = "".join(f"{med[c]:>16,.0f}" if c.endswith("bytes") else f"{med[c]:>16.4g}"
                        for c in cols)
        print(f"{'partial' if partial else 'full':8}" + cells)
    return 0
