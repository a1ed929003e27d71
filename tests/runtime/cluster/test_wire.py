"""The cluster transport over real loopback sockets: frames, codecs, authentication."""
import datetime
import hashlib
import hmac
import logging
import socket
import struct
import threading
import time

import numpy as np
import pytest
from sortedcontainers import SortedKeyList

from noria_py.batch import Batch
from noria_py.errors import Error
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.wire import (
    AuthError,
    Connection,
    ConnectionClosed,
    ProtocolError,
    client_handshake,
    decode_array,
    decode_batch,
    decode_message,
    encode_array,
    encode_batch,
    encode_message,
    server_handshake,
)
from noria_py.runtime.messages import Message
from noria_py.storage.codec import packb, unpackb


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    return a, b


@pytest.fixture
def conns():
    a, b = tcp_pair()
    ca, cb = Connection(a), Connection(b)
    yield ca, cb
    ca.close()
    cb.close()


@pytest.fixture
def raw():
    """A Connection (max_frame 1024) and the raw socket at the other end."""
    a, b = tcp_pair()
    conn = Connection(b, max_frame=1024)
    conn.sock.settimeout(5)          # a test that wrongly waits for a body fails, not hangs
    yield conn, a
    a.close()
    conn.close()


def in_thread(fn, *args):
    """Run fn in a thread; the returned function joins it and returns or raises its result."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:   # noqa: BLE001 - handed to the test thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join():
        t.join(10)
        assert not t.is_alive()
        if "error" in out:
            raise out["error"]
        return out["value"]
    return join


# ---------------------------------------------------------------- frames

def test_frames_round_trip(conns):
    a, b = conns
    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    values = [
        ["op", 1, 2.5, None, True, False, "é", b"\x00\xff"],
        {"nested": {"deep": [[1, [2, [3]]], ()], "k": None}, 7: "int key"},
        [datetime.date(2024, 2, 29), datetime.datetime(1999, 12, 31, 23, 59, 59, 999999),
         datetime.datetime(2024, 1, 1, 12, tzinfo=tz)],
        [2**64 - 1, -2**63, 0, -1, 2**63],
        [],
        {},
        ["big", b"x" * 3_000_000],         # larger than the read buffer
    ]
    for v in values:
        a.send(v)
    got = [b.recv() for _ in values]
    assert got[0] == ("op", 1, 2.5, None, True, False, "é", b"\x00\xff")
    assert got[1] == {"nested": {"deep": ((1, (2, (3,))), ()), "k": None}, 7: "int key"}
    assert got[2] == tuple(values[2]) and got[2][2].utcoffset() == tz.utcoffset(None)
    assert got[3] == tuple(values[3]) and all(type(x) is int for x in got[3])
    assert got[4] == () and got[5] == {}
    assert got[6] == ("big", b"x" * 3_000_000)
    assert a.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert ":" in a.peer and str(b.sock.getsockname()[1]) in a.peer


def test_many_frames_from_many_threads(conns):
    a, b = conns
    n, threads = 3000, 4

    def sender(k):
        for i in range(n):
            a.send(["f", k, i, "x" * (i % 97)])
    workers = [in_thread(sender, k) for k in range(threads)]
    seen = {k: 0 for k in range(threads)}
    for _ in range(n * threads):
        tag, k, i, pad = b.recv()
        assert tag == "f" and i == seen[k] and pad == "x" * (i % 97)   # whole, in order
        seen[k] += 1
    for join in workers:
        join()
    assert seen == {k: n for k in range(threads)}


def test_oversized_frame_refused_before_body(raw):
    conn, peer = raw
    peer.sendall(struct.pack(">I", 1025))          # no body follows: reading it would hang
    with pytest.raises(ProtocolError, match=r"1025 bytes .* limit of 1024 bytes"):
        conn.recv()


def test_a_message_longer_than_a_frame_crosses_in_frames_each_within_the_limit():
    """A payload over ``max_frame`` goes in frames of at most ``max_frame`` bytes,
    each length but the last marked ``_MORE``, and is read whole, by ``send``,
    ``send_many`` and ``send_now`` alike; one over ``max_message`` is refused."""
    a, b = tcp_pair()
    sender, receiver = Connection(a, max_frame=1024, max_message=8192), Connection(b)
    receiver.sock.settimeout(5)
    try:
        big = ["x" * 2500, list(range(300))]
        sender.send(big)
        got = receiver.recv()
        assert got == ("x" * 2500, tuple(range(300)))
        sender.send_many([["small"], big, ["after"]])
        assert [receiver.recv() for _ in range(3)] == [("small",), got, ("after",)]
        rest, locked = sender.send_now(big)
        sender.send_rest(rest, locked) if rest or locked else None
        assert receiver.recv() == got
        sender.send(big)                     # the frames as they cross
        sizes = []
        while True:
            (n,) = struct.unpack(">I", receiver._read(4, 0))
            sizes.append((n & ~wire._MORE, bool(n & wire._MORE)))
            receiver._read(n & ~wire._MORE, 4)
            if not n & wire._MORE:
                break
        assert [more for _, more in sizes] == [True] * (len(sizes) - 1) + [False]
        assert all(n <= 1024 for n, _ in sizes) and sum(n for n, _ in sizes) > 2500
        with pytest.raises(ProtocolError, match="limit of 8192"):
            sender.send(["x" * 9000])
    finally:
        sender.close()
        receiver.close()


def test_a_message_over_the_limit_is_refused_before_its_frames_are_read(raw):
    """Each frame of a message is checked as it is announced: one longer than
    ``max_frame``, or one that takes the whole past ``max_message``, is refused
    before its body (none follows here: reading it would hang)."""
    conn, peer = raw
    conn.max_message = 3000
    peer.sendall(struct.pack(">I", 1025 | wire._MORE))
    with pytest.raises(ProtocolError, match=r"1025 bytes and more .* limit of 1024"):
        conn.recv()
    a, b = tcp_pair()
    conn = Connection(b, max_frame=1024, max_message=3000)
    conn.sock.settimeout(5)
    a.sendall(struct.pack(">I", 1024 | wire._MORE) + b"x" * 1024
              + struct.pack(">I", 1024 | wire._MORE) + b"x" * 1024
              + struct.pack(">I", 1000))
    with pytest.raises(ProtocolError, match=r"at least 3048 bytes .* limit of 3000"):
        conn.recv()
    a.close()
    conn.close()


def test_garbage_payload(raw):
    conn, peer = raw
    peer.sendall(struct.pack(">I", 1) + b"\xc1")   # 0xc1 is never used by msgpack
    with pytest.raises(ProtocolError, match="garbage frame"):
        conn.recv()


def test_truncated_payload_is_garbage(raw):
    conn, peer = raw
    body = packb(["a", "bcd"])[:-1]
    peer.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError, match="garbage frame"):
        conn.recv()


@pytest.mark.parametrize("value", [42, "text", None, b"bytes"])
def test_payload_must_be_array_or_map(raw, value):
    conn, peer = raw
    body = packb(value)
    peer.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError, match="expected a msgpack array or map"):
        conn.recv()


def test_clean_eof(raw):
    conn, peer = raw
    peer.close()
    with pytest.raises(ConnectionClosed, match="closed by") as e:
        conn.recv()
    assert "middle" not in str(e.value)
    assert isinstance(e.value, ProtocolError) and isinstance(e.value, Error)


@pytest.mark.parametrize("tail", [b"\x00\x00", struct.pack(">I", 100) + b"0123456789"])
def test_eof_mid_frame(raw, tail):
    conn, peer = raw
    good = packb(["ok"])
    peer.sendall(struct.pack(">I", len(good)) + good + tail)
    peer.close()
    assert conn.recv() == ("ok",)
    with pytest.raises(ConnectionClosed, match="middle of a frame"):
        conn.recv()


def test_frames_split_across_reads(raw):
    conn, peer = raw
    frames = b"".join(struct.pack(">I", len(p)) + p
                      for p in (packb(["f", i, "y" * i]) for i in range(200)))
    done = in_thread(lambda: [conn.recv() for _ in range(200)])
    for i in range(0, len(frames), 7):              # dribble: headers and bodies split
        peer.sendall(frames[i:i + 7])
        if i % 700 == 0:
            time.sleep(0.001)
    assert done() == [("f", i, "y" * i) for i in range(200)]


def test_the_bytes_of_a_long_frame_are_heard_as_they_arrive(raw):
    """``Connection.heard`` moves with each part of a frame that did not arrive whole
    (a heartbeat monitor counts it as the peer's life: a long frame's sender sends no
    heartbeat meanwhile), and is not left behind once the frame is read."""
    conn, peer = raw
    body = packb(["big", "x" * 900])
    frame = struct.pack(">I", len(body)) + body
    assert conn.heard == 0.0
    done = in_thread(conn.recv)
    for i in range(0, len(frame), 100):
        before = time.monotonic()
        peer.sendall(frame[i:i + 100])
        deadline = time.monotonic() + 5
        while conn.heard < before and time.monotonic() < deadline:
            time.sleep(0.001)
        assert conn.heard >= before, f"the bytes from {i} on were not heard"
        time.sleep(0.01)
    assert done() == ("big", "x" * 900)
    assert 0 < conn.heard <= time.monotonic()     # (not inf: the decoding is over)


def test_spin_buffers_what_arrives_and_never_loses_a_buffered_frame(conns):
    """``Connection.spin``: bytes that arrive while it polls are buffered for ``recv``
    (a frame whole, or in pieces); a frame already buffered is left alone (a second
    frame of one receive is not overwritten); nothing arriving, it returns and ``recv``
    still blocks for the next frame."""
    a, b = conns
    a.send(["one", 1])
    b.spin(5_000_000_000)               # (returns once the frame is in)
    assert b._end > b._start
    assert b.recv() == ("one", 1)
    a.send_many([["two", 2], ["three", 3]])
    assert b.recv() == ("two", 2)
    assert b._end > b._start            # ("three", buffered by the same receive)
    a.send(["four", 4])
    b.spin(5_000_000_000)                # a frame buffered: nothing is received over it
    assert b.recv() == ("three", 3)
    b.spin(5_000_000_000)
    assert b.recv() == ("four", 4)
    b.spin(1000)                         # nothing comes: back to a blocking recv
    assert b._start == b._end
    done = in_thread(b.recv)
    a.send(["four", 4])
    assert done() == ("four", 4)
    body = packb(["five", "x" * 50])
    frame = struct.pack(">I", len(body)) + body
    a.sock.sendall(frame[:9])            # half a frame while it spins
    b.spin(5_000_000_000)
    assert 0 < b._end - b._start < len(frame)
    done = in_thread(b.recv)
    a.sock.sendall(frame[9:])
    assert done() == ("five", "x" * 50)


def test_spin_leaves_timeouts_and_closed_peers_to_recv(raw):
    """A socket with a Python timeout is not polled (``recv_into`` would wait for the
    whole timeout first); a closed peer: ``recv`` says so."""
    conn, peer = raw                     # (settimeout(5): spin returns at once)
    body = packb(["x"])
    peer.sendall(struct.pack(">I", len(body)) + body)
    conn.spin(10_000_000_000)
    assert conn._start == conn._end
    assert conn.recv() == ("x",)
    conn.sock.settimeout(None)
    peer.close()
    conn.spin(10_000_000_000)
    with pytest.raises(ConnectionClosed, match="closed by"):
        conn.recv()


# ---------------------------------------------------------------- codecs

def test_batch_round_trip(conns):
    a, b = conns
    batch = Batch([(1, None, "x"), (None, None, None), (2**63, -2.5, datetime.date(2020, 1, 1))],
                  [1, -1, 3])
    a.send(["write", encode_batch(batch), encode_batch(Batch())])
    _, got, empty = b.recv()
    got, empty = decode_batch(got), decode_batch(empty)
    assert type(got.rows) is list and type(got.signs) is list
    assert all(type(r) is tuple for r in got.rows)
    assert got.rows == batch.rows and got.signs == batch.signs
    assert empty.rows == [] and empty.signs == []
    got.rows.append((9,))                           # the decoded lists are our own
    got.signs.append(1)


def test_message_round_trip(conns):
    a, b = conns
    path = (3, 17, 5, 2**62, 0)                     # a diff as its path: leaf, times
    msgs = [Message("base_1", "agg_2#0", Batch([(1, None)], [-2]), 17, path, 9),
            Message("a", "b", Batch(), 0, None, 0),
            Message("a", "b", Batch([("x",)], [1]), 1, (0, 1), 0)]
    a.send([encode_message(m) for m in msgs])
    got = [decode_message(m) for m in b.recv()]
    for m, g in zip(msgs, got):
        assert (g.src, g.dst, g.time, g.low) == (m.src, m.dst, m.time, m.low)
        assert g.batch.rows == m.batch.rows and g.batch.signs == m.batch.signs
        assert g.clock == m.clock and type(g.clock) is type(m.clock)


@pytest.mark.parametrize("clock", [b"\x00" * 8, [1], [1, "2"], [1, 2.0], [0] * 65, [3, -1], 7])
def test_message_with_a_malformed_clock_is_refused(clock):
    with pytest.raises(ProtocolError, match="clock"):
        decode_message(["a", "b", [[], []], 1, clock, 0])


def test_arrays_round_trip(conns):
    a, b = conns
    rows = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
    a.send([encode_array(rows), encode_array(None), encode_array(np.zeros((0, 3), np.int64)),
            encode_array(np.array([1, 2], dtype=np.int32))])
    got = [decode_array(x) for x in b.recv()]
    assert np.array_equal(got[0], rows) and got[0].dtype == np.int64
    assert got[1] is None
    assert got[2].shape == (0, 3)
    assert got[3].dtype == np.int64 and list(got[3]) == [1, 2]
    with pytest.raises(ProtocolError, match="does not fit shape"):
        decode_array(([2, 2], b"\x00" * 8))
    with pytest.raises(TypeError):
        encode_array(np.zeros(2))


@pytest.mark.parametrize("bad, why", [
    ((), r"\[rows, signs\]"),
    (("rows", (1,)), "arrays"),
    ((((1,), (2,)), (1,)), "2 rows but 1 signs"),
    ((((1,), [2]), (1, 1)), "rows must be arrays"),
    ((((1,),), ("1",)), "signs must be integers"),
    ((((1,),), (True,)), "signs must be integers"),
])
def test_batch_shape_checked(bad, why):
    with pytest.raises(ProtocolError, match=why):
        decode_batch(bad)


@pytest.mark.parametrize("bad, why", [
    (("a", "b", ((), ()), 1, None), "must be"),
    (("a", 2, ((), ()), 1, None, 0), "strings"),
    (("a", "b", ((), ()), 1, b"\x00" * 7, 0), "clock"),
    (("a", "b", ((), ()), 1, [1, "2"], 0), "clock"),
    (("a", "b", ((1,), ()), 1, None, 0), "1 rows but 0 signs"),
])
def test_message_shape_checked(bad, why):
    with pytest.raises(ProtocolError, match=why):
        decode_message(bad)


def test_a_1000_row_message_round_trips():
    """(Its speed is a benchmark: bench/test_wire.py.)"""
    rows = [(i, i * 7) for i in range(1000)]
    msg = Message("join_3#1", "agg_4#1", Batch(rows, [1] * 1000), 123, (4, 9, 8, 7, 0), 7)
    for back in (decode_message(encode_message(msg)),
                 decode_message(unpackb(packb(encode_message(msg))))):
        assert back.batch.rows == rows and back.batch.signs == [1] * 1000
        assert (back.src, back.dst, back.time, back.clock, back.low) == \
            ("join_3#1", "agg_4#1", 123, (4, 9, 8, 7, 0), 7)


# ---------------------------------------------------------------- handshake

def _mac(token, who, nonce):
    return hmac.new((token or "").encode(), who + nonce, hashlib.sha256).digest()


def test_handshake_right_token(conns):
    srv, cli = conns
    done = in_thread(server_handshake, srv, "s3cret", "worker")
    welcome = client_handshake(cli, "s3cret", {"role": "worker", "name": "w1", "pid": 42})
    assert done() == {"role": "worker", "name": "w1", "pid": 42}
    assert welcome == {}
    assert srv.sock.gettimeout() is None and cli.sock.gettimeout() is None
    cli.send(["after", 1])                          # the connection is usable afterwards
    assert srv.recv() == ("after", 1)


def test_handshake_none_token(conns):
    srv, cli = conns
    done = in_thread(server_handshake, srv, None)
    client_handshake(cli, None, {"role": "client"})
    assert done() == {"role": "client"}


@pytest.mark.parametrize("server_token, client_token", [
    ("right", "wrong"), ("right", None), (None, "extra")])
def test_handshake_wrong_token_refused_on_both_sides(conns, server_token, client_token):
    srv, cli = conns
    done = in_thread(server_handshake, srv, server_token)
    with pytest.raises(AuthError, match="refused by .*wrong token"):
        client_handshake(cli, client_token, {"role": "client"})
    with pytest.raises(AuthError, match="wrong token"):
        done()


def test_handshake_wrong_role(conns):
    srv, cli = conns
    done = in_thread(server_handshake, srv, "t", "worker")
    with pytest.raises(AuthError, match="expected role 'worker'"):
        client_handshake(cli, "t", {"role": "client"})
    with pytest.raises(AuthError):
        done()


def test_client_refuses_server_without_token(conns):
    srv, cli = conns

    def impostor():                                 # accepts anyone, cannot prove the token
        nonce = b"n" * 32
        srv.send({"op": "challenge", "nonce": nonce})
        hello = srv.recv()
        srv.send({"op": "welcome", "mac": _mac("guess", b"server", hello["nonce"])})
    done = in_thread(impostor)
    with pytest.raises(AuthError, match="does not know the token"):
        client_handshake(cli, "s3cret", {"role": "client"})
    done()


def test_client_refuses_replayed_server_mac(conns):
    """The server's mac is over the client's fresh nonce: one from another session fails."""
    srv, cli = conns

    def replayer():
        srv.send({"op": "challenge", "nonce": b"n" * 32})
        srv.recv()
        srv.send({"op": "welcome", "mac": _mac("s3cret", b"server", b"old" * 11)})
    done = in_thread(replayer)
    with pytest.raises(AuthError):
        client_handshake(cli, "s3cret", {"role": "client"})
    done()


def test_server_refuses_reflected_mac(conns):
    """A client mac computed with the server's label (a reflection) does not pass."""
    srv, cli = conns
    done = in_thread(server_handshake, srv, "t")
    challenge = cli.recv()
    cli.send({"op": "hello", "mac": _mac("t", b"server", challenge["nonce"]), "nonce": b"m" * 32})
    assert cli.recv()["op"] == "refused"
    with pytest.raises(AuthError):
        done()


