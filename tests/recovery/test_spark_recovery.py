"""strategy="spark": random writes, a failure of a random non-base node, recovery by a
Spark job, then every view compared with a failure-free twin and with DuckDB."""
from __future__ import annotations

import datetime
import random

import pytest

import noria_py
from noria_py import tuning
from tests.differential.helpers import (
    DDL,
    KEYED,
    KEYS,
    VIEWS,
    Oracle,
    apply_model,
    check,
    new_db,
    normalize,
)

pytestmark = pytest.mark.spark


def _writes(rng: random.Random, dbs, model: dict, n: int) -> None:
    """``n`` random inserts and deletes, applied to every db and to the model."""
    for _ in range(n):
        kind = rng.random()
        if kind < 0.5:
            t, rows = "t1", [(rng.choice([None, 0, 1, 2, 3, 4, 5]), rng.choice([None, 0, 1, 2, 3, 4, 5]),
                              rng.choice([None, "a", "b", "c", "zz"])) for _ in range(rng.randint(1, 6))]
        elif kind < 0.8:
            t, rows = "t2", [(rng.choice([None, 0, 1, 2, 3, 4, 5]), rng.choice([None, 0, 1, 2, 3]))
                             for _ in range(rng.randint(1, 4))]
        else:
            t = rng.choice(["t1", "t2"])
            if model[t]:
                victim = model[t].pop(rng.randrange(len(model[t])))
                for db in dbs:
                    db.table(t).delete([victim])
            continue
        model[t].extend(rows)
        for db in dbs:
            db.table(t).insert(rows)


def _same(db, twin, oracle, model) -> None:
    db.wait()
    twin.wait()
    oracle.load(model)
    for name in VIEWS:
        got = normalize(db.view(name).all())
        assert got == normalize(twin.view(name).all()), f"view {name} differs from the failure-free run"
        assert got == oracle.query(VIEWS[name]), f"view {name} differs from DuckDB"
    for name, (_, duck) in KEYED.items():
        for k in KEYS:
            got = normalize(db.view(name).lookup(k))
            assert got == normalize(twin.view(name).lookup(k)), f"view {name} key {k}"
            if k is not None:
                assert got == oracle.query(duck, (k,)), f"view {name} key {k} vs DuckDB"


@pytest.mark.parametrize("shards,seed", [(1, 1), (4, 2)])
def test_spark_recovery_matches_failure_free_run(spark, shards, seed):
    rng = random.Random(seed)
    db, twin = new_db(shards), new_db(shards)
    oracle = Oracle(DDL)
    model = {"t1": [], "t2": []}
    _writes(rng, [db, twin], model, 40)
    nodes = [n for n in db.graph() if n["kind"] != "base"]
    # one failure right below a base table (the largest purge), then random ones
    first = [n["id"] for n in nodes if all(db.graph_[p].kind == "base" for p in n["parents"])]
    victims = [rng.choice(first)] + rng.sample([n["id"] for n in nodes], 3)
    for victim in victims:
        db.fail(victim)
        report = db.recover(victim, strategy="spark")
        assert report.strategy == "spark" and victim in report.purged
        _same(db, twin, oracle, model)
        _writes(rng, [db, twin], model, 5)     # and it keeps up afterwards
        _same(db, twin, oracle, model)
    assert [r.strategy for r in db.recoveries()] == ["spark"] * len(victims)


def test_spark_recovery_of_expressions_and_topk(spark):
    ddl = "CREATE TABLE t (a INT, b FLOAT, c TEXT, d BOOL)"
    views = {
        "e": "SELECT a / 2 AS q, a % 3 AS r, -a AS n, b / 0 AS z, a * b AS m, "
             "CASE WHEN c LIKE 'a%' THEN 'A' WHEN c IS NULL THEN NULL ELSE lower(c) END AS k, "
             "length(c) AS l, COALESCE(c, 'none') || '!' AS s, NULLIF(a, 1) AS ni, ABS(a) AS ab, "
             "CAST(b AS INT) AS bi, CAST(a AS FLOAT) AS af, NOT d AS nd "
             "FROM t WHERE a IN (1, 2, 3, NULL) OR (d AND b >= 0.5) OR c <> 'x'",
        "top": "SELECT a, b, c FROM t ORDER BY b DESC NULLS LAST, a ASC NULLS FIRST LIMIT 4 OFFSET 1",
        "agg": "SELECT c, AVG(b) AS m, COUNT(DISTINCT a) AS k, SUM(DISTINCT a) AS s, MIN(d) AS lo "
               "FROM t GROUP BY c",
    }
    rng = random.Random(9)
    rows = [(rng.choice([None, -7, -1, 0, 1, 2, 3, 9]), rng.choice([None, -1.5, 0.0, 0.5, 2.25]),
             rng.choice([None, "abc", "ax", "Bee", "x"]), rng.choice([None, True, False]))
            for _ in range(60)]
    dbs = []
    for _ in range(2):
        db = noria_py.connect(shards=2)
        db.execute(ddl)
        for n, q in views.items():
            db.execute(f"CREATE VIEW {n} AS {q}")
        db.table("t").insert(rows)
        dbs.append(db)
    db, twin = dbs
    for n in db.graph():
        if n["kind"] != "base" and db.graph_[n["parents"][0]].kind == "base":
            db.fail(n["id"])
            db.recover(n["id"], strategy="spark")
    db.wait()
    for n in views:
        assert normalize(db.view(n).all()) == normalize(twin.view(n).all()), n


