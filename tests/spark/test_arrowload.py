"""`noria-py load --engine arrow` (noria_py/spark/arrowload.py): the same inputs give the
same table, the same error class and message, and the same reject file as the Spark
path (the tests marked spark run both engines on each input); the rest runs without
Spark."""
from __future__ import annotations

import datetime
import decimal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import noria_py
from noria_py.spark import load as load_module
from noria_py.spark.arrowload import split_csv_line
from noria_py.spark.load import load
from noria_py.spark.schema import LoadError
from noria_tools.cli import main as cli_main
from tests.spark.test_load import _data_dir, _rows

ITEM = "id,name,price,ok,d\n"
EV = "id,ts,tag\n"

# (name, table, {file name: CSV text or a pyarrow table (Parquet)}, skip_bad)
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("csv good", "item", {"a.csv": ITEM + "2,a,1.5,true,2024-01-02\n+7,b,1e3,Yes,\n 8 ,c , .5 , on ,"
                          "2023-12-31\n9,,inf,F,\n10,x,-Infinity,0,\n11,y,NaN,n,\n"}, False),
    ("csv bad types", "item", {"a.csv": ITEM + "2,a,12abc,true,\n3,b,1,maybe,\n1.5,c,1,t,\n"
                               "4,d,1,t,2024-02-30\n9223372036854775808,e,1,t,\n5,f,-nan,t,\n"
                               "6,g,1d,t,\n7,h,1,t,2024-1-2\n"}, False),
    ("csv bad types, skip", "item", {"a.csv": ITEM + "2,a,12abc,true,\n3,b,1,maybe,\n1.5,c,1,t,\n"
                                     "4,d,1,t,2024-02-30\n12,ok,2,no,2020-02-29\n"
                                     "9223372036854775808,e,1,t,\n5,f,-nan,t,\n"}, True),
    ("csv null key and not null", "ev", {"e.csv": EV + ",2024-01-01,a\n2,,b\n3,2024-01-01 10:00,\n"
                                         "4,2024-01-01T10:00:05.5,x\n"}, True),
    ("csv timestamps", "ev", {"e.csv": EV + "1,2024-01-02 03:04,a\n2,2024-01-02T03:04:05.123456,b\n"
                              "3,2024-01-02,c\n4,2024-01-02 25:00,d\n5, 2024-01-02,e\n"
                              "6,2024-01-02 03:04:05.1234567,f\n"}, True),
    ("csv duplicates across files", "item", {"a.csv": ITEM + "2,a,1,t,\n3,b,x,t,\n",
                                             "b.csv": ITEM + "3,c,1,t,\n2,d,1,t,\n1,e,1,t,\n"}, False),
    ("csv duplicates across files, skip", "item",
     {"a.csv": ITEM + "2,a,1,t,\n3,b,x,t,\n", "b.csv": ITEM + "3,c,1,t,\n2,d,1,t,\n1,e,1,t,\n"},
     True),
    ("csv quoting and malformed lines", "item",
     {"q.csv": ITEM + '2,"",1,t,\n3,"q""r",1,t,\n4,"s\\"t",1,t,\n5,only\n6,a,1,t,,extra\n\n'
               '   \n7,"multi\nline",1,t,\n8,\\N,1,t,\r\n9,é,1,t,\n10,"x,y",2,f,\n'}, True),
    ("csv many bad rows", "item", {"a.csv": ITEM + "".join(f"{i},n,bad,t,\n" for i in range(2, 20))},
     False),
    ("csv missing column", "item", {"a.csv": "id,name,price\n2,a,1\n"}, False),
    ("csv extra column", "vote", {"a.csv": "article_id,user_id,when\n1,2,3\n"}, False),
    ("parquet good", "vote", {"a.parquet": pa.table({"user_id": pa.array(range(50), pa.int32()),
                                                     "ARTICLE_ID": pa.array([i % 3 for i in range(50)],
                                                                            pa.uint8())}),
                              "b.parquet": pa.table({"user_id": pa.array([1, 2], pa.int32()),
                                                     "article_id": pa.array([7, 8], pa.uint8())})},
     False),
    ("parquet type mismatch", "vote", {"a.parquet": pa.table({"article_id": [1.5], "user_id": [1]})},
     False),
    ("parquet null-typed column", "item", {"a.parquet": pa.table({
        "id": [5], "name": pa.nulls(1), "price": [1.0], "ok": [True],
        "d": pa.array([datetime.date(2024, 1, 1)])})}, False),
    ("parquet conversions", "item", {"a.parquet": pa.table({
        "id": pa.array([5, 6, None, 5, 1], pa.int16()), "name": ["a", None, "c", "d", "e"],
        "price": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("3"),
                           decimal.Decimal("4"), decimal.Decimal("5")], pa.decimal128(10, 2)),
        "ok": [True, False, None, True, False],
        "d": pa.array([datetime.date(2024, 1, 1), None, None, None, None])})}, True),
    ("parquet instants", "ev", {"a.parquet": pa.table({
        "id": [1, 2], "tag": ["a", "b"],
        "ts": pa.array([datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc),
                        datetime.datetime(2024, 6, 1, 23, 30, tzinfo=datetime.timezone(
                            datetime.timedelta(hours=2)))], pa.timestamp("us", tz="UTC"))})},
     False),
    ("parquet rejects' values", "item", {"a.parquet": pa.table({
        "id": [None, None, None, 7], "name": ["a", "b", "c", "d"], "price": [1e10, 1.5e-5, 0.1, 2.0],
        "ok": [True, None, False, True], "d": pa.array([datetime.date(2024, 1, 1), None, None, None])})},
     True),
    ("parquet rejects' times", "ev", {"a.parquet": pa.table({
        "id": [None, None, 3], "tag": ["a", "b", "c"],
        "ts": pa.array([datetime.datetime(2024, 1, 1, 12, 0, 0, 123456), datetime.datetime(2024, 1, 2),
                        datetime.datetime(2024, 1, 3)], pa.timestamp("us"))})}, True),
    ("parquet rejects' instants", "ev", {"b.parquet": pa.table({
        "id": [None, 5], "tag": ["z", "y"],
        "ts": pa.array([datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc),
                        datetime.datetime(2024, 1, 1, 13, tzinfo=datetime.timezone.utc)],
                       pa.timestamp("us", tz="UTC"))})}, True),
    ("parquet missing column", "vote", {"a.parquet": pa.table({"article_id": [1]})}, False),
    # files checked as a whole before Spark reads them (a raw Spark exception before)
    ("csv headers differ", "vote", {"a.csv": "user_id,article_id\n1,2\n",
                                    "b.csv": "article_id,user_id\n3,4\n"}, False),
    ("csv headers differ in case only", "vote", {"a.csv": "user_id,article_id\n1,2\n",
                                                 "b.csv": "\nUSER_ID,Article_Id\n3,4\n"}, False),
    ("parquet int32 and int64 files", "vote", {
        "a.parquet": pa.table({"user_id": pa.array([1], pa.int32()),
                               "article_id": pa.array([2], pa.int32())}),
        "b.parquet": pa.table({"article_id": pa.array([2**40], pa.int64()),
                               "user_id": pa.array([3], pa.int64())})}, False),
    ("parquet int and string files", "vote", {
        "a.parquet": pa.table({"user_id": [1], "article_id": [2]}),
        "b.parquet": pa.table({"user_id": [1], "article_id": ["2"]})}, False),
    ("parquet nanoseconds", "ev", {"a.parquet": pa.table({
        "id": [1, 2, 3], "tag": ["a", "b", "c"],
        "ts": pa.array([-1500, 1500, 1_700_000_000_123_456_789], pa.timestamp("ns"))})}, False),
    # TIMESTAMPTZ: an instant is kept, a wall-clock time or text without offset is UTC
    ("csv timestamptz", "tz", {"a.csv": "id,ts\n1,2024-01-01 10:00:00+02:00\n2,2024-01-01 10:00\n"
                               "3,2024-01-01T10:00:00Z\n4,2024-01-01 10:00:00+0200\n"
                               "5,2024-01-01 10:00+02:00\n6,2024-01-01\n7,2024-01-01 10:00:00z\n"
                               "8,2024-01-01T10:00:00.123456-05:30\n9,2024-01-01 10:00:00+2\n"
                               "10,\n"}, True),
    ("parquet into timestamptz", "tz", {
        "a.parquet": pa.table({"id": [1, 2], "ts": pa.array(
            [datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc), None],
            pa.timestamp("us", tz="Europe/Paris"))}),
        "b.parquet": pa.table({"id": [3], "ts": pa.array([datetime.datetime(2024, 1, 1, 12)],
                                                         pa.timestamp("us"))}),
        "c.parquet": pa.table({"id": [4], "ts": pa.array([1_700_000_000_123_456_789],
                                                         pa.timestamp("ns", tz="UTC"))})},
     False),
]