class _ReadsWatched:
    """A socket whose reads record the timeout in force, and refuse to block without
    one (a read of a silent client's socket without a timeout would never return)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.timeouts: list[float | None] = []

    def recv_into(self, *args):
        self.timeouts.append(self.sock.gettimeout())
        assert self.timeouts[-1] is not None, "a handshake read without a timeout"
        return self.sock.recv_into(*args)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def test_silent_client_times_out(conns):
    """Every read of the handshake is under its timeout, so a silent client is dropped
    when the timeout runs out; the socket blocks again afterwards."""
    srv, cli = conns
    srv.sock = watched = _ReadsWatched(srv.sock)
    with pytest.raises(ProtocolError, match="timed out after 0.3 s"):
        server_handshake(srv, "t", timeout=0.3)
    assert watched.timeouts and set(watched.timeouts) == {0.3}
    assert srv.sock.gettimeout() is None
    srv.sock = watched.sock


def test_huge_hello_refused(conns):
    srv, cli = conns
    done = in_thread(server_handshake, srv, "t")
    cli.recv()
    cli.sock.sendall(struct.pack(">I", 10_000_000))  # announced, never sent
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        done()
    assert srv.max_frame == wire.MAX_FRAME


def test_a_hello_in_several_frames_refused(conns):
    """Before the client has proven the token, a message is one frame: a length
    marked ``_MORE`` is refused, however small, and the limits come back after."""
    srv, cli = conns
    done = in_thread(server_handshake, srv, "t")
    cli.recv()
    cli.sock.sendall(struct.pack(">I", 10 | wire._MORE) + b"x" * 10)
    with pytest.raises(ProtocolError, match="10 bytes and more"):
        done()
    assert (srv.max_frame, srv.max_message) == (wire.MAX_FRAME, wire.MAX_MESSAGE)


def test_malformed_hello(conns):
    srv, cli = conns
    done = in_thread(server_handshake, srv, "t")
    cli.recv()
    cli.send({"op": "hello", "mac": "not bytes", "nonce": b"short"})
    with pytest.raises(ProtocolError, match="expected a hello"):
        done()


def test_hello_cannot_override_protocol_keys(conns):
    _, cli = conns
    with pytest.raises(ValueError, match="op, mac or nonce"):
        client_handshake(cli, "t", {"role": "client", "mac": b"x"})


def test_module_defaults():
    assert wire.MAX_FRAME == 256 * 1024 * 1024
    assert issubclass(wire.AuthError, wire.ProtocolError)
    assert issubclass(wire.ConnectionClosed, wire.ProtocolError)


# ---------------------------------------------------------------- checkpoints and columns

def _over_wire(obj):
    return unpackb(packb(obj))


@pytest.mark.parametrize("cols", [
    [np.array([1, 2, 3], dtype=np.int64), np.array([0.5, -1.0, 2.25])],
    [np.array([7, 8], dtype=np.int64), wire.np.array(["a", None], dtype=object)],
    [np.array([datetime.date(2024, 1, 2), None], dtype=object)],
])
def test_columnar_batches_stay_columnar(cols):
    b = Batch.columnar(cols, np.array([1, -1, 2][:len(cols[0])], dtype=np.int64))
    enc = encode_batch(b)
    assert enc[0] == "c"
    back = decode_batch(_over_wire(enc))
    assert back.cols is not None and [c.dtype for c in back.cols] == [c.dtype for c in cols]
    assert back.rows == b.rows and back.signs == b.signs


def test_an_insert_sends_its_signs_as_a_count():
    """Signs all 1 (every client write) cross as the row count, not 8 bytes a row."""
    n = 1000
    b = Batch.columnar([np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)],
                       np.ones(n, dtype=np.int64))
    enc = encode_batch(b)
    assert enc[2] == n
    back = decode_batch(_over_wire(enc))
    assert back.rows == b.rows and back.signs == [1] * n and back.sign_array.dtype == np.int64
    mixed = Batch.columnar([np.arange(3, dtype=np.int64)], np.array([1, 1, -1]))
    assert decode_batch(_over_wire(encode_batch(mixed))).signs == [1, 1, -1]


@pytest.mark.parametrize("bad", [
    ["c", [["i", b"\0" * 8]], b"\0" * 16],           # a column shorter than the signs
    ["c", [["i", b"\0" * 8]], 2],                    # ... than the count of signs
    ["c", [["i", b""]], -1],                         # a negative count
    ["c", [["i", b"\0" * 8]], True],                 # not a count
    ["c", [["x", b"\0" * 8]], b"\0" * 8],            # an unknown kind
    ["c", [], b""],                                  # no columns
    ["c", [["o", [1, 2]]], b"\0" * 7],               # signs not whole int64s
])
def test_malformed_columnar_batches_are_refused(bad):
    with pytest.raises(ProtocolError):
        decode_batch(bad)


def test_dense_join_sides_cross_the_wire_whole():
    """A join side held as arrays (one row per int key) is copied as arrays; after the
    codec it is the same side: same rows, same typed parts, the same join output."""
    from noria_py.ops.join import Join
    j = Join("inner", (0,), (0,), 3, 2)
    n = 2000
    keys = np.arange(n, dtype=np.int64)
    j.process(0, Batch.columnar([keys, keys * 2, np.arange(n) * 0.5], np.ones(n, dtype=np.int64)))
    j.process(1, Batch.columnar([keys, np.array([f"s{i}" for i in range(n)], dtype=object)],
                                np.ones(n, dtype=np.int64)))
    sides = j.array_state()
    assert set(sides) == {0, 1}, "both sides dense (else this test checks nothing)"
    copy = Join("inner", (0,), (0,), 3, 2)
    for port, rows in sides.items():
        back = wire.decode_dense(_over_wire(wire.encode_dense(rows)))
        assert [p.dtype for p in back.parts] == [p.dtype for p in rows.parts]
        assert back.key == rows.key and len(back) == len(rows)
        copy.load_array_state(port, back)
    assert sorted(copy.snapshot().rows) == sorted(j.snapshot().rows)
    probe = Batch.inserts([(5, "x"), (n + 3, "y")])
    assert copy.process(1, probe).rows == j.process(1, probe).rows


def test_checkpoints_cross_the_wire():
    from noria_py.ops.accumulators import Min, Sum
    from noria_py.ops.state import DenseCounts
    from noria_py.runtime.checkpoints import Checkpoint
    s, m = Sum(), Min()
    for v in (3, 4.5, 1 << 62, 1 << 62):
        s.update(v, 1)
        m.update(v, 1)
    ck = Checkpoint(9, {"n1": 4, "n2": 7}, "keyed",
                    entries={("a", 1): (2, s, m), "b": None})
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(ck)))
    assert (back.time, back.parent_times, back.form) == (9, {"n1": 4, "n2": 7}, "keyed")
    e = back.entries[("a", 1)]
    assert e[0] == 2 and e[1].value() == s.value() and e[2].value() == 3
    assert back.entries["b"] is None
    counts = Checkpoint(3, {}, "keyed", entries=DenseCounts(np.array([0, 4, 1]), {2: 1}))
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(counts)))
    assert back.entries.counts.tolist() == [0, 4, 1] and back.entries.nulls == {2: 1}
    rows = Checkpoint(5, {"n1": 5}, "input", inputs=[Batch([(1, "a")], [2])])
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(rows)))
    assert back.inputs[0].rows == [(1, "a")] and back.inputs[0].signs == [2]
    part = SortedKeyList([(1, "b", 3), (1, "a", 5)], key=lambda r: -r[2])
    topk = Checkpoint(4, {}, "keyed", entries={(1,): part, (2,): None})
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(topk)))
    assert back.entries == {(1,): [(1, "a", 5), (1, "b", 3)], (2,): None}  # (in order)


def test_a_checkpoint_frame_carries_the_nodes_clock_to_the_controllers_store():
    """A worker's ``ck`` frame (``RemoteStore.put``), through the codec, into the
    controller's store (``ClusterRuntime._checkpoint_frame``): the checkpoint read back
    for a recovery holds the node's tree clock as of then, which lets a parent lost
    with the node restart no later than it (the SIGKILL test is in test_cluster.py,
    slow); and ``restore`` hands it on to the spare (``encode_checkpoint(clock=True)``),
    while on disk a checkpoint goes without (a reopened node's clock starts afresh)."""
    import threading
    from types import SimpleNamespace

    from noria_py.runtime.checkpoints import CheckpointStore
    from noria_py.runtime.cluster.controller import ClusterRuntime
    from noria_py.runtime.cluster.worker import RemoteStore

    frames: list = []
    sent = RemoteStore(frames.append)
    clock = np.array([12, 7, 5, 0], dtype=np.int64)
    sent.put("n5", 12, {"n3": 7}, "input", [(0, Batch.inserts([(1, "a")]))], True, 0,
             clock=clock)
    sent.put("n5", 20, {"n3": 11}, "input", [(0, Batch.inserts([(2, "b")]))], False, 0)
    controller = SimpleNamespace(store=CheckpointStore(), store_lock=threading.Lock())
    for f in frames:
        ClusterRuntime._checkpoint_frame(controller, _over_wire(f))
    ck = controller.store.latest("n5", 12)
    assert ck is not None and ck.clock is not None and ck.clock.tolist() == clock.tolist()
    assert controller.store.latest("n5", 20).clock is None       # (sent without one)
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(ck, clock=True)))
    assert back.clock is not None and back.clock.tolist() == clock.tolist()
    assert wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(ck))).clock is None
    with pytest.raises(ProtocolError):                   # (the frame before the clock)
        ClusterRuntime._checkpoint_frame(controller, _over_wire(frames[0][:8]))


