"""TIMESTAMPTZ (TIMESTAMP WITH TIME ZONE): instants, held in UTC and returned as aware
datetimes (tzinfo ``datetime.timezone.utc``); aware datetimes of any zone converted on
the way in, naive ones refused (there is no session time zone), and their CASTs, Arrow
types and storage. ``tests/differential/test_timestamptz.py`` compares views of them
with DuckDB."""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pandas as pd
import pyarrow as pa
import pytest

import noria_py
from noria_py import TypeMismatchError
from noria_py.storage import Storage
from sql_frontend.types import SqlType

UTC = dt.timezone.utc
PARIS, NY = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")


@pytest.fixture(params=[1, 4], ids=["shards1", "shards4"])
def db(request):
    d = noria_py.connect(shards=request.param)
    d.execute("CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMP WITH TIME ZONE, naive TIMESTAMP)")
    yield d
    d.close()


def test_both_spellings_declare_it():
    d = noria_py.connect()
    d.execute("CREATE TABLE a (x TIMESTAMPTZ, y TIMESTAMP WITH TIME ZONE, z TIMESTAMP WITHOUT TIME ZONE)")
    assert [c.type for c in d.table("a").schema.columns] == [SqlType.TIMESTAMPTZ] * 2 + [SqlType.TIMESTAMP]
    cur = d.cursor()
    cur.execute("SELECT * FROM a")
    assert cur.description[0][1] == noria_py.DATETIME


def test_aware_datetimes_of_any_zone_are_stored_and_returned_in_utc(db):
    db.table("ev").insert([(1, dt.datetime(2024, 7, 1, 12, tzinfo=PARIS), None),
                           (2, dt.datetime(2024, 7, 1, 6, tzinfo=NY), None),
                           (3, dt.datetime(2024, 7, 1, 10, 30, tzinfo=UTC), None)])
    db.wait()
    rows = sorted(db.execute("SELECT id, at FROM ev").fetchall())
    assert rows == [(1, dt.datetime(2024, 7, 1, 10, tzinfo=UTC)),
                    (2, dt.datetime(2024, 7, 1, 10, tzinfo=UTC)),
                    (3, dt.datetime(2024, 7, 1, 10, 30, tzinfo=UTC))]
    assert all(r[1].tzinfo is UTC for r in rows + db.table("ev").rows())


def test_a_naive_datetime_into_it_is_refused_and_an_aware_one_into_timestamp(db):
    with pytest.raises(TypeMismatchError, match=r"is TIMESTAMPTZ, got datetime.datetime\(2024, 1, 1, 0, 0\) "
                                                r"\(datetime without a time zone.*no session time zone"):
        db.table("ev").insert([(1, dt.datetime(2024, 1, 1), None)])
    with pytest.raises(TypeMismatchError, match="is TIMESTAMP, got .*with a time zone.*declare the "
                                                "column TIMESTAMPTZ"):
        db.table("ev").insert([(1, None, dt.datetime(2024, 1, 1, tzinfo=UTC))])
    with pytest.raises(TypeMismatchError, match="is TIMESTAMPTZ, got TIMESTAMP.*no session time zone"):
        db.execute("INSERT INTO ev VALUES (?, ?, NULL)", (1, dt.datetime(2024, 1, 1)))
    with pytest.raises(TypeMismatchError, match="is TIMESTAMP, got TIMESTAMPTZ"):
        db.execute("UPDATE ev SET naive = ?", (dt.datetime(2024, 1, 1, tzinfo=UTC),))
    with pytest.raises(TypeMismatchError, match="without a time zone"):     # a big batch too
        db.table("ev").insert([(i, dt.datetime(2024, 1, 1, tzinfo=UTC), None) for i in range(99)]
                              + [(99, dt.datetime(2024, 1, 1), None)])
    assert len(db.table("ev")) == 0


