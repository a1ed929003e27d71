"""``noria-py bench recovery --node KIND`` (issue 18): the recovery time of one shard of
each node kind on the vote view from the Noria paper, every result checked.

The database: ``article`` and ``vote`` (``workloads.SCHEMA``), the articles and the
votes loaded before the views exist (the views are then initialized from them), then
``ArticleWithVoteCount`` (article LEFT JOIN a COUNT per article) and, for ``topk``,
``extremum`` or ``distinct``, a second view over the votes (``TOP_VIEWS``).

One round: 1,000 votes (10 inserts of 100, random articles), the node fails, 1,000 more
votes while it is down, then ``db.recover(node, strategy)`` + ``db.wait()`` is timed.
After the timing, 200 random articles of ``ArticleWithVoteCount`` (and of the second
view, if any) are compared with answers kept in Python from every vote written; a
mismatch raises AssertionError. The strategies take turns round by round (the first
round's order rotated each round), so a drift of the machine's speed hits them alike;
each row shows the load average when it was printed.

``--since K``: each round the node's checkpoint is taken by hand first, then K
inserts of 100 votes go in before the round's own (the schedule's checkpoints off for
the run), so that a stateful shard fails K messages or so past its checkpoint (its
parent sends it one per insert; more if the acknowledgements had not yet made that
checkpoint its stable one): what a tree-clock recovery then replays, up to
``tuning.CHECKPOINT_EVERY`` on the schedule.

A pair (``--node sharder+aggregate`` or ``aggregate+join``) fails a node shard and
one of its children together, and ``db.recover()`` (or lineage, parent first) brings
both back; the rounds say whether the child came back from its checkpoint (ck) or was
rebuilt from its parent.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from noria_py import connect, tuning
from noria_py.errors import Error
from noria_tools import workloads
from noria_tools.bench import load_votes, plot_recovery

KINDS = ("sharder", "aggregate", "join", "reader", "topk", "extremum", "distinct")
#: a node shard and one of its children, failed together
PAIRS = ("sharder+aggregate", "aggregate+join")

#: the second view a kind needs: (name, SQL)
TOP_VIEWS = {
    "topk": ("top3", "CREATE VIEW top3 AS SELECT article_id, user_id FROM vote "
             "WHERE article_id = ? ORDER BY user_id DESC LIMIT 3"),
    "extremum": ("top_users", "CREATE VIEW top_users AS SELECT article_id, MAX(user_id) AS top "
                 "FROM vote WHERE article_id = ? GROUP BY article_id"),
    "distinct": ("voters", "CREATE VIEW voters AS SELECT DISTINCT article_id, user_id "
                 "FROM vote WHERE article_id = ?"),
}


@dataclass
class VoteBed:
    """A loaded vote database and what it should answer."""
    db: Any
    articles: int
    top: str | None                  # a key of TOP_VIEWS, or None
    counts: np.ndarray               # votes per article, every vote written so far
    written: list[np.ndarray]        # every vote written so far, (article_id, user_id)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(18))


def vote_bed(votes: int, articles: int = 100_000, shards: int = 4,
             top: str | None = None) -> VoteBed:
    """The vote database over ``votes`` votes, with the second view for ``top``
    (``"topk"``, ``"extremum"``, ``"distinct"`` or None)."""
    db = connect(shards=shards, seed=0)
    for sql in workloads.SCHEMA:
        db.execute(sql)
    db.table("article").insert(workloads.articles(articles))
    data = workloads.votes(votes, articles)
    load_votes(db, data)
    db.execute(workloads.VIEW)
    if top is not None:
        db.execute(TOP_VIEWS[top][1])
    db.wait()
    return VoteBed(db, articles, top, np.bincount(data[:, 0], minlength=articles), [data])


def needs_view(kind: str) -> str | None:
    """The key of TOP_VIEWS whose view holds a node of ``kind``, if one is needed."""
    return kind if kind in TOP_VIEWS else None


def pick_node(graph: list[dict], kind: str) -> str:
    """The node of ``kind`` (its first shard) on the vote path; ``topk`` falls back on
    an extremum when the planner made no TopK node."""
    nodes = {n["id"]: n for n in graph}

    def fits(n: dict, want: str) -> bool:
        if n["kind"] != want or n["shard"] not in (None, 0):
            return False
        if want == "sharder":         # the one feeding the COUNT
            return any(nodes[c]["kind"] == "aggregate" for c in n["children"])
        if want == "reader":
            return (n["view"] or "").lower() == workloads.VIEW_NAME.lower()
        return True
    for want in (kind, "extremum") if kind == "topk" else (kind,):
        found = [n["id"] for n in graph if fits(n, want)]
        if found:
            return found[0]
    raise ValueError(f"no {kind} node on the vote path; kinds: "
                     f"{sorted({n['kind'] for n in graph})}")


def pick_pair(graph: list[dict], pair: str) -> tuple[str, str]:
    """``parent+child``: the parent's node on the vote path (``pick_node``) and its
    first child of the child's kind."""
    parent_kind, child_kind = pair.split("+")
    nodes = {n["id"]: n for n in graph}
    parent = pick_node(graph, parent_kind)
    child = next(c for c in nodes[parent]["children"] if nodes[c]["kind"] == child_kind)
    return parent, child


