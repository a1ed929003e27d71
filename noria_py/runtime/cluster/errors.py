"""The cluster runtime's own errors: a node's worker is gone, or not back yet.

They are internal: the controller catches them to wait for a recovery and retry
(reads through ``RemoteOp``, the server's ``execute`` and ``wait``). They subclass
``noria_py.OperationalError`` so that one escaping all retries reaches a client as an ordinary
engine error with its message, never as an internal one; they are not in
``noria_py.errors``, so a remote client sees a plain ``noria_py.Error``.
"""
from ...errors import OperationalError


class WorkerLost(OperationalError):
    """The worker hosting a node died while it was being asked something."""


class NodeDown(OperationalError):
    """A read reached a node that is not back yet (the controller waits and retries).

    Raised on a worker; it crosses the wire by name, and the controller raises
    ``WorkerLost`` for it."""


class BaseDown(WorkerLost):
    """A write or a table read made at the controller reached a base that is down (its
    worker lost, not yet restored) while its caller holds a pause of the writes
    (``ClusterRuntime.hold``: a SQL statement, a catalog change), which it must not
    keep while waiting: the statement is undone and run again once the recovery is
    done (``Server._catalog_change``), as for any worker lost under it. Outside a
    pause the caller waits instead, the server's lock released meanwhile
    (``ClusterRuntime.base_down``)."""
