"""``Session.prepared_read`` (Bind, Describe, Execute and Sync of a prepared SELECT in
one pass) answers with exactly the bytes the four messages' handlers send one by one,
and leaves everything else to them."""
from __future__ import annotations

import struct
from typing import Any

import pytest

import noria_py
from noria_py.pg import protocol as P
from noria_py.pg.session import Session


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _bind(statement: str, values: list[bytes | None], formats: list[int] = (),
          result_formats: list[int] = (), portal: str = "") -> bytes:
    body = portal.encode() + b"\0" + statement.encode() + b"\0"
    body += struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    body += struct.pack("!h", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    body += struct.pack(f"!h{len(result_formats)}h", len(result_formats), *result_formats)
    return _msg(b"B", body)


TAIL = _msg(b"D", b"P\0") + _msg(b"E", b"\0" + struct.pack("!i", 0)) + _msg(b"S", b"")


def _general(session: Session, data: bytes) -> bytes:
    """The messages in ``data`` through ``handle`` one by one."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("!i", data, pos + 1)
        out += session.handle(data[pos:pos + 1], data[pos + 5:pos + 1 + length])
        pos += 1 + length
    return b"".join(out)


@pytest.fixture
def session() -> Any:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT, f FLOAT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n, SUM(f) AS s FROM t GROUP BY a")
    db.execute("CREATE VIEW rows_of AS SELECT id, a, b, f FROM t WHERE a = ?")
    db.table("t").insert([(i, i % 3, None if i % 4 == 0 else f"r{i}", i / 2) for i in range(12)])
    s = Session(db, {"user": "u"})
    for name, sql, oids in [("by_a", "SELECT a, n, s FROM v WHERE a = $1", [20]),
                            ("rows", "SELECT id, b, f FROM rows_of WHERE a = $1 ORDER BY id",
                             [0]),
                            ("range", "SELECT id FROM t WHERE id > $1 ORDER BY id", [20]),
                            ("ins", "INSERT INTO t (id, a) VALUES ($1, $2)", [20, 20])]:
        body = name.encode() + b"\0" + sql.encode() + b"\0"
        body += struct.pack(f"!h{len(oids)}i", len(oids), *oids)
        assert s.handle(b"P", body) == [P.PARSE_COMPLETE]
    s.handle(b"S", b"")
    return s


@pytest.mark.parametrize("bind", [
    _bind("by_a", [b"1"]),                                         # one row, text
    _bind("by_a", [b"7"]),                                         # no row
    _bind("by_a", [struct.pack("!q", 2)], [1]),                    # a binary parameter
    _bind("by_a", [b"2"], result_formats=[1]),                     # binary results
    _bind("by_a", [b"2"], result_formats=[0, 1, 0]),               # per column
    _bind("rows", [b"1"]),                                         # rows, NULLs among them
    _bind("rows", [None]),                                         # a NULL key
    _bind("range", [b"3"], result_formats=[1]),                    # an ad-hoc range query
])
def test_the_same_bytes_as_message_by_message(session: Session, bind: bytes) -> None:
    packet = bind + TAIL
    read = session.prepared_read(packet, 0)
    assert read is not None and read[1] == len(packet)
    assert read[0] == _general(session, packet)
    assert not session.portals


@pytest.mark.parametrize("bind", [
    _bind("by_a", [b"x"]),                                         # not an int: an error
    _bind("by_a", [b"1", b"2"]),                                   # too many values
    _bind("nope", [b"1"]),                                         # no such statement
    _bind("by_a", [b"1"], portal="p1"),                            # a named portal
    _bind("ins", [b"100", b"1"]),                                  # not a SELECT
])
def test_anything_else_goes_the_general_way(session: Session, bind: bytes) -> None:
    assert session.prepared_read(bind + TAIL, 0) is None
    assert session.prepared_read(_bind("by_a", [b"1"]) + TAIL[:-5], 0) is None   # no Sync
    session.handle(b"Q", b"BEGIN\0")
    assert session.prepared_read(_bind("by_a", [b"1"]) + TAIL, 0) is None  # in a block
    session.handle(b"Q", b"ROLLBACK\0")
    assert len(session.db.table("t")) == 12


def test_what_a_statement_repeats_is_read_once_and_checked_each_time(session: Session) -> None:
    """The second and later reads of a statement reuse what the first read of its Bind
    (``_FastRead``); a Bind that differs there, or a statement parsed anew under the same
    name, is answered as the handlers answer it."""
    binds = [_bind("by_a", [b"1"]), _bind("by_a", [b"2"]), _bind("by_a", [b"2"], result_formats=[1]),
             _bind("by_a", [struct.pack("!q", 0)], [1]), _bind("by_a", [b"1"]),
             _bind("rows", [b"2"]), _bind("by_a", [None]), _bind("by_a", [b"0"])]
    for bind in binds * 2:
        packet = bind + TAIL
        read = session.prepared_read(packet, 0)
        assert read is not None and read[0] == _general(session, packet)
    for sql, key in [(b"SELECT a, n FROM v WHERE a = $1", b"1"),
                     (b"SELECT n FROM v WHERE a = $1", b"1"),        # the unnamed one, anew
                     (b"SELECT id, a FROM t WHERE id = $1 AND a = $2", b"4")]:
        session.handle(b"P", b"\0" + sql + b"\0" + struct.pack("!h", 0))
        values = [key] if b"$2" not in sql else [key, b"1"]
        packet = _bind("", values) + TAIL
        assert session.prepared_read(packet, 0)[0] == _general(session, packet)
    assert session.prepared_read(_bind("", [b"4", b"x"]) + TAIL, 0) is None  # not an int


def test_avg_of_integers_goes_out_as_numeric(session: Session) -> None:
    # (created over the wire: a view the front end creates has PostgreSQL's AVG; one the
    # Python API created has the engine's, a double precision)
    session.handle(b"Q", b"CREATE VIEW m AS SELECT a, AVG(id) AS avg_id FROM t GROUP BY a\0")
    session.handle(b"P", b"m\0SELECT avg_id FROM m WHERE a = $1\0" + struct.pack("!hi", 1, 20))
    for result_formats in ([], [1], [], [1]):
        packet = _bind("m", [b"1"], result_formats=result_formats) + TAIL
        read = session.prepared_read(packet, 0)
        assert read is not None and read[0] == _general(session, packet)
        assert struct.pack("!i", 1700) in read[0]            # numeric in RowDescription
    assert b"5.5000000000000000" in session.prepared_read(_bind("m", [b"1"]) + TAIL, 0)[0]
