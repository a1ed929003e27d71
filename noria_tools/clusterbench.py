"""``noria-py bench cluster``: the vote workload on a real cluster (controller and
workers in their own processes, the client in this one).

Measures, for each worker count: vote throughput, the controller's share of the
cluster's CPU time during that load (controller over controller plus workers, from
``/proc``; Linux: ``ctrl CPU`` from the processes' clock ticks of 10 ms, ``ctrl ns``
from their threads' nanoseconds on a CPU, and ``ctrl ms``, the controller's own),
write-propagation latency (a vote
written until the view shows it, p50 and p99), reads (``lookup`` p50 over 2,000 random
keys, and ``lookup_many`` of ``--many`` random keys a call, in keys/s: at the readers'
workers, ``runtime/cluster/reads.py``), and the time from a SIGKILL of the
worker hosting the vote count until the views are right again, split into detection
and recovery (with ``--kill-load``, each kill inside another client's load, and the
longest a write of it waited for its acknowledgement from the kill on). With
``--subscriber``, also a subscription to the vote view: the time
from a vote's acknowledgement until the subscriber has the change (p50), and the vote
throughput with a subscriber over without (the load's batches alternate between the
two, a quarter at a time, so the VM's drift falls on both).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from typing import cast

import numpy as np
import pyarrow as pa

from noria_py import connect
from noria_py.runtime.cluster.launch import Cluster
from noria_tools import workloads


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux: ``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _run_ns(pid: int) -> int:
    """Nanoseconds on a CPU so far of a process's live threads (Linux: each one's
    ``/proc/PID/task/TID/schedstat``; a thread ended meanwhile no longer counts): the
    clock ticks of ``/proc/PID/stat`` are 10 ms, and the controller takes 10-30 ms
    of CPU in the whole load of 100,000 votes."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def _cpu(controller: int) -> tuple[float, float, int, int]:
    """CPU seconds so far of the controller and of its worker processes, and their
    nanoseconds on a CPU by ``_run_ns`` (Linux)."""
    try:
        workers = _children(controller)
        return (_cpu_seconds(controller), sum(_cpu_seconds(p) for p in workers),
                _run_ns(controller), sum(_run_ns(p) for p in workers))
    except OSError:
        return 0.0, 0.0, 0, 0


def _until(pred, timeout: float = 60.0) -> float:
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("the view did not catch up")
    return time.perf_counter() - t0


