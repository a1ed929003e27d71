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


def test_a_bases_writes_go_to_its_worker_in_parts_the_last_with_the_request(monkeypatch):
    """``history_parts``: every part of at least ``BASE_PART_ROWS`` rows is sent on its
    own (``base_history``), in order; the rest is returned for the request that uses
    them, with the rows of all; together they are the writes, each once."""
    from noria_py.batch import Batch
    from noria_py.runtime.cluster import controller

    monkeypatch.setattr(controller, "BASE_PART_ROWS", 3)
    sent: list[tuple] = []
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.ask = lambda w, method, *args: sent.append((w, method, *args))  # type: ignore[method-assign]
    sizes = [2, 2, 1, 5, 1]
    writes = [Batch([(i, n) for i in range(n)], [1] * n) for n in sizes]
    last, rows = rt.history_parts("w0", "n1", writes)
    assert rows == sum(sizes)
    assert [(w, m, b) for w, m, b, _ in sent] == [("w0", "base_history", "n1")] * 2
    parts = [p for *_, p in sent] + [last]
    assert [len(p) for p in parts] == [2, 2, 1]
    got = [wire.decode_batch(b) for p in parts for b in p]
    assert [(g.rows, g.signs) for g in got] == [(w.rows, w.signs) for w in writes]
