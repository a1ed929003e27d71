"""A failed base table comes back from its durable log under every strategy, and no
acknowledged write is lost."""
from __future__ import annotations

import pytest

import noria_py


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
@pytest.mark.parametrize("shards", [1, 3])
def test_base_recovers_from_durable_log(strategy, shards):
    db = noria_py.connect(shards=shards, seed=4)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
    vote = db.table("vote")
    for i in range(20):
        vote.insert([(i % 4, i), (i % 3, i + 100)])       # some still in flight
    base = next(n["id"] for n in db.graph() if n["kind"] == "base")
    db.fail(base)
    with pytest.raises(noria_py.RecoveryError, match="recover"):
        vote.insert([(9, 9)])                             # refused, not lost silently
    report = db.recover(base, strategy=strategy)
    assert report.strategy == strategy and report.paths == {base: "history"}
    vote.insert([(1, 1000)])
    vote.delete([(0, 0)])
    db.wait()
    want = {}
    for i in range(20):
        for k in (i % 4, i % 3):
            want[k] = want.get(k, 0) + 1
    want[1] += 1
    want[0] -= 1
    assert sorted(db.view("c").all()) == sorted(want.items())


def test_lineage_of_a_node_under_a_failed_base_restores_the_base_first():
    """A lineage rebuild under a failed base brings the base back first, and its report
    says so (``RecoveryReport.paths``: the base from its history, the rest by
    lineage)."""
    db = noria_py.connect()
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW v AS SELECT a FROM t WHERE a > 1")
    db.table("t").insert([(1,), (2,), (3,)])
    base = next(n["id"] for n in db.graph() if n["kind"] == "base")
    flt = next(n["id"] for n in db.graph() if n["kind"] == "filter")
    db.fail(base)
    db.fail(flt)
    report = db.recover(flt, strategy="lineage")
    assert report.paths == {base: "history", **{n: "lineage" for n in report.purged}}
    assert flt in report.purged
    db.wait()
    assert sorted(db.view("v").all()) == [(2,), (3,)]
