"""What a controller with ``--data-dir`` keeps on disk to come back after a crash
(``DIR/cluster.json``), beside the tables' catalog and write-ahead log (``storage/``).

The file holds the shared token (so the workers still running can prove themselves
to the next controller), the port (a restart with ``--port 0`` binds the same one,
where those workers dial back), the workers last known (name, pid, read and peer
addresses: how many to wait for), the placement of node shards on them, and the
highest node number used so far.

Invariants, and why:

- The file is replaced whole, by an fsynced write to ``cluster.json.new`` and a
  rename (not ``.tmp``: opening the storage removes those), mode 0600 (it holds the token): a crash leaves the old file or the new one,
  never a torn one.
- The node number is saved *before* a catalog change reaches any worker
  (``ClusterRuntime.announce``): every node id a worker may hold is at most that
  number. The next controller numbers its nodes after it, and so do the workers it
  re-adopts, so a node id never names two different nodes across a restart: a client
  that still holds an old placement reads the old reader (kept, read-only, until the
  new controller is ready) or is told ``moved``, never another view's rows.
- Node state is not kept across a restart: the next controller rebuilds every view
  from the catalog and the write-ahead log, which hold every acknowledged write
  (``Database`` logs a write durably before it is applied or answered). The workers'
  old readers keep serving reads meanwhile.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ...errors import CorruptionError

__all__ = ["ClusterState", "FILE", "REJOIN_TIMEOUT", "REJOIN_WAIT"]

FILE = "cluster.json"
#: seconds a worker whose controller died serves reads and tries to rejoin before it
#: exits (``noria-py serve --rejoin-timeout``; with ``--data-dir`` only)
REJOIN_TIMEOUT = 30.0
#: seconds a restarted controller waits for the workers it knew to rejoin before it
#: starts new ones for those that did not
REJOIN_WAIT = 5.0


class ClusterState:
    """``DIR/cluster.json``, read at start and rewritten as the cluster changes."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(data_dir) / FILE
        self.lock = threading.Lock()
        #: what the file held when the server started (empty: no earlier controller)
        self.previous: dict[str, Any] = {}
        self.data: dict[str, Any] = {"version": 1, "token": None, "port": None,
                                     "workers": {}, "placement": {}, "numbers": 0}
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        try:
            got = json.loads(text)
            if not (isinstance(got, dict) and got.get("version") == 1
                    and isinstance(got.get("workers"), dict)
                    and isinstance(got.get("placement"), dict)
                    and type(got.get("numbers")) is int):
                raise ValueError("not a cluster state of version 1")
        except ValueError as e:
            raise CorruptionError(f"{str(self.path)!r} is damaged ({e}); remove it to start "
                                  "the cluster afresh (its tables are in the data directory; "
                                  "running workers will not be re-adopted)") from None
        self.previous = got
        self.data.update(token=got.get("token"), port=got.get("port"),
                         numbers=got["numbers"])

    @property
    def restarting(self) -> bool:
        """An earlier controller ran on this directory (its workers may still run)."""
        return bool(self.previous)

    def known_workers(self) -> int:
        return len(self.previous.get("workers", {}))

    def save(self, **changes: Any) -> None:
        """Set ``changes`` (token, port, workers, placement, numbers) and write the file."""
        with self.lock:
            self.data.update(changes)
            tmp = self.path.with_name(FILE + ".new")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(self.data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
