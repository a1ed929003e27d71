"""The seed's Figure 3: write-propagation time at rising offered load, tree clocks and
logs on and off, in one run (``noria-py bench overhead``). "On" is the engine as it
ships, tree clocks with the stateful nodes' checkpoints (``connect()``'s defaults);
``checkpoints=False`` measures clocks alone. "Off" has neither (no clocks, no logs,
no checkpoints: a runtime without clocks keeps no checkpoint store); with
``against="no-checkpoints"``, "off" is clocks alone, so the figures are the
checkpoints' own cost; with ``against="itself"``, "on" is "off" too (no clocks on
either side): an A/A run, whose figures are the harness's own bias. Databases built
one after another in one process run a few percent apart, and "on" and "off" get
different ones: at the vote's 80% state (1.5M votes first) such runs showed "on"
+3 to +16 µs an insert of 100 to 1,000 votes in twelve of thirteen (+1.0-1.5% of
the totals, medians;
docs/benchmarks.md, "The clocks' own cost per write").

Open loop: operations are scheduled at a fixed rate, half lookups and half votes, and
a vote's propagation time runs from when it was *scheduled* until ``insert`` returns
(in the embedded runtime that is when it is in every view). Votes due at the same
moment go in one batch, as a Noria client's writes are batched; a generator that falls
behind therefore shows queueing in the latency, as a real server would.

This VM's speed drifts by 20-50% from one second to the next, which swamps a
difference of a few percent between runs made seconds apart. So the two settings take
turns in short runs (a quarter of a second by default), many times per point, and each
figure pools its setting's runs: both see the same drift. The maximum load is each
setting's ops over its time across all its as-fast-as-possible runs (sustained: the
collector's pauses land in some runs and are counted); the sweep then offers fractions
of the slower maximum to both, measured again before each load point.

``per_insert`` measures the clocks' cost without the open loop: the two settings take
turns insert by insert.
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager

import numpy as np

from noria_py import ArgumentError, connect, tune_gc
from noria_tools import workloads

MAX_BATCH = 1000


def _db(clocks: bool, articles: int, prefill: int, checkpoints: bool = True):
    """A vote database: with ``clocks``, tree clocks and (``checkpoints``) checkpoints;
    without, neither."""
    db = connect(clocks=clocks, checkpoints=clocks and checkpoints)
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
    # arrays, sliced into lists a batch at a time: lists of millions of ints would be
    # the biggest objects a GC pass walks
    keys = rng.integers(0, articles, ops)
    users = rng.integers(1 << 30, 1 << 31, ops)
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
        for j, k, u in zip(range(i, due), keys[i:due].tolist(), users[i:due].tolist()):
            if j % 2:
                rows.append((k, u))
                sched.append(j / rate if rate else now)
            else:
                view.lookup(k)
        if rows:
            vote.insert(rows)
            done = clock() - t0
            lat.extend((done - s) * 1000 for s in sched)
        i = due
    elapsed = clock() - t0
    return {"ops": ops / elapsed, "seconds": elapsed, "lat": lat}


#: how Python's collector runs during the sweep: "tuned" (``tune_gc()``), "default"
#: (left alone), "paused" (off during each run, a full collection between runs: a
#: diagnostic that takes the collector's pauses out of the latencies)
GC_MODES = ("tuned", "default", "paused")


@contextmanager
def _collector(mode: str):
    if mode != "paused":
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def _turns(pairs: list[dict], repeats: int, gc_mode: str, run) -> dict:
    """{on: [run(db, on, rep) per turn]}: the settings take turns, on and off first in
    alternate turns, and the two pairs of databases alternate every two turns."""
    out: dict = {True: [], False: []}
    for rep in range(repeats):
        for c in ((True, False) if rep % 2 == 0 else (False, True)):
            with _collector(gc_mode):
                out[c].append(run(pairs[rep // 2 % 2][c], c, rep))
    return out


#: what "on" is measured against: no clocks (nor checkpoints), clocks alone, or
#: (A/A, the harness's bias) itself: "on" is then no clocks too
AGAINST = ("no-clocks", "no-checkpoints", "itself")


def _pairs(articles: int, prefill: int, checkpoints: bool, against: str) -> list[dict]:
    """Two pairs of databases, {on: db}, built in opposite orders: "on" with clocks
    (and ``checkpoints``), "off" with no clocks, or (``against="no-checkpoints"``)
    clocks alone; ``against="itself"``: "on" with no clocks too (an A/A run)."""
    if against not in AGAINST:
        raise ArgumentError(f"against {against!r}: expected one of {', '.join(AGAINST)}")

    def make(on: bool):
        if on and against != "itself":
            return _db(True, articles, prefill, checkpoints)
        return _db(against == "no-checkpoints", articles, prefill, checkpoints=False)
    return [{c: make(c) for c in order} for order in ((True, False), (False, True))]


def _ops_per_s(runs: list[dict], ops: int) -> float:
    """Ops over time across runs of ``ops`` each (not a median: pauses count)."""
    return ops * len(runs) / sum(r["seconds"] for r in runs)


def sweep(articles: int, prefill: int, seconds: float, fractions: list[float],
          repeats: int, gc_mode: str = "tuned", max_each: bool = True,
          checkpoints: bool = True, against: str = "no-clocks") -> dict:
    """``repeats`` turns per setting of ``seconds`` each, at full speed and at each
    fraction of the maximum. {clocks: {"max": ops/s, "max_runs": [ops/s per run],
    fraction: {"ops": .., "p50": .., "p95": .., "p99": .., "p50_runs": [per run],
    "top": the maximum the fraction was taken of}}, "paired": {fraction: median over
    turns of (p50 on / p50 off of the two runs side by side) - 1}}

    With ``max_each`` the maximum is measured again (a quarter of ``repeats`` turns)
    before each load point after the first: the VM's speed drifts over the minutes a
    sweep takes, and a maximum measured at the start put "80%" past the knee in some
    sweeps and well below it in others. "max" pools every full-speed run."""
    if gc_mode not in GC_MODES:
        raise ArgumentError(f"gc mode {gc_mode!r}: expected one of {', '.join(GC_MODES)}")
    out: dict = {True: {}, False: {}, "paired": {}}
    # two pairs of databases, built in opposite orders, the turns alternating between
    # them: on this VM the one built first ran 4-5% slower, either way round
    pairs = _pairs(articles, prefill, checkpoints, against)
    if gc_mode != "default":
        tune_gc()
    # maximum load: each run sized by a first short one to last about ``seconds``
    size = {c: max(2000, int(run_at(pairs[0][c], None, 60_000, articles, 0)["ops"] * seconds))
            for c in (True, False)}
    full: dict = {True: [], False: []}

    def maximum(turns: int, seed: int) -> float:
        runs = _turns(pairs, turns, gc_mode,
                      lambda db, c, rep: run_at(db, None, size[c], articles, seed=seed + rep))
        for c in (True, False):
            full[c].extend(runs[c])
        return min(_ops_per_s(runs[c], size[c]) for c in (True, False))

    top = maximum(repeats, 0)
    for i, f in enumerate(fractions):
        if max_each and i:
            top = maximum(max(2, repeats // 4), 1000 * i)
        rate = f * top
        ops = max(200, int(rate * seconds))
        runs = _turns(pairs, repeats, gc_mode,
                      lambda db, c, rep: run_at(db, rate, ops, articles, seed=100 + rep))
        for c in (True, False):
            lat = [x for r in runs[c] for x in r["lat"]]
            p50, p95, p99 = np.percentile(lat, [50, 95, 99])
            out[c][f] = {"rate": rate, "top": top, "ops": _ops_per_s(runs[c], ops),
                         "p50": float(p50), "p95": float(p95), "p99": float(p99),
                         "p50_runs": [float(np.median(r["lat"])) for r in runs[c]]}
        out["paired"][f] = float(np.median([on / off - 1 for on, off in
                                            zip(out[True][f]["p50_runs"],
                                                out[False][f]["p50_runs"])]))
    for c in (True, False):
        out[c]["max_runs"] = [r["ops"] for r in full[c]]
        out[c]["max"] = _ops_per_s(full[c], size[c])
    for pair in pairs:
        for db in pair.values():
            db.close()
    return out


def per_insert(batch: int | tuple[int, int], inserts: int, articles: int = 100_000,
               prefill: int = 100_000, checkpoints: bool = True,
               against: str = "no-clocks") -> dict:
    """The clocks' cost per insert of ``batch`` votes, or (``(lo, hi)``) of a size drawn
    log-uniformly from ``lo`` to ``hi`` for each insert, as the open loop's inserts vary
    (a few votes after the generator caught up, hundreds after a pause; the two
    settings get the same sizes) (with ``against="no-checkpoints"``:
    the checkpoints' cost, clocks on in both): databases on and off take turns insert
    by insert (which goes first alternating), the same rows to both, the collector off
    and a full collection every 2,000 inserts. Pairing each insert with its neighbour
    cancels the VM's drift, which runs over seconds, so a difference of a few µs in 500
    shows. Two pairs of databases, built in opposite orders, take turns too (the one
    built first ran ~1% slower at 1,000 votes an insert). Each insert is timed in this
    process's CPU time (wall time before session 10), which other jobs on the machine
    move less. Returns medians (µs): on, off, and of on - off per pair of inserts; and
    the ratio of the totals ("total"), which counts what lands on few inserts (a
    checkpoint's pause) where a median does not."""
    pairs = _pairs(articles, prefill, checkpoints, against)
    tune_gc()
    rng = np.random.default_rng(1)
    times: dict = {True: [], False: []}
    clock = time.process_time
    gc.disable()
    try:
        for i in range(inserts):
            n = batch if isinstance(batch, int) else int(
                np.exp(rng.uniform(np.log(batch[0]), np.log(batch[1] + 1))))
            rows = list(zip(rng.integers(0, articles, n).tolist(),
                            rng.integers(1 << 30, 1 << 31, n).tolist()))
            pair = pairs[i // 2 % 2]
            for c in ((False, True) if i % 2 else (True, False)):
                vote = pair[c].table("vote")
                t = clock()
                vote.insert(rows)
                times[c].append(clock() - t)
            if i % 2000 == 1999:
                gc.collect()
    finally:
        gc.enable()
        for pair in pairs:
            for db in pair.values():
                db.close()
        gc.unfreeze()       # so that a later call's collection frees these databases
    on, off = (np.array(times[c]) * 1e6 for c in (True, False))
    return {"on": float(np.median(on)), "off": float(np.median(off)),
            "paired": float(np.median(on - off)), "total": float(on.sum() / off.sum())}


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
