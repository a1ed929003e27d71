"""The seed's Figure 3: write-propagation time at rising offered load, tree clocks and
logs on and off, in one run (``noria-py bench overhead``).

Open loop: operations are scheduled at a fixed rate, half lookups and half votes, and
a vote's propagation time runs from when it was *scheduled* until ``insert`` returns
(in the embedded runtime that is when it is in every view). Votes due at the same
moment go in one batch, as a Noria client's writes are batched; a generator that falls
behind therefore shows queueing in the latency, as a real server would. The maximum
load is first measured per setting (as fast as possible); the sweep then offers
fractions of the slower maximum to both.
"""
from __future__ import annotations

import time

import numpy as np

from . import connect, workloads
from .gcpolicy import tune_gc

MAX_BATCH = 1000


def _db(clocks: bool, articles: int, prefill: int):
    db = connect(clocks=clocks)
    workloads.setup(db, articles)
    data = workloads.votes(prefill, articles, seed=5)
    vote = db.table("vote")
    for i in range(0, prefill, 1000):
        vote.insert([tuple(r) for r in data[i:i + 1000].tolist()])
    return db


def run_at(db, rate: float | None, ops: int, articles: int, seed: int) -> dict:
    """``ops`` operations, half reads and half writes, offered at ``rate`` per second
    (None: as fast as possible). Returns achieved ops/s and propagation times (ms)."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, articles, ops).tolist()
    users = rng.integers(1 << 30, 1 << 31, ops).tolist()
    view = db.view(workloads.VIEW_NAME)
    vote = db.table("vote")
    lat: list[float] = []
    clock = time.perf_counter
    t0 = clock()
    i = 0
    while i < ops:
        if rate is None:
            due = min(ops, i + 2 * MAX_BATCH)
            now = clock() - t0
        else:
            now = clock() - t0
            due = min(ops, int(now * rate) + 1)
            if due <= i:
                time.sleep(max(0.0, (i / rate) - now))
                continue
        due = min(due, i + 2 * MAX_BATCH)
        rows, sched = [], []
        for j in range(i, due):
            if j % 2:
                rows.append((keys[j], users[j]))
                sched.append(j / rate if rate else now)
            else:
                view.lookup(keys[j])
        if rows:
            vote.insert(rows)
            done = clock() - t0
            lat.extend((done - s) * 1000 for s in sched)
        i = due
    elapsed = clock() - t0
    return {"ops": ops / elapsed, "lat": lat}


def sweep(articles: int, prefill: int, seconds: float, fractions: list[float],
          repeats: int, gc_tuned: bool = True) -> dict:
    """{clocks: {"max": ops/s, fraction: {"ops": .., "p50": .., "p95": .., "p99": ..}}}"""
    out: dict = {True: {}, False: {}}
    dbs = {c: _db(c, articles, prefill) for c in (True, False)}
    if gc_tuned:
        tune_gc()
    # maximum load, interleaved
    for rep in range(repeats):
        for c in ((True, False) if rep % 2 == 0 else (False, True)):
            r = run_at(dbs[c], None, 60_000, articles, seed=rep)
            out[c].setdefault("max_runs", []).append(r["ops"])
    for c in (True, False):
        out[c]["max"] = float(np.median(out[c]["max_runs"]))
    top = min(out[True]["max"], out[False]["max"])
    for f in fractions:
        rate = f * top
        ops = max(2000, int(rate * seconds))
        runs: dict = {True: [], False: []}
        for rep in range(repeats):
            for c in ((True, False) if rep % 2 == 0 else (False, True)):
                runs[c].append(run_at(dbs[c], rate, ops, articles, seed=100 + rep))
        for c in (True, False):
            lat = [x for r in runs[c] for x in r["lat"]]
            p50, p95, p99 = np.percentile(lat, [50, 95, 99])
            out[c][f] = {"rate": rate, "ops": float(np.median([r["ops"] for r in runs[c]])),
                         "p50": float(p50), "p95": float(p95), "p99": float(p99)}
    for db in dbs.values():
        db.close()
    return out


def plot(result: dict, fractions: list[float], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for c, style in ((True, "-o"), (False, "--s")):
        x = [result[c][f]["rate"] / 1000 for f in fractions]
        for q, alpha in (("p50", 1.0), ("p99", 0.5)):
            ax.plot(x, [result[c][f][q] for f in fractions], style, alpha=alpha,
                    label=f"clocks {'on' if c else 'off'}, {q}")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (thousand ops/s, half reads, half votes)")
    ax.set_ylabel("write propagation time (ms)")
    ax.set_title("Tree-clock overhead (vote, embedded)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
