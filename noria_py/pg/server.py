"""The PostgreSQL front end's server: asyncio, one task per client, over one database.

``PgServer(db).start()`` serves in a thread of its own (what tests and notebooks use);
``noria-py pg`` runs ``serve_forever`` in the foreground. Each message is answered by
the client's ``Session`` in the event loop's thread, calling the engine directly: a
lookup takes microseconds, so handing it to another thread would cost more than it
saves, and the database's lock already serializes the engine's calls (client.py).

TLS: with ``tls=(certificate file, key file)`` (``noria-py pg --tls-cert --tls-key``), a
client's SSLRequest is answered ``S`` and the connection is upgraded in place
(``loop.start_tls``) before its startup message; without, ``N``, and the client goes on
in plain text or gives up (``sslmode=require``). Bytes that arrive during the TLS
handshake are kept for the startup that follows, so nothing is read in plain text
after the ``S``.

Who may connect: a client on a loopback address is trusted, as PostgreSQL's default
``pg_hba.conf`` trusts local connections, unless the server was started with
``password_on_loopback``; any other client proves the server's token with
SCRAM-SHA-256 (the token is its password, any user name). Binding an address that is
not loopback without a token is refused. A refused login is logged (logger
``noria_py.pg``) with the peer's address.

Protection: the startup and login must finish within ``STARTUP_TIMEOUT`` seconds, a
message longer than ``protocol.MAX_MESSAGE`` ends its connection, at most
``max_connections`` clients are served at once (the next gets SQLSTATE 53300), and a
client that breaks the protocol gets an ErrorResponse (08P01) and is disconnected;
every other client is served on.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import ssl
import struct
import sys
import threading
from typing import Any, cast

from ..errors import ArgumentError, Error
from ..runtime.cluster.tokens import LOOPBACK
from ..tls import server_context as tls_server_context
from . import protocol as P
from .catalog import REPORTED, Shadow
from .scram import ScramError, ScramServer
from .session import Session

log = logging.getLogger("noria_py.pg")
STARTUP_TIMEOUT = 10.0
#: bytes of a subscription's changes the client may leave unread before it is ended
SUBSCRIBER_BUFFER = 4 << 20
_INT = struct.Struct("!i")


class PgServer:
    """Serves one database (a ``noria_py.Database``) over PostgreSQL's protocol."""

    def __init__(self, db: Any, host: str = "127.0.0.1", port: int = 5433,
                 token: str | None = None, *, password_on_loopback: bool = False,
                 max_connections: int = 100, tls: tuple[str, str] | None = None) -> None:
        """``tls``: a PEM certificate (chain) file and its key file, to offer TLS."""
        if host not in LOOPBACK and not token:
            raise ArgumentError(f"binding {host} (not loopback) needs a password: pass "
                                   "--token (clients log in with it as their password)")
        if password_on_loopback and not token:
            raise ArgumentError("password_on_loopback needs a token")
        self.db = db
        self.host = host
        self.port = port
        self.token = token
        self.password_on_loopback = password_on_loopback
        self.max_connections = max_connections
        self.tls = tls_server_context(*tls) if tls is not None else None
        self.shadow = Shadow()
        self.connections: set[_Connection] = set()
        self.secrets: dict[tuple[int, int], _Connection] = {}
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ------------------------------------------------------------ running

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        async def main() -> None:
            await self._open()
            assert self._server is not None
            async with self._server:
                await self._server.serve_forever()
        asyncio.run(main())

    def start(self) -> "PgServer":
        """Serve in a thread of its own; returns once the port accepts connections."""
        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._open())
            except BaseException as err:   # noqa: BLE001 - reported by start()
                self._error = err
                self._ready.set()
                return
            self._ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="noria-pg", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Stop serving and close every client's connection."""
        loop = self._loop
        if loop is None or self._server is None:
            return

        def shut() -> None:
            assert self._server is not None
            self._server.close()
            for conn in list(self.connections):
                conn.close()
            loop.stop()
        loop.call_soon_threadsafe(shut)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = None

    def __enter__(self) -> "PgServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Connection(asyncio.Protocol):
    """One client: bytes in, messages parsed from a buffer, the session's answers out.

    A protocol object rather than a stream task: a read costs no await, and every
    message already received is answered before the one write that carries the answers
    (a prepared lookup is Bind, Execute and Sync in one packet)."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.session: Session | None = None
        self.scram: ScramServer | None = None
        self.startup: dict[str, str] = {}
        self.state = "startup"          # startup, tls, sasl-first, sasl-final, ready
        self.encrypted = False
        self.peer = ""
        self.timer: asyncio.TimerHandle | None = None
        self.over_limit = False
        self.key = (0, 0)               # BackendKeyData: what a cancel request names

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else ""
        self.server.connections.add(self)
        self.over_limit = len(self.server.connections) > self.server.max_connections
        self.timer = asyncio.get_running_loop().call_later(STARTUP_TIMEOUT, self._too_slow)

    def _too_slow(self) -> None:
        if self.state != "ready":
            self._fatal("08006", "startup took too long")

    def cancel(self) -> None:
        """A cancel request for this client (from another connection)."""
        sub = self.session.subscription if self.session is not None else None
        if sub is not None:
            sub.fail("canceling statement due to user request")

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.server.secrets.pop(self.key, None)
        if self.timer is not None:
            self.timer.cancel()
        if self.session is not None:
            self.session.close()
            self.session = None

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _fatal(self, code: str, text: str) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(P.error_response("FATAL", code, text))
            self.transport.close()
        self.state = "closed"

    def data_received(self, data: bytes) -> None:
        if self.state == "tls":         # the handshake's bytes: kept for the startup
            self.buf += data
            return
        if self.buf:                    # the rest of a message that came in parts
            self.buf += data
            data = bytes(self.buf)
            self.buf.clear()
        out: list[bytes] = []
        pos, size = 0, len(data)
        try:
            while self.state != "closed":
                session = self.session
                if self.state == "startup":     # no type byte: length, then the body
                    if size - pos < 4:
                        break
                    (length,) = _INT.unpack_from(data, pos)
                    if not 8 <= length <= 10_000:
                        raise P.ProtocolViolation(f"invalid startup packet length {length}")
                    if size - pos < length:
                        break
                    out += self._startup(data[pos + 4:pos + length])
                    pos += length
                    if self.state == "tls":
                        if pos < size:
                            raise P.ProtocolViolation("data after an SSLRequest, before "
                                                      "the server's answer")
                        break
                    continue
                if size - pos < 5:
                    break
                (length,) = _INT.unpack_from(data, pos + 1)
                if length < 4 or length > P.MAX_MESSAGE:
                    raise P.ProtocolViolation(f"invalid message length {length} for message "
                                              f"type {data[pos:pos + 1]!r}")
                if size - pos <= length:
                    break
                kind = data[pos:pos + 1]
                if kind == b"B" and session is not None:
                    read = session.prepared_read(data, pos)
                    if read is not None:        # Bind, Describe, Execute, Sync at once
                        out.append(read[0])
                        pos = read[1]
                        continue
                body = data[pos + 5:pos + 1 + length]
                pos += length + 1
                if session is not None:
                    out += session.handle(kind, body)
                    if session.terminated:
                        self.state = "closed"
                else:
                    out += self._sasl(kind, body)
            if pos < size and self.state != "closed":
                self.buf += data[pos:]
        except P.ProtocolViolation as err:
            out.append(P.error_response("FATAL", "08P01", str(err)))
            self.state = "closed"
        except Exception as err:          # noqa: BLE001 - a bug must not stop the server
            log.exception("pg client %s: internal error", self.peer)
            out.append(P.error_response("FATAL", "XX000", f"internal error: {err!r}"))
            self.state = "closed"
        self._send(out)

    def _send(self, out: list[bytes]) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            if out:
                transport.write(b"".join(out))
            if self.state == "closed":
                transport.close()
            elif self.state == "tls":
                transport.pause_reading()   # the client's next bytes are the handshake's
                asyncio.ensure_future(self._start_tls(transport))

    async def _start_tls(self, transport: asyncio.Transport) -> None:
        assert self.server.tls is not None
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, self, self.server.tls, server_side=True,
                ssl_handshake_timeout=STARTUP_TIMEOUT)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as err:
            log.warning("pg client %s: TLS handshake failed: %s", self.peer, err)
            self.state = "closed"
            transport.close()
            return
        if tls is None:                 # the connection closed during the handshake
            return
        self.transport = tls
        self.encrypted = True
        self.state = "startup"
        if self.buf:                    # the startup came with the handshake's end
            self.data_received(b"")

    def _pushed(self, data: bytes, end: bool) -> None:
        """A subscription's lines (or, with ``end``, its final error), in the loop."""
        transport, session = self.transport, self.session
        if transport is None or transport.is_closing() or session is None:
            return
        transport.write(data)
        sub = session.subscription
        if end:
            session.subscription = None
        elif sub is not None and transport.get_write_buffer_size() > SUBSCRIBER_BUFFER:
            sub.fail(f"subscriber to view {sub.view!r} fell behind (more than "
                     f"{SUBSCRIBER_BUFFER} bytes not read); subscribe again")

    def _startup(self, body: bytes) -> list[bytes]:
        (code,) = _INT.unpack_from(body)
        if code == P.SSL_REQUEST and self.server.tls is not None and not self.encrypted:
            self.state = "tls"          # answered S, then upgraded (_send, _start_tls)
            return [b"S"]
        if code in (P.SSL_REQUEST, P.GSS_REQUEST):
            return [b"N"]               # no TLS here: the client goes on in plain text
        if code == P.CANCEL_REQUEST:
            # only a subscription runs long enough to be cancelled: end it (the other
            # statements run to their end before the next message is read)
            self.state = "closed"
            if len(body) >= 12:
                target = self.server.secrets.get(struct.unpack_from("!ii", body, 4))
                if target is not None:
                    target.cancel()
            return []
        if code != P.PROTOCOL_3:
            self.state = "closed"
            return [P.error_response("FATAL", "0A000", f"unsupported frontend protocol "
                                     f"{code >> 16}.{code & 0xFFFF}: server supports 3.0")]
        if self.over_limit:             # answered after the startup packet, as PostgreSQL does
            self.state = "closed"
            return [P.error_response("FATAL", "53300", "sorry, too many clients already")]
        self.startup = P.startup_parameters(body[4:])
        server = self.server
        if server.token and (server.password_on_loopback or self.peer not in LOOPBACK):
            self.scram = ScramServer(server.token)
            self.state = "sasl-first"
            return [P.authentication(10, b"SCRAM-SHA-256\0\0")]
        return self._welcome()

    def _sasl(self, kind: bytes, body: bytes) -> list[bytes]:
        assert self.scram is not None
        try:
            if kind != b"p":
                raise ScramError("expected a SASL response")
            if self.state == "sasl-first":
                b = P.Body(body)
                if b.cstr() != "SCRAM-SHA-256":
                    raise ScramError("unsupported SASL mechanism")
                first = b.take(b.int32()).decode()
                self.state = "sasl-final"
                return [P.authentication(11, self.scram.first(first).encode())]
            final = self.scram.final(body.decode())
        except (ScramError, P.ProtocolViolation, UnicodeDecodeError, ValueError) as err:
            log.warning("pg: refused login of user %r from %s: %s",
                        self.startup.get("user", ""), self.peer, err)
            self.state = "closed"
            return [P.error_response("FATAL", "28P01", "password authentication failed for "
                                     f"user \"{self.startup.get('user', '')}\"")]
        return [P.authentication(12, final.encode())] + self._welcome()

    def _welcome(self) -> list[bytes]:
        out = [P.authentication(0)]
        session = Session(self.server.db, self.startup, self.server.shadow)
        for name in REPORTED:
            out.append(P.parameter_status(name, session.settings.get(name)))
        self.key = (os.getpid(), secrets.randbits(31))
        self.server.secrets[self.key] = self
        out.append(P.backend_key(*self.key))
        out.append(P.ready(b"I"))
        loop = asyncio.get_running_loop()

        def push(data: bytes, end: bool) -> None:
            loop.call_soon_threadsafe(self._pushed, data, end)
        session.push = push
        self.session = session
        self.state = "ready"
        if self.timer is not None:
            self.timer.cancel()
        return out


