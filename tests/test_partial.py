"""Partial readers (noria_py/partial.py): holes, upqueries, writes to holes dropped,
eviction under memory_limit, races with writes in flight, recovery; differential
against the same database with every reader full."""
from __future__ import annotations

import random

import pytest

import noria_py
from noria_py.errors import (
    ArgumentError,
    NotSupportedError,
    RecoveryError,
    TypeMismatchError,
)

VIEWS = {
    # key traced to the base (an index built for it), through the reader's SELECT list
    "rows": "SELECT id, b FROM t WHERE a = ?",
    # through a filter
    "big": "SELECT id, b FROM t WHERE a = ? AND b > 10",
    # to an aggregate grouped by the key
    "cnt": "SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a",
    "agg": "SELECT a, SUM(b) AS s, MAX(b) AS m FROM t WHERE a = ? GROUP BY a",
    # a table without a primary key (its insert-only, columnar form)
    "ev": "SELECT x, y FROM e WHERE x = ?",
    # to a join on the key: inner, left, left looked up by its right column
    "joined": "SELECT t.id, e.y FROM t JOIN e ON t.a = e.x WHERE t.a = ?",
    "ljoin": "SELECT t.id, e.y FROM t LEFT JOIN e ON t.a = e.x WHERE t.a = ?",
    "ljoin_r": "SELECT t.id, e.y FROM t LEFT JOIN e ON t.a = e.x WHERE e.x = ?",
    # not traceable -> full: a join looked up by another column, a TopK
    "notkey": "SELECT t.id, e.x FROM t JOIN e ON t.a = e.x WHERE t.b = ?",
    "top": "SELECT id, b FROM t WHERE a = ? ORDER BY b DESC, id LIMIT 2",
}
PARTIAL = {"rows", "big", "cnt", "agg", "ev", "joined", "ljoin", "ljoin_r"}


def _make(**kw):
    db = noria_py.connect(**kw)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute("CREATE TABLE e (x INT, y INT)")
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    return db


def _readers(db, view):
    return [db.graph_[r].op for r in db._views[view].readers]


def _held(db, view):
    return {k for r in _readers(db, view) for k in r.filled}


@pytest.mark.parametrize("shards", [1, 4])
def test_graph_says_which_readers_are_partial(shards):
    db = _make(shards=shards, partial=True)
    db.execute("CREATE VIEW everything AS SELECT id FROM t")
    seen = {}
    for n in db.graph():
        assert type(n["partial"]) is bool
        if n["kind"] == "reader":
            seen.setdefault(n["view"], set()).add(n["partial"])
        else:
            assert n["partial"] is False        # operators above readers stay full
    assert seen == {v: {v in PARTIAL} for v in [*VIEWS, "everything"]}
    full = _make(shards=shards)
    assert not any(n["partial"] for n in full.graph())


@pytest.mark.parametrize("shards", [1, 4])
def test_reader_starts_empty_fills_on_read_and_drops_writes_to_holes(shards):
    db = _make(shards=shards, partial=True)
    db.table("t").insert([(i, i % 10, i) for i in range(100)])
    assert _held(db, "rows") == set()
    assert sum(len(r.state) for r in _readers(db, "rows")) == 0
    assert sorted(db.view("rows").lookup(3)) == [(i, i) for i in range(3, 100, 10)]
    assert _held(db, "rows") == {3}
    db.table("t").insert([(100, 3, 1), (101, 4, 1)])       # 4 is a hole: dropped there
    assert (100, 1) in db.view("rows").lookup(3)
    assert sum(len(r.state) for r in _readers(db, "rows")) == 1
    assert _held(db, "rows") == {3}
    assert (101, 1) in db.view("rows").lookup(4)          # the upquery sees the write
    assert db.view("cnt").lookup(3) == [(3, 11)]
    assert db.view("cnt").lookup(12345) == []             # a key with no rows: held, empty
    assert 12345 in _held(db, "cnt")
    db.table("t").insert([(102, 12345, 5)])
    assert db.view("cnt").lookup(12345) == [(12345, 1)]
    assert db.view("cnt").lookup(None) == []              # col = NULL is never true
    assert db.view("rows").lookup_many([3, 4, 5, 3]) == [
        db.view("rows").lookup(k) for k in (3, 4, 5, 3)]
    assert sorted(db.view("rows").all()) == sorted((i, b) for i, a, b in db.table("t").rows())


