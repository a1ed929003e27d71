"""DB-API 2.0 (PEP 249, noria_py/dbapi.py): the module globals, cursors, executemany,
parameters anywhere a value stands (checked against DuckDB), and the exception classes
every noria_py error sits under."""
from __future__ import annotations

import random

import duckdb
import pytest

import noria_py
from noria_py import errors

from .differential.helpers import normalize


@pytest.fixture
def cur() -> noria_py.Cursor:
    conn = noria_py.connect()
    c = conn.cursor()
    c.execute("CREATE TABLE t (id INT PRIMARY KEY, s TEXT, f FLOAT)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, "abc"[i % 3], i / 4) for i in range(12)])
    return c


def test_module_globals() -> None:
    assert (noria_py.apilevel, noria_py.threadsafety, noria_py.paramstyle) == ("2.0", 2, "qmark")
    assert noria_py.NUMBER == "INT" and noria_py.NUMBER == "FLOAT" and noria_py.NUMBER != "TEXT"
    assert noria_py.STRING == "TEXT" and noria_py.DATETIME == "DATE"
    assert noria_py.Date(2026, 1, 2).year == 2026
    assert noria_py.TimestampFromTicks(0).year in (1969, 1970)
    assert issubclass(noria_py.Warning, Exception)
    with pytest.raises(noria_py.NotSupportedError):
        noria_py.Binary(b"x")


def test_cursor_reads_and_describes(cur: noria_py.Cursor) -> None:
    assert cur.rowcount == 12
    assert cur.execute("SELECT id, s FROM t WHERE id > ? AND f < ? ORDER BY id", (6, 2.5)) is cur
    assert [d[0] for d in cur.description] == ["id", "s"]
    assert cur.description[0][1] == noria_py.NUMBER and cur.description[1][1] == noria_py.STRING
    assert cur.rowcount == 3
    assert cur.fetchone() == (7, "b")
    cur.arraysize = 2
    assert cur.fetchmany() == [(8, "c"), (9, "a")]
    assert cur.fetchmany(5) == [] and cur.fetchone() is None
    cur.execute("SELECT s, COUNT(*) FROM t WHERE s = ? GROUP BY s", ("a",))
    assert list(cur) == [("a", 4)]


def test_writes_report_rows_and_have_no_description(cur: noria_py.Cursor) -> None:
    cur.execute("DELETE FROM t WHERE id < ?", (3,))
    assert cur.rowcount == 3 and cur.description is None
    with pytest.raises(noria_py.ProgrammingError, match="not a query"):
        cur.fetchall()
    cur.executemany("UPDATE t SET s = ? WHERE id = ?", [("z", 3), ("z", 4), ("z", 99)])
    assert cur.rowcount == 2
    cur.execute("SELECT id FROM t WHERE s = 'z' ORDER BY id")
    assert cur.fetchall() == [(3,), (4,)]


def test_executemany_inserts_every_row_or_none(cur: noria_py.Cursor) -> None:
    with pytest.raises(noria_py.IntegrityError, match="primary key"):
        cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [(100, "x", 0.0), (5, "x", 0.0)])
    with pytest.raises(noria_py.DataError):
        cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [(101, "x", 0.0), (102, 7, 0.0)])
    cur.execute("SELECT COUNT(*) FROM t")
    assert cur.fetchone() == (12,)
    with pytest.raises(noria_py.ProgrammingError, match="executemany takes"):
        cur.executemany("SELECT id FROM t WHERE id = ?", [(1,)])
    cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [])
    assert cur.rowcount == 0


def test_misuse_is_a_dbapi_error(cur: noria_py.Cursor) -> None:
    with pytest.raises(noria_py.ProgrammingError, match="sequence"):
        cur.execute("SELECT id FROM t WHERE s = ?", "a")
    with pytest.raises(noria_py.ProgrammingError):
        cur.execute("SELECT id FROM t WHERE s = ?", ("a", "b"))
    conn = cur.connection
    conn.commit()
    with pytest.raises(noria_py.NotSupportedError, match="roll back"):
        conn.rollback()
    cur.close()
    with pytest.raises(noria_py.InterfaceError, match="closed"):
        cur.execute("SELECT 1")
    conn.close()
    with pytest.raises(noria_py.InterfaceError):
        conn.cursor()


