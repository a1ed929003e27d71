"""Start ``noria-py serve`` in a subprocess on loopback, for tests and benchmarks: a
real cluster (controller and workers are all separate processes). ``kill`` and
``restart`` SIGKILL the controller and start it again with the same options (with
``--data-dir``, on the same port: ``restart.py``)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import IO, TYPE_CHECKING, cast

if TYPE_CHECKING:  # pragma: no cover
    from ...remote import RemoteDatabase


class Cluster:
    def __init__(self, workers: int = 2, shards: int = 1, token: str | None = None,
                 extra: tuple[str, ...] = (), log: str | None = None,
                 channels: str | None = None) -> None:
        """``channels``: ``relay`` or ``direct`` (``serve --channels``); None: the
        server's default, or ``$NORIA_CHANNELS`` where set (to run a test suite with
        the other one)."""
        channels = channels or os.environ.get("NORIA_CHANNELS") or None
        cmd = [sys.executable, "-m", "noria_py.runtime.cluster.server", "--port", "0",
               "--workers", str(workers), "--shards", str(shards), *extra]
        if channels is not None:
            cmd += ["--channels", channels]
        env = dict(os.environ)
        env.pop("NORIA_TOKEN", None)
        if token:                   # (in the environment: a command line shows in ps)
            env["NORIA_TOKEN"] = token
        # the server's log goes to ``log`` (a file), else is dropped: an unread pipe
        # would fill up and stall the server
        self._log: IO[str] | int = open(log, "w") if log else subprocess.DEVNULL
        self._cmd, self._env, self._log_name = cmd, env, log
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self._cmd, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, env=self._env)
        line = cast(IO[str], self.proc.stdout).readline()     # (stdout=PIPE: there is one)
        #: the server's start-up line (its address, ``--writes`` mode and why)
        self.line = line
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not m:
            self.close()
            raise RuntimeError(f"serve did not start: {line!r} (log: {self._log_name})")
        self.host, self.port = m.group(1), int(m.group(2))
        told = re.search(r'connect\("([^"]+)"\)', line)     # (with ?tls=CA file under TLS)
        self.url = told.group(1) if told else f"noria://{self.host}:{self.port}"

    def kill(self) -> None:
        """SIGKILL the controller (its workers go on: with ``--data-dir`` they wait for
        the next one, ``restart.py``)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        cast(IO[str], self.proc.stdout).close()

    def restart(self) -> None:
        """Start the controller again, with the same options: with ``--data-dir`` it
        binds the port of the one before, and re-adopts its workers."""
        self._start()

    def worker_pids(self, db: RemoteDatabase) -> list[int]:
        """The pids of the workers hosting nodes (not the warm spare)."""
        return sorted({n["pid"] for n in db.graph() if n.get("pid")})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if not cast(IO[str], self.proc.stdout).closed:
            cast(IO[str], self.proc.stdout).close()
        if self._log is not subprocess.DEVNULL:
            cast(IO[str], self._log).close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
