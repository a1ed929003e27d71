"""spark.read.format("noria"): views and tables back as DataFrames (issue 25)."""
from __future__ import annotations

import datetime

import pytest

import noria_py
from noria_py.spark import dataframe, register

pytestmark = pytest.mark.spark

UTC = datetime.timezone.utc
ITEMS = [
    (1, "one", 1.5, True, datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5),
     datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
    (2, None, None, None, None, None, None),
    (3, "drei", -2.25, False, datetime.date(1969, 12, 31), datetime.datetime(1999, 12, 31, 23, 59),
     datetime.datetime(2030, 6, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))),
]
SCHEMA = [("id", "bigint"), ("name", "string"), ("price", "double"), ("ok", "boolean"),
          ("d", "date"), ("ts", "timestamp_ntz"), ("tz", "timestamp")]


def setup(db) -> None:
    db.execute("CREATE TABLE item (id INT PRIMARY KEY, name TEXT, price FLOAT, ok BOOL, d DATE, "
               "ts TIMESTAMP, tz TIMESTAMPTZ)")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id")
    db.execute("CREATE VIEW votes_of AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    db.execute("CREATE VIEW pair AS SELECT article_id, user_id FROM vote "
               "WHERE article_id = ? AND user_id = ?")
    db.execute("CREATE VIEW cheap AS SELECT name, price FROM item WHERE price < 2")
    db.table("item").insert(ITEMS)
    db.table("vote").insert([(a, u) for a in range(4) for u in range(a + 1)])
    db.wait()


@pytest.fixture(scope="module")
def data_dir(spark, tmp_path_factory):
    register(spark)
    d = str(tmp_path_factory.mktemp("read") / "dd")
    db = noria_py.connect(data_dir=d)
    setup(db)
    db.close()
    return d


def engine_rows(d: str, reads) -> list:
    db = noria_py.connect(data_dir=d)
    try:
        return [sorted(r(db), key=repr) for r in reads]
    finally:
        db.close()


def reader(spark, **options):
    """A fresh reader (a DataFrameReader keeps the options set on it)."""
    return spark.read.format("noria").options(**options)


def rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def test_tables_and_views_read_back_as_the_engine_has_them(spark, data_dir):
    def read():
        return reader(spark, data_dir=data_dir)
    item = read().option("table", "item").load()
    assert [(f.name, f.dataType.simpleString()) for f in item.schema.fields] == SCHEMA
    want_item, want_votes, want_cheap = engine_rows(data_dir, [
        lambda db: db.table("item").rows(), lambda db: db.view("votes").all(),
        lambda db: db.view("cheap").all()])
    # TIMESTAMPTZ: the same instant (Spark hands it back naive, in local time): compare as UTC
    got = [r[:6] + (r[6] and r[6].astimezone(UTC),) for r in rows(item)]
    assert got == [r[:6] + (r[6] and r[6].astimezone(UTC),) for r in want_item]
    assert item.selectExpr("id", "cast(tz AS string)").orderBy("id").collect()[2][1] == \
        "2030-06-01 10:00:00"                      # the session's time zone is UTC
    assert rows(read().option("view", "votes").load()) == want_votes == [(a, a + 1) for a in range(4)]
    assert rows(read().option("view", "cheap").load()) == want_cheap
    # a schema of one's own reads only the columns it names (no pruning in the API)
    assert rows(read().schema("price DOUBLE, ID BIGINT").option("table", "item").load()) == \
        sorted([(1.5, 1), (None, 2), (-2.25, 3)], key=repr)


def test_parameterized_views_by_key_and_by_pushed_filter(spark, data_dir):
    from pyspark.errors import AnalysisException
    def read():
        return reader(spark, data_dir=data_dir)
    assert rows(read().option("view", "votes_of").option("key", "2").load()) == [(2, 3)]
    of = read().option("view", "votes_of").load()
    assert rows(of.filter("article_id = 1")) == [(1, 2)]
    assert rows(of.filter("article_id IN (0, 3, 9)")) == [(0, 1), (3, 4)]
    assert rows(read().option("view", "pair").option("key", "[3, 2]").load()) == [(3, 2)]
    assert rows(read().option("view", "pair").load()
                .filter("user_id = 1 AND article_id IN (1, 2)")) == [(1, 1), (2, 1)]
    with pytest.raises(AnalysisException, match=r"ReadOptionError: view 'votes_of' has 1 \? "
                       r"parameter\(s\) \(article_id\): read it by key with \.option\('key'"):
        of.filter("n > 1").collect()
    with pytest.raises(AnalysisException, match="JSON array of 2 values"):
        read().option("view", "pair").option("key", "3").load().collect()


def test_errors_name_what_is_wrong(spark, data_dir, tmp_path):
    from pyspark.errors import AnalysisException
    def read():
        return reader(spark, data_dir=data_dir)
    with pytest.raises(AnalysisException, match=r"UnknownViewError: data dir .* has no view 'nope' "
                       r"\(views: cheap, pair, votes, votes_of\)"):
        read().option("view", "nope").load()
    with pytest.raises(AnalysisException, match="UnknownTableError: .* has no table 'nope'"):
        read().option("table", "nope").load()
    with pytest.raises(AnalysisException, match=r"ReadOptionError: .*needs one of "
                       r"\.option\('view', NAME\) or \.option\('table', NAME\)"):
        read().load()
    # in this process, the same checks raise noria_py's own errors
    with pytest.raises(noria_py.UnknownViewError, match="no view 'nope'"):
        dataframe(spark, data_dir=data_dir, view="nope")
    with pytest.raises(noria_py.ProgrammingError, match=r"has no \? parameters"):
        dataframe(spark, data_dir=data_dir, view="votes", key=1)
    assert rows(dataframe(spark, data_dir=data_dir, view="votes_of", key=3)) == [(3, 4)]
    # a data dir open in another process (here: this one) cannot be opened by the read
    db = noria_py.connect(data_dir=data_dir)
    try:
        with pytest.raises(noria_py.StorageError, match=r"is open in another process .*"
                           r"\.option\('server', 'noria://HOST:PORT'\)"):
            dataframe(spark, data_dir=data_dir, table="item")
        with pytest.raises(AnalysisException, match="StorageError: data dir .* is open in another"):
            read().option("table", "item").load().collect()
    finally:
        db.close()


def test_read_from_a_running_cluster(spark):
    from noria_py.runtime.cluster.launch import Cluster
    register(spark)                          # (run alone, no other test has done it)
    with Cluster(workers=1) as cluster:
        db = noria_py.connect(cluster.url)
        setup(db)

        def read():
            return reader(spark, server=cluster.url)
        item = read().option("table", "item").load()
        assert [(f.name, f.dataType.simpleString()) for f in item.schema.fields] == SCHEMA
        assert [r[:6] for r in rows(item)] == [r[:6] for r in sorted(ITEMS, key=repr)]
        assert rows(read().option("view", "votes").load()) == sorted(db.view("votes").all())
        assert rows(read().option("view", "votes_of").option("key", "3").load()) == [(3, 4)]
        db.close()
