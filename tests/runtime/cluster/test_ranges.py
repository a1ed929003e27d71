"""Range parameters in a cluster (docs/sql.md, "Range parameters"): views with
``col > ?`` and the like read at their readers' workers (``["range", ...]`` on the
read port, runtime/cluster/reads.py), ad-hoc range constants lifted as embedded (one
view a shape), errors as embedded, and a range view's reader lost with its worker.

One cluster for the module (two workers and the spare, two shards: a keyed range
view's two reader shards on the two workers); the SIGKILL test runs last, on it. The same random programs
as the embedded engine's (tests/differential/test_ranges.py) check every read against
DuckDB.
"""
from __future__ import annotations

import datetime
import itertools
import math
import os
import random
import signal

import pytest
from hypothesis import HealthCheck, given, settings

import noria_py
from noria_py.runtime.cluster.launch import Cluster

from ...differential.helpers import Oracle, normalize
from ...differential.test_ranges import DDL, ORDERED, VIEWS, programs, run_program, write

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large,
           HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def cluster():
    with Cluster(workers=2, shards=2) as c:
        yield c


@pytest.fixture(scope="module")
def db(cluster):
    d = noria_py.connect(cluster.url)
    yield d
    d.close()


@settings(max_examples=4, deadline=None, suppress_health_check=_HEALTH)
@given(programs)
def test_range_reads_match_duckdb(db, steps):
    """Named views read at the workers (sharded by their equality key), ad-hoc queries
    through the controller, between random inserts, deletes and updates."""
    run_program(db, steps)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=_HEALTH)
@given(programs)
def test_range_reads_match_duckdb_long(db, steps):
    run_program(db, steps)


def test_range_constants_of_one_shape_share_one_view(db):
    """Ad-hoc range constants are lifted as embedded: 40 queries of one shape, with 40
    different bounds, leave one unnamed view, and each answers as SQL does."""
    db.execute("CREATE TABLE lift (id INT PRIMARY KEY, a INT)")
    rows = [(i, (i * 7) % 50) for i in range(200)]
    db.table("lift").insert(rows)
    db.wait()
    try:
        for b in range(40):
            got = db.execute(f"SELECT id FROM lift WHERE a BETWEEN {b} AND {b + 3}").fetchall()
            assert sorted(got) == [(i,) for i, a in rows if b <= a <= b + 3]
        assert len(db.queries()) == 1
    finally:
        db.drop_query()
        db.execute("DROP TABLE lift")


def test_range_reads_prepared_at_the_workers_and_through_the_dbapi(db, monkeypatch):
    """``db.prepare`` of a SELECT with range parameters reads its view at the readers'
    workers (no request to the controller per run); the DB-API's ``execute(sql,
    params)`` (through the controller) answers the same, from the same one view."""
    db.execute("CREATE TABLE dp (id INT PRIMARY KEY, g INT, f FLOAT)")
    rows = [(i, i % 3, float(i) if i % 5 else math.nan) for i in range(60)]
    db.table("dp").insert(rows)
    db.wait()
    try:
        sql = "SELECT id FROM dp WHERE g = ? AND f >= ?"
        st = db.prepare(sql)
        cur = db.cursor()
        asked: list[str] = []
        call = db._call
        monkeypatch.setattr(db, "_call", lambda m, *a: (asked.append(m), call(m, *a))[1])
        for g in range(3):
            for lo in (-1.0, 10.5, math.nan):
                want = [(i,) for i, gg, f in rows
                        if gg == g and (f != f or (lo == lo and f >= lo))]
                assert sorted(st.run((g, lo)).rows) == want, (g, lo)
                cur.execute(sql, (g, lo))
                assert sorted(cur.fetchall()) == want, (g, lo)
        assert set(asked) <= {"execute", "placement"}
        assert asked.count("execute") == 9 and asked.count("placement") <= 1
        assert len(db.queries()) == 1
    finally:
        monkeypatch.undo()
        st.close()
        db.drop_query()
        db.execute("DROP TABLE dp")