def write_votes(bed: VoteBed, n: int = 1000, per_insert: int = 100) -> None:
    """``n`` votes for random articles, ``per_insert`` at a time, remembered in ``bed``."""
    vote = bed.db.table("vote")
    for _ in range(0, n, per_insert):
        chunk = np.stack([bed.rng.integers(0, bed.articles, per_insert),
                          bed.rng.integers(0, 1 << 30, per_insert)], axis=1)
        vote.insert([tuple(r) for r in chunk.tolist()])
        bed.counts += np.bincount(chunk[:, 0], minlength=bed.articles)
        bed.written.append(chunk)


def _expected_top(bed: VoteBed, keys: list[int]) -> dict[int, list[tuple]]:
    """The second view's rows for ``keys``, from every vote written."""
    votes = np.concatenate(bed.written)
    votes = votes[np.isin(votes[:, 0], keys)]
    votes = votes[np.lexsort((-votes[:, 1], votes[:, 0]))]   # by article, then user down
    articles, users = votes[:, 0], votes[:, 1]
    n = 1 if bed.top == "extremum" else 3
    out = {}
    for k in keys:
        lo, hi = np.searchsorted(articles, k, "left"), np.searchsorted(articles, k, "right")
        if bed.top == "distinct":       # every user once, highest first
            out[k] = [(k, u) for u in dict.fromkeys(users[lo:hi].tolist())]
        else:
            out[k] = [(k, u) for u in users[lo:min(hi, lo + n)].tolist()]
    return out


def check(bed: VoteBed, sample: int | None = 200) -> None:
    """Compare ``sample`` random articles (None: every article) of the views with the
    answers kept in Python; AssertionError on the first mismatch."""
    keys = (list(range(bed.articles)) if sample is None
            else [int(k) for k in bed.rng.integers(0, bed.articles, sample)])
    view = bed.db.view(workloads.VIEW_NAME)
    for k in keys:
        c = int(bed.counts[k])
        want = [(k, f"article {k}", c if c else None)]
        got = view.lookup(k)
        assert got == want, f"{workloads.VIEW_NAME}[{k}]: got {got}, want {want}"
    if bed.top is None:
        return
    name = TOP_VIEWS[bed.top][0]
    top = bed.db.view(name)
    for k, want in _expected_top(bed, keys).items():
        got = sorted(top.lookup(k), key=lambda r: -r[1])
        assert got == want, f"{name}[{k}]: got {got}, want {want}"


def fail_with_votes(bed: VoteBed, node: str, since: int = 0) -> None:
    """1,000 votes, the node fails, 1,000 more votes while it is down; first, with
    ``since``, the node's checkpoint and ``since`` inserts of 100 votes."""
    if since:
        bed.db.runtime.domains[node].checkpoint()
        write_votes(bed, 100 * since)
    write_votes(bed)
    bed.db.fail(node)
    write_votes(bed)


