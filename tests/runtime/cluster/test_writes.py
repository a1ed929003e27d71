"""Writes at the base's worker (``serve --writes worker``): the base keeps its rows and
validates there, a client writes on the worker's read port, and a write is
acknowledged once the base's log replica on another worker holds it (the controller
keeps no history of it), so a SIGKILLed worker loses none (docs/architecture.md,
"Writes at the base's worker").

The option is off by default, so the tests that start a cluster of their own to kill
a worker run in the slow suite (``-m slow``); the default suite keeps the oracle test
and the SIGSTOP test, which covers the acknowledgement's rule and a write in flight
at a SIGKILL."""
from __future__ import annotations

import collections
import contextlib
import datetime
import os
import queue
import random
import shutil
import signal
import ssl
import threading
import time
import types
from collections.abc import Iterator
from typing import cast

import numpy as np
import pytest

import noria_py
from noria_py import tuning
from noria_py.batch import Batch
from noria_py.errors import (
    ArgumentError,
    CorruptionError,
    DuplicateKeyError,
    RecoveryError,
    RowNotFoundError,
    TypeMismatchError,
)
from noria_py.graph import Graph
from noria_py.ops.base import Base
from noria_py.remote import RemoteDatabase
from noria_py.runtime.cluster import controller, wire
from noria_py.runtime.cluster.controller import CHANNELS, ClusterRuntime
from noria_py.runtime.cluster.errors import WorkerLost
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.cluster.reads import IN_DOUBT
from noria_py.runtime.cluster.restart import ClusterState
from noria_py.runtime.cluster.server import Server
from noria_py.runtime.cluster.writes import (
    AUTO,
    NOT_BUILT,
    DiskLogs,
    ReplicaLogs,
    choose,
    disk_log,
    history_from,
    log_dir,
    log_parts,
    tables_on_disk,
    unbuilt,
    written_in,
)
from noria_py.runtime.history import WriteHistory
from noria_py.storage import Storage
from noria_py.storage.log import LOG_HEADER_SIZE, RECORD_HEADER
from sql_frontend.types import ColumnInfo, SqlType, TableSchema
from tests.differential.helpers import Oracle, normalize
from tests.runtime.cluster.test_cluster import CI_SEEDS, SEEDS, _differential_with_kill
from tests.storage.helpers import wal_files

WORKER = ("--writes", "worker")

SCHEMA = ["CREATE TABLE t (k INT PRIMARY KEY, v TEXT NOT NULL, n INT)",
          "CREATE TABLE vote (article_id INT, user_id INT)",
          "CREATE VIEW by_k AS SELECT k, v, n FROM t WHERE k = ?",
          "CREATE VIEW votes AS SELECT article_id, COUNT(*) AS c FROM vote "
          "WHERE article_id = ? GROUP BY article_id"]


@pytest.fixture(scope="module")
def cluster():
    # (heartbeats that a stopped controller cannot miss: the SIGSTOP test below)
    with Cluster(workers=2, shards=2, extra=(*WORKER, "--heartbeat-timeout", "30")) as c:
        yield c


def _writes(db) -> list:
    """The same writes to either engine; what each raised, by class, in order."""
    t, vote = db.table("t"), db.table("vote")
    outcomes = []
    steps = [
        lambda: t.insert([(1, "a", 1), (2, "b", None), (3, "c", 3)]),
        lambda: t.insert([(4, "d", 4), (1, "dup", 0)]),         # a key held: all refused
        lambda: t.insert([(5, "e", 5), (5, "f", 5)]),           # a key twice
        lambda: t.insert([(6, None, 6)]),                       # NOT NULL
        lambda: db.execute("INSERT INTO t VALUES (2, 'again', 0)"),   # forwarded, refused
        lambda: db.execute("INSERT INTO t VALUES (7, 'g', 7)"),
        lambda: t.delete([(9, "x", 9)]),                        # no such row
        lambda: db.execute("DELETE FROM t WHERE k = 3"),
        lambda: db.execute("UPDATE t SET n = 20 WHERE k = 2"),
        lambda: t.delete_keys([1]),
        lambda: t.insert([(1, "back", 1)]),                     # its key free again
        lambda: vote.insert([(i % 7, i) for i in range(500)]),  # as columns
        lambda: vote.insert_columns([list(range(40)), list(range(40))]),
        lambda: vote.insert([(1, None), (2, 3)]),
    ]
    for step in steps:
        try:
            step()
            outcomes.append(None)
        except noria_py.Error as e:
            outcomes.append(type(e).__name__)
    return outcomes


def _state(db) -> tuple:
    db.wait()
    rows = sorted(db.execute("SELECT k, v, n FROM t").fetchall())
    by_k = [db.view("by_k").lookup(k) for k in range(10)]
    votes = [db.view("votes").lookup(a) for a in range(8)]
    return rows, by_k, votes, len(db.table("t")), len(db.table("vote"))


def test_writes_at_the_worker_are_the_embedded_engines(cluster):
    """Unique keys, NOT NULL, deletes of rows not there: refused at the base's worker
    exactly as the embedded engine refuses them, a refused batch changing nothing;
    the client's writes went to the worker, not through the controller."""
    db = noria_py.connect(cluster.url)
    embedded = noria_py.connect()
    for sql in SCHEMA:
        db.execute(sql)
        embedded.execute(sql)
    got, want = _writes(db), _writes(embedded)
    assert got == want
    assert got[1:5] == ["DuplicateKeyError", "DuplicateKeyError", "TypeMismatchError",
                        "DuplicateKeyError"]
    assert _state(db) == _state(embedded)
    assert db._write_places["t"] is not None and db._write_places["vote"] is not None
    db.close()


def test_a_refused_write_names_its_error(cluster):
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE u (k INT PRIMARY KEY, v INT NOT NULL)")
    u = db.table("u")
    u.insert([(1, 1)])
    with pytest.raises(DuplicateKeyError):
        u.insert([(2, 2), (1, 3)])
    with pytest.raises(TypeMismatchError):
        u.insert([(3, None)])
    with pytest.raises(RowNotFoundError):
        u.delete([(2, 2)])                      # (the batch before was refused whole)
    db.wait()
    assert sorted(db.execute("SELECT * FROM u").fetchall()) == [(1, 1)]
    db.close()


def test_views_made_while_clients_write_at_the_worker_miss_no_write(cluster):
    """A catalog change fills new nodes from the bases' rows at their workers: the
    workers hold clients' writes meanwhile (``pause``), so every view made while two
    clients write counts every write, once."""
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE w (a INT, b INT)")
    stop = threading.Event()
    acked = [0, 0]

    def writer(i: int) -> None:
        c = noria_py.connect(cluster.url)
        t = c.table("w")
        while not stop.is_set():
            t.insert([(i, j) for j in range(50)])
            acked[i] += 50
        c.close()
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    try:
        for n in range(6):
            db.execute(f"CREATE VIEW w{n} AS SELECT a, COUNT(*) AS c FROM w "
                       "WHERE a = ? GROUP BY a")
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    db.wait()
    for n in range(6):
        for i in range(2):
            assert db.view(f"w{n}").lookup(i) == [(i, acked[i])], (n, i, acked)
    db.close()


def test_writes_at_the_worker_need_what_is_built(tmp_path):
    (tmp_path / "workers").mkdir()     # (the tables: in the workers' logs)
    with pytest.raises(ArgumentError, match="writes must be one of"):
        ClusterRuntime(Graph(), writes="elsewhere")
    with pytest.raises(ArgumentError, match="writes must be one of controller, worker, auto"):
        Server(port=0, writes="elsewhere", spawn=False)
    with pytest.raises(ArgumentError, match="--channels direct"):
        Server(port=0, writes="worker", channels="relay", spawn=False)
    with pytest.raises(ArgumentError, match="serve it with --writes worker"):
        Server(port=0, writes="controller", data_dir=str(tmp_path), spawn=False)
    for regime in ("coordinated", "uncoordinated", "cic", "causal", "falkirk"):
        with pytest.raises(ArgumentError, match=f"--regime {regime} is not built yet: "
                                                ".*controller's history"):
            Server(port=0, writes="worker", regime=regime, spawn=False)
        # (auto on a directory whose tables are in the workers' logs: worker, refused)
        with pytest.raises(ArgumentError, match=f"in its workers' logs .*--regime {regime} "
                                                "is not built yet"):
            Server(port=0, writes=AUTO, regime=regime, data_dir=str(tmp_path),
                   spawn=False)
    with pytest.raises(ArgumentError, match="in its workers' logs .*--channels direct"):
        Server(port=0, writes=AUTO, channels="relay", data_dir=str(tmp_path),
               spawn=False)


def test_auto_writes_at_the_workers_where_built_and_as_a_directory_was_written(tmp_path):
    """``serve --writes auto``: worker with treeclock or lineage on direct
    channels, controller with any other regime or relay; a data directory's tables
    keep the mode they were written in whatever is built; explicit modes as asked."""
    for regime in ("treeclock", "lineage"):
        assert choose(AUTO, regime, "direct", None)[0] == "worker"
        assert choose(AUTO, regime, "relay", None) == (
            "controller", "auto: " + cast(str, unbuilt(regime, "relay")))
    for regime in NOT_BUILT:
        mode, why = choose(AUTO, regime, "direct", None)
        assert (mode, why) == ("controller", "auto: " + cast(str, unbuilt(regime, "direct")))
        assert NOT_BUILT[regime] in why
        assert choose("controller", regime, "direct", None) == ("controller", "asked for")
    new, ours, theirs = tmp_path / "new", tmp_path / "ours", tmp_path / "theirs"
    noria_py.connect(data_dir=str(new)).close()     # (no table made: new)
    ClusterState(new).save(port=1)
    assert written_in(str(new)) is None and written_in(None) is None
    assert choose(AUTO, "treeclock", "direct", str(new))[0] == "worker"
    assert choose(AUTO, "treeclock", "direct", str(tmp_path / "absent"))[0] == "worker"
    st = Storage(ours)                  # (the controller's layout: its catalog and log)
    st.set_catalog(["CREATE TABLE a (k INT)"])
    st.close()
    db = noria_py.connect(data_dir=str(theirs))
    db.execute("CREATE TABLE a (k INT)")
    db.close()
    for d in (ours, theirs):
        assert written_in(str(d)) == "controller"
        for regime in ("treeclock", "lineage", "causal"):
            for channels in CHANNELS:
                assert choose(AUTO, regime, channels, str(d)) == (
                    "controller", f"auto: the tables of {d} were written so")
        assert choose("worker", "treeclock", "direct", str(d))[0] == "worker"   # (as asked)
    (ours / "workers").mkdir()          # (a worker server's start makes it)
    assert written_in(str(ours)) == "worker"
    for regime in ("treeclock", "lineage"):
        assert choose(AUTO, regime, "direct", str(ours)) == (
            "worker", f"auto: the tables of {ours} were written so")


@pytest.mark.slow
def test_writes_at_the_worker_over_tls_with_a_token(certificate):
    """The read port's TLS and token hold for writes too: the client's write link is
    a TLS socket, and a refused write's error crosses it."""
    cert, key = certificate
    with Cluster(workers=2, shards=1, token="writes-token",
                 extra=(*WORKER, "--tls-cert", cert, "--tls-key", key)) as c:
        db = noria_py.connect(c.url, token="writes-token", tls=cert)
        db.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        db.execute("CREATE VIEW by_k AS SELECT k, v FROM t WHERE k = ?")
        t = db.table("t")
        t.insert([(k, k) for k in range(100)])
        with pytest.raises(DuplicateKeyError):
            t.insert([(100, 1), (5, 1)])
        db.wait()
        assert db.view("by_k").lookup(5) == [(5, 5)] and db.view("by_k").lookup(100) == []
        _, link, _ = db._write_places["t"]
        assert isinstance(link.conn.sock, ssl.SSLSocket)
        db.close()


def test_a_replicas_log_is_whole_for_the_owner_that_sent_it_only():
    """``ReplicaLogs`` (the replica's side of a base's log): the whole log from its
    owner, then groups of writes and a trim; it is whole for that owner only
    (``whole``: a later owner's whole log may still be on its way, and the log kept
    is then another owner's, shorter than what that one acknowledged), keeps the tags
    of the writes it took, a promoted log's tags stay, and tags restored with a log
    read elsewhere are kept too (``keep_tags``); once another whole log starts on its
    way (its part 0), the one kept is whole no more."""
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False)], (0,))
    op = Base(schema)
    logs = ReplicaLogs()
    table = Batch.inserts([(1,), (2,)])
    logs.full(op, "b", 2, [table], [Batch.inserts([(3,)])], "w1")
    logs.append("b", [Batch.inserts([(4,)]), Batch.inserts([(5,)])], [11, 12])
    h = logs.whole("b", "w1")
    assert h is not None and logs.whole("b", "w2") is None and logs.whole("c", "w1") is None
    assert [b.rows for b in h.since(2)[1]] == [[(3,)], [(4,)], [(5,)]]
    assert logs.landed("b", 12) and not logs.landed("b", 13)
    logs.trim("b", 4)
    assert h.start == 4 and sorted(h.state_at(5).snapshot().rows) == [(i,) for i in range(1, 6)]
    logs.forget("b")                        # (promoted)
    assert logs.whole("b", "w1") is None and logs.landed("b", 11)
    logs.keep_tags("c", [0, 21, None, 22])
    assert logs.landed("c", 21) and logs.landed("c", 22) and not logs.landed("c", 0)
    with pytest.raises(RecoveryError):
        logs.append("c", [table], [1])      # (no whole log first)
    logs.full(op, "b", 5, [table], [], "w1", 7)
    assert logs.whole("b", "w1") is not None and logs.fills["b"] == 7
    logs.part("b", "w1", 8, 0, [table], [])     # (another whole log on its way)
    assert logs.whole("b", "w1") is None