def test_errors_as_embedded(db):
    """Each wrong read raises what the embedded engine raises, by class and message."""
    ddl = ["CREATE TABLE er (id INT PRIMARY KEY, a INT, g INT, d DATE)",
           "CREATE VIEW er_a AS SELECT id FROM er WHERE a > ?",
           "CREATE VIEW er_gd AS SELECT id FROM er WHERE g = ? AND d BETWEEN ? AND ?"]
    local = noria_py.connect()
    for sql in ddl:
        db.execute(sql)
        local.execute(sql)
    rows = [(1, 1, 0, datetime.date(2026, 1, 2)), (2, 5, 1, datetime.date(2026, 3, 4))]
    db.table("er").insert(rows)
    local.table("er").insert(rows)
    db.wait()
    calls = [
        lambda d: d.view("er_a").lookup("x"),
        lambda d: d.view("er_a").lookup(1, 2),
        lambda d: d.view("er_a").lookup(),
        lambda d: d.view("er_gd").lookup("g", "2026-01-01", "2026-02-01"),
        lambda d: d.view("er_gd").lookup(0, "soon", "2026-02-01"),
        lambda d: d.view("er_gd").lookup(0, 3, "2026-02-01"),
        lambda d: d.subscribe("er_a", key=1),
        lambda d: d.execute("SELECT id FROM er WHERE a > ?", ("x",)).fetchall(),
    ]
    try:
        for i, call in enumerate(calls):
            with pytest.raises(noria_py.Error) as want:
                call(local)
            with pytest.raises(noria_py.Error) as got:
                call(db)
            assert type(got.value) is type(want.value), (i, got.value, want.value)
            assert str(got.value) == str(want.value), i
        # and what is right answers as embedded
        for view, params in [("er_a", (0,)), ("er_gd", (0, "2026-01-01", "2026-02-01")),
                             ("er_gd", (1, datetime.date(2026, 1, 1), None))]:
            assert db.view(view).lookup(*params) == local.view(view).lookup(*params)
    finally:
        db.drop_query()
        db.execute("DROP VIEW er_gd")
        db.execute("DROP VIEW er_a")
        db.execute("DROP TABLE er")
        local.close()


def test_a_range_readers_worker_sigkilled(cluster, db):
    """(Last: it takes the module cluster's spare.) SIGKILL the worker hosting a keyed
    range view's reader shard: the next range reads, on the same handle, wait for its
    recovery and are right (the sorted index is built again from the restored rows),
    and so are those after more writes and deletes."""
    db.execute("CREATE TABLE kr (id INT PRIMARY KEY, g INT, a INT)")
    db.execute("CREATE VIEW kr_g AS SELECT id, a FROM kr WHERE g = ? AND a >= ? ORDER BY a")
    oracle = Oracle(["CREATE TABLE kr (id INT PRIMARY KEY, g INT, a INT)"])
    rng = random.Random(3)
    rows = [(i, rng.randrange(6), rng.randrange(100)) for i in range(300)]
    db.table("kr").insert(rows)
    oracle.con.executemany("INSERT INTO kr VALUES (?, ?, ?)", rows)
    db.wait()
    view = db.view("kr_g")

    def check() -> None:
        for g in range(6):
            lo = rng.randrange(-5, 105)
            want = oracle.con.execute("SELECT id, a FROM kr WHERE g = ? AND a >= ? "
                                      "ORDER BY a, id", [g, lo]).fetchall()
            assert normalize(view.lookup(g, lo)) == normalize(want), (g, lo)
            assert [a for _, a in view.lookup(g, lo)] == [a for _, a in want]

    check()
    node = view._where.nodes[1]
    victim = next(n["pid"] for n in db.graph() if n["id"] == node)
    os.kill(victim, signal.SIGKILL)
    check()                     # (no wait(): the read waits for the recovery)
    assert victim not in cluster.worker_pids(db)
    gone = [r for r in rows if r[0] % 4 == 0]
    db.table("kr").delete(gone)
    oracle.con.execute("DELETE FROM kr WHERE id % 4 = 0")
    more = [(300 + i, i % 6, rng.randrange(100)) for i in range(60)]
    db.table("kr").insert(more)
    oracle.con.executemany("INSERT INTO kr VALUES (?, ?, ?)", more)
    db.wait()
    check()
    assert any(r.automatic for r in db.recoveries())


