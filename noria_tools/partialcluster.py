"""Misses and hits of a partial view in a cluster (``noria-py serve --partial``)
against a full one (docs/partial.md, "In a cluster").

A real cluster on loopback (``launch.Cluster``: the controller and its workers are
processes of their own), two workers, two shards: the vote view (``article LEFT JOIN``
the votes counted per article, ``WHERE article.id = ?``), or with ``--view count`` the
votes counted per article alone, or with ``--view topk`` an article's three highest
voter ids (a TopK partitioned by the article), over ``--articles`` articles and
``--votes`` votes. A tenth of the articles are read once at the workers
(``RemoteView.lookup``, as a client reads; a miss where partial: the worker answers a
hole, the controller upqueries, the join's worker sends the fill to the reader's
worker), then read again (hits); the p50 and p90 of each, wall-clock ms a read. Run
it with the tree to measure on ``PYTHONPATH``:

    PYTHONPATH=<tree> <venv>/bin/python -m noria_tools.partialcluster [--articles N]
        [--view vote|count|topk] [--memory-limit BYTES] [--writes controller|worker]

After the reads it prints the views' bytes (``db.memory(bases=False)``, every node
shard of every worker) and the tables' (the controller's); with ``--memory-limit``,
the partial run serves under that limit, shared by the workers.

``--misses`` (also ``noria-py bench partial-cluster --misses``) measures misses alone,
on the partial cluster only: every key read once, so every read is an upquery;
``--reads`` keys by ``lookup`` (misses/s and the p50, p99 and mean, wall-clock ms), then as many
other keys by ``lookup_many`` in calls of ``--many`` keys (misses/s, and the p50 of
a call divided by its keys).
"""
from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

import noria_py
from noria_py.runtime.cluster.launch import Cluster

#: ``--view``: the vote view, the votes counted per article alone (whose COUNT a
#: cluster holds partial with its reader), or an article's three highest voter ids
#: (whose TopK a cluster holds partial with its reader)
VIEWS = {
    "vote": ("SELECT article.id, article.title, vc.votes FROM article LEFT JOIN "
             "(SELECT article_id, COUNT(*) AS votes FROM vote GROUP BY article_id) AS vc "
             "ON article.id = vc.article_id WHERE article.id = ?"),
    "count": "SELECT article_id, COUNT(*) AS votes FROM vote WHERE article_id = ? "
             "GROUP BY article_id",
    "topk": "SELECT article_id, user_id FROM vote WHERE article_id = ? "
            "ORDER BY user_id DESC LIMIT 3",
}


def _reads(v, keys: list[int]) -> list[float]:
    out = []
    for k in keys:
        start = time.perf_counter()
        v.lookup(k)
        out.append((time.perf_counter() - start) * 1e3)
    return out


def _load(db, articles: int, votes: int, view: str, rng: random.Random) -> None:
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute(f"CREATE VIEW vv AS {VIEWS[view]}")
    db.table("article").insert([(i, f"title {i}") for i in range(articles)])
    for start in range(0, votes, 10000):
        db.table("vote").insert([(rng.randrange(articles), u)
                                 for u in range(start, min(votes, start + 10000))])
    db.wait()


def _extra(partial: bool, limit: int | None, writes: str | None) -> tuple[str, ...]:
    extra: tuple[str, ...] = ("--partial",) if partial else ()
    if partial and limit is not None:
        extra += ("--memory-limit", str(limit))
    if writes is not None:
        extra += ("--writes", writes)
    return extra


@contextlib.contextmanager
def _served(extra: tuple[str, ...], channels: str, articles: int, votes: int, view: str,
            rng: random.Random) -> Iterator[Any]:
    """A cluster served with ``extra``, loaded (``_load``), its view's placement asked
    and its base's index built (one read of a key not written): its client."""
    with Cluster(workers=2, shards=2, extra=extra, channels=channels) as cluster:
        db = noria_py.connect(cluster.url)
        _load(db, articles, votes, view, rng)
        db.view("vv").lookup(articles)
        yield db
        db.close()