def _votes(c: Cluster):
    """A client of ``c`` with the table ``vote`` and the view ``votes`` made."""
    db = noria_py.connect(c.url)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW votes AS SELECT article_id, COUNT(*) AS c FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    return db


def _writing_while(c: Cluster, act) -> list[int]:
    """Two clients insert batches of 100 votes into ``vote`` (articles 0 and 1) while
    ``act()`` runs, half a second in; the votes each had acknowledged, a second after.
    A batch in flight at a worker's SIGKILL is never an error: its client asks the
    controller whether the log took it, and sends it again if not; none waits for
    ever (each writer is done within a minute of being told to stop)."""
    acked = [0, 0]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(i: int) -> None:
        try:
            w = noria_py.connect(c.url)
            t = w.table("vote")
            n = 0
            while not stop.is_set():
                t.insert([(i, n * 100 + j) for j in range(100)])
                acked[i] += 100
                n += 1
            w.close()
        except BaseException as e:
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(2)]
    for th in threads:
        th.start()
    time.sleep(0.5)
    act()
    time.sleep(1.0)
    stop.set()
    for th in threads:
        th.join(60)
    assert not errors and not any(th.is_alive() for th in threads), errors
    return acked


@pytest.mark.slow
def test_a_sigkilled_base_worker_loses_no_acknowledged_write():
    """Writers insert batches at the base's worker while it is SIGKILLed: every batch
    acknowledged is in the view after the recovery, once, and so is every batch in
    flight at the kill (its client asks whether the history took it: ``write_landed``);
    the client's next writes go to the base's new worker (a new placement)."""
    with Cluster(workers=2, shards=1, extra=WORKER) as c:
        db = _votes(c)
        base = next(n for n in db.graph() if n["kind"] == "base")
        acked = _writing_while(c, lambda: os.kill(base["pid"], signal.SIGKILL))
        db.table("vote").insert([(5, 1)])       # after the recovery: at the new worker
        db.wait()
        for i in range(2):
            (row,) = db.view("votes").lookup(i)
            assert row[1] == acked[i], (i, acked, row)     # none lost, none twice
        assert db.view("votes").lookup(5) == [(5, 1)]
        assert [n["pid"] for n in db.graph() if n["kind"] == "base"] != [base["pid"]]
        assert db.recoveries()
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:CI_SEEDS])
def test_sigkill_mid_load_matches_duckdb_with_writes_at_the_worker(seed, monkeypatch):
    _differential_with_kill(seed, monkeypatch, extra=WORKER, channels="direct")


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_soak_with_writes_at_the_worker(seed, monkeypatch):
    _differential_with_kill(seed, monkeypatch, extra=WORKER, channels="direct")


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:8])
def test_lineage_regime_sigkill_soak_with_writes_at_the_worker(seed, monkeypatch):
    """``--regime lineage``: a lost base is restored from its log (the controller's
    history completed by its replica's tail), every other lost node rebuilt from the
    bases' copies here, the clients' writes at the workers paused meanwhile."""
    reports = _differential_with_kill(seed, monkeypatch, extra=(*WORKER, "--regime", "lineage"),
                                      channels="direct")
    assert reports and {r.strategy for r in reports} <= {"lineage", "treeclock"}, reports


@pytest.mark.slow
def test_a_lost_owners_base_comes_back_on_its_log_replica_twice_over():
    """The base's worker SIGKILLed: its base comes back on the worker of its log
    replica (rebuilt from the log there: ``promote_base``), whose new replica is
    another worker (sent the whole log while the writes go on: ``filling``); that
    worker SIGKILLed in turn, the base comes back on that new replica, whose log took
    every write made meanwhile. Every write lands once."""
    with Cluster(workers=2, shards=1, extra=WORKER) as c:
        db = _votes(c)
        t = db.table("vote")
        want: collections.Counter[int] = collections.Counter()

        def write(n: int) -> None:
            for i in range(n):
                t.insert([(i % 3, j) for j in range(10)])
                want[i % 3] += 10
        write(30)
        db.wait()
        for _ in range(2):
            (base,) = [n for n in db.graph() if n["kind"] == "base"]
            assert base["replica_pid"] not in (None, base["pid"])
            os.kill(base["pid"], signal.SIGKILL)
            write(20)                           # (the first ones in flight at the kill)
            db.wait()
            (now,) = [n for n in db.graph() if n["kind"] == "base"]
            assert now["pid"] == base["replica_pid"], (base, now)   # (on its replica)
            assert now["replica_pid"] not in (None, now["pid"], base["pid"])
            write(20)
            db.wait()
            for k in range(3):
                assert db.view("votes").lookup(k) == [(k, want[k])]      # each once
        assert db.execute("SELECT COUNT(*) FROM vote").rows == [(sum(want.values()),)]
        db.close()


@pytest.mark.slow
def test_a_promoted_base_holds_every_row_of_its_log(monkeypatch):
    """A keyed table's owner SIGKILLed: its base comes back on its log replica,
    rebuilt from the log's batches (``promote_base``: the table as of the trim, then
    the writes since; the log trimmed at every write here), and holds every row: a
    key written before the kill is refused again, a delete of one finds it, a new
    key is taken."""
    monkeypatch.setenv("NORIA_TUNING", "ACK_EVERY=1,CHECKPOINT_EVERY=1,HISTORY_TRIM_EVERY=1")
    with Cluster(workers=2, shards=1, extra=WORKER) as c:
        db = noria_py.connect(c.url)
        db.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
        db.execute("CREATE VIEW total AS SELECT COUNT(*) AS n FROM k")
        t = db.table("k")
        for i in range(40):
            t.insert([(10 * i + j, i) for j in range(10)])
        db.wait()
        (base,) = [n for n in db.graph() if n["kind"] == "base"]
        assert base["replica_pid"] not in (None, base["pid"])
        os.kill(base["pid"], signal.SIGKILL)
        t.insert([(1000, 0)])
        db.wait()
        (now,) = [n for n in db.graph() if n["kind"] == "base"]
        assert now["pid"] == base["replica_pid"], (base, now)   # (on its replica)
        for key in (0, 5, 199, 399):
            with pytest.raises(DuplicateKeyError):
                t.insert([(key, 1)])
        t.delete([(7, 0)])
        db.wait()
        assert db.view("total").lookup() == [(400,)]
        db.close()


@pytest.mark.slow
def test_a_lost_log_replica_is_replaced_and_no_write_is_lost():
    """Writers insert at the base's worker while its log replica is SIGKILLed: the
    writes in flight wait for the next replica (sent the whole log first), none is
    lost or applied twice; then the base's worker is SIGKILLed with the new replica
    stopped (SIGSTOP) and a write in flight, which its tag resolves, once."""
    with Cluster(workers=2, shards=1, extra=WORKER) as c:
        db = _votes(c)
        t = db.table("vote")
        t.insert([(9, 0)])
        (base,) = [n for n in db.graph() if n["kind"] == "base"]
        assert base["replica_pid"] not in (None, base["pid"])
        acked = _writing_while(c, lambda: os.kill(base["replica_pid"], signal.SIGKILL))
        db.wait()
        for i in range(2):
            (row,) = db.view("votes").lookup(i)
            assert row[1] == acked[i], (i, acked, row)     # none lost, none twice
        (now,) = [n for n in db.graph() if n["kind"] == "base"]
        assert now["pid"] == base["pid"]                    # (the owner stayed)
        assert now["replica_pid"] not in (None, base["pid"], base["replica_pid"])
        # the owner lost with a write in flight to its (stopped) replica
        done = threading.Event()
        writer_thread = threading.Thread(target=lambda: (t.insert([(7, 1)]), done.set()))
        os.kill(now["replica_pid"], signal.SIGSTOP)
        try:
            writer_thread.start()
            assert not done.wait(0.5)       # not in the replica: not acknowledged
            os.kill(now["pid"], signal.SIGKILL)
        finally:
            os.kill(now["replica_pid"], signal.SIGCONT)
        writer_thread.join(60)
        assert done.is_set()
        db.wait()
        assert db.view("votes").lookup(7) == [(7, 1)]      # once
        db.close()


@pytest.mark.slow
def test_a_replicas_log_trimmed_at_every_write_restores_every_write_once(monkeypatch):
    """The base's log (the owner's and its replica's) trimmed at every write its
    children took: the owner SIGKILLed, its base is restored from its replica's log
    (the table as of the trim, the writes since), every write there once."""
    monkeypatch.setenv("NORIA_TUNING", "ACK_EVERY=1,CHECKPOINT_EVERY=1,HISTORY_TRIM_EVERY=1")
    with Cluster(workers=2, shards=1, extra=WORKER) as c:
        db = _votes(c)
        t = db.table("vote")
        t.insert([(1, 0)])
        db.wait()
        (base,) = [n for n in db.graph() if n["kind"] == "base"]
        for i in range(1, 40):                  # (at the worker: the controller asks nothing)
            t.insert([(1, i)])
        time.sleep(0.5)                         # (the children's progress, the trims)
        os.kill(base["pid"], signal.SIGKILL)
        t.insert([(2, 0)])                      # (at the base's new worker)
        db.wait()
        assert db.view("votes").lookup(1) == [(1, 40)]
        assert db.execute("SELECT COUNT(*) FROM vote").rows == [(41,)]
        assert db.recoveries()
        db.close()


def _counted_votes(server: Server) -> tuple[RemoteDatabase, dict, dict]:
    """A client of ``server`` with table ``vote`` and view ``c`` (its rows counted by
    ``a``), the base's node (``db.graph()``) and a node on another worker."""
    db = noria_py.connect(f"noria://127.0.0.1:{server.address[1]}")
    db.execute("CREATE TABLE vote (a INT, u INT)")
    db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote GROUP BY a")
    g = db.graph()
    base = next(n for n in g if n["kind"] == "base")
    return db, base, next(n for n in g if n["pid"] != base["pid"])


@pytest.mark.slow
def test_no_write_at_a_worker_lands_inside_a_lineage_rebuild(monkeypatch):
    """A lineage rebuild fills the purged nodes from the bases' rows (at their workers)
    and the bases' times, after a ``wait``: a client's write at a live base's worker
    in between would reach a purged node emptied for the rebuild (dropped, or applied
    besides the copy), so the rebuild pauses those writes (as a catalog change does).
    One is made at that point (the first ``reset``): it must wait for the rebuild, and
    be in the view once."""
    from noria_py.runtime.cluster import controller
    server = Server(port=0, workers=2, shards=2, writes="worker", strategy="lineage")
    try:
        db, base, victim = _counted_votes(server)       # (the base lives on)
        late = noria_py.connect(f"noria://127.0.0.1:{server.address[1]}")
        table = late.table("vote")
        table.insert([(i % 4, i) for i in range(40)])   # (then it knows where)
        db.wait()
        landed = threading.Event()
        waited: list[bool] = []
        reset = controller.ClusterRuntime.reset

        def reset_with_a_write(self, node_id: str) -> None:
            if not waited:
                threading.Thread(target=lambda: (table.insert([(0, -1)]),
                                                 landed.set())).start()
                waited.append(landed.wait(1.0))
                time.sleep(0.1)             # (its output on its way to the purged nodes)
            reset(self, node_id)
        monkeypatch.setattr(controller.ClusterRuntime, "reset", reset_with_a_write)
        db.fail(victim["id"])               # (SIGKILL)
        report = db.recover(victim["id"])
        assert report.strategy == "lineage", report
        assert landed.wait(30)              # (taken once the rebuild is done)
        db.wait()
        assert sorted(db.view("c").all()) == [(0, 11), (1, 10), (2, 10), (3, 10)]
        assert waited == [False]            # (the write waited for the rebuild)
        late.close()
        db.close()
    finally:
        server.stopped.set()
        server.close()