def test_spark_recovery_of_a_sum_past_64_bits(spark):
    """SUM of an INT column is exact (as PostgreSQL's SUM(bigint)), where Spark's BIGINT
    sum wraps past 64 bits: the job sums DECIMAL(38, 0), back as Python ints. The sums'
    own state is rebuilt by Spark (the aggregate), and read by it (the TopK above an
    intact aggregate: Arrow in)."""
    top = 2**63 - 1
    views = {"s": "SELECT k, SUM(v) AS s, AVG(v) AS m, SUM(DISTINCT v) AS d FROM t GROUP BY k",
             "hi": "SELECT k, s FROM (SELECT k, SUM(v) AS s FROM t GROUP BY k) AS x "
                   "ORDER BY s DESC LIMIT 2"}
    rows = [(1, top)] * 3 + [(1, 1), (2, -top - 1), (2, -top - 1), (3, 5)]
    db = noria_py.connect()
    db.execute("CREATE TABLE t (k INT, v INT)")
    for n, q in views.items():
        db.execute(f"CREATE VIEW {n} AS {q}")
    db.table("t").insert(rows)
    db.wait()
    want = {n: sorted(db.view(n).all()) for n in views}
    assert want["s"][0][:2] == (1, 3 * top + 1) and want["s"][1][:2] == (2, -2 * (top + 1))
    for n in list(db.graph()):
        if n["kind"] in ("aggregate", "topk"):
            db.fail(n["id"])
            db.recover(n["id"], strategy="spark")
            db.wait()
            got = {v: sorted(db.view(v).all()) for v in views}
            assert got == want, n["kind"]
            assert all(type(r[1]) is int for r in got["s"])


def test_spark_recovery_of_times_keeps_their_types(spark):
    """Spark gives back its own timestamp type; the engine's values come back as it holds
    them (TIMESTAMP naive, TIMESTAMPTZ in datetime.timezone.utc), so a view read after
    a recovery is the same Python values, not merely equal ones. An instant literal in a
    view's filter is translated (it was refused)."""
    utc = datetime.timezone.utc
    views = {"m": "SELECT k, MAX(tz) AS hi, MIN(ts) AS lo, COUNT(*) AS n FROM t GROUP BY k",
             "f": "SELECT k, tz, ts FROM t WHERE tz > '2024-01-01 05:00:00+00' "
                  "AND ts < '2023-01-01 20:00:00'",
             "top": "SELECT k, tz FROM t ORDER BY tz DESC LIMIT 3"}
    rows = [(i % 4, datetime.datetime(2024, 1, 1, i % 24, tzinfo=utc),
             datetime.datetime(2023, 1, 1, (i * 7) % 24)) for i in range(40)] + [(9, None, None)]
    db = noria_py.connect(shards=2)
    db.execute("CREATE TABLE t (k INT, tz TIMESTAMPTZ, ts TIMESTAMP)")
    for n, q in views.items():
        db.execute(f"CREATE VIEW {n} AS {q}")
    db.table("t").insert(rows)
    db.wait()
    want = {n: sorted(map(repr, db.view(n).all())) for n in views}
    assert "timezone.utc" in want["m"][0] and "tzinfo" not in want["m"][0].split("utc")[-1]
    for n in list(db.graph()):
        if n["kind"] != "base":
            db.fail(n["id"])
            db.recover(n["id"], strategy="spark")
            db.wait()
            assert {v: sorted(map(repr, db.view(v).all())) for v in views} == want, n["kind"]


def _base(db, table: str) -> str:
    return next(n.id for n in db.graph_.nodes.values() if n.table == table)


