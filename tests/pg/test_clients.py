"""Real PostgreSQL clients against ``PgServer``: psycopg (text and binary), psql,
asyncpg, SQLAlchemy Core and pandas; errors with their SQLSTATEs; transactions."""
from __future__ import annotations

import asyncio
import datetime
import math
import shutil
import subprocess
import time
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pgerr  # noqa: E402

SCHEMA = """
CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT, f FLOAT, ok BOOL, d DATE, ts TIMESTAMP);
CREATE VIEW by_a AS SELECT a, COUNT(*) AS n, SUM(f) AS total FROM t GROUP BY a;
CREATE VIEW rows_of AS SELECT id, a, b FROM t WHERE a = ?;
"""
ROWS = [
    (1, 10, "one", 1.5, True, datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5)),
    (2, 10, "two", -0.25, False, datetime.date(1999, 12, 31),
     datetime.datetime(2000, 1, 1, 0, 0, 0, 500000)),
    (3, 20, "ünï", 1e20, None, None, None),
    (4, 20, None, math.inf, True, datetime.date(2024, 2, 29), datetime.datetime(1970, 1, 1)),
]


@pytest.fixture
def loaded(served: tuple[Any, Any], conn: Any) -> Any:
    db = served[0]
    for stmt in SCHEMA.strip().split(";\n"):
        db.execute(stmt.rstrip(";"))
    db.table("t").insert(ROWS)
    return conn


@pytest.mark.parametrize("binary", [False, True])
def test_values_of_every_type_come_back_as_written(loaded: Any, binary: bool) -> None:
    cur = loaded.cursor(binary=binary)
    cur.execute("SELECT id, a, b, f, ok, d, ts FROM t ORDER BY id")
    assert cur.fetchall() == ROWS
    assert [c.type_code for c in cur.description] == [20, 20, 25, 701, 16, 1082, 1114]


@pytest.mark.parametrize("binary", [False, True])
def test_a_prepared_lookup_reads_the_view_and_plans_once(served: Any, loaded: Any,
                                                         binary: bool) -> None:
    db = served[0]
    cur = loaded.cursor(binary=binary)
    for key, want in [(10, [(10, 2, 1.25)]), (20, [(20, 2, math.inf)]), (30, [])] * 3:
        cur.execute("SELECT a, n, total FROM by_a WHERE a = %s", (key,), prepare=True)
        assert cur.fetchall() == want
    assert len(db.queries()) == 1
    cur.execute("SELECT id FROM rows_of WHERE a = %s ORDER BY id", (10,))
    assert cur.fetchall() == [(1,), (2,)]


def test_parameters_stand_anywhere_a_value_may(loaded: Any) -> None:
    cur = loaded.cursor()
    cur.execute("SELECT id FROM t WHERE f > %s AND b <> %s ORDER BY id", (0, "one"))
    assert cur.fetchall() == [(3,)]
    cur.execute("SELECT id FROM t WHERE d = %s", (datetime.date(2024, 1, 2),))
    assert cur.fetchall() == [(1,)]
    cur.execute("SELECT id FROM t WHERE b = %s OR a = %s ORDER BY id", ("two", 20))
    assert cur.fetchall() == [(2,), (3,), (4,)]


def test_writes_report_their_counts_and_are_read_back(loaded: Any) -> None:
    cur = loaded.cursor()
    cur.execute("INSERT INTO t (id, a, b) VALUES (%s, %s, %s), (%s, %s, %s)",
                (5, 30, "x", 6, 30, "y"))
    assert (cur.statusmessage, cur.rowcount) == ("INSERT 0 2", 2)
    cur.execute("UPDATE t SET b = %s WHERE a = %s", ("z", 30))
    assert (cur.statusmessage, cur.rowcount) == ("UPDATE 2", 2)
    cur.execute("SELECT n FROM by_a WHERE a = 30")
    assert cur.fetchall() == [(2,)]
    cur.execute("DELETE FROM t WHERE a = %s", (30,))
    assert cur.statusmessage == "DELETE 2"
    cur.execute("SELECT n FROM by_a WHERE a = 30")
    assert cur.fetchall() == []


