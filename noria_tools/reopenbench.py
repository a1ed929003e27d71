"""``noria-py bench reopen``: the time ``connect(data_dir=...)`` takes to open a vote
database, with the views restored from their checkpoints on disk and without them.

One data directory is filled once (the vote schema and view, ``--articles`` articles,
``--votes`` votes in batches of 1,000, closed cleanly); with ``--tail N``, a writer
process then writes N more votes and is SIGKILLed, so that the reopen replays the
log written after the last cut. Each round times both openings, alternating which goes
first: "checkpoints" as the directory is, "rebuild" with ``checkpoints/`` moved aside
(what opening did before checkpoints were on disk). Each opening's views are checked
against the first's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import noria_py
from noria_tools import workloads

_WRITER = """
import os, signal, sys
import noria_py
from noria_tools import workloads
d, start, n, articles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
db = noria_py.connect(data_dir=d)
data = workloads.votes(start + n, articles)[start:]
vote = db.table("vote")
for i in range(0, n, 1000):
    vote.insert([tuple(r) for r in data[i:i + 1000].tolist()])
os.kill(os.getpid(), signal.SIGKILL)
"""


def fill(d: str, articles: int, votes: int, tail: int) -> None:
    db = noria_py.connect(data_dir=d)
    workloads.setup(db, articles)
    data = workloads.votes(votes, articles)
    vote = db.table("vote")
    for i in range(0, votes, 1000):
        vote.insert([tuple(r) for r in data[i:i + 1000].tolist()])
    db.close()
    if tail:
        subprocess.run([sys.executable, "-c", _WRITER, d, str(votes), str(tail), str(articles)],
                       check=False)


def open_once(d: str, with_checkpoints: bool) -> tuple[float, list, dict]:
    ck = Path(d) / "checkpoints"
    aside = Path(d) / "checkpoints.aside"
    if not with_checkpoints and ck.exists():
        ck.rename(aside)
    try:
        t0 = time.perf_counter()
        db = noria_py.connect(data_dir=d)
        took = time.perf_counter() - t0
        rows = sorted(db.view(workloads.VIEW_NAME).all())
        how = dict(db.reopened)
        # (closed without a cut: the next opening finds the directory as this one did)
        db._disk = None
        db.close()
    finally:
        if aside.exists():
            if ck.exists():
                shutil.rmtree(ck)
            aside.rename(ck)
    return took, rows, how


def run_reopen(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench reopen")
    p.add_argument("--articles", type=int, default=100_000)
    p.add_argument("--votes", type=float, default=1e6)
    p.add_argument("--tail", type=float, default=0,
                   help="votes written after the last clean close by a process then SIGKILLed")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to make the data directory (kept)")
    a = p.parse_args(argv)
    votes, tail = int(a.votes), int(a.tail)
    d = a.dir or tempfile.mkdtemp(prefix="noria-reopen-")
    try:
        t0 = time.perf_counter()
        fill(d, a.articles, votes, tail)
        print(f"filled {d}: {a.articles:,} articles, {votes:,} votes + {tail:,} after a "
              f"SIGKILL, in {time.perf_counter() - t0:.1f} s; load {os.getloadavg()[0]:.1f}")
        times: dict[bool, list[float]] = {True: [], False: []}
        first = None
        for r in range(a.rounds):
            for with_ck in ((True, False) if r % 2 == 0 else (False, True)):
                took, rows, how = open_once(d, with_ck)
                if first is None:
                    first = rows
                elif rows != first:
                    print("views differ between openings", file=sys.stderr)
                    return 1
                times[with_ck].append(took)
                print(f"  round {r + 1}, {'checkpoints' if with_ck else 'rebuild'}: {took:.2f} s "
                      f"(from checkpoints: {how['from_checkpoints']}, batches replayed "
                      f"{how['batches_replayed']}); load {os.getloadavg()[0]:.1f}")
        ck, rb = statistics.median(times[True]), statistics.median(times[False])
        print(f"reopen, medians of {a.rounds}: checkpoints {ck:.2f} s, rebuild {rb:.2f} s "
              f"({rb / ck:.1f}x)")
    finally:
        if a.dir is None:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":       # pragma: no cover
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(run_reopen(sys.argv[1:]))
