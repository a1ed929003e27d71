"""``noria-py bench NAME``: the project's benchmarks as plain commands.

The same workloads back the pytest-benchmark suites in ``bench/``; these entry points
print tables (and write plots with ``--plot``) for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from noria_py import connect, tune_gc
from noria_tools import workloads

COUNT_VIEW = ("CREATE VIEW counts AS SELECT article_id, COUNT(*) AS n FROM vote "
              "WHERE article_id = ? GROUP BY article_id")


# ---------------------------------------------------------------- vote

def vote_db(articles: int, votes: int, shards: int = 1, clocks: bool = True, batch: int = 1000,
            seed: int | None = None, gc_tuned: bool = False, before_votes=None,
            zipf: float | None = None, checkpoints: bool = True, cpu: list | None = None,
            data_dir: str | None = None, disk_checkpoints: bool = True, partial: bool = False):
    """The demo's database, filled; returns (db, seconds spent propagating the votes).
    ``before_votes()`` is called as the timed part starts; the process's CPU seconds
    over the same part are appended to ``cpu``, if given. ``data_dir``: durable (a
    new directory is expected), ``disk_checkpoints=False`` without writing the views'
    checkpoints there (to measure what they cost the writes); ``partial``: the view
    partial (``connect(partial=True)``: nothing held until read)."""
    db = connect(shards=shards, clocks=clocks, seed=seed, checkpoints=checkpoints,
                 data_dir=data_dir, partial=partial)
    if not disk_checkpoints:
        db._disk = None
    workloads.setup(db, articles)
    if gc_tuned:
        tune_gc()
    data = workloads.votes(votes, articles, zipf=zipf)
    chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, votes, batch)]
    vote = db.table("vote")
    if before_votes is not None:
        before_votes()
    start, cpu_start = time.perf_counter(), time.process_time()
    for c in chunks:
        vote.insert(c)
    db.wait()
    if cpu is not None:
        cpu.append(time.process_time() - cpu_start)
    return db, time.perf_counter() - start


class _GcTimer:
    """Times the cyclic GC's collections (``gc.callbacks``) between start and stop."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.by_gen = [0.0, 0.0, 0.0]
        self._t = 0.0

    @property
    def seconds(self) -> float:
        return sum(self.by_gen)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
            return
        d = time.perf_counter() - self._t
        g = info["generation"]
        self.count[g] += 1
        self.by_gen[g] += d

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        gc.callbacks.remove(self._callback)


def _time_operators():
    """Wrap every operator class's ``process`` with a timer; returns (restore, totals
    by operator kind). Clear the totals where the timed part starts."""
    import collections

    from noria_py import ops
    spent: collections.Counter = collections.Counter()
    saved = []
    for name in ops.__all__:
        cls = getattr(ops, name)
        if not (isinstance(cls, type) and issubclass(cls, ops.Operator)) or cls is ops.Operator:
            continue
        f = cls.__dict__.get("process")
        if f is None:
            continue
        clock = time.perf_counter

        def timed(self, port, batch, f=f, kind=cls.kind):
            t = clock()
            out = f(self, port, batch)
            spent[kind] += clock() - t
            return out
        cls.process = timed
        saved.append((cls, f))

    def restore():
        for cls, f in saved:
            cls.process = f
    return restore, spent


def _time_checkpoints():
    """Time every ``Domain.checkpoint``; returns (undo, the seconds of each)."""
    from noria_py.runtime.domain import Domain
    took: list[float] = []
    original = Domain.checkpoint

    def timed(self):
        t0 = time.perf_counter()
        original(self)
        took.append(time.perf_counter() - t0)
    Domain.checkpoint = timed

    def restore():
        Domain.checkpoint = original
    return restore, took


