"""TIMESTAMPTZ columns through the engine and through DuckDB (its TimeZone set to UTC).

Instants are written as aware datetimes in several zones (and as pandas Timestamps,
and through Arrow with a zone of its own), deleted and looked up by the same instants
given in *other* zones, through every view shape that compares, hashes or orders
values, with 1 and 4 shards. The engine holds UTC and answers as DuckDB does; a
datetime that is naive where an instant is needed is refused (noria_py/arguments.py).
"""
from __future__ import annotations

import datetime as dt
import os
from unittest import mock
from zoneinfo import ZoneInfo

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning

from .helpers import Oracle, in_two_parts, normal_row, normalize

DDL = ["CREATE TABLE e (a INT, ts TIMESTAMPTZ, b TIMESTAMP WITH TIME ZONE)",
       "CREATE TABLE w (ts TIMESTAMPTZ, z INT)"]

T0 = "CAST('2024-03-31 01:00:00+00' AS TIMESTAMPTZ)"
VIEWS = {
    "v_agg": "SELECT a, COUNT(*) AS n, MIN(ts) AS lo, MAX(ts) AS hi, COUNT(DISTINCT b) AS d "
             "FROM e GROUP BY a",
    "v_group": "SELECT ts, COUNT(*) AS n, MAX(b) AS hi FROM e GROUP BY ts",
    "v_global": "SELECT MIN(ts) AS lo, MAX(b) AS hi FROM e",
    "v_distinct": "SELECT DISTINCT ts, b FROM e",
    "v_join": "SELECT e.a, e.ts, w.z FROM e JOIN w ON e.ts = w.ts",
    "v_left": "SELECT e.a, w.z FROM e LEFT JOIN w ON e.b = w.ts",
    "v_where": f"SELECT a, ts FROM e WHERE ts > {T0} OR b <= ts",
    "v_in": f"SELECT a FROM e WHERE ts IN ({T0}, CAST('2024-10-27 01:30:00+01' AS TIMESTAMPTZ))",
    "v_casts": "SELECT a, CAST(ts AS TIMESTAMP) AS naive, CAST(ts AS DATE) AS d, "
               "CAST(CAST(ts AS TIMESTAMP) AS TIMESTAMPTZ) AS back, CAST(ts AS TEXT) AS s FROM e",
    "v_union": "SELECT ts FROM e UNION SELECT ts FROM w",
    "v_except": "SELECT b FROM e EXCEPT SELECT ts FROM w",
    "v_coalesce": "SELECT a, COALESCE(ts, b) AS c FROM e",
}
#: ordered views: the engine's rows must come in DuckDB's order (ORDER BY covers every
#: column, so ties are equal rows)
ORDERED = {
    "v_top_asc": "SELECT ts, a FROM e ORDER BY ts ASC NULLS FIRST, a ASC NULLS FIRST LIMIT 3",
    "v_top_desc": "SELECT b, a FROM e ORDER BY b DESC NULLS LAST, a DESC NULLS LAST LIMIT 3",
    "v_sorted": "SELECT ts, z FROM w ORDER BY ts ASC NULLS LAST, z ASC NULLS LAST",
}
#: (engine view with ?, DuckDB query for one key)
KEYED = {
    "v_by_ts": ("SELECT a, b FROM e WHERE ts = ?", "SELECT a, b FROM e WHERE ts = ?"),
    "v_count_by_ts": ("SELECT ts, COUNT(*) AS n FROM e WHERE ts = ? GROUP BY ts",
                      "SELECT ts, COUNT(*) AS n FROM e WHERE ts = ? GROUP BY ts"),
}
ALL = {**VIEWS, **ORDERED}

UTC = dt.timezone.utc
ZONES = [UTC, ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York"), ZoneInfo("Asia/Kolkata"),
         dt.timezone(dt.timedelta(hours=-3, minutes=-30))]
#: instants around two DST changes (Europe's 2024-03-31 and 2024-10-27), in UTC
INSTANTS = [dt.datetime(2024, 3, 31, 0, 30, tzinfo=UTC), dt.datetime(2024, 3, 31, 1, tzinfo=UTC),
            dt.datetime(2024, 3, 31, 1, 30, tzinfo=UTC), dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC),
            dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)]


def in_zone(instant: dt.datetime | None, i: int):
    """``instant`` as an aware datetime of zone ``i`` (every third a pandas Timestamp)."""
    if instant is None:
        return None
    local = instant.astimezone(ZONES[i % len(ZONES)])
    return pd.Timestamp(local) if i % 3 == 2 else local


times = st.one_of(st.none(), st.sampled_from(INSTANTS))
zoned = st.tuples(times, st.integers(0, 14)).map(lambda p: in_zone(*p))
small = st.one_of(st.none(), st.integers(0, 3))
e_rows = st.lists(st.tuples(small, zoned, zoned), min_size=1, max_size=6)
w_rows = st.lists(st.tuples(zoned, small), min_size=1, max_size=4)
ops = st.lists(st.one_of(
    st.tuples(st.just("inse"), e_rows),
    st.tuples(st.just("insw"), w_rows),
    st.tuples(st.just("arrowe"), e_rows),
    st.tuples(st.just("dele"), st.lists(st.integers(0, 1000), min_size=1, max_size=3)),
    st.tuples(st.just("delw"), st.lists(st.integers(0, 1000), min_size=1, max_size=2)),
    st.tuples(st.just("sql"), st.integers(0, 1)),
), min_size=1, max_size=10)


