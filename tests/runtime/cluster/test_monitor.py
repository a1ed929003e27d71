"""The controller's heartbeat monitor (``ClusterRuntime._monitor``): a worker is lost
when it has been silent past the timeout, and not while this side is busy with one
of its frames (its reader thread held up, say, by the checkpoint store's lock during a
recovery: the worker's heartbeats then wait in the socket, unread), nor while the bytes
of a long frame of its are arriving (its heartbeats queue behind it), nor while its
process, on this machine, keeps using CPU (a long call holding its interpreter's lock
starves its heartbeat thread), up to ``tuning.SILENT_BUSY_MAX``."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from noria_py import tuning
from noria_py.runtime.cluster.controller import ClusterRuntime, WorkerHandle
from noria_py.runtime.cluster.placement import cpu_seconds


class _Conn:
    def __init__(self) -> None:
        self.shut = threading.Event()
        self.heard = 0.0            # (``wire.Connection.heard``: no long frame yet)

    def shutdown(self) -> None:
        self.shut.set()


def _monitored(handling: bool, reading: bool = False,
               proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Whether a worker silent for 0.3 s past a 0.1 s timeout is declared lost
    (``reading``: while a long frame of its keeps arriving) within half a second
    (``proc``: its process, started here)."""
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.closed = False
    rt.heartbeat_timeout = 0.1
    conn = _Conn()
    w = WorkerHandle("w1", conn, 0, proc)      # type: ignore[arg-type]
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


def _process(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)


@pytest.fixture
def spinning():
    """A process using CPU all the time (a worker busy in a long call)."""
    p = _process("while True: pass")
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def sleeping():
    """A process using none (a worker stopped or deadlocked)."""
    p = _process("import time; time.sleep(60)")
    time.sleep(0.3)                     # (its start-up's CPU done)
    yield p
    p.kill()
    p.wait()


def test_a_silent_worker_whose_process_uses_cpu_is_busy_not_lost(spinning):
    assert cpu_seconds(spinning) is not None
    assert not _monitored(handling=False, proc=spinning)


def test_a_silent_worker_whose_process_uses_no_cpu_is_lost(sleeping):
    assert _monitored(handling=False, proc=sleeping)


def test_a_busy_worker_is_lost_once_silent_past_the_busy_bound(spinning, monkeypatch):
    monkeypatch.setattr(tuning, "SILENT_BUSY_MAX", 0.2)
    assert _monitored(handling=False, proc=spinning)
