"""``noria-py serve``: the controller process, serving clients and workers on one port.

Every connection authenticates first (``wire.server_handshake``); a connection that
fails to, or that sends a frame that is not well formed, is logged and closed, and the
server goes on. An authenticated peer says whether it is a worker (handed to the
``ClusterRuntime``) or a client (served here, one thread per connection).

Client requests are ``["call", id, method, args]``, answered ``["ok", id, result]`` or
``["error", id, error class name, message]``; each request's arguments are checked
against its method's (``REQUESTS``) before it runs, so a malformed one is a
``RequestError``, never an internal error. Statements that change the catalog or write
take the database lock; reads of existing views do not, so a read never waits behind a
recovery it does not need. A client reads a view by key at the workers hosting its
readers (``reads.py``), after asking here where they are (``placement``); the
``lookup`` request here serves views whose worker has no read port.

Limits: at most ``max_connections`` connections at once (workers included; one more
is told "too many connections" and closed), an unauthenticated connection has
``wire.HANDSHAKE_TIMEOUT`` seconds to prove the token, and a client connection idle for
``idle_timeout`` seconds is sent ``["bye", reason]`` and closed (the client reconnects
on its next call: the server read nothing more from it). A frame's memory grows with
the bytes that arrive, up to ``wire.MAX_FRAME`` (a message's, in several frames, up to
``wire.MAX_MESSAGE``), never with what its header announces.

A server not given a token makes one, in a file only its user can read (``tokens``).

With ``data_dir``, the server can be killed and started again on the same directory
(``restart.py``): it keeps its token and port there, waits for the workers of the
controller before it to dial back (each serves reads of its old readers meanwhile),
takes them as its workers, starts new ones only for those that did not come back,
and rebuilds the views from the catalog and the write-ahead log.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

import sql_frontend
from sql_frontend import plan as lp
from sql_frontend import wire as plan_wire

from ... import regimes
from ...arrowio import from_ipc
from ...client import Database, Prepared
from ...errors import (
    ArgumentError,
    ArityError,
    ConnectError,
    Error,
    RecoveryError,
    RequestError,
    SubscriptionError,
)
from ...graph import Graph
from ...pg.types import numeric_oids
from ...tls import Files as TlsFiles
from ...tls import server_context as tls_server_context
from . import tokens, wire
from .controller import CHANNELS, PLACEMENTS, ClusterRuntime
from .errors import WorkerLost
from .placement import ProcessLauncher, RayLauncher
from .restart import (
    LOG_CLOSE_WAIT,
    REJOIN_TIMEOUT,
    REJOIN_WAIT,
    Adoption,
    ClusterState,
    LandedBefore,
    logged_batches,
    plan_adoption,
    set_aside_workers_logs,
    take_workers_logs,
)
from .writes import AUTO, WRITES, choose

if TYPE_CHECKING:  # pragma: no cover
    from ...recovery.report import RecoveryReport

log = logging.getLogger("noria_py.serve")
T = TypeVar("T")

LOOPBACK = tokens.LOOPBACK
#: connections at once (workers included) and seconds a client may stay idle
MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 3600.0
#: ``--channels``: how workers send each other their messages (controller.CHANNELS):
#: directly, since every cluster test passed with it (docs/architecture.md)
DEFAULT_CHANNELS = "direct"
#: seconds an early client waits for the server to get ready (workers joined, data loaded)
READY_TIMEOUT = 600.0

_SEQ = (list, tuple)
_NAME = (str,)
#: method -> the types of its arguments (what msgpack decodes: arrays are tuples)
REQUESTS: dict[str, tuple[tuple[type, ...], ...]] = {
    "execute": (_NAME, (*_SEQ, type(None))), "executemany": (_NAME, _SEQ),
    "table": (_NAME,), "schema": (_NAME,), "keys": (_NAME,), "count": (_NAME,),
    "insert": (_NAME, _SEQ), "insert_arrow": (_NAME, (bytes,)),
    "insert_columns": (_NAME, (int,), _SEQ), "delete": (_NAME, _SEQ),
    "delete_keys": (_NAME, _SEQ),
    "view": (_NAME,), "lookup": (_NAME, _SEQ), "upquery": (_NAME, _SEQ), "all": (_NAME,),
    "tables": (), "views": (), "wait": (), "graph": (), "recoveries": (),
    "fail": (_NAME,), "recover": (_NAME, (str, type(None))),
    "queries": (), "drop_query": ((str, type(None)),),
    "subscribe": (_NAME, (*_SEQ, type(None)), (int, type(None))),
    "placement": (_NAME,), "write_placement": (_NAME,),
    "write_landed": (_NAME, (int,), _SEQ, _NAME), "regime": (), "writes": (),
    "memory": ((bool,),), "prepare_read": (_NAME,), "unprepare": ((int,),),
}
#: seconds a read waits for its reader's recovery (as ``RemoteOp``'s reads do)
READ_TIMEOUT = 60.0


def check_request(method: Any, args: Any) -> None:
    """Raise ``RequestError`` unless ``method`` is served and ``args`` fit it."""
    spec = REQUESTS.get(method) if type(method) is str else None
    if spec is None:
        raise RequestError(f"unknown request {method!r}")
    if not isinstance(args, _SEQ) or len(args) != len(spec):
        raise RequestError(f"request {method!r} takes {len(spec)} argument(s), got "
                           f"{len(args) if isinstance(args, _SEQ) else type(args).__name__}")
    for i, (arg, types) in enumerate(zip(args, spec)):
        # (a bool is an int to isinstance: not where an integer is wanted)
        if not isinstance(arg, types) or (type(arg) is bool and bool not in types):
            want = " or ".join(dict.fromkeys(
                "array" if t in _SEQ else "null" if t is type(None) else "boolean"
                if t is bool else "integer" if t is int else "string" for t in types))
            raise RequestError(f"request {method!r}: argument {i + 1} must be {want}, "
                               f"got {type(arg).__name__}")


def _hung_up(sock: socket.socket) -> bool:
    """Whether the peer of a connection it sends on (and reads nothing from) closed it."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return not sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def report_data(r: RecoveryReport) -> dict[str, Any]:
    d = dict(vars(r))
    d["purged"] = list(r.purged)
    return d