@pytest.mark.parametrize("sql, error", [
    ("SELEC 1", pgerr.SyntaxError),
    ("SELECT * FROM nowhere", pgerr.UndefinedTable),
    ("SELECT nothing FROM t", pgerr.UndefinedColumn),
    ("CREATE TABLE t (x INT)", pgerr.DuplicateTable),
    ("INSERT INTO t (id) VALUES (1)", pgerr.UniqueViolation),
    ("SET TimeZone = 'Europe/Paris'", pgerr.FeatureNotSupported),
    ("SHOW no_such_setting", pgerr.SyntaxErrorOrAccessRuleViolation),
])
def test_errors_carry_postgres_sqlstates(loaded: Any, sql: str, error: type) -> None:
    with pytest.raises(error):
        loaded.execute(sql)
    assert loaded.execute("SELECT COUNT(*) FROM t").fetchone() == (4,)   # still serving


def test_settings_are_kept_per_session(loaded: Any, conninfo: str) -> None:
    loaded.execute("SET application_name = 'mine'")
    assert loaded.execute("SHOW application_name").fetchone() == ("mine",)
    assert loaded.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
    with psycopg.connect(conninfo, autocommit=True) as other:
        assert other.execute("SHOW application_name").fetchone() == ("",)
    assert "PostgreSQL 15" in loaded.execute("SELECT version()").fetchone()[0]


def test_a_transaction_applies_its_inserts_at_commit_or_not_at_all(served: Any, loaded: Any,
                                                                   conninfo: str) -> None:
    db = served[0]
    with psycopg.connect(conninfo) as c:        # not autocommit: BEGIN ... COMMIT
        c.cursor().executemany("INSERT INTO t (id, a) VALUES (%s, %s)",
                               [(i, 40) for i in range(100, 150)])
        assert len(db.table("t")) == 4          # nothing before the COMMIT
        c.commit()
    assert db.view("by_a").all().count((40, 50, None)) == 1
    with psycopg.connect(conninfo) as c:
        c.execute("INSERT INTO t (id, a) VALUES (200, 50)")
        c.rollback()
    assert len(db.table("t")) == 54
    with psycopg.connect(conninfo) as c:        # a duplicate key fails the whole batch
        c.cursor().executemany("INSERT INTO t (id, a) VALUES (%s, %s)", [(300, 1), (1, 1)])
        with pytest.raises(pgerr.UniqueViolation):
            c.commit()
    assert len(db.table("t")) == 54


