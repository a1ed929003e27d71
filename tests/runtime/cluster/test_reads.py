"""Client reads at the reader's worker (noria_py/runtime/cluster/reads.py, the client
side in noria_py/remote.py): the seqlock between the message thread and the read
threads, in process; then a real cluster against its controller path and DuckDB,
range parameters (``["range", ...]``: against DuckDB, the embedded engine's errors;
more in test_ranges.py, slow), a SIGKILLed reader's worker, a stale placement and a
wrong token."""
from __future__ import annotations

import datetime
import gc
import math
import os
import random
import signal
import socket
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import noria_py
from noria_py.batch import Batch
from noria_py.ops import Reader
from noria_py.runtime.cluster import reads as reads_module
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.launch import Cluster
from noria_py.runtime.cluster.reads import (
    PAUSE_GC_MIN,
    NotHere,
    Reads,
    ReadServer,
    collector_paused,
    pack_dense,
    pack_keys,
    rows_found,
    rows_in_order,
)
from tests.differential.helpers import Oracle, normalize
from tests.differential.test_ranges import programs, run_program

# ---------------------------------------------------------------- in process


class _Torn:
    """A reader whose state is torn while a frame is under way (odd version): what an
    unguarded read could see between a row's retraction and its replacement."""

    def __init__(self, reads: Reads) -> None:
        self.reads = reads
        self.during_read = None          # called inside each lookup (a frame starting)

    def lookup(self, key):
        if self.during_read is not None:
            self.during_read()
        hash(key)                        # (a key no reader can take: unhashable)
        return [("torn",)] if self.reads.version & 1 else [(key, "whole")]

    def lookup_many(self, keys):         # (what the worker calls: Reader's)
        return [self.lookup(k) for k in keys]

    def dense_parts(self, keys):         # (not in the dense form: rows, not columns)
        return None


def _reads_with_torn_reader() -> tuple[Reads, _Torn]:
    reads = Reads({})
    op = _Torn(reads)
    reads.domains["r"] = SimpleNamespace(alive=True, node=SimpleNamespace(kind="reader", op=op))
    return reads, op


def test_the_read_port_answers_range_reads():
    """``["range", id, [node, ...], key, [[op, value], ...]]``: the rows of every node
    named; ``moved`` for one not served here, an error for a bound that is not one or a
    reader without range parameters (the connection goes on), closed if malformed; and
    mid-frame, answered by the message thread between frames."""
    reads, _ = _reads_with_torn_reader()
    ranged = Reader((0,), 2, 2, range_column=1)
    ranged.process(0, Batch([(1, 5), (1, 7), (2, 6)], [1, 1, 1]))
    reads.domains["q"] = SimpleNamespace(alive=True, node=SimpleNamespace(kind="reader",
                                                                          op=ranged))
    server = ReadServer(reads, "127.0.0.1", 0, "tok")
    try:
        conn = _client(server.address, "tok")
        conn.send(["range", 1, ["q"], 1, [[">=", 6]]])
        assert conn.recv() == ("ok", 1, ((1, 7),))
        conn.send(["range", 2, ["q", "q"], 1, [[">", 4], ["<=", 5]]])
        assert conn.recv() == ("ok", 2, ((1, 5), (1, 5)))
        conn.send(["range", 3, ["q", "n9"], 1, []])
        assert conn.recv() == ("moved", 3, "node n9 is not served by this worker now")
        conn.send(["range", 4, ["q"], 1, [["!=", 5]]])
        assert conn.recv()[:3] == ("error", 4, "ProtocolError")
        conn.send(["range", 5, ["r"], 1, [[">", 5]]])     # (no range parameters)
        assert conn.recv()[:3] == ("error", 5, "Error")
        reads.version = 1                       # a frame under way: queued, then
        t = threading.Thread(target=reads_between_frames, args=(reads,))
        t.start()
        conn.send(["range", 6, ["q"], 2, [["<", 7]]])
        assert conn.recv() == ("ok", 6, ((2, 6),))
        t.join(10)
        conn.send(["range", "x", ["q"], 1, []])  # malformed: closed
        with pytest.raises(wire.ConnectionClosed):
            conn.recv()
        conn.close()
    finally:
        server.close()


def test_a_range_index_built_across_a_frame_is_built_again():
    """A frame that begins and ends while a read thread builds a reader's range index
    (its batch finding no index to go into): the read is made again, and neither it
    nor a later read misses the batch's rows (``Reader.range_lookup``'s ``unchanged``,
    the seqlock's "no frame began")."""
    reads = Reads({})
    ranged = Reader((), 2, 2, range_column=1)
    ranged.process(0, Batch([(1, 5), (2, 7)], [1, 1]))
    reads.domains["q"] = SimpleNamespace(alive=True, node=SimpleNamespace(kind="reader",
                                                                          op=ranged))
    taken = ranged.state.rows

    def rows_then_a_frame():
        ranged.state.rows = taken           # (once)
        out = taken()
        reads.version += 1                  # the message thread's frame, meanwhile
        ranged.process(0, Batch([(3, 6)], [1]))
        reads.version += 1
        return out
    ranged.state.rows = rows_then_a_frame
    assert sorted(reads.answer_range(["q"], (), [[">", 0]])) == [(1, 5), (2, 7), (3, 6)]
    assert sorted(reads.answer_range(["q"], (), [[">=", 6]])) == [(2, 7), (3, 6)]