@pytest.mark.slow
def test_a_range_view_stays_full_under_serve_partial():
    """``serve --partial``: a view with range parameters keeps every row (a range read
    needs every key's rows: docs/partial.md), read at the workers as without it."""
    with Cluster(workers=2, shards=2, extra=("--partial",)) as c:
        db = noria_py.connect(c.url)
        db.execute("CREATE TABLE pt (id INT PRIMARY KEY, g INT, a INT)")
        db.execute("CREATE VIEW pt_g AS SELECT id FROM pt WHERE g = ? AND a < ?")
        db.execute("CREATE VIEW pt_k AS SELECT id FROM pt WHERE g = ?")
        rows = [(i, i % 4, i % 10) for i in range(100)]
        db.table("pt").insert(rows)
        db.wait()
        readers = {n["view"]: n["partial"] for n in db.graph() if n["kind"] == "reader"}
        assert readers == {"pt_g": False, "pt_k": True}
        for g in range(4):
            assert sorted(db.view("pt_g").lookup(g, 5)) == [
                (i,) for i, gg, a in rows if gg == g and a < 5]
        db.close()


#: values each kind of range parameter takes in ``test_sigkill_mid_load_range_reads``
GRID = {"a": [-1, 0, 2, 4, None], "f": [-1.0, 0.0, 1.5, math.inf, math.nan],
        "s": ["", "a", "b", "c"], "g": [0, 1, 2]}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_sigkill_mid_load_range_reads(seed):
    """Random inserts, deletes and updates with a random worker SIGKILLed at a random
    point among them; then every named range view, read at the workers over a grid of
    bounds, and ad-hoc range queries answer as DuckDB does."""
    rng = random.Random(seed)
    with Cluster(workers=2, shards=2) as c:
        db = noria_py.connect(c.url)
        oracle = Oracle(DDL)
        db.execute(DDL[0].replace("DOUBLE", "FLOAT"))
        for name, (sql, _) in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        held: dict[int, tuple] = {}
        n = 60
        kill_at = rng.randrange(n)
        for i in range(n):
            if i == kill_at:
                os.kill(rng.choice(c.worker_pids(db)), signal.SIGKILL)
            row = (rng.randrange(24), rng.choice([None, *range(-2, 5)]),
                   rng.choice([None, -1.0, 0.0, 1.5, 2.0, math.inf, math.nan]),
                   rng.choice([None, "", "a", "ab", "b", "c"]), rng.choice([None, 0, 1, 2]))
            write(db, oracle, held, rng.choice(["insert", "insert", "delete", "update"]), row)
        db.wait()
        for name, (sql, cols) in VIEWS.items():
            for params in itertools.product(*(GRID[k] for k in cols)):
                got = db.view(name).lookup(*params)
                want = oracle.con.execute(sql, list(params)).fetchall()
                if name in ORDERED:
                    assert got == want, (seed, name, params)
                else:
                    assert normalize(got) == normalize(want), (seed, name, params)
        for lo in range(-2, 5):
            sql = f"SELECT id FROM r WHERE a BETWEEN {lo} AND {lo + 1}"
            assert normalize(db.execute(sql).fetchall()) == normalize(
                oracle.con.execute(sql).fetchall()), (seed, sql)
        assert len(db.queries()) == 1
        assert db.recoveries()
        db.close()
