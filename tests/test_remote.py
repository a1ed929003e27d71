"""The cluster client (noria_py/remote.py), in process: its reads at the workers while
a worker is silent, and which inserts it sends as columns. The rest is tested against a
real cluster (tests/runtime/cluster/test_reads.py, test_cluster.py)."""
from __future__ import annotations

import math
import socket

import numpy as np
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


def test_an_insert_of_plain_ints_and_floats_goes_as_exact_columns():
    from noria_py.remote import COLUMNS_MIN, _int_float_columns
    n = COLUMNS_MIN
    rows = [(i - n, (1 << 63) - 1 - i, i / 3, -0.0) for i in range(n)]
    cols = _int_float_columns(rows, 4)
    assert cols is not None and [c[0] for c in cols] == ["i", "i", "f", "f"]
    back = [np.frombuffer(data, dtype="<i8" if kind == "i" else "<f8").tolist()
            for kind, data in cols]
    assert list(zip(*back)) == rows
    assert [math.copysign(1, v) for v in back[3]] == [-1.0] * n     # -0.0 kept
    assert _int_float_columns([list(r) for r in rows], 4) == cols


@pytest.mark.parametrize("odd", [True, None, "x", 1 << 63, -(1 << 63) - 1, float("nan"),
                                 np.int64(1), 1.5])
def test_an_insert_with_any_other_value_goes_as_rows(odd):
    """Each is refused by the server, or converted by ``arguments.plain``, as a row is;
    in an INT column (1.5), or in a FLOAT one beside floats (1, None...)."""
    from noria_py.remote import COLUMNS_MIN, _int_float_columns
    rows = [(i, float(i)) for i in range(COLUMNS_MIN)]
    assert _int_float_columns(rows, 2) is not None
    for col in (0, 1):
        bad = list(rows)
        bad[5] = (odd, 1.0) if col == 0 else (1, odd)
        if col == 1 and type(odd) is float and odd == odd:
            continue                    # (a float among floats is one of them)
        assert _int_float_columns(bad, 2) is None, (odd, col)
    assert _int_float_columns(rows[:-1], 2) is None            # too few to be worth it
    assert _int_float_columns(rows, 3) is None                 # not the table's arity
    assert _int_float_columns([*rows[:-1], {0: 1, 1: 2.0}], 2) is None