def test_a_pause_that_times_out_leaves_no_worker_paused(monkeypatch):
    """A catalog change pauses the clients' writes at every worker; when one worker does
    not answer in time (stopped: SIGSTOP), the change fails with an error that says so,
    and the workers it paused, the stopped one included, take writes again once it goes
    on, and the next catalog change is not locked out."""
    from noria_py.runtime.cluster import controller
    server = Server(port=0, workers=2, shards=2, writes="worker", heartbeat_timeout=30)
    try:
        db, base, on_other = _counted_votes(server)
        other = on_other["pid"]
        t = db.table("vote")
        t.insert([(1, 1)])                  # (then it knows where)
        db.wait()
        monkeypatch.setattr(controller, "WAIT_TIMEOUT", 0.5)
        os.kill(other, signal.SIGSTOP)
        try:
            with pytest.raises(noria_py.OperationalError, match="did not hold its clients'"):
                server.runtime.pause_writes()
            with pytest.raises(noria_py.Error, match=r"worker .* did not .* within 0 s"):
                db.execute("CREATE VIEW d AS SELECT a, u FROM vote WHERE a = ?")
        finally:
            os.kill(other, signal.SIGCONT)
        monkeypatch.setattr(controller, "WAIT_TIMEOUT", 60.0)
        done = threading.Event()
        threading.Thread(target=lambda: (t.insert([(1, 2)]), done.set()), daemon=True).start()
        assert done.wait(20)                # (not held by a pause nobody resumed)
        db.execute("CREATE VIEW d AS SELECT a, u FROM vote WHERE a = ?")   # (not locked out)
        db.wait()
        assert db.view("c").all() == [(1, 2)]
        assert db.view("d").lookup(1) == [(1, 1), (1, 2)]
        db.close()
    finally:
        server.stopped.set()
        server.close()


def test_a_write_is_acknowledged_once_its_log_replica_holds_it(cluster):
    """A write at the base's worker is acknowledged once the base's log replica (the
    other worker) holds it, not the controller: with the replica stopped (SIGSTOP) it
    is held, never acknowledged, until the replica goes on; with the controller
    stopped it is acknowledged. The base's worker SIGKILLed while the controller is
    still stopped: the writes acknowledged meanwhile, which the controller never saw,
    come back from the replica's log, each once. (It kills a worker of the module's
    cluster: the file's last test.)"""
    c = cluster
    db = noria_py.connect(c.url)
    bases = {n["id"] for n in db.graph() if n["kind"] == "base"}
    db.execute("CREATE TABLE held (article_id INT, user_id INT)")
    db.execute("CREATE VIEW held_votes AS SELECT article_id, COUNT(*) AS c FROM held "
               "WHERE article_id = ? GROUP BY article_id")
    t = db.table("held")
    t.insert([(1, 1)])                      # (where it writes, asked now)
    base = next(n for n in db.graph() if n["kind"] == "base" and n["id"] not in bases)
    assert base["replica_pid"] not in (None, base["pid"])
    done = threading.Event()
    writer = threading.Thread(target=lambda: (t.insert([(1, 2), (1, 3)]), done.set()))
    os.kill(base["replica_pid"], signal.SIGSTOP)
    try:
        writer.start()
        assert not done.wait(1.0)           # not in the replica: not acknowledged
    finally:
        os.kill(base["replica_pid"], signal.SIGCONT)
    writer.join(60)
    assert done.is_set()
    db.wait()
    assert db.view("held_votes").lookup(1) == [(1, 3)]
    os.kill(c.proc.pid, signal.SIGSTOP)
    try:
        for n in range(4, 8):               # acknowledged with the controller stopped
            t.insert([(1, n)])
        os.kill(base["pid"], signal.SIGKILL)
    finally:
        os.kill(c.proc.pid, signal.SIGCONT)
    db.wait()
    assert db.view("held_votes").lookup(1) == [(1, 7)]       # from the replica, once
    assert db.execute("SELECT COUNT(*) FROM held").rows == [(7,)]     # (its copy too)
    t.insert([(1, 8)])                                   # at the base's new worker
    db.wait()
    assert db.view("held_votes").lookup(1) == [(1, 8)]
    assert [n["pid"] for n in db.graph() if n["id"] == base["id"]] != [base["pid"]]
    db.close()


def _log_of(op: Base, start: int, rows: list, writes: list[list]) -> WriteHistory:
    return history_from(op, start, [Batch.inserts(rows)] if rows else [],
                        [Batch.inserts(w) for w in writes])


def test_a_bases_log_on_disk_is_its_log_in_memory_and_is_trimmed_by_the_same_rule(
        tmp_path, monkeypatch):
    """``DiskLogs`` (``--data-dir``): the directory mirrors the log in memory, made,
    appended to and trimmed; a trim rewrites it only once the writes trimmed reach
    ``tuning.DISK_LOG_TRIM`` and those kept, so it stays within about twice the log
    in memory; ``disk_log`` reads it back (the table as of its start, every write
    after, their tags, kept by a trim's rewrite), the longest of several, and
    ``tables_on_disk`` the table, the longest log of each."""
    monkeypatch.setattr(tuning, "DISK_LOG_TRIM", 4)
    schema = TableSchema("T", [ColumnInfo("a", SqlType.INT, False)], ())
    op = Base(schema)
    disk = DiskLogs(tmp_path / "w1")
    h = _log_of(op, 2, [(1,), (2,)], [[(3,)]])
    disk.reset("n1", h)
    for i in range(4, 14):
        b = Batch.inserts([(i,)])
        h.append(b)
        disk.append("n1", [b], [0 if i == 12 else 100 + i])    # (12: untagged)
    d = log_dir(tmp_path / "w1", "t")
    h.trim(5)
    disk.trimmed("n1", h)
    assert disk.start["n1"] == 2                    # (3 trimmed, 8 kept: not yet)
    h.trim(10)
    disk.trimmed("n1", h)                           # (a rewrite: the tags kept)
    assert disk.start["n1"] == 10 and len(wal_files(d)) == 1
    disk.close()
    start, rows, writes, tags = disk_log([d], "n1", "T")
    assert start == 10 and sorted(rows[0].rows) == [(i,) for i in range(1, 11)]
    assert [b.rows for b in writes] == [[(i,)] for i in range(11, 14)]
    assert tags == [111, 113]
    monkeypatch.setattr(tuning, "DISK_LOG_TRIM", 1)
    disk = DiskLogs(tmp_path / "w1")
    disk.reset("n1", h, [112, 113])                 # (the last two writes' tags)
    h.trim(12)
    disk.trimmed("n1", h)
    assert disk.start["n1"] == 12 and len(wal_files(d)) == 1
    disk.close()
    start, _, writes, tags = disk_log([d], "n1", "T")
    assert start == 12 and [b.rows for b in writes] == [[(13,)]] and tags == [113]
    other = DiskLogs(tmp_path / "w2")               # (a replica one write behind)
    other.reset("n1", _log_of(op, 12, [(i,) for i in range(1, 13)], []))
    other.close()
    assert [b.rows for b in disk_log([log_dir(tmp_path / "w2", "t"), d], "n1", "t")[2]] == [[(13,)]]
    assert sorted(tables_on_disk(tmp_path, {"t"})[0]["t"]) == [(i,) for i in range(1, 14)]
    assert tables_on_disk(tmp_path, {"u"}) == ({}, {})    # (not a table of the catalog)


def test_a_lost_owners_and_replicas_logs_on_disk_say_which_writes_landed(tmp_path,
                                                                          monkeypatch):
    """Owner and replica lost together (``--data-dir``): the base is restored from the
    longest of their logs on disk (``_whole_log``, ``disk_log``): its table as of the
    log's start and every write after, sent to its new worker with the tags of those
    writes from their own records (an untagged one, made at the controller, taken all
    the same), the lost workers' logs kept until the recovery is done (one that fails
    part-way reads them again). So too when a live worker
    was named the next replica but its owner was lost before that one's whole log was
    answered (``log_whole`` False). A write made at the controller (``forward``) whose
    worker was lost before it answered is done, not sent again, once the restored
    base's worker has its tag (``has_landed``: ``log_landed`` there)."""
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False)], ())
    op = Base(schema)
    rt = ClusterRuntime(Graph(), writes="worker", channels="direct")
    try:
        rt.graph.nodes["b1"] = types.SimpleNamespace(op=Base(schema), children=[],
                                                     kind="base")
        owner, replica = DiskLogs(tmp_path / "w1"), DiskLogs(tmp_path / "w2")
        for disk in (owner, replica):
            disk.reset("b1", _log_of(op, 1, [(0,)], []))
        writes = [(Batch.inserts([(i,)]), 0 if i == 3 else 100 + i) for i in range(1, 6)]
        for i, (b, tag) in enumerate(writes):
            replica.append("b1", [b], [tag])
            if i < 3:                                       # (the owner: two behind)
                owner.append("b1", [b], [tag])
        owner.close()
        replica.close()
        dirs = [log_dir(tmp_path / w, "t") for w in ("w1", "w2")]
        rt.lost_logs["b1"], rt.lost_owner["b1"] = list(dirs), "w1"
        asked = []

        class _Live:
            alive, read = True, ("h", 1)

            def __init__(self, name):
                self.name, self.got = name, []

            def put(self, frame):
                self.got.append(frame)

            def silent(self, now):
                return 0.0
        rt.workers = {"w3": _Live("w3"), "w4": _Live("w4")}
        rt.placement["b1"], rt.replicas["b1"] = "w4", "w3"

        def ask(w, what, *args):
            asked.append((w.name, what, *args))
            return False if what == "log_whole" else 5
        monkeypatch.setattr(rt, "ask", ask)
        assert rt.log_left("b1")                        # (the disks have it)
        assert rt.restore_logged_base(rt.workers["w4"], "b1", {}, 0) == 5
        assert asked[:2] == [("w3", "log_whole", "b1", "w1")] * 2 and len(asked) == 3
        name, what, nid, part, seen, low, start, tags = asked[2]
        assert (name, what, nid, seen, low, start) == ("w4", "restore_base", "b1", {}, 0, 1)
        assert [wire_rows(b) for b in part[0]] == [[(i,)] for i in range(1, 6)]
        assert [wire_rows(b) for b in part[1]] == [[(0,)]]
        assert tags == [101, 102, 104, 105]
        assert all(d.exists() for d in dirs)        # (kept until the recovery is done)
        assert rt.workers["w4"].got == [["replica", "b1", None]]   # (named at once)
        # a write made here (SQL) and forwarded, its worker lost before it answered:
        # sent again only if not in the restored base's log (tagged 105, it is: done)
        rt.up.add("b1")
        rt.replicas["b1"] = "w3"                        # (its replica, alive)
        monkeypatch.setattr(controller.secrets, "randbits", lambda bits: 105)
        sent = []

        def lost(w, what, *args):
            sent.append(what)
            raise WorkerLost("w4 was lost")
        landed = []
        monkeypatch.setattr(rt, "request", lost)
        monkeypatch.setattr(rt, "ask", lambda w, what, nid, tag: landed.append(
            (w.name, what, tag)) or (w.name == "w4" and len(landed) > 1))
        monkeypatch.setattr(rt, "base_down", lambda nid: None)
        rt.forward("b1", writes[4][0])
        assert sent == ["cwrite"]
        assert landed == [("w3", "log_landed", 105), ("w4", "log_landed", 105)]
    finally:
        rt.closed = True


def wire_rows(encoded) -> list:
    from noria_py.runtime.cluster.wire import decode_batch
    return decode_batch(encoded).rows


def _wal(d):
    (path,) = d.glob("wal-*.log")
    return path


def test_a_torn_last_record_on_disk_is_cut_and_reported_and_damage_is_refused(
        tmp_path, caplog):
    """A lost worker's log whose last record is cut short (a crash mid-append: that
    write was never acknowledged) is read up to it, the tail cut and reported; a
    byte changed in an earlier record is damage, not a crash: that log is refused
    (logged), the other worker's is read, and with no other the table's restart is
    refused (``CorruptionError`` naming the file)."""
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False)], ())
    op = Base(schema)
    for w in ("w1", "w2"):
        disk = DiskLogs(tmp_path / w)
        h = _log_of(op, 0, [], [])
        disk.reset("n1", h)
        for i in range(5):
            disk.append("n1", [Batch.inserts([(i, )])])
        disk.close()
    d1, d2 = (log_dir(tmp_path / w, "t") for w in ("w1", "w2"))
    path = _wal(d1)
    size = path.stat().st_size
    os.truncate(path, size - 3)                     # (the last record, torn)
    with caplog.at_level("WARNING"):
        _, _, tail, _ = disk_log([d1], "n1", "t")
    assert [b.rows for b in tail] == [[(i,)] for i in range(4)]
    assert "torn tail" in caplog.text
    path = _wal(d2)
    buf = bytearray(path.read_bytes())
    buf[LOG_HEADER_SIZE + RECORD_HEADER.size + 7] ^= 0x01    # (the first row: 0 to 1)
    path.write_bytes(bytes(buf))
    caplog.clear()
    with caplog.at_level("ERROR"):
        assert disk_log([d2], "n1", "t") is None
        assert "refused" in caplog.text
        assert [b.rows for b in disk_log([d2, d1], "n1", "t")[2]] == [[(i,)] for i in range(4)]
        assert sorted(tables_on_disk(tmp_path, {"t"})[0]["t"]) == [(i,) for i in range(4)]
    shutil.rmtree(d1)
    with pytest.raises(CorruptionError, match="damaged at byte"):
        tables_on_disk(tmp_path, {"t"})


