"""``noria-py bench regimes --cluster``: the regimes a cluster offers, side by side on a
real cluster (``noria-py serve --regime NAME``: controller and workers in their own
processes on this machine, the client in this one), the vote workload.

Per regime: ``--votes`` votes over ``--articles`` articles in inserts of ``--batch``
through the client (throughput: votes over the seconds of those inserts and a final
``wait``), then ``--rounds`` times: the worker hosting the COUNT's shard 0 is killed
(SIGKILL, ``db.fail``), ``--down`` votes are written while its nodes are lost (each
acknowledged), and the time from the kill until ``db.recover`` and ``db.wait`` return
is taken, the views then checked against counts kept here (every article; not timed).
Shown: medians of that time, of the controller's detection of the loss and of the
recovery itself (``RecoveryReport.seconds``, summed over the reports of one loss), the
nodes restarted or set back (the lost worker's, each alone with tree clocks or causal; those
lineage purged; every node in a rollback; those the recovery line names in
uncoordinated and cic) and the messages resent, and how many of the lost stateful nodes
their standbys took over (``causal-standby``: ``serve --regime causal --standbys``;
``causal-depth1``: ``--determinant-depth 1``, the harness's ``VARIANTS``). Three seconds
pass between failures, for the next warm spare to join. A regime
the cluster does not offer is listed as such (``regimes.EMBEDDED_ONLY``).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from noria_py import connect
from noria_py.regimes import EMBEDDED_ONLY, check
from noria_py.runtime.cluster.launch import Cluster
from noria_tools import workloads
from noria_tools.regimesbench import VARIANTS


def serve_options(regime: str, barrier_every: int | None) -> tuple[str, ...]:
    """``noria-py serve``'s options for ``regime`` (a name of the harness's)."""
    if regime in VARIANTS:
        name, standby, depth = VARIANTS[regime]
        return (("--regime", name) + (("--standbys",) if standby else ())
                + (() if depth is None else ("--determinant-depth", str(depth))))
    if regime == "coordinated" and barrier_every is not None:
        return ("--regime", regime, "--barrier-every", str(barrier_every))
    return ("--regime", regime)


def one(regime: str, articles: int, votes: int, batch: int, shards: int, rounds: int,
        down: int, barrier_every: int | None) -> dict[str, object]:
    """One regime's run (module docstring); its figures."""
    with Cluster(workers=2, shards=shards, extra=serve_options(regime, barrier_every)) \
            as cluster:
        db = connect(cluster.url)
        workloads.setup(db, articles)
        data = workloads.votes(votes, articles)
        want = np.bincount(data[:, 0], minlength=articles)
        vote = db.table("vote")
        view = db.view(workloads.VIEW_NAME)
        rows = [tuple(r) for r in data.tolist()]
        t0 = time.perf_counter()
        for i in range(0, votes, batch):
            vote.insert(rows[i:i + batch])
        db.wait()
        tput = votes / (time.perf_counter() - t0)
        rng = np.random.default_rng(7)
        timed = []
        for _ in range(rounds):
            time.sleep(3)
            agg = next(n["id"] for n in db.graph()
                       if n["kind"] == "aggregate" and n["shard"] in (0, None))
            n_before = len(db.recoveries())
            extra_votes = rng.integers(0, articles, down)
            t1 = time.perf_counter()
            db.fail(agg)                       # SIGKILL of the worker hosting it
            vote.insert([(int(a), 1 << 31) for a in extra_votes])
            db.recover(agg)                    # (waits for the automatic recovery)
            db.wait()
            total = time.perf_counter() - t1
            want += np.bincount(extra_votes, minlength=articles)
            got = [r[0][2] or 0 if r else 0 for r in view.lookup_many(range(articles))]
            if got != want.tolist():
                raise AssertionError(f"{regime}: the vote view is wrong after a recovery")
            reports = db.recoveries()[n_before:]
            timed.append((total, max(getattr(r, "detection_seconds", 0.0) for r in reports),
                          sum(r.seconds for r in reports),
                          len(set().union(*(set(r.rolled_back) | set(r.purged) | {r.node}
                                            for r in reports))),
                          sum(r.replayed_messages for r in reports),
                          ",".join(sorted({r.strategy for r in reports})),
                          sum(list(r.paths.values()).count("standby") for r in reports)))
        db.close()
    med = [statistics.median(float(x[i]) for x in timed) for i in range(5)]
    return {"tput": tput, "total": med[0], "detect": med[1], "recover": med[2],
            "nodes": med[3], "resent": med[4],
            "strategy": ",".join(sorted({x[5] for x in timed})),
            "standby": statistics.median(x[6] for x in timed)}


def run(regimes: list[str], articles: int, votes: int, batch: int, shards: int,
        rounds: int, down: int, barrier_every: int | None) -> list[str]:
    """The table's lines, printed as each regime finishes; a RegimeError for a name
    that is no regime."""
    head = (f"{'regime':<12} {'votes/s':>9} {'kill→right s':>12} {'detect s':>9} "
            f"{'recover s':>9} {'nodes set back':>14} {'msgs resent':>11} {'standby':>7}  "
            "strategy")
    print(head, flush=True)
    lines = [head]
    for regime in regimes:
        if regime in EMBEDDED_ONLY:
            line = f"{regime:<12} (built for the embedded engine only)"
        else:
            # (an unknown name: a RegimeError naming it)
            check(VARIANTS[regime][0] if regime in VARIANTS else regime, cluster=True)
            r = one(regime, articles, votes, batch, shards, rounds, down, barrier_every)
            line = (f"{regime:<12} {r['tput']:>9,.0f} {r['total']:>12.3f} {r['detect']:>9.3f} "
                    f"{r['recover']:>9.3f} {r['nodes']:>14.0f} {r['resent']:>11.0f} "
                    f"{r['standby']:>7.0f}  {r['strategy']}")
        print(line, flush=True)
        lines.append(line)
    return lines
