"""TLS on a cluster's own connections (noria_py/tls.py): ``noria-py serve --tls-cert
--tls-key`` serves every port with it (the controller's, the workers' read ports) and
the workers join over it. One cluster for the module: writes, reads at the workers, a
subscription and ``wait`` work over TLS; no byte of the data crosses the wire in clear;
a plain client, a client with another CA and a worker with another CA are refused, and
the cluster goes on serving."""
from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import noria_py
from noria_py.errors import ConnectError
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.launch import Cluster
from tests import needs

TOKEN = "tls-test-token"


@pytest.fixture(scope="module")
def cluster(certificate: tuple[str, str]) -> Iterator[Cluster]:
    cert, key = certificate
    with Cluster(workers=2, shards=2, token=TOKEN,
                 extra=("--tls-cert", cert, "--tls-key", key)) as c:
        yield c


class _Recorder:
    """A TCP relay on loopback in front of ``target`` that keeps every byte it carries
    in both directions (what someone on the path would see)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.seen = bytearray()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                self.seen += data
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_writes_reads_and_subscriptions_work_over_tls_and_nothing_shows(
        cluster: Cluster, certificate: tuple[str, str]) -> None:
    relay = _Recorder((cluster.host, cluster.port))
    try:
        db = noria_py.connect(f"noria://127.0.0.1:{relay.port}", token=TOKEN,
                              tls=certificate[0])
        db.execute("CREATE TABLE clandestine_votes (aid INT, who TEXT)")
        db.execute("CREATE VIEW clandestine_counts AS SELECT aid, COUNT(*) AS n "
                   "FROM clandestine_votes GROUP BY aid")
        db.execute("CREATE VIEW clandestine_by_aid AS SELECT aid, COUNT(*) AS n "
                   "FROM clandestine_votes WHERE aid = ? GROUP BY aid")
        sub = db.subscribe("clandestine_counts")
        t = db.table("clandestine_votes")
        t.insert([(i % 5, "whisper-of-the-ballot") for i in range(100)])
        db.wait()
        v = db.view("clandestine_counts")
        assert sorted(v.all()) == [(k, 20) for k in range(5)]
        # reads at the workers' read ports (not through the relay), over TLS too
        keyed = db.view("clandestine_by_aid")
        assert keyed.lookup(3) == [(3, 20)]
        assert keyed.lookup_many([0, 4, 9]) == [[(0, 20)], [(4, 20)], []]
        links = [link for link in db._links.values() if link.conn is not None]
        assert links and all(isinstance(link.conn.sock, ssl.SSLSocket) for link in links)
        got: dict[Any, int] = {}
        for change in sub:
            for row, sign in change.rows:
                got[row] = got.get(row, 0) + sign
            if sorted(r for r, n in got.items() if n) == [(k, 20) for k in range(5)]:
                break
        sub.close()
        db.close()
    finally:
        relay.close()
    assert len(relay.seen) > 1000                      # it did carry the session
    for secret in (b"clandestine", b"whisper-of-the-ballot", TOKEN.encode()):
        assert secret not in relay.seen


def test_a_plain_client_is_told_to_use_tls_and_the_cluster_goes_on(
        cluster: Cluster, certificate: tuple[str, str]) -> None:
    with pytest.raises(ConnectError, match="speaks only TLS"):
        noria_py.connect(f"noria://{cluster.host}:{cluster.port}", token=TOKEN)
    db = noria_py.connect(cluster.url, token=TOKEN)        # (the URL names the CA file)
    assert "?tls=" in cluster.url
    assert db.regime == "treeclock"
    db.execute("CREATE TABLE after_plain (a INT)")
    db.close()


def test_a_plain_connection_to_a_workers_read_port_is_refused_and_it_goes_on(
        cluster: Cluster, certificate: tuple[str, str]) -> None:
    db = noria_py.connect(cluster.url, token=TOKEN)
    db.execute("CREATE TABLE rp (k INT, v INT)")
    db.execute("CREATE VIEW rp_by_k AS SELECT k, v FROM rp WHERE k = ?")
    db.table("rp").insert([(1, 10), (2, 20)])
    db.wait()
    view = db.view("rp_by_k")
    assert view.lookup(1) == [(1, 10)]
    address = next(a for a, link in db._links.items() if link.conn is not None)
    plain = wire.Connection(socket.create_connection(address, timeout=10))
    plain.sock.sendall(b"GET / HTTP/1.0\r\n\r\n")      # not a TLS ClientHello
    with pytest.raises((wire.ConnectionClosed, OSError)):
        wire.client_handshake(plain, TOKEN, {"role": "client"}, timeout=10)
    plain.close()
    for link in db._links.values():
        link.drop()                                    # read again on new connections
    assert view.lookup_many([1, 2]) == [[(1, 10)], [(2, 20)]]
    db.close()


def test_another_ca_is_refused_by_client_and_worker(
        cluster: Cluster, tmp_path: Path) -> None:
    other, other_key = needs.certificate(tmp_path, "other")
    with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        noria_py.connect(f"noria://{cluster.host}:{cluster.port}", token=TOKEN, tls=other)
    # a worker that does not trust the controller's certificate does not join
    env = {**os.environ, "NORIA_TOKEN": TOKEN}
    done = subprocess.run([sys.executable, "-m", "noria_py.runtime.cluster.worker",
                           "--join", f"{cluster.host}:{cluster.port}",
                           "--tls-cert", other, "--tls-key", other_key],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in done.stderr
    db = noria_py.connect(cluster.url, token=TOKEN)
    assert db.tables() is not None                     # the cluster goes on
    db.close()