def _make_dir(tmp_path: Path) -> str:
    d = _data_dir(tmp_path)
    with noria_py.connect(data_dir=d) as db:
        db.execute("CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL, tag TEXT NOT NULL)")
        db.execute("CREATE TABLE tz (id INT PRIMARY KEY, ts TIMESTAMPTZ)")
    return d


def _write_inputs(folder: Path, files: dict[str, Any]) -> list[str]:
    folder.mkdir(exist_ok=True)
    paths = []
    for name, content in files.items():
        p = folder / name
        if isinstance(content, str):
            p.write_bytes(content.encode())
        else:
            pq.write_table(content, p)
        paths.append(str(p))
    return paths


def _outcome(tmp_path: Path, case: tuple, engine: str, spark: Any = None) -> dict:
    """What a load of the case's files did: its error (class and message) or its counts,
    the table afterwards and the reject file."""
    name, table, files, skip_bad = case
    paths = _write_inputs(tmp_path / "in", files)
    d = _make_dir(tmp_path / engine)
    reject = tmp_path / engine / "rejects.csv"
    out: dict[str, Any] = {}
    try:
        report = load(table, paths, data_dir=d, progress=False, engine=engine, spark=spark,
                      skip_bad=skip_bad, reject_file=str(reject))
        out["result"] = (report.rows, report.rejected)
        assert report.engine == engine
    except noria_py.Error as exc:
        out["result"] = (type(exc).__name__, str(exc))
    out["rows"] = _rows(d, f"SELECT * FROM {table}")
    out["rejects"] = reject.read_text() if reject.exists() else None
    return out


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_both_engines_agree(spark, tmp_path: Path, case: tuple) -> None:
    arrow = _outcome(tmp_path, case, "arrow")
    assert _outcome(tmp_path, case, "spark", spark) == arrow


