"""Direct channels between workers (``runtime/cluster/channels.py``, the worker's side
in ``worker.py``, ``wait`` in ``controller.py``): the rules recovery relies on, each
checked on its own, then a real cluster whose controller relays nothing."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from noria_py.batch import Batch
from noria_py.graph import Graph
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.channels import CONTROLLER, Inbox, Links, PeerServer, counted
from noria_py.runtime.cluster.controller import ClusterRuntime
from noria_py.runtime.cluster.worker import Worker
from noria_py.runtime.messages import Message


class _Domain:
    """Stands for a node shard's domain: records what it handles."""

    def __init__(self) -> None:
        self.alive = True
        self.time = 0
        self.handled: list[tuple[str, int]] = []

    def check_incoming(self, m: Message) -> None:
        pass

    def handle(self, m: Message) -> list[Message]:
        self.handled.append((m.src, m.time))
        self.time += 1
        return []

    def ack_due(self) -> bool:
        return False


def _worker() -> tuple[Worker, socket.socket]:
    """A direct-channels worker named w1 whose controller is the returned socket."""
    ours, theirs = socket.socketpair()
    w = Worker(wire.Connection(ours), "w1", 1, clocks=False, channels="direct")
    return w, theirs


def _msg(src: str, dst: str, t: int) -> Message:
    return Message(src, dst, Batch([(t,)], [1]), t)


def test_messages_for_a_node_being_recovered_are_held_then_released_in_order():
    w, ctl = _worker()
    d = w.domains["n"] = _Domain()              # type: ignore[assignment]
    w.holding["n"] = []                         # (as ``host`` leaves it)
    for t in (1, 2, 3):
        w.deliver(_msg("a", "n", t), "w2")
    w.deliver(_msg("b", "n", 1), "w3")
    assert d.handled == []
    w.release(["n"])
    assert d.handled == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    w.deliver(_msg("a", "n", 4), "w2")          # released: straight through
    assert d.handled[-1] == ("a", 4)
    ctl.close()


def test_the_fence_drops_what_a_lost_worker_sent_and_anything_after_it():
    """``["lost", w2]`` from the controller: what w2 sent that is held is dropped, and
    no frame of w2's is handled after it (a witness asked next has its final log)."""
    w, ctl = _worker()
    n = w.domains["n"] = _Domain()              # type: ignore[assignment]
    r = w.domains["r"] = _Domain()              # type: ignore[assignment]
    w.holding["r"] = []
    w.deliver(_msg("a", "r", 1), "w2")          # held, from the worker about to be lost
    w.deliver(_msg("c", "r", 1), "w3")
    inbox = w.inbox
    enc = wire.encode_message
    inbox.put(("w2", ["msg", "n", enc(_msg("a", "n", 1))]))    # before the fence: taken
    inbox.put((CONTROLLER, ["lost", "w2"]))
    inbox.put(("w2", ["msg", "n", enc(_msg("a", "n", 2))]))    # after it: never
    inbox.put(("w3", ["msg", "n", enc(_msg("c", "n", 1))]))
    inbox.put((CONTROLLER, ["release", ["r"]]))
    inbox.put((CONTROLLER, ["stop"]))
    w.run_direct()
    assert n.handled == [("a", 1), ("c", 1)]
    assert r.handled == [("c", 1)]
    assert w.links.handled == {"w2": 1, "w3": 1}
    ctl.close()


def test_what_a_busy_worker_produces_is_sent_while_its_inbox_is_never_empty():
    w, ctl = _worker()
    w.domains["n"] = _Domain()                  # type: ignore[assignment]
    flushes: list[int] = []
    w.links.flush = lambda: flushes.append(w.inbox.q.qsize())    # type: ignore[method-assign]
    enc = wire.encode_message
    for t in range(1, 201):
        w.inbox.put(("w2", ["msg", "n", enc(_msg("a", "n", t))]))
    w.inbox.put((CONTROLLER, ["stop"]))
    w.run_direct()
    assert len(flushes) >= 3 and all(left > 0 for left in flushes[:3])
    ctl.close()


def test_a_peer_may_send_data_only():
    w, ctl = _worker()
    w.inbox.put(("w2", ["req", 1, "crash", ["n"]]))
    w.inbox.put((CONTROLLER, ["stop"]))
    with pytest.raises(wire.ProtocolError, match="'req' from peer w2"):
        w.run_direct()
    ctl.close()