@pytest.mark.slow
def test_owner_and_replica_lost_together_or_the_controller_restarted_lose_nothing(
        tmp_path, monkeypatch):
    """``--data-dir``: with the controller stopped (SIGSTOP: it is sent nothing of
    them), writes are acknowledged at the base's worker, then the base's worker and
    its log replica are SIGKILLed together, the owner's log on disk torn in its last
    record: the controller takes the writes from the two logs on disk (the torn tail
    cut and reported), each once. Then writes it was not sent either, and the
    controller SIGKILLed and started again on the directory: every table as the
    workers' logs had it, the views rebuilt from them. The restored base's writes
    reach its spare in parts of two rows."""
    d = str(tmp_path / "data")
    log = str(tmp_path / "serve.log")
    # (both losses at once; the lost base's history in parts)
    monkeypatch.setenv("NORIA_TUNING", "RECOVERY_GATHER=0.3,BASE_PART_ROWS=2")
    with Cluster(workers=2, shards=1, log=log,
                 extra=(*WORKER, "--data-dir", d, "--heartbeat-timeout", "5")) as c:
        db = _votes(c)
        t = db.table("vote")
        t.insert([(1, 0)])
        db.wait()
        base = next(n for n in db.graph() if n["kind"] == "base")
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            for n in range(1, 6):           # acknowledged: on both workers' disks
                t.insert([(1, n)])
            os.kill(base["pid"], signal.SIGKILL)
            os.kill(base["replica_pid"], signal.SIGKILL)
            time.sleep(0.2)
            wal = next((tmp_path / "data" / "workers").glob("*/vote/wal-*.log"))
            os.truncate(wal, wal.stat().st_size - 3)
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        db.wait()
        assert db.view("votes").lookup(1) == [(1, 6)]          # each once
        with open(log) as f:
            text = f.read()
        assert "from the log on disk of its lost worker(s)" in text and "torn tail" in text
        for n in range(6, 10):              # (not sent to the controller: in the logs)
            t.insert([(1, n), (2, n)])
        c.kill()
        c.restart()
        db.wait()
        assert db.view("votes").lookup(1) == [(1, 10)] and db.view("votes").lookup(2) == [(2, 4)]
        t.insert([(2, 10)])                 # (and the writes go on)
        db.wait()
        assert db.view("votes").lookup(2) == [(2, 5)]
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:CI_SEEDS])
def test_two_workers_sigkilled_mid_load_match_duckdb_with_logs_on_disk(seed, monkeypatch,
                                                                        tmp_path):
    """``--data-dir``: two of three workers SIGKILLed together at a random point of a
    random load, often a base's owner and its log replica: the writes the controller
    was not sent come from their logs on disk."""
    _differential_with_kill(seed, monkeypatch, victims=2, channels="direct",
                            extra=(*WORKER, "--data-dir", str(tmp_path / "data")))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[CI_SEEDS:8])
def test_two_workers_sigkilled_mid_load_match_duckdb_with_logs_on_disk_soak(
        seed, monkeypatch, tmp_path):
    _differential_with_kill(seed, monkeypatch, victims=2, channels="direct",
                            extra=(*WORKER, "--data-dir", str(tmp_path / "data")))


def _owner_and_replica_killed_with_writes_in_flight(seed: int, tmp_path, monkeypatch) -> None:
    """``--data-dir``: clients insert batches of votes at the bases' workers while one
    base shard's owner and its log replica are SIGKILLed together (a random moment, one
    then the other a few milliseconds apart, so a group the owner sent is often on the
    replica's disk, and the owner's, but never acknowledged). The controller takes the
    writes it was not sent from their logs on disk, with their tags; a client whose
    write was in flight asks whether it landed (``write_landed``) and sends it again
    only if not. Then the table and the view hold every acknowledged write once and no
    write twice, as DuckDB computes them from the acknowledged writes. The lost base's
    table and writes reach its new worker in parts of at most 64 rows."""
    rng = random.Random(seed)
    # (both losses at once; the lost base's history in parts)
    monkeypatch.setenv("NORIA_TUNING", "RECOVERY_GATHER=0.3,BASE_PART_ROWS=64")
    shards = rng.choice([1, 2])
    with Cluster(workers=3, shards=shards, log=str(tmp_path / "serve.log"),
                 extra=(*WORKER, "--data-dir", str(tmp_path / "data"))) as c:
        db = _votes(c)
        bases = [n for n in db.graph() if n["kind"] == "base"]
        victim = rng.choice(bases)
        assert victim["replica_pid"] not in (None, victim["pid"])
        pids = [victim["pid"], victim["replica_pid"]]
        rng.shuffle(pids)
        acked: list[list[tuple[int, int]]] = [[], []]
        errors: list[BaseException] = []
        stop = threading.Event()

        def writer(i: int, wrng: random.Random) -> None:
            try:
                with noria_py.connect(c.url) as w:
                    t, n = w.table("vote"), 0
                    while not stop.is_set():
                        rows = [(wrng.randrange(8), i + 2 * (n + j))
                                for j in range(wrng.randint(1, 40))]
                        t.insert(rows)
                        acked[i].extend(rows)
                        n += len(rows)
            except BaseException as e:
                errors.append(e)
        threads = [threading.Thread(target=writer, args=(i, random.Random(rng.random())),
                                    daemon=True) for i in range(2)]
        for th in threads:
            th.start()
        time.sleep(rng.uniform(0.3, 0.8))
        os.kill(pids[0], signal.SIGKILL)
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(pids[1], signal.SIGKILL)
        time.sleep(rng.uniform(0.5, 1.0))
        stop.set()
        for th in threads:
            th.join(60)
        assert not errors and not any(th.is_alive() for th in threads), errors
        oracle = Oracle(["CREATE TABLE vote (article_id INT, user_id INT)"])
        oracle.load({"vote": acked[0] + acked[1]})
        db.wait()
        got = normalize(db.execute("SELECT article_id, user_id FROM vote").fetchall())
        want = oracle.query("SELECT article_id, user_id FROM vote")
        counts = oracle.query("SELECT article_id, COUNT(*) FROM vote GROUP BY article_id")
        view = normalize(r for a in range(8) for r in db.view("votes").lookup(a))
        assert got == want and view == counts, (
            "twice", got - want, "lost", want - got, "view", view, "want", counts, seed)
        assert db.recoveries()
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:12])
def test_owner_and_replica_killed_with_writes_in_flight_soak(seed, tmp_path, monkeypatch):
    """(A real cluster of three workers, killed and recovered: 20-40 s a seed here, so
    slow; the default suite has the controller's side in process,
    ``test_a_lost_owners_and_replicas_logs_on_disk_say_which_writes_landed``.)"""
    _owner_and_replica_killed_with_writes_in_flight(seed, tmp_path, monkeypatch)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _in_process(data_dir: str | None = None, partial: bool = False,
                shards: int = 1) -> Iterator[noria_py.Database]:
    """A ``--writes worker`` cluster in this process (the controller and three workers
    as threads, so the test can hold their calls): its client. Its heartbeat timeout
    is 10 s, not 1: every thread here shares one interpreter lock with the test's own
    work (DuckDB, the checks), and on a loaded machine a worker thread held silent
    past 1 s was declared lost while alive (both at once: the writes not yet copied to
    the controller lost with them, as for two workers really lost without a data
    directory). No test here loses a worker by its silence."""
    from noria_py.runtime.cluster.worker import serve_worker
    port, made = _free_port(), []
    starting = threading.Thread(target=lambda: made.append(Server(
        port=port, workers=2, shards=shards, token="tok", spawn=False, writes="worker",
        data_dir=data_dir, partial=partial, heartbeat_timeout=10.0)), daemon=True)
    starting.start()
    time.sleep(0.3)
    workers = [threading.Thread(target=serve_worker, args=("127.0.0.1", port, "tok"),
                                daemon=True) for _ in range(3)]
    for w in workers:
        w.start()
    starting.join(60)
    (server,) = made
    db = noria_py.connect(f"noria://127.0.0.1:{port}", token="tok")
    try:
        yield db
    finally:
        db.close()
        server.close()
        for w in workers:
            w.join(10)


def _tracked(monkeypatch, cls: type) -> list:
    """The instances of ``cls`` made from now on (the workers or the server of
    ``_in_process``), each listed as it is made."""
    init, made = cls.__init__, []

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)
    monkeypatch.setattr(cls, "__init__", tracked)
    return made


def _tracked_workers(monkeypatch) -> list:
    """The workers of ``_in_process``, each listed as it is made."""
    from noria_py.runtime.cluster import worker as worker_mod
    return _tracked(monkeypatch, worker_mod.Worker)


def _held_appends(monkeypatch) -> threading.Event:
    """A gate, open: while it is shut, a replica's append of writes waits for it."""
    gate, append = threading.Event(), ReplicaLogs.append
    gate.set()

    def held_append(self, nid, batches, tags):
        if batches:
            gate.wait(30)
        append(self, nid, batches, tags)
    monkeypatch.setattr(ReplicaLogs, "append", held_append)
    return gate