def reads_between_frames(reads: Reads) -> None:
    """The message thread ending its frame once a read is queued, then serving it."""
    deadline = time.monotonic() + 10
    while not reads.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    reads.version = 2
    reads.serve_pending()


def test_a_read_during_a_frame_waits_for_the_message_thread():
    reads, _ = _reads_with_torn_reader()
    reads.version = 1                          # the message thread is in a frame
    got = []
    t = threading.Thread(target=lambda: got.append(reads.answer([("r", (7,))])))
    t.start()
    deadline = time.monotonic() + 10
    while not reads.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    assert reads.pending and not got           # queued, not answered from a torn state
    reads.version = 2                          # the frame ends; between frames:
    reads.serve_pending()
    t.join(10)
    assert got == [[[[(7, "whole")]]]]    # (one answer: one group, one key)


def test_a_frame_that_starts_during_a_read_makes_it_read_again():
    reads, op = _reads_with_torn_reader()

    def frame_starts():                        # the message thread took the GIL
        op.during_read = None
        reads.version += 1

    op.during_read = frame_starts
    got = []
    t = threading.Thread(target=lambda: got.append(reads.answer([("r", (3,))])))
    t.start()
    deadline = time.monotonic() + 10
    while not reads.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    reads.version += 1
    reads.serve_pending()
    t.join(10)
    assert got == [[[[(3, "whole")]]]]


def test_reads_are_answered_under_a_stream_of_frames():
    """The message thread is almost always in a frame: reads are answered between
    frames (a lock would let the message thread take it back first, every time)."""
    reads, _ = _reads_with_torn_reader()
    stop = threading.Event()

    def message_thread():
        while not stop.is_set():
            reads.version += 1
            time.sleep(0.0002)                 # a frame (the GIL let go, as numpy does)
            reads.version += 1
            if reads.pending:
                reads.serve_pending()

    mt = threading.Thread(target=message_thread)
    mt.start()
    try:
        got = [reads.answer([("r", (k,))])[0] for k in range(200)]
    finally:
        stop.set()
        mt.join()
    assert got == [[[(k, "whole")]] for k in range(200)]


def test_a_lookup_during_a_frame_waits_for_the_message_thread():
    """``answer_one`` (a ``get``) keeps the seqlock's rule: mid-frame it is queued,
    and answered between frames; a frame that starts during it makes it read again."""
    reads, op = _reads_with_torn_reader()
    reads.version = 1                          # the message thread is in a frame
    got = []
    t = threading.Thread(target=lambda: got.append(reads.answer_one("r", 7)))
    t.start()
    deadline = time.monotonic() + 10
    while not reads.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    assert reads.pending and not got           # queued, not answered from a torn state
    reads.version = 2
    reads.serve_pending()
    t.join(10)
    assert got == [[(7, "whole")]]

    def frame_starts():
        op.during_read = None
        reads.version += 1

    op.during_read = frame_starts
    t = threading.Thread(target=lambda: got.append(reads.answer_one("r", 3)))
    t.start()
    deadline = time.monotonic() + 10
    while not reads.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    reads.version += 1
    reads.serve_pending()
    t.join(10)
    assert got[1:] == [[(3, "whole")]]


def test_only_readers_hosted_and_up_are_read():
    reads, _ = _reads_with_torn_reader()
    with pytest.raises(NotHere, match="n9"):
        reads.answer([("n9", (1,))])
    with pytest.raises(NotHere, match="n9"):
        reads.answer_one("n9", 1)
    reads.domains["r"].alive = False          # hosted, being recovered
    with pytest.raises(NotHere):
        reads.answer([("r", (1,))])
    with pytest.raises(NotHere):
        reads.answer_one("r", 1)
    reads.domains["r"].alive = True
    reads.held = {"r": []}                    # restored, its replay held: not yet read
    with pytest.raises(NotHere):
        reads.answer([("r", (1,))])
    with pytest.raises(NotHere):
        reads.answer_one("r", 1)
    reads.held = {}
    assert reads.answer([("r", (1,))]) == [[[(1, "whole")]]]
    assert reads.answer_one("r", 1) == [(1, "whole")]
    reads.domains["b"] = SimpleNamespace(alive=True, node=SimpleNamespace(kind="base"))
    with pytest.raises(NotHere):
        reads.answer([("b", (1,))])
    with pytest.raises(NotHere):
        reads.answer_one("b", 1)
    reads.close()                              # the worker stopped
    with pytest.raises(NotHere, match="stopped"):
        reads.answer([("r", (1,))])
    with pytest.raises(NotHere, match="stopped"):
        reads.answer_one("r", 1)


def _client(address, token):
    conn = wire.Connection(socket.create_connection(address))
    wire.client_handshake(conn, token, {"role": "client"})
    return conn


