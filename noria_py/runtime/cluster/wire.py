"""Framing, authentication and codecs for everything the cluster sends over TCP.

A frame is a 4-byte big-endian length, then a msgpack payload written by the storage
codec (``storage/codec.py``), so dates and datetimes travel as the same extension types
that the data directory uses; integers past msgpack's 64 bits (a SUM of an INT column
can pass them) travel as the codec's extension type 4. A payload longer than a frame
may be (``MAX_FRAME``) goes in several frames, each length but the last with its top
bit set (``_MORE``), and is read whole up to ``MAX_MESSAGE``, so that no state is too
big to cross (a lost node's rebuild from a parent's snapshot, a query's rows) while no
one read is ever longer than a frame, and a peer that has not yet proven the token is
held to one small frame (the handshake). Nothing here uses pickle: a hostile or damaged peer can
make us raise :class:`ProtocolError`, never run code. Decoded arrays are tuples (the
codec's ``use_list=False``): cheaper to build, and hashable, so rows are ready to use
as dictionary keys and array-valued map keys decode at all.

Both ends prove they hold the shared token with an HMAC-SHA256 challenge-response
before anything else is exchanged; the token itself never crosses the wire.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import secrets
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from sortedcontainers import SortedKeyList

from ...batch import Batch
from ...errors import OperationalError
from ...ops import accumulators
from ...ops.dense import DenseRows, RowsDelta
from ...ops.state import CountsDelta, DenseCounts
from ...storage.codec import DecodeError, Packer, packb, unpackb
from ...tls import accept as tls_accept
from ..checkpoints import Checkpoint, Entries, InputDelta
from ..messages import CausalMessage, Indexed, Message

__all__ = [
    "MAX_FRAME", "MAX_MESSAGE", "ProtocolError", "ConnectionClosed", "AuthError", "Connection", "Admission",
    "server_handshake", "client_handshake",
    "encode_batch", "decode_batch", "encode_message", "decode_message",
    "encode_array", "decode_array",
    "encode_delta", "decode_delta", "encode_checkpoint", "decode_checkpoint",
]

MAX_FRAME = 256 * 1024 * 1024
#: the longest payload, in frames of at most ``MAX_FRAME`` bytes each
MAX_MESSAGE = 1 << 32
#: a frame's length with this bit set: the payload goes on in the next frame
_MORE = 1 << 31
HANDSHAKE_TIMEOUT = 5.0

_HEADER = struct.Struct(">I")
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_clock = time.perf_counter_ns
_yield = getattr(os, "sched_yield", lambda: None)
_BUFFER = 256 * 1024         # read buffer: many small frames per system call
_NONCE = 32
_HELLO_MAX = 64 * 1024      # no handshake frame is near this


class ProtocolError(OperationalError):
    """The peer sent something this protocol does not allow; the connection is unusable."""


class ConnectionClosed(ProtocolError):
    """The peer closed the connection (between frames or in the middle of one)."""


class AuthError(ProtocolError):
    """The peer could not prove it knows the shared token (or did not accept ours)."""


def peer_name(sock: socket.socket) -> str:
    try:
        addr = sock.getpeername()
    except OSError:
        return "?"
    if isinstance(addr, tuple):
        return f"{addr[0]}:{addr[1]}"
    return str(addr) or "local"


class Connection:
    """One connected socket carrying frames.

    ``send`` may be called from several threads (a lock keeps frames whole); ``recv``
    belongs to one reader thread. Reads are buffered: one ``recv_into`` usually brings
    in many small frames, and a frame that is already whole in the buffer is sliced
    out directly. Measured against ``makefile('rb')`` on loopback, this is as fast or
    slightly faster (about 0.7 us per 17-byte frame for both), and unlike a socket
    file it stays usable after a timeout.
    """

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME,
                 max_message: int = MAX_MESSAGE) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # frames are small and latency-bound: do not let Nagle hold them back
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.max_frame = min(max_frame, _MORE - 1)     # (the top bit is ``_MORE``)
        self.max_message = max_message
        self.peer = peer_name(sock)
        self._send_lock = threading.Lock()
        self._pack = Packer(big_ints=True)
        self._pack_lock = threading.Lock()
        self._buf = bytearray(_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0          # unread bytes are self._buf[self._start:self._end]
        self._end = 0
        #: ``time.monotonic()`` when ``recv`` last took bytes of a frame that was not
        #: whole in its first read (``math.inf`` while it decodes one): a reader
        #: thread's progress through a long frame, which a heartbeat monitor counts as
        #: the peer's life (a table of a million rows takes seconds to arrive under
        #: load, and its sender's heartbeats queue behind it)
        self.heard = 0.0

    def __repr__(self) -> str:
        return f"<Connection {self.peer}>"

    def send(self, obj: Any) -> None:
        if self._pack_lock.acquire(False):      # (the connection's packer: one thread's)
            try:
                payload = self._pack(obj)
            finally:
                self._pack_lock.release()
        else:
            payload = packb(obj, big_ints=True)
        if len(payload) <= self.max_frame:
            frame = _HEADER.pack(len(payload)) + payload
            with self._send_lock:
                self.sock.sendall(frame)
            return
        pieces = self._frames(payload)
        with self._send_lock:
            for piece in pieces:
                self.sock.sendall(piece)

    def _frames(self, payload: bytes) -> list[bytes | memoryview]:
        """``payload`` as frames: headers and pieces of at most ``max_frame`` bytes,
        each header but the last marked ``_MORE``."""
        n = len(payload)
        if n > self.max_message:
            raise ProtocolError(f"message of {n} bytes exceeds the limit of "
                                f"{self.max_message} bytes")
        if n <= self.max_frame:
            return [_HEADER.pack(n), payload]
        view, out = memoryview(payload), list[bytes | memoryview]()
        for lo in range(0, n, self.max_frame):
            hi = min(lo + self.max_frame, n)
            out.append(_HEADER.pack((hi - lo) | (_MORE if hi < n else 0)))
            out.append(view[lo:hi])
        return out

    def send_now(self, obj: Any) -> tuple[bytes, bool]:
        """Send the frame ``obj`` from a thread that must never wait on this peer (the
        worker's message thread answering a client's write: ``reads.py``), as far as
        the socket takes it at once: ``(what it did not take, locked)``, ``b""`` when
        it took all. The rest, if any, must be sent with ``send_rest`` by a thread
        that may wait, before anything else is sent here: ``locked`` says the
        connection stays locked for it meanwhile (a frame cut in two). Nothing is
        sent on a TLS socket (its records cannot be cut), without ``MSG_DONTWAIT``,
        when another thread is sending, or on a socket error (the waiting thread then meets it)."""
        frame = b"".join(self._frames(packb(obj, big_ints=True)))
        if not _DONTWAIT or isinstance(self.sock, ssl.SSLSocket) \
                or not self._send_lock.acquire(False):
            return frame, False
        try:
            n = self.sock.send(frame, _DONTWAIT)
        except OSError:
            n = 0
        if 0 < n < len(frame):
            return frame[n:], True
        self._send_lock.release()
        return frame[n:], False

    def send_rest(self, rest: bytes, locked: bool) -> None:
        """What ``send_now`` left (``locked`` as it said)."""
        if not locked:
            self._send_lock.acquire()
        try:
            self.sock.sendall(rest)
        finally:
            self._send_lock.release()

    def send_many(self, objs: list[Any]) -> None:
        """Several frames in one system call (a relay's queue, drained at once)."""
        data = b"".join(part for obj in objs
                        for part in self._frames(packb(obj, big_ints=True)))
        with self._send_lock:
            self.sock.sendall(data)

    def shutdown(self) -> None:
        """Unblock a reader waiting on this connection (it then sees the end). How
        another thread ends a connection that a reader thread reads: the reader then
        closes it. Closing it from here instead frees its descriptor while the reader
        may be about to read it (past Python's checks, or in OpenSSL, which keeps the
        number): a socket opened meanwhile gets the number, and the reader takes
        bytes of its stream (a TLS reader five, a record's header). Shut down as a
        plain socket: ``SSLSocket.shutdown`` also drops its TLS state under the
        reader's feet."""
        socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def spin(self, ns: int) -> None:
        """Wait up to ``ns`` nanoseconds for bytes to arrive without going to sleep:
        poll the socket (``MSG_DONTWAIT``), yielding the CPU between polls
        (``sched_yield``: a peer on the same CPU runs meanwhile), until something is
        buffered or the time is up; ``recv`` then takes the frame (or blocks as
        usual). For a round trip whose other end answers within microseconds: a
        thread asleep in ``recv`` is woken by the kernel, and on this VM waking a
        thread on the other, idle CPU costs tens of microseconds (docs/benchmarks.md,
        "Reads at the readers' workers", "Spinning for the answer"). Returns at once
        for TLS (no flags there) and for a socket with a Python timeout (which would
        poll() before each call, for as long as the timeout)."""
        if self._start != self._end or not _DONTWAIT \
                or isinstance(self.sock, ssl.SSLSocket) or self.sock.gettimeout() is not None:
            return
        deadline = _clock() + ns
        recv_into, view = self.sock.recv_into, self._view
        while True:
            try:
                got = recv_into(view, 0, _DONTWAIT)
            except (BlockingIOError, InterruptedError):
                if _clock() > deadline:
                    return
                _yield()
                continue
            except OSError:
                return                  # (recv raises it again, as it would have)
            if got:
                self._start, self._end = 0, got
            return                      # (0: the peer closed; recv says so)

    def recv(self) -> Any:
        """The next frame's value: a tuple (msgpack array) or a dict (map)."""
        start, end = self._start, self._end
        if start == end:                # (nothing buffered: one call, usually a frame)
            end = self.sock.recv_into(self._view)
            if not end:
                self._closed(0, 4)
            self._start, self._end = start, end = 0, end
        size = _HEADER.unpack_from(self._buf, start)[0] if end - start >= 4 else -1
        if 0 <= size <= self.max_frame and start + 4 + size <= end:
            self._start = start + 4 + size          # fast path: the frame is buffered
            # (decoded before the buffer is written again: no copy)
            payload = self._view[start + 4:self._start]
            if self._start == end:
                self._start = self._end = 0
            return self._decode(payload)
        self.heard = time.monotonic()           # (its first bytes, read above)
        whole = self._read_payload()
        self.heard = math.inf                   # (decoding it is this end's own time)
        try:
            return self._decode(whole)
        finally:
            self.heard = time.monotonic()

    def _decode(self, payload: bytearray | memoryview) -> Any:
        try:
            obj = unpackb(payload)
        except DecodeError as e:
            raise ProtocolError(f"garbage frame from {self.peer}: {e}") from None
        if type(obj) is not tuple and type(obj) is not dict:
            raise ProtocolError(f"expected a msgpack array or map from {self.peer}, "
                                f"got {type(obj).__name__}")
        return obj

    def _read_payload(self) -> bytearray:
        """The next frame's payload, and the frames it goes on in (``_MORE``), each
        refused when it announces more than ``max_frame`` bytes and the whole when
        more than ``max_message``, before its bytes are read."""
        payload: bytearray | None = None
        while True:
            got = 0 if payload is None else len(payload)
            (size,) = _HEADER.unpack(self._read(4, got))
            more, size = size & _MORE, size & ~_MORE
            if size > self.max_frame or (more and self.max_message <= self.max_frame):
                raise ProtocolError(f"frame of {size} bytes{' and more' if more else ''} "
                                    f"announced by {self.peer} exceeds the limit of "
                                    f"{self.max_frame} bytes")
            if got + size > self.max_message:
                raise ProtocolError(f"message of at least {got + size} bytes from "
                                    f"{self.peer} exceeds the limit of {self.max_message} bytes")
            part = self._read(size, got + 4)
            if payload is None:
                payload = part
            else:
                payload += part
            if not more:
                return payload

    def _read(self, n: int, offset: int) -> bytearray:
        """Exactly ``n`` bytes; ``offset`` is how far into the frame they start (for
        the error message when the peer closes midway)."""
        have = self._end - self._start
        if have < n:
            if n > len(self._buf):
                return self._read_big(n, offset)
            if self._start + n > len(self._buf):       # no room behind: move the rest down
                self._buf[:have] = bytes(self._view[self._start:self._end])  # may overlap
                self._start, self._end = 0, have
            while self._end - self._start < n:
                got = self.sock.recv_into(self._view[self._end:])
                if not got:
                    self._closed(offset + self._end - self._start, offset + n)
                self._end += got
                self.heard = time.monotonic()
        start = self._start
        self._start = start + n
        if self._start == self._end:
            self._start = self._end = 0
        return self._buf[start:start + n]

    def _read_big(self, n: int, offset: int) -> bytearray:
        """A payload larger than the buffer, gathered in its own bytearray as it
        arrives: memory follows the bytes received, not the size the header announced
        (a peer announcing many huge frames and sending nothing holds nothing)."""
        out = bytearray(self._view[self._start:self._end])
        self._start = self._end = 0
        view, size = self._view, len(self._buf)
        while len(out) < n:
            got = self.sock.recv_into(view, min(n - len(out), size))
            if not got:
                self._closed(offset + len(out), offset + n)
            out += view[:got]
            self.heard = time.monotonic()
        return out

    def _closed(self, got: int, want: int) -> None:
        if got == 0:
            raise ConnectionClosed(f"connection closed by {self.peer}")
        raise ConnectionClosed(f"connection closed by {self.peer} in the middle of a frame "
                               f"(after {got} of {want} bytes)")

    def close(self) -> None:
        # shutdown first: close() alone does not wake a thread blocked in recv
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# ---------------------------------------------------------------- authentication

class Admission:
    """At most ``limit`` connections of one port at once (the controller's, a worker's
    read or peer port): ``admit`` counts a new one in, or, when full, tells the peer why
    in a ``refused`` frame (its handshake raises ``AuthError`` with it), logs it and
    closes it; ``release`` counts one out when its connection ends. ``serve`` is the
    port's accept loop, the TLS handshake (a cluster served with TLS: ``tls``) in each
    connection's own thread. ``stop`` ends a port."""

    def __init__(self, limit: int, log: logging.Logger, kind: str = "",
                 tls: ssl.SSLContext | None = None) -> None:
        self.limit = limit
        self.log = log                  # the port's own logger
        self.kind = kind                # "read " for a worker's read port
        self.tls = tls
        self.count = 0
        self._lock = threading.Lock()
        self._served: set[socket.socket] = set()   # ports whose accept loop closes them

    def serve(self, listening: socket.socket, handle: Callable[[socket.socket], None],
              name: str) -> None:
        """Accept connections on ``listening`` in a thread of its own (until it is
        closed), each admitted one handled by ``handle`` in a thread named ``name``:
        after the TLS handshake when there is TLS (a peer that fails it is logged and
        closed), counted out when ``handle`` returns."""
        def connection(sock: socket.socket) -> None:
            try:
                if self.tls is not None:
                    peer = peer_name(sock)
                    try:
                        sock = tls_accept(sock, self.tls, HANDSHAKE_TIMEOUT)
                    except OSError as e:
                        self.log.warning("refused %sconnection from %s: TLS handshake "
                                         "failed: %s", self.kind, peer, e)
                        return
                handle(sock)
            finally:
                self.release()

        def accept() -> None:
            while True:
                try:
                    sock, _ = listening.accept()
                except OSError:         # stopped (``stop``): this loop closes the port
                    listening.close()
                    return
                if self.admit(sock):
                    threading.Thread(target=connection, args=(sock,), daemon=True,
                                     name=name).start()
        with self._lock:
            self._served.add(listening)
        threading.Thread(target=accept, daemon=True, name=f"{name}-accept").start()

    def stop(self, listening: socket.socket) -> None:
        """End the port ``listening``: no connection is accepted from here on. Shut
        down, which refuses new connections at once and wakes ``serve``'s accept loop,
        which then closes it. Closed from here instead, the port would go on
        listening: on Linux a thread blocked in ``accept`` keeps the socket open, takes
        one more connection and hands it to the stopped port's handler (and the
        descriptor, freed under that thread, could be another socket's by the time it
        calls ``accept`` again). A port never served, or one that cannot be shut down,
        is closed here."""
        with self._lock:
            served = listening in self._served
            self._served.discard(listening)
        try:
            listening.shutdown(socket.SHUT_RDWR)
        except OSError:
            served = False
        if not served:
            listening.close()

    def admit(self, sock: socket.socket) -> bool:
        with self._lock:
            if self.count < self.limit:
                self.count += 1
                return True
        conn = Connection(sock)
        self.log.warning("refused %sconnection from %s: too many connections (%d)", self.kind,
                    conn.peer, self.limit)
        try:
            conn.sock.settimeout(1.0)
            conn.send({"op": "refused",
                       "error": f"too many {self.kind}connections ({self.limit})"})
        except OSError:
            pass
        conn.close()
        return False

    def release(self) -> None:
        with self._lock:
            self.count -= 1


def _mac(token: str | None, who: bytes, nonce: bytes) -> bytes:
    key = (token or "").encode()
    return hmac.new(key, who + nonce, hashlib.sha256).digest()


def _nonce_ok(nonce: Any) -> bool:
    return isinstance(nonce, bytes) and 16 <= len(nonce) <= 64


def server_handshake(conn: Connection, token: str | None, role_expected: str | None = None,
                     timeout: float = HANDSHAKE_TIMEOUT,
                     welcome: dict[str, Any] | None = None) -> dict[str, Any]:
    """Authenticate the client that just connected; return its hello (e.g. its role).

    ``token`` None is the empty key, so loopback setups run the same code. Every read
    must complete within ``timeout`` seconds and handshake frames are limited to
    ``_HELLO_MAX`` bytes, so a silent or dribbling client cannot hold the connection
    slot for long; the socket is blocking again afterwards. ``welcome``: more for the
    client to know, in the welcome (``client_handshake`` returns it).
    """
    conn.sock.settimeout(timeout)
    limit, conn.max_frame = conn.max_frame, min(conn.max_frame, _HELLO_MAX)
    whole, conn.max_message = conn.max_message, conn.max_frame     # (one frame a message)
    try:
        nonce = secrets.token_bytes(_NONCE)
        conn.send({"op": "challenge", "nonce": nonce})
        hello = conn.recv()
        if not (type(hello) is dict and hello.get("op") == "hello"
                and isinstance(hello.get("mac"), bytes) and _nonce_ok(hello.get("nonce"))):
            raise ProtocolError(f"expected a hello from {conn.peer}")
        error = None
        if not hmac.compare_digest(hello["mac"], _mac(token, b"client", nonce)):
            error = "authentication failed: wrong token"
        elif role_expected is not None and hello.get("role") != role_expected:
            error = f"expected role {role_expected!r}, got {hello.get('role')!r}"
        if error is not None:
            conn.send({"op": "refused", "error": error})
            raise AuthError(f"refused {conn.peer}: {error}")
        conn.send({**(welcome or {}), "op": "welcome",
                   "mac": _mac(token, b"server", hello["nonce"])})
    except socket.timeout:
        raise ProtocolError(f"handshake with {conn.peer} timed out after {timeout} s") from None
    finally:
        conn.sock.settimeout(None)
        conn.max_frame, conn.max_message = limit, whole
    return {k: v for k, v in hello.items() if k not in ("op", "mac", "nonce")}


def client_handshake(conn: Connection, token: str | None, hello: dict[str, Any],
                     timeout: float | None = 30.0) -> dict[str, Any]:
    """Authenticate to the server and check that it knows the token too; return its
    welcome (without the mac). Raises AuthError if either side refuses."""
    if not {"op", "mac", "nonce"}.isdisjoint(hello):
        raise ValueError("hello must not use the keys op, mac or nonce")
    conn.sock.settimeout(timeout)
    whole, conn.max_message = conn.max_message, conn.max_frame     # (one frame a message)
    try:
        challenge = conn.recv()
        if type(challenge) is dict and challenge.get("op") == "refused":   # (a full server)
            raise AuthError(f"refused by {conn.peer}: {challenge.get('error')}")
        if not (type(challenge) is dict and challenge.get("op") == "challenge"
                and _nonce_ok(challenge.get("nonce"))):
            raise ProtocolError(f"expected a challenge from {conn.peer}")
        nonce = secrets.token_bytes(_NONCE)
        conn.send({**hello, "op": "hello", "mac": _mac(token, b"client", challenge["nonce"]),
                   "nonce": nonce})
        reply = conn.recv()
        if type(reply) is not dict:
            raise ProtocolError(f"expected a welcome from {conn.peer}")
        if reply.get("op") == "refused":
            raise AuthError(f"refused by {conn.peer}: {reply.get('error')}")
        mac = reply.get("mac")
        if reply.get("op") != "welcome" or not isinstance(mac, bytes):
            raise ProtocolError(f"expected a welcome from {conn.peer}")
        if not hmac.compare_digest(mac, _mac(token, b"server", nonce)):
            raise AuthError(f"{conn.peer} does not know the token")
    except socket.timeout:
        raise ProtocolError(f"handshake with {conn.peer} timed out after {timeout} s") from None
    finally:
        conn.sock.settimeout(None)
        conn.max_message = whole
    return {k: v for k, v in reply.items() if k not in ("op", "mac")}


# ---------------------------------------------------------------- codecs
# (what they make are msgpack arrays of mixed items, hence ``list[Any]``; what they
# take is whatever a peer sent, hence ``Any``, checked here)

_KINDS = {"i": np.dtype("<i8"), "f": np.dtype("<f8")}


def encode_batch(batch: Batch) -> list[Any]:
    """A batch as [rows, signs], or a columnar one as ["c", columns, signs]: int64 and
    float64 columns and the signs as raw little-endian bytes, other columns as their
    values (no tuple is built per row, and 2M rows of two ints are 32 MB of bytes);
    signs that are all 1 (insertions only, as every client write) as the row count,
    a third of an insert of two int columns' bytes."""
    cols = batch.cols
    if cols:
        signs = cast(np.ndarray, batch.sign_array)
        return ["c", [_encode_column(c) for c in cols],
                len(signs) if bool((signs == 1).all())
                else np.ascontiguousarray(signs, dtype="<i8").tobytes()]
    return [batch.rows, batch.signs]


def _encode_column(col: np.ndarray) -> list[Any]:
    if col.dtype == np.int64:
        return ["i", np.ascontiguousarray(col, dtype="<i8").tobytes()]
    if col.dtype == np.float64:
        return ["f", np.ascontiguousarray(col, dtype="<f8").tobytes()]
    return ["o", col.tolist()]


def _decode_column(obj: Any, n: int) -> np.ndarray:
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        kind, data = obj
        if kind in _KINDS and type(data) is bytes and len(data) == 8 * n:
            return np.frombuffer(data, dtype=_KINDS[kind]).copy()
        if kind == "o" and isinstance(data, (tuple, list)) and len(data) == n:
            # (each value as it is, a tuple or list included, with no pass that looks for
            # a common type: 2-4x faster than assigning the list into an object array)
            return np.fromiter(data, dtype=object, count=n)
    raise ProtocolError(f"a batch's column must be [kind, data] of {n} values")


def encode_numbers(col: np.ndarray) -> list[Any]:
    """An int64 or float64 array as ``decode_numbers`` reads it (a client's
    ``insert_columns``)."""
    if col.dtype not in (np.int64, np.float64):
        raise TypeError(f"an insert_columns column is int64 or float64, not {col.dtype}")
    return _encode_column(col)


def decode_numbers(obj: Any, n: int) -> np.ndarray:
    """An ``["i" | "f", bytes]`` column of ``n`` values (a client's ``insert_columns``);
    ``ProtocolError`` for anything else, objects included."""
    if not (isinstance(obj, (tuple, list)) and len(obj) == 2 and obj[0] in _KINDS):
        raise ProtocolError(f"a column must be [\"i\" or \"f\", bytes] of {n} values")
    return _decode_column(obj, n)


def _decode_columnar(cols: Any, signs: Any) -> Batch:
    if not (isinstance(cols, (tuple, list)) and cols and (
            type(signs) is bytes and len(signs) % 8 == 0 or type(signs) is int and signs >= 0)):
        raise ProtocolError("a columnar batch must be ['c', columns, signs]")
    if isinstance(signs, int):          # (all 1: the columns, checked first, bound it)
        decoded = [_decode_column(c, signs) for c in cols]
        return Batch.columnar(decoded, np.ones(signs, dtype=np.int64))
    sign_array = np.frombuffer(signs, dtype="<i8").copy()
    return Batch.columnar([_decode_column(c, len(sign_array)) for c in cols], sign_array)


def decode_batch(obj: Any) -> Batch:
    """Checks the shape only (in C, per row and sign, not per value): operators trust
    that rows are tuples and signs ints, and a wrong type would fail far from here."""
    if isinstance(obj, (tuple, list)) and len(obj) == 3 and obj[0] == "c":
        return _decode_columnar(obj[1], obj[2])
    if not (isinstance(obj, (tuple, list)) and len(obj) == 2):
        raise ProtocolError("a batch must be [rows, signs]")
    rows, signs = obj
    if not (isinstance(rows, (tuple, list)) and isinstance(signs, (tuple, list))):
        raise ProtocolError("a batch's rows and signs must be arrays")
    if len(rows) != len(signs):
        raise ProtocolError(f"a batch has {len(rows)} rows but {len(signs)} signs")
    if not set(map(type, rows)) <= {tuple}:
        raise ProtocolError("a batch's rows must be arrays")
    if not set(map(type, signs)) <= {int}:
        raise ProtocolError("a batch's signs must be integers")
    return Batch(list(rows), list(signs))


def encode_message(msg: Message) -> list[Any]:
    """A message as a list; the cic regime's ``Indexed`` with its index as a seventh
    field, the causal regime's ``CausalMessage`` with its determinants' bytes there."""
    if isinstance(msg, CausalMessage):
        return [msg.src, msg.dst, encode_batch(msg.batch), msg.time, None, 0, msg.dets]
    if isinstance(msg, Indexed):
        return [msg.src, msg.dst, encode_batch(msg.batch), msg.time, msg.clock, msg.low,
                msg.index]
    return [msg.src, msg.dst, encode_batch(msg.batch), msg.time, msg.clock, msg.low]


def decode_message(obj: Any) -> Message:
    if not (isinstance(obj, (tuple, list)) and len(obj) in (6, 7)):
        raise ProtocolError("a message must be [src, dst, batch, time, clock, low] "
                            "(and, in the cic regime, index; in the causal regime, "
                            "determinants)")
    if len(obj) == 7 and type(obj[6]) is bytes:
        m = decode_message(obj[:6])
        return CausalMessage(m.src, m.dst, m.batch, m.time, obj[6])
    if len(obj) == 7:
        index = obj[6]
        if type(index) is not int or index < 0:
            raise ProtocolError("a message's index must be an integer, 0 or more")
        m = decode_message(obj[:6])
        return Indexed(m.src, m.dst, m.batch, m.time, m.clock, m.low, index)
    src, dst, batch, time, clock, low = obj
    if not (type(src) is str and type(dst) is str and type(time) is int and type(low) is int):
        raise ProtocolError("a message's src and dst must be strings, its time and low integers")
    if clock is not None:
        # a diff as its path (treeclock.receive_path); the receiver checks that the
        # path fits the sender's clock, and its times when it applies it
        if not (isinstance(clock, (tuple, list)) and 2 <= len(clock) <= 64
                and set(map(type, clock)) <= {int} and min(clock) >= 0):
            raise ProtocolError("a message's clock must be an array of integers "
                                "(a diff's path: leaf, then times)")
        clock = tuple(clock)
    return Message(src, dst, decode_batch(batch), time, clock, low)


def encode_array(arr: np.ndarray | None) -> list[Any] | None:
    """An integer array of any shape (clocks, diff logs) as [shape, little-endian int64 bytes]."""
    if arr is None:
        return None
    if arr.dtype.kind not in "iub":
        raise TypeError(f"only integer arrays travel, not {arr.dtype}")
    return [list(arr.shape), np.ascontiguousarray(arr, dtype="<i8").tobytes()]


def decode_array(obj: Any) -> np.ndarray | None:
    if obj is None:
        return None
    if not (isinstance(obj, (tuple, list)) and len(obj) == 2):
        raise ProtocolError("an array must be [shape, bytes]")
    shape, data = obj
    if not (isinstance(shape, (tuple, list)) and set(map(type, shape)) <= {int}
            and all(d >= 0 for d in shape) and type(data) is bytes):
        raise ProtocolError("an array must be [shape, bytes]")
    if len(data) != 8 * int(np.prod(shape, dtype=np.int64)):
        raise ProtocolError(f"array data of {len(data)} bytes does not fit shape {tuple(shape)}")
    return np.frombuffer(data, dtype="<i8").reshape(shape).copy()


# ---------------------------------------------------------------- checkpoints
# A worker hands each checkpoint of its node shards to the controller's store (not on
# the worker, which may die with them), and the store hands one back to the spare
# that recovers the node. What crosses: batches, a dense side's arrays (typed parts
# as raw little-endian bytes, object parts as their values), COUNT's array, and
# aggregate entries with their accumulators as plain data (``Accumulator.to_data``).

def encode_dense(rows: DenseRows) -> list[Any]:
    return [rows.key, rows.n, rows.present.tobytes(), [_encode_column(p) for p in rows.parts]]


def decode_dense(obj: Any) -> DenseRows:
    if not (isinstance(obj, (tuple, list)) and len(obj) == 4):
        raise ProtocolError("dense rows must be [key, n, present, parts]")
    key, n, present, parts = obj
    if not ((key is None or type(key) is int) and type(n) is int and type(present) is bytes
            and isinstance(parts, (tuple, list))):
        raise ProtocolError("dense rows must be [key, n, present, parts]")
    size = len(present)
    mask = np.frombuffer(present, dtype=np.uint8).astype(bool)
    arrays = [_decode_column(part, size) for part in parts]
    if (key is not None and not 0 <= key < len(arrays)) or n != int(mask.sum()):
        raise ProtocolError("dense rows' key or count does not fit their parts")
    return DenseRows.from_arrays(key, mask, arrays)


def _encode_entry(e: Any) -> Any:
    """An aggregate's group, [row count, accumulator...], or a TopK's partition, its
    rows in order, sent as ["rows", rows] (decoded as a list, which ``TopK.load_state``
    sorts back into its container; an aggregate's entry decodes as a tuple)."""
    if e is None:
        return None
    if isinstance(e, SortedKeyList) or (e and type(e[0]) is tuple):
        return ["rows", list(e)]
    return [x if type(x) is int else x.to_data() for x in e]


def _decode_entry(e: Any) -> Any:
    if e is None:
        return None
    if isinstance(e, (tuple, list)) and len(e) == 2 and e[0] == "rows":
        rows = e[1]
        if not (isinstance(rows, (tuple, list)) and rows
                and all(type(r) is tuple for r in rows)):
            raise ProtocolError("a TopK partition must be a non-empty array of rows")
        return list(rows)
    if not (isinstance(e, (tuple, list)) and e and type(e[0]) is int):
        raise ProtocolError("an aggregate entry must be [row count, ...]")
    try:
        return tuple(x if type(x) is int else accumulators.from_data(x) for x in e)
    except ValueError as err:
        raise ProtocolError(str(err)) from None


def encode_entries(entries: Entries) -> list[Any]:
    if isinstance(entries, DenseCounts):
        return ["counts", encode_array(entries.counts), list(entries.nulls.items())]
    if isinstance(entries, CountsDelta):
        return ["counts_at", entries.size, encode_array(entries.keys),
                encode_array(entries.counts), list(entries.nulls.items())]
    return ["keys", [[k, _encode_entry(e)] for k, e in entries.items()]]


def _keys(obj: Any, size: int) -> np.ndarray:
    keys = decode_array(obj)
    if keys is None or keys.ndim != 1 or (len(keys) and not (0 <= keys.min() and keys.max() < size)):
        raise ProtocolError(f"keys must be a 1-d array of keys below {size}")
    return keys


def decode_entries(obj: Any) -> Entries:
    if isinstance(obj, (tuple, list)) and len(obj) == 3 and obj[0] == "counts":
        counts = decode_array(obj[1])
        if counts is None or counts.ndim != 1:
            raise ProtocolError("COUNT's state must be a 1-d array")
        return DenseCounts(counts, {k: c for k, c in _pairs(obj[2])})
    if isinstance(obj, (tuple, list)) and len(obj) == 5 and obj[0] == "counts_at":
        size = obj[1]
        if type(size) is not int or size < 0:
            raise ProtocolError("COUNT's changed counts need the array's length")
        keys, counts = _keys(obj[2], size), decode_array(obj[3])
        if counts is None or counts.shape != keys.shape:
            raise ProtocolError("COUNT's changed counts must match their keys")
        return CountsDelta(size, keys, counts, {k: c for k, c in _pairs(obj[4])})
    if isinstance(obj, (tuple, list)) and len(obj) == 2 and obj[0] == "keys":
        return {k: _decode_entry(e) for k, e in _pairs(obj[1])}
    raise ProtocolError("keyed state must be ['counts', ...] or ['keys', ...]")


def _pairs(obj: Any) -> list[tuple[Any, Any]]:
    if not (isinstance(obj, (tuple, list))
            and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in obj)):
        raise ProtocolError("expected an array of [key, value] pairs")
    return [(k, v) for k, v in obj]