@pytest.mark.parametrize("bad", [
    [1, {}, "keyed", [], ["keys", [[1, ["x"]]]]],            # an entry without a row count
    [1, {}, "keyed", [], ["keys", [[1, [1, ["mode", 2]]]]]],  # an unknown accumulator
    [1, {}, "other", [], ["keys", []]],                      # an unknown form
    [1, {}, "keyed", [], ["keys", [[1, ["rows", []]]]]],      # a TopK partition of no rows
    [1, {}, "keyed", [], ["keys", [[1, ["rows", [5]]]]]],     # ... of a row not a row
    [1, {"n1": "4"}, "input", [], ["keys", []]],              # a parent time not an int
    [1, {}, "input", [["d", [0, 1, b"\1", [["i", b"\0" * 16]]]]], ["keys", []]],  # parts != mask
    [1, {}, "input", [["d", [0, 2, b"\1\0", [["i", b"\0" * 16]]]]], ["keys", []]],  # n wrong
])
def test_malformed_checkpoints_are_refused(bad):
    with pytest.raises(ProtocolError):
        wire.decode_checkpoint(bad)


def test_an_announced_frame_holds_only_the_bytes_that_came():
    """A peer announcing a 200 MB frame and sending 1 MB costs about 1 MB, not 200:
    the payload grows as it arrives (eight such connections took a controller to 2.2 GB
    when the announced size was allocated up front)."""
    import tracemalloc
    a, b = tcp_pair()
    conn = Connection(b)
    conn.sock.settimeout(5)
    sent = 1 << 20

    def peer():
        a.sendall(struct.pack(">I", 200 << 20) + b"x" * sent)
        a.close()
    t = threading.Thread(target=peer)
    tracemalloc.start()
    try:
        t.start()
        with pytest.raises(ConnectionClosed, match=f"after {sent + 4} of"):
            conn.recv()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        t.join()
        conn.close()
    assert peak < 8 * sent, peak