def test_the_read_port_checks_the_token_and_the_requests():
    reads, _ = _reads_with_torn_reader()
    server = ReadServer(reads, "127.0.0.1", 0, "tok")
    try:
        with pytest.raises(wire.AuthError, match="wrong token"):
            _client(server.address, "nope")
        conn = _client(server.address, "tok")
        conn.send(["read", 1, [["r", [5, 6]], ["n9", [1]]]])
        assert conn.recv() == ("moved", 1, "node n9 is not served by this worker now")
        conn.send(["read", 2, [["r", [5, 6]]]])
        assert conn.recv() == ("ok", 2, ((((5, "whole"),), ((6, "whole"),)),))
        conn.send(["read", 3, [["r", pack_keys(np.array([6, -1, 2**40]))]]])   # (int64 bytes)
        assert conn.recv() == ("ok", 3, ((((6, "whole"),), ((-1, "whole"),),
                                          ((2**40, "whole"),)),))
        conn.send(["get", 7, "r", 5])                  # a lookup: the key's rows
        assert conn.recv() == ("ok", 7, ((5, "whole"),))
        conn.send(["get", 8, "r", (5, 6)])             # (a key of several values)
        assert conn.recv() == ("ok", 8, (((5, 6), "whole"),))
        conn.send(["get", 9, "n9", 5])
        assert conn.recv() == ("moved", 9, "node n9 is not served by this worker now")
        conn.send(["get", 10, "r", {"a": 1}])          # (a key no reader takes)
        assert conn.recv()[:3] == ("error", 10, "Error")
        conn.send(["read", 4, [["r", bytes(12)]]])    # not whole int64s: closed
        with pytest.raises(wire.ConnectionClosed):
            conn.recv()
        conn = _client(server.address, "tok")
        conn.send(["read", "x", []])          # malformed: the connection is closed
        with pytest.raises(wire.ConnectionClosed):
            conn.recv()
        conn.close()
        conn = _client(server.address, "tok")
        conn.send(["get", "x", "r", 1])       # malformed: closed
        with pytest.raises(wire.ConnectionClosed):
            conn.recv()
        conn.close()
        conn = _client(server.address, "tok")  # and the port goes on serving
        conn.send(["read", 3, [["r", [1]]]])
        assert conn.recv()[0] == "ok"
        conn.close()
    finally:
        server.close()


def test_a_read_thread_awake_after_a_lookup_answers_what_comes_as_before(monkeypatch):
    """After a ``get`` the read thread polls for the next request (``NEXT_GET_SPIN_NS``,
    here 10 s: every request below arrives while it polls): lookups, a read of many
    keys, a lookup mid-frame (answered between frames, never torn) are answered as
    without it, and a client that goes away ends the thread at once."""
    monkeypatch.setattr(reads_module, "NEXT_GET_SPIN_NS", 10_000_000_000)
    reads, _ = _reads_with_torn_reader()
    server = ReadServer(reads, "127.0.0.1", 0, "tok")
    try:
        threads = threading.active_count()
        conn = _client(server.address, "tok")
        for rid in range(1, 4):
            conn.send(["get", rid, "r", rid])
            assert conn.recv() == ("ok", rid, ((rid, "whole"),))
            time.sleep(0.005)                   # (the thread polls meanwhile)
        conn.send(["read", 4, [["r", [5, 6]]]])
        assert conn.recv() == ("ok", 4, ((((5, "whole"),), ((6, "whole"),)),))
        conn.send(["get", 5, "r", 5])
        assert conn.recv() == ("ok", 5, ((5, "whole"),))
        reads.version = 1                       # a frame under way: queued, then
        t = threading.Thread(target=reads_between_frames, args=(reads,))
        t.start()
        conn.send(["get", 6, "r", 6])
        assert conn.recv() == ("ok", 6, ((6, "whole"),))
        t.join(10)
        conn.close()                            # (while the thread polls)
        deadline = time.monotonic() + 5
        while threading.active_count() > threads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threading.active_count() == threads
    finally:
        server.close()


def test_an_answer_in_columns_gives_the_rows_of_each_key_and_refuses_a_malformed_one():
    nan = noria_py.nan.NAN
    hit = np.array([True, False, True, True])
    parts = [np.array([1, 3, 4]), np.array([0.5, np.nan, -1.0]),
             np.array(["x", None, nan], dtype=object)]
    packed = wire.unpackb(wire.packb(pack_dense(hit, parts), big_ints=True))
    rows = rows_found(packed)
    assert rows == [[(1, 0.5, "x")], [], [(3, nan, None)], [(4, -1.0, nan)]]
    assert rows[2][0][1] is nan                # (the one NaN: it finds itself in a dict)
    assert rows_found(((("a", 1),), ())) == [[("a", 1)], []]     # (rows, as before)
    for bad in [{"hit": b"\x01", "cols": ()},                  # no column
                {"hit": b"\x01\x01", "cols": (("a", "<i8", bytes(8)),)},    # one value short
                {"hit": b"\x01", "cols": (("v", (1, 2)),)},
                {"hit": b"\x01", "cols": (("a", "|O", bytes(8)),)},
                {"hit": "x", "cols": ()}, [1]]:
        with pytest.raises(wire.ProtocolError):
            rows_found(bad)


