"""Range parameters in a cluster (docs/sql.md, "Range parameters"), the slow suite's
part: the embedded engine's random programs (tests/differential/test_ranges.py) many
times over, a range view under ``serve --partial``, and random writes with a worker
SIGKILLed among them, every read against DuckDB. The default suite's are in
test_reads.py, on its cluster (no start-up of their own).
"""
from __future__ import annotations

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
def db():
    """A cluster of two workers (and the spare), two shards: a keyed range view's two
    reader shards on the two workers."""
    with Cluster(workers=2, shards=2) as c:
        d = noria_py.connect(c.url)
        yield d
        d.close()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=_HEALTH)
@given(programs)
def test_range_reads_match_duckdb_long(db, steps):
    run_program(db, steps)


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