def test_messages_for_a_lost_workers_nodes_wait_at_the_sender_for_their_placement():
    w, ctl = _worker()
    w.placement.update({"n": "w2", "m": "w2"})
    w.links.peers.update({"w2": ("127.0.0.1", 1), "w3": ("127.0.0.1", 1)})
    w.lose("w2")
    w.route("n", ["msg", "n", _msg("a", "n", 1)])
    w.route("n", ["progress", "n", "a", 1, {}, None])       # (a report: dropped)
    w.route("m", ["msg", "m", _msg("a", "m", 1)])
    w.route("n", ["msg", "n", _msg("a", "n", 2)])
    assert w.links.out.get("w2") is None and w.links.sent == {}
    w.place({"n": "w3"})
    sent = w.links.out["w3"]
    assert [(f[1], f[2][3]) for f in sent] == [("n", 1), ("n", 2)]   # in order, encoded
    assert list(w.pending) == ["m"]                         # still unplaced
    ctl.close()


def test_a_node_given_up_on_has_its_messages_dropped_wherever_held():
    """``crash`` of a node restored then given up on (``ClusterRuntime._abandon``): its
    messages held at the sender are dropped, and ``drop_from`` follows them on each
    link and in the worker's own inbox, so a receiver drops those it holds."""
    w, ctl = _worker()
    w.domains["b"] = _Domain()                  # type: ignore[assignment]
    w.placement.update({"x": "w2", "y": "w3"})
    w.links.peers.update({"w3": ("127.0.0.1", 1)})
    w.lost_workers.add("w2")
    w.route("x", ["msg", "x", _msg("b", "x", 1)])
    w.route("y", ["msg", "y", _msg("b", "y", 1)])
    w.domains["b"].crash = lambda: None         # type: ignore[attr-defined]
    w.req_crash("b")
    assert w.pending == {"x": []}
    assert w.links.out["w3"][-1] == ["drop_from", ["b"]]
    assert w.inbox.get_nowait() == ("w1", ["drop_from", ["b"]])
    assert "b" in w.holding
    # at a receiver
    w.holding["z"] = [("w3", _msg("b", "z", 1)), ("w3", _msg("c", "z", 1))]
    w.drop_from(["b"])
    assert [(m.src, m.time) for _, m in w.holding["z"]] == [("c", 1)]
    ctl.close()


def test_peer_links_prove_the_token_and_carry_frames_in_order():
    inbox = Inbox()
    server = PeerServer(inbox, "127.0.0.1", 0, "tok")
    broken: list[str] = []
    try:
        bad = Links("w9", "nope", lambda peer, e: broken.append(peer))
        bad.peers["w1"] = server.address
        bad.send("w1", ["msg", "n", 1])
        bad.flush()
        assert broken == ["w1"] and inbox.empty()
        good = Links("w2", "tok", lambda peer, e: broken.append(peer))
        good.peers["w1"] = server.address
        for i in range(200):
            good.send("w1", ["trunc", "a", "b", i])
            if i % 7 == 0:
                good.flush()
        good.flush()
        got = [inbox.get(timeout=10) for _ in range(200)]
        assert [s for s, _ in got] == ["w2"] * 200
        assert [f[3] for _, f in got] == list(range(200))
        assert good.sent == {"w1": 200}
        good.close()
    finally:
        server.close()


def test_with_tls_a_peer_link_is_tls_only(certificate, monkeypatch):
    """A cluster served with TLS (``serve --tls-cert``) carries its peer links over TLS
    too: a link that does not speak it is refused, one that does carries frames."""
    from noria_py.runtime.cluster import channels
    from noria_py.tls import client_context, server_context
    monkeypatch.setattr(channels, "DIAL_TRIES", 1)          # (the plain one waits for
    monkeypatch.setattr(channels, "DIAL_TIMEOUT", 1.0)      # a challenge that never comes)
    cert, key = certificate
    inbox = Inbox()
    server = PeerServer(inbox, "127.0.0.1", 0, "tok", tls=server_context(cert, key))
    broken: list[str] = []
    try:
        plain = Links("w9", "tok", lambda peer, e: broken.append(peer))
        plain.peers["w1"] = server.address
        plain.send("w1", ["trunc", "a", "b", 1])
        plain.flush()
        assert broken == ["w1"] and inbox.empty()
        tls = Links("w2", "tok", lambda peer, e: broken.append(peer), client_context(cert))
        tls.peers["w1"] = server.address
        tls.send("w1", ["trunc", "a", "b", 2])
        tls.flush()
        assert inbox.get(timeout=10) == ("w2", ("trunc", "a", "b", 2))
        assert broken == ["w1"]
        tls.close()
    finally:
        server.close()


