"""Base tables survive a restart with data_dir; views are rebuilt from them."""
from __future__ import annotations

import os

import pytest

import noria_py


def _setup(db):
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
    db.execute("CREATE VIEW counts AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")


def test_restart_rebuilds_views(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    db.table("vote").insert([(1, 1), (1, 2), (2, 3)])
    db.table("vote").delete([(1, 2)])
    db.table("article").insert([(1, "a"), (2, "b")])
    db.execute("UPDATE article SET title = 'z' WHERE id = 2")
    db.close()

    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.view("counts").lookup(1) == [(1, 1)]
    assert db.view("counts").lookup(2) == [(2, 1)]
    assert sorted(db.execute("SELECT * FROM article").fetchall()) == [(1, "a"), (2, "z")]
    # writes keep working after a restart, and the primary key index was rebuilt
    with pytest.raises(noria_py.DuplicateKeyError):
        db.table("article").insert([(1, "again")])
    db.table("vote").insert([(1, 9)])
    assert db.view("counts").lookup(1) == [(1, 2)]
    db.close()


def test_dropped_objects_stay_dropped(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    db.table("vote").insert([(1, 1)])
    db.execute("DROP VIEW counts")
    db.execute("DROP TABLE vote")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.close()
    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.execute("SELECT * FROM vote").fetchall() == []
    with pytest.raises(noria_py.UnknownViewError):
        db.view("counts")
    db.close()


def test_torn_tail_is_recovered_and_reported(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    db.table("vote").insert([(1, 1)])
    db.table("vote").insert([(1, 2)])
    db.close()
    logs = sorted(p for p in os.listdir(tmp_path) if p.startswith("wal-") and p.endswith(".log"))
    path = tmp_path / logs[-1]
    data = path.read_bytes()
    path.write_bytes(data[:-3])           # the last batch is torn
    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.view("counts").lookup(1) == [(1, 1)]
    assert any("torn" in note or "corrupt" in note for note in db.recovery_notes)
    db.close()


def test_second_open_is_refused(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    with pytest.raises(noria_py.StorageError):
        noria_py.connect(data_dir=str(tmp_path))
    db.close()


def test_rejected_write_is_not_logged(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    with pytest.raises(noria_py.TypeMismatchError):
        db.table("vote").insert([(1, 1), ("x", 2)])
    db.close()
    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.execute("SELECT * FROM vote").fetchall() == []
    db.close()


def test_snapshot_keeps_every_copy_of_a_duplicated_row(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    db.storage._snapshot_max = 1            # snapshot after the next write
    db.table("vote").insert([(1, 1), (1, 1), (2, 3)])
    db.table("vote").insert([(1, 1)])
    db.close()

    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.view("counts").lookup(1) == [(1, 3)]
    assert len(db.table("vote")) == 4
    db.close()


def test_columns_survive_a_restart_in_the_log_and_in_a_snapshot(tmp_path):
    """Writes a base keeps as columns (an insert of 32+ rows, insert_arrow) are logged as
    columns records, then snapshotted as columns; a restart gives back the same rows
    with the same types, and the views."""
    import pyarrow as pa
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    vote = db.table("vote")
    vote.insert([(i % 5, i) for i in range(40)])                       # columnar
    vote.insert_arrow(pa.table({"article_id": pa.array([1, 1], pa.int32()),
                                "user_id": [7, 7]}))
    vote.insert([(3, None)])                                            # a row, with NULL
    db.storage._snapshot_max = 1                                        # snapshot next
    vote.insert_arrow(pa.table({"article_id": [4] * 40, "user_id": list(range(40))}))
    assert db.storage.log_bytes() == 0                                  # it was taken
    vote.insert([(2, i) for i in range(35)])                            # log after it
    want = sorted(db.execute("SELECT * FROM vote").fetchall(), key=repr)
    counts = {k: db.view("counts").lookup(k) for k in range(6)}
    db.close()

    db = noria_py.connect(data_dir=str(tmp_path))
    got = sorted(db.execute("SELECT * FROM vote").fetchall(), key=repr)
    assert got == want and len(got) == 40 + 2 + 1 + 40 + 35
    assert {k: db.view("counts").lookup(k) for k in range(6)} == counts
    assert counts[1] == [(1, 10)] and counts[4] == [(4, 48)]
    db.table("vote").delete([(1, 7)])                                   # one copy of two
    assert db.view("counts").lookup(1) == [(1, 9)]
    db.close()


def test_a_table_kept_as_columns_is_columns_again_after_a_restart(tmp_path):
    db = noria_py.connect(data_dir=str(tmp_path))
    _setup(db)
    db.table("vote").insert([(i % 3, i) for i in range(100)])
    db.table("article").insert([(1, "a")])
    db.close()
    db = noria_py.connect(data_dir=str(tmp_path))
    vote = db.graph_[db._tables["vote"].node].op
    assert vote._rows is None and vote.chunks[0].cols is not None and len(vote) == 100
    assert db.view("counts").lookup(0) == [(0, 34)]
    article = db.graph_[db._tables["article"].node].op
    assert article.by_key == {(1,): (1, "a")}
    db.close()


@pytest.mark.parametrize("snapshot", [False, True], ids=["log", "snapshot"])
def test_nan_rows_stay_deletable_after_a_restart(tmp_path, snapshot):
    """NaN rows read back from the log or a snapshot (as rows and as columns) are the
    engine's one NaN again (noria_py/nan.py): deletable, found by key, one group."""
    import math
    db = noria_py.connect(data_dir=str(tmp_path))
    db.execute("CREATE TABLE m (x DOUBLE, y INT)")                     # kept as columns
    db.execute("CREATE TABLE k (x DOUBLE PRIMARY KEY, y INT)")         # rows, keyed
    db.execute("CREATE VIEW g AS SELECT x, COUNT(*) AS n, MAX(y) AS hi FROM m GROUP BY x")
    db.execute("CREATE VIEW top AS SELECT MAX(x) AS hi FROM m")
    db.table("m").insert([(float("nan"), i) for i in range(40)] + [(1.0, 0)])   # columns
    db.table("m").insert([(-float("nan"), 99), (2.0, 5), (float("nan"), 98)])  # rows
    # deletes logged (as rows) that the replay matches with the columns and rows above
    db.table("m").delete([(float("nan"), 39), (float("nan"), 98)])
    db.table("k").insert([(float("nan"), 1), (0.5, 2)])
    if snapshot:
        db.storage._snapshot_max = 1
        db.table("k").insert([(3.0, 3)])
        assert db.storage.log_bytes() == 0
    db.close()

    db = noria_py.connect(data_dir=str(tmp_path))
    assert db.recovery_notes == []
    g = {("NaN" if r[0] != r[0] else r[0]): r[1:] for r in db.view("g").all()}
    assert g == {"NaN": (40, 99), 1.0: (1, 0), 2.0: (1, 5)} and db.view("top").all() == [(math.nan,)]
    db.table("m").delete([(float("nan"), i) for i in range(39)] + [(float("nan"), 99)])
    db.table("k").delete_keys([float("nan")])
    assert sorted(db.view("g").all()) == [(1.0, 1, 0), (2.0, 1, 5)]
    assert db.view("top").all() == [(2.0,)]
    assert sorted(db.table("k").primary_keys()) == ([(0.5,), (3.0,)] if snapshot else [(0.5,)])
    db.close()