def recover_pair(bed: VoteBed, pair: tuple[str, str], strategy: str) -> tuple[float, str]:
    """``recover_round`` for a parent and its child failed together: tree clocks
    recover both with ``db.recover()``, other strategies parent first; how the child
    came back."""
    parent, child = pair
    write_votes(bed)
    bed.db.fail(parent)
    bed.db.fail(child)
    write_votes(bed)
    gc.collect()
    t0 = time.perf_counter()
    if strategy == "treeclock":
        reports = {r.node: r for r in bed.db.recover()}
    else:
        reports = {n: bed.db.recover(n, strategy=strategy) for n in pair}
    bed.db.wait()
    seconds = time.perf_counter() - t0
    check(bed)
    how = "-"
    if strategy == "treeclock":
        how = "rebuilt" if reports[child].checkpoint is None else "ck"
    return seconds, how


def recover_round(bed: VoteBed, node: str | tuple[str, str],
                  strategy: str, since: int = 0) -> tuple[float, str]:
    """One round: the seconds until the views are right again (checked after), and how
    a tree-clock recovery restored the node's state: ``"ck"`` from its checkpoint,
    ``"rebuilt"`` from its parents' output (``"-"``: stateless, or another strategy)."""
    if isinstance(node, tuple):
        return recover_pair(bed, node, strategy)
    fail_with_votes(bed, node, since)
    gc.collect()
    t0 = time.perf_counter()
    report = bed.db.recover(node, strategy=strategy)
    bed.db.wait()
    seconds = time.perf_counter() - t0
    check(bed)
    how = "-"
    if strategy == "treeclock" and report.rows:
        how = "rebuilt" if report.checkpoint is None else "ck"
    return seconds, how


def _medians(bed: VoteBed, node: str | tuple[str, str], strategies: list[str], rounds: int,
             broken: dict[str, str], since: int = 0) -> dict[str, list[tuple[float, str]]]:
    """Each strategy's (seconds, how) per round (``recover_round``), the strategies
    taking turns (round r starts with strategy r mod their number). A strategy whose recovery raises is reported in
    ``broken`` and left out (the node is brought back by lineage and the others go on;
    a broken spark is not tried again, another strategy is, on the next node)."""
    out: dict[str, list[tuple[float, str]]] = {s: [] for s in strategies if s not in broken}
    for r in range(rounds):
        k = r % len(strategies)
        for s in strategies[k:] + strategies[:k]:
            if s not in out:
                continue
            try:
                out[s].append(recover_round(bed, node, s, since))
            except AssertionError:
                raise                      # a wrong answer is never skipped
            except Exception as exc:       # Spark's errors are its own (Py4J...)
                if s != "spark" and not isinstance(exc, Error):
                    raise
                why = broken[s if s == "spark" else f"{s} {node}"] = \
                    f"{type(exc).__name__}: {exc}"
                print(f"  {s} failed recovering {node}: {why}", flush=True)
                del out[s]
                for n in node if isinstance(node, tuple) else (node,):
                    if not bed.db.runtime.alive(n):
                        bed.db.recover(n, strategy="lineage")
                bed.db.wait()
                check(bed)
    return out


def _unusable(strategies: list[str]) -> dict[str, str]:
    """The strategies that cannot run here, with why (so far: spark without pyspark)."""
    if "spark" in strategies and importlib.util.find_spec("pyspark") is None:
        print("spark: skipped, pyspark is not installed")
        return {"spark": "pyspark is not installed"}
    return {}


def _row(kind: str, node: str, n: int, times: dict[str, float], strategies: list[str],
         load: float | None) -> str:
    cells = " ".join(f"{times[s]:>11.4f}" if s in times else f"{'-':>11}" for s in strategies)
    both = "lineage" in times and "treeclock" in times and times["treeclock"] > 0
    ratio = (f"{times['lineage'] / times['treeclock']:>10,.1f}x "
             f"{times['treeclock'] / times['lineage']:>7.4f}" if both
             else f"{'-':>11} {'-':>7}")
    built = f"   (built in {load:.0f} s)" if load is not None else ""
    return f"{kind:>10} {node:>6} {n:>11,} {cells} {ratio} {os.getloadavg()[0]:>6.2f}{built}"


