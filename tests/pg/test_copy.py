"""COPY over the wire: FROM STDIN (text and CSV, psql's \\copy), TO STDOUT (a table, a
query); a COPY's rows are one write."""
from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import errors as pgerr  # noqa: E402


@pytest.fixture
def db(served: Any) -> Any:
    db = served[0]
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT, d DATE)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    return db


def test_copy_from_stdin_in_text_and_csv(db: Any, conn: Any) -> None:
    rows = [(i, i % 2, None if i == 0 else f"x\t{i}\\", datetime.date(2024, 1, 1 + i))
            for i in range(5)]
    with conn.cursor().copy("COPY t (id, a, b, d) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    assert sorted(db.table("t").rows()) == rows
    with conn.cursor().copy("COPY t FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
        copy.write(b'id,a,b,d\n10,1,"q,uoted ""x""",2024-02-02\n11,1,,\n')
    assert sorted(db.table("t").rows())[-2:] == [
        (10, 1, 'q,uoted "x"', datetime.date(2024, 2, 2)), (11, 1, None, None)]
    assert sorted(db.view("v").all()) == [(0, 3), (1, 4)]


def test_copy_to_stdout_of_a_table_and_a_query(db: Any, conn: Any) -> None:
    db.table("t").insert([(1, 5, "a\tb", None), (2, 5, None, datetime.date(2024, 3, 1))])
    with conn.cursor().copy("COPY t TO STDOUT") as copy:
        got = sorted(copy.rows())
    assert got == [("1", "5", "a\tb", None), ("2", "5", None, "2024-03-01")]
    with conn.cursor().copy("COPY (SELECT a, n FROM v WHERE a = 5) TO STDOUT WITH (FORMAT csv)") as copy:
        data = b"".join(bytes(chunk) for chunk in iter(copy.read, b""))
    assert data == b"5,2\n"


@pytest.mark.parametrize("data, error", [
    (b"20\t1\tx\t2024-01-01\n1\t1\tdup\t2024-01-01\n", pgerr.UniqueViolation),
    (b"30\tnotint\tx\t2024-01-01\n", pgerr.InvalidTextRepresentation),
    (b"31\t1\tx\n", pgerr.BadCopyFileFormat),
])
def test_a_bad_copy_changes_nothing(db: Any, conn: Any, data: bytes, error: type) -> None:
    db.table("t").insert([(1, 1, "one", None)])
    with pytest.raises(error):
        with conn.cursor().copy("COPY t FROM STDIN") as copy:
            copy.write(data)
    assert db.table("t").rows() == [(1, 1, "one", None)]
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (1,)    # still serving


def test_a_client_can_abandon_a_copy(db: Any, conn: Any) -> None:
    with pytest.raises(ZeroDivisionError):
        with conn.cursor().copy("COPY t FROM STDIN") as copy:
            copy.write_row((1, 1, "x", None))
            1 / 0                                   # psycopg sends CopyFail
    assert len(db.table("t")) == 0
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)


def test_copy_in_a_transaction_is_applied_at_commit(db: Any, conninfo: str) -> None:
    with psycopg.connect(conninfo) as c:
        with c.cursor().copy("COPY t (id, a) FROM STDIN") as copy:
            copy.write_row((40, 9))
        c.execute("INSERT INTO t (id, a) VALUES (41, 9)")
        assert len(db.table("t")) == 0
        c.commit()
    assert sorted(db.table("t").rows()) == [(40, 9, None, None), (41, 9, None, None)]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_copies_a_table_out_and_back(db: Any, served: Any, tmp_path: Path) -> None:
    db.table("t").insert([(i, i % 3, f"r{i}", datetime.date(2024, 1, 1)) for i in range(50)])
    out = tmp_path / "t.csv"

    def psql(*commands: str) -> str:
        args = ["psql", "-h", "127.0.0.1", "-p", str(served[1].port), "-U", "u", "-d", "noria",
                "-X", "-A", "-t"]
        for c in commands:
            args += ["-c", c]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout
    psql(rf"\copy t to '{out}' with (format csv, header)")
    assert out.read_text().splitlines()[0] == "id,a,b,d"
    assert psql("DELETE FROM t", rf"\copy t from '{out}' with (format csv, header)",
                "SELECT COUNT(*) FROM t").split()[-1] == "50"
    assert sorted(db.view("v").all()) == [(0, 17), (1, 17), (2, 16)]
