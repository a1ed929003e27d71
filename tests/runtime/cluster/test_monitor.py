"""The controller's heartbeat monitor (``ClusterRuntime._monitor``): a worker is lost
when it has been silent past the timeout, and not while this side is busy with one
of its frames (its reader thread held up, say, by the checkpoint store's lock during a
recovery: the worker's heartbeats then wait in the socket, unread), nor while the bytes
of a long frame of its are arriving (its heartbeats queue behind it)."""
from __future__ import annotations

import threading
import time

from noria_py.runtime.cluster.controller import ClusterRuntime, WorkerHandle


class _Conn:
    def __init__(self) -> None:
        self.shut = threading.Event()
        self.heard = 0.0            # (``wire.Connection.heard``: no long frame yet)

    def shutdown(self) -> None:
        self.shut.set()


def _monitored(handling: bool, reading: bool = False) -> bool:
    """Whether a worker silent for 0.3 s past a 0.1 s timeout is declared lost
    (``reading``: while a long frame of its keeps arriving)."""
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.closed = False
    rt.heartbeat_timeout = 0.1
    conn = _Conn()
    w = WorkerHandle("w1", conn, 0)      # type: ignore[arg-type]
    w.last_heard = time.monotonic() - 0.3
    w.handling = handling
    rt.workers = {"w1": w}
    t = threading.Thread(target=rt._monitor, daemon=True)
    t.start()
    deadline = time.monotonic() + 0.5
    while not (lost := conn.shut.wait(0.01)) and time.monotonic() < deadline:
        if reading:
            conn.heard = time.monotonic()
    rt.closed = True
    t.join()
    return lost


def test_a_silent_worker_is_lost():
    assert _monitored(handling=False)


def test_a_worker_whose_frame_is_being_handled_here_is_not_lost():
    assert not _monitored(handling=True)


def test_a_worker_whose_long_frame_is_arriving_is_not_lost():
    assert not _monitored(handling=False, reading=True)