def _utc(v):
    return None if v is None else v.astimezone(UTC)


#: SQL writes, each with the same change in Python for the model
SQL_WRITES = [
    (f"DELETE FROM e WHERE ts < {T0}", "e",
     lambda r: [] if r[1] is not None and _utc(r[1]) < INSTANTS[1] else [r]),
    ("UPDATE w SET ts = CAST('2024-10-27 02:30:00+02' AS TIMESTAMPTZ) WHERE z = 1", "w",
     lambda r: [(INSTANTS[3], r[1])] if r[1] == 1 else [r]),
]


def apply(model: dict[str, list[tuple]], op, db) -> None:
    kind, arg = op
    if kind in ("inse", "insw"):
        name = kind[3]
        db.table(name).insert(arg)
        model[name].extend(arg)
    elif kind == "arrowe":
        cols = list(zip(*arg))
        zone = pa.timestamp("us", tz="America/New_York")
        db.table("e").insert_arrow(pa.table({
            "a": pa.array(cols[0], pa.int64()),
            "ts": pa.array([_utc(v) for v in cols[1]], zone),
            "b": pa.array([_utc(v) for v in cols[2]], pa.timestamp("us", tz="UTC"))}))
        model["e"].extend(arg)
    elif kind in ("dele", "delw"):
        name = kind[3]
        rows = model[name]
        if not rows:
            return
        picked = sorted({i % len(rows) for i in arg}, reverse=True)
        # the same instants, in other zones than they were written in
        db.table(name).delete([tuple(in_zone(_utc(v), i + 1) if isinstance(v, dt.datetime)
                                     else v for v in rows[i]) for i in picked])
        for i in picked:
            del rows[i]
    else:
        sql, name, change = SQL_WRITES[arg]
        db.execute(sql)
        model[name] = [new for r in model[name] for new in change(r)]


def new_db(shards: int, seed, views) -> noria_py.Database:
    db = noria_py.connect(shards=shards, seed=seed)
    for sql in DDL:
        db.execute(sql)
    for name in views:
        db.execute(f"CREATE VIEW {name} AS {ALL[name]}")
    return db


def _utc_row(row: tuple) -> tuple:
    """``row`` with its datetimes in UTC. (Python's ``==`` between datetimes of two
    zones is False for a time in a DST fold, whatever the instant (PEP 495), so the
    model's rows are compared in UTC, as the engine holds them.)"""
    return tuple(_utc(v) if isinstance(v, dt.datetime) else v for v in row)


def oracle(model) -> Oracle:
    o = Oracle([])
    o.con.execute("SET TimeZone = 'UTC'")
    for sql in DDL:
        o.con.execute(sql)
    o.load({name: list(map(_utc_row, rows)) for name, rows in model.items()})
    return o


def _is_utc(row: tuple) -> bool:
    return all(v.tzinfo is UTC for v in row if isinstance(v, dt.datetime) and v.tzinfo)


def check(db, model) -> None:
    db.wait()
    duck = oracle(model)
    for name in model:
        got = db.execute(f"SELECT * FROM {name}").fetchall()
        assert all(map(_is_utc, got)), f"table {name}: {got}"
        assert normalize(got) == normalize(map(_utc_row, model[name])), f"table {name}"
    for name, sql in VIEWS.items():
        rows = db.view(name).all()
        assert all(map(_is_utc, rows)), f"view {name}: {rows}"
        got, want = normalize(rows), duck.query(sql)
        assert got == want, f"view {name}: engine {sorted(got.items(), key=repr)} != duckdb {sorted(want.items(), key=repr)}"
    for name, sql in ORDERED.items():
        got = [normal_row(r) for r in db.view(name).all()]
        want = [normal_row(r) for r in duck.con.execute(sql).fetchall()]
        assert got == want, f"view {name}: engine {got} != duckdb {want}"
    for name, (_, duck_sql) in KEYED.items():
        for i, k in enumerate(INSTANTS):
            want = duck.query(duck_sql, (k,))
            for key in (k, in_zone(k, i + 1), in_zone(k, 2)):
                got = normalize(db.view(name).lookup(key))
                assert got == want, f"view {name} key {key!r}: engine {got} != duckdb {want}"
            with pytest.raises(noria_py.TypeMismatchError, match="without a time zone"):
                db.view(name).lookup(k.replace(tzinfo=None))


CONFIGS = [(1, None, 32), (4, None, 32), (4, 11, 1)]


@pytest.mark.parametrize("shards,seed,dense_min", CONFIGS,
                         ids=[f"shards{s}-seed{d}-dense{m}" for s, d, m in CONFIGS])
@settings(max_examples=int(os.environ.get("NORIA_DIFF_EXAMPLES", "10")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(first=ops, second=ops, split=st.integers(0, len(ALL)))
def test_timestamptz_views_match_duckdb(shards, seed, dense_min, first, second, split):
    with mock.patch.object(tuning, "ARRAY_MIN", dense_min):
        names = list(ALL)
        db = new_db(shards, seed, names[:split])
        for name, (sql, _) in KEYED.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        model: dict[str, list[tuple]] = {"e": [], "w": []}
        in_two_parts(db, lambda op: apply(model, op, db), first, second,
                     {name: ALL[name] for name in names[split:]})
        check(db, model)
        db.close()