def _table_data(roots: list) -> list[str]:
    """What of a table's data is reachable from ``roots`` (the controller's runtime and
    database, in this process): each write history, and each batch holding a row,
    by the path to it. Followed: containers and this package's objects (their
    ``__dict__`` and ``__slots__``), not sockets, threads or another module's."""
    from noria_py.runtime.cluster.controller import WorkerHandle
    found, seen = [], set()
    stack = [(r, type(r).__name__) for r in roots]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, WorkerHandle)):
            continue
        seen.add(id(obj))
        if isinstance(obj, WriteHistory) or isinstance(obj, Batch) and len(obj):
            found.append(path)
            continue
        if isinstance(obj, dict):
            stack.extend((v, f"{path}[{k!r}]") for k, v in obj.items())
        elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
            stack.extend((v, f"{path}[]") for v in obj)
        elif type(obj).__module__.startswith(("noria_py", "sql_frontend")):
            names = list(getattr(obj, "__dict__", {}))
            names += [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
            stack.extend((getattr(obj, n), f"{path}.{n}") for n in names if hasattr(obj, n))
    return found


def test_the_controller_holds_no_history_or_rows_of_a_table_written_at_its_worker(
        monkeypatch):
    """With writes at the workers, the controller keeps no copy of a table: after
    writes at the base's worker, the loss of its log replica's worker and a new
    replica filled with the whole log while the writes go on, neither its runtime
    nor its database holds a write history or a batch of rows (``durable`` has no
    entry for the base, whose log is its worker's and its replica's alone), and the
    table and views are whole. (Before, the controller kept each base's history,
    fed by the owner's ``hcopy`` groups, and ``hist`` during a fill.)"""
    servers = _tracked(monkeypatch, Server)
    workers = _tracked_workers(monkeypatch)
    with _in_process() as db:
        (server,) = servers
        rt = server.runtime
        db.execute("CREATE TABLE vote (a INT, u INT)")
        db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote WHERE a = ? GROUP BY a")
        t = db.table("vote")
        for i in range(40):
            t.insert([(i % 3, i), (3, i)])
        db.execute("INSERT INTO vote VALUES (4, 1)")        # (forwarded: ``cwrite``)
        base = next(n for n in db.graph() if n["kind"] == "base")
        replica = base["replica"]
        assert replica not in (None, base["worker"])
        with rt.lock:
            handle = rt.workers[replica]
        rt._lose(handle)                    # (its worker declared lost: it ends)
        for i in range(40, 80):
            t.insert([(i % 3, i), (3, i)])
        deadline = time.monotonic() + 30
        owner = next(w for w in workers if w.name == base["worker"])
        while time.monotonic() < deadline and (
                owner.replica_of.get(base["id"]) in (None, "", replica)
                or base["id"] in owner.filling):
            time.sleep(0.05)
        assert owner.replica_of[base["id"]] not in (None, "", replica)   # (filled)
        t.insert([(0, 80)])
        db.wait()
        assert db.view("c").lookup(3) == [(3, 80)] and len(t) == 162
        assert rt.durable == {}
        with server.lock:
            assert _table_data([rt, server.db]) == []


def test_a_write_is_acknowledged_only_once_both_logs_on_disk_hold_it(tmp_path, monkeypatch):
    """``--data-dir``, the workers in this process: with the base's owner's append to
    its log on disk held, and then its replica's, a write is not acknowledged; once
    the append is let go it is."""
    held = {"name": "", "gate": threading.Event()}
    append = DiskLogs.append

    def held_append(self, nid, batches, tags=()):
        if self.root.name == held["name"]:
            held["gate"].wait(30)
        append(self, nid, batches, tags)
    monkeypatch.setattr(DiskLogs, "append", held_append)
    try:
        with _in_process(str(tmp_path / "data")) as db:
            db.execute("CREATE TABLE vote (a INT, u INT)")
            t = db.table("vote")
            t.insert([(1, 0)])
            base = next(n for n in db.graph() if n["kind"] == "base")
            assert base["replica"] not in (None, base["worker"])
            for name in (base["worker"], base["replica"]):
                held["name"], held["gate"] = name, threading.Event()
                done = threading.Event()
                writer = threading.Thread(target=lambda: (t.insert([(1, 1)]), done.set()))
                writer.start()
                assert not done.wait(1.0), name     # (not on that disk: not acknowledged)
                held["gate"].set()
                writer.join(30)
                assert done.is_set()
            assert len(t) == 3
    finally:
        held["gate"].set()


def _one_base(db, workers: list) -> tuple:
    """A table ``vote`` with one row, written and propagated: its table handle, its base's
    id, and the workers (of ``_tracked_workers``) of its owner and its log replica."""
    db.execute("CREATE TABLE vote (a INT, u INT)")
    t = db.table("vote")
    t.insert([(1, 0)])
    base = next(n for n in db.graph() if n["kind"] == "base")
    owner = next(w for w in workers if w.name == base["worker"])
    replica = next(w for w in workers if w.name == base["replica"])
    db.wait()
    return t, base["id"], owner, replica


def _filled(owner, bid: str) -> bool:
    """Whether the owner's fill of the base's new replica ends within 10 s."""
    for _ in range(200):
        if bid not in owner.filling:
            return True
        time.sleep(0.05)
    return False


def test_a_write_taken_while_a_new_replica_is_filled_is_acknowledged_once_kept_there(
        monkeypatch):
    """A base named a new log replica (``set_replica``): its whole log is sent in the
    background (held here until the gate opens), and each write taken meanwhile goes
    to the replica at once, which keeps it aside until the whole log is there
    (``ReplicaLogs.during_fill``) and answers it: it is acknowledged with the fill
    still held (two copies: the owner's log and the replica's), and once the fill is
    let go the replica's log holds every write, the whole log's first, in order; no
    write of the base reaches the controller. (Before, such writes waited for the
    whole log: at 1e7 votes, 0.5-0.6 s after a worker's loss.)"""
    from noria_py.runtime.cluster import worker as worker_mod
    from noria_py.runtime.cluster.channels import CONTROLLER
    workers = _tracked_workers(monkeypatch)
    part, fill_gate = worker_mod.Worker.whole_log_part, threading.Event()
    fill_gate.set()

    def held_part(self, nid, name, fill):
        if fill_gate.is_set():
            part(self, nid, name, fill)
        else:                   # (its turn put back until the gate opens)
            threading.Timer(0.05, self.inbox.put_fast,
                            args=((worker_mod.SELF, ["wlog", nid, name, fill]),)).start()

    def writing(t, row) -> threading.Event:
        done = threading.Event()
        threading.Thread(target=lambda: (t.insert([row]), done.set()), daemon=True).start()
        return done
    monkeypatch.setattr(worker_mod.Worker, "whole_log_part", held_part)
    with _in_process() as db:
        try:
            t, bid, owner, replica = _one_base(db, workers)
            fill_gate.clear()
            owner.inbox.ctrl_in += 1            # (as the controller's reader counts it)
            owner.inbox.put((CONTROLLER, ["replica", bid, replica.name]))
            first = writing(t, (1, 1))
            assert first.wait(10)
            second = writing(t, (1, 2))
            assert second.wait(10)
            assert bid in owner.filling                             # (the fill is held)
            # (its log of the earlier fill forgotten: it misses the writes answered)
            assert bid not in replica.replica_logs.logs
            aside = replica.replica_logs.aside[bid][2]
            assert [r for batches, _ in aside for b in batches for r in b.rows] == [
                (1, 1), (1, 2)]
        finally:
            fill_gate.set()
        assert _filled(owner, bid) and owner.replica_of[bid] == replica.name
        assert bid not in replica.replica_logs.aside
        log = replica.replica_logs.logs[bid]
        assert sorted(log.state_at(len(log)).stored_rows()) == [(1, i) for i in range(3)]
        assert [b.rows for b in log.batches][-2:] == [[(1, 1)], [(1, 2)]]
        db.wait()
        assert db.execute("SELECT COUNT(*) FROM vote").rows == [(3,)]


def test_an_answer_to_an_earlier_fill_acknowledges_nothing_of_a_later_one():
    """A base's replica named again (the owner fills it anew: a restarted controller's
    reopened rows, ``Worker.write``) while a group is on its way to it: the replica's
    answers name the fill their log was made on (``["rdur", base, n, fill]``, a fifth
    field for a group kept aside during a fill), so its answer to the earlier fill's
    group acknowledges nothing; the group, sent again with the later fill's number,
    is acknowledged by that fill's answer to it, before the whole log's answer, which
    ends the fill."""
    from tests.runtime.cluster.test_partial import _worker_with
    w, ctl, _ = _worker_with(["CREATE TABLE t (a INT, b INT)"], writes="worker")
    try:
        base = next(n for n, node in w.graph.nodes.items() if node.kind == "base")
        w.links.broken.add("r")             # (the replica: answered here, never dialed)
        w.set_replica(base, "r")
        first = w.filling[base].fill
        w.whole_log_part(base, "r", first)  # (the first fill's whole log: one part)
        w.replica_frame(["rdur", base, 0, first], "r")
        assert base not in w.filling
        answers: list = []
        w.accept(base, "insert", [[(1, 1)]], answers.append)
        w.set_replica(base, "r")            # (the group sent again, with the next fill)
        second = w.filling[base].fill
        w.whole_log_part(base, "r", second)
        w.replica_frame(["rdur", base, 1, first], "r")      # (the group, on the first)
        w.replica_frame(["rdur", base, 1, first, 1], "r")
        assert answers == [] and base in w.filling
        w.replica_frame(["rdur", base, 1, second, 1], "r")  # (kept aside in the second)
        assert answers == [[]] and base in w.filling
        w.replica_frame(["rdur", base, 0, second], "r")     # (its whole log)
        assert base not in w.filling
    finally:
        ctl.close()


def _replica_filled(w, base: str) -> int:
    """Name the log replica "r" of ``base`` at worker ``w`` (answered here, never
    dialed) and answer its whole log: the next write goes to it, held until its
    ``rdur``. Returns the fill's number."""
    w.links.broken.add("r")
    w.set_replica(base, "r")
    fill = w.filling[base].fill
    w.whole_log_part(base, "r", fill)
    w.replica_frame(["rdur", base, 0, fill], "r")
    return fill


def test_a_write_its_worker_never_took_is_moved_and_one_it_took_is_in_doubt():
    """The message thread ends (its controller lost: a SIGKILL or Ray's kill under
    way) with one write taken, on its way to the log replica, and another still in the
    inbox: the first may or may not be in the log (``IN_DOUBT``: the client asks the
    controller), the second was never applied, and its client is told the base is not
    here (``None``: "moved", it asks where the base is now and sends it there). Seen in
    CI: the write after ``db.fail`` under Ray, answered in doubt, raised ConnectError."""
    from tests.runtime.cluster.test_partial import _worker_with
    w, ctl, _ = _worker_with(["CREATE TABLE t (a INT, b INT)"], writes="worker")
    try:
        base = next(n for n, node in w.graph.nodes.items() if node.kind == "base")
        _replica_filled(w, base)
        taken: list = []
        w.accept(base, "insert", [[(1, 1)]], taken.append)     # (sent, not answered)
        untaken: list = []
        said: list = []
        client = threading.Thread(target=lambda: said.append(
            w.client_write(base, "insert", [[(2, 2)]], 7, untaken.append)))
        client.start()
        deadline = time.monotonic() + 10
        while w.inbox.fast.empty() and w.inbox.q.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        w.end_writes()
        client.join(10)
        assert taken == [IN_DOUBT]
        assert said == [None] and untaken == []
        assert w.client_write(base, "insert", [[(3, 3)]], 8, untaken.append) is None
    finally:
        ctl.close()


@pytest.mark.parametrize("landed", [False, True])
def test_a_write_answered_in_doubt_is_asked_of_the_controller_not_raised(
        landed, monkeypatch):
    """A write its worker answered ``doubt`` is asked of the controller
    (``write_landed``), the same controller too (its worker declared lost while it
    lived on: fenced first, so the write is in the log its base is restored from, or
    nowhere): done if it landed, else sent again where the base is now; never a
    ``ConnectError`` while the controller can tell."""
    from noria_py.remote import _Lost
    from tests.runtime.cluster.test_restart import _FakeServer
    server = _FakeServer()
    db = RemoteDatabase("127.0.0.1", server.port, "tok")
    try:
        places = iter([["n1", ["127.0.0.1", 1]], ["n1", ["127.0.0.1", 2]]])
        sent: list = []
        asked: list = []

        def call(method: str, *args):
            if method == "write_placement":
                return next(places)
            assert method == "write_landed"
            asked.append(args[:1] + args[2:])
            return landed

        def write_at(where, method, args, tag):
            sent.append(where[2])
            return _Lost(IN_DOUBT[1]) if len(sent) == 1 else None
        monkeypatch.setattr(db, "_call", call)
        monkeypatch.setattr(db, "_write_at", write_at)
        db._write("t", "insert", [[(1,)]])
        assert asked == [("t", ["127.0.0.1", 1], "n1")]
        assert sent == ([["127.0.0.1", 1]] if landed else
                        [["127.0.0.1", 1], ["127.0.0.1", 2]])
    finally:
        db.close()
        server.stop()


def test_a_bases_time_for_recovery_leaves_out_the_writes_whose_output_waits_for_its_log():
    """A write applied at its base whose output waits for the log replica (not sent
    to any child yet) is not in the base's time and clock as recovery reads them
    (``info``), as it is not in its payload log (``payload_after``): a child restored
    meanwhile resumes at the base's last write sent and takes the held one when it
    comes. (Before, ``info`` counted it: the child resumed after it, took one write
    fewer from the log and dropped the held one as a duplicate when it came, a COUNT
    5 rows short in ``test_two_workers_killed_at_once[19]``.)"""
    from tests.runtime.cluster.test_partial import _worker_with
    w, ctl, _ = _worker_with(["CREATE TABLE t (a INT, b INT)",
                              "CREATE VIEW n AS SELECT COUNT(*) AS c FROM t"],
                             writes="worker", clocks=True)
    try:
        base = next(n for n, node in w.graph.nodes.items() if node.kind == "base")
        child = w.graph[base].children[0]
        fill = _replica_filled(w, base)
        answers: list = []
        w.accept(base, "insert", [[(1, 1)]], answers.append)
        w.replica_frame(["rdur", base, 1, fill], "r")       # (durable, passed on)
        w.accept(base, "insert", [[(2, 2)]], answers.append)  # (applied, held)
        assert answers == [[]] and w.domains[base].time == 2 and len(w.waiting(base)) == 1
        _, t, _, clock, _, _ = w.req_info(base)
        msgs, now = w.req_payload_after(base, child, 0)
        assert t == now == len(msgs) == 1
        assert list(wire.decode_array(clock)) == [1]
    finally:
        ctl.close()


def _log_rows(h: WriteHistory) -> tuple[int, list, list]:
    """A log as (its start, its table's rows, each write's rows in order)."""
    return h.start, sorted(h.folded.all_rows()), [b.rows for b in h.batches]


def test_a_whole_log_in_parts_is_the_owners_and_a_missing_or_swapped_part_is_refused():
    """``log_parts`` cuts a whole log into parts of at most ``rows`` rows (a table
    batch cut, a longer write a part alone); the replica's ``ReplicaLogs`` fed them
    (``part``, then ``full`` with the last) holds the owner's very log; a part
    missing, swapped or from another fill is refused, never a shorter log."""
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False),
                               ColumnInfo("b", SqlType.INT, False)], ())
    op = Base(schema)
    big = Batch.columnar([np.arange(7, dtype=np.int64), np.arange(7, dtype=np.int64)],
                         np.ones(7, dtype=np.int64))
    table = [big, Batch.inserts([(100, 0)])]
    writes = [Batch.inserts([(200 + i, i) for i in range(n)]) for n in (1, 2, 5, 1, 1)]
    owner = history_from(op, 4, table, writes)
    parts = log_parts(*owner.table()[1:], 3)
    for t, w in parts:
        assert sum(map(len, t + w)) <= 3 or (not t and len(w) == 1)
    assert [b.rows for _, w in parts for b in w] == [b.rows for b in writes]
    assert sorted(r for t, _ in parts for b in t for r in b.rows) == sorted(owner.folded.all_rows())
    assert len(parts) == 6

    def send(got: ReplicaLogs, order: list[int], fill: int) -> None:
        """The parts in ``order`` (all but the first of fill ``fill``), then the last."""
        for n, i in enumerate(order):
            got.part("b", "w1", fill if n else 1, i, *parts[i])
        got.full(op, "b", 4, *parts[-1], src="w1", fill=1, parts=len(parts) - 1)
    logs = ReplicaLogs()
    logs.part("b", "w1", 0, 0, [Batch.inserts([(9, 9)])], [])     # (an abandoned fill)
    send(logs, list(range(len(parts) - 1)), 1)
    assert _log_rows(logs.logs["b"]) == _log_rows(owner) and not logs.parts
    for order, fill in (([0, 1, 2, 3], 1), ([0, 1, 2, 4, 3], 1), ([0, 1, 2, 3, 4], 2)):
        with pytest.raises(RecoveryError):
            send(ReplicaLogs(), order, fill)
    logs.part("b", "w1", 2, 0, *parts[0])
    logs.lost("w1")                         # (its owner lost mid-fill: parts dropped)
    assert not logs.parts