def test_spark_recovery_restores_base_tables_from_their_log(spark, monkeypatch):
    """Loaded tables, then inserts and deletes (by row and by SQL); a failed base comes
    back from its write history, alone or with a failed child that Spark recomputes from
    it: every view as DuckDB has it, and again after more writes."""
    # histories trimmed, checkpoints taken and acknowledgements sent after a few writes,
    # not hundreds: each base comes back from its table as of its trim point and the
    # writes since
    monkeypatch.setattr(tuning, "HISTORY_TRIM_EVERY", 8)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 16)
    monkeypatch.setattr(tuning, "ACK_EVERY", 4)
    db = new_db(1)
    oracle = Oracle(DDL)
    model: dict[str, list[tuple]] = {"t1": [], "t2": []}
    rng = random.Random(4)
    apply_model(model, ("ins1", [(rng.choice([None, 0, 1, 2, 3, 4, 5]), rng.choice([None, 0, 1, 2, 3, 4, 5]),
                                  rng.choice([None, "a", "b", "c", "zz"])) for _ in range(120)]), db)
    apply_model(model, ("ins2", [(rng.choice([None, 0, 1, 2, 3, 4, 5]), rng.choice([None, 0, 1, 2, 3]))
                                 for _ in range(40)]), db)
    for op in [("del1", [3, 50, 77]), ("del2", [5, 9]), ("sql", 0), ("sql", 1), ("sql", 2),
               ("ins1", [(1, 2, "b"), (4, None, "a")]), ("sql", 3), ("del1", [0])]:
        apply_model(model, op, db)
    _writes(rng, [db], model, 200)
    for table in ("t1", "t2"):
        history = db.runtime.durable[_base(db, table)]
        assert history.start > 0 and history.folded.snapshot(), table

    def same() -> None:
        oracle.load(model)
        check(db, oracle, model, VIEWS)

    same()
    for table in ("t1", "t2"):
        base = _base(db, table)
        db.fail(base)
        report = db.recover(base, strategy="spark")
        assert report.strategy == "spark"
        same()
        _writes(rng, [db], model, 6)
        same()
    # a base and an operator below it, both failed: recovering the operator brings the
    # base back from its history first, then Spark recomputes the operator from it
    base = _base(db, "t1")
    op = next(c for c in db.graph_[base].children
               if db.graph_[c].op.stateful and db.graph_[c].kind != "reader")
    db.fail(base)
    db.fail(op)
    report = db.recover(op, strategy="spark")
    assert report.strategy == "spark" and op in report.purged and report.rows > 0
    same()
    _writes(rng, [db], model, 6)
    same()


@pytest.mark.slow
def test_spark_recovery_of_postgres_division(spark):
    """A view the PostgreSQL front end made divides with PG_DIV and PG_MOD: Spark
    recomputes it as the engine does (truncating toward zero, the dividend's sign); a
    zero divisor, the engine's division-by-zero marker, fails the recovery with the
    graph as it was, and lineage recovery then brings back the marker."""
    from noria_py.divzero import DIV0
    views = {
        "q": "SELECT a, PG_DIV(a, b) AS d, PG_MOD(a, b) AS m, PG_DIV(f, b) AS x, "
             "CASE WHEN b = 0 THEN -1 ELSE PG_DIV(100, b) END AS c FROM t",
        "w": "SELECT a, SUM(PG_DIV(a, b)) AS s, COUNT(*) AS n FROM t "
             "WHERE b <> 0 AND PG_DIV(a, b) > -100 GROUP BY a",
        "s": "SELECT b, SUM(PG_DIV(100, b)) AS s, MAX(PG_MOD(a, b)) AS m FROM t GROUP BY b",
    }
    rows = [(-7, 2, 1.5), (7, -2, -3.0), (-7, -2, None), (9, 4, 0.25), (None, 3, 2.0),
            (5, None, 1.0), (-1, 3, 4.0), (6, 5, 0.0)]
    dbs = []
    for _ in range(2):
        db = noria_py.connect()
        db.execute("CREATE TABLE t (a INT, b INT, f FLOAT)")
        for n, q in views.items():
            db.execute(f"CREATE VIEW {n} AS {q}")
        db.table("t").insert(rows)
        dbs.append(db)
    db, twin = dbs
    stateful = [n["id"] for n in db.graph() if n["kind"] in ("aggregate", "reader")]
    for nid in stateful:
        db.fail(nid)
        db.recover(nid, strategy="spark")
    db.wait()
    for n in views:
        assert normalize(db.view(n).all()) == normalize(twin.view(n).all()), n
    assert (-7, -3, -1, 0.75, 50) in db.view("q").all()      # (PostgreSQL: -7 / 2 = -3)
    assert (-2, -100, 1) in db.view("s").all()
    for d in dbs:
        d.table("t").insert([(3, 0, 1.0)])
        d.wait()
    (agg,) = [n["id"] for n in db.graph() if n["kind"] == "aggregate"
              and db.graph_[n["children"][0]].view == "s"]
    db.fail(agg)
    with pytest.raises(noria_py.RecoveryError, match="division by zero"):
        db.recover(agg, strategy="spark")
    db.recover(agg, strategy="lineage")
    db.wait()
    assert (0, DIV0, DIV0) in db.view("s").all()
    for n in views:
        assert normalize(db.view(n).all()) == normalize(twin.view(n).all()), n