# ---------------------------------------------------------------- without Spark

def test_csv_lines_split_as_spark_splits_them() -> None:
    # Spark's own reading of these lines (PySpark 4.3, header, PERMISSIVE), recorded
    assert split_csv_line('1,"",x') == ["1", None, "x"]
    assert split_csv_line("2,,y") == ["2", None, "y"]
    assert split_csv_line('3, z ,"q""r"') == ["3", " z ", '"q""r"']
    assert split_csv_line('4,"s\\"t",u') == ["4", 's"t', "u"]
    assert split_csv_line('7,"multi') == ["7", "multi"]
    assert split_csv_line('line",w') == ['line"', "w"]
    assert split_csv_line("8,é,\\N") == ["8", "é", "\\N"]
    assert split_csv_line('"a,b",c,') == ["a,b", "c", None]


def _csv_dir(tmp_path: Path, text: str) -> tuple[str, str]:
    d = _make_dir(tmp_path)
    f = tmp_path / "in.csv"
    f.write_text(text)
    return d, str(f)


def test_a_rejected_load_changes_nothing(tmp_path: Path) -> None:
    d, f = _csv_dir(tmp_path, ITEM + "2,a,1,t,\n3,b,1,t,\n2,c,1,t,\n")
    with pytest.raises(LoadError) as e:
        load("item", [f], data_dir=d, progress=False, engine="arrow")
    assert str(e.value).endswith(f"\n  {f}, row 3, column id: duplicate primary key "
                                 "(an earlier row has it)")
    assert _rows(d, "SELECT id FROM item") == [(1,)]
    d2, f2 = _csv_dir(tmp_path / "b", ITEM + "2,a,1,t,\n,b,1,t,\n")
    with pytest.raises(LoadError, match="row 2, column id: NULL in a primary-key column"):
        load("item", [f2], data_dir=d2, progress=False, engine="arrow")
    with pytest.raises(LoadError, match="row 1, column id: primary key already in the table"):
        load("item", [_write_inputs(tmp_path / "c", {"x.csv": ITEM + "1,a,1,t,\n"})[0]],
             data_dir=d2, progress=False, engine="arrow")
    with pytest.raises(LoadError, match=r"missing column\(s\) \['ok', 'd'\]"):
        load("item", [_write_inputs(tmp_path / "c", {"y.csv": "id,name,price\n5,a,1\n"})[0]],
             data_dir=d2, progress=False, engine="arrow")
    with pytest.raises(noria_py.UnknownTableError, match="no table 'nope'"):
        load("nope", [f2], data_dir=d2, progress=False, engine="arrow")
    assert _rows(d2, "SELECT id FROM item") == [(1,)]


