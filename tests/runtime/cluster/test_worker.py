"""The worker process's own rules, without a controller (the whole process is tested
in test_cluster.py)."""
import socket
import threading

from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.channels import Inbox
from noria_py.runtime.cluster.worker import _close_after


def test_the_controllers_connection_is_closed_only_after_its_reader_ended():
    """A connection's descriptor is freed only when no thread can still read it: else
    the next socket (dialing back to a restarted controller) can get its number, and
    the stale reader takes bytes of that stream."""
    a, b = socket.socketpair()
    conn, other = wire.Connection(a), wire.Connection(b)
    inbox = Inbox()
    reader = threading.Thread(target=inbox.read, args=("controller", conn), daemon=True)
    reader.start()
    other.send(["hb"])
    assert inbox.get(timeout=5) == ("controller", ("hb",))   # the reader is in recv now
    alive_at_close = []
    close = conn.close

    def spying_close() -> None:
        alive_at_close.append(reader.is_alive())
        close()
    conn.close = spying_close   # type: ignore[method-assign]
    _close_after(conn, [reader, None])
    assert alive_at_close == [False]
    assert not reader.is_alive()
    source, ended = inbox.get(timeout=5)
    assert isinstance(ended, wire.ConnectionClosed)
    other.close()
