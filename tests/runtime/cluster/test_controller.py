"""The controller's handling of a worker's connection, without worker processes (the
whole cluster is tested in test_cluster.py)."""
from __future__ import annotations

import socket
import threading

from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.controller import ClusterRuntime, WorkerHandle


def test_a_lost_workers_connection_is_closed_by_its_reader_after_its_sender_stopped():
    """Its descriptor is freed only when neither of the threads using it can still
    reach the kernel with it: else the next worker's connection can get its number
    and take the stale thread's bytes. Here the sender is blocked in a send (the
    worker reads nothing) when the worker is lost."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    w = WorkerHandle("w1", wire.Connection(a), 0)
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.closed = True                        # (nothing to log)

    def lose(worker: WorkerHandle) -> None:     # what ``_lose`` does to the connection
        worker.put(None)
        worker.conn.shutdown()
    rt._lose = lose                         # type: ignore[method-assign]
    w.sender = threading.Thread(target=w.writer, daemon=True)
    w.sender.start()
    w.put(["msg", "n1", b"x" * (1 << 22)])  # more than the socket buffers take
    sender_alive_at_close = []
    close = w.conn.close

    def spying_close() -> None:
        sender_alive_at_close.append(w.sender.is_alive())
        close()
    w.conn.close = spying_close             # type: ignore[method-assign]
    reader = threading.Thread(target=rt._reader, args=(w,), daemon=True)
    reader.start()
    b.shutdown(socket.SHUT_WR)              # the worker's end: the reader sees it
    reader.join(10)
    assert not reader.is_alive()
    assert sender_alive_at_close == [False]
    assert w.conn.sock.fileno() == -1
    b.close()
