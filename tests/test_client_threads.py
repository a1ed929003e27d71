"""One embedded database shared by threads (client.py's module docstring): writers,
readers and DDL at once, checked against a recount of what the writers did.

Python switches threads every 5 ms by default; the tests switch every 10 µs, so that
calls interleave in the middle of one another as they would under load.
"""
from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

import noria_py
from noria_py.errors import Error

BATCH = 10          # rows per write, all of one key: every consistent count is a multiple


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Run each target in its own thread; re-raise the first failure of any."""
    failures: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:        # noqa: BLE001 - handed to the main thread
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def make_db(shards: int, seed: int | None) -> noria_py.Database:
    db = noria_py.connect(shards=shards, seed=seed)
    db.execute("CREATE TABLE t (k INT, v INT)")
    db.execute("CREATE VIEW total AS SELECT COUNT(*) AS n FROM t")
    db.execute("CREATE VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t "
               "WHERE k = ? GROUP BY k")
    db.execute("CREATE VIEW rows_of AS SELECT k, v FROM t WHERE k = ?")
    db.execute("CREATE VIEW everything AS SELECT k, v FROM t")
    return db


@pytest.mark.parametrize("shards,seed", [(1, None), (2, None), (2, 7)])
def test_writers_readers_and_ddl_at_once_match_a_recount(shards: int, seed: int | None) -> None:
    db = make_db(shards, seed)
    writers, rounds = 4, 60
    done = threading.Event()
    written: list[Counter] = [Counter() for _ in range(writers)]   # key -> rows, per writer
    views_made: list[str] = []

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            table = db.table("t")
            mine = written[w]
            for i in range(rounds):
                k = w * 100 + i % 5                 # each writer owns its keys
                rows = [(k, j) for j in range(BATCH)]
                table.insert(rows)
                mine[k] += BATCH
                if i % 3 == 2:
                    table.delete(rows)
                    mine[k] -= BATCH
                db.wait()                           # then this thread's writes are read
                got = db.view("per_key").lookup(k)
                assert [n for _, n, _ in got] == ([mine[k]] if mine[k] else []), (k, got)
        return run

    def reader() -> None:
        total, per_key = db.view("total"), db.view("per_key")
        rows_of, everything = db.view("rows_of"), db.view("everything")
        while not done.is_set():        # a read sees whole batches, never half of one
            rows = total.all()
            assert len(rows) == 1 and rows[0][0] % BATCH == 0, rows
            assert len(everything.all()) % BATCH == 0
            for k in (0, 101, 202, 303):
                got = per_key.lookup(k)
                assert len(got) <= 1 and all(n % BATCH == 0 for _, n, _ in got), got
                assert len(rows_of.lookup(k)) % BATCH == 0

    def looker() -> None:               # lookups only: the path that takes no lock
        rows_of = db.view("rows_of")
        while not done.is_set():
            for k in (0, 1, 100, 101, 200, 300):
                assert len(rows_of.lookup(k)) % BATCH == 0

    def ddl() -> None:
        i = 0
        while not done.is_set():
            name = f"by_key_{i}"
            db.execute(f"CREATE VIEW {name} AS SELECT k, COUNT(*) AS n FROM t GROUP BY k")
            rows = db.view(name).all()
            assert all(n % BATCH == 0 for _, n in rows), rows
            if i % 2:
                db.execute(f"DROP VIEW {name}")
            else:
                views_made.append(name)
            i += 1

    def writers_then_done() -> None:
        try:
            run_threads([writer(w) for w in range(writers)])
        finally:
            done.set()

    run_threads([writers_then_done, reader, looker, ddl])
    db.wait()

    expected = sum(written, Counter())
    expected = Counter({k: n for k, n in expected.items() if n})
    assert Counter(dict((k, c) for k, c in Counter(r[0] for r in db.table("t").rows()).items())) == expected
    assert db.view("total").all() == [(sum(expected.values()),)]
    for k, n in expected.items():
        assert db.view("per_key").lookup(k) == [(k, n, n // BATCH * sum(range(BATCH)))]
    assert views_made, "the DDL thread made no view"
    for name in views_made:
        assert sorted(db.view(name).all()) == sorted(expected.items())


def test_a_write_refused_in_one_thread_changes_nothing_for_the_others() -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE p (id INT PRIMARY KEY, v INT)")
    db.execute("CREATE VIEW n AS SELECT COUNT(*) AS n FROM p")
    refused: list[Error] = []

    def run(w: int) -> Callable[[], None]:
        def go() -> None:
            table = db.table("p")
            for i in range(50):
                try:    # every other batch repeats a key another thread wrote
                    table.insert([(w * 1000 + i, i), (i if i % 2 else w * 1000 + i + 500, i)])
                except noria_py.errors.DuplicateKeyError as exc:
                    refused.append(exc)
        return go

    run_threads([run(w) for w in range(1, 4)])
    rows = db.table("p").rows()
    assert len({r[0] for r in rows}) == len(rows)          # no key twice
    assert db.view("n").all() == [(len(rows),)]
    assert refused



READS: dict[str, Callable[[noria_py.View], list[tuple]]] = {
    "lookup": lambda view: view.lookup(1),
    "lookup_many": lambda view: view.lookup_many([1])[0],
    "all": lambda view: view.all(),
}


@pytest.mark.parametrize("kind,read", [("aggregate", "lookup"), ("reader", "lookup"),
                                       ("base", "lookup"), ("aggregate", "lookup_many"),
                                       ("aggregate", "all"), ("reader", "all")])
def test_lookups_are_answered_during_a_recovery_that_changes_no_reader(
        monkeypatch: pytest.MonkeyPatch, kind: str, read: str) -> None:
    """A tree-clock recovery of a node above the readers lets reads (``lookup``,
    ``lookup_many``, ``all``) go on meanwhile (``Database._reads_open``), the view as
    it stood; one that restores a reader, or a base (whose history it delivers at
    once), holds them back until it is done. The recovery is held at its start until
    the read is answered (or ``wait`` s)."""
    from noria_py.recovery import treeclock
    db = make_db(1, None)
    db.table("t").insert([(1, 5)] * 3)
    db.wait()
    view = db.view("per_key")
    node = next(n["id"] for n in db.graph() if n["kind"] == kind
                and (kind != "reader" or n["view"] == "per_key"))
    started, answered = threading.Event(), threading.Event()
    in_time: list[bool] = []
    wait = 10.0 if kind == "aggregate" else 0.3
    for name in ("_recover_operator", "recover_base"):
        def held(*args, _inner=getattr(treeclock, name), **kwargs):
            started.set()
            in_time.append(answered.wait(wait))
            return _inner(*args, **kwargs)
        monkeypatch.setattr(treeclock, name, held)
    rows: list[tuple] = []

    def look() -> None:
        assert started.wait(10)
        rows.extend(READS[read](view))
        answered.set()

    db.fail(node)
    run_threads([lambda: db.recover(node), look])
    assert in_time == [kind == "aggregate"]
    assert rows == [(1, 3, 15)]
    db.wait()
    assert view.lookup(1) == [(1, 3, 15)]


def test_leaving_a_read_window_changes_the_version_and_keeps_it_odd() -> None:
    """A lookup that straddles the end of ``open_reads`` sees the version changed and
    reads again under the lock; the lock stays held (odd)."""
    from noria_py.client import _DatabaseLock
    lock = _DatabaseLock()
    with lock:
        before = lock.version
        with lock.open_reads():
            assert lock.reads_open and lock.version == before
        assert not lock.reads_open
        assert lock.version != before and lock.version & 1
    assert not lock.version & 1


def test_lookups_during_recoveries_see_whole_batches() -> None:
    """A thread fails and recovers the operators above the readers (tree clocks, each
    recovery letting lookups read meanwhile) while a writer writes and lookers look
    up: every lookup sees whole batches, and the views end right."""
    db = make_db(2, None)
    aggregates = [n["id"] for n in db.graph() if n["kind"] not in ("base", "reader")]
    done = threading.Event()
    written: Counter = Counter()

    def writer() -> None:
        table = db.table("t")
        for i in range(100):
            table.insert([(i % 4, j) for j in range(BATCH)])
            written[i % 4] += BATCH

    def failer() -> None:
        for i in range(100):
            node = aggregates[i % len(aggregates)]
            db.fail(node)
            db.table("t").insert([(9, j) for j in range(BATCH)])
            written[9] += BATCH
            db.recover(node)

    def writers_then_done() -> None:
        try:
            run_threads([writer, failer])
        finally:
            done.set()

    def looker() -> None:
        per_key, rows_of = db.view("per_key"), db.view("rows_of")
        everything, total = db.view("everything"), db.view("total")
        while not done.is_set():
            for k in (0, 1, 2, 3, 9):
                got = per_key.lookup(k)
                assert len(got) <= 1 and all(n % BATCH == 0 for _, n, _ in got), got
                assert len(rows_of.lookup(k)) % BATCH == 0
            many = per_key.lookup_many([0, 1, 2, 3, 9])
            assert all(n % BATCH == 0 for rows in many for _, n, _ in rows), many
            assert len(everything.all()) % BATCH == 0
            assert all(n % BATCH == 0 for n, in total.all())

    run_threads([writers_then_done, looker, looker])
    db.wait()
    for k, n in written.items():
        assert db.view("per_key").lookup(k) == [(k, n, n // BATCH * sum(range(BATCH)))]