def _with_subscriber(db, vote, chunks: list, samples: int) -> dict:
    """The load again, a quarter without a subscriber, a quarter with, and so on; then
    the subscriber's latency, one vote at a time."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    quarter = max(1, len(chunks) // 4)
    sub = None
    for i in range(4):
        on = i % 2 == 1
        if on:
            sub = db.subscribe(workloads.VIEW_NAME, callback=lambda change: None)
        t0 = time.perf_counter()
        part = chunks[i * quarter:(i + 1) * quarter]
        for c in part:
            vote.insert(c)
        db.wait()
        rates[on].append(sum(map(len, part)) / (time.perf_counter() - t0))
        if sub is not None:
            sub.close()
            sub = None
    arrived = threading.Event()

    def seen(change) -> None:
        arrived.set()
    sub = db.subscribe(workloads.VIEW_NAME, callback=seen)
    time.sleep(0.5)
    lat = []
    for i in range(samples):
        arrived.clear()
        vote.insert([(i % 100, 1 << 31)])
        t1 = time.perf_counter()
        if not arrived.wait(30):
            raise TimeoutError("the subscriber did not get the change")
        lat.append((time.perf_counter() - t1) * 1000)
    sub.close()
    return {"sub_p50": float(np.percentile(lat, 50)),
            "sub_ratio": statistics.mean(rates[True]) / statistics.mean(rates[False])}


def _reads(view, articles: int, many: int) -> tuple[float, float]:
    """``lookup`` p50 in µs (2,000 random keys, after 200 to warm up) and
    ``lookup_many`` keys/s (calls of ``many`` random keys, for about a second)."""
    rng = np.random.default_rng(3)
    for k in rng.integers(0, articles, 200).tolist():
        view.lookup(k)
    read = []
    for k in rng.integers(0, articles, 2000).tolist():
        t1 = time.perf_counter_ns()
        view.lookup(k)
        read.append((time.perf_counter_ns() - t1) / 1000)
    done, t0 = 0, time.perf_counter()
    while done < many * 3 or time.perf_counter() - t0 < 1.0:
        keys = rng.integers(0, articles, many).tolist()
        view.lookup_many(keys)
        done += many
    rate = done / (time.perf_counter() - t0)
    return float(np.percentile(read, 50)), rate


def _check_counts(found: list, data: np.ndarray, articles: int) -> None:
    """The vote view's rows of every article (``lookup_many``) hold the votes' counts."""
    want = np.bincount(data[:, 0], minlength=articles)
    got = [rows[0][2] or 0 if rows else 0 for rows in found]
    if got != want.tolist():
        raise AssertionError("the vote view's counts after the load are wrong")


def one_embedded(articles: int, votes: int, batch: int, many: int) -> dict:
    """The cluster's load and reads on the embedded engine in this process (``connect()``):
    the same votes in the same batches through ``insert`` (the first untimed), then
    ``wait()``, checked against the votes' counts; ``_reads``' figures after."""
    db = connect()
    workloads.setup(db, articles)
    data = workloads.votes(votes, articles)
    chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, votes, batch)]
    vote, view = db.table("vote"), db.view(workloads.VIEW_NAME)
    vote.insert(chunks[0])
    t0 = time.perf_counter()
    for c in chunks[1:]:
        vote.insert(c)
    db.wait()
    tput = (votes - len(chunks[0])) / (time.perf_counter() - t0)
    _check_counts(view.lookup_many(range(articles)), data, articles)
    read_p50, many_rate = _reads(view, articles, many)
    db.close()
    return {"tput": tput, "read_p50": read_p50, "many": many_rate}


def one_cluster(workers: int, articles: int, votes: int, batch: int, samples: int,
                kills: int, strategy: str, shards: int = 1, checkpoints: bool = True,
                subscriber: bool = False, many: int = 10_000, ray: str | None = None,
                channels: str | None = None, arrow: bool = False,
                writes: str | None = None, data_dir: str | None = None,
                partial: bool = False, placement: str | None = None,
                kill_load: bool = False, server_log: str | None = None,
                kill_kind: str = "aggregate") -> dict:
    """``server_log``: the server's log (its warnings: workers lost, recoveries) is
    written to this file. ``data_dir``: served with ``--data-dir`` a new directory under it (left there).
    ``partial``: served with ``--partial`` (the vote view's reader, join and COUNT hold
    only the keys read: the load's votes are dropped at holes, and the check's first
    read of every key fills them, timed as ``fill``: keys/s). ``placement``: served
    with ``--placement`` (None: the server's default, apart). ``kill_load``: each kill
    falls inside a load, another client inserting batches of ``batch`` votes from a
    second before it until a second after the view is right: the longest a write of
    it waited for its acknowledgement from the kill on is reported (``ack max``).
    ``kill_kind``: each kill is of the worker hosting a node shard of this kind (the
    first in the graph's order; "aggregate", the vote view's COUNT, by default)."""
    extra = ("--recovery", strategy) + (() if checkpoints else ("--no-checkpoints",))
    if data_dir is not None:
        os.makedirs(data_dir, exist_ok=True)
        extra += ("--data-dir", tempfile.mkdtemp(dir=data_dir))
    if channels is not None:
        extra += ("--channels", channels)
    if writes is not None:
        extra += ("--writes", writes)
    if partial:
        extra += ("--partial",)
    if placement is not None:
        extra += ("--placement", placement)
    if ray is not None:             # the workers as Ray actors (placement.py)
        extra += ("--ray",) + (() if ray == "local" else (ray,))
    with Cluster(workers=workers, shards=shards, extra=extra, log=server_log) as cluster:
        db = connect(cluster.url)
        workloads.setup(db, articles)
        data = workloads.votes(votes, articles)
        chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, votes, batch)]
        vote = db.table("vote")
        view = db.view(workloads.VIEW_NAME)
        tables = ([pa.table({"article_id": data[i:i + batch, 0], "user_id": data[i:i + batch, 1]})
                   for i in range(0, votes, batch)] if arrow else None)
        # the first batch untimed: a server's first Arrow batch also imports what
        # pyarrow loads on first use (pandas: about a second of the controller's CPU)
        if tables is not None:
            vote.insert_arrow(tables[0])
        else:
            vote.insert(chunks[0])
        db.wait()
        cpu0 = _cpu(cluster.proc.pid)
        t0 = time.perf_counter()
        if tables is not None:
            for t in tables[1:]:
                vote.insert_arrow(t)
        else:
            for c in chunks[1:]:
                vote.insert(c)
        db.wait()
        tput = (votes - len(chunks[0])) / (time.perf_counter() - t0)
        cpu1 = _cpu(cluster.proc.pid)
        ctrl, work = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        ctrl_share = ctrl / (ctrl + work) if ctrl + work > 0 else 0.0
        ctrl_ns, work_ns = cpu1[2] - cpu0[2], cpu1[3] - cpu0[3]
        ctrl_share_ns = ctrl_ns / (ctrl_ns + work_ns) if ctrl_ns + work_ns > 0 else 0.0
        t1 = time.perf_counter()
        found = view.lookup_many(range(articles))
        fill = articles / (time.perf_counter() - t1)
        _check_counts(found, data, articles)            # (the load, checked)
        counts: dict[int, int] = {}

        def count(k):
            rows = view.lookup(k)
            return rows[0][2] or 0 if rows else 0

        lat = []
        for i in range(samples):
            k = i % articles
            before = counts.get(k)
            if before is None:
                before = count(k)
            t1 = time.perf_counter()
            vote.insert([(k, 1 << 31)])
            while count(k) != before + 1:
                pass
            lat.append((time.perf_counter() - t1) * 1000)
            counts[k] = before + 1
        subscribed = _with_subscriber(db, vote, chunks, samples) if subscriber else {}
        read_p50, many_rate = _reads(view, articles, many)
        recov = []
        for kill in range(kills):
            time.sleep(3)                      # failures are not back to back: the next
            graph = db.graph()
            victim = next(n for n in graph if n["kind"] == kill_kind)   # spare joins
            k = 7
            want = count(k) + 1
            loader = _KillLoad(cluster.url, batch, kill) if kill_load else None
            n_before = len(db.recoveries())
            t1 = time.perf_counter()
            db.fail(victim["id"])              # SIGKILL of the worker hosting it
            vote.insert([(k, 1 << 31)])
            db.wait()                          # waits for the automatic recovery too
            _until(lambda: count(k) == want)
            total = time.perf_counter() - t1
            ack = loader.stop(t1) if loader is not None else 0.0
            reports = db.recoveries()[n_before:]
            detect = max(getattr(r, "detection_seconds", 0.0) for r in reports)
            kinds = {n["id"]: n["kind"] for n in graph}
            recov.append((detect, sum(r.seconds for r in reports), total,
                          ",".join(sorted({r.strategy for r in reports})), ack,
                          sorted({kinds.get(r.node, "?") for r in reports})))
        writes_at = db.writes
        db.close()
    return {"workers": workers, "tput": tput, "ctrl_share": ctrl_share, "writes": writes_at,
            "ctrl_share_ns": ctrl_share_ns, "ctrl_ms": ctrl_ns / 1e6,
            "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)), "read_p50": read_p50, "many": many_rate,
            "recovery": recov, "fill": fill, **subscribed}


class _KillLoad:
    """Another client inserting batches of ``batch`` votes (to an article no check
    reads) from a second before a kill (``__init__`` returns then) until ``stop``, a
    second after the view is right: how long each write waited for its
    acknowledgement."""

    def __init__(self, url: str, batch: int, kill: int) -> None:
        self.halt = threading.Event()
        self.waits: list[tuple[float, float]] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(url, batch, kill),
                                       daemon=True)
        self.thread.start()
        time.sleep(1.0)

    def _run(self, url: str, batch: int, kill: int) -> None:
        try:
            db = connect(url)
            t = db.table("vote")
            n = 0
            while not self.halt.is_set():
                rows = [(8, (1 << 30) + (kill << 24) + n * batch + j) for j in range(batch)]
                t0 = time.perf_counter()
                t.insert(rows)
                self.waits.append((t0, time.perf_counter() - t0))
                n += 1
            db.close()
        except BaseException as e:             # (re-raised by ``stop``)
            self.errors.append(e)

    def stop(self, killed_at: float) -> float:
        """The longest acknowledgement wait of a write not done before ``killed_at``."""
        time.sleep(1.0)
        self.halt.set()
        self.thread.join(120)
        if self.errors:
            raise self.errors[0]
        return max((d for t0, d in self.waits if t0 + d >= killed_at), default=0.0)


def write_steps(batch: int = 1000, articles: int = 10_000, writes: int = 100) -> None:
    """The controller's CPU per client write of ``batch`` votes, step by step, in this
    process (no cluster): the request as rows against as columns (``insert_columns``),
    each the best of 7 rounds of ``writes`` writes in process time; and the client's making
    of the request. What a step does not show is the fixed cost of a request (system
    calls, thread hand-offs), which ``ctrl CPU`` includes."""
    from noria_py.remote import _int_float_columns, _plain_rows
    from noria_py.runtime.cluster import wire
    from noria_py.storage import codec

    db = connect()
    workloads.setup(db, articles)
    base = db.graph_[db._tables["vote"].node].op
    data = workloads.votes(writes * batch, articles)
    chunks = [[tuple(r) for r in data[i:i + batch].tolist()] for i in range(0, len(data), batch)]

    def best(fn) -> float:
        out = float("inf")
        for _ in range(7):
            t0 = time.process_time()
            for i in range(len(chunks)):
                fn(i)
            out = min(out, (time.process_time() - t0) / len(chunks) * 1e6)
        return out

    as_rows = [codec.packb(["call", i, "insert", ["vote", c]]) for i, c in enumerate(chunks)]
    as_cols = [codec.packb(["call", i, "insert_columns", ["vote", batch, _int_float_columns(c, 2)]])
               for i, c in enumerate(chunks)]
    rows = [codec.unpackb(f)[3][1] for f in as_rows]
    cols = [codec.unpackb(f)[3][2] for f in as_cols]
    batches = [base.prepare(r, ()) for r in rows]
    same = [best(lambda i: base.process(0, batches[i])),
            best(lambda i: codec.packb(["write", "n1", wire.encode_batch(batches[i])])),
            best(lambda i: codec.packb(["ok", i, batch]))]
    steps = [
        ("decode the request (msgpack, NaN scan)", best(lambda i: codec.unpackb(as_rows[i])),
         best(lambda i: codec.unpackb(as_cols[i]))),
        ("check and convert it", best(lambda i: base.prepare(rows[i], ())),
         best(lambda i: base.prepare_arrays(cast("list", base.arrays_from_numbers(
             [wire.decode_numbers(c, batch) for c in cols[i]]))))),
        ("apply it to the controller's copy", same[0], same[0]),
        ("encode the frame to the base's worker", same[1], same[1]),
        ("encode the answer", same[2], same[2]),
    ]
    print(f"the controller's CPU per write of {batch:,} votes, µs (process time, best of 7)")
    print(f"{'step':<40} {'rows':>8} {'columns':>8}")
    for name, a, b in steps:
        print(f"{name:<40} {a:>8,.0f} {b:>8,.0f}")
    print(f"{'total':<40} {sum(x[1] for x in steps):>8,.0f} {sum(x[2] for x in steps):>8,.0f}")
    client = (best(lambda i: codec.packb(["call", i, "insert", ["vote", _plain_rows(chunks[i], "")]])),
              best(lambda i: codec.packb(["call", i, "insert_columns",
                                          ["vote", batch, _int_float_columns(chunks[i], 2)]])))
    print(f"{'(the client making the request)':<40} {client[0]:>8,.0f} {client[1]:>8,.0f}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench cluster")
    p.add_argument("--articles", type=int, default=10_000)
    p.add_argument("--votes", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--samples", type=int, default=300, help="latency samples")
    p.add_argument("--arrow", action="store_true",
                   help="the load's batches as Arrow tables (insert_arrow: an Arrow IPC "
                        "stream each) rather than lists of rows")
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--recovery", choices=["treeclock", "lineage"], default="treeclock")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--no-checkpoints", action="store_true",
                   help="stateful nodes without checkpoints (rebuilt from their parents)")
    p.add_argument("--many", type=int, default=10_000,
                   help="keys per lookup_many call in the read measurement")
    p.add_argument("--subscriber", action="store_true",
                   help="also measure a subscription to the vote view: its latency and "
                        "the vote throughput with it over without")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="the workers as Ray actors (serve --ray): on a Ray instance the "
                        "server starts, or on the Ray cluster at ADDRESS")
    p.add_argument("--channels", choices=["relay", "direct"], default=None,
                   help="serve --channels: messages between workers through the controller "
                        "or worker to worker (default: the server's)")
    p.add_argument("--writes", choices=["auto", "controller", "worker"], default=None,
                   help="serve --writes: writes validated and taken at the controller or "
                        "at the base's worker (default: the server's, auto)")
    p.add_argument("--data-dir", dest="data_dir", default=None, metavar="DIR",
                   help="serve --data-dir: each run in a new directory under DIR (the "
                        "write-ahead log; with --writes worker, the workers' logs)")
    p.add_argument("--partial", action="store_true",
                   help="serve --partial: the vote view holds only the keys read (the "
                        "first read of every key after the load, filled by upqueries, "
                        "timed in keys/s)")
    p.add_argument("--placement", choices=["apart", "together"], default=None,
                   help="serve --placement: node shards apart from their parents (the "
                        "default) or each shard's chain on one worker")
    p.add_argument("--kill-load", action="store_true",
                   help="each kill inside a load of another client's inserts (batches of "
                        "--batch votes), from a second before it until a second after the "
                        "view is right: 'ack max s', the longest a write waited for its "
                        "acknowledgement from the kill on (median over the kills)")
    p.add_argument("--kill-kind", dest="kill_kind", default="aggregate",
                   choices=["aggregate", "join", "project", "reader", "sharder", "base"],
                   help="each kill is of the worker hosting a node shard of this kind in the "
                        "vote view (default: aggregate, the COUNT)")
    p.add_argument("--embedded", action="store_true",
                   help="then the same load and reads on the embedded engine in this process "
                        "(connect()), and the cluster's votes/s over it")
    p.add_argument("--server-log", dest="server_log", default=None, metavar="FILE",
                   help="the server's log (workers lost, recoveries, fallbacks) to FILE "
                        "(with several --workers counts, the last run's)")
    p.add_argument("--write-steps", action="store_true",
                   help="only the controller's CPU per write, step by step, in this process: "
                        "rows against columns (no cluster)")
    a = p.parse_args(argv)
    if a.write_steps:
        write_steps(a.batch, a.articles)
        return 0
    print(f"cluster: {a.articles:,} articles, {a.votes:,} votes in batches of {a.batch}, "
          f"{a.shards} shard(s), checkpoints {'off' if a.no_checkpoints else 'on'}"
          f"{'; workers as Ray actors' if a.ray else ''}"
          f"{f'; channels {a.channels}' if a.channels else ''}"
          f"{f'; writes at the {a.writes}' if a.writes else ''}"
          f"{'; partial readers' if a.partial else ''}"
          f"{f'; placement {a.placement}' if a.placement else ''}"
          f"{f'; each kill of the worker of a {a.kill_kind}' if a.kills else ''}"
          f"{f'; --data-dir under {a.data_dir}' if a.data_dir else ''}"
          f"{'; the load through insert_arrow' if a.arrow else ''}; "
          f"client, controller and workers are separate processes on this machine")
    print(f"{'workers':>7} {'votes/s':>9} {'ctrl CPU':>8} {'prop p50 ms':>11} {'prop p99 ms':>11} "
          f"{'read p50 µs':>11} {'many keys/s':>11} {'detect s':>9} {'recover s':>9} "
          f"{'kill→right s':>12} strategy {'ctrl ns':>8} {'ctrl ms':>8} writes"
          f"{'  ack max s' if a.kill_load else ''}")
    for w in [int(x) for x in a.workers.split(",")]:
        r = one_cluster(w, a.articles, a.votes, a.batch, a.samples, a.kills, a.recovery,
                        a.shards, not a.no_checkpoints, a.subscriber, a.many, a.ray,
                        a.channels, a.arrow, a.writes, a.data_dir, a.partial, a.placement,
                        a.kill_load, a.server_log, a.kill_kind)
        rec = r["recovery"]
        med = [statistics.median(x[i] for x in rec) for i in range(3)] if rec else [0, 0, 0]
        strategies = ",".join(sorted({x[3] for x in rec}))
        print(f"{w:>7} {r['tput']:>9,.0f} {r['ctrl_share']:>8.1%} {r['p50']:>11.2f} {r['p99']:>11.2f} "
              f"{r['read_p50']:>11.0f} {r['many']:>11,.0f} {med[0]:>9.3f} {med[1]:>9.3f} {med[2]:>12.3f} "
              f"{strategies:8} {r['ctrl_share_ns']:>8.2%} {r['ctrl_ms']:>8.1f} {r['writes']}"
              + (f" {statistics.median(x[4] for x in rec) if rec else 0.0:>10.3f}"
                 if a.kill_load else ""), flush=True)
        if a.partial:
            print(f"{'':>7} partial: the first read of every key (upqueries) "
                  f"{r['fill']:,.0f} keys/s", flush=True)
        last = r
    if a.embedded:
        e = one_embedded(a.articles, a.votes, a.batch, a.many)
        print(f"{'embedded':>7} {e['tput']:>9,.0f} {'':>8} {'':>11} {'':>11} "
              f"{e['read_p50']:>11.1f} {e['many']:>11,.0f}   (this process, connect(); "
              f"the cluster's votes/s {last['tput'] / e['tput']:.2f}x of it)", flush=True)
        if a.subscriber:
            print(f"{'':>7} subscriber: change {r['sub_p50']:.1f} ms after the vote's "
                  f"acknowledgement (p50); votes/s with it over without: {r['sub_ratio']:.2f}",
                  flush=True)
    return 0