def _rounds_line(rounds: dict[str, list[tuple[float, str]]]) -> str:
    """Every round's seconds, per strategy, in the order they ran; a tree-clock round
    of a stateful node says whether it came back from its checkpoint (ck) or was
    rebuilt from its parents."""
    return "    rounds: " + "; ".join(
        f"{s} " + " ".join(f"{t:.4f}" + ("" if how == "-" else f" ({how})") for t, how in ts)
        for s, ts in rounds.items())


def _bed_for(beds: dict[str | None, VoteBed], kind: str, votes: int, articles: int,
             shards: int) -> tuple[VoteBed, float | None]:
    """The database ``kind`` runs on (built the first time a size needs it: then the
    seconds it took to load, else None)."""
    top = needs_view(kind)
    if top in beds:
        return beds[top], None
    t0 = time.perf_counter()
    beds[top] = vote_bed(votes, articles, shards, top)
    return beds[top], time.perf_counter() - t0


def parse_kinds(spec: str) -> list[str]:
    kinds = list(KINDS) if spec == "all" else spec.split(",")
    bad = [k for k in kinds if k not in KINDS + PAIRS]
    if bad:
        raise SystemExit(f"noria-py bench recovery: unknown --node {','.join(bad)}; "
                         f"choose from {', '.join(KINDS + PAIRS)} or all")
    return kinds


def run_nodes(a: argparse.Namespace, sizes: list[int], strategies: list[str]) -> int:
    """The ``--node`` mode of ``noria-py bench recovery``; 1 if a recovery raised."""
    kinds = parse_kinds(a.node)
    if a.since and any(k in PAIRS for k in kinds):
        raise SystemExit("noria-py bench recovery: --since goes with one node kind at a time, "
                         "not a pair")
    articles = a.articles or 100_000
    shards = a.shards or 4
    broken = _unusable(strategies)
    results: dict[str, dict[int, float]] = {}
    since = (f"its checkpoint, {a.since:,} inserts of 100 votes, " if a.since else "")
    print(f"recovery of one shard per node kind, vote view ({articles:,} articles, "
          f"{shards} shards); {since}1,000 votes, fail, 1,000 votes, recover: median of "
          f"{a.rounds} rounds, seconds until views are right (checked)")
    print(f"{'node':>10} {'id':>6} {'votes':>11} " + " ".join(f"{s:>11}" for s in strategies)
          + f" {'lin/tc':>11} {'tc/lin':>7} {'load1':>6}")
    saved = tuning.CHECKPOINT_EVERY, tuning.CHECKPOINT_ROWS
    if a.since:                 # (the rounds' checkpoints by hand only)
        tuning.CHECKPOINT_EVERY = tuning.CHECKPOINT_ROWS = 1 << 40
    try:
        for n in sizes:
            beds: dict[str | None, VoteBed] = {}
            for i, kind in enumerate(kinds):
                bed, load = _bed_for(beds, kind, n, articles, shards)
                graph = bed.db.graph()
                node: str | tuple[str, str] = (pick_pair(graph, kind) if kind in PAIRS
                                               else pick_node(graph, kind))
                rounds = _medians(bed, node, strategies, a.rounds, broken, a.since)
                times = {s: statistics.median(t for t, _ in ts) for s, ts in rounds.items()}
                for s, v in times.items():
                    results.setdefault(f"{kind}, {s}" if len(kinds) > 1 else s, {})[n] = v
                node_id = "+".join(node) if isinstance(node, tuple) else node
                print(_row(kind, node_id, n, times, strategies, load), flush=True)
                print(_rounds_line(rounds), flush=True)
                top = needs_view(kind)
                if all(needs_view(k) != top for k in kinds[i + 1:]):
                    beds.pop(top).db.close()        # no later kind runs on it: its memory back
                    gc.collect()
    finally:
        tuning.CHECKPOINT_EVERY, tuning.CHECKPOINT_ROWS = saved
    if a.plot:
        title = (f"failed {kinds[0]} shard" if len(kinds) == 1 else "failed shard per node kind")
        plot_recovery(results, a.plot, f"{title}, vote view, {shards} shards")
        print(f"plot written to {a.plot}")
    return 1 if set(broken) - {"spark"} else 0      # spark may be missing; no other
