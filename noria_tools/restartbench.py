"""How long a cluster's controller takes to come back after a SIGKILL, with
``--data-dir`` (``noria_py/runtime/cluster/restart.py``; docs/architecture.md,
"Controller restart").

``noria-py bench restart [--votes N] [--runs R]``: a cluster (two workers,
two shards) with the vote table and its per-article count, ``N`` votes written; then,
``R`` times, the controller SIGKILLed and ``noria-py serve`` started again on the same
directory, timing from the restart command: the server ready (it prints its address),
the first write acknowledged, the first read of a view through a client that asks the
new controller where its readers are; and, from the SIGKILL until the server is
ready, the reads a client that kept its view's placement made at the workers, one
after another (served per second, and failed), and the writes of one vote each
another client made meanwhile (acknowledged before the server was ready, per
second: with ``--writes worker`` they go on at the workers while the controller is
down; with the controller's write path they wait for it). Medians over the runs; at
the end, whether the table holds every vote acknowledged, each once.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import threading
import time

import noria_py
from noria_py.runtime.cluster.launch import Cluster


def run(votes: int, runs: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"ready": [], "first_write": [], "first_read": [],
                                   "reads_ok": [], "reads_failed": [], "own": [],
                                   "keepable": [], "nodes": [], "replay": [], "kept": [],
                                   "writes_down": [], "all_there": []}
    with tempfile.TemporaryDirectory() as d, \
            Cluster(workers=2, shards=2, extra=("--data-dir", d),
                    log=os.path.join(d, "serve.log")) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
        db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote "
                   "WHERE article_id = ? GROUP BY article_id")
        t = db.table("vote")
        for start in range(0, votes, 10_000):
            t.insert([(i % 1000, i) for i in range(start, min(votes, start + 10_000))])
        db.wait()
        kept = noria_py.connect(cluster.url).view("votes")
        kept.lookup(1)                              # (its placement, kept)
        writer = noria_py.connect(cluster.url)
        wt = writer.table("vote")
        wt.insert([(3, -2)])                        # (its placement, kept)
        acked = votes + 1
        for run_i in range(runs):
            cluster.kill()
            counts = {"ok": 0, "failed": 0, "written": 0}
            restarted = threading.Event()

            def write() -> None:
                n = 0
                while not restarted.is_set():
                    n += 1
                    wt.insert([(3, -1_000_000 * (run_i + 1) - n)])
                    if not restarted.is_set():
                        counts["written"] += 1
                    counts["acked"] = n
            writing = threading.Thread(target=write)
            writing.start()

            def read() -> None:
                while not restarted.is_set():
                    try:
                        kept.lookup(1)
                        counts["ok"] += 1
                    except noria_py.Error:
                        counts["failed"] += 1
            reader = threading.Thread(target=read)
            reader.start()
            t0 = time.monotonic()
            cluster.restart()
            ready = time.monotonic() - t0
            restarted.set()
            reader.join()
            writing.join()
            acked += counts["acked"]
            t.insert([(1, -3 - run_i)])
            acked += 1
            first_write = time.monotonic() - t0
            fresh = noria_py.connect(cluster.url)
            fresh.view("votes").lookup(2)
            first_read = time.monotonic() - t0
            fresh.close()
            out["ready"].append(ready)
            out["first_write"].append(first_write)
            out["first_read"].append(first_read)
            out["reads_ok"].append(counts["ok"] / ready)
            out["reads_failed"].append(counts["failed"])
            out["writes_down"].append(counts["written"] / ready)
            with open(os.path.join(d, "serve.log"), errors="replace") as f:
                text = f.read()
            own = re.findall(r"restarted on .* in ([\d.]+) s", text)
            out["own"].append(float(own[-1]) if own else float("nan"))
            last = re.findall(r"restarted on .*", text)
            held = re.search(r"their (\d+) node\(s\) kept", last[-1]) if last else None
            out["kept"].append(int(held.group(1)) if held else 0)
            plans = re.findall(r"restart plan: (.*)", text)
            plan = json.loads(plans[-1]) if plans else {"keep": {}, "rebuild": {}, "replay": {}}
            out["keepable"].append(len(plan["keep"]))
            out["nodes"].append(len(plan["keep"]) + len(plan["rebuild"]))
            out["replay"].append(sum(len(b) for _, b in plan["replay"].values()))
        db.wait()
        rows = db.execute("SELECT user_id FROM vote").fetchall()
        out["all_there"].append(float(len(rows) == len({r for r, in rows}) == acked))
        writer.close()
        db.close()
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="noria-py bench restart")
    ap.add_argument("--votes", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    got = run(args.votes, args.runs)
    load = os.getloadavg()[0]
    print(f"controller restart, {args.votes} votes, median of {args.runs} "
          f"(load {load:.1f}):")
    print(f"  serve ready      {got['ready']:.2f} s after the restart command, of which "
          f"{got['own']:.2f} s its own restart (the rest: the process's start, imports)")
    print(f"  first write      {got['first_write']:.2f} s")
    print(f"  first read (new placement) {got['first_read']:.2f} s")
    print(f"  reads by a client that kept its placement, while the controller was down: "
          f"{got['reads_ok']:.0f}/s served, {got['reads_failed']:.0f} failed")
    print(f"  writes of one vote by a client, acknowledged while the controller was down: "
          f"{got['writes_down']:.0f}/s; every acknowledged vote in the table once: "
          f"{'yes' if got['all_there'] else 'NO'}")
    print(f"  the workers' nodes it could keep: {got['keepable']:.0f} of {got['nodes']:.0f}, "
          f"{got['replay']:.0f} logged write(s) to replay; kept: {got['kept']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
