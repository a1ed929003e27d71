"""The wire itself: bad input gets an ErrorResponse or a closed connection and never
stops the server; SCRAM-SHA-256 logins; the extended protocol's message flow."""
from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

import noria_py
from noria_py.pg import PgServer
from noria_py.pg import protocol as P

psycopg = pytest.importorskip("psycopg")


def _startup(user: str = "u") -> bytes:
    body = struct.pack("!i", P.PROTOCOL_3) + b"user\0" + user.encode() + b"\0\0"
    return struct.pack("!i", len(body) + 4) + body


def _recv_all(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
            if data.endswith(P.ready(b"I")) or data.endswith(P.ready(b"E")):
                break
    except (socket.timeout, ConnectionError):
        pass
    return data


def _messages(data: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 0
    while pos + 5 <= len(data):
        (length,) = struct.unpack_from("!i", data, pos + 1)
        out.append((data[pos:pos + 1], data[pos + 5:pos + 1 + length]))
        pos += 1 + length
    return out


def _session(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(_startup())
    kinds = [k for k, _ in _messages(_recv_all(sock))]
    assert kinds[0] == b"R" and kinds[-1] == b"Z"
    return sock


def _still_serving(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as c:
        assert c.execute("SELECT 1 + 1").fetchone() == (2,)


@pytest.mark.parametrize("payload", [
    b"\x00\x00\x00\x04",                                      # startup too short
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                     # another protocol
    struct.pack("!ii", 8, 12345678),                          # unknown protocol version
    struct.pack("!i", 1 << 30),                               # huge startup length
    b"\xff" * 64,                                             # garbage
])
def test_garbage_before_login_is_refused(served: Any, conninfo: str, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", served[1].port)) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = _recv_all(sock)
    assert data == b"" or data[:1] == b"E"
    _still_serving(conninfo)


@pytest.mark.parametrize("message", [
    b"?" + struct.pack("!i", 4),                              # unknown message type
    b"Q" + struct.pack("!i", P.MAX_MESSAGE + 5),              # oversized
    b"Q" + struct.pack("!i", 2),                              # length below its own size
    b"P" + struct.pack("!i", 8) + b"ab\0\0",                  # Parse cut short
    b"B" + struct.pack("!i", 6) + b"\0\0",                    # Bind cut short
    b"Q" + struct.pack("!i", 9) + b"\xff\xfe\x00\x00\x00",    # not UTF-8
])
def test_bad_messages_get_an_error_and_others_are_served(served: Any, conninfo: str,
                                                         message: bytes) -> None:
    with _session(served[1].port) as sock:
        sock.sendall(message)
        sock.shutdown(socket.SHUT_WR)
        data = _recv_all(sock)
    kinds = [k for k, _ in _messages(data)]
    assert kinds == [] or b"E" in kinds
    _still_serving(conninfo)


def test_a_truncated_message_then_hang_up_leaves_the_server_serving(served: Any,
                                                                   conninfo: str) -> None:
    with _session(served[1].port) as sock:
        sock.sendall(b"Q" + struct.pack("!i", 100) + b"SELECT")
    _still_serving(conninfo)


def test_extended_flow_skips_to_sync_after_an_error(served: Any) -> None:
    def msg(kind: bytes, body: bytes) -> bytes:
        return kind + struct.pack("!i", len(body) + 4) + body
    with _session(served[1].port) as sock:
        sock.sendall(msg(b"P", b"\0SELECT * FROM nowhere\0\0\0")
                     + msg(b"B", b"\0\0\0\0\0\0\0\0") + msg(b"E", b"\0\0\0\0\0")
                     + msg(b"S", b"")
                     + msg(b"P", b"s1\0SELECT $1::int + 1\0\0\0")
                     + msg(b"B", b"\0s1\0\0\0\0\1\0\0\0\0012\0\0") + msg(b"E", b"\0\0\0\0\0")
                     + msg(b"S", b""))
        data = _recv_all(sock) + _recv_all(sock)
    kinds = [k for k, _ in _messages(data)]
    assert kinds == [b"E", b"Z", b"1", b"2", b"D", b"C", b"Z"]
    rows = [body for k, body in _messages(data) if k == b"D"]
    assert rows == [b"\0\1\0\0\0\1" + b"3"]


@pytest.fixture
def guarded() -> Any:
    db = noria_py.connect()
    server = PgServer(db, port=0, token="s3cret", password_on_loopback=True).start()
    yield server
    server.stop()
    db.close()


def test_scram_login_with_the_token(guarded: PgServer) -> None:
    info = f"host=127.0.0.1 port={guarded.port} user=anyone dbname=noria"
    with psycopg.connect(info + " password=s3cret", autocommit=True) as c:
        assert c.execute("SELECT 40 + 2").fetchone() == (42,)


def test_a_wrong_password_is_refused_and_logged(guarded: PgServer,
                                                caplog: pytest.LogCaptureFixture) -> None:
    info = f"host=127.0.0.1 port={guarded.port} user=mallory dbname=noria"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(info + " password=wrong")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(info)
    assert any("mallory" in r.getMessage() for r in caplog.records)
    with psycopg.connect(info + " password=s3cret", autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_binding_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(noria_py.ArgumentError, match="--token"):
        PgServer(None, host="0.0.0.0", port=0)


def test_too_many_clients_get_53300(served: Any) -> None:
    db = noria_py.connect()
    server = PgServer(db, port=0, max_connections=1).start()
    try:
        info = f"host=127.0.0.1 port={server.port} user=u dbname=noria"
        with psycopg.connect(info, autocommit=True):
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(info)
    finally:
        server.stop()
        db.close()


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _read(sock: socket.socket, n: int) -> list[tuple[bytes, bytes]]:
    """The next ``n`` messages (fewer if none comes for 5 s)."""
    sock.settimeout(5)
    data = b""
    while len(_messages(data)) < n:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return _messages(data)


DESCRIBES = [  # what is sent, how many messages answer it
    (_msg(b"P", b"s1\0SELECT a FROM t WHERE b = $1\0\0\0") + _msg(b"S", b""), 2),
    (_msg(b"D", b"Ss1\0") + _msg(b"S", b""), 3),    # libpq's PQprepare, PQdescribePrepared
    (_msg(b"P", b"s2\0INSERT INTO t VALUES ($1, $2)\0\0\0") + _msg(b"D", b"Ss2\0")
     + _msg(b"H", b""), 3),                        # answered at Flush, before any Sync
    (_msg(b"S", b""), 1),
    (_msg(b"D", b"Snosuch\0") + _msg(b"S", b""), 2),
    (_msg(b"D", b"S\0") + _msg(b"S", b""), 2),      # the unnamed statement: none yet
]


def _describes(port: int, user: str, database: str) -> list[list[tuple[bytes, bytes]]]:
    body = (struct.pack("!i", P.PROTOCOL_3) + b"user\0" + user.encode() + b"\0database\0"
            + database.encode() + b"\0\0")
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        assert _messages(_recv_all(sock))[-1][0] == b"Z"
        sock.sendall(_msg(b"Q", b"CREATE TABLE t (a BIGINT, b BIGINT)\0"))
        assert [k for k, _ in _read(sock, 2)] == [b"C", b"Z"]
        answers = []
        for sent, n in DESCRIBES:
            sock.sendall(sent)
            answers.append(_read(sock, n))
        sock.sendall(_msg(b"Q", b"DROP TABLE t\0"))
        _read(sock, 2)
    return answers


def test_describe_of_a_statement_answers_as_postgres(served: Any, postgres: Any) -> None:
    """Parse, Describe 'S', Sync or Flush, in libpq's order and others: the same messages
    as PostgreSQL 15, each answered when it comes (a Flush needs no Sync). The messages'
    bodies are compared but for RowDescription's (types and table OIDs differ)."""
    ours = _describes(served[1].port, "u", "noria")
    theirs = _describes(postgres.port, "postgres", "postgres")
    assert [[k for k, _ in a] for a in ours] == [[k for k, _ in a] for a in theirs] == [
        [b"1", b"Z"], [b"t", b"T", b"Z"], [b"1", b"t", b"n"], [b"Z"], [b"E", b"Z"],
        [b"E", b"Z"]]
    assert ours[1][0] == theirs[1][0] == (b"t", struct.pack("!hi", 1, 20))
    assert ours[2][1] == theirs[2][1] == (b"t", struct.pack("!hii", 2, 20, 20))


LIBPQ = """
import json, sys, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True)
conn.execute("CREATE TABLE lq (a BIGINT, b BIGINT)")
pg, out = conn.pgconn, []
for name, sql in [(b"s1", b"SELECT a FROM lq WHERE b = $1"), (b"s2", b"INSERT INTO lq VALUES ($1, $2)")]:
    r = pg.prepare(name, sql)
    out.append([int(r.status)])
    r = pg.describe_prepared(name)
    out.append([int(r.status), r.nparams, r.nfields] + [r.param_type(i) for i in range(r.nparams)])
conn.execute("DROP TABLE lq")
print(json.dumps(out))
"""


@pytest.mark.slow           # (two client processes, ~2 s: the test above checks the messages)
def test_libpq_prepare_then_describe_prepared(served: Any, conninfo: str, postgres: Any) -> None:
    """``pgconn.prepare`` then ``pgconn.describe_prepared`` (libpq's PQprepare,
    PQdescribePrepared) answer as PostgreSQL's. The client runs in a process of its own:
    psycopg's C ``describe_prepared`` keeps the GIL while libpq waits for the answer, so a
    server in the caller's own process (``PgServer``'s thread) could never send it."""
    import json
    import subprocess
    import sys
    answers = [json.loads(subprocess.run([sys.executable, "-c", LIBPQ, dsn], capture_output=True,
                                         text=True, timeout=60, check=True).stdout)
               for dsn in (conninfo, postgres.dsn)]
    assert answers[0] == answers[1] == [[1], [1, 1, 1, 20], [1], [1, 2, 0, 20, 20]]