def misses(articles: int, votes: int, channels: str, view: str = "vote",
           writes: str | None = None, reads: int = 1000, many: int = 100
           ) -> dict[str, float]:
    """A partial cluster's misses alone (``--misses``): ``reads`` keys never read
    before by ``lookup``, then ``reads`` others by ``lookup_many`` in calls of
    ``many``; misses/s and the p50 (ms a key) of each, and the p99 and mean of a
    ``lookup``'s."""
    rng = random.Random(1)
    with _served(_extra(True, None, writes), channels, articles, votes, view, rng) as db:
        v = db.view("vv")
        keys = rng.sample(range(articles), min(articles, 2 * reads))
        one, batched = keys[:reads], keys[reads:]
        t0 = time.perf_counter()
        lat = _reads(v, one)
        t1 = time.perf_counter()
        calls = []
        for i in range(0, len(batched), many):
            part = batched[i:i + many]
            start = time.perf_counter()
            v.lookup_many(part)
            calls.append((time.perf_counter() - start) * 1e3 / len(part))
        t2 = time.perf_counter()
    tail = sorted(lat)
    return {"lookup_rate": len(one) / (t1 - t0), "lookup_p50": statistics.median(lat),
            "lookup_p99": tail[int(0.99 * (len(tail) - 1))], "lookup_mean": statistics.fmean(lat),
            "many_rate": len(batched) / (t2 - t1), "many_p50": statistics.median(calls)}


def one(partial: bool, articles: int, votes: int, channels: str,
        limit: int | None = None, view: str = "vote", writes: str | None = None
        ) -> tuple[list[float], list[float], int, int]:
    """(first reads' ms, second reads' ms) of a tenth of the articles, then the views'
    and the tables' bytes (``memory()``)."""
    rng = random.Random(1)
    with _served(_extra(partial, limit, writes), channels, articles, votes, view,
                 rng) as db:
        v = db.view("vv")
        keys = rng.sample(range(articles), articles // 10)
        first = _reads(v, keys)
        second = _reads(v, keys)
        views = sum(db.memory(bases=False).values())
        tables = sum(db.memory().values()) - views
    return first, second, views, tables


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m noria_tools.partialcluster")
    ap.add_argument("--articles", type=int, default=10000)
    ap.add_argument("--votes", type=int, default=100000)
    ap.add_argument("--channels", default="direct", choices=["direct", "relay"])
    ap.add_argument("--view", default="vote", choices=sorted(VIEWS))
    ap.add_argument("--memory-limit", dest="memory_limit", type=int, default=None,
                    help="serve the partial run with this --memory-limit (bytes)")
    ap.add_argument("--writes", default=None, choices=["auto", "controller", "worker"],
                    help="serve --writes (default: the server's)")
    ap.add_argument("--misses", action="store_true",
                    help="misses alone: every key read once, by lookup then lookup_many")
    ap.add_argument("--reads", type=int, default=1000,
                    help="--misses: keys read by lookup, and as many by lookup_many")
    ap.add_argument("--many", type=int, default=100,
                    help="--misses: keys per lookup_many call")
    args = ap.parse_args(argv)
    if args.misses:
        r = misses(args.articles, args.votes, args.channels, args.view, args.writes,
                   args.reads, args.many)
        print(f"misses ({args.view}, --writes {args.writes or 'default'}): lookup "
              f"{r['lookup_rate']:,.0f} keys/s, p50 {r['lookup_p50']:.3f} ms, p99 "
              f"{r['lookup_p99']:.3f} ms, mean {r['lookup_mean']:.3f} ms; lookup_many "
              f"of {args.many} {r['many_rate']:,.0f} keys/s, p50 {r['many_p50']:.3f} ms a key",
              flush=True)
        return
    for partial in (True, False):
        first, second, views, tables = one(partial, args.articles, args.votes,
                                           args.channels, args.memory_limit, args.view,
                                           args.writes)
        mode = "partial" if partial else "full"
        print(f"{mode:8} views {views:,} bytes, tables {tables:,} bytes")
        for name, xs in (("first read", first), ("second read", second)):
            q = statistics.quantiles(xs, n=10)
            print(f"{mode:8} {name:12} p50 {statistics.median(xs):6.3f} ms  "
                  f"p90 {q[8]:6.3f} ms  ({len(xs)} reads)")


if __name__ == "__main__":
    main()
