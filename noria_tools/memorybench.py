"""``noria-py bench memory``: resident memory of the vote workload, per vote, with tree
clocks and logs on and off, and the size of the logs over a long run; with ``--churn
N``, memory over N row-writes that leave no row (1,000 rows inserted, then deleted,
again and again, under a COUNT view): what is kept per write ever made.

Each configuration runs in a fresh process (``python -m noria_tools.memorybench VOTES CLOCKS``)
so that peak RSS belongs to it alone. Bytes per vote is (peak RSS after the votes) minus
(RSS with the articles loaded and the view built, before any vote), over the votes:
everything a vote costs, base table, aggregate, reader and logs included.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys


def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(votes: int, clocks: bool, articles: int = 100_000, batch: int = 1000) -> dict:
    import gc

    from noria_py import connect
    from noria_tools import workloads
    db = connect(clocks=clocks)
    workloads.setup(db, articles)
    gc.collect()
    base = _rss_bytes()
    vote = db.table("vote")
    logs = []
    step = max(1, votes // batch // 10)
    for n, i in enumerate(range(0, votes, batch)):
        data = workloads.votes(min(batch, votes - i), articles, seed=i)
        vote.insert([tuple(r) for r in data.tolist()])
        if n % step == 0:
            doms = db.runtime.domains.values()
            logs.append((i + batch, sum(d.payload_size() for d in doms),
                         sum(len(d.diffs) for d in doms if d.diffs is not None)))
    db.wait()
    gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    now = _rss_bytes()
    return {"votes": votes, "clocks": clocks, "base_rss": base, "rss": now, "peak": peak,
            "per_vote": (now - base) / votes, "peak_per_vote": (peak - base) / votes,
            "logs": logs}


def churn(row_writes: int, clocks: bool = True, batch: int = 1000) -> dict:
    """RSS after the first tenth of ``row_writes`` (inserts and deletes of the same
    ``batch`` rows) and at the end, and MB per million row-writes in between."""
    import gc

    from noria_py import connect
    db = connect(clocks=clocks)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    t = db.table("t")
    rows = [(i % 100, i) for i in range(batch)]
    rounds = max(10, row_writes // (2 * batch))
    start = 0
    for i in range(rounds):
        t.insert(rows)
        t.delete(rows)
        if i == rounds // 10:
            db.wait()
            gc.collect()
            start = _rss_bytes()
    db.wait()
    gc.collect()
    end = _rss_bytes()
    assert db.view("v").all() == [], "churn leaves no row"
    counted = 2 * batch * (rounds - rounds // 10 - 1)
    return {"row_writes": 2 * batch * rounds, "clocks": clocks, "rss_start": start,
            "rss_end": end, "mb_per_million": (end - start) / 2**20 / (counted / 1e6)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench memory")
    p.add_argument("--votes", default="1000000,10000000")
    p.add_argument("--articles", type=int, default=100_000)
    p.add_argument("--churn", type=float, default=None, metavar="ROW_WRITES",
                   help="instead: RSS over this many row-writes of inserts then deletes")
    a = p.parse_args(argv)
    if a.churn is not None:
        print(f"memory: {int(a.churn):,} row-writes of 1,000 rows inserted then deleted, "
              "a COUNT view; RSS after the first tenth and at the end")
        for clocks in (True, False):
            out = subprocess.run([sys.executable, "-m", "noria_tools.memorybench", "churn",
                                  str(int(a.churn)), "1" if clocks else "0"],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  clocks {'on ' if clocks else 'off'}: {r['rss_start'] / 2**20:,.0f} -> "
                  f"{r['rss_end'] / 2**20:,.0f} MB, {r['mb_per_million']:.2f} MB per "
                  "million row-writes", flush=True)
        return 0
    print(f"memory: vote, {a.articles:,} articles; RSS after the votes minus RSS before them")
    print(f"{'votes':>11} {'clocks':>6} {'RSS MB':>8} {'bytes/vote':>10} {'peak bytes/vote':>15} "
          f"{'logged msgs':>11} {'diffs':>7}")
    for n in [int(float(x)) for x in a.votes.split(",")]:
        for clocks in (True, False):
            out = subprocess.run([sys.executable, "-m", "noria_tools.memorybench", str(n),
                                  "1" if clocks else "0", str(a.articles)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            last = r["logs"][-1] if r["logs"] else (0, 0, 0)
            print(f"{n:>11,} {'on' if clocks else 'off':>6} {r['rss'] / 2**20:>8,.0f} "
                  f"{r['per_vote']:>10,.0f} {r['peak_per_vote']:>15,.0f} {last[1]:>11,} "
                  f"{last[2]:>7,}", flush=True)
            if clocks:
                print("             logs over the run (votes: logged messages, diffs): " +
                      ", ".join(f"{v:,}: {m}/{d}" for v, m, d in r["logs"]))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "churn":
        print(json.dumps(churn(int(sys.argv[2]), sys.argv[3] == "1")))
    else:
        votes, clocks, articles = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
        print(json.dumps(measure(votes, clocks, articles)))