def _encode_input(x: Batch | DenseRows | RowsDelta | dict[Any, int]) -> list[Any]:
    if isinstance(x, DenseRows):
        return ["d", encode_dense(x)]
    if isinstance(x, dict):           # (a checkpoint's row -> count: a batch on the wire)
        return ["b", encode_batch(Batch(list(x), list(x.values())))]
    if isinstance(x, RowsDelta):
        return ["r", [x.size, encode_array(x.keys),
                      None if x.present is None else x.present.tobytes(),
                      [None if p is None else _encode_column(p) for p in x.parts]]]
    return ["b", encode_batch(x)]


def _decode_rows_delta(obj: Any) -> RowsDelta:
    if not (isinstance(obj, (tuple, list)) and len(obj) == 4 and type(obj[0]) is int
            and obj[0] >= 0 and (obj[2] is None or type(obj[2]) is bytes)
            and isinstance(obj[3], (tuple, list))):
        raise ProtocolError("changed dense rows must be [size, keys, present, parts]")
    size, keys, present, parts = obj
    at = _keys(keys, size)
    if present is not None and len(present) != len(at):
        raise ProtocolError("changed dense rows' mask must match their keys")
    # (None: a part unchanged since the last delta; a mask None: every key held a row
    # and holds one, ``DenseRows.changed``)
    return RowsDelta(size, at, None if present is None
                     else np.frombuffer(present, dtype=np.uint8).astype(bool),
                     [None if p is None else _decode_column(p, len(at)) for p in parts])