def checkpoint_storage(db) -> list[tuple[str, str, int, int, int]]:
    """Per checkpointed node: (id, kind, rows or entries its checkpoint store holds,
    deltas kept apart, rows or entries it holds live: per port for a node checkpointed
    by its input, its groups for an aggregate)."""
    rt = db.runtime
    store = getattr(rt, "store", None)
    out = []
    for nid, d in rt.domains.items():
        if store is None or d.store is None or not store.has(nid):
            continue
        op = d.node.op
        live = (sum(len(b) for b in op.contents()) if op.checkpoint_form == "input"
                else len(op.snapshot()))
        held, deltas = store.size(nid)
        out.append((nid, d.node.kind, held, deltas, live))
    return out


def _lookup_samples(view, keys) -> list[float]:
    clock = time.perf_counter_ns
    out = []
    for k in keys:
        t0 = clock()
        view.lookup(k)
        out.append((clock() - t0) / 1000)
    return out


def run_vote(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench vote")
    p.add_argument("--articles", type=int, default=100_000)
    p.add_argument("--votes", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--no-clocks", action="store_true")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="clocks without the stateful nodes' checkpoints")
    p.add_argument("--checkpoint-report", action="store_true",
                   help="time each checkpoint a node takes (the pause it costs the node), "
                   "and compare what the checkpoint store holds with the live state")
    p.add_argument("--duckdb-reads", type=int, default=300)
    p.add_argument("--data-dir", default=None,
                   help="a new data directory: every write logged and synced")
    p.add_argument("--no-disk-checkpoints", action="store_true",
                   help="with --data-dir: the views' checkpoints not written there")
    p.add_argument("--tune-gc", action="store_true", help="call noria_py.tune_gc() first")
    p.add_argument("--per-operator", action="store_true",
                   help="also time each operator's process() (adds a little overhead)")
    p.add_argument("--zipf", type=float, default=None, help="Zipf-skewed votes (e.g. 1.2)")
    p.add_argument("--gc-report", action="store_true",
                   help="time the cyclic GC's collections during the votes")
    a = p.parse_args(argv)
    timed = _time_operators() if a.per_operator else None
    gc_timer = _GcTimer() if a.gc_report else None
    pauses = _time_checkpoints() if a.checkpoint_report else None

    at_creation: list[float] = []     # the checkpoints taken as the views were filled

    def before_votes():
        if pauses is not None:
            at_creation.extend(pauses[1])
            pauses[1].clear()
        if timed is not None:
            timed[1].clear()
        if gc_timer is not None:
            gc_timer.start()
    cpu: list[float] = []
    db, seconds = vote_db(a.articles, a.votes, a.shards, not a.no_clocks, a.batch,
                          gc_tuned=a.tune_gc, before_votes=before_votes, zipf=a.zipf,
                          checkpoints=not a.no_checkpoints, cpu=cpu, data_dir=a.data_dir,
                          disk_checkpoints=not a.no_disk_checkpoints)
    if pauses is not None:
        restore_ck, took = pauses
        restore_ck()
        if took:
            print(f"  checkpoints during the votes: {len(took)}, pause per checkpoint p50 "
                  f"{np.percentile(took, 50) * 1e3:.2f} ms, p99 {np.percentile(took, 99) * 1e3:.2f} ms, "
                  f"max {max(took) * 1e3:.2f} ms; {sum(took) / seconds:.1%} of the propagation time")
        if at_creation:
            print(f"  checkpoints as the views were filled (whole): {len(at_creation)}, "
                  f"max {max(at_creation) * 1e3:.2f} ms")
        for nid, kind, held, deltas, live in checkpoint_storage(db):
            print(f"  checkpoint store, {kind} {nid}: {held:,} rows or entries for {live:,} live "
                  f"({held / max(live, 1):.2f}x; {deltas} delta(s) above the low mark)")
    if gc_timer is not None:
        gc_timer.stop()
        print(f"  cyclic GC during the votes: {gc_timer.seconds:.2f} s of {seconds:.2f} s; "
              f"collections by generation {gc_timer.count}, seconds "
              + " / ".join(f"{x:.2f}" for x in gc_timer.by_gen))
    if timed is not None:
        restore, spent = timed
        restore()
        print("  time in each operator's process(), µs per vote: " + ", ".join(
            f"{k} {v / a.votes * 1e6:.2f}" for k, v in spent.most_common()) +
            f"; everything else {(seconds - sum(spent.values())) / a.votes * 1e6:.2f}")
    view = db.view(workloads.VIEW_NAME)
    rng = random.Random(3)
    keys = [rng.randrange(a.articles) for _ in range(50_000)]
    lat = _lookup_samples(view, keys)
    t0 = time.perf_counter()
    view.lookup_many(keys)
    many = len(keys) / (time.perf_counter() - t0)
    print(f"vote: {a.articles:,} articles, {a.votes:,} votes{f' (Zipf {a.zipf})' if a.zipf else ''}, batches of {a.batch}, "
          f"shards={a.shards}, clocks={'off' if a.no_clocks else 'on'}, "
          f"checkpoints={'off' if a.no_clocks or a.no_checkpoints else 'on'}"
          + (f", data dir ({'no ' if a.no_disk_checkpoints else ''}checkpoints on disk)"
             if a.data_dir else "") + ", "
          f"gc={'tuned' if a.tune_gc else 'default'}")
    print(f"  propagation: {a.votes / seconds:,.0f} votes/s ({seconds:.2f} s); "
          f"{a.votes / cpu[0]:,.0f} votes per CPU second (less moved by "
          "other jobs on the machine)")
    print(f"  lookup: p50 {np.percentile(lat, 50):.2f} µs, p99 {np.percentile(lat, 99):.2f} µs")
    print(f"  lookup_many: {many:,.0f} keys/s")
    if a.duckdb_reads:
        d50 = duckdb_read_p50(db, a.articles, keys[:a.duckdb_reads])
        print(f"  DuckDB computing the query per read: p50 {d50:.0f} µs "
              f"({1e6 / d50:,.0f} reads/s); ratio {d50 / np.percentile(lat, 50):,.0f}x")
    return 0


def duckdb_read_p50(db, articles: int, keys) -> float:
    """DuckDB answering the view's query afresh for each key, over the same rows."""
    import duckdb
    import pyarrow as pa
    votes = db.execute("SELECT article_id, user_id FROM vote").fetchall()
    vote_tbl = pa.table({"article_id": [v[0] for v in votes], "user_id": [v[1] for v in votes]})
    art_tbl = pa.table({"id": list(range(articles)), "title": [f"article {i}" for i in range(articles)]})
    con = duckdb.connect()
    con.register("vote_src", vote_tbl)
    con.register("art_src", art_tbl)
    con.execute("CREATE TABLE vote AS SELECT * FROM vote_src")
    con.execute("CREATE TABLE article AS SELECT * FROM art_src")
    samples = []
    for k in keys:
        t0 = time.perf_counter_ns()
        con.execute(workloads.READ_SQL, [k]).fetchall()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return float(np.percentile(samples, 50))


# ---------------------------------------------------------------- recovery

def recovery_db(votes: int, shards: int = 8, articles: int = 10_000, clocks: bool = True):
    """A sharder in front of ``shards`` aggregate shards over ``votes`` votes.

    The votes are loaded before the view exists (the view is then initialized from
    them), which is much faster than streaming them and leaves the same state.
    """
    db = connect(shards=shards, clocks=clocks, seed=0)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    load_votes(db, workloads.votes(votes, articles))
    db.execute(COUNT_VIEW)
    db.wait()
    sharder = next(n["id"] for n in db.graph() if n["kind"] == "sharder")
    return db, sharder


def load_votes(db, data: np.ndarray, step: int = 200_000) -> None:
    """``data`` (rows of ``vote``) into the table, ``step`` rows an insert."""
    vote = db.table("vote")
    for i in range(0, len(data), step):
        vote.insert([tuple(r) for r in data[i:i + step].tolist()])


def fail_with_writes_in_flight(db, sharder: str, rng: random.Random,
                               articles: int = 10_000) -> list[tuple[int, int]]:
    """Writes, some still in flight, then the sharder crashes; then more writes, lost to
    it. Returns the votes written."""
    vote = db.table("vote")
    written: list[tuple[int, int]] = []
    for i in range(4):
        if i == 3:
            db.fail(sharder)
        rows = [(rng.randrange(articles), rng.randrange(1 << 30)) for _ in range(100)]
        vote.insert(rows)
        written += rows
    return written


def time_recovery(db, sharder: str, strategy: str, rng: random.Random) -> tuple[float, float]:
    """(protocol seconds from the report, seconds until every view is correct again)."""
    fail_with_writes_in_flight(db, sharder, rng)
    return timed_recover(db, sharder, strategy)


def timed_recover(db, node: str, strategy: str) -> tuple[float, float]:
    """Recover a failed node and drain: (protocol seconds from the report, seconds until
    every view is correct again)."""
    gc.collect()
    t0 = time.perf_counter()
    report = db.recover(node, strategy=strategy)
    db.wait()
    return report.seconds, time.perf_counter() - t0


def run_recovery(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench recovery")
    p.add_argument("--sizes", default="1e5,1e6,1e7")
    p.add_argument("--shards", type=int, default=None,
                   help="default 8 (the sharder of a COUNT), 4 with --node")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--strategies", default="treeclock,lineage")
    p.add_argument("--plot", default=None, help="write a PNG of recovery time against votes")
    p.add_argument("--node", default=None, metavar="KIND",
                   help="instead: a shard of this node kind on the vote view (sharder, "
                   "aggregate, join, reader, topk, extremum, distinct; a comma list, or all)")
    p.add_argument("--articles", type=int, default=None,
                   help="with --node (default 100,000)")
    p.add_argument("--since", type=int, default=0, metavar="K",
                   help="with --node: the node's checkpoint taken by hand each round, then K "
                   "inserts of 100 votes before the round's (none taken on the schedule): a "
                   "stateful shard fails K messages or so past its checkpoint")
    a = p.parse_args(argv)
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    strategies = a.strategies.split(",")
    if a.node is not None:
        from noria_tools.recoverybench import run_nodes
        return run_nodes(a, sizes, strategies)
    if a.articles is not None or a.since:
        p.error("--articles and --since go with --node")
    a.shards = a.shards or 8
    results: dict[str, dict[int, float]] = {s: {} for s in strategies}
    print(f"recovery of a failed sharder in front of {a.shards} aggregate shards, "
          f"writes in flight; median of {a.rounds} rounds (seconds until views are correct)")
    print(f"{'votes':>12} " + " ".join(f"{s:>12}" for s in strategies))
    for n in sizes:
        t0 = time.perf_counter()
        db, sharder = recovery_db(n, a.shards)
        load = time.perf_counter() - t0
        rng = random.Random(n)
        row = []
        for s in strategies:
            times = [time_recovery(db, sharder, s, rng)[1] for _ in range(a.rounds)]
            results[s][n] = statistics.median(times)
            row.append(results[s][n])
        print(f"{n:>12,} " + " ".join(f"{v:>12.4f}" for v in row) + f"   (load {load:.0f} s)",
              flush=True)
        db.close()
        del db
        gc.collect()
    if "treeclock" in results and "lineage" in results:
        big = sizes[-1]
        print(f"lineage / treeclock at {big:,} votes: "
              f"{results['lineage'][big] / results['treeclock'][big]:,.0f}x")
    if a.plot:
        plot_recovery(results, a.plot, f"failed sharder, {a.shards} aggregate shards")
        print(f"plot written to {a.plot}")
    return 0


def plot_recovery(results: dict[str, dict[int, float]], path: str, title: str) -> None:
    """Recovery time against votes, log-log, a line per key of ``results``: a strategy,
    or ``"KIND, STRATEGY"`` (a colour per kind, a line style per strategy)."""
    plot_lines(results, path, title, "votes in the base table", "recovery time (s)")


def plot_lines(results: Mapping[str, Mapping[Any, float]], path: str, title: str, xlabel: str,
               ylabel: str, logy: bool = True) -> None:
    """A PNG at ``path`` of a line (markers at the points) per key of ``results``, each a
    mapping x -> y; log x (and, with ``logy``, log y). A key ``"GROUP, STYLE"`` gets a
    colour per group and a line style per style (the legend beside the plot when there
    are several groups)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = list(dict.fromkeys(k.rpartition(", ")[0] for k in results))
    styles = list(dict.fromkeys(k.rpartition(", ")[2] for k in results))
    fig, ax = plt.subplots(figsize=(5, 3.5) if len(groups) == 1 else (7, 4.5))
    for s, pts in results.items():
        xs = sorted(pts)
        group, _, style = s.rpartition(", ")
        color = f"C{groups.index(group)}" if len(groups) > 1 else None
        ax.plot(xs, [pts[x] for x in xs], marker="o", label=s, color=color,
                linestyle=("-", "--", ":", "-.")[styles.index(style) % 4])
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(groups) > 1:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1))
    else:
        ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------- overhead

def run_overhead(argv: list[str]) -> int:
    """The seed's Figure 3: propagation time at rising offered load, clocks on and off
    (``overhead.py``)."""
    from noria_tools.overhead import AGAINST, GC_MODES, per_insert, plot, sweep
    p = argparse.ArgumentParser(prog="noria-py bench overhead")
    p.add_argument("--articles", type=int, default=100_000)
    p.add_argument("--prefill", type=int, default=None,
                   help="votes loaded first (default 200,000; with --per-insert 100,000: "
                   "a few million puts every article's count in, as the sweep's 80%% point "
                   "has it after its full-speed runs)")
    p.add_argument("--seconds", type=float, default=0.25, help="of one run")
    p.add_argument("--fractions", default="0.1,0.2,0.4,0.6,0.8,0.9,1.0,1.2")
    p.add_argument("--repeats", type=int, default=16,
                   help="runs per setting and point, the settings taking turns")
    p.add_argument("--plot", default=None, help="write a PNG here")
    p.add_argument("--gc", default="tuned", choices=GC_MODES,
                   help="tuned: noria_py.tune_gc(); default: Python's policy; paused: the "
                   "collector off during each run (a diagnostic)")
    p.add_argument("--default-gc", action="store_true", help="the same as --gc default")
    p.add_argument("--max-once", action="store_true",
                   help="measure the maximum once, at the start (before session 7: "
                   "before each load point)")
    p.add_argument("--per-insert", default=None, metavar="BATCHES",
                   help="instead of the sweep: the clocks' cost per insert of each of these "
                   "batch sizes (e.g. 1,20,100,1000; LO-HI: each insert's size drawn "
                   "log-uniformly from LO to HI, as the open loop's vary), on and off taking "
                   "turns insert by insert")
    p.add_argument("--inserts", type=int, default=6000, help="per batch size, with --per-insert")
    p.add_argument("--against", default="no-clocks", choices=AGAINST,
                   help="what 'on' is measured against (no-checkpoints: clocks alone, so the "
                   "figures are the checkpoints' cost; itself: 'on' has no clocks either, "
                   "an A/A run whose figures are the harness's own bias)")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="'on' is tree clocks alone (by default, clocks with the stateful "
                   "nodes' checkpoints, as connect() ships); 'off' has neither either way")
    a = p.parse_args(argv)
    ck = not a.no_checkpoints
    on_is = ("no clocks" if a.against == "itself"
             else "clocks + checkpoints" if ck else "clocks alone")
    off_is = "clocks alone" if a.against == "no-checkpoints" else "no clocks"
    if a.per_insert:
        prefill = 100_000 if a.prefill is None else a.prefill
        print(f"cost per insert: vote, {a.articles:,} articles, {prefill:,} votes first; "
              f"{a.inserts:,} inserts per batch size (fewer for big batches), on ({on_is}) "
              f"and off ({off_is}) taking turns; CPU time, medians, and the totals' ratio")
        print(f"{'votes':>6} {'off µs':>9} {'on µs':>9} {'on - off µs':>12} {'cost':>7} "
              f"{'total':>7}")
        for spec in a.per_insert.split(","):
            lo, _, hi = spec.partition("-")
            if not (lo.isdigit() and (hi.isdigit() or not hi)) or int(lo) < 1 or (
                    hi and int(hi) < int(lo)):
                p.error(f"--per-insert {spec!r}: a number of votes (1 or more) or LO-HI")
            b: int | tuple[int, int] = (int(lo), int(hi)) if hi else int(lo)
            top = int(hi or lo)
            r = per_insert(b, max(200, min(a.inserts, 2_000_000 // top)), a.articles,
                           prefill, checkpoints=ck, against=a.against)
            print(f"{spec:>6} {r['off']:>9.1f} {r['on']:>9.1f} {r['paired']:>+12.2f} "
                  f"{100 * r['paired'] / r['off']:>+6.1f}% {100 * (r['total'] - 1):>+6.1f}%")
        return 0
    fractions = [float(x) for x in a.fractions.split(",")]
    gc_mode = "default" if a.default_gc else a.gc
    prefill = 200_000 if a.prefill is None else a.prefill
    r = sweep(a.articles, prefill, a.seconds, fractions, a.repeats, gc_mode,
              max_each=not a.max_once, checkpoints=ck, against=a.against)
    print(f"overhead: vote, {a.articles:,} articles, {prefill:,} votes first; half lookups, "
          f"half votes; per point, {a.repeats} runs of {a.seconds:g} s per setting, taking turns; "
          f"gc {gc_mode}; on = {on_is}, off = {off_is}")
    print(f"maximum: clocks on {r[True]['max']:,.0f} ops/s, off {r[False]['max']:,.0f} ops/s "
          f"({100 * (r[False]['max'] - r[True]['max']) / r[False]['max']:+.1f}% cost)")
    print(f"{'load':>5} {'offered':>9} | {'on ops/s':>9} {'p50':>7} {'p95':>7} {'p99':>7} | "
          f"{'off ops/s':>9} {'p50':>7} {'p95':>7} {'p99':>7} | p50 cost: pooled, paired")
    for f in fractions:
        on, off = r[True][f], r[False][f]
        print(f"{f:>5.0%} {on['rate']:>9,.0f} | {on['ops']:>9,.0f} {on['p50']:>7.2f} "
              f"{on['p95']:>7.2f} {on['p99']:>7.2f} | {off['ops']:>9,.0f} {off['p50']:>7.2f} "
              f"{off['p95']:>7.2f} {off['p99']:>7.2f} | {100 * (on['p50'] - off['p50']) / off['p50']:+.1f}%"
              f" {100 * r['paired'][f]:+.1f}%")
    if a.plot:
        plot(r, fractions, a.plot)
        print(f"plot: {a.plot}")
    return 0


# ---------------------------------------------------------------- entry point

# ---------------------------------------------------------------- peers

def _reads_per_s(fn, keys) -> tuple[float, float]:
    """(reads per second, p50 µs) of ``fn(key)`` over ``keys``."""
    samples = []
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    for k in keys:
        t1 = clock()
        fn(k)
        samples.append((clock() - t1) / 1000)
    return len(keys) / (time.perf_counter() - t0), float(np.percentile(samples, 50))


def run_peers(argv: list[str]) -> int:
    """The vote workload on noria-py and on its peers, same data, same machine, one run:
    DuckDB computing the query per read, DuckDB with the aggregate materialized by hand
    and refreshed by recomputation, SQLite with an index and a hand-written correlated
    lookup, SQLite with a hand-materialized count table. Pathway, if installed."""
    import sqlite3

    import duckdb
    import pyarrow as pa
    p = argparse.ArgumentParser(prog="noria-py bench peers")
    p.add_argument("--articles", type=int, default=100_000)
    p.add_argument("--votes", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--reads", type=int, default=20_000)
    p.add_argument("--duckdb-reads", type=int, default=300)
    p.add_argument("--pathway-python", default=None,
                   help="a Python with pathway installed (default: this one, if it has it)")
    p.add_argument("--tune-gc", action="store_true",
                   help="call noria_py.tune_gc() after loading the articles")
    a = p.parse_args(argv)
    rng = random.Random(5)
    print(f"peers: {a.articles:,} articles, {a.votes:,} votes in batches of {a.batch:,}"
          f"{', tune_gc()' if a.tune_gc else ''}")
    for dist, zipf in (("uniform", None), ("zipf", 1.2)):
        data = workloads.votes(a.votes, a.articles, zipf=zipf)
        keys = [rng.randrange(a.articles) for _ in range(a.reads)]
        rows = {}
        # noria-py
        db = connect()
        workloads.setup(db, a.articles)
        policy = gc.get_threshold()
        if a.tune_gc:
            tune_gc()
        vote = db.table("vote")
        chunks = [[tuple(r) for r in data[i:i + a.batch].tolist()]
                  for i in range(0, a.votes, a.batch)]
        t0 = time.perf_counter()
        for c in chunks:
            vote.insert(c)
        db.wait()
        updates = a.votes / (time.perf_counter() - t0)
        view = db.view(workloads.VIEW_NAME)
        rows["noria-py"] = (*_reads_per_s(view.lookup, keys), updates)
        db.close()
        gc.unfreeze()
        gc.set_threshold(*policy)
        # DuckDB
        con = duckdb.connect()
        con.register("v", pa.table({"article_id": data[:, 0], "user_id": data[:, 1]}))
        con.register("a", pa.table({"id": np.arange(a.articles),
                                    "title": [f"article {i}" for i in range(a.articles)]}))
        con.execute("CREATE TABLE vote AS SELECT * FROM v")
        con.execute("CREATE TABLE article AS SELECT * FROM a")
        rows["DuckDB, query per read"] = (*_reads_per_s(
            lambda k: con.execute(workloads.READ_SQL, [k]).fetchall(), keys[:a.duckdb_reads]), None)
        refresh = ("CREATE OR REPLACE TABLE vc AS SELECT article.id, article.title, "
                   "COUNT(vote.user_id) AS votes FROM article LEFT JOIN vote "
                   "ON article.id = vote.article_id GROUP BY article.id, article.title")
        t0 = time.perf_counter()
        con.execute(refresh)
        refresh_s = time.perf_counter() - t0
        rows["DuckDB, materialized by hand"] = (*_reads_per_s(
            lambda k: con.execute("SELECT * FROM vc WHERE id = ?", [k]).fetchall(),
            keys[:a.duckdb_reads * 3]), a.batch / refresh_s)
        # SQLite
        sq = sqlite3.connect(":memory:")
        sq.execute("CREATE TABLE article (id INTEGER PRIMARY KEY, title TEXT)")
        sq.execute("CREATE TABLE vote (article_id INTEGER, user_id INTEGER)")
        sq.execute("CREATE INDEX vote_article ON vote (article_id)")
        sq.executemany("INSERT INTO article VALUES (?, ?)", workloads.articles(a.articles))
        sq.executemany("INSERT INTO vote VALUES (?, ?)", data.tolist())
        q = ("SELECT id, title, (SELECT COUNT(user_id) FROM vote WHERE article_id = article.id) "
             "FROM article WHERE id = ?")
        rows["SQLite, index + correlated lookup"] = (*_reads_per_s(
            lambda k: sq.execute(q, (k,)).fetchall(), keys), None)
        sq.execute("CREATE TABLE vc AS SELECT article_id AS id, COUNT(user_id) AS votes "
                   "FROM vote GROUP BY article_id")
        sq.execute("CREATE UNIQUE INDEX vc_id ON vc (id)")
        rows["SQLite, count table by hand"] = (*_reads_per_s(
            lambda k: sq.execute("SELECT article.id, title, votes FROM article LEFT JOIN vc "
                                 "ON vc.id = article.id WHERE article.id = ?", (k,)).fetchall(),
            keys), None)
        pw_rate, note = _pathway(a.pathway_python, a.articles, a.votes, a.batch, zipf)
        if pw_rate is not None:
            rows["Pathway, batches committed"] = (0.0, 0.0, pw_rate)
            note = f"{note}; noria-py updates vs Pathway: {updates / pw_rate:.2f}x"
        print(f"\n{dist}:")
        print(f"  {'engine':36} {'reads/s':>12} {'read p50 µs':>12} {'votes/s':>12}")
        for name, (rps, p50, ups) in rows.items():
            u = f"{ups:>12,.0f}" if ups else f"{'':>12}"
            r = f"{rps:>12,.0f} {p50:>12.1f}" if rps else f"{'-':>12} {'-':>12}"
            print(f"  {name:36} {r} {u}")
        base = rows["noria-py"]
        print(f"  noria-py reads vs DuckDB per read: "
              f"{base[0] / rows['DuckDB, query per read'][0]:,.0f}x; {note}")
        if dist == "uniform":
            data_refresh = refresh_s
    print(f"\n(DuckDB's 'votes/s' is a batch of {a.batch:,} votes over one full refresh, "
          f"{data_refresh * 1000:.0f} ms)")
    return 0


def _pathway(python: str | None, articles: int, votes: int, batch: int,
             zipf: float | None) -> tuple[float | None, str]:
    """Pathway's update throughput on the same votes, in a subprocess (its own
    environment, if need be): (votes/s or None, a note)."""
    import json
    import os
    import subprocess
    if python is None:
        try:
            import pathway  # noqa: F401
        except ImportError:
            return None, ("Pathway: not installed (pip install '.[peers]', or "
                          "--pathway-python PATH), skipped")
        python = sys.executable
    script = os.path.join(os.path.dirname(__file__), "peers_pathway.py")
    out = subprocess.run([python, script, str(articles), str(votes), str(batch),
                          str(zipf or 0)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, f"Pathway failed: {out.stderr.strip().splitlines()[-1:]}"
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["votes_per_s"], f"Pathway {r['version']}"


def run_load(argv: list[str]) -> int:
    from noria_tools.loadbench import main
    return main(argv)


def run_memory(argv: list[str]) -> int:
    from noria_tools.memorybench import main
    return main(argv)


def run_adhoc(argv: list[str]) -> int:
    from noria_tools.adhocbench import main
    return main(argv)


def run_pg(argv: list[str]) -> int:
    from noria_tools.pgbench import main
    return main(argv)


def run_partial(argv: list[str]) -> int:
    from noria_tools.partialbench import main
    return main(argv)


def run_partial_cluster(argv: list[str]) -> int:
    from noria_tools.partialcluster import main
    main(argv)
    return 0


def run_reopen(argv: list[str]) -> int:
    from noria_tools.reopenbench import run_reopen as run
    return run(argv)


def run_cluster(argv: list[str]) -> int:
    from noria_tools.clusterbench import main
    return main(argv)


def run_regimes(argv: list[str]) -> int:
    from noria_tools.regimesbench import main
    return main(argv)


def run_restart(argv: list[str]) -> int:
    from noria_tools.restartbench import main
    return main(argv)


def run_tables(argv: list[str]) -> int:
    from noria_tools.tablesbench import main
    return main(argv)


BENCHES = {"vote": run_vote, "recovery": run_recovery, "overhead": run_overhead,
           "load": run_load, "peers": run_peers, "cluster": run_cluster,
           "memory": run_memory, "adhoc": run_adhoc, "pg": run_pg, "partial": run_partial,
           "partial-cluster": run_partial_cluster,
           "regimes": run_regimes, "reopen": run_reopen, "restart": run_restart,
           "tables": run_tables}


def run_bench(name: str, argv: list[str]) -> int:
    fn = BENCHES.get(name)
    if fn is None:
        print(f"noria-py bench: unknown or not yet available benchmark {name!r}; "
              f"available: {', '.join(BENCHES)}",
              file=sys.stderr)
        return 2
    return fn(argv)
