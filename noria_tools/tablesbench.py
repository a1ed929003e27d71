"""What reading a table costs in a cluster (docs/architecture.md, "Writes at the base's
worker", step 5: with ``--writes worker`` a table's rows are read at its base's
worker).

``noria-py bench tables [--rows N] [--reps R] [--embedded]``: a cluster (two workers,
two shards, the server's default write path; ``--embedded``: the embedded engine
instead) with two tables of ``N`` rows each, ``vote`` (no
primary key: kept as its write batches, in columns) and ``article`` (a primary key:
kept as rows); then, each ``R`` times, medians printed as one JSON object (seconds):
``len`` (of ``vote``, 200 times), ``create_view`` (a new view over ``vote`` whose
filter is new each time, so its fill reads the table), ``select_count`` (an ad-hoc
``SELECT COUNT(*)`` likewise), ``delete_where`` and ``delete_where_pk`` (a DELETE
whose WHERE matches no row of ``vote``, of ``article``: the whole table read and
tested), ``primary_keys`` (of ``article``), with the 1-minute load average at the end. The script uses the public API
only, so the code before a change can be timed with it too (this file run with that
code first on ``PYTHONPATH``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import noria_py
from noria_py.runtime.cluster.launch import Cluster


def _median(f: Callable[[int], object], n: int) -> float:
    took = []
    for i in range(n):
        t0 = time.perf_counter()
        f(i)
        took.append(time.perf_counter() - t0)
    return statistics.median(took)


def run(rows: int, reps: int, embedded: bool = False) -> dict[str, object]:
    # (a generous heartbeat timeout: a worker busy with a million-row frame under
    # load is not lost)
    with contextlib.nullcontext() if embedded else Cluster(
            workers=2, shards=2, extra=("--heartbeat-timeout", "30")) as c:
        db = noria_py.connect() if c is None else noria_py.connect(c.url)
        db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
        db.execute("CREATE TABLE article (id INT PRIMARY KEY, n INT)")
        vote, article = db.table("vote"), db.table("article")
        step = 100_000
        for lo in range(0, rows, step):
            ids = np.arange(lo, min(rows, lo + step), dtype=np.int64)
            vote.insert_columns([ids % 1000, ids])
            article.insert_columns([ids, ids % 7])
        db.wait()
        assert len(vote) == rows and len(article) == rows
        out: dict[str, object] = {"rows": rows}
        if c is not None:
            out["writes"] = db.writes
        out["len"] = _median(lambda i: len(vote), 200)

        def view(i: int) -> None:
            db.execute(f"CREATE VIEW v{i} AS SELECT article_id, COUNT(*) AS c FROM vote "
                       f"WHERE article_id = ? AND user_id <> {-1 - i} GROUP BY article_id")
        out["create_view"] = _median(view, reps)

        def count(i: int) -> None:
            got = db.execute(f"SELECT COUNT(*) FROM vote WHERE user_id <> {-1 - i}").fetchall()
            assert got == [(rows,)], got
        out["select_count"] = _median(count, reps)
        out["delete_where"] = _median(
            lambda i: db.execute(f"DELETE FROM vote WHERE user_id = {-1 - i}"), reps)
        out["delete_where_pk"] = _median(
            lambda i: db.execute(f"DELETE FROM article WHERE n = {-1 - i}"), reps)
        out["primary_keys"] = _median(lambda i: article.primary_keys(), reps)
        out["load"] = round(os.getloadavg()[0], 2)
        db.close()
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench tables", description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--embedded", action="store_true",
                   help="the embedded engine (noria_py.connect()) instead of a cluster")
    args = p.parse_args(argv)
    print(json.dumps(run(args.rows, args.reps, args.embedded)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
