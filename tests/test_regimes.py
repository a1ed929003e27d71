"""Choosing a fault-tolerance regime (issue 19, ``noria_py/regimes.py``): the built ones
open and say which runs, the others are refused by name, and ``db.recover(node)``
follows the regime."""
from __future__ import annotations

import pytest

import noria_py
from noria_py import regimes
from noria_py.runtime.cluster import server
from noria_py.runtime.coordinated import CoordinatedRuntime


def _count_db(**options):
    db = noria_py.connect(**options)
    db.execute("CREATE TABLE t (a INT, b INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    db.table("t").insert([(i % 3, i) for i in range(30)])
    return db


def test_every_contract_name_is_built_or_refused_as_not_built():
    names = {"treeclock", "lineage", "coordinated", "uncoordinated", "cic", "causal", "falkirk"}
    assert set(regimes.BUILT) | set(regimes.NOT_BUILT) == names
    assert not set(regimes.BUILT) & set(regimes.NOT_BUILT)


@pytest.mark.parametrize("name", ["flink", "", "TreeClock", 3, {"default": "treeclock"},
                                  {"default": "flink"}])
def test_an_unknown_regime_is_refused(name):
    with pytest.raises(noria_py.RegimeError,
                       match="unknown regime|must be a name|not a per-node policy|"
                             "unknown falkirk policy"):
        noria_py.connect(regime=name)


@pytest.mark.parametrize("name,strategy,clocks", [
    ("treeclock", "treeclock", True), ("lineage", "lineage", False),
    ("coordinated", "coordinated", False), ("uncoordinated", "uncoordinated", False),
    ("cic", "cic", False), ("causal", "causal", False), ("falkirk", "falkirk", False),
    ({"default": "eager"}, "falkirk", False)])
def test_recover_follows_the_regime(name, strategy, clocks):
    db = _count_db(regime=name)
    assert db.regime == strategy
    assert db.runtime.clocks == clocks and (db.runtime.store is not None) == clocks
    assert isinstance(db.runtime, CoordinatedRuntime) == (name == "coordinated")
    agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
    db.fail(agg)
    db.table("t").insert([(0, 100)])
    report = db.recover(agg)
    assert report.strategy == strategy
    db.wait()
    assert sorted(db.view("v").all()) == [(0, 11), (1, 10), (2, 10)]


def test_the_default_regime_is_treeclock():
    db = noria_py.connect()
    assert db.regime == "treeclock" and db.runtime.clocks and db.runtime.store is not None


def test_settings_that_do_not_fit_the_regime_are_refused():
    with pytest.raises(noria_py.ArgumentError, match="keeps no tree clocks"):
        noria_py.connect(regime="lineage", clocks=True)
    with pytest.raises(noria_py.ArgumentError, match="keeps no tree clocks"):
        noria_py.connect(regime="coordinated", checkpoints=True)
    with pytest.raises(noria_py.ArgumentError, match="coordinated regime"):
        noria_py.connect(barrier_every=10)
    with pytest.raises(noria_py.ArgumentError, match="barrier_every"):
        noria_py.connect(regime="coordinated", barrier_every=0)
    with pytest.raises(noria_py.ArgumentError, match="barrier_seconds"):
        noria_py.connect(regime="coordinated", barrier_seconds=-1)
    with pytest.raises(noria_py.ArgumentError, match="server's settings"):
        noria_py.connect("noria://127.0.0.1:1", regime="lineage")
    with pytest.raises(noria_py.ArgumentError, match="server's settings"):
        noria_py.connect("noria://127.0.0.1:1", regime="falkirk")


@pytest.mark.parametrize("name", list(regimes.BUILT))
def test_partial_state_in_every_regime(name):
    """``connect(regime=R, partial=True)`` in every regime: the vote view's reader,
    LEFT JOIN and COUNT are partial (``db.graph()`` says so), hold the keys read, and
    a failed COUNT comes back all holes with the regime's own recovery
    (docs/partial.md, rule 6; tests/test_partial.py tests each node and regime)."""
    db = noria_py.connect(regime=name, partial=True, shards=2)
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW v AS SELECT article.id, article.title, c.n FROM article LEFT JOIN "
               "(SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id) AS c "
               "ON article.id = c.article_id WHERE article.id = ?")
    db.table("article").insert([(i, f"a{i}") for i in range(6)])
    db.table("vote").insert([(i % 6, i) for i in range(20)])
    partial = {n["kind"] for n in db.graph() if n["partial"]}
    assert partial == {"reader", "aggregate", "join"}
    assert db.view("v").lookup(1) == [(1, "a1", 4)]
    counts = [n["id"] for n in db.graph() if n["partial"] and n["kind"] == "aggregate"]
    for c in counts:
        db.fail(c)
    db.table("vote").insert([(1, 100)])
    assert {r.strategy for r in db.recover()} == {regimes.STRATEGIES[name][0]}
    assert all(not db.graph_[c].op.holes.filled for c in counts)
    assert db.view("v").lookup(1) == [(1, "a1", 5)]
    assert db.view("v").lookup(7) == []


@pytest.mark.parametrize("name", [r for r in regimes.BUILT if r not in regimes.PARTIAL_IN_CLUSTER])
def test_serve_refuses_partial_state_in_a_regime_it_does_not_serve_it_in(name, capsys):
    assert server.main(["--port", "0", "--regime", name, "--partial"]) == 1
    out = capsys.readouterr().out
    assert "--regime treeclock only" in out and f"connect(regime={name!r}, partial=True)" in out


def test_a_strategy_outside_the_regime_is_refused():
    db = _count_db(regime="coordinated")
    agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
    db.fail(agg)
    with pytest.raises(noria_py.RecoveryError, match="not available in regime 'coordinated'"):
        db.recover(agg, strategy="treeclock")
    with pytest.raises(noria_py.RecoveryError, match="unknown recovery strategy"):
        db.recover(agg, strategy="flink")
    assert not db.runtime.alive(agg)
    # lineage works in any regime; epochs resume from the rebuilt state
    assert db.recover(agg, strategy="lineage").strategy == "lineage"
    db.wait()
    assert sorted(db.view("v").all()) == [(0, 10), (1, 10), (2, 10)]


@pytest.mark.parametrize("name,says", [("nope", "unknown"),
                                       ('{"v": eager}', "JSON object"),
                                       ('{"v": "sometimes"}', "unknown falkirk policy")])
def test_serve_refuses_a_regime_it_does_not_offer(name, says, capsys):
    assert server.main(["--port", "0", "--regime", name]) == 1
    assert says in capsys.readouterr().out


def test_serve_takes_barrier_every_with_the_coordinated_regime_only(capsys):
    assert server.main(["--port", "0", "--barrier-every", "3"]) == 1
    assert "--regime coordinated" in capsys.readouterr().out
    assert server.main(["--port", "0", "--regime", "coordinated", "--barrier-every", "0"]) == 1
    assert "barrier_every must be" in capsys.readouterr().out
