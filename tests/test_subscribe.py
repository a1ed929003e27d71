"""Subscriptions (noria_py/subscribe.py): a subscriber that applies every change it is
given holds, at each change's progress, exactly the rows the view held after that
many writes; it falls behind, loses a reader or loses its view only with a
``SubscriptionError``; and it never holds a writer back."""
from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

import noria_py
from noria_py import Change
from noria_py.errors import ArityError, SubscriptionError

VIEWS = {
    "per_key": "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t WHERE k = ? GROUP BY k",
    "rows": "SELECT k, v FROM t WHERE v > 2",
    "top": "SELECT k, v FROM t WHERE k = ? ORDER BY v DESC LIMIT 2",
    "joined": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
}


def make(shards: int, seed: int | None) -> noria_py.Database:
    db = noria_py.connect(shards=shards, seed=seed)
    db.execute("CREATE TABLE t (k INT, v INT)")
    db.execute("CREATE TABLE u (k INT PRIMARY KEY, w INT)")
    db.table("u").insert([(k, k * 10) for k in range(4)])
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    return db


def apply(acc: Counter, change: Change) -> None:
    for row, sign in change.rows:
        acc[row] += sign
        if not acc[row]:
            del acc[row]


def read(db: noria_py.Database, view: str, key: int | None) -> Counter:
    v = db.view(view)
    return Counter(v.all() if key is None else v.lookup(key))


@pytest.mark.parametrize("shards,seed", [(1, None), (4, None), (2, 11)])
@pytest.mark.parametrize("view,key", [("per_key", None), ("per_key", 2), ("rows", None),
                                       ("top", 1), ("joined", None)])
def test_changes_replayed_give_the_view_at_each_progress(shards, seed, view, key) -> None:
    rng = random.Random(f"{shards}{seed}{view}{key}")
    db = make(shards, seed)
    db.table("t").insert([(rng.randrange(4), rng.randrange(6)) for _ in range(10)])
    sub = db.subscribe(view, key)
    states = {db._writes: read(db, view, key)}      # at each quiet point: the view
    held = list(db.table("t").rows())
    for i in range(40):
        if held and rng.random() < 0.4:
            gone = rng.sample(held, min(len(held), rng.randrange(1, 3)))
            db.table("t").delete(gone)
            for r in gone:
                held.remove(r)
        else:
            rows = [(rng.randrange(4), rng.randrange(6)) for _ in range(rng.randrange(1, 4))]
            db.table("t").insert(rows)
            held += rows
        if seed is None or i % 5 == 4:
            db.wait()
            states[db._writes] = read(db, view, key)
    acc: Counter = Counter()
    seen = []
    while (change := sub.poll()) is not None:
        apply(acc, change)
        assert change.progress in states, "a change taken while writes were in flight"
        assert acc == states[change.progress], change.progress
        seen.append(change.progress)
    assert seen == sorted(seen) and acc == read(db, view, key)
    sub.close()


def test_a_subscriber_that_falls_behind_is_ended_not_the_writer() -> None:
    db = make(1, None)
    slow = db.subscribe("rows", buffer=3)
    fast = db.subscribe("rows")
    for i in range(6):
        db.table("t").insert([(1, 3 + i)])
    got = [slow.poll(), slow.poll(), slow.poll()]
    assert [len(c.rows) for c in got] == [0, 1, 1]
    with pytest.raises(SubscriptionError, match="fell more than 3 changes behind"):
        slow.poll()
    assert sum(1 for _ in iter(fast.poll, None)) == 7       # the snapshot and six writes
    db.table("t").insert([(1, 9)])                          # writes go on
    assert len(db.view("rows").all()) == 7


def test_ending_a_subscription_while_a_writer_holds_the_database_does_not_deadlock() -> None:
    # The PostgreSQL server ends a subscriber that falls behind from its own thread,
    # while a writer, holding the database's lock, queues the next change: ending
    # must not wait for the database's lock while it holds the subscription's.
    database = threading.Lock()
    detaching = threading.Event()

    def detach(sub: object) -> None:
        detaching.set()
        with database:
            pass

    from noria_py.subscribe import Subscription
    sub = Subscription("v", None, (), 1, 1, detach)
    sub.put(Change(0, []))                   # full: the next change ends it
    with database:                           # the writer holds the database ...
        ender = threading.Thread(target=sub.fail, args=("fell behind",), daemon=True)
        ender.start()
        assert detaching.wait(5)
        writer = threading.Thread(target=sub.put, args=(Change(1, [((1,), 1)]),), daemon=True)
        writer.start()                       # ... and queues a change meanwhile
        writer.join(5)
        assert not writer.is_alive(), "the writer waits for the subscription forever"
    ender.join(5)
    assert not ender.is_alive()
    assert sub.poll() == Change(0, [])
    with pytest.raises(SubscriptionError, match="fell behind"):
        sub.poll()


