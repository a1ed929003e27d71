"""PostgreSQL's frontend/backend protocol, version 3.0: reading a client's messages and
writing the server's, as bytes (no engine and no I/O here: the server's connection
splits the stream into messages).

A message is a type byte, a 4-byte big-endian length that counts itself, and a body;
the first message of a connection (startup, SSL or cancel request) has no type byte.
Limits: a message longer than ``MAX_MESSAGE`` is refused before it is read
(``ProtocolViolation``), so a client cannot make the server allocate without bound.
Why hand-written rather than a library: the protocol is a small, stable, documented
format, and the toolkits on the package index were slower and lacked SCRAM and
SQLSTATEs (docs/postgres.md has the measurement).
"""
from __future__ import annotations

import struct

MAX_MESSAGE = 64 << 20          # bytes: longer messages end the connection
SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608

_I = struct.Struct("!i")
_H = struct.Struct("!h")


class ProtocolViolation(Exception):
    """The client broke the protocol; the connection is answered (SQLSTATE 08P01) and
    closed. Not a ``noria_py.Error``: no user of the Python API can cause it."""


def startup_parameters(body: bytes) -> dict[str, str]:
    """A startup message's name/value pairs (user, database, options, ...)."""
    parts = body.split(b"\0")
    out = {}
    for i in range(0, len(parts) - 1, 2):
        if not parts[i]:
            break
        out[parts[i].decode("utf-8", "replace")] = parts[i + 1].decode("utf-8", "replace")
    return out


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

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("message too short")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def byte(self) -> bytes:
        return self.take(1)

    def int32(self) -> int:
        return _I.unpack(self.take(4))[0]

    def int16(self) -> int:
        return _H.unpack(self.take(2))[0]


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
