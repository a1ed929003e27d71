"""``noria-py bench memory``: resident memory of the vote workload, per vote, with tree
clocks and logs on and off, and the size of the logs over a long run.

Each configuration runs in a fresh process (``python -m noria_tools.memory VOTES CLOCKS``)
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench memory")
    p.add_argument("--votes", default="1000000,10000000")
    p.add_argument("--articles", type=int, default=100_000)
    a = p.parse_args(argv)
    print(f"memory: vote, {a.articles:,} articles; RSS after the votes minus RSS before them")
    print(f"{'votes':>11} {'clocks':>6} {'RSS MB':>8} {'bytes/vote':>10} {'peak bytes/vote':>15} "
          f"{'logged msgs':>11} {'diffs':>7}")
    for n in [int(float(x)) for x in a.votes.split(",")]:
        for clocks in (True, False):
            out = subprocess.run([sys.executable, "-m", "noria_tools.memory", str(n),
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
    votes, clocks, articles = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
    print(json.dumps(measure(votes, clocks, articles)))
