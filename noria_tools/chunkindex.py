"""The base's upquery index alone (``ChunkIndex``, docs/partial.md "The indexes
upqueries read"): its bytes and a miss's µs on an insert-only table of votes.

A base ``votes (aid INT, uid INT)`` of ``--rows`` votes for ``--keys`` articles, written
in columnar batches of 1,000 (as the vote bench loads them); the first lookup builds
the index (its seconds), then 1,000 random keys are looked up (median µs); then
``--tail`` more votes are written (batches after the index, scanned by each lookup
until the next rebuild) and 1,000 keys are looked up again. The index's bytes are
``memory.deep_size`` of it, as ``db.memory`` counts them. Run it with the tree to
measure on ``PYTHONPATH``:

    cd /tmp && PYTHONPATH=<tree> <venv>/bin/python <tree>/noria_tools/chunkindex.py \\
        --rows 10000000 --keys 1000000 --tail 600000
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from noria_py.batch import Batch
from noria_py.memory import deep_size
from noria_py.ops import Base
from sql_frontend.types import ColumnInfo, SqlType, TableSchema


def _lookups(base: Base, keys: list[int]) -> float:
    """Median µs of ``base.index_rows`` on ``aid`` for each of ``keys``."""
    ts = []
    for k in keys:
        start = time.perf_counter()
        base.index_rows((0,), (k,))
        ts.append(time.perf_counter() - start)
    return float(np.median(ts)) * 1e6


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--tail", type=int, default=60_000)
    args = p.parse_args(argv)
    base = Base(TableSchema("votes", (ColumnInfo("aid", SqlType.INT),
                                      ColumnInfo("uid", SqlType.INT))))
    rng = np.random.default_rng(1)
    ones = np.ones(1000, dtype=np.int64)

    def write(n: int) -> None:
        for _ in range(n // 1000):
            base.process(0, Batch.columnar([rng.integers(0, args.keys, 1000),
                                            rng.integers(0, 1 << 30, 1000)], ones))

    write(args.rows)
    start = time.perf_counter()
    base.index_rows((0,), (0,))
    build = time.perf_counter() - start
    size = deep_size(base.chunk_indexes)
    miss = _lookups(base, rng.integers(0, args.keys, 1000).tolist())
    write(args.tail)
    tail = _lookups(base, rng.integers(0, args.keys, 1000).tolist())
    print(f"rows={args.rows} keys={args.keys}: build {build:.2f} s, index "
          f"{size / 1e6:.1f} MB ({size / args.rows:.2f} bytes a row), lookup "
          f"{miss:.0f} µs; after {args.tail} more rows {tail:.0f} µs")


if __name__ == "__main__":
    main()
