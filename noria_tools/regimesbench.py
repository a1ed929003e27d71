"""``noria-py bench regimes`` (issue 19): the fault-tolerance regimes side by side, on one
engine, one workload and one machine.

Per regime (``connect(regime=...)``), one database of the vote workload from the Noria
paper (``workloads.SCHEMA``, ``ArticleWithVoteCount``, ``--shards`` shards, no seed:
each insert propagates fully before it returns):

- **steady**: the votes streamed in ``--batch``-vote inserts. Throughput is votes over
  the seconds of all the inserts (each one runs to quiescence here, so that is the
  maximum rate, not a rate at 80% load; also per CPU second of the process, which
  other jobs on the machine move less); p50 and p99 propagation are per insert, from
  the call to every view updated. Every regime is first warmed up on a small database
  (the tree clocks' compiled kernels, the allocator), so the first one is not charged
  for it. Checkpoint bytes: what the regime's checkpoint store
  holds at the end (``noria_py.memory.deep_size``; lineage keeps none).
- **single**: 1,000 votes, one stateful shard (the COUNT's shard 0) fails, ``--down``
  votes are written while it is down, then ``db.recover()`` + ``db.wait()`` is timed:
  the time until every view is right. Then every article of the view is checked
  against counts kept in Python (not timed); a mismatch stops the run. ``--rounds``
  times (3), the median shown.
- **concurrent**: two stateful shards at once (the COUNT's shard 0 and the join's
  shard 1), the same way.

For each failure: the nodes restarted or set back (the failed ones, what lineage
purged, what a coordinated rollback set back), and the messages the recovery resent
(payload logs, or the bases' write histories). The failure scenarios run one after
another on the steady scenario's database (its votes are the state recovery has to
deal with). The steady scenario runs ``--steady-rounds`` turns (3),
the regimes in turns, each turn's first regime rotated, and the medians are shown: this
machine's speed drifts by tens of percent over seconds (docs/benchmarks.md), which a
single pass per regime, one after another, charges to whichever ran in a slow spell.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from noria_py import connect
from noria_py.memory import deep_size
from noria_py.regimes import BUILT
from noria_py.runtime.uncoordinated import INDEX_BYTES, UncoordinatedRuntime
from noria_tools import workloads
from noria_tools.recoverybench import VoteBed, check, write_votes

SCENARIOS = ("steady", "single", "concurrent")


@dataclass
class Result:
    regime: str
    votes_per_s: float = 0.0
    votes_per_cpu_s: float = 0.0     # votes per CPU second of this process
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    checkpoint_bytes: int = 0
    #: scenario -> (seconds until the views are right, nodes set back, messages resent)
    failures: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    #: the uncoordinated and cic regimes' own counts at the end of the steady run
    #: (``protocol_figures``), None for the others
    protocol: dict[str, float] | None = None


def _connect(regime: str, shards: int, barrier_every: int | None):
    if regime == "coordinated":
        return connect(shards=shards, regime=regime, barrier_every=barrier_every)
    return connect(shards=shards, regime=regime)


def checkpoint_bytes(db) -> int:
    """Bytes the regime's checkpoint store holds (0 without one)."""
    rt = db.runtime
    store = (getattr(rt, "epochs", None) or getattr(rt, "ckpts", None)
             or getattr(rt, "store", None))
    return 0 if store is None else deep_size(store)


def protocol_figures(db) -> dict[str, float] | None:
    """The uncoordinated and cic regimes' counts (runtime/uncoordinated.py): checkpoints
    taken and forced, messages sent and the bytes piggybacked on each (cic: the
    sender's index), messages the channel logs hold; None in another regime."""
    rt = db.runtime
    if not isinstance(rt, UncoordinatedRuntime):
        return None
    indexed = getattr(rt, "piggybacked", 0)
    return {"checkpoints": rt.taken, "forced": rt.forced, "messages": rt.logged,
            "bytes_per_message": INDEX_BYTES if indexed else 0,
            "logged_held": sum(len(q) for q in rt.logs.values())}