def test_errors_name_the_problem():
    with pytest.raises(ArgumentError, match="memory_limit"):
        noria_py.connect(memory_limit=1000)
    with pytest.raises(ArgumentError, match="memory_limit"):
        noria_py.connect(partial=True, memory_limit=-1)
    with pytest.raises(ArgumentError, match="partial"):
        noria_py.connect(partial="yes")
    db = _make(partial=True)
    with pytest.raises(NotSupportedError, match="partial"):
        db.subscribe("rows")
    db.subscribe("notkey")                  # a full reader of a partial database: fine
    with pytest.raises(TypeMismatchError):
        db.view("rows").lookup("three")
    assert _held(db, "rows") == set()       # a refused key fills nothing


def test_eviction_keeps_the_accounted_bytes_under_the_limit():
    limit = 20_000
    db = _make(partial=True, memory_limit=limit)
    full = _make()
    rows = [(i, i % 500, i) for i in range(5000)]
    for d in (db, full):
        d.table("t").insert(rows)
    rng = random.Random(3)
    for _ in range(600):
        k = rng.randrange(520)
        for view in ("rows", "cnt"):
            assert sorted(db.view(view).lookup(k)) == sorted(full.view(view).lookup(k))
        assert db._partial.held_bytes() <= limit
    assert db._partial.evictions > 0
    held = db._partial.held_bytes()
    assert held == sum(size for v in PARTIAL for r in _readers(db, v)
                       for size in r.filled.values())
    assert len(db._partial.lru) == sum(len(r.filled) for v in PARTIAL for r in _readers(db, v))
    # a write that grows held keys past the limit evicts too
    k = next(iter(_held(db, "rows")))
    db.table("t").insert([(10_000 + i, k, i) for i in range(200)])
    assert db._partial.held_bytes() <= limit
    db.view("rows").lookup(k)
    assert db._partial.held_bytes() <= limit or _held(db, "rows") == set()


def test_limit_below_one_key_still_answers():
    db = _make(partial=True, memory_limit=0)
    db.table("t").insert([(1, 1, 1), (2, 1, 2)])
    assert sorted(db.view("rows").lookup(1)) == [(1, 1), (2, 2)]
    assert _held(db, "rows") == set() and db._partial.held_bytes() == 0


def test_lru_order_evicts_the_least_recently_read():
    db = _make(partial=True)
    db.table("t").insert([(i, i, i) for i in range(10)])
    for k in range(10):
        db.view("rows").lookup(k)
    db.view("rows").lookup(0)               # 0 read again: now the most recent
    each = db._partial.held_bytes() // 10
    db._partial.limit = db._partial.held_bytes() - each // 2   # one key too many
    db._partial.evict()
    assert _held(db, "rows") == set(range(10)) - {1}


@pytest.mark.parametrize("seed", range(12))
def test_fill_never_double_counts_or_misses_a_write_in_flight(seed):
    """Seeded delivery leaves writes in flight between calls; a miss must answer as of
    every write accepted (it drains its view's upstream first), a hit may lag until
    wait(), and after wait() every held key is exact."""
    rng = random.Random(seed)
    db = _make(partial=True, seed=seed, shards=1 + 3 * (seed % 2))
    truth: dict[int, set] = {}      # a -> ids
    nxt = 0
    for step in range(150):
        op = rng.random()
        if op < 0.5:
            a = rng.randrange(6)
            db.table("t").insert([(nxt, a, 1)])
            truth.setdefault(a, set()).add(nxt)
            nxt += 1
        elif op < 0.65 and any(truth.values()):
            a = rng.choice([a for a in truth if truth[a]])
            i = rng.choice(sorted(truth[a]))
            db.table("t").delete([(i, a, 1)])
            truth[a].discard(i)
        else:
            a = rng.randrange(7)
            view = rng.choice(["rows", "cnt"])
            miss = a not in _held(db, view)
            got = db.view(view).lookup(a)
            want = ({(i, 1) for i in truth.get(a, ())} if view == "rows"
                    else ({(a, len(truth[a]))} if truth.get(a) else set()))
            if miss:
                assert set(got) == want and len(got) == len(want), (step, view, a)
        if step % 37 == 0:
            db.wait()
            for a in range(7):
                assert sorted(db.view("rows").lookup(a)) == sorted((i, 1) for i in truth.get(a, ()))


