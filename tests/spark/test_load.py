"""`noria-py load` and df.write.format("noria")."""
from __future__ import annotations

import datetime
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import noria_py
from noria_py.spark.load import load
from noria_py.spark.schema import LoadError
from noria_tools.cli import main as cli_main

pytestmark = pytest.mark.spark


def _data_dir(tmp_path):
    d = str(tmp_path / "dd")
    db = noria_py.connect(data_dir=d)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE TABLE item (id INT PRIMARY KEY, name TEXT, price FLOAT, ok BOOL, d DATE)")
    db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
    db.table("item").insert([(1, "one", 1.0, True, None)])
    db.close()
    return d


def _rows(d, sql):
    db = noria_py.connect(data_dir=d)
    try:
        return sorted(db.execute(sql).fetchall(), key=repr)
    finally:
        db.close()


def test_load_parquet_then_views_see_it(spark, tmp_path):
    d = _data_dir(tmp_path)
    for i in range(2):
        pq.write_table(pa.table({"user_id": pa.array(range(i * 500, i * 500 + 500), pa.int32()),
                                 "article_id": [j % 10 for j in range(500)]}), tmp_path / f"v{i}.parquet")
    report = load("vote", [str(tmp_path / "v0.parquet"), str(tmp_path / "v1.parquet")],
                  data_dir=d, spark=spark, progress=False, engine="spark")
    assert report.rows == 1000
    assert _rows(d, "SELECT * FROM votes") == [(a, 100) for a in range(10)]
    assert not os.listdir(os.path.join(d, "staging"))


def test_bad_csv_row_stops_the_load(spark, tmp_path):
    d = _data_dir(tmp_path)
    f = tmp_path / "items.csv"
    f.write_text("id,name,price,ok,d\n2,a,1.5,true,2024-01-02\n3,b,12abc,false,\n4,c,2,yes,\n")
    with pytest.raises(LoadError) as e:
        load("item", [str(f)], data_dir=d, spark=spark, progress=False, engine="spark")
    msg = str(e.value)
    assert "nothing was loaded" in msg and f"{f}, row 2, column price" in msg and "12abc" in msg
    assert _rows(d, "SELECT id FROM item") == [(1,)]


def test_skip_bad_writes_rejects(spark, tmp_path):
    d = _data_dir(tmp_path)
    f = tmp_path / "items.csv"
    f.write_text("id,name,price,ok,d\n2,a,1.5,true,2024-01-02\n1,dup,1,1,\n,nokey,1,1,\n"
                 "5,b,2,maybe,\n6,c,3e2,no,2023-12-31\n6,c2,3,no,\n")
    rej = tmp_path / "rej.csv"
    report = load("item", [str(f)], data_dir=d, spark=spark, progress=False, engine="spark",
                  skip_bad=True, reject_file=str(rej))
    assert report.rows == 2 and report.rejected == 4
    assert _rows(d, "SELECT * FROM item") == [
        (1, "one", 1.0, True, None), (2, "a", 1.5, True, datetime.date(2024, 1, 2)),
        (6, "c", 300.0, False, datetime.date(2023, 12, 31))]
    lines = rej.read_text().splitlines()
    assert lines[0] == "file,row,column,reason,values"
    assert [ln.split(",")[1:3] for ln in lines[1:]] == [
        ["2", "id"], ["3", "id"], ["4", "ok"], ["6", "id"]]
    assert "already in the table" in lines[1] and "duplicate primary key" in lines[4]


def test_parquet_type_mismatch_and_missing_table(spark, tmp_path):
    d = _data_dir(tmp_path)
    pq.write_table(pa.table({"article_id": [1.5], "user_id": [1]}), tmp_path / "f.parquet")
    with pytest.raises(LoadError, match="double.*INT column 'article_id'"):
        load("vote", [str(tmp_path / "f.parquet")], data_dir=d, spark=spark, progress=False,
             engine="spark")
    with pytest.raises(noria_py.UnknownTableError, match="no table 'nope'"):
        load("nope", [str(tmp_path / "f.parquet")], data_dir=d, spark=spark, progress=False,
             engine="spark")


def test_an_error_inside_spark_is_a_load_error(spark, tmp_path):
    """Files Spark alone reads (not local: no check before Spark) and cannot: Spark's own
    message, as a LoadError, and nothing loaded."""
    d = _data_dir(tmp_path)
    with pytest.raises(LoadError, match="Spark could not load the input: .*nosuchfs"):
        load("vote", ["nosuchfs://host/votes.parquet"], data_dir=d, spark=spark,
             progress=False, engine="spark")
    with noria_py.connect(data_dir=d) as db:
        assert db.execute("SELECT COUNT(*) FROM vote").fetchall() == [(0,)]


def test_cli_server_and_missing_java(tmp_path, capsys, monkeypatch):
    (tmp_path / "x.parquet").write_bytes(b"")
    assert cli_main(["load", "vote", str(tmp_path / "x.parquet"), "--server",
                     "noria://127.0.0.1:1"]) == 1
    assert "cannot connect to noria://127.0.0.1:1" in capsys.readouterr().err
    from noria_py.spark import session
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(session.SparkUnavailableError, match="apt-get install openjdk-17-jre-headless"):
        session.java_version()


def test_dataframe_write_format_noria(spark, tmp_path):
    from pyspark.errors import AnalysisException

    from noria_py.spark import register
    d = _data_dir(tmp_path)
    register(spark)
    df = spark.createDataFrame(pa.table({"article_id": [1, 1, 2], "user_id": [5, 6, 7]}))
    df.repartition(2).write.format("noria").option("data_dir", d).option("table", "vote") \
        .mode("append").save()
    assert _rows(d, "SELECT * FROM votes") == [(1, 2), (2, 1)]
    bad = spark.createDataFrame(pa.table({"article_id": ["x"], "user_id": [1]}))
    # Spark wraps the writer's LoadError in an AnalysisException that quotes it
    with pytest.raises(AnalysisException, match="LoadError: .*cannot be stored in INT"):
        bad.write.format("noria").option("data_dir", d).option("table", "vote").mode("append").save()


def test_load_into_a_running_cluster(spark, tmp_path):
    from noria_py.runtime.cluster.launch import Cluster
    with Cluster(workers=1) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
        db.execute("CREATE TABLE item (id INT PRIMARY KEY, name TEXT)")
        db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
        db.table("item").insert([(1, "one")])
        pq.write_table(pa.table({"article_id": [j % 10 for j in range(1000)],
                                 "user_id": list(range(1000))}), tmp_path / "v.parquet")
        report = load("vote", [str(tmp_path / "v.parquet")], server=cluster.url, spark=spark,
                      progress=False, batch_rows=300, engine="spark")
        assert report.rows == 1000
        db.wait()
        assert sorted(db.execute("SELECT * FROM votes").fetchall()) == [(a, 100) for a in range(10)]
        f = tmp_path / "items.csv"
        f.write_text("id,name\n2,two\n1,again\n")
        with pytest.raises(LoadError, match="primary key already in the table"):
            load("item", [str(f)], server=cluster.url, spark=spark, progress=False, engine="spark")
        assert db.execute("SELECT id FROM item").fetchall() == [(1,)]
        db.close()
