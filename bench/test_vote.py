"""The vote workload (issue 2's targets): propagation, lookups, and DuckDB per read.

Run: .venv/bin/python -m pytest bench/test_vote.py --benchmark-only
Sizes: NORIA_BENCH_ARTICLES (default 100000), NORIA_BENCH_VOTES (default 1000000).
"""
from __future__ import annotations

import os
import random

import pytest

from noria_tools import bench, workloads

ARTICLES = int(os.environ.get("NORIA_BENCH_ARTICLES", "100000"))
VOTES = int(os.environ.get("NORIA_BENCH_VOTES", "1000000"))


@pytest.fixture(scope="module")
def voted():
    db, _ = bench.vote_db(ARTICLES, VOTES)
    yield db
    db.close()


def test_vote_propagation_batch_of_1000(benchmark, voted):
    """One batch of 1,000 votes, from insert until visible in the view."""
    rng = random.Random(1)
    vote = voted.table("vote")

    def batch():
        return [(rng.randrange(ARTICLES), rng.randrange(1 << 30)) for _ in range(1000)]

    def write(rows):
        vote.insert(rows)
        voted.wait()

    benchmark.pedantic(write, setup=lambda: ((batch(),), {}), rounds=50)
    benchmark.extra_info["votes_per_round"] = 1000


def test_lookup(benchmark, voted):
    view = voted.view(workloads.VIEW_NAME)
    keys = iter(random.Random(2).randrange(ARTICLES) for _ in range(10_000_000))
    benchmark(lambda: view.lookup(next(keys)))


def test_lookup_many_1000(benchmark, voted):
    view = voted.view(workloads.VIEW_NAME)
    keys = [random.Random(3).randrange(ARTICLES) for _ in range(1000)]
    benchmark(view.lookup_many, keys)


def test_duckdb_read(benchmark, voted):
    import duckdb
    rows = voted.execute("SELECT article_id, user_id FROM vote").fetchall()
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
    benchmark(lambda: con.execute(workloads.READ_SQL, [rng.randrange(ARTICLES)]).fetchall())