class _StalledInbox(Inbox):
    """Its reader takes one frame, then stalls where a thread can be preempted past
    its checks on the way into OpenSSL's read (which keeps the descriptor's number):
    until ``go``, then it reads as that thread would."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled, self.go, self.done = (threading.Event() for _ in range(3))
        self.got = b""

    def read(self, source, conn, on_end=None, fast=False):  # type: ignore[no-untyped-def]
        try:
            self.put((source, conn.recv()))
            sslobj = conn.sock._sslobj
            self.stalled.set()
            self.go.wait(10)
            try:
                self.got = sslobj.read(1024)
            except OSError:
                pass
        finally:
            self.done.set()


def test_a_link_ended_by_the_server_keeps_its_descriptor_until_its_reader_ends(certificate):
    """``PeerServer.close`` (or ``cut``) while a link's reader is on its way into a read:
    the link is shut down, and closed by its reader, so no socket opened meanwhile gets
    its descriptor and loses bytes to that read (a TLS record's header, 5 bytes: the
    next test's controller saw ``peer_lost`` without its frame's first 5)."""
    from noria_py.tls import client_context, server_context
    cert, key = certificate
    inbox = _StalledInbox()
    server = PeerServer(inbox, "127.0.0.1", 0, "tok", tls=server_context(cert, key))
    link = Links("w2", "tok", lambda peer, e: None, client_context(cert))
    link.peers["w1"] = server.address
    link.send("w1", ["trunc", "a", "b", 1])
    link.flush()
    pairs: list[tuple[socket.socket, socket.socket]] = []
    try:
        assert inbox.get(timeout=10) == ("w2", ("trunc", "a", "b", 1))
        assert inbox.stalled.wait(10)
        server.close()
        link.close()
        pairs = [socket.socketpair() for _ in range(4)]     # (the lowest numbers free)
        for a, b in pairs:
            wire.Connection(a).send(["peer_lost", "w2"])
            wire.Connection(b).send(["peer_lost", "w3"])
        inbox.go.set()
        assert inbox.done.wait(10)
        assert inbox.got == b""
        for a, b in pairs:
            a.settimeout(5)
            b.settimeout(5)
            assert wire.Connection(b).recv() == ("peer_lost", "w2")
            assert wire.Connection(a).recv() == ("peer_lost", "w3")
    finally:
        inbox.go.set()
        server.close()
        for a, b in pairs:
            a.close()
            b.close()


def test_a_link_that_cannot_be_dialed_is_reported_to_the_controller():
    """The receiver must then count as lost (the controller kills it): a message is
    never dropped while its receiver goes on."""
    w, ctl = _worker()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                   # (closed: nobody listens there)
    w.links.peers["w2"] = ("127.0.0.1", port)
    w.placement["n"] = "w2"
    w.route("n", ["msg", "n", _msg("a", "n", 1)])
    w.links.flush()
    ctl.settimeout(10)
    assert wire.Connection(ctl).recv() == ("peer_lost", "w2")
    assert "w2" in w.links.broken
    ctl.close()


class _Counts:
    """Each worker's (sent, handled) counts per round, as ``req_counts`` answers."""

    def __init__(self, rounds: list[dict[str, tuple[dict[str, int], dict[str, int]]]]) -> None:
        self.rounds = rounds
        self.asked = 0

    def __call__(self) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        r = self.rounds[min(self.asked, len(self.rounds) - 1)]
        self.asked += 1
        return r


@pytest.fixture
def runtime():
    rt = ClusterRuntime(Graph(), channels="direct")
    yield rt
    rt.closed = True


def test_wait_with_direct_channels_waits_until_every_frame_sent_is_handled(runtime, monkeypatch):
    counts = _Counts([
        {"w1": ({"w2": 5}, {}), "w2": ({}, {})},                   # the writes' sends
        {"w1": ({"w2": 5}, {}), "w2": ({}, {"w1": 3})},            # 2 in flight
        {"w1": ({"w2": 5}, {}), "w2": ({"w1": 2}, {"w1": 5})},     # done, and sent on
        {"w1": ({"w2": 5}, {}), "w2": ({"w1": 2}, {"w1": 5})},     # w1 not yet
        {"w1": ({"w2": 5}, {"w2": 2}), "w2": ({"w1": 2}, {"w1": 5})},
        {"w1": ({"w2": 5}, {"w2": 2}), "w2": ({"w1": 2}, {"w1": 5})},
    ])
    monkeypatch.setattr(runtime, "_counts", counts)
    monkeypatch.setattr(runtime, "_depth", lambda: 3)
    runtime.wait()
    assert counts.asked == 5          # (the fifth shows nothing more was sent)