def main(argv: list[str] | None = None) -> int:
    """``noria-py pg``: serve a database over PostgreSQL's protocol."""
    import argparse

    import noria_py

    p = argparse.ArgumentParser(
        prog="noria-py pg", description="Serve a database to PostgreSQL clients (psql, "
        "psycopg, asyncpg, SQLAlchemy, ...); docs/postgres.md.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (anything but loopback needs --token)")
    p.add_argument("--port", type=int, default=5433, help="port to serve (0: a free one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--data-dir", help="the database's directory (else in memory)")
    where.add_argument("--server", help="serve a running cluster: noria://HOST:PORT")
    p.add_argument("--shards", type=int, default=1, help="shards of an embedded database")
    p.add_argument("--max-connections", type=int, default=100)
    p.add_argument("--token", default=os.environ.get("NORIA_TOKEN"),
                   help="the password clients not on loopback log in with, and the "
                        "cluster's token with --server ($NORIA_TOKEN)")
    p.add_argument("--tls-cert", default=None,
                   help="a PEM certificate (chain) file: offer TLS (with --tls-key)")
    p.add_argument("--tls-key", default=None, help="the PEM key file of --tls-cert")
    args = p.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        p.error("--tls-cert and --tls-key go together")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.server:
        db = noria_py.connect(args.server, token=args.token)
    else:
        db = noria_py.connect(data_dir=args.data_dir, shards=args.shards)
    try:
        server = PgServer(db, args.host, args.port, args.token,
                          max_connections=args.max_connections,
                          tls=(args.tls_cert, args.tls_key) if args.tls_cert else None)
    except Error as err:
        print(f"noria-py pg: {err}", file=sys.stderr)
        db.close()
        return 2
    log.info("serving PostgreSQL clients on %s:%d (psql -h %s -p %d)", args.host, args.port,
             args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