def test_a_large_answer_is_made_with_the_collector_paused():
    """The rows of many keys (a list and a tuple each) are made without collections
    of Python's cyclic collector (one young collection after, where several ran during),
    which is enabled again after, or left disabled where the caller had disabled it."""
    n = 4 * PAUSE_GC_MIN
    found = _wire(pack_dense(np.ones(n, dtype=bool),
                             [np.arange(n), np.array([str(i) for i in range(n)], dtype=object)]))
    rows1 = _wire([[(i, str(i))] for i in range(n)])
    half = np.arange(0, n, 2), np.arange(1, n, 2)
    split = [(half[0], _wire(pack_dense(np.ones(n // 2, dtype=bool), [half[0]]))),
             (half[1], _wire(pack_dense(np.ones(n // 2, dtype=bool), [half[1]])))]
    collections = []

    def seen(phase, info):
        if phase == "start":
            collections.append(info["generation"])
    thresholds = gc.get_threshold()
    gc.set_threshold(1000, 10, 10)        # (a young collection every 1,000 objects made:
    gc.callbacks.append(seen)             # 4 or more in the making of 2 n, none around it)
    try:
        for make in (lambda: rows_found(found), lambda: rows_found(rows1),
                     lambda: rows_in_order(n, split)):
            gc.collect()
            collections.clear()
            rows = make()
            assert len(rows) == n and gc.isenabled()
            assert len(collections) <= 1        # (one young collection after, at most)
        assert rows[5] == [(5,)]
        with collector_paused(PAUSE_GC_MIN - 1):     # (a small answer: not paused)
            assert gc.isenabled()
        gc.disable()
        rows_found(found)
        assert not gc.isenabled()              # (the caller's choice stays)
    finally:
        gc.enable()
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)


def test_a_read_port_on_this_machine_is_read_on_its_unix_socket(monkeypatch):
    """A client that reached a read port on a loopback address reads on the Unix socket
    the port's welcome names (Linux); one that is not there, or answers without the
    token (another process's), leaves the client on TCP; so does ``UNIX_SOCKETS``."""
    import sys

    import noria_py.remote as remote
    local = socket.AF_UNIX if sys.platform == "linux" else socket.AF_INET
    reads, _ = _reads_with_torn_reader()
    server = ReadServer(reads, "127.0.0.1", 0, "tok")
    other = ReadServer(reads, "127.0.0.1", 0, "another token")
    db = remote.RemoteDatabase.__new__(remote.RemoteDatabase)
    db._token, db._tls, db._timeout = "tok", None, None

    def read_at(conn, family):
        assert conn.sock.family == family
        conn.send(["read", 1, [["r", [5]]]])
        assert conn.recv() == ("ok", 1, ((((5, "whole"),),),))
        conn.close()
    name = server.unix_name
    try:
        read_at(db._read_port(server.address), local)
        server.unix_name = "\0noria-py-read-nobody"
        read_at(db._read_port(server.address), socket.AF_INET)
        server.unix_name = other.unix_name
        read_at(db._read_port(server.address), socket.AF_INET)
        server.unix_name = name
        monkeypatch.setattr(remote, "UNIX_SOCKETS", False)
        read_at(db._read_port(server.address), socket.AF_INET)
    finally:
        server.close()
        other.close()


def _wire(x):
    return wire.unpackb(wire.packb(x, big_ints=True))


def test_answers_of_several_shards_are_put_back_in_key_order():
    """``lookup_many`` over reader shards: each group's answer (in columns, or rows)
    goes back to the positions of its keys; a column that is int64 at one shard and
    values at another (NULLs there) keeps its ints ints; NaN is the one NaN."""
    nan = noria_py.nan.NAN
    # keys 0..5; shard 0 asked for positions 1, 2, 5, shard 1 for 0, 3, 4
    at0, at1 = np.array([1, 2, 5]), np.array([0, 3, 4])
    a0 = _wire(pack_dense(np.array([True, False, True]),
                          [np.array([11, 15]), np.array([0.5, np.nan]),
                           np.array(["b", None], dtype=object)]))
    a1 = _wire(pack_dense(np.array([True, True, False]),
                          [np.array([10, None], dtype=object), np.array([1.5, -2.0]),
                           np.array(["a", "c"], dtype=object)]))
    want = [[(10, 1.5, "a")], [(11, 0.5, "b")], [], [(None, -2.0, "c")], [], [(15, nan, None)]]
    got = rows_in_order(6, [(at0, a0), (at1, a1)])
    assert got == want
    assert [type(r[0][0]) for r in got if r and r[0][0] is not None] == [int, int, int]
    assert got[5][0][1] is nan
    assert rows_in_order(6, [(at1, a1), (at0, a0)]) == want     # (groups in any order)
    rows1 = _wire([[(10, 1.5, "a")], [(None, -2.0, "c")], []])   # (one shard in rows)
    assert rows_in_order(6, [(at0, a0), (at1, rows1)]) == want
    # (pieces of two dtypes: each value as its shard gave it, not all made floats)
    f0 = _wire(pack_dense(np.array([True]), [np.array([7])]))
    f1 = _wire(pack_dense(np.array([True]), [np.array([0.5])]))
    mixed = rows_in_order(2, [(np.array([0]), f0), (np.array([1]), f1)])
    assert mixed == [[(7,)], [(0.5,)]] and type(mixed[0][0][0]) is int
    with pytest.raises(wire.ProtocolError):                    # (an answer too short)
        rows_in_order(6, [(at0, a0), (np.array([0, 3, 4, 1]), a1)])
    with pytest.raises(wire.ProtocolError):
        rows_in_order(6, [(at0, a0), (np.array([0, 3]), rows1)])


# ---------------------------------------------------------------- a real cluster

DDL = ["CREATE TABLE t (a INT, b INT, c TEXT, f FLOAT)"]
#: name -> (the engine's view, DuckDB's query of one key)
KEYED = {
    "by_a": ("SELECT a, COUNT(*) AS n, SUM(b) AS s FROM t WHERE a = ? GROUP BY a",
             "SELECT a, COUNT(*), SUM(b) FROM t WHERE a = ? GROUP BY a"),
    "rows_of_c": ("SELECT c, a, b FROM t WHERE c = ?", "SELECT c, a, b FROM t WHERE c = ?"),
    "by_f": ("SELECT f, MAX(b) AS m FROM t WHERE f = ? GROUP BY f",
             "SELECT f, MAX(b) FROM t WHERE f = ? GROUP BY f"),
}
PAIR = ("SELECT a, b, COUNT(*) AS n FROM t WHERE a = ? AND b = ? GROUP BY a, b",
        "SELECT a, b, COUNT(*) FROM t WHERE a = ? AND b = ? GROUP BY a, b")


def _row(rng: random.Random) -> tuple:
    return (rng.choice([None, *range(40)]), rng.randrange(-5, 6),
            rng.choice([None, "x", "y", "zz", "é", ""]),
            rng.choice([None, 0.5, 1.0, -2.25, 3.0]))


def _keys(rng: random.Random) -> dict[str, list]:
    return {"by_a": [rng.choice([None, *range(45)]) for _ in range(60)],
            "rows_of_c": ["x", "y", "zz", "é", "", "none", None],
            "by_f": [0.5, 1, 1.0, -2.25, 3, 7.5, None]}


@pytest.fixture(scope="module")
def cluster():
    """Three workers: a view's two reader shards land on two of them (placement keeps
    a node off its parents' worker, then takes the least loaded)."""
    with Cluster(workers=3, shards=2) as c:
        yield c


@pytest.mark.parametrize("seed", range(3))
def test_reads_at_the_workers_match_the_controller_and_duckdb(cluster, seed):
    rng = random.Random(seed)
    db = noria_py.connect(cluster.url)
    names = {name: f"{name}_{seed}" for name in KEYED}
    pair = f"pair_{seed}"
    table = f"t_{seed}"
    db.execute(DDL[0].replace(" t ", f" {table} "))
    for name, (sql, _) in KEYED.items():
        db.execute(f"CREATE VIEW {names[name]} AS {sql.replace(' t ', f' {table} ')}")
    db.execute(f"CREATE VIEW {pair} AS {PAIR[0].replace(' t ', f' {table} ')}")
    readers = {n["worker"] for n in db.graph() if n["kind"] == "reader"}
    assert len(readers) > 1                    # (lookup_many asks more than one worker)
    model: list[tuple] = []
    oracle = Oracle(DDL)
    for _ in range(4):
        rows = [_row(rng) for _ in range(rng.randint(20, 200))]
        db.table(table).insert(rows)
        model += rows
        gone = rng.sample(model, min(len(model), rng.randint(0, 15)))
        db.table(table).delete(gone)
        for r in gone:
            model.remove(r)
        db.wait()
        oracle.load({"t": model})
        for name, keys in _keys(rng).items():
            view = db.view(names[name])
            via_workers = view.lookup_many(keys)
            via_controller = db._call("lookup", names[name], keys)
            assert via_workers == [[tuple(r) for r in rows] for rows in via_controller]
            for k, got in zip(keys, via_workers):
                assert got == view.lookup(k)
                want = oracle.query(KEYED[name][1], (k,))
                assert normalize(got) == want, (name, k)
        pairs = [(rng.randrange(42), rng.randrange(-5, 6)) for _ in range(30)]
        view = db.view(pair)
        got = view.lookup_many(pairs)
        assert got == [[tuple(r) for r in rows]
                       for rows in db._call("lookup", pair, [list(p) for p in pairs])]
        for p, rows in zip(pairs, got):
            assert rows == view.lookup(*p)
            assert normalize(rows) == oracle.query(PAIR[1], p)
    db.close()


def test_many_int_keys_of_a_dense_reader_are_answered_in_columns(cluster, monkeypatch):
    """A keyed view of a table's primary key keeps its reader in the dense form: many
    int keys at once come back as columns (``pack_dense``), the same rows as one
    ``lookup`` each and as the controller's path: NULLs, NaN (in a float column with
    and without NULLs), text, keys outside the arrays and keys with no row."""
    from noria_py.runtime.cluster import reads
    answers: list[bool] = []
    real = reads._columns
    monkeypatch.setattr(reads, "_columns",
                        lambda found: answers.append(type(found) is dict) or real(found))
    rng = random.Random(5)
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE dn (id INT PRIMARY KEY, c TEXT, f FLOAT, g FLOAT, b INT)")
    db.execute("CREATE VIEW dn_v AS SELECT id, c, f, g, b FROM dn WHERE id = ?")
    db.table("dn").insert([(i, rng.choice([None, "x", "é", ""]),
                            rng.choice([float("nan"), 0.5, -2.0]),
                            rng.choice([None, float("nan"), 1.5]), rng.choice([None, 7, -3]))
                           for i in range(0, 300, 2)])
    db.wait()
    view = db.view("dn_v")
    keys = list(range(-3, 320))
    rng.shuffle(keys)
    got = view.lookup_many(keys)
    assert any(answers)                        # (at least one worker answered in columns)
    assert got == [[tuple(r) for r in rows] for rows in db._call("lookup", "dn_v", keys)]
    assert got == [view.lookup(k) for k in keys]
    assert sum(map(len, got)) == 150
    db.close()


def test_key_errors_as_through_the_controller(cluster):
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE ke (a INT, b INT)")
    db.execute("CREATE VIEW ke_v AS SELECT a, b FROM ke WHERE a = ? AND b = ?")
    db.execute("CREATE VIEW ke_1 AS SELECT a, b FROM ke WHERE a = ?")
    v, one = db.view("ke_v"), db.view("ke_1")
    with pytest.raises(noria_py.ArityError):
        v.lookup(1)
    with pytest.raises(noria_py.ArityError):
        v.lookup_many([(1, 2), (1,)])
    with pytest.raises(noria_py.TypeMismatchError, match="key column 'a' is INT"):
        one.lookup("one")
    with pytest.raises(noria_py.TypeMismatchError):
        one.lookup_many([1, "one"])
    with pytest.raises(noria_py.TypeMismatchError):
        one.lookup([1, 2])                    # (no stable hash: refused, not sent)
    assert one.lookup_many([]) == []
    assert one.lookup(1) == []                 # (its placement kept)
    db.close()
    with pytest.raises(noria_py.ClosedError):
        one.lookup(1)
    with pytest.raises(noria_py.ClosedError):
        one.lookup_many([1, 2])


def test_a_prepared_keyed_select_is_read_at_the_workers(cluster):
    """``db.prepare`` of a SELECT whose ``?`` are lookup keys reads the view at the
    readers' workers (no request to the controller per run), answers as ``execute``
    does, and comes back after its ad-hoc view is dropped."""
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE pr (a INT, b INT, c TEXT)")
    db.table("pr").insert([(i % 7, i, f"c{i % 3}") for i in range(200)])
    db.execute("CREATE VIEW pr_named AS SELECT a, COUNT(*) AS n FROM pr WHERE a = ? GROUP BY a")
    db.wait()
    adhoc = "SELECT b, c FROM pr WHERE a = ? AND c = ?"
    named = db.prepare("SELECT * FROM pr_named WHERE a = ?")
    st = db.prepare(adhoc)
    assert st.columns == ["b", "c"] and named.columns == ["a", "n"]
    asked = []
    call = db._call
    db._call = lambda method, *args: (asked.append(method), call(method, *args))[1]
    for a in range(8):
        for c in ("c0", "c2", "zz"):
            got = st.run((a, c))
            want = db.execute(adhoc, (a, c))
            assert sorted(got.rows) == sorted(want.rows) and got.columns == want.columns
        assert named.run((a,)).rows == db.execute("SELECT * FROM pr_named WHERE a = ?", (a,)).rows
    assert set(asked) <= {"execute", "placement"}
    assert asked.count("execute") == 8 * 4 and asked.count("placement") <= 2
    assert any(link.conn is not None for link in db._links.values())
    with pytest.raises(noria_py.ArityError):
        st.run((1,))
    # its view dropped (pinned, so only drop_query removes it): asked for again, once
    assert any(q["sql"] == adhoc for q in db.queries())
    db.drop_query()
    assert not db.queries()
    asked.clear()
    want = sorted(call("execute", adhoc, (3, "c0"))[1])
    deadline = time.monotonic() + 30
    while "prepare_read" not in asked and time.monotonic() < deadline:
        # (until its worker has dropped the reader, a read there may still find it)
        assert sorted(st.run((3, "c0")).rows) == [tuple(r) for r in want]
        time.sleep(0.01)
    assert asked.count("prepare_read") == 1 and "execute" not in asked
    db._call = call
    st.close()
    named.close()
    db.close()


def test_reads_during_writes_see_whole_rows(cluster):
    """A writer keeps adding to one key's count while lookups run at the reader's
    worker: each sees one row, and the counts never go back."""
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE w (k INT, v INT)")
    db.execute("CREATE VIEW w_n AS SELECT k, COUNT(*) AS n FROM w WHERE k = ? GROUP BY k")
    writer = noria_py.connect(cluster.url)
    stop = threading.Event()

    def write():
        t = writer.table("w")
        while not stop.is_set():
            t.insert([(1, i) for i in range(50)] + [(2, 0)])

    th = threading.Thread(target=write)
    th.start()
    view = db.view("w_n")
    try:
        last = 0
        for _ in range(300):
            rows = view.lookup(1)
            assert len(rows) <= 1
            if rows:
                assert rows[0][1] >= last and rows[0][1] % 50 == 0
                last = rows[0][1]
            many = view.lookup_many([1, 2])
            assert all(len(r) <= 1 for r in many)
    finally:
        stop.set()
        th.join()
    writer.wait()
    n = db.view("w_n").lookup(2)[0][1]
    assert db.view("w_n").lookup(1) == [(1, 50 * n)]
    writer.close()
    db.close()


def _placed_view(db, name: str, sql: str, rows: list[tuple]):
    db.execute(sql)
    db.table(name.split("_")[0]).insert(rows)
    db.wait()
    return db.view(name)


def test_a_stale_placement_is_refreshed(cluster):
    """The view's cached placement names the wrong worker for each reader shard: the
    workers answer ``moved`` (never rows of another node), and the client asks the
    controller again."""
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE st (k INT, v INT)")
    view = _placed_view(db, "st_n", "CREATE VIEW st_n AS SELECT k, SUM(v) AS s FROM st "
                        "WHERE k = ? GROUP BY k", [(k % 10, k) for k in range(100)])
    want = [[(k, sum(range(k, 100, 10)))] for k in range(10)]
    assert view.lookup_many(range(10)) == want
    where = view._where
    assert where is not None and len({link.address for link in where.links}) == 2
    where.links.reverse()
    assert view.lookup_many(range(10)) == want
    assert view._where is not where            # asked again
    where = view._where
    where.links.reverse()
    assert [view.lookup(k) for k in range(10)] == want
    db.close()


def test_a_worker_answers_moved_for_a_reader_it_does_not_host(cluster):
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE mv (k INT)")
    view = _placed_view(db, "mv_n", "CREATE VIEW mv_n AS SELECT k, COUNT(*) AS n FROM mv "
                        "WHERE k = ? GROUP BY k", [(k,) for k in range(20)])
    view.lookup(0)
    where = view._where
    token = db._token
    for i, node in enumerate(where.nodes):
        other = where.links[1 - i].address
        conn = _client(other, token)
        conn.send(["read", 1, [[node, list(range(20))]]])
        f = conn.recv()
        assert f[0] == "moved" and node in f[2]
        conn.close()
    db.close()


def test_a_wrong_token_at_a_workers_read_port_is_refused(cluster):
    db = noria_py.connect(cluster.url)
    db.execute("CREATE TABLE tk (k INT)")
    db.execute("CREATE VIEW tk_n AS SELECT k, COUNT(*) AS n FROM tk WHERE k = ? GROUP BY k")
    nodes, addresses, *_ = db._call("placement", "tk_n")
    for host, port in addresses:
        with pytest.raises(wire.AuthError, match="wrong token"):
            _client((host or cluster.host, port), "not the token")
        with pytest.raises(wire.AuthError):
            _client((host or cluster.host, port), None)
    assert db.view("tk_n").lookup(1) == []     # and the port goes on serving
    db.close()


#: (a hypothesis test on the module's cluster: the fixture is meant to outlive examples)
_RANGE_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large,
                 HealthCheck.function_scoped_fixture]


@settings(max_examples=4, deadline=None, suppress_health_check=_RANGE_HEALTH)
@given(programs)
def test_range_reads_match_duckdb(cluster, steps):
    """Range parameters (docs/sql.md): named views read at the workers (sharded by their
    equality key), ad-hoc queries through the controller, between random inserts,
    deletes and updates; the embedded engine's programs (tests/differential/
    test_ranges.py), every read against DuckDB."""
    db = noria_py.connect(cluster.url)
    try:
        run_program(db, steps)
    finally:
        db.close()


def test_range_constants_of_one_shape_share_one_view(cluster):
    db = noria_py.connect(cluster.url)
    """Ad-hoc range constants are lifted as embedded: 40 queries of one shape, with 40
    different bounds, leave one unnamed view, and each answers as SQL does."""
    db.execute("CREATE TABLE lift (id INT PRIMARY KEY, a INT)")
    rows = [(i, (i * 7) % 50) for i in range(200)]
    db.table("lift").insert(rows)
    db.wait()
    try:
        for b in range(40):
            got = db.execute(f"SELECT id FROM lift WHERE a BETWEEN {b} AND {b + 3}").fetchall()
            assert sorted(got) == [(i,) for i, a in rows if b <= a <= b + 3]
        assert len(db.queries()) == 1
    finally:
        db.drop_query()
        db.execute("DROP TABLE lift")
        db.close()


def test_range_reads_prepared_at_the_workers_and_through_the_dbapi(cluster, monkeypatch):
    db = noria_py.connect(cluster.url)
    """``db.prepare`` of a SELECT with range parameters reads its view at the readers'
    workers (no request to the controller per run); the DB-API's ``execute(sql,
    params)`` (through the controller) answers the same, from the same one view."""
    db.execute("CREATE TABLE dp (id INT PRIMARY KEY, g INT, f FLOAT)")
    rows = [(i, i % 3, float(i) if i % 5 else math.nan) for i in range(60)]
    db.table("dp").insert(rows)
    db.wait()
    try:
        sql = "SELECT id FROM dp WHERE g = ? AND f >= ?"
        st = db.prepare(sql)
        cur = db.cursor()
        asked: list[str] = []
        call = db._call
        monkeypatch.setattr(db, "_call", lambda m, *a: (asked.append(m), call(m, *a))[1])
        for g in range(3):
            for lo in (-1.0, 10.5, math.nan):
                want = [(i,) for i, gg, f in rows
                        if gg == g and (f != f or (lo == lo and f >= lo))]
                assert sorted(st.run((g, lo)).rows) == want, (g, lo)
                cur.execute(sql, (g, lo))
                assert sorted(cur.fetchall()) == want, (g, lo)
        assert set(asked) <= {"execute", "placement"}
        assert asked.count("execute") == 9 and asked.count("placement") <= 1
        assert len(db.queries()) == 1
    finally:
        monkeypatch.undo()
        st.close()
        db.drop_query()
        db.execute("DROP TABLE dp")
        db.close()


def test_range_read_errors_as_embedded(cluster):
    db = noria_py.connect(cluster.url)
    """Each wrong read raises what the embedded engine raises, by class and message."""
    ddl = ["CREATE TABLE er (id INT PRIMARY KEY, a INT, g INT, d DATE)",
           "CREATE VIEW er_a AS SELECT id FROM er WHERE a > ?",
           "CREATE VIEW er_gd AS SELECT id FROM er WHERE g = ? AND d BETWEEN ? AND ?"]
    local = noria_py.connect()
    for sql in ddl:
        db.execute(sql)
        local.execute(sql)
    rows = [(1, 1, 0, datetime.date(2026, 1, 2)), (2, 5, 1, datetime.date(2026, 3, 4))]
    db.table("er").insert(rows)
    local.table("er").insert(rows)
    db.wait()
    calls = [
        lambda d: d.view("er_a").lookup("x"),
        lambda d: d.view("er_a").lookup(1, 2),
        lambda d: d.view("er_a").lookup(),
        lambda d: d.view("er_gd").lookup("g", "2026-01-01", "2026-02-01"),
        lambda d: d.view("er_gd").lookup(0, "soon", "2026-02-01"),
        lambda d: d.view("er_gd").lookup(0, 3, "2026-02-01"),
        lambda d: d.subscribe("er_a", key=1),
        lambda d: d.execute("SELECT id FROM er WHERE a > ?", ("x",)).fetchall(),
    ]
    try:
        for i, call in enumerate(calls):
            with pytest.raises(noria_py.Error) as want:
                call(local)
            with pytest.raises(noria_py.Error) as got:
                call(db)
            assert type(got.value) is type(want.value), (i, got.value, want.value)
            assert str(got.value) == str(want.value), i
        # and what is right answers as embedded
        for view, params in [("er_a", (0,)), ("er_gd", (0, "2026-01-01", "2026-02-01")),
                             ("er_gd", (1, datetime.date(2026, 1, 1), None))]:
            assert db.view(view).lookup(*params) == local.view(view).lookup(*params)
    finally:
        db.drop_query()
        db.execute("DROP VIEW er_gd")
        db.execute("DROP VIEW er_a")
        db.execute("DROP TABLE er")
        local.close()
        db.close()


def test_a_sigkilled_readers_worker_is_read_again_at_the_spare():
    """SIGKILL the worker hosting a reader shard, with the view's handle and its
    placement kept: the next reads, on the same handle, refresh the placement on their
    own (waiting for the recovery, as reads through the controller do) and are right;
    so are those of a range view (``u >= ?``) whose reader shard, its sorted index
    built, was lost too (the index is built again from the restored rows)."""
    with Cluster(workers=2, shards=2) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE vote (a INT, u INT)")
        db.execute("CREATE VIEW votes AS SELECT a, COUNT(*) AS n FROM vote WHERE a = ? "
                   "GROUP BY a")
        db.execute("CREATE VIEW voters AS SELECT a, u FROM vote WHERE a = ?")
        db.execute("CREATE VIEW voters_from AS SELECT u FROM vote WHERE a = ? AND u >= ? "
                   "ORDER BY u")
        rng = random.Random(5)
        rows = [(rng.randrange(50), rng.randrange(1000)) for _ in range(2000)]
        db.table("vote").insert(rows)
        db.wait()
        votes, voters = db.view("votes"), db.view("voters")
        ranged = db.view("voters_from")

        def check_ranges() -> None:
            for k in range(50):
                lo = rng.randrange(1000)
                assert ranged.lookup(k, lo) == sorted((u,) for a, u in rows
                                                      if a == k and u >= lo), (k, lo)

        counts = [sum(1 for a, _ in rows if a == k) for k in range(50)]
        assert votes.lookup_many(range(50)) == [[(k, n)] if n else [] for k, n in
                                               enumerate(counts)]
        voters.lookup(1)
        check_ranges()              # (both shards' indexes built)
        before = {link.address for link in voters._where.links}
        reader = next(n for n in db.graph() if n["id"] == voters._where.nodes[0])
        assert reader["pid"] in {n["pid"] for n in db.graph()
                                 if n["id"] in ranged._where.nodes}
        os.kill(reader["pid"], signal.SIGKILL)
        # no wait(): the first read finds the worker gone and waits for the recovery
        assert sorted(voters.lookup(1)) == sorted((1, u) for a, u in rows if a == 1)
        assert {link.address for link in voters._where.links} != before
        check_ranges()
        assert votes.lookup_many(range(50)) == [[(k, n)] if n else [] for k, n in
                                               enumerate(counts)]
        more = [(k % 50, 7) for k in range(100)]
        db.table("vote").insert(more)
        db.wait()
        assert [votes.lookup(k) for k in range(50)] == [[(k, n + 2)] for k, n in
                                                       enumerate(counts)]
        rows += more
        check_ranges()
        assert any(r.automatic for r in db.recoveries())
        assert reader["pid"] not in cluster.worker_pids(db)
        db.close()


def test_a_joining_worker_serves_reads_where_it_is_told():
    """``noria-py worker --join ... --read-host H --read-port P``: its read port is there
    (it joins as a spare: it hosts no reader yet, so a read there is ``moved``)."""
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Cluster(workers=1, token="tok") as cluster:
        join = [sys.executable, "-m", "noria_tools.cli", "worker", "--join",
                f"{cluster.host}:{cluster.port}", "--read-host", "127.0.0.1",
                "--read-port", str(port)]
        env = {**os.environ, "NORIA_TOKEN": "tok"}
        worker = subprocess.Popen(join, env=env, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    conn = _client(("127.0.0.1", port), "tok")
                    break
                except OSError:
                    assert time.monotonic() < deadline and worker.poll() is None
                    time.sleep(0.2)
            conn.send(["read", 1, [["n1", [1]]]])
            assert conn.recv()[0] == "moved"
            conn.close()
        finally:
            worker.kill()
            worker.wait()