def test_a_new_replicas_whole_log_in_parts_is_the_owners_log(monkeypatch):
    """A base named a new log replica with tiny parts (``WHOLE_LOG_PART_ROWS``, the
    workers in this process): the whole log crosses as several ``rpart`` frames, then
    ``rfull``; once the replica has answered, its log is the owner's, write by write,
    and the writes made during the fill land once; the owner never has more than
    ``PARTS_AHEAD`` parts sent and not taken; quiet, the counts of ``wait()`` balance."""
    from noria_py.runtime.cluster import worker as worker_mod
    from noria_py.runtime.cluster.channels import CONTROLLER
    workers = _tracked_workers(monkeypatch)
    part, parts, ahead = ReplicaLogs.part, [], []

    def counted(self, nid, src, fill, i, *rest):
        parts.append(i)
        # (the owner's count, read from the replica's thread: never above the bound)
        ahead.extend(f.unacked for w in workers for f in list(w.filling.values()))
        part(self, nid, src, fill, i, *rest)
    monkeypatch.setattr(tuning, "WHOLE_LOG_PART_ROWS", 3)
    monkeypatch.setattr(ReplicaLogs, "part", counted)
    with _in_process() as db:
        db.execute("CREATE TABLE vote (a INT, u INT)")
        t = db.table("vote")
        for i in range(12):
            t.insert([(i % 3, 10 * i + j) for j in range(1 + i % 5)])
        db.wait()
        base = next(n for n in db.graph() if n["kind"] == "base")
        bid = base["id"]
        owner = next(w for w in workers if w.name == base["worker"])
        replica = next(w for w in workers if w.name == base["replica"])
        parts.clear()
        owner.inbox.ctrl_in += 1                # (as the controller's reader counts it)
        owner.inbox.put((CONTROLLER, ["replica", bid, replica.name]))
        for i in range(3):
            t.insert([(7, i), (7, 100 + i)])    # (during the fill, or after it)
        db.wait()
        deadline = time.monotonic() + 10
        while bid in owner.filling and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bid not in owner.filling and owner.replica_of[bid] == replica.name
        assert len(parts) >= 4 and parts == list(range(len(parts))), parts
        assert ahead and max(ahead) <= worker_mod.PARTS_AHEAD, ahead
        deadline = time.monotonic() + 10
        while (_log_rows(replica.replica_logs.logs[bid]) != _log_rows(owner.logs[bid])
               and time.monotonic() < deadline):
            time.sleep(0.01)                    # (an ``rtrim`` may be on its way)
        assert _log_rows(replica.replica_logs.logs[bid]) == _log_rows(owner.logs[bid])
        want = sum(1 + i % 5 for i in range(12)) + 6
        assert db.execute("SELECT COUNT(*) FROM vote").rows == [(want,)]
        db.wait()
        # quiet: what each worker counted sent to another, that one counted handled
        # (``wait()``'s counts leave the log frames out on both sides)
        for a in workers:
            for b in workers:
                assert a is b or a.links.sent[b.name] == b.links.handled[a.name], (a, b)


def test_the_owner_applies_a_write_while_its_replica_logs_it_and_holds_the_output(
        monkeypatch):
    """The group goes to the log replica before the owner applies it (the replica's
    round trip overlaps the apply): with the replica's append held, the owner's base
    has taken the write (its time is past it), but no output of the base has left
    (``emit``) and the client is not answered; once the replica has it, both come.
    With the owner's apply held, the replica's log has the write. A refused write
    goes to neither: the replica's log is the owner's table. (The
    replica's message thread is held, so nothing here asks the controller, whose
    lock would wait for it.)"""
    from noria_py.runtime.cluster import worker as worker_mod
    gate = _held_appends(monkeypatch)
    workers = _tracked_workers(monkeypatch)
    emit, emitted = worker_mod.Worker.emit, []

    def tracked_emit(self, msgs):
        msgs = list(msgs)
        emitted.extend(m.src for m in msgs)
        emit(self, msgs)
    monkeypatch.setattr(worker_mod.Worker, "emit", tracked_emit)
    with _in_process() as db:
        try:
            db.execute("CREATE TABLE t (k INT PRIMARY KEY, n INT)")
            db.execute("CREATE VIEW by_k AS SELECT k, n FROM t WHERE k = ?")
            t, view = db.table("t"), db.view("by_k")
            t.insert([(1, 10)])
            base = next(n for n in db.graph() if n["kind"] == "base")
            owner = next(w for w in workers if w.name == base["worker"])
            replica = next(w for w in workers if w.name == base["replica"])
            with pytest.raises(DuplicateKeyError):
                t.insert([(1, 11)])                 # (refused: in no log)
            db.wait()
            assert view.lookup(1) == [(1, 10)]
            d = owner.domains[base["id"]]
            before, emitted[:] = d.time, []
            gate.clear()
            done = threading.Event()
            writer = threading.Thread(target=lambda: (t.insert([(2, 20)]), done.set()))
            writer.start()
            deadline = time.monotonic() + 10
            while d.time == before and time.monotonic() < deadline:
                time.sleep(0.01)
            assert d.time == before + 1             # applied while the replica logs it
            assert not done.wait(0.5)               # not in the replica: not answered
            assert base["id"] not in emitted        # and its output held
        finally:
            gate.set()
        writer.join(30)
        assert done.is_set()
        assert base["id"] in emitted
        db.wait()
        assert view.lookup(2) == [(2, 20)]
        log = replica.replica_logs.logs[base["id"]]
        assert sorted(log.state_at(len(log)).stored_rows()) == [(1, 10), (2, 20)]
        applying, write = threading.Event(), d.write

        def held_write(batch):                  # (the owner's apply held instead)
            applying.wait(30)
            return write(batch)
        monkeypatch.setattr(d, "write", held_write)
        n = len(log)
        try:
            writer = threading.Thread(target=lambda: t.insert([(3, 30)]))
            writer.start()
            deadline = time.monotonic() + 10
            while len(log) == n and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(log) == n + 1            # the replica has it before the apply ends
        finally:
            applying.set()
        writer.join(30)
        db.wait()
        assert view.lookup(3) == [(3, 30)]


def test_a_miss_upqueried_without_a_read_at_the_controller_counts_every_write_once():
    """A client's holes are upqueried without the controller reading the readers again
    (``upquery``), and with ``--writes worker`` under the lock without the table
    copies brought up to date: a miss right after acknowledged writes holds them (its
    fill at the base's worker follows them); a key held by the time its upquery runs
    (two clients missed it at once) answers from its reader, the fill not applied
    again; a key never written answers nothing."""
    from noria_py.runtime.cluster.reads import rows_found
    with _in_process(partial=True, shards=2) as db:
        db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
        db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
        db.execute("CREATE VIEW vv AS SELECT article.id, article.title, vc.votes FROM "
                   "article LEFT JOIN (SELECT article_id, COUNT(*) AS votes FROM vote "
                   "GROUP BY article_id) AS vc ON article.id = vc.article_id "
                   "WHERE article.id = ?")
        db.table("article").insert([(i, f"t{i}") for i in range(8)])
        db.table("vote").insert([(i % 8, i) for i in range(40)])
        v = db.view("vv")
        assert v.lookup(3) == [(3, "t3", 5)]            # (a miss, no wait() before)
        db.table("vote").insert([(3, 100), (5, 101), (5, 102)])
        assert v.lookup_many([5, 6, 5]) == [[(5, "t5", 7)], [(6, "t6", 5)], [(5, "t5", 7)]]
        db.wait()
        # held since: as a second client's upquery of a key the first one filled
        assert rows_found(db._call("upquery", "vv", [3, 5, 3])) == [
            [(3, "t3", 6)], [(5, "t5", 7)], [(3, "t3", 6)]]
        assert v.lookup(3) == [(3, "t3", 6)]
        assert rows_found(db._call("upquery", "vv", [7, 99])) == [[(7, "t7", 5)], []]


def test_a_write_made_durable_while_an_upquery_is_sent_is_in_its_fill_once(monkeypatch):
    """``--partial``: a write at the base's worker that becomes durable (its output
    sent, dropped at the reader's hole) after the controller took its lock for an
    upquery, and before the fill reaches the base's worker, is in the fill: the base's
    rows are computed there, in order with its writes, never from the controller's
    copy (which does not have that write yet; the upquery takes the lock without
    bringing the copies up to date). The replica's ``rlog`` is set aside (its message
    thread free: the lock's other takers ask it for copies) and handed back from
    inside the upquery."""
    from noria_py.runtime.cluster import worker as worker_mod
    from noria_py.runtime.cluster.partial import ClusterPartial
    gate, in_upquery, aside = threading.Event(), threading.Event(), []
    gate.set()
    replica_frame, grant = worker_mod.Worker.replica_frame, ClusterPartial._grant

    def held_frame(self, f, src):
        if f[0] == "rlog" and not gate.is_set():
            aside.append((self, f, src))
            return
        replica_frame(self, f, src)

    def granted(self, w, n):            # (under the controller's lock, before the fill)
        grant(self, w, n)
        if not gate.is_set():
            in_upquery.set()
            gate.set()                  # the write becomes durable, its output sent
            for worker, f, src in aside:
                worker.inbox.put((src, f))
            writer.join(30)
    monkeypatch.setattr(worker_mod.Worker, "replica_frame", held_frame)
    monkeypatch.setattr(ClusterPartial, "_grant", granted)
    with _in_process(partial=True) as db:
        try:
            db.execute("CREATE TABLE t (k INT, n INT)")
            db.execute("CREATE VIEW by_k AS SELECT k, n FROM t WHERE k = ?")
            t, view = db.table("t"), db.view("by_k")
            t.insert([(1, 10)])
            db.wait()
            gate.clear()
            writer = threading.Thread(target=lambda: t.insert([(1, 11)]))
            writer.start()
            deadline = time.monotonic() + 10
            while not aside and time.monotonic() < deadline:
                time.sleep(0.01)        # (applied at the owner, held for its replica)
            assert aside
            assert sorted(view.lookup(1)) == [(1, 10), (1, 11)]
            assert in_upquery.is_set() and not writer.is_alive()
        finally:
            gate.set()
        db.wait()
        assert sorted(view.lookup(1)) == [(1, 10), (1, 11)]


def test_a_caller_waiting_for_a_down_base_lets_the_lock_go_or_is_told_to_start_over(
        monkeypatch):
    """``ClusterRuntime.base_down`` (a write or a table read made at the controller
    while its base is down): it waits for the base to be up with the server's lock
    let go at every depth (``_released_until``: another thread, as the recovery
    would, takes the lock meanwhile; the waiter holds it again as before, at its
    depth), for at most ``BASE_DOWN_TIMEOUT`` (then ``RecoveryError`` naming the
    table); under a pause of the writes (``hold``) it raises ``BaseDown`` (its
    statement is run again after the recovery: a ``WorkerLost``), and on the
    recovery's own thread ``RecoveryError``."""
    from noria_py.runtime.cluster.errors import BaseDown
    lock = threading.RLock()
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False)], ())
    rt = ClusterRuntime(Graph(), writes="worker", channels="direct")
    try:
        rt.graph.nodes["b1"] = types.SimpleNamespace(op=Base(schema))
        rt.placement["b1"] = "w1"
        rt.control = lock
        took: list[int] = []

        def recovery() -> None:
            with lock:                  # (as ``_recover_workers`` takes it)
                took.append(threading.get_ident())
                with rt.lock:
                    rt.up.add("b1")
        with lock, lock:
            threading.Timer(0.1, recovery).start()
            rt.base_down("b1")
            assert lock._is_owned() and took        # (held again, at both depths)
        assert not lock._is_owned()
        rt.up.discard("b1")
        monkeypatch.setattr(controller, "BASE_DOWN_TIMEOUT", 0.1)
        with lock, pytest.raises(RecoveryError, match="table 't' has been down"):
            rt.base_down("b1")
        rt.hold_depth = 1
        with lock, pytest.raises(BaseDown) as lost:
            rt.base_down("b1")
        assert isinstance(lost.value, WorkerLost) and "'t'" in str(lost.value)
        rt.hold_depth, rt.recovery_thread = 0, threading.get_ident()
        with lock, pytest.raises(RecoveryError, match="during a recovery"):
            rt.base_down("b1")
    finally:
        rt.closed = True


