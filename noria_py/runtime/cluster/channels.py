"""Direct channels between workers (``noria-py serve --channels direct``): each worker
sends the messages, progress reports and log trims of its node shards straight to the
worker hosting the destination, not through the controller.

Topology: every worker listens on a peer port of its own (``PeerServer``; same
framing, HMAC handshake and token as the controller's port, role ``peer``, and TLS
only when the cluster is served with TLS, as its read port) and dials a
peer the first time it has something for it. A link carries one direction: the
frames of every edge from this worker's node shards to that worker's, multiplexed in
the order they were emitted (the reverse direction is the peer's own link), so each
edge is FIFO. A reader thread per inbound link, and one for the controller's
connection, put ``(source, frame)`` into the worker's one inbox (``Inbox``), which its
message thread handles in order: frames of one link stay in order, and the
controller's frames stay in order among themselves.

Invariants recovery relies on (docs/architecture.md, "Direct channels"):

- **A link is lost only with a worker.** A link that cannot be dialed or written is
  reported to the controller (``["peer_lost", name]``), which declares that worker lost
  (and kills it): a message is never dropped while its receiver lives on.
- **Counts for ``wait()``.** ``sent[w]`` counts frames handed to the link to ``w`` (or
  to this worker's own inbox), ``handled[w]`` frames from ``w`` handled to the end
  (their own sends counted first). The controller's ``wait()`` compares them
  (``ClusterRuntime.wait``). A base's log frames (``FAST_FRAMES``) are not counted
  on either side (``counted``): they carry no data
  message (a write's output leaves its owner before the write is acknowledged), so
  ``wait()`` never waits for a new replica's whole log (160 MB at 1e7 votes).
"""
from __future__ import annotations

import logging
import queue
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

from ...tls import connect as tls_connect
from . import wire

log = logging.getLogger("noria_py.worker")

#: peer links a worker accepts at once (one per other worker, with room for spares)
MAX_PEER_CONNECTIONS = 1024
#: seconds to dial a peer, and how many times (it is alive and listening, or lost)
DIAL_TIMEOUT = 5.0
DIAL_TRIES = 3
#: the controller's connection, as the source of an inbox item
CONTROLLER = ""


#: the frames of a base's log between its owner and its replica (``writes.py``): a
#: peer link's reader puts them in the inbox's fast lane, and ``wait()``'s counts
#: leave them out (``counted``)
FAST_FRAMES = frozenset(("rlog", "rpart", "rfull", "rdur", "rtrim", "rpack"))
#: the fast lane's bulk frames: a part of a new replica's whole log (``rpart``,
#: ``rfull``; at the owner, ``wlog``: the next part to send), each of which lets the
#: ordinary lane's frames waiting then go first (``Inbox.take``)
BULK_FRAMES = frozenset(("rpart", "rfull", "wlog"))
#: the item a fast frame also puts in the ordinary lane, to wake a message thread
#: waiting there (``Inbox.put_fast``); handled as nothing
WAKE: tuple[str, Any] = (CONTROLLER, ("wake",))


def counted(frame: Any) -> bool:
    """Whether a frame counts for ``wait()`` (``Links.sent``, ``handled``): not a base's
    log frame."""
    return frame[0] not in FAST_FRAMES


