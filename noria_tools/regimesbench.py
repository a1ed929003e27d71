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
  holds at the end (``noria_py.memory.deep_size``; lineage keeps none). Clock bytes
  (regimes with tree clocks): what each message carries for them, its clock diff's
  path and its low mark as a cluster's wire would pack them (msgpack), counted over the
  warm-up database's messages, so that counting slows no timed run (a clock's size
  follows the graph's depth, not the data).
  Then **at 80% load**, the Figure 3 method (``overhead.py``): rows offered in an open
  loop at ``--load`` (0.8) of the *slowest* regime's maximum, the same rate for every
  regime, for ``--load-seconds``; a row's propagation runs from when it was scheduled
  until the insert holding it returns (every view updated), so a regime that cannot
  keep up shows its queue in the latency. Shown: p50 / p99, and the rate achieved.
- **single**: 1,000 votes, one stateful shard (the COUNT's shard 0) fails, ``--down``
  votes are written while it is down, then ``db.recover()`` + ``db.wait()`` is timed:
  the time until every view is right. Then every article of the view is checked
  against counts kept in Python (not timed); a mismatch stops the run. ``--rounds``
  times (3), the median shown.
- **concurrent**: two stateful shards at once (the COUNT's shard 0 and the join's
  shard 1), the same way.
- **frequent**: a stateful shard fails every ``--every`` seconds while writes go on
  (Clonos's frequent-failure scenario), for ``--frequent-seconds``: each time the next
  shard in turn (COUNT shards, then joins, ...) fails, ``--down`` votes are written
  while it is down and ``db.recover()`` runs at once, as a supervisor would. Shown: the
  failures, their median recovery, the throughput over the whole run (recoveries
  included) and the p50 / p99 / maximum latency of the inserts (the recoveries apart);
  the views are checked at the end. ``--plot`` draws each regime's insert latencies
  over time, the failures and the recoveries marked.

``--cluster`` runs the regimes a cluster offers on a real one instead
(``regimescluster.py``): throughput through a client and the time from a worker's
SIGKILL until the views are right.

``--workload nexmark`` runs the same scenarios on a NEXMark-shaped workload
(``nexmark.py``: persons, auctions and bids; a Q3-style join with filters, Q4- and
Q6-style aggregates over per-auction maxima, a TopK of bids, bids per auction), events
in NEXMark's proportions, ``--votes`` events in inserts of ``--batch``; its views are
checked against DuckDB over every row written. ``--plot 'docs/img/regimes-*.png'``
writes ``-recovery`` (seconds until the views are right, per scenario and regime) and
``-frequent`` in place of the ``*``.

For each failure: the nodes restarted or set back (the failed ones, what lineage
purged, what a coordinated rollback set back), and the messages the recovery resent
(payload logs, or the bases' write histories). The failure scenarios run one after
another on the steady scenario's database (its votes are the state recovery has to
deal with). The steady scenario runs ``--steady-rounds`` turns (3),
the regimes in turns, each turn's first regime rotated, and the medians are shown: this
machine's speed drifts by tens of percent over seconds (docs/benchmarks.md), which a
single pass per regime, one after another, charges to whichever ran in a slow spell.
Turns of whole runs still moved tree clocks against lineage by 17 points on the same
code; ``--paired`` runs the steady scenario once with every regime's database side by
side, each insert to each in turn (``steady_paired``).
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from noria_py import connect, tune_gc
from noria_py.errors import RegimeError
from noria_py.memory import deep_size
from noria_py.regimes import BUILT
from noria_py.runtime.uncoordinated import INDEX_BYTES, UncoordinatedRuntime
from noria_py.storage.codec import packb
from noria_tools import nexmark, workloads
from noria_tools.recoverybench import VoteBed, check, write_votes

SCENARIOS = ("steady", "single", "concurrent", "frequent")
WORKLOADS = ("vote", "nexmark")
#: the causal regime's single failures, by whether it has standbys: (seconds restoring
#: the state, seconds replaying the parents' logs) each (``RecoveryReport`` has neither)
SPLITS: dict[bool, list[tuple[float, float]]] = {}


@dataclass
class Result:
    regime: str
    votes_per_s: float = 0.0
    votes_per_cpu_s: float = 0.0     # votes per CPU second of this process
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    checkpoint_bytes: int = 0
    #: the causal regime: determinant bytes per message, and messages (``determinant_bytes``)
    determinants: tuple[float, int] | None = None
    #: regimes with tree clocks: clock bytes per message and messages counted, on the
    #: warm-up database (``count_clock_bytes``)
    clock_bytes: tuple[float, int] | None = None
    #: scenario -> (seconds until the views are right, nodes set back, messages resent,
    #: the share of that time lookups were answered within 20 ms: ``failure``)
    failures: dict[str, tuple[float, int, int, float]] = field(default_factory=dict)
    #: the uncoordinated and cic regimes' own counts at the end of the steady run
    #: (``protocol_figures``), None for the others
    protocol: dict[str, float] | None = None
    frequent: Frequent | None = None
    #: at ``--load`` of the slowest regime's maximum: (rows/s offered, rows/s achieved,
    #: p50 ms, p99 ms) of each row's propagation from when it was scheduled
    loaded: tuple[float, float, float, float] | None = None


@dataclass
class Frequent:
    """The frequent scenario of one regime."""
    failures: int
    recovery_s: float                # median seconds of a recovery (recover + wait)
    per_s: float                     # rows written per second over the whole run
    p50_ms: float                    # inserts' latency (recoveries not counted)
    p99_ms: float
    max_ms: float
    #: the share of the recoveries' time in which a read was answered within 20 ms
    #: (``ReadProbe``)
    reads: float
    #: (seconds since the start, the insert's latency in ms) of every insert, the
    #: seconds since the start at which each failure happened, and (start, ms) of each
    #: recovery (for the plot)
    series: list[tuple[float, float]] = field(default_factory=list)
    failed_at: list[float] = field(default_factory=list)
    recovered: list[tuple[float, float]] = field(default_factory=list)


#: regimes run with a setting, by the name the harness gives them: (regime, standby,
#: determinant sharing depth)
VARIANTS = {"causal-standby": ("causal", True, None), "causal-depth1": ("causal", False, 1)}
#: falkirk with one policy for every node, by the name the harness gives it (plain
#: ``falkirk``: stateful nodes lazy, stateless ones ephemeral)
FALKIRK: dict[str, dict[str, str]] = {
    "falkirk-eager": {"default": "eager"}, "falkirk-lazy": {"default": "lazy"},
    "falkirk-ephemeral": {}}     # (stateless nodes ephemeral: ``_connect``)


def _connect(regime: str, shards: int, barrier_every: int | None):
    if regime == "coordinated":
        return connect(shards=shards, regime=regime, barrier_every=barrier_every)
    if regime in FALKIRK:
        db = connect(shards=shards, regime=FALKIRK[regime] or "falkirk")
        if regime == "falkirk-ephemeral":
            db.runtime.defaults["stateless"] = "ephemeral"
        return db
    if regime in VARIANTS:
        name, standby, depth = VARIANTS[regime]
        return connect(shards=shards, regime=name, standby=standby, determinant_depth=depth)
    return connect(shards=shards, regime=regime)


def checkpoint_bytes(db) -> int:
    """Bytes the regime's checkpoint store holds (0 without one)."""
    rt = db.runtime
    store = (getattr(rt, "epochs", None) or getattr(rt, "store", None)
             or getattr(rt, "ckpts", None))
    standbys = getattr(rt, "standbys", None)       # (the causal regime's warm copies)
    return (0 if store is None else deep_size(store)) + (deep_size(standbys) if standbys else 0)


def determinant_bytes(db) -> tuple[float, int] | None:
    """The causal regime's determinant bytes piggybacked per message sent by a node (not
    a base), and the messages; None in another regime."""
    rt = db.runtime
    if not hasattr(rt, "det_bytes"):
        return None
    return rt.det_bytes / max(1, rt.messages_sent), rt.messages_sent


def count_clock_bytes(db) -> list[int]:
    """From now on, count what each message ``db``'s runtime delivers carries for tree
    clocks (module docstring): [bytes, messages with a clock]. Wraps the runtime's
    ``deliver``, so it is for the untimed warm-up only."""
    counts = [0, 0]
    rt = db.runtime
    deliver = rt.deliver

    def counted(m) -> None:
        if m.clock is not None:
            counts[0] += len(packb(list(m.clock))) + len(packb(m.low))
            counts[1] += 1
        deliver(m)

    rt.deliver = counted
    return counts


Bed = VoteBed | nexmark.NexmarkBed


def protocol_figures(db) -> dict[str, float] | None:
    """The uncoordinated, cic and falkirk regimes' counts (runtime/uncoordinated.py,
    runtime/falkirk.py): checkpoints (falkirk: spans) taken and forced, messages sent and
    the bytes piggybacked on each (cic: the sender's index), messages the channel logs
    hold (falkirk: its unlogged edges' times are not counted); None in another regime."""
    rt = db.runtime
    if not isinstance(rt, UncoordinatedRuntime):
        return None
    indexed = getattr(rt, "piggybacked", 0)
    return {"checkpoints": rt.taken, "forced": rt.forced, "messages": rt.logged,
            "bytes_per_message": INDEX_BYTES if indexed else 0,
            "logged_held": sum(len(q) for q in rt.logs.values())}


Inserts = list[list[tuple[Any, list[tuple]]]]


def _loaded(regime: str, articles: int, votes: int, batch: int, shards: int,
            barrier_every: int | None, workload: str,
            clocks_counted: bool) -> tuple[Bed, Inserts, list[int] | None]:
    """The regime's database set up, and the inserts of ``votes`` votes (for
    ``nexmark``: events) in inserts of ``batch`` to write into it: per insert, the
    (table, rows) pairs; with ``clocks_counted``, the clock bytes counter."""
    db = _connect(regime, shards, barrier_every)
    counts = count_clock_bytes(db) if clocks_counted else None
    bed: Bed
    if workload == "nexmark":
        nexmark.setup(db)
        bed = nexmark.NexmarkBed(db)
        inserts = [[(db.table(t), rows) for t, rows in insert if rows]
                   for insert in bed.batches(votes, batch)]
    else:
        workloads.setup(db, articles)
        data = workloads.votes(votes, articles)
        vote = db.table("vote")
        inserts = [[(vote, [tuple(r) for r in data[i:i + batch].tolist()])]
                   for i in range(0, votes, batch)]
        bed = VoteBed(db, articles, None, np.bincount(data[:, 0], minlength=articles), [data])
    return bed, inserts, counts


def _steady_result(regime: str, db, votes: int, lat: list[float], cpu: float,
                   counts: list[int] | None) -> Result:
    res = Result(regime, votes / sum(lat), votes / cpu, float(np.percentile(lat, 50)) * 1e3,
                 float(np.percentile(lat, 99)) * 1e3, checkpoint_bytes(db))
    res.determinants = determinant_bytes(db)
    res.protocol = protocol_figures(db)
    if counts is not None and counts[1]:
        res.clock_bytes = (counts[0] / counts[1], counts[1])
    return res


def steady(regime: str, articles: int, votes: int, batch: int, shards: int,
           barrier_every: int | None, workload: str = "vote",
           clocks_counted: bool = False) -> tuple[Bed, Result]:
    """The regime's database loaded with ``votes`` votes (for ``nexmark``: events) in
    inserts of ``batch``, each insert timed; the bed the failure scenarios go on with.
    ``clocks_counted``: count the clock bytes of its messages (``Result.clock_bytes``;
    the warm-up's: it slows the inserts)."""
    bed, inserts, counts = _loaded(regime, articles, votes, batch, shards, barrier_every,
                                   workload, clocks_counted)
    lat = []
    gc.collect()
    cpu = time.process_time()
    for insert in inserts:
        t0 = time.perf_counter()
        for table, rows in insert:
            table.insert(rows)
        lat.append(time.perf_counter() - t0)
    bed.db.wait()
    cpu = time.process_time() - cpu
    return bed, _steady_result(regime, bed.db, votes, lat, cpu, counts)


def steady_paired(regimes: list[str], articles: int, votes: int, batch: int, shards: int,
                  barrier_every: int | None,
                  workload: str = "vote") -> tuple[dict[str, Bed], list[Result]]:
    """``steady`` for every regime at once: their databases side by side in this
    process, each insert written to each database in turn (the first regime of each
    turn rotated), each timed. This machine's speed drifts by up to 2x over minutes;
    whole runs in turns (``run``'s turns) see it as a difference between regimes, where
    inserts in turns, 20-60 ms apart, see the same speed. Python's collector is
    shared: left to itself, a collection comes when any database has allocated enough
    and walks every database's young objects, so the regime that allocates most would
    pay for the others'. So its automatic collections are off meanwhile, and each
    insert ends with a collection of the young generations, timed with it: each regime
    pays for its own young objects, about what its collections walk when it runs alone
    (the old generation's full collections, rare under ``tune_gc``, do not come). What
    stays shared: the caches, which the other databases' inserts leave cold. The beds,
    for the failure scenarios."""
    loaded = {r: _loaded(r, articles, votes, batch, shards, barrier_every, workload, False)
              for r in regimes}
    lat: dict[str, list[float]] = {r: [] for r in regimes}
    cpu = dict.fromkeys(regimes, 0.0)
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    n = len(next(iter(loaded.values()))[1])
    try:
        for i in range(n):
            k = i % len(regimes)
            for regime in regimes[k:] + regimes[:k]:
                c0, t0 = time.process_time(), time.perf_counter()
                for table, rows in loaded[regime][1][i]:
                    table.insert(rows)
                if collecting:
                    gc.collect(1)
                lat[regime].append(time.perf_counter() - t0)
                cpu[regime] += time.process_time() - c0
    finally:
        if collecting:
            gc.enable()
    beds = {}
    results = []
    for regime, (bed, _, _) in loaded.items():
        bed.db.wait()
        beds[regime] = bed
        results.append(_steady_result(regime, bed.db, votes, lat[regime], cpu[regime], None))
    return beds, results


#: the most rows one insert of the open loop takes (a generator that fell behind sends
#: what is due in inserts of this many, as overhead.py's does)
MAX_INSERT = 2000


def at_load(bed: Bed, rate: float, seconds: float) -> tuple[float, float, float, float]:
    """Rows offered at ``rate`` a second for ``seconds`` (open loop: the rows due when
    the previous insert returned go in one insert); (rate offered, rate achieved, p50
    and p99 ms of a row's propagation from its scheduled time)."""
    total = max(1, int(rate * seconds))
    lat = []
    clock = time.perf_counter
    gc.collect()
    t0 = clock()
    i = 0
    while i < total:
        now = clock() - t0
        due = min(total, int(now * rate) + 1, i + MAX_INSERT)
        if due <= i:
            time.sleep(max(0.0, i / rate - now))
            continue
        _write(bed, due - i, due - i)
        done = clock() - t0
        lat.append(done - np.arange(i, due) / rate)
        i = due
    elapsed = clock() - t0
    ms = np.concatenate(lat) * 1e3
    return rate, total / elapsed, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def _write(bed: Bed, n: int, per_insert: int = 100) -> None:
    if isinstance(bed, VoteBed):
        write_votes(bed, n, per_insert)
    else:
        bed.write(n, per_insert)


def _check(bed: Bed) -> None:
    """Every view right (AssertionError otherwise): the vote view against the counts
    kept in Python, NEXMark's views against DuckDB."""
    if isinstance(bed, VoteBed):
        check(bed, sample=None)
    else:
        bed.check()


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


class ReadProbe:
    """A reader beside a recovery, as a client of the views would be: in its own
    thread, a read every ``every`` s (a sleep, so it takes little from the recovery's
    thread): ``read(rng)``, for the vote view a ``lookup`` of a random article, for
    NEXMark (whose views take no key) ``all()`` of the ten highest bids
    (``probe_read``). ``share`` is the fraction of the given spans of time (the
    recoveries) in which a read was answered within ``within`` s: a read issued at
    ``a`` and answered at ``b`` later than that leaves ``[a, b - within]`` unanswered (a
    read the recovery holds back, the database's lock held, waits for its end). A time
    share, not a count of reads: a held-back read stops the thread, so counts would
    say little. Python hands a waiting thread the interpreter every 5 ms, so an
    answered read may take that long."""

    def __init__(self, read: Callable[[np.random.Generator], object],
                 every: float = 0.001) -> None:
        self.read, self.every = read, every
        self.done: list[tuple[float, float]] = []       # (issued, answered)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="read-probe")
        self._thread.start()

    def _run(self) -> None:
        rng = np.random.default_rng(5)
        read, clock, done = self.read, time.perf_counter, self.done
        while not self._stop.wait(self.every):
            t = clock()
            read(rng)
            done.append((t, clock()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def share(self, spans: list[tuple[float, float]], within: float = 0.02) -> float:
        """The answered share of the time in ``spans`` ((start, end) pairs, apart)."""
        total = sum(t1 - t0 for t0, t1 in spans)
        if total <= 0:
            return float("nan")
        held = sum(max(0.0, min(b - within, t1) - max(a, t0))
                   for t0, t1 in spans for a, b in self.done)
        return 1.0 - held / total


def probe_read(bed: Bed) -> Callable[[np.random.Generator], object]:
    """What ``ReadProbe`` reads on ``bed``: a random article of the vote view, or the
    NEXMark view of the ten highest bids, whole."""
    if isinstance(bed, VoteBed):
        view, keys = bed.db.view("ArticleWithVoteCount"), bed.articles
        return lambda rng: view.lookup(int(rng.integers(keys)))
    top = bed.db.view("top_bids")
    return lambda rng: top.all()


def failure(bed: Bed, scenario: str, down: int) -> tuple[float, int, int, float]:
    """Fail the scenario's shards, write ``down`` votes, recover; (seconds until every
    view is right, nodes set back, messages resent, the share of that time in which
    a read was answered within 20 ms: ``ReadProbe``). The views are checked after."""
    db = bed.db
    nodes = stateful_shards(db, scenario)
    _write(bed, 1000, 100)
    for n in nodes:
        db.fail(n)
    _write(bed, down, 100)
    gc.collect()
    probe = ReadProbe(probe_read(bed))
    t0 = time.perf_counter()
    reports = db.recover()
    db.wait()
    t1 = time.perf_counter()
    seconds = t1 - t0
    probe.stop()
    reads = probe.share([(t0, t1)])
    _check(bed)
    done = getattr(db.runtime, "last_recovery", None)      # (the causal regime's)
    if scenario == "single" and done and nodes[0] in done:
        SPLITS.setdefault(db.runtime.standby, []).append(
            (done[nodes[0]]["restore_seconds"], done[nodes[0]]["replay_seconds"]))
    touched = set(nodes)
    for r in reports:
        touched.update(r.purged)
        touched.update(r.rolled_back)
    return seconds, len(touched), sum(r.replayed_messages for r in reports), reads


def frequent(bed: Bed, seconds: float, every: float, down: int,
             per_insert: int = 100) -> Frequent:
    """Writes for ``seconds``; every ``every`` seconds the next stateful shard in turn
    fails, ``down`` rows are written while it is down, and it is recovered at once.
    A ``ReadProbe`` reads throughout: the share of the recoveries' time in which a read
    was answered within 20 ms. The views are checked at the end."""
    db = bed.db
    graph = db.graph()
    kinds = ("aggregate", "join", "extremum", "topk")
    victims = [n["id"] for k in kinds for n in graph if n["kind"] == k]
    series: list[tuple[float, float]] = []
    failed_at: list[float] = []
    recovered: list[tuple[float, float]] = []
    spans: list[tuple[float, float]] = []     # the recoveries, for the probe
    rows = 0
    gc.collect()
    probe = ReadProbe(probe_read(bed))
    start = time.perf_counter()
    due = start + every
    def insert() -> None:
        nonlocal rows
        t0 = time.perf_counter()
        _write(bed, per_insert, per_insert)
        series.append((t0 - start, (time.perf_counter() - t0) * 1e3))
        rows += per_insert

    while (now := time.perf_counter()) - start < seconds:
        if now >= due and victims:
            node = victims[len(failed_at) % len(victims)]
            failed_at.append(now - start)
            db.fail(node)
            for _ in range(0, down, per_insert):    # (written while it is down)
                insert()
            t0 = time.perf_counter()
            db.recover()
            db.wait()
            t1 = time.perf_counter()
            spans.append((t0, t1))
            recovered.append((t0 - start, (t1 - t0) * 1e3))
            due = time.perf_counter() + every
            continue
        insert()
    total = time.perf_counter() - start
    probe.stop()
    _check(bed)
    lat = [ms for _, ms in series]
    took = statistics.median(ms for _, ms in recovered) / 1e3 if recovered else 0.0
    return Frequent(len(failed_at), took, rows / total, float(np.percentile(lat, 50)),
                    float(np.percentile(lat, 99)), max(lat), probe.share(spans), series,
                    failed_at, recovered)


def run(regimes: list[str], scenarios: list[str], articles: int, votes: int, batch: int,
        shards: int, down: int, barrier_every: int | None, rounds: int = 3,
        steady_rounds: int = 1, workload: str = "vote", frequent_seconds: float = 10.0,
        every: float = 2.0, load: float = 0.8, load_seconds: float = 5.0,
        paired: bool = False) -> list[Result]:
    """The steady scenario ``steady_rounds`` times, the regimes in turns (the first one
    of each turn rotated), medians shown; with ``paired``, once, every regime's
    database side by side and the inserts in turns (``steady_paired``). Then, on each
    regime's database of the last turn: with ``steady``, ``load_seconds`` at ``load`` of
    the slowest regime's median maximum (``at_load``; ``load=0`` skips it); each failure
    scenario ``rounds`` times (the median of its seconds; its nodes and messages from
    the median round)."""
    clock_bytes = {}
    for regime in regimes:       # warmed up first (kernels compiled, caches filled)
        warm, res = steady(regime, 1000, min(20 * batch, votes), batch, shards, barrier_every,
                           workload, clocks_counted=True)
        clock_bytes[regime] = res.clock_bytes
        warm.db.close()
    turns: dict[str, list[Result]] = {r: [] for r in regimes}
    beds: dict[str, Bed] = {}       # the last turn's, kept for what follows
    if paired:
        beds, paired_results = steady_paired(regimes, articles, votes, batch, shards,
                                             barrier_every, workload)
        for res in paired_results:
            turns[res.regime].append(res)
    for turn in range(0 if paired else steady_rounds):
        order = regimes[turn % len(regimes):] + regimes[:turn % len(regimes)]
        for regime in order:
            bed, res = steady(regime, articles, votes, batch, shards, barrier_every,
                              workload)
            turns[regime].append(res)
            if turn == steady_rounds - 1:
                beds[regime] = bed
            else:
                bed.db.close()
            del bed
            gc.collect()
    out = []
    for regime in regimes:
        done = turns[regime]
        last = done[-1]
        last.votes_per_s = statistics.median(r.votes_per_s for r in done)
        last.votes_per_cpu_s = statistics.median(r.votes_per_cpu_s for r in done)
        last.p50_ms = statistics.median(r.p50_ms for r in done)
        last.p99_ms = statistics.median(r.p99_ms for r in done)
        last.clock_bytes = clock_bytes[regime]
        out.append(last)
    rate = load * min(r.votes_per_s for r in out)
    for res in out:
        bed = beds.pop(res.regime)
        if "steady" in scenarios and load > 0:
            res.loaded = at_load(bed, rate, load_seconds)
        for s in scenarios:
            if s == "frequent":
                res.frequent = frequent(bed, frequent_seconds, every, down)
            elif s != "steady":
                runs = sorted(failure(bed, s, down) for _ in range(rounds))
                res.failures[s] = runs[len(runs) // 2]
        bed.db.close()
        del bed
        gc.collect()
        print(f"  {res.regime} done (load {os.getloadavg()[0]:.1f})", flush=True)
    return out


def table(results: list[Result], scenarios: list[str], unit: str = "votes") -> list[str]:
    """The Markdown table of ``results`` (``unit``: what a row written is)."""
    head = "| regime |"
    rule = "| --- |"
    if "steady" in scenarios:
        head += f" {unit}/s (per CPU s) | p50 / p99 propagation | checkpoint bytes |"
        rule += " ---: | ---: | ---: |"
    loaded = [r.loaded for r in results if r.loaded is not None]
    if loaded:
        head += (f" at {loaded[0][0]:,.0f} {unit}/s offered: p50 / p99 propagation"
                 " (achieved) |")
        rule += " ---: |"
    fails = [s for s in scenarios if s not in ("steady", "frequent")]
    for s in fails:
        head += (f" {s}: views right after | nodes set back | messages resent |"
                 " reads answered |")
        rule += " ---: | ---: | ---: | ---: |"
    if "frequent" in scenarios:
        head += (f" frequent: failures, median recovery | {unit}/s | insert p50 / p99 /"
                 " max | reads answered |")
        rule += " ---: | ---: | ---: | ---: |"
    lines = [head, rule]
    for r in results:
        row = f"| {r.regime} |"
        if "steady" in scenarios:
            row += (f" {r.votes_per_s:,.0f} ({r.votes_per_cpu_s:,.0f}) |"
                    f" {r.p50_ms:.2f} / {r.p99_ms:.2f} ms |"
                    f" {r.checkpoint_bytes / 1e6:.1f} MB |")
        if loaded:
            _, got, p50, p99 = r.loaded or (0.0, 0.0, 0.0, 0.0)
            row += f" {p50:.2f} / {p99:.2f} ms ({got:,.0f}/s) |"
        for s in fails:
            sec, nodes, msgs, reads = r.failures[s]
            row += (f" {sec:.3f} s | {nodes} | {msgs:,} |"
                    f" {'-' if reads != reads else f'{reads:.0%}'} |")
        if r.frequent is not None:
            f = r.frequent
            row += (f" {f.failures}, {f.recovery_s:.3f} s | {f.per_s:,.0f} |"
                    f" {f.p50_ms:.2f} / {f.p99_ms:.1f} / {f.max_ms:.0f} ms |"
                    f" {'-' if f.reads != f.reads else f'{f.reads:.0%}'} |")
        lines.append(row)
    proto = [r for r in results if r.protocol is not None]
    if proto and "steady" in scenarios:
        lines += ["", "| regime | checkpoints (forced) | messages | bytes piggybacked per "
                  "message | messages the logs hold |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in proto:
            c = cast(dict, r.protocol)
            lines.append(f"| {r.regime} | {c['checkpoints']:,} ({c['forced']:,}) | "
                         f"{c['messages']:,} | {c['bytes_per_message']} | {c['logged_held']:,} |")
    return lines


def plot(results: list[Result], scenarios: list[str], pattern: str, title: str) -> list[str]:
    """``pattern``'s ``*`` as ``recovery`` (seconds until the views are right, per
    failure scenario and regime) and, with the frequent scenario, ``frequent`` (each
    regime's insert latencies over time, its failures marked); the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if "*" not in pattern:
        raise ValueError(f"--plot takes a file name with a * (for the plot's name), got "
                         f"{pattern!r}")
    written = []
    fails = [s for s in scenarios if s not in ("steady", "frequent")]
    if fails:
        fig, ax = plt.subplots(figsize=(7, 3.6))
        width = 0.8 / len(results)
        for i, r in enumerate(results):
            xs = [j + i * width for j in range(len(fails))]
            ax.bar(xs, [r.failures[s][0] for s in fails], width, label=r.regime)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(fails))], fails)
        ax.set_yscale("log")
        ax.set_ylabel("seconds until every view is right")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = pattern.replace("*", "recovery")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    freq = [r for r in results if r.frequent is not None]
    if freq:
        fig, axes = plt.subplots(len(freq), 1, figsize=(7, 1.7 * len(freq) + 0.6),
                                 sharex=True, squeeze=False)
        for ax, r in zip(axes[:, 0], freq):
            assert r.frequent is not None
            t, ms = zip(*r.frequent.series) if r.frequent.series else ((), ())
            ax.plot(t, ms, ".", markersize=2)
            if r.frequent.recovered:
                t, ms = zip(*r.frequent.recovered)
                ax.plot(t, ms, "x", color="red", markersize=5)
            for at in r.frequent.failed_at:
                ax.axvline(at, color="red", linewidth=0.6)
            ax.set_yscale("log")
            ax.set_ylabel(f"{r.regime}\nms", fontsize=8)
        axes[-1, 0].set_xlabel("seconds (a line: a stateful shard fails; a dot: an "
                               "insert; a cross: the recovery, at its start)")
        axes[0, 0].set_title(title, fontsize=9)
        fig.tight_layout()
        path = pattern.replace("*", "frequent")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench regimes", description=__doc__.partition("\n\n")[0])
    p.add_argument("--regimes", default=",".join(BUILT),
                   help=f"a comma list of {', '.join(BUILT)} (default: all built), or "
                        "causal-standby (causal with standby=True), causal-depth1 "
                        "(determinant_depth=1), falkirk-eager, falkirk-lazy (every node on "
                        "that policy), falkirk-ephemeral (stateless nodes ephemeral)")
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
    p.add_argument("--load", type=float, default=0.8,
                   help="with steady: the open-loop load point, as a fraction of the slowest "
                        "regime's maximum (default 0.8; 0 skips it)")
    p.add_argument("--load-seconds", type=float, default=None,
                   help="seconds of the load point per regime (default 10; 3 with --quick)")
    p.add_argument("--barrier-every", type=int, default=None,
                   help="writes between the coordinated regime's epochs")
    p.add_argument("--workload", choices=WORKLOADS, default="vote",
                   help="the vote view (default) or NEXMark-shaped queries (--votes: events)")
    p.add_argument("--frequent-seconds", type=float, default=None,
                   help="length of the frequent scenario (default 30; 10 with --quick)")
    p.add_argument("--every", type=float, default=None,
                   help="seconds between failures in the frequent scenario (default 3; 2 "
                        "with --quick)")
    p.add_argument("--plot", default=None, metavar="PATTERN",
                   help="write plots to PATTERN with * replaced by recovery and frequent "
                        "(e.g. 'docs/img/regimes-*.png')")
    p.add_argument("--paired", action="store_true",
                   help="steady: every regime's database side by side, each insert "
                        "written to each in turn (the machine's drift cancels), once, "
                        "instead of whole runs in turns")
    p.add_argument("--tune-gc", action="store_true",
                   help="call noria_py.tune_gc() first (by default Python's own collection "
                        "policy, whose full collections decide NEXMark's steady figures)")
    p.add_argument("--cluster", action="store_true",
                   help="run the regimes a cluster offers on a real one instead (noria-py "
                        "serve --regime NAME; noria_tools/regimescluster.py): throughput "
                        "and the time from a worker's SIGKILL until the views are right")
    a = p.parse_args(argv)
    regimes = a.regimes.split(",") if a.regimes != "all" else list(BUILT)
    if a.cluster:
        from noria_tools import regimescluster
        articles = a.articles or 10_000
        votes = a.votes or (20_000 if a.quick else 100_000)
        print(f"bench regimes --cluster: vote workload, {articles:,} articles, {votes:,} "
              f"votes in inserts of {a.batch:,}, {a.shards} shards, 2 workers and a spare; "
              f"the COUNT's shard 0's worker killed {a.rounds} times, {a.down:,} votes "
              f"written while it is lost; load {os.getloadavg()[0]:.1f} at the start",
              flush=True)
        try:
            regimescluster.run(regimes, articles, votes, a.batch, a.shards, a.rounds, a.down,
                               a.barrier_every)
        except RegimeError as exc:
            print(f"noria-py bench regimes: {exc}")
            return 2
        print(f"(load {os.getloadavg()[0]:.1f} at the end)")
        return 0
    scenarios = a.scenarios.split(",")
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        p.error(f"unknown scenario(s) {bad}; choose from {', '.join(SCENARIOS)}")
    if a.plot is not None and "*" not in a.plot:
        p.error(f"--plot takes a file name with a * (replaced by the plot's name), got "
                f"{a.plot!r}")
    nexmark_run = a.workload == "nexmark"
    articles = a.articles or (10_000 if a.quick else 100_000)
    votes = a.votes or ((20_000 if a.quick else 200_000) if nexmark_run
                        else (100_000 if a.quick else 1_000_000))
    unit = "events" if nexmark_run else "votes"
    seconds = a.frequent_seconds or (10.0 if a.quick else 30.0)
    every = a.every or (2.0 if a.quick else 3.0)
    barriers = a.barrier_every or (16 if a.quick else 128)
    steady_rounds = a.steady_rounds or 3
    load_seconds = a.load_seconds or (3.0 if a.quick else 10.0)
    what = (f"NEXMark-shaped workload, {votes:,} events" if nexmark_run
            else f"vote workload, {articles:,} articles, {votes:,} votes")
    print(f"bench regimes: {what} in inserts of {a.batch:,}, {a.shards} shards; "
          f"coordinated barriers every {barriers} writes; steady: "
          + ("the databases side by side, each insert to each in turn" if a.paired else
             f"median of {steady_rounds} turn(s), the regimes in turns")
          + (f", then {load_seconds:g} s at {a.load:.0%} of the slowest maximum"
             if "steady" in scenarios and a.load > 0 else "")
          + f"; {a.down:,} {unit} written while nodes are down, "
          f"median of {a.rounds} failures"
          + (f"; frequent: {seconds:g} s, a failure every {every:g} s"
             if "frequent" in scenarios else "")
          + ("; tune_gc()" if a.tune_gc else "")
          + f"; load {os.getloadavg()[0]:.1f} at the start", flush=True)
    if a.tune_gc:
        tune_gc()
    start = time.perf_counter()
    try:
        results = run(regimes, scenarios, articles, votes, a.batch, a.shards, a.down,
                      barriers, a.rounds, steady_rounds, a.workload, seconds, every,
                      a.load, load_seconds, a.paired)
    except Exception as exc:       # (a RegimeError names the regime; say it plainly)
        from noria_py.errors import Error
        if isinstance(exc, Error):
            print(f"noria-py bench regimes: {exc}")
            return 2
        raise
    print("\n".join(table(results, scenarios, unit)))
    for standby, split in sorted(SPLITS.items()):
        print(f"causal{' with standby' if standby else ''}, single: restoring the state "
              f"{statistics.median(x for x, _ in split) * 1e3:.2f} ms, replaying "
              f"{statistics.median(y for _, y in split) * 1e3:.1f} ms (medians)")
    for r in results:
        if r.determinants is not None and "steady" in scenarios:
            print(f"{r.regime}: {r.determinants[0]:.1f} determinant bytes piggybacked per "
                  f"message ({r.determinants[1]:,} messages sent by operators)")
        if r.clock_bytes is not None:
            print(f"{r.regime}: {r.clock_bytes[0]:.1f} tree-clock bytes per message "
                  f"(diff path and low mark, msgpack; {r.clock_bytes[1]:,} messages of "
                  "the warm-up)")
    if a.plot is not None:
        title = (f"{what}, {a.shards} shards; load {os.getloadavg()[0]:.1f}")
        for path in plot(results, scenarios, a.plot, title):
            print(f"wrote {path}")
    print(f"({time.perf_counter() - start:.0f} s in all; load {os.getloadavg()[0]:.1f} at "
          "the end)")
    return 0