def steady(regime: str, articles: int, votes: int, batch: int, shards: int,
           barrier_every: int | None) -> tuple[VoteBed, Result]:
    db = _connect(regime, shards, barrier_every)
    workloads.setup(db, articles)
    data = workloads.votes(votes, articles)
    chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, votes, batch)]
    vote = db.table("vote")
    lat = []
    gc.collect()
    cpu = time.process_time()
    for c in chunks:
        t0 = time.perf_counter()
        vote.insert(c)
        lat.append(time.perf_counter() - t0)
    db.wait()
    cpu = time.process_time() - cpu
    res = Result(regime, votes / sum(lat), votes / cpu, float(np.percentile(lat, 50)) * 1e3,
                 float(np.percentile(lat, 99)) * 1e3, checkpoint_bytes(db),
                 protocol=protocol_figures(db))
    bed = VoteBed(db, articles, None, np.bincount(data[:, 0], minlength=articles), [data])
    return bed, res


def stateful_shards(db, scenario: str) -> list[str]:
    """The shards a scenario fails: the COUNT's shard 0, and for ``concurrent`` also the
    join's shard 1 (shard 0 with one shard)."""
    graph = db.graph()

    def shard(kind: str, i: int) -> str:
        found = [n for n in graph if n["kind"] == kind]
        return next((n["id"] for n in found if n["shard"] == i), found[0]["id"])
    nodes = [shard("aggregate", 0)]
    if scenario == "concurrent":
        nodes.append(shard("join", 1))
    return nodes


def failure(bed: VoteBed, scenario: str, down: int) -> tuple[float, int, int]:
    """Fail the scenario's shards, write ``down`` votes, recover; (seconds until every
    view is right, nodes set back, messages resent). The views are checked after."""
    db = bed.db
    nodes = stateful_shards(db, scenario)
    write_votes(bed, 1000, 100)
    for n in nodes:
        db.fail(n)
    write_votes(bed, down, 100)
    gc.collect()
    t0 = time.perf_counter()
    reports = db.recover()
    db.wait()
    seconds = time.perf_counter() - t0
    check(bed, sample=None)
    touched = set(nodes)
    for r in reports:
        touched.update(r.purged)
        touched.update(r.rolled_back)
    return seconds, len(touched), sum(r.replayed_messages for r in reports)


