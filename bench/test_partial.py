"""Partial state on the vote view (issue 20; docs/partial.md): a hit on a held key, a
miss (an upquery to the base for a key never read before), and writes after the reads,
partial against full. A tenth of the articles is read (and checked) first, as in
``noria-py bench partial --read 0.1``. Every benchmark checks the answers it timed
against the votes per article counted in Python.

Run: .venv/bin/python -m pytest bench/test_partial.py --benchmark-only
Sizes: NORIA_BENCH_ARTICLES (default 100000), NORIA_BENCH_VOTES (default 1000000), as
bench/test_vote.py.
"""
from __future__ import annotations

import itertools
import os
import random

import numpy as np
import pytest

from noria_tools import bench, workloads

ARTICLES = int(os.environ.get("NORIA_BENCH_ARTICLES", "100000"))
VOTES = int(os.environ.get("NORIA_BENCH_VOTES", "1000000"))
READ = 0.1              # the share of the articles read before the benchmarks
MISSES = 200            # rounds of the miss benchmark: a key never read before each


def _want(counts: np.ndarray, k: int) -> list[tuple]:
    """The view's answer for article ``k``: no votes is a NULL count (a LEFT JOIN)."""
    c = int(counts[k])
    return [(k, f"article {k}", c if c else None)]


def _loaded(partial: bool):
    """The loaded database, its votes per article (kept up to date by the tests that
    write), and the articles read (each answer checked): in partial mode the keys held."""
    db, _ = bench.vote_db(ARTICLES, VOTES, partial=partial)
    counts = np.bincount(workloads.votes(VOTES, ARTICLES)[:, 0], minlength=ARTICLES)
    read = random.Random(5).sample(range(ARTICLES), max(1, int(ARTICLES * READ)))
    assert db.view(workloads.VIEW_NAME).lookup_many(read) == [_want(counts, k) for k in read]
    kinds = {n["kind"]: n["partial"] for n in db.graph()}
    assert kinds["reader"] is partial       # the mode the test asked for
    return db, counts, read


@pytest.fixture(scope="module")
def partial_db():
    db, counts, read = _loaded(True)
    yield db, counts, read
    db.close()


@pytest.fixture(scope="module")
def full_db():
    db, counts, read = _loaded(False)
    yield db, counts, read
    db.close()


def test_partial_hit(benchmark, partial_db):
    """A lookup of a held key (one of those read): no upquery. The views' bytes must
    not grow (a hit fills nothing), and every key timed is checked."""
    db, counts, read = partial_db
    view = db.view(workloads.VIEW_NAME)
    keys = itertools.cycle(read)
    got: dict[int, list] = {}
    before = sum(db.memory(bases=False).values())

    def lookup():
        k = next(keys)
        got[k] = view.lookup(k)

    benchmark(lookup)
    assert got and all(v == _want(counts, k) for k, v in got.items())
    assert sum(db.memory(bases=False).values()) == before


def test_partial_miss(benchmark, partial_db):
    """A lookup of a key no read has filled: an upquery through the COUNT and the join
    to the base's index. Each round's key is a hole (never read before: ``setup`` hands
    out the next unread article), and each answer is checked after; the views hold
    one more key per round."""
    db, counts, read = partial_db
    view = db.view(workloads.VIEW_NAME)
    held = set(read)
    fresh = iter(k for k in random.Random(6).sample(range(ARTICLES), ARTICLES)
                 if k not in held)
    got: dict[int, list] = {}
    before = sum(db.memory(bases=False).values())

    def setup():
        return (next(fresh),), {}

    def miss(k):
        got[k] = view.lookup(k)

    benchmark.pedantic(miss, setup=setup, rounds=MISSES, iterations=1)
    assert len(got) == MISSES and not held & got.keys()
    assert all(v == _want(counts, k) for k, v in got.items())
    assert sum(db.memory(bases=False).values()) > before     # the misses filled keys
    read.extend(got)                                         # held from now on


@pytest.mark.parametrize("mode", ["full_db", "partial_db"])
def test_writes_after_reads(benchmark, request, mode):
    """One batch of 1,000 votes (uniform over the articles: most to keys a partial view
    does not hold), from insert until visible; then every held key's count checked,
    and, in partial mode, 2,000 keys never read (upqueries over the written base)."""
    db, counts, read = request.getfixturevalue(mode)
    rng = random.Random(1)
    vote = db.table("vote")

    def batch():
        rows = [(rng.randrange(ARTICLES), rng.randrange(1 << 30)) for _ in range(1000)]
        np.add.at(counts, [r[0] for r in rows], 1)
        return (rows,), {}

    def write(rows):
        vote.insert(rows)
        db.wait()

    benchmark.pedantic(write, setup=batch, rounds=50)
    benchmark.extra_info["votes_per_round"] = 1000
    view = db.view(workloads.VIEW_NAME)
    held = set(read)
    keys = sorted(held) if mode == "partial_db" else list(range(ARTICLES))
    if mode == "partial_db":
        keys += random.Random(7).sample([k for k in range(ARTICLES) if k not in held], 2000)
    assert view.lookup_many(keys) == [_want(counts, k) for k in keys]
