"""PostgreSQL's frontend/backend protocol, version 3.0: reading a client's messages and
writing the server's, as bytes (no engine here, no I/O beyond an asyncio stream).

A message is a type byte, a 4-byte big-endian length that counts itself, and a body;
the first message of a connection (startup, SSL or cancel request) has no type byte.
Limits: a message longer than ``MAX_MESSAGE`` is refused before it is read
(``ProtocolViolation``), so a client cannot make the server allocate without bound.
Why hand-written rather than a library: the protocol is a small, stable, documented
format; the candidates on the package index wrap a DB-API connection per session in a
thread and add a copy of every row (docs/postgres.md has the measurement).
"""
from __future__ import annotations

import asyncio
import struct

MAX_MESSAGE = 64 << 20          # bytes: longer messages end the connection
SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608

_I = struct.Struct("!i")
_H = struct.Struct("!h")
_IH = struct.Struct("!ih")


class ProtocolViolation(Exception):
    """The client broke the protocol; the connection is answered (SQLSTATE 08P01) and
    closed. Not a ``noria_py.Error``: no user of the Python API can cause it."""


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The first message: (its code, its body)."""
    (length,) = _I.unpack(await reader.readexactly(4))
    if not 8 <= length <= 10_000:
        raise ProtocolViolation(f"invalid startup packet length {length}")
    body = await reader.readexactly(length - 4)
    return _I.unpack_from(body)[0], body[4:]


def startup_parameters(body: bytes) -> dict[str, str]:
    """A startup message's name/value pairs (user, database, options, ...)."""
    parts = body.split(b"\0")
    out = {}
    for i in range(0, len(parts) - 1, 2):
        if not parts[i]:
            break
        out[parts[i].decode("utf-8", "replace")] = parts[i + 1].decode("utf-8", "replace")
    return out


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """The next message: (its type byte, its body)."""
    head = await reader.readexactly(5)
    kind, length = head[:1], _I.unpack_from(head, 1)[0]
    if length < 4 or length > MAX_MESSAGE:
        raise ProtocolViolation(f"invalid message length {length} for message type {kind!r}")
    return kind, await reader.readexactly(length - 4)


class Body:
    """Reads a message body field by field; a short or malformed body raises
    ``ProtocolViolation``."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def cstr(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolViolation("unterminated string in message")
        text = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return text.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("invalid UTF-8 in message") from None

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise ProtocolViolation("message too short")
        (v,) = _I.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def int16(self) -> int:
        if self.pos + 2 > len(self.data):
            raise ProtocolViolation("message too short")
        (v,) = _H.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def byte(self) -> bytes:
        if self.pos >= len(self.data):
            raise ProtocolViolation("message too short")
        self.pos += 1
        return self.data[self.pos - 1:self.pos]

    def bytes(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("message too short")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def int16s(self) -> list[int]:
        n = self.int16()
        if n < 0:
            raise ProtocolViolation("negative count in message")
        return [self.int16() for _ in range(n)]


# ------------------------------------------------------------------ server messages

def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I.pack(len(body) + 4) + body


def cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def authentication(code: int, extra: bytes = b"") -> bytes:
    return message(b"R", _I.pack(code) + extra)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!ii", pid, secret))


def ready(status: bytes) -> bytes:
    return message(b"Z", status)


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def row_description(fields: list[tuple[str, int, int, int]]) -> bytes:
    """``fields``: (name, type OID, type size, format code) of each column."""
    parts = [_H.pack(len(fields))]
    for name, oid, size, fmt in fields:
        parts.append(cstr(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, fmt))
    return message(b"T", b"".join(parts))


def parameter_description(oids: list[int]) -> bytes:
    return message(b"t", _H.pack(len(oids)) + b"".join(_I.pack(o) for o in oids))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [_H.pack(len(values))]
    for v in values:
        parts.append(b"\xff\xff\xff\xff" if v is None else _I.pack(len(v)) + v)
    body = b"".join(parts)
    return b"D" + _I.pack(len(body) + 4) + body


def error_response(severity: str, code: str, text: str, position: int | None = None,
                   detail: str | None = None) -> bytes:
    fields = [b"S" + cstr(severity), b"V" + cstr(severity), b"C" + cstr(code),
              b"M" + cstr(text)]
    if detail:
        fields.append(b"D" + cstr(detail))
    if position is not None:
        fields.append(b"P" + cstr(str(position)))
    return message(b"E", b"".join(fields) + b"\0")


def notice(text: str) -> bytes:
    return message(b"N", b"S" + cstr("NOTICE") + b"V" + cstr("NOTICE") + b"C" + cstr("00000")
                   + b"M" + cstr(text) + b"\0")


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")