def test_what_a_transaction_cannot_hold_is_refused(loaded: Any, conninfo: str) -> None:
    db_rows = loaded.execute("SELECT COUNT(*) FROM t").fetchone()
    with psycopg.connect(conninfo) as c:
        c.execute("INSERT INTO t (id) VALUES (500)")
        with pytest.raises(pgerr.FeatureNotSupported, match="COMMIT first"):
            c.execute("SELECT * FROM t")
        with pytest.raises(pgerr.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        c.execute("INSERT INTO t (id) VALUES (500)")
        with pytest.raises(pgerr.FeatureNotSupported, match="one table"):
            c.execute("DELETE FROM t WHERE id = 1")
        c.rollback()
    assert loaded.execute("SELECT COUNT(*) FROM t").fetchone() == db_rows


def test_reads_in_a_transaction_see_what_is_committed(loaded: Any, conninfo: str) -> None:
    with psycopg.connect(conninfo) as c:
        assert c.execute("SELECT COUNT(*) FROM t").fetchone() == (4,)
        loaded.execute("INSERT INTO t (id) VALUES (600)")
        assert c.execute("SELECT COUNT(*) FROM t").fetchone() == (5,)


def test_catalog_queries_describe_the_engine(loaded: Any) -> None:
    rows = loaded.execute("SELECT table_name, table_type FROM information_schema.tables "
                          "WHERE table_schema = 'public' ORDER BY 1").fetchall()
    assert rows == [("by_a", "VIEW"), ("rows_of", "VIEW"), ("t", "BASE TABLE")]
    cols = loaded.execute("SELECT column_name FROM information_schema.columns "
                          "WHERE table_name = 't' ORDER BY ordinal_position").fetchall()
    assert [c[0] for c in cols] == ["id", "a", "b", "f", "ok", "d", "ts"]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_runs_commands_and_lists_relations(loaded: Any, served: Any) -> None:
    def psql(*args: str) -> str:
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(served[1].port), "-U",
                              "tester", "-d", "noria", "-X", "-A", "-t", *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout
    assert psql("-c", "SELECT n FROM by_a WHERE a = 10").split() == ["2"]
    assert "t|table" in psql("-c", r"\dt").replace("public|", "")
    listed = psql("-c", r"\dv")
    assert "by_a" in listed and "rows_of" in listed and "pg_class" not in listed
    described = psql("-c", r"\d t").splitlines()
    assert "id|bigint||not null|" in described and "ts|timestamp without time zone|||" in described
    assert "n|bigint|||" in psql("-c", r"\d by_a").splitlines()


def test_asyncpg_reads_with_binary_parameters(loaded: Any, served: Any) -> None:
    asyncpg = pytest.importorskip("asyncpg")

    async def run() -> list:
        c = await asyncpg.connect(host="127.0.0.1", port=served[1].port, user="tester",
                                  database="noria", ssl=False)
        try:
            rows = await c.fetch("SELECT id, b FROM t WHERE a = $1 ORDER BY id", 10)
            stmt = await c.prepare("SELECT n FROM by_a WHERE a = $1")
            n = await stmt.fetchval(20)
            return [tuple(r) for r in rows] + [(n,)]
        finally:
            await c.close()
    assert asyncio.run(run()) == [(1, "one"), (2, "two"), (2,)]


def test_sqlalchemy_core_and_pandas(loaded: Any, served: Any) -> None:
    sa = pytest.importorskip("sqlalchemy")
    pd = pytest.importorskip("pandas")
    engine = sa.create_engine(f"postgresql+psycopg://tester@127.0.0.1:{served[1].port}/noria")
    try:
        with engine.connect() as c:
            got = c.execute(sa.text("SELECT a, n FROM by_a WHERE a = :a"), {"a": 10}).all()
            assert [tuple(r) for r in got] == [(10, 2)]
            t = sa.table("t", sa.column("id"), sa.column("b"))
            got = c.execute(sa.select(t.c.b).where(t.c.id == 2)).all()
            assert [tuple(r) for r in got] == [("two",)]
        frame = pd.read_sql("SELECT id, f FROM t ORDER BY id", engine)
        assert list(frame["id"]) == [1, 2, 3, 4]
        more = pd.DataFrame({"id": [7, 8], "a": [70, 70], "b": ["p", "q"]})
        more.to_sql("t", engine, if_exists="append", index=False)
        assert pd.read_sql("SELECT n FROM by_a WHERE a = 70", engine)["n"].tolist() == [2]
        inspector = sa.inspect(engine)
        assert inspector.get_table_names() == ["t"] and inspector.has_table("t")
        assert sorted(inspector.get_view_names()) == ["by_a", "rows_of"]
        assert inspector.get_pk_constraint("t")["constrained_columns"] == ["id"]
        reflected = sa.Table("t", sa.MetaData(), autoload_with=engine)
        assert [(c.name, str(c.type), c.nullable) for c in reflected.c][:3] == [
            ("id", "BIGINT", False), ("a", "BIGINT", True), ("b", "TEXT", True)]
        view = sa.Table("by_a", sa.MetaData(), autoload_with=engine)
        with engine.connect() as c:
            got = c.execute(sa.select(view.c.n).where(view.c.a == 70)).all()
        assert [tuple(r) for r in got] == [(2,)]
    finally:
        engine.dispose()


def test_a_subscriber_sees_the_snapshot_then_every_change_in_order(served: Any,
                                                                   loaded: Any) -> None:
    db = served[0]
    lines: list[tuple] = []
    with pytest.raises(pgerr.QueryCanceled):
        with loaded.cursor().copy("COPY (SUBSCRIBE TO by_a) TO STDOUT") as copy:
            rows = copy.rows()
            for _ in range(2):                               # the snapshot: two groups
                lines.append(next(rows))
            db.table("t").insert([(10, 10, "ten", 1.0, None, None, None)])
            db.table("t").delete([ROWS[2]])
            for _ in range(4):
                lines.append(next(rows))
            loaded.cancel_safe()                             # how a client stops it
            for _ in rows:
                pass
    assert loaded.execute("SELECT n FROM by_a WHERE a = 20").fetchone() == (1,)
    snapshot, changes = lines[:2], lines[2:]
    assert sorted(r[1:] for r in snapshot) == [("1", "10", "2", "1.25"), ("1", "20", "2", "Infinity")]
    assert [r[1:] for r in changes] == [("-1", "10", "2", "1.25"), ("1", "10", "3", "2.25"),
                                        ("-1", "20", "2", "Infinity"), ("1", "20", "1", "Infinity")]
    progress = [int(r[0]) for r in lines]
    assert progress == sorted(progress) and progress[2] < progress[4]


def test_a_subscriber_that_falls_behind_is_ended_and_writes_go_on(
        served: Any, loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from noria_py.pg import server as pgserver
    monkeypatch.setattr(pgserver, "SUBSCRIBER_BUFFER", 1 << 10)
    db, server = served
    db.execute("CREATE VIEW texts AS SELECT id, b FROM t")

    def subscribed() -> bool:
        return any(c.session is not None and c.session.subscription is not None
                   for c in list(server.connections))

    with pytest.raises(pgerr.QueryCanceled, match="fell behind"):
        with loaded.cursor().copy("COPY (SUBSCRIBE texts) TO STDOUT") as copy:
            next(copy.rows())
            written = 0
            while subscribed():          # not read meanwhile: past the socket's buffers too
                assert written < 5000, "the server never ended a subscriber it could not reach"
                db.table("t").insert([(1000 + written, written, "x" * 20_000, 0.5,
                                       None, None, None)])
                written += 1
                time.sleep(0.001)        # let the server's loop push the change
            for _ in copy.rows():
                pass
    assert len(db.table("t")) == 4 + written
    assert loaded.execute("SELECT COUNT(*) FROM texts").fetchone() == (4 + written,)


def test_an_error_points_into_the_statement(loaded: Any) -> None:
    sql = "SELECT id,\n  nothing FROM t"
    with pytest.raises(pgerr.UndefinedColumn) as info:
        loaded.execute(sql)
    position = int(info.value.diag.statement_position or 0)
    assert sql[position - 1:].startswith("nothing")
    assert "line" not in str(info.value)


@pytest.mark.parametrize("binary", [False, True])
def test_timestamptz_instants_go_in_and_come_out_in_utc(conn: Any, binary: bool) -> None:
    utc = datetime.timezone.utc
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    conn.execute("CREATE TABLE z (id INT PRIMARY KEY, at TIMESTAMPTZ)")
    cur = conn.cursor(binary=binary)
    cur.executemany("INSERT INTO z VALUES (%s, %s)",
                    [(1, datetime.datetime(2024, 6, 1, 12, 0, tzinfo=plus2)),
                     (2, datetime.datetime(2024, 6, 1, 11, 30, tzinfo=utc))])
    cur.execute("SELECT id, at FROM z ORDER BY at")
    assert cur.fetchall() == [(1, datetime.datetime(2024, 6, 1, 10, 0, tzinfo=utc)),
                              (2, datetime.datetime(2024, 6, 1, 11, 30, tzinfo=utc))]
    assert cur.description[1].type_code == 1184
    cur.execute("SELECT id FROM z WHERE at = %s",
                (datetime.datetime(2024, 6, 1, 13, 30, tzinfo=plus2),))
    assert cur.fetchall() == [(2,)]
    assert conn.execute("SELECT at::text FROM z WHERE id = 1").fetchone() == \
        ("2024-06-01 10:00:00+00",)