class Inbox:
    """What the message thread handles: ``(source, frame)``, source the sending
    worker's name (``CONTROLLER`` for the controller); an exception is raised there.

    Two lanes. The ordinary one holds every frame in the order it came, but those of
    the fast one: the log frames peers send (``FAST_FRAMES``), and a client's write
    (``put_client``) when no controller frame waits in the ordinary lane. The message
    thread takes the fast lane's frames first, between two frames of the ordinary
    lane (each fast frame also puts ``WAKE`` there, to wake it when it waits). Why: a
    write is acknowledged only after its owner took it and sent it to its replica and
    had the answer (``cw``, ``rlog``, ``rdur``), and in one lane each of the three
    waited behind the data messages of the writes before on the same inboxes
    (traced: 0.3-1.5 ms each, most of a 1,000-vote write's time).

    Safe because what the fast frames touch no data frame does: a base's log is its
    own state (``ReplicaLogs``; the owner's ``durable`` releases output it held), and
    a write is checked against its base's rows, which no message changes (a base has
    no parents). The ordering rules hold: frames of one link stay in order among
    themselves (one reader thread, one lane), and so do one client connection's
    writes (its read thread waits for each answer before it reads the next); a
    controller's frame is never overtaken (a write goes in the ordinary lane while
    one waits there: ``ctrl_in``, ``ctrl_out``), so a write is taken after every
    controller frame received before it, as in one lane; a lost worker's frames are
    dropped after the fence whichever lane they wait in (``Worker.run_direct``).

    *Bulk frames* (``BULK_FRAMES``: a new replica's whole log, sent in parts of a few
    MB, and at the owner the turn to encode and send the next part) are fast frames too (a
    link's log frames stay in one lane, in order), but taken first they would hold
    the ordinary lane, data messages and the controller's questions, for the whole
    log (traced at 1e7 votes: 0.6-1.0 s after a kill, both at the owner and at the
    replica, which ``wait()`` and the view's next update waited for). So a bulk frame
    at the head of the fast lane waits until the ordinary lane's frames that were
    there when the last bulk frame was taken have been (``owed``): the whole log
    goes at least one part per pass over the ordinary lane, never starving it nor
    starved by it. Delaying a fast frame is always safe (one lane, the design before
    the fast one, is correct too); the fast frames behind a bulk frame wait with it,
    which keeps each link's frames in order.
    """

    def __init__(self) -> None:
        self.q: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.fast: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        #: the fast lane's bulk frame taken from its head, waiting for ``owed``
        self.bulk: tuple[str, Any] | None = None
        #: items of the ordinary lane still to take before the next bulk frame
        self.owed = 0
        self.put = self.q.put
        self.get = self.q.get
        self.get_nowait = self.q.get_nowait
        self.empty = self.q.empty
        #: the controller's frames put in the ordinary lane, and taken from it (each
        #: counted by one thread: the controller's reader, the message thread)
        self.ctrl_in = 0
        self.ctrl_out = 0

    def take(self, idle: Callable[[], None]) -> tuple[str, Any]:
        """The next item for the message thread: the fast lane's first, else the
        ordinary lane's, waited for (``idle`` called first) when both are empty."""
        fast, q = self.fast, self.q
        while True:
            if self.bulk is None and not fast.empty():
                item = fast.get_nowait()
                if item[1][0] not in BULK_FRAMES:
                    return item
                self.bulk = item
            if self.bulk is not None and self.owed <= 0:
                item, self.bulk = self.bulk, None
                self.owed = q.qsize()       # (what waits there now goes before the next)
                return item
            try:
                item = q.get_nowait()
            except queue.Empty:
                if self.bulk is not None:
                    self.owed = 0           # (nothing waits: the bulk frame's turn)
                    continue
                idle()
                item = q.get()
            self.owed -= 1
            if item is WAKE:
                continue                # (its fast frame is next, or was taken)
            if item[0] == CONTROLLER:
                self.ctrl_out += 1
            return item

    def put_fast(self, item: tuple[str, Any]) -> None:
        self.fast.put(item)
        self.q.put(WAKE)

    def put_client(self, item: tuple[str, Any]) -> None:
        """A client's write: in the fast lane unless a controller's frame waits (or
        is being put) in the ordinary one."""
        if self.ctrl_in == self.ctrl_out:
            self.put_fast(item)
        else:
            self.put(item)

    def read(self, source: str, conn: wire.Connection,
             on_end: Callable[[str, BaseException], None] | None = None,
             fast: bool = False) -> None:
        """Put every frame of ``conn`` in the inbox until it ends (a thread's body);
        then ``on_end``, or without one, the error as the last item. ``fast``: a
        peer's link, whose ``FAST_FRAMES`` go in the fast lane."""
        put, recv = self.put, conn.recv
        put_fast, fast_ops = self.put_fast, FAST_FRAMES if fast else frozenset()
        controller = source == CONTROLLER
        try:
            while True:
                f = recv()
                if type(f) is tuple and f and f[0] in fast_ops:
                    put_fast((source, f))
                    continue
                if controller:
                    self.ctrl_in += 1       # (before the put: ``put_client``)
                put((source, f))
        except (OSError, wire.ProtocolError) as e:
            if on_end is not None:
                on_end(source, e)
            else:
                if controller:
                    self.ctrl_in += 1
                put((source, e))


