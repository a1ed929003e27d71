"""The cluster client's reads at the workers (noria_py/remote.py), in process: what it
does while a worker is silent. The rest is tested against a real cluster
(tests/runtime/cluster/test_reads.py)."""
from __future__ import annotations

import socket

import pytest

from noria_py import arguments
from noria_py.remote import RemoteDatabase, _Link, _Placement
from sql_frontend.types import SqlType


class _Silent:
    """A worker's connection that times out ``silent`` times, then answers (a socket
    with ``SO_RCVTIMEO`` fails with EAGAIN, one with ``settimeout`` with a timeout)."""

    def __init__(self, silent: int, error: type[OSError] = BlockingIOError) -> None:
        self.silent = silent
        self.error = error
        self.calls = 0

    def recv(self):
        self.calls += 1
        if self.calls <= self.silent:
            raise self.error("timed out")
        return ("ok", 1, ())


def _client(placements):
    db = RemoteDatabase.__new__(RemoteDatabase)
    asked = iter(placements)
    db._placement = lambda view: next(asked)    # (the controller's answers, in turn)
    return db


def _where(*addresses):
    check = arguments.KeyCheck("view 'v'", ["k"], [SqlType.INT])
    return _Placement([f"n{i}" for i in range(len(addresses))],
                      [_Link(a) for a in addresses], check)


@pytest.mark.parametrize("error", [BlockingIOError, socket.timeout])
def test_a_slow_worker_still_holding_the_reader_is_waited_for(error):
    where = _where(("127.0.0.1", 1))
    link = where.links[0]
    link.conn = _Silent(2, error)
    db = _client([_where(("127.0.0.1", 1)), _where(("127.0.0.1", 1))])
    assert db._answer("v", where, link) == ("ok", 1, ())
    assert link.conn.calls == 3


def test_a_silent_worker_is_given_up_once_the_reader_is_placed_elsewhere():
    """A worker stopped (SIGSTOP), not dead, keeps its connections open: once the
    controller has moved the reader (the worker was found hung), the read is sent
    where the reader is now."""
    where = _where(("127.0.0.1", 1), ("127.0.0.1", 2))
    link = where.links[0]
    link.conn = _Silent(10)
    db = _client([_where(("127.0.0.1", 1), ("127.0.0.1", 2)),
                  _where(("127.0.0.1", 3), ("127.0.0.1", 2))])
    with pytest.raises(BlockingIOError):
        db._answer("v", where, link)
    assert link.conn.calls == 2


def test_a_read_port_connection_gives_up_after_the_time_given():
    """``_give_up_after``: a blocking read of a silent peer fails, not hangs."""
    from noria_py.remote import _give_up_after
    a, b = socket.socketpair()
    with a, b:
        _give_up_after(a, 0.05)
        assert a.gettimeout() in (None, 0.05)
        with pytest.raises((BlockingIOError, socket.timeout)):
            a.recv(1)
        b.send(b"x")
        assert a.recv(1) == b"x"