def test_sql_text_without_an_offset_is_refused_where_an_instant_is_compared_or_written(db):
    with pytest.raises(TypeMismatchError, match=r"no UTC offset \(write '2024-01-01 10:00\+00'"):
        db.execute("SELECT id FROM ev WHERE at > '2024-01-01 10:00'")
    with pytest.raises(TypeMismatchError, match="no UTC offset"):
        db.execute("INSERT INTO ev VALUES (1, '2024-01-01 10:00', NULL)")
    with pytest.raises(TypeMismatchError, match="cannot compare TIMESTAMPTZ with TIMESTAMP.*CAST"):
        db.execute("SELECT id FROM ev WHERE at = naive")
    with pytest.raises(TypeMismatchError, match="cannot compare TIMESTAMPTZ with DATE"):
        db.execute("SELECT id FROM ev WHERE at < DATE '2024-01-01'")
    db.execute("INSERT INTO ev VALUES (1, '2024-01-01 12:00:00+02', '2024-01-01 12:00:00')")
    db.execute("INSERT INTO ev VALUES (2, '2024-01-01T10:30:00Z', NULL)")
    assert db.execute("SELECT id FROM ev WHERE at < '2024-01-01 10:15:00+00'").fetchall() == [(1,)]
    assert sorted(db.execute("SELECT id FROM ev WHERE at >= ?",
                             (dt.datetime(2024, 1, 1, 5, tzinfo=NY),)).fetchall()) == [(1,), (2,)]


def test_casts_read_and_write_naive_values_as_utc(db):
    db.table("ev").insert([(1, dt.datetime(2024, 1, 1, 23, 30, 0, 500000, tzinfo=NY), dt.datetime(2024, 1, 1, 8))])
    got = db.execute(
        "SELECT CAST(at AS TIMESTAMP), CAST(at AS DATE), CAST(at AS TEXT), 'at ' || at, "
        "CAST(naive AS TIMESTAMPTZ), CAST(CAST(naive AS DATE) AS TIMESTAMPTZ), "
        "CAST('2024-01-01 08:00' AS TIMESTAMPTZ), CAST('2024-01-01 08:00-01' AS TIMESTAMPTZ), "
        "CAST(CAST(at AS TEXT) AS TIMESTAMPTZ) = at, CAST('soon' || naive AS TIMESTAMPTZ) FROM ev").fetchall()
    assert got == [(dt.datetime(2024, 1, 2, 4, 30, 0, 500000), dt.date(2024, 1, 2),
                    "2024-01-02 04:30:00.5+00", "at 2024-01-02 04:30:00.5+00",
                    dt.datetime(2024, 1, 1, 8, tzinfo=UTC), dt.datetime(2024, 1, 1, tzinfo=UTC),
                    dt.datetime(2024, 1, 1, 8, tzinfo=UTC), dt.datetime(2024, 1, 1, 9, tzinfo=UTC),
                    True, None)]
    assert all(v.tzinfo is UTC for v in got[0] if isinstance(v, dt.datetime) and v.tzinfo)


def test_order_extremes_groups_joins_and_distinct_compare_instants(db):
    same = [dt.datetime(2024, 3, 1, 12, tzinfo=PARIS), dt.datetime(2024, 3, 1, 6, tzinfo=NY),
            pd.Timestamp("2024-03-01 11:00", tz="UTC")]           # one instant, three zones
    later = dt.datetime(2024, 3, 1, 12, tzinfo=NY)                # 17:00 UTC: after 11:00 UTC,
    db.table("ev").insert([(i, t, None) for i, t in enumerate(same + [later])])  # before 12 in Paris
    db.execute("CREATE TABLE other (at TIMESTAMPTZ, tag TEXT)")
    db.table("other").insert([(dt.datetime(2024, 3, 1, 20, tzinfo=ZoneInfo("Asia/Tokyo")), "x")])
    db.wait()
    t11, t17 = dt.datetime(2024, 3, 1, 11, tzinfo=UTC), dt.datetime(2024, 3, 1, 17, tzinfo=UTC)
    assert db.execute("SELECT MIN(at), MAX(at) FROM ev").fetchall() == [(t11, t17)]
    assert db.execute("SELECT id FROM ev ORDER BY at DESC, id LIMIT 2").fetchall() == [(3,), (0,)]
    assert sorted(db.execute("SELECT at, COUNT(*) FROM ev GROUP BY at").fetchall()) == [(t11, 3), (t17, 1)]
    assert sorted(db.execute("SELECT DISTINCT at FROM ev").fetchall()) == [(t11,), (t17,)]
    assert sorted(db.execute("SELECT ev.id, other.tag FROM ev JOIN other ON ev.at = other.at").fetchall()) \
        == [(0, "x"), (1, "x"), (2, "x")]
    db.execute("CREATE VIEW by_at AS SELECT id FROM ev WHERE at = ?")
    for key in same + [t11, dt.datetime(2024, 3, 1, 6, tzinfo=dt.timezone(dt.timedelta(hours=-5)))]:
        assert sorted(db.view("by_at").lookup(key)) == [(0,), (1,), (2,)], key
    with pytest.raises(TypeMismatchError, match="key column 'at' is TIMESTAMPTZ, .*without a time zone"):
        db.view("by_at").lookup(dt.datetime(2024, 3, 1, 11))
    db.execute("CREATE VIEW by_naive AS SELECT id FROM ev WHERE naive = ?")
    with pytest.raises(TypeMismatchError, match="key column 'naive' is TIMESTAMP, .*with a time zone"):
        db.view("by_naive").lookup(t11)
    db.table("ev").delete([(1, dt.datetime(2024, 3, 1, 20, tzinfo=ZoneInfo("Asia/Tokyo")), None)])
    db.table("ev").delete_keys([3])
    db.wait()
    assert sorted(db.view("by_at").lookup(t11)) == [(0,), (2,)]
    assert db.execute("SELECT MAX(at) FROM ev").fetchall() == [(t11,)]