class Server:
    def __init__(self, host: str = "127.0.0.1", port: int = 7878, workers: int = 1,
                 shards: int = 1, data_dir: str | None = None, token: str | None = None,
                 clocks: bool = True, heartbeat_timeout: float = 1.0,
                 strategy: str = "treeclock", spawn: bool = True,
                 checkpoints: bool = True, max_connections: int = MAX_CONNECTIONS,
                 idle_timeout: float | None = IDLE_TIMEOUT,
                 regime: str | dict[str, str] = "treeclock",
                 ray: str | None = None, ray_cpus: float = 1.0,
                 tls: tuple[str, str] | None = None, tls_ca: str | None = None,
                 channels: str = DEFAULT_CHANNELS,
                 rejoin_timeout: float = REJOIN_TIMEOUT, partial: bool = False,
                 memory_limit: int | None = None, barrier_every: int | None = None,
                 writes: str = AUTO, determinant_depth: int | None = None,
                 standbys: bool = False, placement: str = "apart") -> None:
        """``regime`` (noria_py/regimes.py): treeclock, as ``clocks``, ``checkpoints``
        and ``strategy`` say; lineage: no clocks or checkpoints, recovery by lineage;
        coordinated: an epoch of snapshots every ``barrier_every`` writes (default
        ``tuning.BARRIER_EVERY``), a rollback of every node (``epochs.py``);
        uncoordinated and cic: local checkpoints, logs and recovery lines
        (``lines.py``); causal: causal logging, the lost nodes alone restored
        (``causal.py``); falkirk, or a dict of per-node policies
        (``{"default": "lazy", "votes": "eager"}``, ``regimes.policies``): a policy per
        node and the rollback frontier (``falkirk.py``); a name in
        ``regimes.EMBEDDED_ONLY`` (none now) is refused.
        ``ray``: run the workers as Ray actors (``placement.py``): ``"local"`` starts a
        Ray instance for this server's lifetime, anything else is a running Ray
        cluster's address (``"auto"``: the one this machine belongs to).
        ``tls``: (certificate file, key file) that every port of the cluster (this one,
        the workers' read ports) serves TLS with, and nothing else (``noria_py/tls.py``);
        ``tls_ca``: what the workers verify this server's certificate with (default: the
        certificate itself, right for a self-signed one).
        ``rejoin_timeout`` (with ``data_dir``): seconds a worker whose controller died
        goes on serving reads and dialing back before it exits (``restart.py``).
        ``partial``: the readers of parameterized views hold only the keys read, filled
        by upqueries (``partial.py``); ``memory_limit``: bytes the partial readers of
        all workers together hold at most (each worker evicts its least recently read
        keys down to its share; the controller moves shares to where the reads go).
        ``writes``: ``"worker"`` validates each write at its base's worker, which keeps
        the rows, and takes clients' writes on its read port (docs/architecture.md,
        "Writes at the base's worker"); ``"controller"`` here; ``"auto"`` (the
        default): the mode ``data_dir``'s tables were written in, else ``worker``
        where it is built (treeclock or lineage, direct channels), else
        ``controller`` (``writes.choose``; the choice: ``self.writes``, and why:
        ``self.writes_why``). Either mode serves the same results, subscriptions'
        progress included (docs/architecture.md, "Which write path a server takes").
        ``determinant_depth`` (causal): how many edges below a node its determinants
        are kept (None: every node below); ``standbys`` (causal): each stateful node
        shard has a standby on another worker, kept warm from its checkpoints, which
        takes it over when its worker is lost (``causal.py``). ``placement``: where
        node shards go, ``controller.PLACEMENTS``."""
        policies = regimes.policies(regime)
        regime = regimes.check(regime, cluster=True)
        if partial:
            regimes.check_partial(regime)
        #: where writes are validated and taken (one of ``WRITES``), and why
        self.writes, self.writes_why = choose(writes, regime, channels, data_dir)
        writes = self.writes
        if regime == "lineage":
            clocks, checkpoints, strategy = False, False, "lineage"
        if regime in ("coordinated", "uncoordinated", "cic", "causal", "falkirk"):
            clocks, checkpoints, strategy = False, False, regime
        if regime != "coordinated" and barrier_every is not None:
            raise ArgumentError("--barrier-every sets how often the coordinated regime "
                                "checkpoints; serve --regime coordinated")
        regimes.check_causal(regime, determinant_depth, standbys,
                             "serve --regime causal --determinant-depth N --standbys")
        if barrier_every is not None and (type(barrier_every) is not int or barrier_every < 1):
            raise ArgumentError(f"barrier_every must be a number of writes (an int, 1 or "
                                f"more), got {barrier_every!r}")
        if host not in LOOPBACK and not token:
            raise ArgumentError(f"binding {host} (not loopback) needs a shared secret: pass --token")
        if strategy not in ("treeclock", "lineage") and strategy != regime:
            raise ArgumentError(f"a cluster recovers with 'treeclock' or 'lineage', not {strategy!r}")
        if workers < 1:
            raise ArgumentError(f"a cluster needs at least one worker, got {workers}")
        if max_connections < 1:
            raise ArgumentError(f"max_connections must be at least 1, got {max_connections}")
        if memory_limit is not None and not partial:
            raise ArgumentError("memory_limit bounds partial readers' state; serve with "
                                "--partial --memory-limit BYTES")
        if memory_limit is not None and (type(memory_limit) is not int or memory_limit < 0):
            raise ArgumentError(f"memory_limit must be a number of bytes (an int, 0 or "
                                f"more), got {memory_limit!r}")
        if not rejoin_timeout >= 0:
            raise ArgumentError(f"rejoin_timeout must be 0 or more seconds, got {rejoin_timeout}")
        #: with data_dir: what a restart needs, and what the controller before left
        self.state = None if data_dir is None else ClusterState(data_dir)
        self.partial = partial              # (a restart keeps no partial reader: ``_adopt``)
        if self.state is not None:
            if port == 0 and self.state.data["port"]:
                port = self.state.data["port"]      # (where its workers dial back)
        self.tls_files = None if tls is None else TlsFiles(*tls, tls_ca or tls[0])
        self.tls = None if tls is None else tls_server_context(*tls)   # (bad files: refused now)
        self.stopped = threading.Event()
        self.ready = threading.Event()      # set once the database is open
        self.sock = socket.create_server((host, port), reuse_port=False)
        self.address = self.sock.getsockname()[:2]
        self.token_file = None
        if not token:           # (loopback: made here, found by local clients in a file)
            token = (self.state.data["token"] if self.state is not None else None) \
                or tokens.new_token()
            self.token_file = tokens.write_token(self.address[1], token)
        self.token = token
        if self.state is not None:
            self.state.save(token=token, port=self.address[1])
        self.idle_timeout = idle_timeout
        self.admission = wire.Admission(max_connections, log, tls=self.tls)
        self.runtime = ClusterRuntime(Graph(), clocks, shards, workers, heartbeat_timeout,
                                      strategy, checkpoints, channels, barrier_every, writes,
                                      policies, determinant_depth, standbys, placement)
        #: (``--writes worker --data-dir``) which writes sent to the controllers before
        #: this one landed, from their workers' logs (``m_write_landed``)
        self.landed_before: LandedBefore | None = None
        if writes == "worker" and data_dir is not None and self.state is not None:
            # (before any worker joins: its config names its directory there; the
            # logs set aside are taken once the workers before have dialed back)
            self.runtime.disk = set_aside_workers_logs(data_dir)
        if self.state is not None:
            self.runtime.state = self.state
            self.runtime.rejoin_timeout = rejoin_timeout
            self.runtime.first_number = self.runtime.first = self.state.data["numbers"]
            self.runtime.graph.number_after(self.runtime.first_number)
            self.runtime.known_names = set(self.state.previous.get("workers", {}))
        join_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        if ray is not None:
            self.runtime.launcher = RayLauncher(None if ray == "local" else ray, workers,
                                                ray_cpus, on_death=self.runtime.died)
            if host in ("0.0.0.0", "", "::"):       # workers on other machines reach us here
                import ray as ray_module
                join_host = ray_module.util.get_node_ip_address()  # type: ignore[no-untyped-call]
            elif ray != "local" and host in LOOPBACK:
                log.warning("--ray %s with --host %s: workers Ray places on other machines "
                            "cannot reach a loopback address (bind one they can reach, "
                            "with --token)", ray, host)
        self.runtime.address = (join_host, self.address[1])
        if ray is None:                      # workers serve client reads where we do
            self.runtime.launcher = ProcessLauncher(read_host=host)
        if self.tls_files is not None:
            self.runtime.launcher.env = self.tls_files.env()
        self.runtime.token = token
        self.lock = threading.RLock()
        self.runtime.control = self.lock
        self.admission.serve(self.sock, self._serve_connection, "connection")
        started, adopted = time.monotonic(), 0
        #: a restart: what of the workers' nodes could be kept (restart.py; logged,
        #: not yet acted on: the views are rebuilt)
        self.adoption: Adoption | None = None
        #: whether it keeps them (``_adopt``)
        self.keeping = False
        if spawn:
            want = workers + 1                     # one more: the warm spare
            known = self.state.known_workers() if self.state is not None else 0
            if known:
                log.warning("restarting on %s: waiting up to %.0f s for the %d worker(s) "
                            "of the controller before", data_dir, REJOIN_WAIT, known)
                self.runtime.wait_for_rejoin(min(known, want), REJOIN_WAIT)
                adopted = self.runtime.rejoined_count()
                want -= adopted
                self.adoption = self._plan_adoption(str(data_dir))
                self.keeping = self._adopt(str(data_dir), shards)
            if want > 0:
                self.runtime.spawn(want)
        self.runtime.wait_for_workers()
        if writes == "worker" and data_dir is not None and self.state is not None:
            # (the workers before that dialed back ended the writes they took with no
            # controller, and closed their logs, before they joined: ``_Gap``)
            _, self.landed_before = take_workers_logs(
                data_dir, self.state.data["numbers"], LOG_CLOSE_WAIT)
        self.db = Database(data_dir, shards, clocks=clocks, runtime=self.runtime,
                           regime=regime, partial=partial, memory_limit=memory_limit)
        self.runtime.on_recovery = self.db.record_recovery
        if self.keeping:
            self.runtime.finish_adoption()
        if self.db.storage is not None:
            self.runtime.anchor_all(self.db.storage)
        self.runtime.retire()       # (the readers kept from before a restart may go)
        self.runtime.save()
        self.ready.set()
        if adopted:
            log.warning("restarted on %s in %.2f s: %d worker(s) of the controller before "
                        "re-adopted, %s", data_dir, time.monotonic() - started, adopted,
                        f"their {len(cast(Adoption, self.adoption).keep)} node(s) kept"
                        if self.keeping else "the views rebuilt from its catalog and log")

    def _plan_adoption(self, data_dir: str) -> Adoption | None:
        """What the workers that dialed back could keep (``restart.plan_adoption``),
        from what they report, ``cluster.json`` and the log; logged."""
        reports = self.runtime.held_reports(REJOIN_WAIT)
        prev = cast(ClusterState, self.state).previous
        parents: dict[str, list[str]] = {}
        tables: dict[str, str] = {}
        for r in reports.values():
            graph, named = r.get("graph"), r.get("tables")
            if isinstance(graph, dict) and isinstance(named, dict):
                parents.update({str(k): [str(p) for p in v] for k, v in graph.items()})
                tables.update({str(k): str(v) for k, v in named.items()})
        try:
            plan = plan_adoption(prev.get("placement", {}), prev.get("anchors", {}),
                                 {w: r["nodes"] for w, r in reports.items()},
                                 logged_batches(data_dir), tables, parents)
        except (Error, OSError, KeyError, TypeError, ValueError) as e:
            log.warning("restart: what the workers hold could not be checked: %s", e)
            return None
        log.warning("restart: of the %d node(s) the workers hold, %s", len(parents),
                    plan.summary())
        log.warning("restart plan: %s", json.dumps(plan.to_data(), sort_keys=True))
        return plan

    def _adopt(self, data_dir: str, shards: int) -> bool:
        """Keep the workers' nodes (``ClusterRuntime.begin_adoption``) if the plan keeps
        every one of them with nothing to replay and no gap (otherwise, for now, every
        view is rebuilt), each worker that came back had nothing in flight, and the
        catalog planned again from the number the controller before started at gives
        the very graph they hold (ids, numbers, parents)."""
        plan, prev = self.adoption, cast(ClusterState, self.state).previous
        if self.runtime.at_workers:
            return False        # (the tables came from the workers' logs: rebuilt)
        if plan is None or plan.rebuild or plan.gaps or not plan.keep \
                or any(more for _, more in plan.replay.values()):
            return False
        reports = self.runtime.held_reports(REJOIN_WAIT)
        placement = prev.get("placement", {})
        if set(reports) != set(prev.get("workers", {})) \
                or not set(placement.values()) <= set(reports) \
                or self.runtime.rejoined_count() != len(reports) \
                or not all(r.get("clean") is True for r in reports.values()):
            return False                    # (every worker before, back, and only they)
        if self.partial or any(r.get("partial") for r in reports.values()):
            return False                    # (partial readers' holes: not kept, for now)
        first = prev.get("first")
        if type(first) is not int:
            return False
        try:
            held = [{str(n): (r["nums"].get(n), [str(p) for p in ps])
                     for n, ps in r["graph"].items()} for r in reports.values()]
            catalog = _catalog_in_order(Path(data_dir), prev.get("order"))
            graph = _planned_graph(catalog, shards, first)
            if not all(got == graph for got in held):
                got = next(g for g in held if g != graph)
                odd = sorted(set(got) ^ set(graph)) or sorted(
                    n for n in got if got[n] != graph[n])
                log.warning("restart: the workers hold another graph than the catalog "
                            "plans (node %s: %s held, %s planned); the views are rebuilt",
                            odd[0], got.get(odd[0]), graph.get(odd[0]))
                return False
        except (Error, KeyError, TypeError, AttributeError) as e:
            log.warning("restart: the catalog could not be planned again: %s", e)
            return False
        self.runtime.begin_adoption(dict(placement),
                                    {b: t for b, (t, _) in plan.replay.items()}, first,
                                    catalog)
        return True

    # ------------------------------------------------------------ connections

    def _serve_connection(self, sock: socket.socket) -> None:
        conn = wire.Connection(sock)
        try:
            hello = wire.server_handshake(conn, self.token)
        except (OSError, wire.ProtocolError) as e:
            log.warning("refused connection from %s: %s", conn.peer, e)
            conn.close()
            return
        role = hello.get("role")
        if role == "worker":
            self.runtime.attach(conn, hello).join()   # (counted until its connection ends)
        elif role == "client":
            # a client may connect as soon as the port accepts, before the workers have
            # joined and the database is open: its session starts when the server is ready
            if not self.ready.wait(READY_TIMEOUT):
                log.warning("closing connection from %s: the server did not get ready",
                            conn.peer)
                conn.close()
                return
            self._session(conn)
        else:
            log.warning("refused connection from %s: unknown role %r", conn.peer, role)
            conn.close()

    def _session(self, conn: wire.Connection) -> None:
        conn.sock.settimeout(self.idle_timeout)
        prepared: dict[int, Prepared] = {}      # this connection's prepared reads (pinned)
        try:
            while True:
                try:
                    f = conn.recv()
                except socket.timeout:
                    log.info("closing connection from %s: idle for %s s", conn.peer,
                             self.idle_timeout)
                    self._bye(conn)
                    return
                if not (isinstance(f, (list, tuple)) and len(f) == 4 and f[0] == "call"):
                    raise wire.ProtocolError("expected [\"call\", id, method, args]")
                _, rid, method, args = f
                try:
                    check_request(method, args)
                    if method == "subscribe":
                        self._stream(conn, rid, *args)
                        return                  # the connection was the subscription's
                    if method == "prepare_read":
                        result = self._prepare_read(args[0], rid, prepared)
                    elif method == "unprepare":
                        self._unprepare(prepared.pop(args[0], None))
                        result = None
                    else:
                        result = getattr(self, "m_" + method)(*args)
                except Error as e:
                    conn.send(["error", rid, type(e).__name__, str(e)])
                except Exception as e:      # a bug: say so, keep serving
                    log.exception("request %s failed", method)
                    conn.send(["error", rid, "Error", f"internal error: {type(e).__name__}: {e}"])
                else:
                    conn.send(["ok", rid, result])
        except wire.ConnectionClosed:
            pass
        except (OSError, wire.ProtocolError) as e:
            log.warning("closed connection from %s: %s", conn.peer, e)
        finally:
            conn.close()
            for p in prepared.values():
                self._unprepare(p)

    def _prepare_read(self, sql: str, rid: int,
                      prepared: dict[int, Prepared]) -> list[Any] | None:
        """``["call", id, "prepare_read", [sql]]``: for a SELECT that ``Database.prepare``
        answers by a lookup in one view (``Prepared.lookup_view``), ``[handle, view,
        columns, types, key arity, PostgreSQL type OIDs or None]`` (``plan_oids``), the
        view pinned until ``unprepare`` of the handle or the connection's end, so that the client reads it at the readers' workers;
        otherwise None (the client runs the statement here each time)."""
        def prepare() -> list[Any] | None:
            p = self.db.prepare(sql)
            view = p.lookup_view()
            if view is None:
                p.close()
                return None
            prepared[rid] = p
            return [rid, view.name, view.columns, [t.value for t in view.types],
                    view.key_arity, None if p.query is None else numeric_oids(p.query)]
        return self._catalog_change(prepare)

    def _unprepare(self, p: Prepared | None) -> None:
        if p is not None:
            with self.lock:
                p.close()

    def _stream(self, conn: wire.Connection, rid: int, view: str, key: Sequence[Any] | None,
                 buffer: int | None) -> None:
        """``["call", id, "subscribe", [view, key or None, buffer or None]]``: the
        connection becomes the subscription's. Answered ``["ok", id, columns]``, then
        ``["change", progress, [[row, diff], ...]]`` as they come, and last ``["end",
        error class name, message]``. The client ends it by closing the connection."""
        lock = self._settled()                # no write between the snapshot and listening
        try:
            sub = self.db.subscribe(view, None if key is None else tuple(key), buffer=buffer)
            columns = self.db.view(view).columns
        finally:
            lock.release()
        conn.sock.settimeout(None)            # quiet for hours is fine: the client hangs up
        try:
            conn.send(["ok", rid, columns])
            while True:
                try:
                    change = sub.poll(0.5)
                except SubscriptionError as e:
                    conn.send(["end", type(e).__name__, str(e)])
                    return
                if change is not None:
                    conn.send(["change", change.progress,
                               [[list(row), diff] for row, diff in change.rows]])
                elif sub.ended or _hung_up(conn.sock):
                    return
        finally:
            sub.close()

    @staticmethod
    def _bye(conn: wire.Connection) -> None:
        """Tell an idle client its connection ends, then read (and ignore) what it sends
        for a moment before closing: closing with a request unread would reset the
        connection, and the client could lose the "bye" that tells it to send again."""
        conn.send(["bye", "idle"])
        conn.sock.shutdown(socket.SHUT_WR)
        conn.sock.settimeout(2.0)
        try:
            while conn.sock.recv(65536):
                pass
        except OSError:
            pass

    # ------------------------------------------------------------ client requests

    def _settled(self) -> threading.RLock:
        """The database lock, taken once no lost worker's nodes await recovery: a
        catalog change builds on every node's state, so it must not start from a node
        that is down (and recovery needs this lock, so it cannot be waited for inside)."""
        while True:
            self.runtime.wait_recovered()
            self.lock.acquire()
            if not self.runtime.recovering:
                return self.lock
            self.lock.release()

    def _catalog_change(self, change: Callable[[], T]) -> T:
        """``change()`` holding the writers back (``_settled``), and again when a worker
        died under the catalog change it made, which was undone: once that worker's
        nodes are back it can run again (at most 10 times)."""
        for attempt in range(10):
            lock = self._settled()
            try:
                with self.runtime.hold():       # (writes at the workers: held)
                    return change()
            except WorkerLost:
                if attempt == 9:
                    raise
            finally:
                lock.release()      # (also when the pause itself failed)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def m_execute(self, sql: str, params: Sequence[Any] | None) -> list[Any]:
        db = self.db

        def plan() -> list[Any] | tuple[Any, lp.Select, Any, list[Any]]:
            """A statement's answer (not a SELECT), else the views that answer it,
            pinned (not dropped for another query's view meanwhile)."""
            stmt = sql_frontend.parse(sql, db._catalog, tuple(params or ()), lift_constants=True)
            if not isinstance(stmt, lp.Select):
                r = db._run(stmt, sql)
                return [r.columns, r.rows, [t.value for t in r.types], r.rowcount]
            view, select, otherwise = db._select_view(stmt)
            pinned = [db._views[v.name] for v in (view, otherwise) if v is not None]
            for entry in pinned:
                entry.pins += 1
            return view, select, otherwise, pinned
        planned = self._catalog_change(plan)
        if isinstance(planned, list):
            return planned
        view, select, otherwise, pinned = planned
        try:
            r = db._read(view, select, otherwise)
        finally:
            with self.lock:
                for entry in pinned:
                    entry.pins -= 1
        # (and the PostgreSQL types its plan says: an AVG numeric, with a value or none)
        return [r.columns, r.rows, [t.value for t in r.types], r.rowcount,
                numeric_oids(select.query)]

    def m_executemany(self, sql: str, sets: Sequence[Sequence[Any]]) -> int:
        lock = self._settled()
        try:
            return self.db.executemany(sql, sets)
        finally:
            lock.release()

    def m_table(self, name: str) -> list[str]:
        with self.lock:
            return self.db.table(name).columns

    def m_schema(self, name: str) -> list[Any]:
        with self.lock:
            t = self.db.table(name)
            return [t.sql, plan_wire.to_data(t.schema)]

    def m_keys(self, name: str) -> list[tuple[Any, ...]]:
        with self.lock:        # (read at the base's worker: ``Runtime.table``)
            return list(self.db.table(name).primary_keys())

    def m_insert(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        with self.lock:
            self.db.table(name).insert(rows)
        return len(rows)

    def m_insert_arrow(self, name: str, data: bytes) -> int:
        """An Arrow IPC stream's rows (``RemoteTable.insert_arrow``), as columns."""
        table = from_ipc(data)
        with self.lock:
            self.db.table(name).insert_arrow(table)
        return len(table)

    def m_insert_columns(self, name: str, n: int, columns: Sequence[Any]) -> int:
        """``n`` rows as columns, each ``["i", int64 bytes]`` or ``["f", float64 bytes]``
        in table order (``RemoteTable.insert``, ``wire.encode_batch``'s form), inserted
        as ``Table.insert_arrow`` inserts an Arrow table of those columns (as arrays
        where the table takes them, otherwise checked row by row, as ``insert`` checks
        rows), with no Arrow in between (``Base.arrays_from_numbers``)."""
        if n < 0:
            raise RequestError(f"request 'insert_columns': {n} rows")
        with self.lock:
            table = self.db.table(name)
            names = table.columns
            if len(columns) != len(names):
                raise ArityError(f"{len(columns)} columns for table {name!r}, which has "
                                 f"{len(names)}: {names}")
            try:
                arrays = [wire.decode_numbers(c, n) for c in columns]
            except wire.ProtocolError as e:
                raise RequestError(f"request 'insert_columns': {e}") from None
            if n:
                table.insert_columns(arrays)
        return n

    def m_delete(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        with self.lock:
            self.db.table(name).delete(rows)
        return len(rows)

    def m_delete_keys(self, name: str, keys: Sequence[Any]) -> int:
        with self.lock:
            self.db.table(name).delete_keys(keys)
        return len(keys)

    def m_count(self, name: str) -> int:
        with self.lock:        # (read at the base's worker: ``Runtime.table_size``)
            return len(self.db.table(name))

    def m_view(self, name: str) -> list[Any]:
        with self.lock:
            v = self.db.view(name)
        return [v.columns, [t.value for t in v.types], v.key_arity]

    def m_lookup(self, name: str, keys: Sequence[Any]) -> list[list[tuple[Any, ...]]]:
        with self.lock:
            v = self.db.view(name)
        if v.key_arity == 1:
            return v.lookup_many(keys)
        return [v.lookup(*k) for k in keys]

    def m_upquery(self, name: str, keys: Sequence[Any]) -> list[list[tuple[Any, ...]]]:
        """``keys`` a client read as holes of partial view ``name`` at its readers'
        workers (``RemoteView``): upqueried without reading the readers again
        (``View._upquery``); read as ``lookup`` reads where the view takes several
        key columns or is not partial."""
        with self.lock:
            v = self.db.view(name)
        if v.key_arity == 1 and v._partial:
            return v._upquery(keys)
        return self.m_lookup(name, keys)

    def m_placement(self, name: str) -> list[Any]:
        """Where a client reads view ``name`` itself (``reads.py``, ``remote.py``): its
        reader node shards in shard order, each one's worker's read address (None: read
        it here), its key check's description ([what, key names, key types]), and, for a
        view with range parameters, theirs: ``[[[op, slot, type], ...], [[column,
        descending, nulls first], ...]]``, the bounds (``arguments.RangeCheck``) and the
        ORDER BY that merges the rows of several shards (empty where it sorts by a
        column not shown: the rows come trimmed); None without. A reader being
        recovered is waited for, as a read through here waits."""
        with self.lock:
            v = self.db.view(name)
            nodes = list(v._entry.readers)
            check = v._check_key
            q = v._entry.query
        addrs = self._when_up(f"view {name!r}", nodes,
                              lambda: self.runtime.read_addresses(nodes))
        ranged = None
        if q.bounds:
            order = ([[o.column, o.descending, o.nulls_first] for o in q.order]
                     if all(o.column < q.visible for o in q.order) else [])
            ranged = [[[op, slot, t.value] for op, slot, t in v._bounds], order]
        return [nodes, [None if a is None else list(a) for a in addrs],
                [check.what, check.names, [t.value for t in check.types]], ranged]

    def _when_up(self, what: str, nodes: list[str], ask: Callable[[], T]) -> T:
        """``ask()``, once it raises no ``WorkerLost``: ``nodes`` being recovered are
        waited for, for up to ``READ_TIMEOUT`` seconds (then ``RecoveryError`` names
        ``what``)."""
        deadline = time.monotonic() + READ_TIMEOUT
        while True:
            try:
                return ask()
            except WorkerLost:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RecoveryError(f"{what} has been down for over "
                                        f"{READ_TIMEOUT:.0f} s") from None
                for n in nodes:
                    self.runtime.wait_up(n, left)

    def m_write_placement(self, name: str) -> list[Any] | None:
        """Where a client writes table ``name`` (``serve --writes worker``): ``[base
        node, [host, port]]``, its worker's read port; None: here. A base being
        recovered is waited for."""
        with self.lock:
            node = self.db.table(name)._entry.node
        return self._when_up(f"table {name!r}", [node],
                             lambda: self.runtime.write_address(node))

    def m_write_landed(self, name: str, tag: int, address: Sequence[Any],
                       sent_to: str) -> bool | None:
        """Whether the write tagged ``tag``, sent to table ``name``'s base ``sent_to`` at
        the worker at ``address`` (as ``write_placement`` gave them) whose connection
        then broke (or which answered ``doubt``: its controller was lost), is in the
        history: True, or False (never applied: send it again), once that worker is
        known lost or the base is elsewhere; None while it may still land (that worker
        still has the base). Sent to a base of a controller before a restart (another
        node: node ids are renumbered), the tags its workers' logs held say
        (``restart.LandedBefore``); where they cannot tell, a ``ConnectError``, in
        doubt (applied whole or not at all)."""
        with self.lock:
            node = self.db.table(name)._entry.node
        if sent_to != node and self.landed_before is not None:
            said = self.landed_before.landed(sent_to, name.lower(), tag)
            if said is None:
                raise ConnectError(f"a write to table {name!r} sent before the controller "
                                   "restarted: it may or may not have been applied")
            return said
        if self.runtime.has_landed(node, tag):
            return True
        now = self._when_up(f"table {name!r}", [node],
                            lambda: self.runtime.write_address(node))
        if self.runtime.has_landed(node, tag):
            return True
        if now is not None and list(now[1]) == list(address):
            return None
        return False

    def m_all(self, name: str) -> list[tuple[Any, ...]]:
        with self.lock:
            v = self.db.view(name)
        return v.all()

    def m_tables(self) -> list[str]:
        return self.db.tables()

    def m_views(self) -> list[str]:
        return self.db.views()

    def m_wait(self) -> None:
        while True:
            lock = self._settled()
            try:
                self.db.wait()
                return
            except WorkerLost:
                continue                    # a worker died meanwhile: after its recovery
            finally:
                lock.release()

    def m_memory(self, bases: bool) -> dict[str, int]:
        """``Database.memory``: each worker measures its node shards (a worker lost
        meanwhile: asked again once its nodes are back)."""
        while True:
            lock = self._settled()
            try:
                return self.db.memory(bases)
            except WorkerLost:
                continue
            finally:
                lock.release()

    def m_queries(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.db.queries()

    def m_drop_query(self, name: str | None) -> None:
        lock = self._settled()
        try:
            self.db.drop_query(name)
        finally:
            lock.release()

    def m_graph(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.db.graph()

    def m_fail(self, node_id: str) -> None:
        with self.lock:
            self.db._node(node_id)
        self.runtime.crash(node_id)

    def m_recover(self, node_id: str, strategy: str | None) -> dict[str, Any]:
        return report_data(self.db.recover(node_id, strategy))

    def m_recoveries(self) -> list[dict[str, Any]]:
        return [report_data(r) for r in self.db.recoveries()]

    def m_regime(self) -> str:
        return self.db.regime

    def m_writes(self) -> str:
        return self.writes

    # ------------------------------------------------------------ running

    def serve_forever(self) -> None:
        self.stopped.wait()

    def close(self) -> None:
        self.stopped.set()
        self.admission.stop(self.sock)
        self.runtime.close()
        if self.state is not None:          # (stopped: no worker of ours to wait for)
            try:
                self.state.save(workers={})
            except OSError as e:
                log.warning("could not write %s: %s", self.state.path, e)
        self.db.close()
        if self.token_file is not None:
            self.token_file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """The ``noria-py serve`` command, also run as ``python -m noria_py.runtime.cluster.server``
    (how ``launch.Cluster`` starts one): its options, then the server until a signal."""
    p = argparse.ArgumentParser(prog="noria-py serve")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (anything but loopback needs --token)")
    p.add_argument("--port", type=int, default=7878, help="0 picks a free port")
    p.add_argument("--workers", type=int, default=1, help="worker processes (plus one spare)")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--data-dir", dest="data_dir", default=None)
    p.add_argument("--token", default=os.environ.get("NORIA_TOKEN"),
                   help="shared secret every connection proves (default $NORIA_TOKEN; "
                        "without either, one is made and written to a file only this user "
                        "can read, where local clients find it)")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                   help="connections at once, workers included")
    p.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT,
                   help="seconds a client connection may stay idle (it reconnects after)")
    p.add_argument("--heartbeat-timeout", type=float, default=1.0,
                   help="seconds of silence before a worker counts as dead")
    p.add_argument("--recovery", choices=["treeclock", "lineage"], default="treeclock")
    p.add_argument("--regime", default="treeclock",
                   help="the fault-tolerance regime (docs/regimes.md): treeclock (default), "
                        "lineage (no clocks or checkpoints, recovery by lineage) or "
                        "coordinated (epochs of snapshots, every node rolls back), "
                        "uncoordinated or cic (local checkpoints and logs, only the "
                        "recovery line rolls back), causal (determinants piggybacked, "
                        "in-flight logs: only the lost nodes come back), falkirk (a "
                        "policy per node: eager, lazy, batch or ephemeral; the rollback "
                        "frontier as a fixed point), or falkirk's per-node policies as a "
                        "JSON object of view or node names to policies, "
                        "'{\"default\": \"lazy\", \"votes\": \"eager\"}' (without "
                        "\"default\": a stateful node lazy, a stateless one batch)")
    p.add_argument("--barrier-every", dest="barrier_every", type=int, default=None,
                   metavar="WRITES", help="with --regime coordinated: writes between "
                                          "epochs (default 128)")
    p.add_argument("--determinant-depth", dest="determinant_depth", type=int, default=None,
                   metavar="N", help="with --regime causal: a node's determinants are "
                                     "kept by the nodes at most N edges below it "
                                     "(default: every node below)")
    p.add_argument("--standbys", action="store_true",
                   help="with --regime causal: each stateful node shard has a standby on "
                        "another worker, kept warm from its checkpoints, which takes it "
                        "over when its worker is lost")
    p.add_argument("--no-clocks", action="store_true", help="no tree clocks (lineage only)")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="no checkpoints of stateful nodes: a lost worker's stateful nodes are "
                        "rebuilt from their parents' state")
    p.add_argument("--pg-port", type=int, default=None,
                   help="also serve PostgreSQL clients on this port (noria-py pg --server, "
                        "in a process of its own, on --host; the cluster's token is the "
                        "password of clients not on loopback)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run the workers as Ray actors, placed by Ray: on a running Ray "
                        "cluster at ADDRESS ('auto': the one this machine is in), or, "
                        "without ADDRESS, on a Ray instance started for this server")
    p.add_argument("--ray-cpus", dest="ray_cpus", type=float, default=1.0,
                   help="CPUs each worker actor asks Ray for (default 1)")
    p.add_argument("--tls-cert", default=None,
                   help="serve TLS, and only TLS, on every port of the cluster with this PEM "
                        "certificate (clients: connect(url, tls=CA file))")
    p.add_argument("--tls-key", default=None, help="the PEM key file of --tls-cert")
    p.add_argument("--tls-ca", default=None,
                   help="the CA file the workers verify this server's certificate with "
                        "(default: --tls-cert itself, right for a self-signed one)")
    p.add_argument("--channels", choices=CHANNELS, default=DEFAULT_CHANNELS,
                   help="how workers send each other their messages: through the "
                        "controller (relay) or on worker-to-worker links (direct); "
                        f"default {DEFAULT_CHANNELS}")
    p.add_argument("--writes", choices=(AUTO, *WRITES), default=AUTO,
                   help="where writes are validated and taken: here (controller) or at "
                        "each table's base's worker (worker: clients write there, the "
                        "controller is off their path; needs --channels direct and "
                        "--regime treeclock or lineage; with --data-dir each worker "
                        "keeps its bases' logs there); auto (the default): the mode a "
                        "--data-dir's tables were written in, else worker where it is "
                        "built, else controller. The start-up line names the choice "
                        "and why")
    p.add_argument("--placement", choices=PLACEMENTS, default="apart",
                   help="where node shards go: apart (default: each on a worker holding "
                        "none of its parents, so a lost worker leaves every lost node's "
                        "neighbours alive for tree clocks; a stateless operator of one "
                        "parent sits with it where the parent's parents are elsewhere) "
                        "or together (each shard's chain "
                        "of operators on one worker: batches cross between workers only at "
                        "sharders; a lost worker takes whole chains, recovered two deep by "
                        "tree clocks and by lineage beyond)")
    p.add_argument("--rejoin-timeout", dest="rejoin_timeout", type=float,
                   default=REJOIN_TIMEOUT,
                   help="with --data-dir: seconds a worker whose controller died goes on "
                        "serving reads and dialing back (a restarted `serve --data-dir` on "
                        f"the same directory re-adopts it) before it exits; default "
                        f"{REJOIN_TIMEOUT:.0f}, 0: at once")
    p.add_argument("--partial", action="store_true",
                   help="the readers of parameterized views hold only the keys read, "
                        "filled by upqueries (docs/partial.md)")
    p.add_argument("--memory-limit", dest="memory_limit", type=int, default=None,
                   metavar="BYTES", help="with --partial: bytes the partial readers of "
                                         "all workers hold at most together (least "
                                         "recently read keys evicted first)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        p.error("--tls-cert and --tls-key go together")
    if args.tls_ca is not None and args.tls_cert is None:
        p.error("--tls-ca needs --tls-cert and --tls-key")
    if any(a == "--token" or a.startswith("--token=") for a in (argv or sys.argv[1:])):
        print("noria-py serve: warning: a --token on the command line is visible to other "
              "users (ps); prefer $NORIA_TOKEN", file=sys.stderr)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s: %(message)s")
    try:
        server = Server(args.host, args.port, args.workers, args.shards, args.data_dir,
                        args.token, not args.no_clocks, args.heartbeat_timeout,
                        args.recovery, checkpoints=not args.no_checkpoints,
                        max_connections=args.max_connections,
                        idle_timeout=args.idle_timeout or None,
                        regime=regimes.from_text(args.regime),
                        ray=args.ray, ray_cpus=args.ray_cpus,
                        tls=(args.tls_cert, args.tls_key) if args.tls_cert else None,
                        tls_ca=args.tls_ca, channels=args.channels,
                        rejoin_timeout=args.rejoin_timeout, partial=args.partial,
                        memory_limit=args.memory_limit, barrier_every=args.barrier_every,
                        writes=args.writes, determinant_depth=args.determinant_depth,
                        standbys=args.standbys, placement=args.placement)
    except (Error, OSError) as e:
        print(f"noria-py serve: {e}")
        return 1
    host, port = server.address
    where = (f"; token in {server.token_file} (found there by local clients)"
             if server.token_file else "")
    url = f"noria://{host}:{port}"
    if server.tls_files is not None:      # (the CA file, in the URL: noria-py pg --server)
        url += "?tls=" + quote(os.path.abspath(server.tls_files.ca))
    print(f"noria-py serve: listening on {host}:{port} with {args.workers} worker(s), "
          f"--writes {server.writes} ({server.writes_why}); "
          f"connect with noria_py.connect(\"{url}\"){where}", flush=True)
    faulthandler.register(signal.SIGUSR1)      # kill -USR1 PID: every thread's stack, to the log
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stopped.set())
    pg = None
    if args.pg_port is not None:
        pg = subprocess.Popen([sys.executable, "-m", "noria_py.pg.server", "--host", args.host,
                               "--port", str(args.pg_port), "--server", url],
                              env={**os.environ, "NORIA_TOKEN": server.token})
        print(f"noria-py serve: PostgreSQL clients on {args.host}:{args.pg_port} "
              f"(psql -h {args.host} -p {args.pg_port})", flush=True)
    try:
        server.serve_forever()
    finally:
        if pg is not None:
            pg.terminate()
            pg.wait()
    server.close()
    return 0



#: the name a stored CREATE TABLE or VIEW makes
_CREATED = re.compile(r'\s*CREATE\s+(?:MATERIALIZED\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?'
                      r'(?:"([^"]+)"|([A-Za-z_][A-Za-z_0-9$]*))', re.IGNORECASE)


def _catalog_in_order(data_dir: Path, order: Any) -> list[str]:
    """The statements of ``data_dir``'s catalog in the order they were planned
    (``order``: names, as ``cluster.json`` recorded them)."""
    try:
        doc = json.loads((data_dir / "catalog.json").read_bytes())
        catalog = [str(x) for x in doc["statements"]]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as e:
        raise Error(f"catalog.json: {e}") from None
    if not (isinstance(order, list) and all(type(n) is str for n in order)):
        raise Error("cluster.json records no order of the catalog")
    at = {n: i for i, n in enumerate(order)}
    keyed = []
    for sql in catalog:
        m = _CREATED.match(sql)
        name = None if m is None else (m.group(1) or m.group(2)).lower()
        if name not in at:
            raise Error(f"catalog.json: {sql[:60]!r} is not in the recorded order")
        keyed.append((at[name], sql))
    return [sql for _, sql in sorted(keyed)]


def _planned_graph(catalog: list[str], shards: int,
                   first: int) -> dict[str, tuple[int, list[str]]]:
    """The graph ``catalog`` plans, in that order, numbered after ``first``: node ->
    (number, parents). Planned on an empty embedded database: no rows are read."""
    dry = Database(None, shards, clocks=False, checkpoints=False)
    dry.graph_.number_from(first)
    for sql in catalog:
        stmt = sql_frontend.parse(sql, dry._catalog)
        if isinstance(stmt, lp.CreateTable):
            dry._create_table(stmt, sql, persist=False)
        elif isinstance(stmt, lp.CreateView):
            dry._create_views([stmt], persist=False)
        else:
            raise Error(f"catalog.json: not a CREATE TABLE or VIEW: {sql[:60]!r}")
    out = {nid: (n.num, list(n.parents)) for nid, n in dry.graph_.nodes.items()}
    dry.close()
    return out


if __name__ == "__main__":
    sys.exit(main())

