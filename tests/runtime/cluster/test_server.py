"""The controller's client requests (noria_py/runtime/cluster/server.py) against a real
cluster: inserts sent as columns (``insert_columns``, what ``RemoteTable.insert`` sends
for a batch of plain ints and floats) end as the same rows, or the same error, as the
embedded engine gives the same call, and a malformed request is refused, changing
nothing."""
from __future__ import annotations

import math
import random
from collections.abc import Iterator

import numpy as np
import pytest

import noria_py
from noria_py import remote
from noria_py.errors import ArityError, RequestError, TypeMismatchError
from noria_py.runtime.cluster.launch import Cluster

DDL = ["CREATE TABLE t (a INT, b FLOAT)",
       "CREATE TABLE k (id INT PRIMARY KEY, v INT NOT NULL)"]
VIEW = ("CREATE VIEW per_a AS SELECT a, COUNT(*) AS n, SUM(b) AS sb FROM t "
        "WHERE a = ? GROUP BY a")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(workers=1) as c:
        yield c


#: values that a column of plain ints or floats may meet once: each is refused, or
#: makes the client send rows (which the server checks), or is taken as it is
ODD = [True, False, None, 1.5, "x", 1 << 63, -(1 << 63) - 1, float("nan"), float("inf"),
       np.int64(3), np.float64(2.5), 2, -0.0]


def _value(rng: random.Random, kind: str):
    if kind == "int":
        return rng.choice([rng.randint(-5, 5), rng.randint(-(1 << 63), (1 << 63) - 1)])
    return rng.choice([rng.uniform(-1e3, 1e3), -0.0, float(rng.randint(0, 9))])


def _batches(rng: random.Random) -> Iterator[tuple[str, list[tuple], object]]:
    """Clean batches of both tables, and each of ``ODD`` alone in each column of
    them, once or twice in a batch; a primary key taken now and then."""
    def batch(name: str, column: int | None,
              odd: object) -> tuple[str, list[tuple], object]:
        n = rng.choice([remote.COLUMNS_MIN, 50, 200])
        if name == "t":
            rows = [[_value(rng, "int"), _value(rng, "float")] for _ in range(n)]
        else:
            start = rng.randint(0, 2000)
            rows = [[start + j, _value(rng, "int")] for j in range(n)]
        if column is not None:
            for j in rng.sample(range(n), rng.choice([1, 2])):
                rows[j][column] = odd
        return name, [tuple(r) for r in rows], odd
    for odd in ODD:
        yield batch("t", 0, odd)
        yield batch("t", 1, odd)
        yield batch("k", 1, odd)
        yield batch("t", None, None)
        yield batch("k", None, None)


def _outcome(call) -> tuple[str, str] | None:
    try:
        call()
    except noria_py.Error as e:
        return type(e).__name__, str(e)
    return None


def _rows(table) -> list:
    """A table's rows, comparable: NaN as a string (NaN != NaN), sorted by repr."""
    def canon(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v
    return sorted((tuple(canon(v) for v in r) for r in table), key=repr)


def test_inserts_as_columns_match_the_embedded_engine(cluster, monkeypatch):
    sent = []
    call = remote.RemoteDatabase._call

    def spy(self, method, *args):
        sent.append(method)
        return call(self, method, *args)
    monkeypatch.setattr(remote.RemoteDatabase, "_call", spy)
    db = noria_py.connect(cluster.url)
    here = noria_py.connect()
    for sql in DDL + [VIEW]:
        db.execute(sql)
        here.execute(sql)
    rng = random.Random(7)
    outcomes = []
    for name, rows, odd in _batches(rng):
        got = _outcome(lambda: db.table(name).insert(rows))
        want = _outcome(lambda: here.table(name).insert(rows))
        if isinstance(odd, np.generic) and got and want:
            # (the client sends a numpy value as Python's: the message names that)
            got, want = got[0], want[0]
        assert got == want, (name, rows)
        outcomes.append(got)
    db.wait()
    for name in ("t", "k"):
        assert _rows(db.execute(f"SELECT * FROM {name}").fetchall()) == \
            _rows(here.execute(f"SELECT * FROM {name}").fetchall())
    for a in range(-5, 6):
        assert db.view("per_a").lookup(a) == here.view("per_a").lookup(a)
    # both paths taken, and both accepted and refused writes
    assert "insert_columns" in sent and "insert" in sent, sent
    assert None in outcomes and any(o is not None for o in outcomes)
    db.close()


def test_a_malformed_insert_columns_is_refused_and_changes_nothing(cluster):
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE m (a INT, b INT)")
    ints = ["i", np.arange(3, dtype="<i8").tobytes()]
    cases = [
        (RequestError, [ints, ["i", b"\0" * 7]]),              # not 3 int64s
        (RequestError, [ints, ["o", [1, 2, 3]]]),              # objects: only as rows
        (RequestError, [ints, ["x", b"\0" * 24]]),
        (RequestError, [ints, "i"]),
        (ArityError, [ints]),                                  # one column of two
        (ArityError, [ints, ints, ints]),
    ]
    for error, cols in cases:
        with pytest.raises(error):
            db._call("insert_columns", "m", 3, cols)
    with pytest.raises(RequestError):
        db._call("insert_columns", "m", -1, [ints, ints])
    with pytest.raises(RequestError):
        db._call("insert_columns", "m", "3", [ints, ints])
    assert len(db.table("m")) == 0
    with pytest.raises(TypeMismatchError):      # floats for an INT column: checked as
        db._call("insert_columns", "m", 3, [ints, ["f", np.ones(3).tobytes()]])   # rows
    assert len(db.table("m")) == 0
    db._call("insert_columns", "m", 3, [ints, ints])
    assert sorted(db.execute("SELECT * FROM m").fetchall()) == [(0, 0), (1, 1), (2, 2)]
    db.close()
