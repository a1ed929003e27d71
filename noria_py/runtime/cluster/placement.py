"""Where the cluster's worker processes run: started by the controller as subprocesses of
its own on this machine (``ProcessLauncher``, the default), or as Ray actors that Ray
places across the machines of a Ray cluster (``RayLauncher``, ``noria-py serve --ray
[ADDRESS]``).

Either way a worker is the same program (``worker.serve_worker``): it connects to the
controller over TCP, proves the token, and from then on every frame travels on that
connection. Ray only places, starts and supervises the processes; no data goes through
Ray, whose actor calls cost milliseconds, too slow for messages. The token and the
controller's address reach an actor in its runtime environment's variables, not as
call arguments, so nothing of ours is pickled on the way; so do the names of the TLS
files with ``--tls-cert`` (``Launcher.env``, for subprocesses too: ``tls.Files``).

What the controller gets from a launcher (``Launcher``):

- ``start(n, join, token)``: start ``n`` workers, which join on their own;
- ``find(pid)``: the handle of the worker that joined with that pid (``Launched``:
  ``kill()`` for ``db.fail`` and for a worker gone silent), or None for a worker started
  by hand (``python -m noria_py.runtime.cluster.worker --join``);
- Ray only: a call of ``on_death(pid)`` as soon as Ray sees a worker's process or its
  machine die, which can be sooner than the heartbeat timeout (a machine that vanished
  sends no reset). The controller then treats the worker as lost, as it does when the
  connection ends; whichever comes first wins, the other finds it already lost.
- ``close()``: stop what it started (for Ray, the actors, and Ray itself if it was
  started here).

Placement on Ray: each worker actor asks for ``cpus`` CPUs and the ``SPREAD``
scheduling strategy, so Ray puts the workers (and the spare) on different machines
while it can. An actor is never restarted by Ray (``max_restarts=0``): a lost worker's
nodes are recovered on the warm spare, and a new spare is started, as without Ray.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from ...errors import ArgumentError, ConnectError
from ...tls import Files as TlsFiles

log = logging.getLogger("noria_py.cluster")


class Launched(Protocol):
    """A started worker, as the controller holds it."""

    @property
    def pid(self) -> int:
        """Its process id (what the worker reports when it joins)."""

    def kill(self) -> None:
        """End the worker at once (SIGKILL, or Ray's forced kill)."""


class Launcher(Protocol):
    #: more environment for the workers it starts (file names, e.g. ``tls.Files.env``)
    env: dict[str, str]

    def start(self, n: int, join: tuple[str, int], token: str | None) -> None: ...

    def find(self, pid: int) -> Launched | None: ...

    def close(self) -> None: ...


def cpu_seconds(proc: Launched) -> float | None:
    """The CPU time (user and system) a worker process started on this machine has
    used, from ``/proc``; None for a Ray actor (it may run on another machine), a
    process already reaped, or a system without ``/proc``."""
    if not isinstance(proc, subprocess.Popen):
        return None
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # (the command name, field 2, may hold spaces: fields count from its closing paren)
    fields = stat[stat.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ProcessLauncher:
    """Workers as subprocesses of the controller, on this machine."""

    def __init__(self, read_host: str | None = None) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        #: where the workers serve client reads (``reads.py``; None: where they reach
        #: the controller from)
        self.read_host = read_host
        self.env: dict[str, str] = {}

    def start(self, n: int, join: tuple[str, int], token: str | None) -> None:
        env = {**os.environ, **self.env}
        if token:                   # (in the environment: a command line shows in ps)
            env["NORIA_TOKEN"] = token
        where = [] if self.read_host is None else ["--read-host", self.read_host]
        for _ in range(n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "noria_py.runtime.cluster.worker",
                 "--join", f"{join[0]}:{join[1]}", *where], env=env,
                stdin=subprocess.DEVNULL))

    def find(self, pid: int) -> Launched | None:
        return next((p for p in self.procs if p.pid == pid), None)

    def close(self) -> None:
        for p in self.procs:
            try:
                p.wait(2)
            except subprocess.TimeoutExpired:
                p.kill()


class _RayWorker:
    """A worker process as a Ray actor (the class Ray runs: ``ray.remote(_RayWorker)``)."""

    def pid(self) -> int:
        return os.getpid()

    def run(self) -> None:
        """The worker, until its connection to the controller ends."""
        from .worker import serve_worker
        host, _, port = os.environ["NORIA_JOIN"].rpartition(":")
        serve_worker(host, int(port), os.environ["NORIA_TOKEN"], None,
                     tls=TlsFiles.from_env())