@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
@pytest.mark.parametrize("victim", ["reader", "aggregate", "base", "join"])
def test_recovery_brings_partial_readers_back_right(strategy, victim):
    db = _make(partial=True)
    full = _make()
    for d in (db, full):
        d.table("t").insert([(i, i % 7, i) for i in range(200)])
    for k in range(7):
        db.view("cnt").lookup(k)
        db.view("rows").lookup(k)
    kinds = {n["id"]: n for n in db.graph()}
    cnt_reader = db._views["cnt"].readers[0]
    node = {"reader": cnt_reader,
            "aggregate": kinds[cnt_reader]["parents"][0],
            "base": db._tables["t"].node,
            "join": next(n for n in kinds if kinds[n]["kind"] == "join")}[victim]
    for k in range(7):
        db.view("joined").lookup(k)
    db.fail(node)
    if victim != "base":
        with pytest.raises(RecoveryError, match="recover"):  # an upquery through it
            db.view("joined" if victim == "join" else "cnt").lookup(100)
    db.recover(node, strategy=strategy)
    for d in (db, full):
        d.table("t").insert([(1000 + i, i % 9, i) for i in range(50)])
        d.table("e").insert([(i % 11, i) for i in range(30)])
        d.wait()
    if victim == "reader":
        assert strategy == "lineage" or _held(db, "cnt") <= set(range(9))
    for view in ("cnt", "rows", "agg", "big", "joined", "ljoin"):
        for k in range(12):
            assert sorted(db.view(view).lookup(k)) == sorted(full.view(view).lookup(k)), (view, k)
        assert sorted(db.view(view).all()) == sorted(full.view(view).all())


def test_failed_reader_comes_back_all_holes():
    db = _make(partial=True)
    db.table("t").insert([(i, i % 7, i) for i in range(50)])
    for k in range(7):
        db.view("cnt").lookup(k)
    rid = db._views["cnt"].readers[0]
    db.fail(rid)
    db.recover(rid)
    assert _held(db, "cnt") == set()
    assert db._partial.held_bytes() == sum(r.filled[k] for v in PARTIAL
                                           for r in _readers(db, v) for k in r.filled)
    assert db.view("cnt").lookup(3) == [(3, 7)]


def test_drop_view_forgets_its_keys():
    db = _make(partial=True)
    db.table("t").insert([(i, i % 7, i) for i in range(50)])
    for k in range(7):
        db.view("cnt").lookup(k)
        db.view("rows").lookup(k)
    db.execute("DROP VIEW cnt")
    assert len(db._partial.lru) == len(_held(db, "rows"))
    assert db._partial.held_bytes() == sum(_readers(db, "rows")[0].filled.values())


# ---------------------------------------------------------------- differential


def _random_ops(rng: random.Random, n: int):
    """Writes to both tables (inserts, deletes, updates) and reads of every view, keys
    drawn so that some are missing."""
    live: dict[int, tuple] = {}
    ev: list[tuple] = []
    nxt = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            rows = []
            for _ in range(rng.choice([1, 3, 40])):
                row = (nxt, rng.randrange(12), rng.randrange(-5, 30))
                nxt += 1
                live[row[0]] = row
                rows.append(row)
            yield ("insert", "t", rows)
        elif r < 0.35 and live:
            gone = [live.pop(i) for i in rng.sample(sorted(live), min(len(live), rng.choice([1, 5])))]
            yield ("delete", "t", gone)
        elif r < 0.45 and live:
            i = rng.choice(sorted(live))
            a = rng.randrange(12)
            live[i] = (i, a, live[i][2])
            yield ("update", i, a)
        elif r < 0.55:
            rows = [(rng.randrange(12), rng.randrange(5)) for _ in range(rng.choice([1, 40]))]
            ev.extend(rows)
            yield ("insert", "e", rows)
        elif r < 0.6 and ev:
            yield ("delete", "e", [ev.pop(rng.randrange(len(ev)))])
        else:
            view = rng.choice(sorted(VIEWS))
            keys = [rng.randrange(-1, 14) for _ in range(rng.choice([1, 1, 6]))]
            yield ("read", view, keys)


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("seed", range(4))
def test_differential_against_full_readers(shards, seed):
    """Random writes and reads on a partial database with a tiny memory_limit (keys are
    evicted all the time) and on the same database with full readers: every read
    equal, with and without writes left in flight (``seed``)."""
    rng = random.Random(seed)
    db = _make(shards=shards, partial=True, memory_limit=3000, seed=seed if seed % 2 else None)
    full = _make(shards=shards)
    for op in _random_ops(rng, 400):
        if op[0] == "read":
            _, view, keys = op
            db.wait()
            if len(keys) == 1:
                got, want = [db.view(view).lookup(keys[0])], [full.view(view).lookup(keys[0])]
            else:
                got, want = db.view(view).lookup_many(keys), full.view(view).lookup_many(keys)
            assert [sorted(g) for g in got] == [sorted(w) for w in want], (view, keys)
        elif op[0] == "update":
            _, i, a = op
            for d in (db, full):
                d.execute("UPDATE t SET a = ? WHERE id = ?", (a, i))
        else:
            kind, table, rows = op
            for d in (db, full):
                getattr(d.table(table), kind)(rows)
    db.wait()
    assert db._partial.evictions > 0 and db._partial.held_bytes() <= 3000
    for view in VIEWS:
        assert sorted(db.view(view).all()) == sorted(full.view(view).all())
        for k in range(-1, 14):
            assert sorted(db.view(view).lookup(k)) == sorted(full.view(view).lookup(k))


