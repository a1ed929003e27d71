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
- Every acknowledged write is in the catalog and the write-ahead log (``Database``
  logs a write durably before it is applied or answered): a restarted controller
  that rebuilds every view from them loses none. The workers' old readers keep
  serving reads meanwhile.
- The workers' node state is kept only when that is provably the same as the
  rebuild would give. ``anchors``: per base node, ``[lsn, t]``: after the log's
  batch ``lsn`` that base had taken ``t`` writes; each later batch of its table is
  one more write (a base's time counts its writes, one per logged batch:
  ``Database._write`` logs a batch, then writes it). An anchor is set (under the
  database's lock) when the views are up, when a table is made, and again on the
  first write after each snapshot of the log (a snapshot folds the batches before
  it), always at or after the snapshot's batch, so every write after an anchor is
  in the log as a batch of its own. A worker dialing back reports what it holds
  (``Worker.holdings``); ``plan_adoption`` says, from that, the anchors and the
  log, which nodes could be kept, which writes each kept base would be replayed
  (exactly those after its time) and which gaps its parents' payload logs would
  fill, and which must be rebuilt (and why). The server keeps them all only when
  the plan keeps every node with nothing to replay and no gap, and the catalog
  planned again in the recorded ``order`` from the recorded ``first`` number gives
  the very graph the workers hold (ids, numbers, parents); otherwise it rebuilds.
- With ``--writes worker`` the controller keeps no table data (no copy, no write
  history): the tables are the workers' logs, taken into this directory
  (``take_workers_logs``) and reopened into the new bases' workers only
  (``ClusterRuntime.write``: their logs, not a history here). A write in flight at
  a controller's death is answered by its tag
  (``LandedBefore``, ``DIR/landed.json``): landed exactly when the rows taken hold
  it, sent again only when the tags of every last write of its table's log are
  known and it is none of them, in doubt otherwise; the tags are saved before the
  logs go, and kept across later restarts.
- With ``--writes worker``, the workers of the controller before go on taking writes
  while it is down (``worker.py``, "A controller lost"), into their logs on disk. A
  restart therefore sets those logs aside before any worker joins
  (``set_aside_workers_logs``: this controller's workers start theirs anew) and
  reads them only once they are final: after the workers before have dialed back
  (each ends the writes it took and closes its logs before it joins), and a log
  still open, at a worker that did not dial back, waited for (``LOG_CLOSE_WAIT``),
  then passed over where another log of its table is closed and refused where
  none is. A worker acknowledges a write only once its replica's log holds it too,
  and neither takes one after its message thread ended, so a closed log of each
  base holds every acknowledged write.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sql_frontend
from sql_frontend import plan as lp
from sql_frontend.catalog import DictCatalog

from ...errors import CorruptionError, Error
from ...storage import Storage, codec
from ...storage.log import BATCH, COLUMNS, LOG_HEADER_SIZE, FrameScanner
from .writes import ASIDE, LandedTail, tables_on_disk

__all__ = ["Adoption", "ClusterState", "FILE", "LANDED_FILE", "LandedBefore", "REJOIN_TIMEOUT",
           "REJOIN_WAIT", "logged_batches", "plan_adoption", "set_aside_workers_logs",
           "take_workers_logs"]

log = logging.getLogger("noria_py.cluster")

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
                                     "workers": {}, "placement": {}, "numbers": 0,
                                     "anchors": {}}
        try:
            got = _read_json(self.path)
            if got is None:
                return
            if not (isinstance(got, dict) and got.get("version") == 1
                    and isinstance(got.get("workers"), dict)
                    and isinstance(got.get("placement"), dict)
                    and type(got.get("numbers")) is int
                    and _anchors_ok(got.get("anchors", {}))):
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
        """Set ``changes`` (token, port, workers, placement, numbers, anchors) and
        write the file."""
        with self.lock:
            self.data.update(changes)
            _replace(self.path, json.dumps(self.data).encode())


def _read_json(path: Path) -> Any:
    """The JSON value ``path`` holds, None if there is no such file (``ValueError``
    if it is not JSON)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return json.loads(text)


def _replace(path: Path, data: bytes) -> None:
    """``path`` replaced whole by ``data`` (mode 0600), durably: an fsynced write to
    ``path.new`` (not ``.tmp``: opening the storage removes those) and a rename, the
    directory fsynced; a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _anchors_ok(anchors: Any) -> bool:
    return isinstance(anchors, dict) and all(
        type(k) is str and isinstance(v, list) and len(v) == 2
        and all(type(x) is int and x >= 0 for x in v) for k, v in anchors.items())


@dataclass
class Adoption:
    """What a restarted controller could keep of its workers' nodes
    (``plan_adoption``)."""

    #: node -> the (old) worker that holds it and may keep it
    keep: dict[str, str] = field(default_factory=dict)
    #: node -> why it must be rebuilt
    rebuild: dict[str, str] = field(default_factory=dict)
    #: kept base -> (its time on its worker, the log's batches of its table to replay
    #: to it, in order: those after that time)
    replay: dict[str, tuple[int, list[int]]] = field(default_factory=dict)
    #: (parent, child) -> (the child's last time taken from the parent, the parent's
    #: time): the parent's payload log gives the child what it missed in between
    gaps: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """As JSON values (the server logs it: ``restart plan: {...}``)."""
        return {"keep": self.keep, "rebuild": self.rebuild,
                "replay": {b: [t, more] for b, (t, more) in self.replay.items()},
                "gaps": [[p, c, a, b] for (p, c), (a, b) in self.gaps.items()]}

    def summary(self) -> str:
        writes = sum(len(b) for _, b in self.replay.values())
        return (f"{len(self.keep)} node(s) could be kept ({writes} logged write(s) to "
                f"replay to their bases), {len(self.rebuild)} to rebuild")


def plan_adoption(placement: Mapping[str, str], anchors: Mapping[str, list[int]],
                  reports: Mapping[str, Mapping[str, Mapping[str, Any]]],
                  batches: Mapping[str, list[int]], tables: Mapping[str, str],
                  parents: Mapping[str, list[str]]) -> Adoption:
    """Which nodes a restarted controller could keep, from ``placement`` (node ->
    old worker, as ``cluster.json`` recorded it), ``anchors`` (base -> ``[lsn, t]``),
    ``reports`` (old worker -> node -> what it holds: ``kind``, ``time``, ``alive``,
    ``last_seen``), ``batches`` (table -> the lsns of its logged batches, ascending,
    from at least the earliest anchor's on), ``tables`` (base -> its table) and
    ``parents`` (node -> its parents, as the graph was). Rules (each is a test's):

    - a node is kept only if the worker it was placed on reported it, up;
    - a node without parents that is not a base (VALUES: constant rows) is kept;
    - a base is kept only if it has an anchor ``[lsn, t]`` with ``t <= time <= t +
      batches after lsn`` (no worker can hold a write that was not logged first, nor
      have missed writes folded into a snapshot); it is replayed exactly the batches
      after its ``time - t`` first ones after the anchor;
    - any other node is kept only if every parent is kept and it took no later time
      from a parent than that parent holds (else its state is ahead of what is kept:
      stale); what it missed is a gap its parent's payload log fills;
    - the rest is rebuilt, with its descendants (in topological order of ``parents``).
    """
    out = Adoption()
    held: dict[str, Mapping[str, Any]] = {}
    for node, worker in placement.items():
        got = reports.get(worker, {}).get(node)
        if got is not None:
            held[node] = got
    order = _topological(parents)
    for node in order:
        got = held.get(node)
        if got is None:
            out.rebuild[node] = "not reported by its worker"
            continue
        if not got.get("alive"):
            out.rebuild[node] = "down on its worker"
            continue
        t = int(got["time"])
        ps = parents.get(node, [])
        if not ps and got.get("kind") != "base":
            out.keep[node] = placement[node]      # (constant rows: VALUES; no input)
            continue
        if not ps:
            anchor = anchors.get(node)
            if anchor is None or node not in tables:
                out.rebuild[node] = "no anchor in the log"
                continue
            lsn, at = anchor
            after = [b for b in batches.get(tables[node], []) if b > lsn]
            if not at <= t <= at + len(after):
                out.rebuild[node] = (f"its time {t} is outside what the log holds after "
                                     f"its anchor ({at} to {at + len(after)})")
                continue
            out.replay[node] = (t, after[t - at:])
            out.keep[node] = placement[node]
            continue
        lost = [p for p in ps if p not in out.keep]
        if lost:
            out.rebuild[node] = f"parent {lost[0]} is rebuilt"
            continue
        seen = got.get("last_seen", {})
        ahead = [p for p in ps if int(seen.get(p, 0)) > int(held[p]["time"])]
        if ahead:
            out.rebuild[node] = f"stale: it took more from {ahead[0]} than that holds"
            continue
        for p in ps:
            have, now = int(seen.get(p, 0)), _time_after(out, held, p)
            if have < now:
                out.gaps[(p, node)] = (have, now)
        out.keep[node] = placement[node]
    return out


def _time_after(out: Adoption, held: Mapping[str, Mapping[str, Any]], node: str) -> int:
    """A kept node's time once what it missed is replayed to it (a base: its writes;
    another node counts messages, so its time before the gaps is its lower bound, and
    its children's gaps are asked of its payload log after its own are filled)."""
    if node in out.replay:
        t, more = out.replay[node]
        return t + len(more)
    return int(held[node]["time"])


def _topological(parents: Mapping[str, list[str]]) -> list[str]:
    done: dict[str, None] = {}
    todo = list(parents)
    while todo:
        rest = []
        for n in todo:
            if all(p in done or p not in parents for p in parents[n]):
                done[n] = None
            else:
                rest.append(n)
        if len(rest) == len(todo):
            raise CorruptionError(f"the recorded graph has a cycle through {rest[0]}")
        todo = rest
    return list(done)


def logged_batches(data_dir: str | os.PathLike[str]) -> dict[str, list[int]]:
    """Per table (as logged: lower case), the lsns of the batches in the data
    directory's current log (those since its snapshot), ascending; a torn tail ends
    the list (opening cuts it: it was never acknowledged). Read without the
    directory's lock, before the engine opens it: nothing is changed."""
    logs = sorted((int(m.group(1)), p) for p in Path(data_dir).iterdir()
                  if (m := re.fullmatch(r"wal-(\d+)\.log", p.name)))
    out: dict[str, list[int]] = {}
    if not logs:
        return out
    buf = logs[-1][1].read_bytes()
    for fr in FrameScanner(buf, LOG_HEADER_SIZE):
        try:
            rec = codec.unpackb(fr.payload)
        except Exception:                    # (damage: opening says what and where)
            break
        if isinstance(rec, (list, tuple)) and len(rec) >= 3 and rec[0] in (BATCH, COLUMNS):
            out.setdefault(str(rec[2]), []).append(int(rec[1]))
    return out


#: seconds a restart waits for a log still open at a worker of the controller before
#: that has not dialed back (``writes.tables_on_disk``)
LOG_CLOSE_WAIT = 10.0


def set_aside_workers_logs(data_dir: str | os.PathLike[str]) -> Path:
    """``serve --writes worker --data-dir DIR`` starting, before any worker joins:
    the workers' logs of the controller before (``DIR/workers``) are renamed to
    ``DIR/workers.before`` (the rename fsynced), and ``DIR/workers`` made empty for
    this controller's workers, which dial back and start their logs anew there. The
    workers of the controller before may still be taking writes into the logs set
    aside (``Worker.goes_on``: with no controller, their writes go on), so they are
    read only later, once each has dialed back or its log is closed
    (``take_workers_logs``). A ``DIR/workers.before`` already there is the set-aside
    of a restart that crashed before taking it: it is kept (no worker of that restart
    took a client's write before the take), and ``DIR/workers`` made empty. Returns
    ``DIR/workers``."""
    root, aside = Path(data_dir) / "workers", Path(data_dir) / ASIDE
    if aside.exists():
        shutil.rmtree(root, ignore_errors=True)
    elif root.exists():
        os.rename(root, aside)
        _sync_dir(Path(data_dir))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _sync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def take_workers_logs(data_dir: str | os.PathLike[str], numbers: int,
                      wait: float = 0.0) -> tuple[Path, LandedBefore]:
    """``serve --writes worker --data-dir DIR`` starting: the tables' rows the workers
    of a controller before left in their logs (set aside, ``set_aside_workers_logs``,
    which this calls first if that was not done: ``writes.DiskLogs``), each table's
    from the longest of its logs (``writes.tables_on_disk``, which waits up to
    ``wait`` seconds for a log still open at a worker), are written into the data
    directory's own snapshot (with the rows it holds of the other tables), durably,
    and only then are those logs deleted; so the engine opens the directory with
    every acknowledged write, and rebuilds the views from it. Done once the workers
    of the controller before dialed back (each ends the writes it was taking with no
    controller, and closes its logs, before it joins: ``Worker.goes_on``), before the
    engine opens the directory. The tags of those logs' last writes are kept first
    (``LandedBefore``, ``DIR/landed.json``), as the restart of the controller whose
    node numbers ended at ``numbers`` (cluster.json: its nodes, those the writes
    were sent to, are numbered up to there). Returns ``DIR/workers`` and the tags
    kept."""
    root, aside = Path(data_dir) / "workers", Path(data_dir) / ASIDE
    if not aside.exists():
        set_aside_workers_logs(data_dir)
    landed = LandedBefore(data_dir)
    tables: set[str] = set()
    found: dict[str, list[tuple[Any, ...]]] = {}
    tails: dict[str, LandedTail] = {}
    st = Storage(data_dir) if aside.exists() else None
    try:
        if st is not None:
            for sql in st.catalog:
                try:
                    stmt = sql_frontend.parse(sql, DictCatalog())
                except Error:
                    continue                    # (a view: not a table)
                if isinstance(stmt, lp.CreateTable):
                    tables.add(stmt.schema.name.lower())
            found, tails = tables_on_disk(aside, tables, wait)
        # (a table without a log had no write land in it: none is in doubt)
        landed.add(numbers, {t: tails.get(t, LandedTail()) for t in tables})
        landed.save()                           # (before the logs it was read from go)
        if st is not None and found:
            st.snapshot({**st.load().tables, **found})
    finally:
        if st is not None:
            st.close()
    if aside.exists():
        shutil.rmtree(aside)
    return root, landed


LANDED_FILE = "landed.json"
#: the restarts whose tags ``LandedBefore`` keeps: a client asks whether its write in
#: doubt landed within ``remote.WRITE_MOVED_TIMEOUT`` (60 s) of sending it, and a
#: restart takes seconds (a process's start alone: 3 s here)
RESTARTS_KEPT = 16


class LandedBefore:
    """Which writes sent to the controllers before this one landed, by their tags
    (``DIR/landed.json``; docs/architecture.md, "Controller restart"): per restart,
    the range of node numbers of the controller it followed, ``(after, upto]``, and
    per table what its workers' logs said of their last writes
    (``writes.LandedTail``).

    ``landed(node, table, tag)``: True if any restart's logs held the tag (a random
    62-bit name, given once per write: the write is in the rows taken); False if
    the restart that followed ``node``'s controller knew the tags of all of the
    table's last writes (``complete``) and this is none of them: the write never
    landed, and can never land now (its worker's message thread ended with its
    controller; a worker that dials back starts anew, renumbered nodes, empty
    logs), so it may be sent again; None (in doubt) otherwise: that restart's tags
    are not known (the file damaged, or the restart more than ``RESTARTS_KEPT``
    ago), or the log held untagged writes among its last.

    Invariants: the file is replaced whole (an fsynced write and rename) and saved
    before the logs it was read from are deleted, so a restart that crashes after
    taking them finds them again; a second restart keeps the first's tags beside its
    own, so a client asking only after that finds its answer."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.path = Path(data_dir) / LANDED_FILE
        #: (after, upto, table -> its tail); ``after`` None: not known (the file was
        #: damaged when this restart came), oldest first
        self.restarts: list[tuple[int | None, int, dict[str, LandedTail]]] = []
        self.damaged = False
        try:
            got = _read_json(self.path)
            if got is None:
                return
            if not (isinstance(got, dict) and got.get("version") == 1
                    and isinstance(got.get("restarts"), list)):
                raise ValueError("not a list of restarts of version 1")
            for r in got["restarts"]:
                after, upto, tables = r["after"], r["upto"], r["tables"]
                if not ((after is None or type(after) is int) and type(upto) is int
                        and isinstance(tables, dict)):
                    raise ValueError(f"a restart is not well formed: {r!r}"[:200])
                self.restarts.append((after, upto, {
                    str(t): LandedTail([int(x) for x in v["tags"]], bool(v["complete"]))
                    for t, v in tables.items()}))
        except (ValueError, KeyError, TypeError) as e:
            log.error("%s is damaged (%s): writes in doubt sent to the controllers before "
                      "are answered in doubt", self.path, e)
            self.restarts, self.damaged = [], True

    def add(self, upto: int, tables: Mapping[str, LandedTail]) -> None:
        """This restart's: the tables' tails, of the controller whose node numbers
        ended at ``upto`` (after the last restart's ``upto``). A restart again at the
        same number (one that crashed while taking them, or a controller that made
        no node) merges with it."""
        prev = [r for r in self.restarts if r[1] < upto]
        after = None if self.damaged and not prev else max((r[1] for r in prev), default=0)
        same = [r for r in self.restarts if r[1] == upto]
        if same:
            after, _, known = same[0]
            self.restarts.remove(same[0])
            merged = dict(known)
            for t, tail in tables.items():
                had = merged.get(t)
                merged[t] = tail if had is None else LandedTail(
                    list(dict.fromkeys(had.tags + tail.tags)), had.complete and tail.complete)
            tables = merged
        self.restarts.append((after, upto, dict(tables)))
        self.restarts.sort(key=lambda r: r[1])
        del self.restarts[:-RESTARTS_KEPT]

    def save(self) -> None:
        data = {"version": 1, "restarts": [
            {"after": a, "upto": u, "tables": {t: {"tags": v.tags, "complete": v.complete}
                                               for t, v in ts.items()}}
            for a, u, ts in self.restarts]}
        _replace(self.path, json.dumps(data).encode())

    def landed(self, node: str, table: str, tag: int) -> bool | None:
        if any(tag in ts[table].tags for _, _, ts in self.restarts if table in ts):
            return True
        m = re.fullmatch(r"n(\d+)(?:\.\d+)?", node)
        if m is None:
            return None
        n = int(m.group(1))
        for after, upto, ts in self.restarts:
            if after is not None and after < n <= upto:
                tail = ts.get(table)
                return False if tail is not None and tail.complete else None
        return None