def test_wait_with_direct_channels_ignores_a_lost_worker(runtime, monkeypatch):
    """What was sent to a worker now lost is recovered, not waited for."""
    counts = _Counts([
        {"w1": ({"w2": 5, "w3": 4}, {}), "w2": ({}, {})},
        {"w1": ({"w2": 5, "w3": 4}, {}), "w2": ({}, {"w1": 5})},
    ])
    monkeypatch.setattr(runtime, "_counts", counts)
    monkeypatch.setattr(runtime, "_depth", lambda: 2)
    runtime.wait()
    assert counts.asked == 2


def test_direct_channels_keep_the_controller_off_the_data_path():
    """A real cluster, in this process's controller: with ``--channels direct`` it
    relays no message between workers, and the views are right after ``wait``."""
    from noria_py.runtime.cluster.server import Server
    server = Server(port=0, workers=2, shards=2, channels="direct")
    try:
        db = server.db
        db.execute("CREATE TABLE vote (a INT, u INT)")
        db.execute("CREATE TABLE article (a INT, title TEXT)")
        db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote GROUP BY a")
        db.execute("CREATE VIEW t AS SELECT article.a, title, n FROM article "
                   "JOIN c ON article.a = c.a WHERE article.a = ?")
        db.table("article").insert([(a, f"t{a}") for a in range(10)])
        for i in range(20):
            db.table("vote").insert([(j % 10, j) for j in range(i * 50, (i + 1) * 50)])
        db.wait()
        assert [list(db.view("t").lookup(a)) for a in range(10)] == [
            [(a, f"t{a}", 100)] for a in range(10)]
        assert server.runtime.relayed == 0
        workers = {n["worker"] for n in db.graph()}
        assert len(workers) == 2            # (so the edges do cross workers)
    finally:
        server.stopped.set()
        server.close()


def test_channels_must_be_relay_or_direct():
    from noria_py import ArgumentError
    with pytest.raises(ArgumentError, match="channels must be one of relay, direct"):
        ClusterRuntime(Graph(), channels="carrier-pigeon")


def test_an_inbox_ends_with_its_connections_error():
    a, b = socket.socketpair()
    inbox = Inbox()
    t = threading.Thread(target=inbox.read, args=(CONTROLLER, wire.Connection(a)))
    t.start()
    wire.Connection(b).send(["hb"])
    b.close()
    t.join(5)
    assert inbox.get(timeout=1) == (CONTROLLER, ("hb",))
    src, e = inbox.get(timeout=1)
    assert src == CONTROLLER and isinstance(e, wire.ConnectionClosed)
    a.close()
    time.sleep(0)


# ------------------------------------------------------------ the inbox's fast lane


def _fed(inbox: Inbox, source: str, frames: list[list[object]], fast: bool) -> None:
    """``frames`` sent on a connection whose reader puts them in ``inbox`` as
    ``source``'s (``Inbox.read``), all of them there when this returns."""
    a, b = socket.socketpair()
    sender, receiver = wire.Connection(a), wire.Connection(b)
    reader = threading.Thread(target=inbox.read, args=(source, receiver, lambda s, e: None),
                              kwargs={"fast": fast}, daemon=True)
    reader.start()
    for f in frames:
        sender.send(f)
    sender.close()
    reader.join(10)
    receiver.close()


def _taken(inbox: Inbox, n: int) -> list[tuple[str, object]]:
    def idle() -> None:
        raise AssertionError("the inbox ran dry")
    return [inbox.take(idle) for _ in range(n)]


def test_a_base_logs_frames_pass_the_data_frames_queued_before_them_in_their_own_order():
    inbox = Inbox()
    _fed(inbox, "w2", [["trunc", "a", "b", 1], ["rlog", "n1", [], [7]],
                       ["progress", "a"], ["rdur", "n2", 1], ["rtrim", "n1", 0]], fast=True)
    _fed(inbox, CONTROLLER, [["rdur", "n3", 1]], fast=False)     # (not a peer's: in turn)
    got = _taken(inbox, 6)
    assert [f[0] for _, f in got] == ["rlog", "rdur", "rtrim", "trunc", "progress", "rdur"]
    assert [s for s, _ in got] == ["w2"] * 5 + [CONTROLLER]
    assert inbox.q.empty() and inbox.fast.empty()     # (no wake-up left to take)