class RayActor:
    """A worker started as a Ray actor: ``kill`` is Ray's forced kill of its process.
    Its pid is asked for when it starts and read when first needed (``start`` does not
    wait for Ray to place the actor: the controller may be holding its lock)."""

    def __init__(self, actor: Any, pid_ref: Any, done: Any) -> None:
        self.actor, self.pid_ref, self.done = actor, pid_ref, done
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            import ray
            try:
                self._pid = int(ray.get(self.pid_ref, timeout=RayLauncher.START_TIMEOUT))
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
                self._pid = -1      # never started (or died first): no worker has its pid
        return self._pid

    @property
    def known_pid(self) -> int | None:
        return self._pid

    def kill(self) -> None:
        import ray
        ray.kill(self.actor, no_restart=True)


class RayLauncher:
    """Workers as Ray actors (module docstring). ``address``: a running Ray cluster's
    (``ray start --head`` prints it; ``"auto"``: the one this machine belongs to), or
    None to start a Ray instance in this process for the cluster's lifetime."""

    #: seconds to wait for an actor to start (Ray may be placing it on another machine)
    START_TIMEOUT = 120.0

    def __init__(self, address: str | None, workers: int, cpus: float = 1.0,
                 on_death: Callable[[int], None] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ArgumentError("--ray needs Ray: pip install 'noria-py[ray]' "
                                "(or pip install 'ray>=2.9')") from None
        if cpus < 0:
            raise ArgumentError(f"CPUs per worker must be at least 0, got {cpus}")
        self.cpus = cpus
        self.on_death = on_death
        self.env: dict[str, str] = {}
        self.started_ray = not ray.is_initialized() and address is None
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                      configure_logging=False)
        try:
            if address is None:
                # our own instance: as many CPUs as the workers and the spare ask for
                n = max(os.cpu_count() or 1, int((workers + 2) * cpus) + 1)
                ray.init(num_cpus=n, **kwargs)
            elif not ray.is_initialized():
                ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConnectError(f"cannot join the Ray cluster at {address}: {exc}") from None
        self._cls: Any = ray.remote(_RayWorker)
        self.actors: list[RayActor] = []
        self.lock = threading.Lock()
        self.closed = False
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="ray-watch")
        self._watcher.start()

    def start(self, n: int, join: tuple[str, int], token: str | None) -> None:
        env = {**self.env, "NORIA_JOIN": f"{join[0]}:{join[1]}", "NORIA_TOKEN": token or ""}
        for _ in range(n):
            actor: Any = self._cls.options(num_cpus=self.cpus, max_restarts=0,
                                      scheduling_strategy="SPREAD",
                                      runtime_env={"env_vars": env}).remote()
            pid_ref = actor.pid.remote()        # before run: an actor takes calls in order
            with self.lock:
                self.actors.append(RayActor(actor, pid_ref, actor.run.remote()))

    def find(self, pid: int) -> Launched | None:
        """The actor whose process has ``pid``. A worker asks its pid before it joins,
        so its answer is in or on its way: wait for answers briefly, never for actors
        Ray is still placing."""
        import ray
        for _ in range(10):
            with self.lock:
                actors = list(self.actors)
            found = next((a for a in actors if a.known_pid == pid), None)
            if found is not None:
                return found
            pending = [a for a in actors if a.known_pid is None]
            if not pending:
                return None
            ready, _ = ray.wait([a.pid_ref for a in pending], num_returns=len(pending),
                                timeout=0.5)
            for a in pending:
                if a.pid_ref in ready:
                    _ = a.pid                       # (ready: does not block)
        return None

    def _watch(self) -> None:
        """Tell the controller of each actor whose ``run`` ended (its process died)."""
        import ray
        while not self.closed:
            with self.lock:
                refs = {a.done: a for a in self.actors}
            if not refs:
                threading.Event().wait(0.2)
                continue
            try:
                ended, _ = ray.wait(list(refs), num_returns=1, timeout=0.2)
            except Exception:  # noqa: BLE001 (Ray going down with the server)
                return
            for ref in ended:
                a = refs[ref]
                with self.lock:
                    if a in self.actors:
                        self.actors.remove(a)
                if a.pid < 0:
                    log.warning("a worker actor ended before it started (Ray could not "
                                "place or start it)")
                elif self.on_death is not None and not self.closed:
                    self.on_death(a.pid)

    def close(self) -> None:
        import ray
        self.closed = True
        with self.lock:
            actors, self.actors = self.actors, []
        for a in actors:
            try:
                ray.kill(a.actor, no_restart=True)
            except Exception:  # noqa: BLE001 (already gone)
                pass
        self._watcher.join(5)
        if self.started_ray:
            ray.shutdown()