def test_a_base_whose_log_is_gone_is_a_lost_table_with_the_nodes_over_it(monkeypatch):
    """Writes at the workers, no ``--data-dir``: a lost owner's base with no log left
    (its log replica lost too, or alive with no whole log of that owner's: a fill
    under way, another owner's log; no disk) is not restored shorter: ``log_left``
    says so, and the recovery sets it aside with every node over it
    (``_lose_tables``): one on a live worker emptied there, each one's reads and
    writes raising ``TableLostError`` (``worker_of``, ``read_addresses``, ``forward``,
    ``_at_base``), and a dropped one forgotten; a table whose live replica holds its
    lost owner's whole log is recovered as before."""
    schema = TableSchema("t", [ColumnInfo("a", SqlType.INT, False)], ())
    rt = ClusterRuntime(Graph(), writes="worker", channels="direct")

    class _W:
        def __init__(self, name: str, alive: bool) -> None:
            self.name, self.alive, self.got = name, alive, []
            self.read, self.pending = ("h", 1), {}

        def put(self, frame) -> None:
            self.got.append(frame)

        def silent(self, now: float) -> float:
            return 0.0
    try:
        rt.workers = {n: _W(n, n != "w2") for n in ("w1", "w2", "w3")}
        nodes = {"b1": ["v1"], "v1": ["r1"], "r1": [], "b2": ["r2"], "r2": []}
        for nid, children in nodes.items():
            rt.graph.nodes[nid] = types.SimpleNamespace(
                op=Base(schema), children=children, kind="base" if nid[0] == "b" else "view")
        rt.placement = {"b1": "w3", "v1": "w1", "r1": "w3", "b2": "w3", "r2": "w1"}
        rt.up = {"v1", "r2"}
        rt.replicas = {"b1": "w2", "b2": "w1"}          # (b1's: lost with the owner)
        rt.lost_owner = {"b1": "w3", "b2": "w3"}
        asked = []

        def ask(w, what, nid, owner):
            asked.append((w.name, what, nid, owner))
            return nid == "b2"                          # (b2's whole log of w3's there)
        monkeypatch.setattr(rt, "ask", ask)
        assert not rt.log_left("b1") and rt.log_left("b2")
        assert asked == [("w1", "log_whole", "b2", "w3")]
        rt.replicas["b1"] = "w1"                # (alive, without that owner's whole log)
        assert not rt.log_left("b1")
        emptied = []
        monkeypatch.setattr(rt, "_abandon", lambda n: emptied.append(n))
        left = rt._lose_tables(["b1", "b2", "r1"])
        assert left == ["b2"] and emptied == ["v1"]
        assert set(rt.lost_tables) == {"b1", "v1", "r1"}
        for call in (lambda: rt.worker_of("v1"), lambda: rt.read_addresses(["r2", "r1"]),
                     lambda: rt.forward("b1", Batch.inserts([(2,)])),
                     lambda: rt.table("b1")):
            with pytest.raises(noria_py.TableLostError, match="table 't' was lost"):
                call()
        assert rt.read_addresses(["r2"]) == [("h", 1)]
        rt.remove("r1")
        assert set(rt.lost_tables) == {"b1", "v1"}
    finally:
        rt.closed = True


class _Sent:
    """A worker as the controller's replica and recovery code see it: what it is sent."""

    def __init__(self, name: str) -> None:
        self.name, self.alive, self.got = name, True, []

    def put(self, frame) -> None:
        self.got.append(frame)


def test_a_replica_is_named_at_once_even_while_a_recovery_is_under_way():
    """``choose_replicas`` called while a recovery is under way (a worker lost, joining,
    a catalog change) names a base whose replica was lost its next one at once: its
    writes' acknowledgements wait for a replica, and a SQL statement's write waiting
    for one holds the server's lock that the recovery needs (with the replica named
    only at the recovery's end, the two waited for each other 300 s: the soak with
    each shard's chain together, seed 1); a live replica is kept."""
    rt = ClusterRuntime.__new__(ClusterRuntime)
    owner, other = _Sent("w1"), _Sent("w2")
    rt.at_workers, rt.direct, rt.lock = True, True, threading.RLock()
    rt.to_holders, rt.closed = False, False
    rt.replicas, rt.lost_tables = {"b": None}, {}
    rt.workers, rt.placement = {"w1": owner, "w2": other}, {"b": "w1"}
    rt.active, rt.spares = [owner, other], []
    rt.graph = Graph()
    rt.graph.nodes["b"] = types.SimpleNamespace(children=[], kind="base")
    rt.recovering = 1
    rt.choose_replicas(recovering=True)
    # (named now; its whole log waits for the recovery's end: ``Worker.fill_go``)
    assert rt.replicas == {"b": "w2"} and owner.got == [["replica", "b", "w2", 1]]
    rt.choose_replicas(recovering=True)
    assert owner.got == [["replica", "b", "w2", 1]]        # (kept while it lives)
    other.alive, rt.recovering = False, 0
    third = _Sent("w3")
    rt.workers["w3"] = third
    rt.active.append(third)
    rt.choose_replicas()                # (no recovery under way: its whole log at once)
    assert rt.replicas == {"b": "w3"} and owner.got[-1] == ["replica", "b", "w3"]


def test_a_recoverys_end_tells_every_live_worker_its_new_replicas_may_be_filled(
        monkeypatch):
    """The recovery thread (``_recoverer``), once no recovery is left under way, sends
    every live worker ``fill_go``: the whole logs of the log replicas named during the
    recovery start then (``Worker.fill_go``), not before the recovery has run."""
    rt = ClusterRuntime.__new__(ClusterRuntime)
    owner, spare, lost = _Sent("w1"), _Sent("w3"), _Sent("w2")
    lost.alive = False
    rt.lock = threading.RLock()
    rt.changed = threading.Condition(rt.lock)
    rt.at_workers, rt.closed = True, False
    rt.active, rt.spares = [owner, lost], [spare]
    rt.recovering = 1
    rt.lost = queue.Queue()
    during: list = []
    rt._recover_workers = lambda losses, nodes: during.append(   # type: ignore[method-assign]
        ([w.name for w in losses], nodes, owner.got + spare.got))
    monkeypatch.setattr(tuning, "RECOVERY_GATHER", 0)
    rt.lost.put(([lost], ["n"], 1))
    threading.Thread(target=rt._recoverer, daemon=True).start()
    for _ in range(200):
        if owner.got and spare.got:
            break
        time.sleep(0.01)
    assert during == [(["w2"], ["n"], [])]                 # (none before it ran)
    assert owner.got == spare.got == [["fill_go"]] and lost.got == []
    assert rt.recovering == 0


def test_a_replica_named_during_a_recovery_is_filled_from_fill_go_or_at_the_latest_after_a_while(
        monkeypatch):
    """A base named a new log replica during a recovery (``["replica", base, worker,
    1]``) sends it no part of its whole log until ``fill_go`` (the controller's, at the
    recovery's end): the writes taken meanwhile are acknowledged all the same (the
    replica keeps them aside), and from ``fill_go`` on the whole log goes and the
    replica's log holds every write, in order. Without a ``fill_go`` (a controller
    lost meanwhile), the fill starts ``tuning.FILL_WAITS_AT_MOST`` after the naming."""
    from noria_py.runtime.cluster import worker as worker_mod
    from noria_py.runtime.cluster.channels import CONTROLLER
    workers = _tracked_workers(monkeypatch)
    sent: list = []
    part = worker_mod.Worker.whole_log_part

    def counted_part(self, nid, name, fill):
        sent.append((nid, name, fill))
        part(self, nid, name, fill)
    monkeypatch.setattr(worker_mod.Worker, "whole_log_part", counted_part)
    monkeypatch.setattr(tuning, "FILL_WAITS_AT_MOST", 60.0)
    with _in_process() as db:
        t, bid, owner, replica = _one_base(db, workers)
        sent.clear()

        def named(waits: bool) -> None:
            owner.inbox.ctrl_in += 1            # (as the controller's reader counts it)
            owner.inbox.put((CONTROLLER, ["replica", bid, replica.name] + ([1] if waits else [])))

        named(True)
        t.insert([(1, 1)])                      # (acknowledged: kept aside there)
        t.insert([(1, 2)])
        time.sleep(0.3)
        assert sent == [] and owner.filling[bid].waiting        # (no part sent)
        assert bid not in replica.replica_logs.logs
        assert len(replica.replica_logs.aside[bid][2]) == 2
        owner.inbox.ctrl_in += 1
        owner.inbox.put((CONTROLLER, ["fill_go"]))
        assert _filled(owner, bid) and sent
        log = replica.replica_logs.logs[bid]
        assert sorted(log.state_at(len(log)).stored_rows()) == [(1, i) for i in range(3)]
        # no ``fill_go``: the fill starts at the latest FILL_WAITS_AT_MOST after the naming
        monkeypatch.setattr(tuning, "FILL_WAITS_AT_MOST", 0.5)
        sent.clear()
        named(True)
        t.insert([(1, 3)])
        assert _filled(owner, bid) and sent
        log = replica.replica_logs.logs[bid]
        assert sorted(log.state_at(len(log)).stored_rows()) == [(1, i) for i in range(4)]
        named(False)                            # (no recovery: at once)
        assert _filled(owner, bid)


def _table_readers(db) -> list:
    """The same writes and reads of tables to either engine, by the readers of a table's
    rows (``Runtime.table``): SQL over a table, a DELETE's and an UPDATE's WHERE, a
    view made over tables that hold rows, a table's size and keys, ``delete_keys``."""
    db.execute("CREATE TABLE t (k INT PRIMARY KEY, v TEXT NOT NULL, n INT)")
    db.execute("CREATE TABLE vote (a INT, u INT)")
    t, vote = db.table("t"), db.table("vote")
    t.insert([(k, f"v{k}", k) for k in range(1, 7)])
    vote.insert([(i % 5, i) for i in range(300)])               # (kept as columns)
    vote.insert_columns([list(range(40)), list(range(40))])
    out: list = [db.execute("INSERT INTO t VALUES (7, 'g', NULL)").rowcount]
    for sql in ("DELETE FROM t WHERE n > 4", "UPDATE t SET n = n + 10 WHERE k < 3",
                "DELETE FROM vote WHERE a = 2 AND u < 100",
                "UPDATE vote SET u = 0 WHERE a = 3"):
        out.append(db.execute(sql).rowcount)
    t.delete_keys([3, (4,)])
    with pytest.raises(RowNotFoundError):
        t.delete_keys([1, 99])                  # (refused whole: 1 stays)
    with pytest.raises(noria_py.DivisionByZeroError):   # (PostgreSQL's /, as noria-py pg has it)
        db.execute("DELETE FROM t WHERE PG_DIV(10, k - 2) > 0")     # (k = 2: all refused)
    db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS c FROM vote WHERE a = ? GROUP BY a")
    # keys of other types (``Worker.req_primary_keys`` sends them in columns)
    db.execute("CREATE TABLE kk (s TEXT, f FLOAT, d DATE, PRIMARY KEY (s, f, d))")
    kk = db.table("kk")
    kk.insert([("a", float("nan"), datetime.date(2026, 1, 1)),
               ("b", -1.5, datetime.date(2026, 1, 2)), ("b", 2.0, datetime.date(2026, 1, 2))])
    db.wait()
    out += [len(t), len(vote), sorted(t.primary_keys()), vote.primary_keys(),
            sorted(kk.primary_keys(), key=repr),
            sorted(db.execute("SELECT k, v, n FROM t").fetchall()),
            sorted(db.execute("SELECT a, u FROM vote").fetchall()),
            [db.view("c").lookup(a) for a in range(8)]]
    return out


def test_a_tables_rows_size_and_keys_are_read_at_its_bases_worker(monkeypatch):
    """With ``--writes worker`` a table's rows are read where they are, at its base's
    worker (``ClusterRuntime.table``, ``table_size``): the controller's base operators
    holding no rows (nothing feeds them in this mode), a table's size, keys and rows,
    SQL over it, a DELETE's and an UPDATE's WHERE and the fill of a view made over it
    are the embedded engine's after the same writes, and its memory is measured at
    its worker (``db.memory()``)."""
    servers = _tracked(monkeypatch, Server)
    embedded = noria_py.connect()
    want = _table_readers(embedded)
    with _in_process() as db:
        assert _table_readers(db) == want
        (server,) = servers
        with server.lock:
            for name in ("t", "vote"):
                assert sorted(server.db.table(name).rows()) == sorted(
                    embedded.table(name).rows())
                assert len(server.db.graph_[server.db._tables[name].node].op) == 0
        db.execute("CREATE TABLE e (a INT, u INT)")
        mem, node = db.memory(), {n: server.db._tables[n].node for n in ("vote", "e")}
        assert mem[node["vote"]] > mem[node["e"]] + 1000    # (measured at the worker)
    assert want[:5] == [1, 2, 2, 21, 61]        # (the statements changed rows)