def run(regimes: list[str], scenarios: list[str], articles: int, votes: int, batch: int,
        shards: int, down: int, barrier_every: int | None, rounds: int = 3,
        steady_rounds: int = 1) -> list[Result]:
    """The steady scenario ``steady_rounds`` times, the regimes in turns (the first one
    of each turn rotated), medians shown; after the last turn of each regime, on its
    database, each failure scenario ``rounds`` times (the median of its seconds; its
    nodes and messages from the median round)."""
    for regime in regimes:       # warmed up first (kernels compiled, caches filled)
        warm, _ = steady(regime, 1000, 20 * batch, batch, shards, barrier_every)
        warm.db.close()
    turns: dict[str, list[Result]] = {r: [] for r in regimes}
    for turn in range(steady_rounds):
        order = regimes[turn % len(regimes):] + regimes[:turn % len(regimes)]
        for regime in order:
            bed, res = steady(regime, articles, votes, batch, shards, barrier_every)
            turns[regime].append(res)
            if turn == steady_rounds - 1:
                for s in scenarios:
                    if s != "steady":
                        runs = sorted(failure(bed, s, down) for _ in range(rounds))
                        res.failures[s] = runs[len(runs) // 2]
            bed.db.close()
            del bed
            gc.collect()
            print(f"  {regime} done (load {os.getloadavg()[0]:.1f})", flush=True)
    out = []
    for regime in regimes:
        done = turns[regime]
        last = done[-1]
        last.votes_per_s = statistics.median(r.votes_per_s for r in done)
        last.votes_per_cpu_s = statistics.median(r.votes_per_cpu_s for r in done)
        last.p50_ms = statistics.median(r.p50_ms for r in done)
        last.p99_ms = statistics.median(r.p99_ms for r in done)
        out.append(last)
    return out


def table(results: list[Result], scenarios: list[str]) -> list[str]:
    """The Markdown table of ``results``."""
    head = "| regime |"
    rule = "| --- |"
    if "steady" in scenarios:
        head += " votes/s (per CPU s) | p50 / p99 propagation | checkpoint bytes |"
        rule += " ---: | ---: | ---: |"
    fails = [s for s in scenarios if s != "steady"]
    for s in fails:
        head += f" {s}: views right after | nodes set back | messages resent |"
        rule += " ---: | ---: | ---: |"
    lines = [head, rule]
    for r in results:
        row = f"| {r.regime} |"
        if "steady" in scenarios:
            row += (f" {r.votes_per_s:,.0f} ({r.votes_per_cpu_s:,.0f}) |"
                    f" {r.p50_ms:.2f} / {r.p99_ms:.2f} ms |"
                    f" {r.checkpoint_bytes / 1e6:.1f} MB |")
        for s in fails:
            sec, nodes, msgs = r.failures[s]
            row += f" {sec:.3f} s | {nodes} | {msgs:,} |"
        lines.append(row)
    proto = [r for r in results if r.protocol is not None]
    if proto and "steady" in scenarios:
        lines += ["", "| regime | checkpoints (forced) | messages | bytes piggybacked per "
                  "message | messages the logs hold |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in proto:
            f = cast(dict, r.protocol)
            lines.append(f"| {r.regime} | {f['checkpoints']:,} ({f['forced']:,}) | "
                         f"{f['messages']:,} | {f['bytes_per_message']} | {f['logged_held']:,} |")
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench regimes", description=__doc__.partition("\n\n")[0])
    p.add_argument("--regimes", default=",".join(BUILT),
                   help=f"a comma list of {', '.join(BUILT)} (default: all built)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"a comma list of {', '.join(SCENARIOS)}")
    p.add_argument("--quick", action="store_true",
                   help="10,000 articles, 100,000 votes, barriers every 16 writes (under 3 "
                        "minutes); without: 100,000 articles, 1,000,000 votes, barriers every 128")
    p.add_argument("--articles", type=int, default=None)
    p.add_argument("--votes", type=int, default=None)
    p.add_argument("--batch", type=int, default=1000, help="votes per insert")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--down", type=int, default=1000, help="votes written while nodes are down")
    p.add_argument("--rounds", type=int, default=3, help="failures per scenario (the median)")
    p.add_argument("--steady-rounds", type=int, default=None,
                   help="turns of the steady scenario, the regimes in turns (the median; "
                        "default 3)")
    p.add_argument("--barrier-every", type=int, default=None,
                   help="writes between the coordinated regime's epochs")
    a = p.parse_args(argv)
    regimes = a.regimes.split(",") if a.regimes != "all" else list(BUILT)
    scenarios = a.scenarios.split(",")
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        p.error(f"unknown scenario(s) {bad}; choose from {', '.join(SCENARIOS)} "
                "(frequent is not built yet)")
    articles = a.articles or (10_000 if a.quick else 100_000)
    votes = a.votes or (100_000 if a.quick else 1_000_000)
    every = a.barrier_every or (16 if a.quick else 128)
    steady_rounds = a.steady_rounds or 3
    print(f"bench regimes: vote workload, {articles:,} articles, {votes:,} votes in "
          f"inserts of {a.batch:,}, {a.shards} shards; coordinated barriers every {every} "
          f"writes; steady: median of {steady_rounds} turn(s), the regimes in turns; "
          f"{a.down:,} votes written while nodes are down, median of {a.rounds} "
          f"failures; load "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    start = time.perf_counter()
    try:
        results = run(regimes, scenarios, articles, votes, a.batch, a.shards, a.down, every,
                      a.rounds, steady_rounds)
    except Exception as exc:       # (a RegimeError names the regime; say it plainly)
        from noria_py.errors import Error
        if isinstance(exc, Error):
            print(f"noria-py bench regimes: {exc}")
            return 2
        raise
    print("\n".join(table(results, scenarios)))
    print(f"({time.perf_counter() - start:.0f} s in all; load {os.getloadavg()[0]:.1f} at "
          "the end)")
    return 0