def test_auto_picks_arrow_for_small_inputs_and_spark_above_the_threshold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, f = _csv_dir(tmp_path, "article_id,user_id\n1,2\n3,4\n")
    assert load_module.choose_engine("auto", [f]) == "arrow"
    assert load_module.choose_engine("auto", ["s3://bucket/x.csv"]) == "spark"
    assert load_module.choose_engine("spark", [f]) == "spark"
    with pytest.raises(LoadError, match="unknown engine 'duckdb'"):
        load_module.choose_engine("duckdb", [f])
    with pytest.raises(LoadError, match="matches no file"):
        load_module.choose_engine("auto", [str(tmp_path / "nothing*.csv")])
    monkeypatch.setattr(load_module, "ARROW_MAX_BYTES", len("article_id,user_id\n1,2\n3,4\n") - 1)
    assert load_module.choose_engine("auto", [f]) == "spark"


def test_the_command_loads_a_small_file_without_starting_spark(tmp_path: Path) -> None:
    d, f = _csv_dir(tmp_path, "article_id,user_id\n1,2\n1,3\n2,4\n")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from noria_tools.cli import main; "
         f"code = main(['load', 'vote', {f!r}, '--data-dir', {d!r}, '-q']); "
         "assert 'pyspark' not in sys.modules, 'Spark was imported'; sys.exit(code)"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loaded 3 rows into vote")
    assert _rows(d, "SELECT * FROM votes") == [(1, 2), (2, 1)]


def test_cli_engine_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, f = _csv_dir(tmp_path, "article_id,user_id\n1,x\n")
    assert cli_main(["load", "vote", f, "--data-dir", d, "--engine", "arrow", "-q"]) == 1
    assert "column user_id: not a valid INT: x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["load", "vote", f, "--data-dir", d, "--engine", "duckdb"])
    with pytest.raises(SystemExit):
        cli_main(["load", "--help"])
    assert "--engine {auto,arrow,spark}" in capsys.readouterr().out


def test_arrow_load_into_a_running_cluster(tmp_path: Path) -> None:
    from noria_py.runtime.cluster.launch import Cluster
    with Cluster(workers=1) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
        db.execute("CREATE TABLE item (id INT PRIMARY KEY, name TEXT)")
        db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
        db.table("item").insert([(1, "one")])
        pq.write_table(pa.table({"article_id": [j % 10 for j in range(1000)],
                                 "user_id": list(range(1000))}), tmp_path / "v.parquet")
        report = load("vote", [str(tmp_path / "v.parquet")], server=cluster.url,
                      progress=False, batch_rows=300)
        assert (report.rows, report.engine) == (1000, "arrow")
        db.wait()
        assert sorted(db.execute("SELECT * FROM votes").fetchall()) == [(a, 100) for a in range(10)]
        f = tmp_path / "items.csv"
        f.write_text("id,name\n2,two\n1,again\n")
        with pytest.raises(LoadError, match="row 2, column id: primary key already in the table"):
            load("item", [str(f)], server=cluster.url, progress=False)
        assert db.execute("SELECT id FROM item").fetchall() == [(1,)]
        db.close()