def test_a_key_in_a_dst_fold_finds_its_instant(db):
    """2024-10-27 02:30 happens twice in Paris; Python's == between zones is False for
    either (PEP 495), so the key is found only because it is converted to UTC."""
    first = dt.datetime(2024, 10, 27, 2, 30, tzinfo=PARIS)               # 00:30 UTC
    second = dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=PARIS)      # 01:30 UTC
    db.table("ev").insert([(1, first, None), (2, second, None)])
    db.execute("CREATE VIEW by_at AS SELECT id FROM ev WHERE at = ?")
    db.wait()
    assert db.view("by_at").lookup(second) == [(2,)] and db.view("by_at").lookup(first) == [(1,)]
    assert db.view("by_at").lookup(dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC)) == [(2,)]
    db.table("ev").delete([(2, second, None)])
    assert db.table("ev").rows() == [(1, dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC), None)]


def test_arrow_in_with_any_zone_and_out_as_utc(db):
    zoned = pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=UTC), None], pa.timestamp("us", tz="Asia/Kolkata"))
    db.table("ev").insert_arrow(pa.table({"id": [1, 2], "at": zoned,
                                          "naive": pa.array([None, None], pa.timestamp("us"))}))
    frame = pd.DataFrame({"id": [3], "at": pd.to_datetime(["2024-01-01 07:00"]).tz_localize("US/Eastern"),
                          "naive": pd.to_datetime(["2024-01-01 07:00"])})
    db.table("ev").insert(frame)                                          # datetime64[ns, tz]
    with pytest.raises(TypeMismatchError, match="is TIMESTAMPTZ"):
        db.table("ev").insert_arrow(pa.table({"id": [4], "at": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")),
                                              "naive": pa.array([None], pa.timestamp("us"))}))
    db.wait()
    out = db.execute("SELECT id, at FROM ev ORDER BY id").arrow()
    assert out.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert out.column("at").to_pylist() == [dt.datetime(2024, 1, 1, 12, tzinfo=UTC), None,
                                            dt.datetime(2024, 1, 1, 12, tzinfo=UTC)]
    db.execute("CREATE VIEW all_at AS SELECT at FROM ev")
    assert db.view("all_at").arrow().schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert str(db.execute("SELECT at FROM ev WHERE id = 1").df()["at"].dtype) == "datetime64[us, UTC]"


def test_instants_survive_a_restart(tmp_path, monkeypatch):
    """From the snapshot (the first rows) and from the log (the others)."""
    d = noria_py.connect(data_dir=str(tmp_path))
    d.execute("CREATE TABLE ev (id INT, at TIMESTAMPTZ)")
    d.execute("CREATE VIEW by_at AS SELECT id FROM ev WHERE at = ?")
    rows = [(i, dt.datetime(2024, 3, 28 + i, 5 * i, 15, 0, 250, tzinfo=PARIS)) for i in range(4)]
    with monkeypatch.context() as m:
        m.setattr(Storage, "should_snapshot", lambda self: True)
        d.table("ev").insert(rows[:2])
    assert (tmp_path / "snapshot.bin").exists()
    d.table("ev").insert(rows[2:])
    d.close()
    d = noria_py.connect(data_dir=str(tmp_path))
    got = sorted(d.execute("SELECT * FROM ev").fetchall())
    assert got == [(i, t.astimezone(UTC)) for i, t in rows]
    assert all(t.tzinfo is UTC for _, t in got)
    assert d.view("by_at").lookup(rows[3][1]) == [(3,)]
    d.table("ev").delete([rows[0]])
    d.close()
    d = noria_py.connect(data_dir=str(tmp_path))
    assert sorted(d.table("ev").rows()) == got[1:]
    d.close()