def test_nan_crosses_the_wire_as_the_one_nan():
    """Rows, keys and MIN/MAX checkpoints decoded hold the engine's one NaN (msgpack makes
    a new float per value; noria_py/nan.py), so they match the rows already held."""
    import math

    from noria_py.ops.accumulators import Max
    from noria_py.runtime.checkpoints import Checkpoint
    other = struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]
    rows = Batch([(other, 1), (float("nan"), 2)], [1, -1])
    back = decode_batch(_over_wire(encode_batch(rows)))
    assert all(r[0] is math.nan for r in back.rows)
    cols = Batch.columnar([np.array([np.nan, 1.0]), np.array([1, 2], dtype=np.int64)],
                          np.ones(2, dtype=np.int64))
    back = decode_batch(_over_wire(encode_batch(cols)))
    assert back.rows[0][0] is math.nan
    m = Max()
    for v in (other, 2.0):
        m.update(v, 1)
    ck = Checkpoint(1, {}, "keyed", entries={(float("nan"),): (2, m)})
    back = wire.decode_checkpoint(_over_wire(wire.encode_checkpoint(ck)))
    (key, (n, acc)), = back.entries.items()
    assert key[0] is math.nan and acc.value() is math.nan
    acc.update(float("nan"), -1)
    assert acc.value() == 2.0


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_a_stopped_port_accepts_nothing_more(family):
    """``Admission.stop`` ends the port at once: the next connection is refused and
    never reaches the handler, and the accept loop has ended (a port closed from
    another thread than its accept loop's goes on listening on Linux, and hands one
    more connection to the stopped port's handler)."""
    if family == "tcp":
        listening = socket.create_server(("127.0.0.1", 0))
        address = listening.getsockname()

        def dial():
            return socket.create_connection(address, timeout=2)
    else:
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = f"\0noria-py-test-stop-{id(listening)}"
        listening.bind(address)
        listening.listen()

        def dial():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(address)
            return s
    handled = []
    admission = wire.Admission(8, logging.getLogger("test"))
    admission.serve(listening, lambda s: (handled.append(s), s.close()), "test-stop")
    dial().close()                                  # served while open
    deadline = time.monotonic() + 5
    while not handled and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(handled) == 1
    time.sleep(0.05)                                # the loop back in accept()
    admission.stop(listening)
    with pytest.raises(ConnectionRefusedError):
        dial()
    deadline = time.monotonic() + 5
    while (any(t.name == "test-stop-accept" for t in threading.enumerate())
           and time.monotonic() < deadline):
        time.sleep(0.01)
    assert not any(t.name == "test-stop-accept" for t in threading.enumerate())
    assert listening.fileno() == -1                 # closed by the loop
    assert len(handled) == 1