def test_a_clients_write_passes_the_data_frames_but_never_a_controllers_frame():
    inbox = Inbox()
    _fed(inbox, "w2", [["trunc", "a", "b", 1]], fast=True)
    inbox.put_client(("client", ["cw", 1]))
    assert [f[0] for _, f in _taken(inbox, 2)] == ["cw", "trunc"]
    _fed(inbox, CONTROLLER, [["pause", 5]], fast=False)
    inbox.put_client(("client", ["cw", 2]))             # (behind the pause)
    _fed(inbox, "w2", [["rdur", "n1", 1]], fast=True)
    assert [f[:2] for _, f in _taken(inbox, 3)] == [("rdur", "n1"), ("pause", 5), ["cw", 2]]
    inbox.put_client(("client", ["cw", 3]))             # (the pause taken: fast again)
    _fed(inbox, "w2", [["trunc", "a", "b", 2]], fast=True)
    inbox.q.put(("w1", ["msg", "x"]))
    assert [f[0] for _, f in _taken(inbox, 3)] == ["cw", "trunc", "msg"]


def test_a_whole_logs_parts_let_the_ordinary_frames_waiting_go_first_in_each_lanes_order():
    """A bulk frame (a part of a new replica's whole log) at the fast lane's head waits
    until the ordinary lane's frames that were there when the last one was taken have
    been, and the fast frames behind it wait with it (one link's log frames in order);
    with nothing owed, it goes at once."""
    inbox = Inbox()
    _fed(inbox, "w2", [["msg", "a"], ["msg", "b"], ["rpart", "n1", 1, 0, [], []],
                       ["rpart", "n1", 1, 1, [], []], ["rfull", "n1"], ["rlog", "n1", [], [7]],
                       ["msg", "c"]], fast=True)
    _fed(inbox, CONTROLLER, [["counts"]], fast=False)
    got = [f[:2] for _, f in _taken(inbox, 8)]
    assert got == [("rpart", "n1"), ("msg", "a"), ("msg", "b"), ("msg", "c"), ("counts",),
                   ("rpart", "n1"), ("rfull", "n1"), ("rlog", "n1")]
    assert inbox.q.empty() and inbox.fast.empty() and inbox.bulk is None
    inbox.put_fast(("self", ["wlog", "n1", 1]))         # (the owner's next parts)
    inbox.put_fast(("self", ["wlog", "n1", 2]))
    inbox.q.put(("w1", ["msg", "d"]))
    inbox.put_client(("client", ["cw", 1]))             # (behind the second part)
    inbox.put_client(("client", ["cw", 2]))
    assert [f[:2] for _, f in _taken(inbox, 5)] == [
        ["wlog", "n1"], ["msg", "d"], ["wlog", "n1"], ["cw", 1], ["cw", 2]]


def test_a_bases_log_frames_are_not_counted_for_wait():
    """``wait()`` compares frames sent and handled (``Links.sent``, ``handled``): a
    base's log frames count on neither side (they carry no data message), so ``wait()`` never waits for a whole log."""
    links = Links("w1", None, lambda peer, e: None)
    for f in (["rlog", "n1", [], [1]], ["rpart", "n1", 1, 0, [], []], ["rfull", "n1"],
              ["rdur", "n1", 1], ["rtrim", "n1", 0]):
        links.send("w2", f)
    assert links.sent["w2"] == 0
    links.send("w2", ["msg", "x", []])
    links.send("w2", ["progress", "a"])
    assert links.sent["w2"] == 2
    assert not counted(("rlog", "n1", [], [1])) and counted(("msg", "x", []))


def test_an_answer_sent_at_once_is_cut_where_the_socket_is_full_and_finished_whole():
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sender, receiver = wire.Connection(a), wire.Connection(b)
    try:
        filler = b"x" * 200_000         # (more than the socket takes at once: cut)
        rest, locked = sender.send_now(["fill", filler])
        assert rest and locked and sender._send_lock.locked()   # (nothing else between)
        got: list[object] = []
        reader = threading.Thread(target=lambda: got.extend(
            iter(receiver.recv, ("end",))), daemon=True)
        reader.start()
        sender.send_rest(rest, locked)
        sender.send(["end"])
        reader.join(10)
        assert got and all(f == ("fill", filler) for f in got)
        assert not sender._send_lock.locked()
        rest, locked = sender.send_now(["ok", 1, None])     # (room now: sent whole)
        assert (rest, locked) == (b"", False) and receiver.recv() == ("ok", 1, None)
    finally:
        sender.close()
        receiver.close()