def test_a_tables_rows_leave_out_the_writes_whose_output_waits_for_the_log(monkeypatch):
    """A write the base's worker applied whose output waits for its log replica (not
    acknowledged, in no view yet) is in none of the table's readers until it is
    durable: its size, keys and rows, its rows by key (``Worker.req_table``,
    ``req_table_size``, ``req_rows_by_key``), an insert's rows as a delete's. (The
    replica's message thread is held meanwhile: the size and keys are read under the
    lock that asks no worker for copies, and while a delete, forwarded by the
    controller, holds the server's lock, the rows are asked without it.)"""
    gate = _held_appends(monkeypatch)
    workers = _tracked_workers(monkeypatch)
    servers = _tracked(monkeypatch, Server)
    with _in_process() as db:
        (server,) = servers
        db.execute("CREATE TABLE t (k INT PRIMARY KEY, n INT)")
        t = db.table("t")
        t.insert([(1, 10), (2, 20)])
        t.delete([(2, 20)])

        def seen(lock: bool = True) -> tuple:
            with server.lock if lock else contextlib.nullcontext():
                rows = sorted(server.db.table("t").rows())
                by_key = server.db.runtime.rows_by_key(base["id"], [(1,), (2,), (3,)])
            if not lock:
                return len(rows), by_key
            return len(t), sorted(t.primary_keys()), rows, by_key
        base = next(n for n in db.graph() if n["kind"] == "base")
        assert seen() == (1, [(1,)], [(1, 10)], [(1, 10), None, None])
        d = next(w for w in workers if w.name == base["worker"]).domains[base["id"]]
        before = d.time
        gate.clear()
        try:
            writer = threading.Thread(target=lambda: t.insert([(2, 21), (3, 30)]))
            writer.start()
            deadline = time.monotonic() + 10
            while d.time == before and time.monotonic() < deadline:
                time.sleep(0.01)
            assert d.time == before + 1 and writer.is_alive()   # applied, not answered
            assert seen() == (1, [(1,)], [(1, 10)], [(1, 10), None, None])
        finally:
            gate.set()
        writer.join(30)
        assert seen() == (3, [(1,), (2,), (3,)], [(1, 10), (2, 21), (3, 30)],
                          [(1, 10), (2, 21), (3, 30)])
        gate.clear()
        try:
            writer = threading.Thread(target=lambda: t.delete([(1, 10)]))
            writer.start()
            deadline = time.monotonic() + 10
            while d.time == before + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert d.time == before + 2 and writer.is_alive()   # applied, not answered
            assert seen(lock=False) == (3, [(1, 10), (2, 21), (3, 30)])
        finally:
            gate.set()
        writer.join(30)
        assert seen() == (2, [(2,), (3,)], [(2, 21), (3, 30)], [None, (2, 21), (3, 30)])


@pytest.mark.slow
def test_a_lineage_rebuild_fills_from_the_rows_at_the_bases_worker(monkeypatch):
    """A lineage rebuild's inputs are the bases' rows at their workers
    (``Runtime.table``), read while the rebuild pauses the writes (the controller's
    base operators hold no rows): the rebuilt view counts every write once."""
    server = Server(port=0, workers=2, shards=2, writes="worker", strategy="lineage")
    try:
        db, base, victim = _counted_votes(server)       # (the base lives on)
        db.table("vote").insert([(i % 4, i) for i in range(40)])
        db.execute("INSERT INTO vote VALUES (0, -1)")
        db.wait()
        db.fail(victim["id"])               # (SIGKILL)
        report = db.recover(victim["id"])
        assert report.strategy == "lineage", report
        db.wait()
        assert sorted(db.view("c").all()) == [(0, 11), (1, 10), (2, 10), (3, 10)]
        db.close()
    finally:
        server.stopped.set()
        server.close()



def _calls_at_once(calls: dict) -> dict:
    """Each of ``calls`` run in a thread of its own, all at once: by name, what each
    returned (or raised) and when it did (``time.monotonic``)."""
    got: dict = {}

    def call(name: str) -> None:
        try:
            got[name] = (calls[name](), time.monotonic())
        except BaseException as e:      # (the caller's asserts report it)
            got[name] = (e, 0.0)
    threads = [threading.Thread(target=call, args=(n,)) for n in calls]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return got


@pytest.mark.slow
def test_the_controllers_copy_and_history_are_not_read_for_a_recovery_or_a_down_base(
        monkeypatch):
    """With ``--writes worker``, the controller's base operators hold no rows (nothing
    feeds them in this mode) and its history (``state_at`` fails here) is read
    neither by a recovery nor by the calls made while a base is down.
    First the count's worker is SIGKILLed: the count, with no checkpoint, asks its
    base parent's output up to a time (``output_info``, ``treeclock.output_through``),
    which the base's worker answers from the base's log (``Worker.req_output_info``);
    the recovery is tree clocks', and the count goes on from a state that holds every
    write once. Then the base's worker is SIGKILLed, its recovery held back half a
    second before it takes the server's lock: a write made at the controller (a table
    handle's ``delete``: ``forward``; a SQL DELETE, under a pause of the writes:
    undone and run again) and a table read there (``len``: ``_at_base``) meanwhile
    wait for the restore, the server's lock let go, and are then the base's
    worker's."""
    monkeypatch.setattr(WriteHistory, "state_at", lambda self, t: pytest.fail(
        "the controller's history was read"))
    recover, restored, hold = ClusterRuntime._recover_workers, [], []

    def held_recovery(self, *args):
        time.sleep(0.5 if hold else 0.0)    # (before it takes the server's lock)
        recover(self, *args)
        restored.append(time.monotonic())
    monkeypatch.setattr(ClusterRuntime, "_recover_workers", held_recovery)
    server = Server(port=0, workers=2, shards=1, writes="worker", checkpoints=False)
    try:
        db, base, count = _counted_votes(server)
        assert count["kind"] != "reader" and count["pid"] != base["pid"]
        vote = db.table("vote")
        for i in range(6):
            vote.insert([(i % 3, j) for j in range(10 * i, 10 * i + 10)])
        db.execute("INSERT INTO vote VALUES (0, 99)")
        db.wait()
        db.fail(count["id"])                # (SIGKILL of its worker)
        report = db.recover(count["id"])
        assert report.strategy == "treeclock", report
        vote.insert([(a, 100) for a in range(3)])     # (each count moves on from its state)
        db.wait()
        assert sorted(db.view("c").all()) == [(0, 22), (1, 21), (2, 21)]

        base = next(n for n in db.graph() if n["kind"] == "base")
        hold.append(True)
        db.fail(base["id"])
        got = _calls_at_once({
            "delete": lambda: vote.delete([(0, 0)]),
            "sql": lambda: db.execute("DELETE FROM vote WHERE u = 1").rowcount,
            "len": lambda: len(vote)})
        assert len(restored) == 2 and all(at >= restored[1] for _, at in got.values()), got
        assert got["delete"][0] is None and got["sql"][0] == 1, got
        assert got["len"][0] in (62, 63, 64), got
        db.wait()
        assert len(vote) == 62
        assert sorted(db.view("c").all()) == [(0, 20), (1, 21), (2, 21)]
        with server.lock:
            assert len(server.db.graph_[server.db._tables["vote"].node].op) == 0
        db.close()
    finally:
        server.stopped.set()
        server.close()


@pytest.mark.slow
def test_owner_and_replica_lost_together_without_a_data_dir_is_a_lost_table():
    """``--writes worker``, no ``--data-dir``: the base of table ``a`` and its log
    replica SIGKILLed together take writes acknowledged to it with them, so the table
    is lost, never restored shorter from the controller's lagging copy: its reads and
    writes, and the reads of its view, raise ``TableLostError``, as a SQL statement over it
    does; a table whose owner or replica lived (of ``b`` and ``c``, as placed) is
    whole; once the lost table and its view are dropped they can be made again."""
    with Cluster(workers=3, shards=1, extra=WORKER) as c:
        db = noria_py.connect(c.url)
        for t in "abc":
            db.execute(f"CREATE TABLE {t} (k INT, v INT)")
            db.execute(f"CREATE VIEW n_{t} AS SELECT k, COUNT(*) AS n FROM {t} "
                       "WHERE k = ? GROUP BY k")
        for i in range(20):
            for t in "abc":
                db.table(t).insert([(i % 4, j) for j in range(5)])
        db.wait()
        bases = dict(zip("abc", sorted((n for n in db.graph() if n["kind"] == "base"),
                                       key=lambda n: int(n["id"].lstrip("n")))))
        killed = {bases["a"]["pid"], bases["a"]["replica_pid"]}
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        lost = {t for t, n in bases.items() if {n["pid"], n["replica_pid"]} <= killed}
        assert "a" in lost
        with pytest.raises(noria_py.TableLostError):
            len(db.table("a"))              # (waits for the recovery to find it lost)
        db.wait()
        for t in "abc":
            if t in lost:
                for call in (lambda: db.table(t).insert([(0, 0)]), lambda: len(db.table(t)),
                             lambda: db.view(f"n_{t}").lookup(0),
                             lambda: db.execute(f"SELECT COUNT(*) FROM {t}"),
                             lambda: db.execute(f"DELETE FROM {t} WHERE k = 1")):
                    with pytest.raises(noria_py.TableLostError, match=f"table '{t}' was lost"):
                        call()
            else:
                assert len(db.table(t)) == 100
                assert db.view(f"n_{t}").lookup(1) == [(1, 25)]
        db.execute("DROP VIEW n_a")
        db.execute("DROP TABLE a")
        db.execute("CREATE TABLE a (k INT, v INT)")
        db.execute("CREATE VIEW n_a AS SELECT k, COUNT(*) AS n FROM a WHERE k = ? GROUP BY k")
        db.table("a").insert([(1, 1), (1, 2)])
        db.wait()
        assert db.view("n_a").lookup(1) == [(1, 2)] and len(db.table("a")) == 2
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("on_disk", [True, False])
def test_the_owner_killed_while_its_new_replica_is_filled_loses_nothing_acknowledged(
        tmp_path, monkeypatch, on_disk):
    """The base's log replica SIGKILLed; once the controller names the next one (the
    worker that took over the lost nodes) and the owner is sending it the whole log
    (in parts of one row here, so it takes a while), that replica is stopped
    (SIGSTOP: it answers no part), a write is sent (it waits: not acknowledged while
    the fill is under way), and the owner is SIGKILLed. With ``--data-dir`` nothing
    acknowledged is lost: the base comes back from the lost workers' logs on disk,
    the waiting write in it once (its tag found there). Without, the table is lost
    (``TableLostError``, the waiting write too) where the replica never held the
    whole log, or whole where it did (its fill done before it was stopped: the
    replica is named at once, during the recovery), never restored shorter. (Before, the writes during the fill were
    acknowledged once the controller's history held them, and the base came back
    from that history.)"""
    monkeypatch.setenv("NORIA_TUNING", "WHOLE_LOG_PART_ROWS=1")
    extra = (*WORKER, "--data-dir", str(tmp_path / "data")) if on_disk else WORKER
    with Cluster(workers=2, shards=1, extra=extra) as c:
        db = _votes(c)
        t = db.table("vote")
        t.insert_columns([[i % 5 for i in range(20_000)], list(range(20_000))])
        for i in range(10):
            t.insert([(7, i)])
        db.wait()
        base = next(n for n in db.graph() if n["kind"] == "base")
        os.kill(base["replica_pid"], signal.SIGKILL)
        deadline, now = time.monotonic() + 60, base
        while now["replica_pid"] in (None, base["replica_pid"]) \
                and time.monotonic() < deadline:
            time.sleep(0.005)
            now = next(n for n in db.graph() if n["kind"] == "base")
        filled_by = now["replica_pid"]
        assert filled_by not in (None, base["pid"], base["replica_pid"])
        assert now["pid"] == base["pid"]
        os.kill(filled_by, signal.SIGSTOP)
        outcome: list = []

        def write() -> None:
            try:
                t.insert([(8, 1)])
                outcome.append("acknowledged")
            except noria_py.Error as e:
                outcome.append(e)
        writer = threading.Thread(target=write, daemon=True)
        try:
            writer.start()
            time.sleep(1.0)
            assert not outcome              # (waits for the fill)
            os.kill(base["pid"], signal.SIGKILL)
        finally:
            os.kill(filled_by, signal.SIGCONT)
        writer.join(120)
        assert outcome
        if on_disk or outcome == ["acknowledged"]:
            # (without a disk: the replica had the whole log before it was stopped,
            # and the base came back from it, the waiting write in it or sent again)
            assert outcome == ["acknowledged"]
            db.wait()
            assert db.view("votes").lookup(7) == [(7, 10)]
            assert db.view("votes").lookup(8) == [(8, 1)]      # once
            assert len(t) == 20_011
        else:
            assert isinstance(outcome[0], noria_py.TableLostError), outcome
            for call in (lambda: len(t), lambda: db.view("votes").lookup(7)):
                with pytest.raises(noria_py.TableLostError):
                    call()
        db.close()