def test_stopping_a_port_never_served_closes_it():
    listening = socket.create_server(("127.0.0.1", 0))
    wire.Admission(8, logging.getLogger("test")).stop(listening)
    assert listening.fileno() == -1


def test_a_delta_without_the_parts_left_unchanged_crosses_the_wire():
    """A dense state's delta leaves out the parts no batch changed (None): they cross
    as such, and the store's copy put with it keeps its own values there."""
    from noria_py.ops.dense import DenseRows, object_column
    live = DenseRows(3, key=0)
    keys = np.arange(6, dtype=np.int64)
    live.apply(keys, [keys, object_column([f"t{i}" for i in range(6)]), keys * 10],
               np.ones(6, dtype=np.int64))
    store = live.copy()
    live.changed(keys[:0])
    at = np.array([1, 4], dtype=np.int64)
    old = [live.get(1), live.get(4)]
    new = [(k, r[1], r[2] + 1) for k, r in zip((1, 4), old)]
    live.apply(np.concatenate([at, at]),
               [object_column([r[i] for r in old + new]) if i == 1 else
                np.array([r[i] for r in old + new], dtype=np.int64) for i in range(3)],
               np.array([-1, -1, 1, 1], dtype=np.int64))
    delta = live.changed(at)
    assert delta.parts[0] is None and delta.parts[1] is None
    assert delta.present is None        # (rewrites in place: every key kept its row)
    back = wire.decode_delta("input", _over_wire(wire.encode_delta("input", [(0, delta)])))
    (port, got), = back
    assert port == 0 and got.parts[:2] == [None, None] and got.present is None
    assert got.parts[2].tolist() == [11, 41]
    store.put(got)
    assert dict(store.items()) == dict(live.items())
    # a key losing its row: the mask crosses too
    live.apply(at[:1], [np.array([c], dtype=object if i == 1 else np.int64)
                        for i, c in enumerate(new[0])], np.array([-1], dtype=np.int64))
    back = wire.decode_delta("input", _over_wire(wire.encode_delta(
        "input", [(0, live.changed(at[:1]))])))
    (_, got), = back
    assert got.present is not None and got.present.tolist() == [False]
    store.put(got)
    assert dict(store.items()) == dict(live.items()) and len(store) == len(live) == 5