class PeerServer:
    """The worker's peer port: each peer that proves the token gets a thread putting
    its frames in the inbox, tagged with its name."""

    def __init__(self, inbox: Inbox, host: str, port: int, token: str | None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.inbox = inbox
        self.token = token
        # (the cluster's TLS, when it has one: every connection's)
        self.admission = wire.Admission(MAX_PEER_CONNECTIONS, log, kind="peer ", tls=tls)
        self.sock = socket.create_server((host, port))
        self.address: tuple[str, int] = cast("tuple[str, int]", self.sock.getsockname()[:2])
        self.lock = threading.Lock()
        self.links: dict[str, list[wire.Connection]] = {}    # inbound, by peer name
        self.closed = False
        self.admission.serve(self.sock, self._link, "peer-recv")

    def _link(self, sock: socket.socket) -> None:
        conn = wire.Connection(sock)
        try:
            hello = wire.server_handshake(conn, self.token, role_expected="peer")
            name = hello.get("name")
            if type(name) is not str or not name:
                raise wire.ProtocolError(f"a peer from {conn.peer} without a name")
            with self.lock:
                if self.closed:
                    return
                self.links.setdefault(name, []).append(conn)
            self.inbox.read(name, conn, self._ended, fast=True)
        except (OSError, wire.ProtocolError) as e:
            log.warning("refused peer connection from %s: %s", conn.peer, e)
        finally:
            conn.close()

    def _ended(self, name: str, e: BaseException) -> None:
        if not isinstance(e, wire.ConnectionClosed) and not self.closed:
            log.info("peer link from %s ended: %s", name, e)

    def cut(self, name: str) -> None:
        """Stop reading ``name``'s links (it was declared lost)."""
        with self.lock:
            conns = self.links.pop(name, [])
        _end(conns)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            conns = [c for cs in self.links.values() for c in cs]
            self.links.clear()
        self.admission.stop(self.sock)
        _end(conns)


def _end(conns: list[wire.Connection]) -> None:
    """End inbound links: shut down, not closed, as each has a reader thread (``_link``)
    that closes it when it sees the end (``Connection.shutdown``)."""
    for c in conns:
        try:
            c.shutdown()
        except OSError:
            pass                        # (its reader has closed it already)


class Links:
    """This worker's outbound links, dialed on first use; frames are buffered per peer
    and sent by ``flush`` (the message thread calls it whenever its inbox is empty,
    and before each reply to the controller), several frames per system call."""

    def __init__(self, name: str, token: str | None,
                 on_broken: Callable[[str, BaseException], None],
                 tls: ssl.SSLContext | None = None) -> None:
        self.name = name
        self.token = token
        self.tls = tls                  # (verifies the peers' certificates)
        self.on_broken = on_broken
        self.peers: dict[str, tuple[str, int]] = {}     # name -> peer port
        self.conns: dict[str, wire.Connection] = {}
        self.out: dict[str, list[Any]] = {}
        self.broken: set[str] = set()
        self.sent: Counter[str] = Counter()
        self.handled: Counter[str] = Counter()

    def send(self, peer: str, frame: Any) -> None:
        if counted(frame):
            self.sent[peer] += 1
        out = self.out.get(peer)
        if out is None:
            out = self.out[peer] = []
        out.append(frame)

    def flush(self) -> None:
        for peer, frames in list(self.out.items()):
            if not frames:
                continue
            self.out[peer] = []
            if peer in self.broken:
                continue                    # (lost in flight, as its worker is)
            try:
                conn = self.conns.get(peer) or self._dial(peer)
                conn.send_many(frames)
            except (OSError, wire.ProtocolError) as e:
                self.broken.add(peer)
                self.drop(peer)
                self.on_broken(peer, e)

    def _dial(self, peer: str) -> wire.Connection:
        """A new link to ``peer``, tried ``DIAL_TRIES`` times (a loaded peer may be slow
        to accept: a link given up on makes the controller declare it lost)."""
        for attempt in range(DIAL_TRIES):
            try:
                return self._dial_once(peer)
            except (OSError, wire.ProtocolError) as e:
                if isinstance(e, wire.AuthError) or attempt == DIAL_TRIES - 1:
                    raise
                log.info("dialing worker %s failed (%s): again", peer, e)
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    def _dial_once(self, peer: str) -> wire.Connection:
        addr = self.peers.get(peer)
        if addr is None:
            raise wire.ProtocolError(f"no address known for worker {peer}")
        sock = socket.create_connection(addr, timeout=DIAL_TIMEOUT)
        if self.tls is not None:
            sock = tls_connect(sock, self.tls, addr[0])
        conn = wire.Connection(sock)
        try:
            wire.client_handshake(conn, self.token, {"role": "peer", "name": self.name},
                                  timeout=DIAL_TIMEOUT)
        except BaseException:
            conn.close()
            raise
        sock.settimeout(None)
        self.conns[peer] = conn
        return conn

    def drop(self, peer: str) -> None:
        """Forget the link to ``peer`` and anything not sent on it yet."""
        self.out.pop(peer, None)
        conn = self.conns.pop(peer, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for peer in list(self.conns):
            self.drop(peer)
