"""What the causal regime holds in a cluster over a long run (docs/regimes.md, "causal in
a cluster", garbage collection): ``noria-py serve --regime causal`` in process (2
workers, relay channels), two tables, a ``COUNT`` view and a filter-``UNION ALL`` view,
``--writes`` one-row writes (a wait every 500), a mark every ``--every`` messages. At
each half it prints the held sizes: the in-flight logs (messages; bytes, as on the wire), the
determinants held (encoded bytes of those held of other nodes), the marks, the
checkpoint store (entries in the chains' bases, deltas not folded) and the bases'
histories (rows kept); and the writes per second of the whole run (waits included).

``--regime falkirk`` (or ``uncoordinated``, ``cic``; ``--regime`` takes falkirk's JSON
object of policies too, as ``noria-py serve`` does) prints what the controller's lines
hold instead (``line_sizes``): the points (spans), the logged messages, the unlogged
edges' sent times, the checkpoint store and the histories.

Run: ``python -m noria_tools.causalgc --writes 20000``. It reads only what the regime
had before its garbage collection too (so it measures a tree without it alike).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from noria_py.storage.codec import packb

#: the tables and views (also ``tests/runtime/cluster/test_causal.py``'s)
SCHEMA = ("CREATE TABLE t (a INT, b INT)", "CREATE TABLE u (a INT, b INT)",
          "CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a",
          "CREATE VIEW w AS SELECT a FROM t WHERE b > 2 UNION ALL SELECT a FROM u")


def sizes(server: Any) -> dict[str, int]:
    """What the controller and the workers hold now (the graph quiet)."""
    rt = server.runtime
    causal = rt.causal
    with causal.lock:
        marks = {n: len(ms) for n, ms in causal.marks.items()}
    out = {"marks": sum(marks.values()), "inflight_msgs": 0, "inflight_bytes": 0,
           "held_dets_bytes": 0, "store_entries": 0, "store_deltas": 0, "history_rows": 0}
    graph = rt.graph
    with rt.lock:
        futs = [rt.request(w, "causal_state", sorted(graph.nodes))
                for w in rt.workers.values() if w.alive]
    for fut in futs:
        for _, (_, held) in fut.result(60).items():
            out["held_dets_bytes"] += sum(len(b) for b in held.values())
    log_from: dict[tuple[str, str], int] = {}
    try:
        with rt.lock:
            futs = [rt.request(w, "causal_sizes") for w in rt.workers.values() if w.alive]
        for fut in futs:
            for p, (inflight, _) in fut.result(60).items():
                for c, (start, _) in inflight.items():
                    log_from[(p, c)] = start
    except Exception:                      # (a tree without ``causal_sizes``: logs from 0)
        pass
    for n, node in graph.nodes.items():
        if n in rt.durable or not node.parents:
            continue
        for c in dict.fromkeys(node.children):
            msgs = rt.call(n, "causal_inflight", c, log_from.get((n, c), 0))
            out["inflight_msgs"] += len(msgs)
            out["inflight_bytes"] += len(packb(msgs, big_ints=True))
    with rt.store_lock:
        for n in graph.nodes:
            rows, deltas = rt.store.size(n)
            out["store_entries"] += rows
            out["store_deltas"] += deltas
    out["history_rows"] = sum(h.rows_kept() for h in rt.durable.values())
    return out


def line_sizes(server: Any) -> dict[str, int]:
    """What the controller holds for the uncoordinated, cic and falkirk regimes (the
    graph quiet): points, logged messages, unlogged edges' sent times (falkirk), each
    in all and the most of one node or edge; the store's entries and deltas; the
    histories' rows."""
    rt = server.runtime
    lines = rt.lines
    with lines.lock:
        points = [len(ps) for ps in lines.points.values()]
        logs = [len(q) for q in lines.logs.values()]
        sent = [len(q) for q in getattr(lines, "sent", {}).values()]
    out = {"points": sum(points), "points_most": max(points, default=0),
           "logged": sum(logs), "logged_most": max(logs, default=0),
           "sent": sum(sent), "sent_most": max(sent, default=0),
           "store_entries": 0, "store_deltas": 0, "history_rows": 0}
    with rt.store_lock:
        for n in rt.graph.nodes:
            rows, deltas = rt.store.size(n)
            out["store_entries"] += rows
            out["store_deltas"] += deltas
    out["history_rows"] = sum(h.rows_kept() for h in rt.durable.values())
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m noria_tools.causalgc")
    ap.add_argument("--writes", type=int, default=20000)
    ap.add_argument("--every", type=int, default=16, help="CHECKPOINT_EVERY (messages)")
    ap.add_argument("--regime", default="causal",
                    help="causal (default), uncoordinated, cic, falkirk or falkirk's JSON "
                         "object of per-node policies")
    args = ap.parse_args(argv)
    os.environ["NORIA_TUNING"] = f"CHECKPOINT_EVERY={args.every}"
    from noria_py import regimes
    from noria_py.runtime.cluster.server import Server
    regime = regimes.from_text(args.regime)
    measure = sizes if regime == "causal" else line_sizes
    server = Server(port=0, workers=2, shards=1, channels="relay", regime=regime)
    try:
        db = server.db
        for sql in SCHEMA:
            db.execute(sql)
        start = time.perf_counter()
        for i in range(args.writes):
            db.table(("t", "u")[i % 3 == 0]).insert([(i % 101, i % 5)])
            if (i + 1) % 500 == 0:
                db.wait()
            if i + 1 in (args.writes // 2, args.writes):
                db.wait()
                paused = time.perf_counter()
                print(f"after {i + 1} writes: {measure(server)}", flush=True)
                start += time.perf_counter() - paused        # (not timed)
        took = time.perf_counter() - start
        print(f"writes/s: {args.writes / took:.0f}")
    finally:
        server.stopped.set()
        server.close()


if __name__ == "__main__":
    main()