def _decode_input(obj: Any) -> Batch | DenseRows | RowsDelta:
    if isinstance(obj, (tuple, list)) and len(obj) == 2 and obj[0] in ("b", "d", "r"):
        if obj[0] == "d":
            return decode_dense(obj[1])
        return _decode_rows_delta(obj[1]) if obj[0] == "r" else decode_batch(obj[1])
    raise ProtocolError("a checkpoint input must be ['b', batch], ['d', dense rows] or "
                        "['r', changed dense rows]")


def encode_delta(form: str, delta: InputDelta | Entries) -> list[Any]:
    """A checkpoint delta (``checkpoints.delta``) of an operator of ``form``."""
    if form == "input":
        return [[port, _encode_input(x)] for port, x in cast("InputDelta", delta)]
    return encode_entries(cast("Entries", delta))


def decode_delta(form: Any, obj: Any) -> InputDelta | Entries:
    if form == "input":
        out: InputDelta = []
        for port, x in _pairs(obj):
            if type(port) is not int or port < 0:
                raise ProtocolError("a checkpoint input's port must be a natural number")
            out.append((port, _decode_input(x)))
        return out
    if form == "keyed":
        return decode_entries(obj)
    raise ProtocolError(f"unknown checkpoint form {form!r}")


def encode_checkpoint(ck: Checkpoint, clock: bool = False) -> list[Any]:
    """``ck`` as data; with ``clock``, its tree clock too (a sixth item, for the node
    restored from it: its acknowledgements go no further than the clock's entries,
    ``Domain.progress_report``); without, as on disk, where a reopened node's clock
    starts afresh."""
    out = [ck.time, ck.parent_times, ck.form, [_encode_input(x) for x in ck.inputs],
           encode_entries(ck.entries)]
    if clock:
        out.append(encode_array(ck.clock))
    return out


def decode_checkpoint(obj: Any) -> Checkpoint:
    if not (isinstance(obj, (tuple, list)) and len(obj) in (5, 6)):
        raise ProtocolError("a checkpoint must be [time, parent times, form, inputs, entries]")
    time, parents, form, inputs, entries = obj[:5]
    clock = decode_array(obj[5]) if len(obj) == 6 else None
    if not (type(time) is int and isinstance(parents, dict) and form in ("input", "keyed")
            and all(type(a) is str and type(t) is int for a, t in parents.items())
            and isinstance(inputs, (tuple, list))):
        raise ProtocolError("a checkpoint must be [time, parent times, form, inputs, entries]")
    held = [_decode_input(x) for x in inputs]
    state = decode_entries(entries)
    if any(isinstance(x, RowsDelta) for x in held) or isinstance(state, CountsDelta):
        raise ProtocolError("a checkpoint holds whole states, not changes")
    return Checkpoint(time, dict(parents), form,
                      cast("list[Batch | DenseRows | dict[Any, int]]", held), state, clock)