def test_compound_key_and_order_by_and_a_restart(tmp_path):
    d = str(tmp_path / "state")
    db = noria_py.connect(partial=True, data_dir=d)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    db.execute("CREATE VIEW two AS SELECT id FROM t WHERE a = ? AND b = ?")
    db.execute("CREATE VIEW ordered AS SELECT id, b FROM t WHERE a = ? ORDER BY b DESC, id")
    db.table("t").insert([(i, i % 3, i % 2) for i in range(30)])
    assert sorted(db.view("two").lookup(1, 0)) == [(i,) for i in range(30) if i % 3 == 1 and i % 2 == 0]
    assert db.view("ordered").lookup(2) == sorted(
        [(i, i % 2) for i in range(30) if i % 3 == 2], key=lambda r: (-r[1], r[0]))
    assert {n["view"]: n["partial"] for n in db.graph() if n["kind"] == "reader"} == {
        "two": True, "ordered": True}
    db.close()
    again = noria_py.connect(partial=True, data_dir=d)
    assert _held(again, "two") == set()
    assert sorted(again.view("two").lookup_many([(1, 0), (2, 1)])[1]) == [
        (i,) for i in range(30) if i % 3 == 2 and i % 2 == 1]
    again.close()


def test_threads_reading_while_a_writer_evicts():
    """Hits are read outside the lock (View.lookup's seqlock); evictions by writes in
    another thread make them read again under the lock, never answer wrong."""
    import threading

    db = _make(partial=True, memory_limit=4000)
    db.table("t").insert([(i, i % 20, 1) for i in range(400)])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write():
        n = 400
        while not stop.is_set():
            db.table("t").insert([(n, n % 20, 1)])
            db.table("t").delete([(n, n % 20, 1)])
            n += 1

    def read(seed):
        rng = random.Random(seed)
        try:
            for _ in range(1500):
                a = rng.randrange(20)
                got = sorted(db.view("rows").lookup(a))
                base = sorted((i, 1) for i in range(400) if i % 20 == a)
                # the writer's row comes and goes: the rest is always there
                assert [r for r in got if r[0] < 400] == base
        except BaseException as exc:        # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    w = threading.Thread(target=write)
    rs = [threading.Thread(target=read, args=(s,)) for s in range(3)]
    w.start()
    for r in rs:
        r.start()
    for r in rs:
        r.join()
    stop.set()
    w.join()
    assert not errors, errors[0]
    assert db._partial.evictions > 0


def test_refused_with_a_cluster_url():
    with pytest.raises(ArgumentError, match="partial"):
        noria_py.connect("noria://127.0.0.1:1", partial=True)


@pytest.mark.parametrize("shards", [1, 4])
def test_a_key_of_another_numeric_type_reads_as_in_a_full_reader(shards):
    db, full = _make(partial=True, shards=shards), _make(shards=shards)
    for d in (db, full):
        d.table("t").insert([(1, 1, 2), (2, 1, 3)])
    for view in ("cnt", "agg", "rows", "joined"):
        for k in (1.0, True, 1.5):
            assert db.view(view).lookup(k) == full.view(view).lookup(k), (view, k)
    assert db.view("cnt").lookup(1.0) == [(1, 2)] and type(db.view("cnt").lookup(1)[0][0]) is int