def test_a_failed_reader_or_a_dropped_view_ends_its_subscriptions() -> None:
    db = make(1, None)
    sub = db.subscribe("rows")
    other = db.subscribe("per_key", 1)
    db.table("t").insert([(1, 5)])
    reader = next(n["id"] for n in db.graph()
                  if n["kind"] == "reader" and "rows" in str(n.get("view", n.get("name", ""))))
    db.fail(reader)
    assert sub.poll().rows == [] and sub.poll().rows == [((1, 5), 1)]
    with pytest.raises(SubscriptionError, match="reader failed"):
        sub.poll()
    db.recover(reader)
    again = db.subscribe("rows")
    assert again.poll().rows == [((1, 5), 1)]
    assert [c.rows for c in iter(other.poll, None)] == [[], [((1, 1, 5), 1)]]
    db.execute("DROP VIEW per_key")
    with pytest.raises(SubscriptionError, match="dropped"):
        other.poll()


def test_a_callback_runs_in_its_own_thread_and_a_reader_thread_sees_every_change() -> None:
    db = make(2, None)
    calls: list = []
    done = threading.Event()

    def callback(change) -> None:
        calls.append((threading.get_ident(), change))
        if isinstance(change, Change) and change.progress == 21:
            done.set()

    with db.subscribe("rows", callback=callback):
        for i in range(20):
            db.table("t").insert([(i % 4, 3 + i % 5)])
        assert done.wait(30)
    assert {ident for ident, _ in calls} != {threading.get_ident()}
    acc: Counter = Counter()
    for _, change in calls:
        apply(acc, change)
    assert acc == read(db, "rows", None)


def test_subscribe_mistakes_are_errors() -> None:
    db = make(1, None)
    with pytest.raises(noria_py.UnknownViewError):
        db.subscribe("nope")
    with pytest.raises(ArityError):
        db.subscribe("rows", key=1)
    with pytest.raises(ArityError):
        db.subscribe("per_key", key=(1, 2))
    with pytest.raises(noria_py.ProgrammingError):
        db.subscribe("rows", buffer=0)


# ---------------------------------------------------------------- partial views

def _partial_db(limit: int | None) -> noria_py.Database:
    db = noria_py.connect(partial=True, memory_limit=limit, shards=2)
    db.execute("CREATE TABLE t (k INT, v INT)")
    db.execute("CREATE VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t "
               "WHERE k = ? GROUP BY k")
    db.execute("CREATE VIEW rows_of AS SELECT k, v FROM t WHERE k = ?")
    return db


def _drain(sub, acc: Counter) -> None:
    while (change := sub.poll(0)) is not None:
        apply(acc, change)


@pytest.mark.parametrize("view", ["per_key", "rows_of"])
def test_a_partial_views_key_is_held_while_subscribed_under_evictions(view) -> None:
    """A subscription to one key of a partial view fills it and holds it: reads of
    every other key under a small memory limit evict them, never it, and the changes
    keep giving the key's rows (against the same writes on a full database)."""
    rng = random.Random(view)
    db, full = _partial_db(4000), noria_py.connect()
    full.execute("CREATE TABLE t (k INT, v INT)")
    full.execute(f"CREATE VIEW {view} AS " + {
        "per_key": "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t WHERE k = ? GROUP BY k",
        "rows_of": "SELECT k, v FROM t WHERE k = ?"}[view])
    for d in (db, full):
        d.table("t").insert([(k % 300, k) for k in range(3000)])
    sub = db.subscribe(view, 7)
    acc: Counter = Counter()
    _drain(sub, acc)
    assert acc == Counter(full.view(view).lookup(7))
    evicted = db._partial.evictions
    for _ in range(30):
        rows = [(rng.choice([7, rng.randrange(300)]), rng.randrange(100)) for _ in range(20)]
        for d in (db, full):
            d.table("t").insert(rows)
        db.view(view).lookup_many(rng.sample(range(300), 40))     # (others fill, evict)
        _drain(sub, acc)
        assert acc == Counter(full.view(view).lookup(7))
    assert db._partial.evictions > evicted + 100
    sub.close()
    assert not db._partial.pinned                  # (closed: the key may go now)
    db.close()
    full.close()


def test_a_partial_subscription_ends_when_its_path_loses_state_and_can_start_again() -> None:
    db = _partial_db(None)
    db.table("t").insert([(k % 5, k) for k in range(50)])
    sub = db.subscribe("per_key", 3)
    shard = db.view("per_key")._shard(3)
    agg = next(n["id"] for n in db.graph()
               if n["kind"] == "aggregate" and n.get("partial") and n["shard"] == shard)
    db.fail(agg)
    db.recover(agg)
    with pytest.raises(SubscriptionError, match="lost its state"):
        for _ in range(20):                 # (the snapshot, then the end)
            sub.poll(0.05)
    again = db.subscribe("per_key", 3)
    assert again.poll(0).rows == [((3, 10, sum(range(3, 50, 5))), 1)]
    again.close()
    db.close()


def test_a_partial_view_is_subscribed_to_by_key() -> None:
    db = _partial_db(None)
    with pytest.raises(noria_py.NotSupportedError, match="subscribe to one key"):
        db.subscribe("per_key")
    db.close()
