"""The vote workload (issue 2's targets): propagation, lookups, and DuckDB per read.
Each benchmark checks what it timed against the votes per article counted in Python.

Run: .venv/bin/python -m pytest bench/test_vote.py --benchmark-only
Sizes: NORIA_BENCH_ARTICLES (default 100000), NORIA_BENCH_VOTES (default 1000000).
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

from noria_tools import bench, workloads

ARTICLES = int(os.environ.get("NORIA_BENCH_ARTICLES", "100000"))
VOTES = int(os.environ.get("NORIA_BENCH_VOTES", "1000000"))


@pytest.fixture(scope="module")
def voted():
    """The loaded database and its votes per article (kept up to date by the tests that
    write)."""
    db, _ = bench.vote_db(ARTICLES, VOTES)
    counts = np.bincount(workloads.votes(VOTES, ARTICLES)[:, 0], minlength=ARTICLES)
    yield db, counts
    db.close()


def _want(counts: np.ndarray, k: int) -> list[tuple]:
    """The view's answer for article ``k``: no votes is a NULL count (a LEFT JOIN)."""
    c = int(counts[k])
    return [(k, f"article {k}", c if c else None)]


def test_vote_propagation_batch_of_1000(benchmark, voted):
    """One batch of 1,000 votes, from insert until visible in the view; then every
    article's count checked."""
    db, counts = voted
    rng = random.Random(1)
    vote = db.table("vote")

    def batch():
        rows = [(rng.randrange(ARTICLES), rng.randrange(1 << 30)) for _ in range(1000)]
        np.add.at(counts, [r[0] for r in rows], 1)
        return rows

    def write(rows):
        vote.insert(rows)
        db.wait()

    benchmark.pedantic(write, setup=lambda: ((batch(),), {}), rounds=50)
    benchmark.extra_info["votes_per_round"] = 1000
    keys = list(range(ARTICLES))
    assert db.view(workloads.VIEW_NAME).lookup_many(keys) == [_want(counts, k) for k in keys]


def test_lookup(benchmark, voted):
    db, counts = voted
    view = db.view(workloads.VIEW_NAME)
    keys = iter(random.Random(2).randrange(ARTICLES) for _ in range(10_000_000))

    def lookup():
        k = next(keys)
        return k, view.lookup(k)

    k, got = benchmark(lookup)                 # the last round's
    assert got == _want(counts, k)


def test_lookup_many_1000(benchmark, voted):
    db, counts = voted
    view = db.view(workloads.VIEW_NAME)
    rng = random.Random(3)
    keys = [rng.randrange(ARTICLES) for _ in range(1000)]
    assert benchmark(view.lookup_many, keys) == [_want(counts, k) for k in keys]


def test_duckdb_read(benchmark, voted):
    import duckdb
    db, counts = voted
    rows = db.execute("SELECT article_id, user_id FROM vote").fetchall()
    con = duckdb.connect()
    con.execute("CREATE TABLE vote (article_id BIGINT, user_id BIGINT)")
    con.execute("CREATE TABLE article (id BIGINT, title TEXT)")
    import pyarrow as pa
    con.register("v", pa.table({"article_id": [r[0] for r in rows], "user_id": [r[1] for r in rows]}))
    con.register("a", pa.table({"id": list(range(ARTICLES)),
                                "title": [f"article {i}" for i in range(ARTICLES)]}))
    con.execute("INSERT INTO vote SELECT * FROM v")
    con.execute("INSERT INTO article SELECT * FROM a")
    rng = random.Random(4)

    def read():
        k = rng.randrange(ARTICLES)
        return k, con.execute(workloads.READ_SQL, [k]).fetchall()

    k, got = benchmark(read)                   # the last round's
    assert got == _want(counts, k)
