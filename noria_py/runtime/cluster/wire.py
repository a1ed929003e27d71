"""Framing, authentication and codecs for everything the cluster sends over TCP.

A frame is a 4-byte big-endian length, then a msgpack payload written by the storage
codec (``storage/codec.py``), so dates and datetimes travel as the same extension types
that the data directory uses. Nothing here uses pickle: a hostile or damaged peer can
make us raise :class:`ProtocolError`, never run code. Decoded arrays are tuples (the
codec's ``use_list=False``): cheaper to build, and hashable, so rows are ready to use
as dictionary keys and array-valued map keys decode at all.

Both ends prove they hold the shared token with an HMAC-SHA256 challenge-response
before anything else is exchanged; the token itself never crosses the wire.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct
import threading
from typing import Any

import numpy as np

from ...batch import Batch
from ...errors import Error
from ...storage.codec import DecodeError, packb, unpackb
from ..messages import Message

__all__ = [
    "MAX_FRAME", "ProtocolError", "ConnectionClosed", "AuthError", "Connection",
    "server_handshake", "client_handshake",
    "encode_batch", "decode_batch", "encode_message", "decode_message",
    "encode_array", "decode_array",
]

MAX_FRAME = 256 * 1024 * 1024
HANDSHAKE_TIMEOUT = 5.0

_HEADER = struct.Struct(">I")
_BUFFER = 256 * 1024         # read buffer: many small frames per system call
_NONCE = 32
_HELLO_MAX = 64 * 1024      # no handshake frame is near this


class ProtocolError(Error):
    """The peer sent something this protocol does not allow; the connection is unusable."""


class ConnectionClosed(ProtocolError):
    """The peer closed the connection (between frames or in the middle of one)."""


class AuthError(ProtocolError):
    """The peer could not prove it knows the shared token (or did not accept ours)."""


def _peer_name(sock: socket.socket) -> str:
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

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # frames are small and latency-bound: do not let Nagle hold them back
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.max_frame = max_frame
        self.peer = _peer_name(sock)
        self._send_lock = threading.Lock()
        self._buf = bytearray(_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0          # unread bytes are self._buf[self._start:self._end]
        self._end = 0

    def __repr__(self) -> str:
        return f"<Connection {self.peer}>"

    def send(self, obj: Any) -> None:
        payload = packb(obj)
        if len(payload) > self.max_frame:
            raise ProtocolError(f"frame of {len(payload)} bytes exceeds the limit of "
                                f"{self.max_frame} bytes")
        frame = _HEADER.pack(len(payload)) + payload
        with self._send_lock:
            self.sock.sendall(frame)

    def send_many(self, objs: list[Any]) -> None:
        """Several frames in one system call (a relay's queue, drained at once)."""
        parts = []
        for obj in objs:
            payload = packb(obj)
            if len(payload) > self.max_frame:
                raise ProtocolError(f"frame of {len(payload)} bytes exceeds the limit of "
                                    f"{self.max_frame} bytes")
            parts.append(_HEADER.pack(len(payload)))
            parts.append(payload)
        data = b"".join(parts)
        with self._send_lock:
            self.sock.sendall(data)

    def shutdown(self) -> None:
        """Unblock a reader waiting on this connection (it then sees the end)."""
        self.sock.shutdown(socket.SHUT_RDWR)

    def recv(self) -> Any:
        """The next frame's value: a tuple (msgpack array) or a dict (map)."""
        start, end = self._start, self._end
        size = _HEADER.unpack_from(self._buf, start)[0] if end - start >= 4 else -1
        if 0 <= size <= self.max_frame and start + 4 + size <= end:
            self._start = start + 4 + size          # fast path: the frame is buffered
            payload = self._buf[start + 4:self._start]
            if self._start == end:
                self._start = self._end = 0
        else:
            (size,) = _HEADER.unpack(self._read(4, 0))
            if size > self.max_frame:
                raise ProtocolError(f"frame of {size} bytes announced by {self.peer} "
                                    f"exceeds the limit of {self.max_frame} bytes")
            payload = self._read(size, 4)
        try:
            obj = unpackb(payload)
        except DecodeError as e:
            raise ProtocolError(f"garbage frame from {self.peer}: {e}") from None
        if type(obj) is not tuple and type(obj) is not dict:
            raise ProtocolError(f"expected a msgpack array or map from {self.peer}, "
                                f"got {type(obj).__name__}")
        return obj

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
        start = self._start
        self._start = start + n
        if self._start == self._end:
            self._start = self._end = 0
        return self._buf[start:start + n]

    def _read_big(self, n: int, offset: int) -> bytearray:
        """A payload larger than the buffer goes straight into its own bytearray."""
        out = bytearray(n)
        view = memoryview(out)
        have = self._end - self._start
        view[:have] = self._view[self._start:self._end]
        self._start = self._end = 0
        while have < n:
            got = self.sock.recv_into(view[have:])
            if not got:
                self._closed(offset + have, offset + n)
            have += got
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

def _mac(token: str | None, who: bytes, nonce: bytes) -> bytes:
    key = (token or "").encode()
    return hmac.new(key, who + nonce, hashlib.sha256).digest()


def _nonce_ok(nonce: Any) -> bool:
    return isinstance(nonce, bytes) and 16 <= len(nonce) <= 64


def server_handshake(conn: Connection, token: str | None, role_expected: str | None = None,
                     timeout: float = HANDSHAKE_TIMEOUT) -> dict[str, Any]:
    """Authenticate the client that just connected; return its hello (e.g. its role).

    ``token`` None is the empty key, so loopback setups run the same code. Every read
    must complete within ``timeout`` seconds and handshake frames are limited to
    ``_HELLO_MAX`` bytes, so a silent or dribbling client cannot hold the connection
    slot for long; the socket is blocking again afterwards.
    """
    conn.sock.settimeout(timeout)
    limit, conn.max_frame = conn.max_frame, min(conn.max_frame, _HELLO_MAX)
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
        conn.send({"op": "welcome", "mac": _mac(token, b"server", hello["nonce"])})
    except socket.timeout:
        raise ProtocolError(f"handshake with {conn.peer} timed out after {timeout} s") from None
    finally:
        conn.sock.settimeout(None)
        conn.max_frame = limit
    return {k: v for k, v in hello.items() if k not in ("op", "mac", "nonce")}


def client_handshake(conn: Connection, token: str | None, hello: dict[str, Any],
                     timeout: float | None = 30.0) -> dict[str, Any]:
    """Authenticate to the server and check that it knows the token too; return its
    welcome (without the mac). Raises AuthError if either side refuses."""
    if not {"op", "mac", "nonce"}.isdisjoint(hello):
        raise ValueError("hello must not use the keys op, mac or nonce")
    conn.sock.settimeout(timeout)
    try:
        challenge = conn.recv()
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
    return {k: v for k, v in reply.items() if k not in ("op", "mac")}


# ---------------------------------------------------------------- codecs
# (what they make are msgpack arrays of mixed items, hence ``list[Any]``; what they
# take is whatever a peer sent, hence ``Any``, checked here)

def encode_batch(batch: Batch) -> list[Any]:
    return [batch.rows, batch.signs]


def decode_batch(obj: Any) -> Batch:
    """Checks the shape only (in C, per row and sign, not per value): operators trust
    that rows are tuples and signs ints, and a wrong type would fail far from here."""
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
    return [msg.src, msg.dst, encode_batch(msg.batch), msg.time, msg.clock, msg.low]


def decode_message(obj: Any) -> Message:
    if not (isinstance(obj, (tuple, list)) and len(obj) == 6):
        raise ProtocolError("a message must be [src, dst, batch, time, clock, low]")
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
