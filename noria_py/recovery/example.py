"""A worked example of tree-clock recovery, printed step by step.

``python -m noria_py.recovery.example`` builds a small sharded vote count, fails the
sharder while some of its messages are still in flight, and shows what recovery
reads from the clocks and logs and what it replays. docs/recovery.md quotes the
output; a test keeps the two in step.
"""
from __future__ import annotations

import io
from contextlib import redirect_stdout
from typing import cast

import noria_py
from noria_py.client import Database
from noria_py.recovery import treeclock as tcr
from noria_py.runtime.embedded import EmbeddedRuntime
from noria_py.runtime.messages import Message


def run() -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        _run()
    return out.getvalue()


def _run() -> None:
    db = cast(Database, noria_py.connect(shards=2, seed=1))     # (no url: embedded)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW counts AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    g = {n["id"]: n for n in db.graph()}
    base = next(i for i, n in g.items() if n["kind"] == "base")
    sharder = next(i for i, n in g.items() if n["kind"] == "sharder")
    aggs = [i for i, n in g.items() if n["kind"] == "aggregate"]
    print("graph:")
    for i, n in g.items():
        print(f"  {i:6} {n['kind']:9} parents={n['parents']}")
    rt = cast(EmbeddedRuntime, db.runtime)
    rt.trace = []
    vote = db.table("vote")
    # deliver everything for the first writes, then leave the last ones in flight
    for batch in ([(1, 10), (2, 11)], [(1, 12)], [(2, 13), (2, 14)], [(3, 15)]):
        vote.insert(batch)
        db.wait()
    # two more writes; the seeded runtime delivers only some of their messages
    vote.insert([(1, 16), (3, 17)])
    vote.insert([(2, 18)])
    print(f"\nbase time {rt.domains[base].time}; sharder time {rt.domains[sharder].time}; "
          f"in flight: {[(m.src, m.dst, m.time) for m in _pending(rt)]}")
    for a in aggs:
        d = rt.domains[a]
        print(f"  {a}: last sharder time seen = {d.last_seen.get(sharder, 0)}, "
              f"diff log (sharder time -> base time): {_diffs(db, a, sharder, base)}")

    print(f"\ndb.fail({sharder!r}): its state, inbox, clock and logs are gone")
    db.fail(sharder)
    seen = {a: rt.domains[a].last_seen.get(sharder, 0) for a in aggs}
    t_min = min(seen.values())
    print(f"1. children's (C, sharder) entries: {seen}; t_min = {t_min}")
    tc = rt.tc
    assert tc is not None                       # (connect's default: clocks)
    t_star = tc.t_star(db.graph_[sharder].num,
                       {db.graph_[a].num: rt.domains[a].log_rows() for a in aggs}, t_min)
    slot = tc.layout(db.graph_[sharder].num).slot[db.graph_[base].num]
    print(f"   T*: root {int(t_star[0])}, (sharder, base) = {int(t_star[slot])}")
    pins = tcr._pins(db.graph_, tcr._witnesses(db.graph_, rt, sharder)[0], sharder, t_min)
    print(f"2. pins from diffs after t_min (sharder time -> (parent, parent time)): {pins}")
    resend = [m.time for m in rt.domains[base].payload[sharder] if m.time > int(t_star[slot])]
    print(f"3. the base resends its messages with times {resend} from its payload log")
    report = db.recover(sharder, strategy="treeclock")
    print(f"4. replayed {report.replayed_messages} messages; each child gets only sharder "
          f"times above what it had seen")
    db.wait()
    print("\nafter db.wait():")
    for k in (1, 2, 3):
        print(f"  counts.lookup({k}) = {db.view('counts').lookup(k)}")
    once: dict[tuple[str, str, int], int] = {}
    for src, dst, t in rt.trace:
        once[(src, dst, t)] = once.get((src, dst, t), 0) + 1
    print(f"  deliveries to the aggregates counted twice: "
          f"{sum(1 for (s, d, t), c in once.items() if d in aggs and c > 1)}")


def _pending(rt: EmbeddedRuntime) -> list[Message]:
    return [m for q in rt.edges.values() for m in q]


def _diffs(db: Database, child: str, parent: str, grand: str) -> dict[int, int]:
    rt = cast(EmbeddedRuntime, db.runtime)
    tc = rt.tc
    assert tc is not None
    c, p, a = (db.graph_[x].num for x in (child, parent, grand))
    lay = tc.layout(c)
    diffs = rt.domains[child].diffs
    assert diffs is not None                # (clocks are on in the example)
    rows = diffs.rows
    pos = lay.position((c, p, a))
    return {int(r[lay.slot[p]]): int(r[pos]) for r in rows if r[lay.slot[p]] > 0}


if __name__ == "__main__":
    print(run(), end="")