@pytest.mark.parametrize("cls,dbapi", [
    (errors.SqlError, errors.ProgrammingError), (errors.ParseError, errors.ProgrammingError),
    (errors.UnsupportedError, errors.NotSupportedError),
    (errors.UnknownTableError, errors.ProgrammingError),
    (errors.UnknownColumnError, errors.ProgrammingError),
    (errors.UnknownViewError, errors.ProgrammingError),
    (errors.AlreadyExistsError, errors.ProgrammingError),
    (errors.ArityError, errors.ProgrammingError), (errors.TypeMismatchError, errors.DataError),
    (errors.RowNotFoundError, errors.DataError), (errors.DuplicateKeyError, errors.IntegrityError),
    (errors.RecoveryError, errors.OperationalError), (errors.StorageError, errors.OperationalError),
    (errors.CorruptionError, errors.OperationalError), (errors.ClosedError, errors.InterfaceError),
    (errors.RequestError, errors.InterfaceError), (errors.UnknownNodeError, errors.ProgrammingError),
])
def test_every_error_sits_under_a_dbapi_class(cls: type, dbapi: type) -> None:
    assert issubclass(cls, dbapi) and issubclass(dbapi, noria_py.Error)
    assert issubclass(dbapi, noria_py.DatabaseError) or dbapi is noria_py.InterfaceError


def test_every_error_class_is_placed() -> None:
    """A new error class, anywhere in the package, must say which DB-API class it is."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(noria_py.__path__, "noria_py."):
        if ".spark." in info.name and info.name != "noria_py.spark.schema":
            continue                        # (the rest import PySpark)
        importlib.import_module(info.name)
    dbapi = (errors.InterfaceError, errors.DatabaseError)

    def subclasses(cls: type) -> list[type]:
        return [cls] + [s for c in cls.__subclasses__() for s in subclasses(c)]

    unplaced = [c.__qualname__ for c in subclasses(errors.Error)
                if c is not errors.Error and not issubclass(c, dbapi)]
    assert not unplaced


#: (query, what each ? takes: n a number, s a string)
QUERIES = [
    ("SELECT id, s FROM t WHERE id > ? AND s <> ?", "ns"),
    ("SELECT id + ? AS x FROM t WHERE f <= ?", "nn"),
    ("SELECT s, COUNT(*) AS n FROM t WHERE id < ? GROUP BY s HAVING COUNT(*) >= ?", "nn"),
    ("SELECT id FROM t WHERE s = ? OR id = ?", "sn"),
    ("SELECT id FROM t WHERE s = ? AND id BETWEEN ? AND ?", "snn"),
    ("SELECT id FROM t WHERE id IN (SELECT id FROM t WHERE f > ?) AND s = ?", "ns"),
    ("SELECT MAX(f) AS m FROM t WHERE s = ? AND id > ?", "sn"),
]


def test_parameters_anywhere_match_duckdb(cur: noria_py.Cursor) -> None:
    rng = random.Random(3)
    oracle = duckdb.connect()
    oracle.execute("CREATE TABLE t (id INT PRIMARY KEY, s TEXT, f DOUBLE)")
    oracle.executemany("INSERT INTO t VALUES (?, ?, ?)", [[i, "abc"[i % 3], i / 4] for i in range(12)])
    for sql, kinds in QUERIES:
        for _ in range(6):
            params = [rng.choice("abcd") if k == "s" else rng.randrange(-1, 13) for k in kinds]
            cur.execute(sql, params)
            want = oracle.execute(sql, params).fetchall()
            assert normalize(cur.fetchall()) == normalize(want), (sql, params)
