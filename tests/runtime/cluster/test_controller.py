"""The controller's handling of a worker's connection, without worker processes (the
whole cluster is tested in test_cluster.py)."""
from __future__ import annotations

import socket
import threading

import pytest

from noria_py.batch import Batch
from noria_py.errors import RecoveryError
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.controller import ClusterRuntime, WorkerHandle
from noria_py.runtime.cluster.worker import Worker


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


def _parted(monkeypatch) -> tuple[ClusterRuntime, Worker, list[tuple]]:
    """A controller whose requests go straight to a worker's handler (no processes),
    lost bases' histories cut in parts of at most 3 rows; and the requests sent."""
    from noria_py import tuning

    monkeypatch.setattr(tuning, "BASE_PART_ROWS", 3)
    worker = Worker.__new__(Worker)
    worker.history = {}
    sent: list[tuple] = []

    def ask(w, method, *args):
        assert method == "base_history"
        sent.append(args)
        worker.req_base_history(*args)
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.ask = ask                            # type: ignore[method-assign]
    return rt, worker, sent


def _batches(sizes: list[int], at: int = 0) -> list[Batch]:
    return [Batch([(at + k, i) for i in range(n)], [1] * n) for k, n in enumerate(sizes)]


def _rows(batches) -> list[tuple]:
    return [(r, s) for b in batches for r, s in zip(b.rows, b.signs)]


def test_a_lost_bases_table_and_writes_go_to_its_worker_in_parts_and_come_back_whole(
        monkeypatch):
    """``history_parts``: the table's batches (cut to fit) and then the writes (each
    whole) go in parts of at most ``tuning.BASE_PART_ROWS`` rows, all but the last
    ahead of the request (``base_history``); the worker's ``base_parts`` gives back
    the table's rows and every write, in order, each once."""
    rt, worker, sent = _parted(monkeypatch)
    table = _batches([7, 2], at=100)
    writes = _batches([2, 2, 1, 5, 1])
    last, rows = rt.history_parts("w0", "n1", writes, table)
    assert rows == 11 and last[2] == len(sent) == 6
    sizes = [sum(len(wire.decode_batch(b)) for b in (*ws, *t)) for _, _, ws, t in sent]
    assert sizes == [3, 3, 3, 2, 3, 5]      # (the last write of 5 rows a part alone)
    got_table, got_writes = worker.base_parts("n1", last)
    assert _rows(got_table) == _rows(table)
    assert [(g.rows, g.signs) for g in got_writes] == [(w.rows, w.signs) for w in writes]
    assert worker.history == {}


def test_a_restore_takes_only_the_parts_of_its_own_attempt(monkeypatch):
    """Parts an abandoned attempt sent ahead are never taken into the next: part 0
    starts afresh, a request with none ahead drops what is kept, and a count that
    does not match is refused."""
    rt, worker, sent = _parted(monkeypatch)
    rt.history_parts("w0", "n1", _batches([2, 2, 2], at=100))    # (abandoned: 2 ahead)
    last, _ = rt.history_parts("w0", "n1", _batches([1]))
    assert last[2] == 0
    assert _rows(worker.base_parts("n1", last)[1]) == _rows(_batches([1]))
    rt.history_parts("w0", "n1", _batches([2, 2, 2], at=100))    # (abandoned again)
    writes = _batches([2, 2, 2, 2])
    last, _ = rt.history_parts("w0", "n1", writes)
    assert _rows(worker.base_parts("n1", last)[1]) == _rows(writes)
    rt.history_parts("w0", "n1", _batches([2, 2, 2], at=100))
    with pytest.raises(RecoveryError, match="2 parts of its history arrived, not the 3"):
        worker.base_parts("n1", [[], [], 3])
    with pytest.raises(RecoveryError, match="part 2 of its history after 0 parts"):
        worker.req_base_history("n2", 2, [], [])
