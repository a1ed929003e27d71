"""Workers placed by Ray (``noria-py serve --ray ADDRESS``, runtime/cluster/placement.py):
the cluster's randomized SIGKILL tests against DuckDB with the workers as Ray actors,
``db.fail`` as Ray's kill of an actor, and Ray's notice of a dead worker."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import noria_py
from noria_py.runtime.cluster.launch import Cluster
from tests.needs import ray_instance
from tests.runtime.cluster.test_cluster import _differential_with_kill


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    address = ray_instance()
    import ray
    try:
        yield address
    finally:
        ray.shutdown()


def test_sigkill_mid_load_with_ray_placement_matches_duckdb(ray_address, monkeypatch):
    _differential_with_kill(1, monkeypatch, extra=("--ray", ray_address))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_soak_with_ray_placement(ray_address, seed, monkeypatch):
    _differential_with_kill(seed, monkeypatch, extra=("--ray", ray_address))


@pytest.mark.slow               # (CI time: two workers killed together is in test_cluster.py)
def test_two_ray_workers_killed_together_match_duckdb(ray_address, monkeypatch):
    _differential_with_kill(2, monkeypatch, victims=2, extra=("--ray", ray_address))


def test_fail_kills_the_actor_and_its_nodes_come_back(ray_address):
    with Cluster(workers=2, shards=2, extra=("--ray", ray_address)) as cluster:
        db = noria_py.connect(cluster.url)
        db.execute("CREATE TABLE v (a INT, u INT)")
        db.execute("CREATE VIEW n AS SELECT a, COUNT(*) AS c FROM v GROUP BY a")
        db.table("v").insert([(i % 10, i) for i in range(1000)])
        db.wait()
        before = set(cluster.worker_pids(db))
        agg = next(n["id"] for n in db.graph() if n["kind"] == "aggregate")
        victim = next(n["pid"] for n in db.graph() if n["id"] == agg)
        db.fail(agg)                               # Ray's kill of the actor
        db.table("v").insert([(i % 10, i) for i in range(10)])
        db.wait()
        assert sorted(db.view("n").all()) == [(a, 101) for a in range(10)]
        assert victim in before and victim not in cluster.worker_pids(db)
        assert _gone(victim)
        reports = db.recoveries()       # one per node of the killed worker
        assert agg in {r.node for r in reports} and all(r.automatic for r in reports)
        db.close()


def _gone(pid: int, timeout: float = 30.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` (Ray's kill is asynchronous: the
    controller has its connection's end first); a zombie not yet reaped is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_ray_tells_the_launcher_of_a_dead_worker(ray_address):
    """A worker that joined nothing yet (its controller never answers) and is killed:
    the launcher hears it from Ray, with the worker's pid; no heartbeat or connection
    is involved."""
    from noria_py.runtime.cluster.placement import RayLauncher
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
    dead: list[int] = []
    launcher = RayLauncher(ray_address, workers=1, on_death=dead.append)
    try:
        launcher.start(1, listener.getsockname()[:2], "tok")
        pid = launcher.actors[0].pid
        assert pid > 0 and launcher.find(pid) is launcher.actors[0]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not dead and time.monotonic() < deadline:
            time.sleep(0.05)
        assert dead == [pid] and launcher.find(pid) is None
    finally:
        launcher.close()
        listener.close()
        for s in held:
            s.close()
