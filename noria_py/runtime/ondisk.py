"""Checkpoints of the stateful node shards on disk, under a data directory, so that a
database reopened with ``connect(data_dir=...)`` restores its views from them and
replays only the log written since, instead of recomputing every view from its tables
(issue 18: "where checkpoints live: they must survive the failure").

What is written, and when: a **cut**. The embedded engine without a seed propagates
each write to every view before the write returns, so between two writes (and after
``wait()``) every node reflects exactly the batches logged so far, up to one batch
number L of the write-ahead log. At such a quiet point, with every node alive, each
stateful shard takes a checkpoint in memory (``Domain.checkpoint``, a delta since its
last), and the cut writes, per shard of a named view, what its in-memory checkpoints
handed the store since the last cut (the store's journal: the same incremental deltas,
``CheckpointStore.journal``), appended to that shard's file; a shard whose chain the
journal cannot carry on (a whole state put, checkpoints forgotten by a recovery), or
whose deltas on disk outgrew its base, gets a new file holding its state whole (the
compaction). Last, ``MANIFEST.json`` names L, the CRC of batch L's log record, the
catalog, the shards, the engine's version, and per shard its file and the length of it
that the cut stands for. Cuts are taken after every catalog change, after each
snapshot of the tables, every ``tuning.DISK_CHECKPOINT_BYTES`` of log, and at
``close()`` (``client.Database._cut``).

Crash safety (the write-ahead log's fsync policy: fsync unless ``sync=False``): a
shard's file is appended to after cutting it back to the length the manifest names
(anything past it is a cut that never finished), and synced; a new file is synced
before the manifest names it; the manifest is replaced atomically (written, synced,
renamed, the directory synced) after every file it names; files no manifest names
are deleted afterwards. So a crash at any point leaves the old manifest and the
files and lengths it names, or the new one and its.

Damage: every record in a file is framed with its length and a CRC32
(``storage/log.py``), the file starts with a record naming the shard's key, and the
manifest carries a CRC32 of its contents. A file shorter than the manifest's length, a
record failing its CRC or not decoding, or a manifest failing its CRC is never loaded:
the view it belongs to is recomputed from its tables as before (and
``Database.recovery_notes`` says so), and the next cut writes it afresh.

When a reopen uses them (``Database._restore``), the rule: the manifest's catalog,
shards and engine version equal those of this opening (any CREATE or DROP since the
cut, or ``connect(shards=...)`` changed, or an upgrade: a whole rebuild, as before), the
log still holds batch L with the CRC the cut saw (or L is the snapshot's batch), the
snapshot is at or before L, and no table was dropped at or after L; and, per view, the
shape of its nodes (kinds, shards, parents) is the manifest's and every one of its
stateful shards has an undamaged file. Then the tables take their rows as of L, those
views their shards' checkpoints (as a node filled at creation, each the first
checkpoint of its shard in memory), other views are computed from the tables at L,
and the batches after L are written through the graph. The result is the state of a
run that wrote the same batches: the views are those of the tables.

Shards are keyed by their view and their place in it (``view/i``, in creation order,
which a view's SQL fixes), not by node id: ids depend on the order views and ad-hoc
queries were made. A node the planner shares between views belongs to the first of
them in the catalog's order, the one whose plan makes it at a reopen (``owned``).
Ad-hoc queries' views are not kept (nor recreated at a reopen).
"""
from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..graph import Graph
from ..storage import codec
from ..storage.log import FrameScanner, atomic_write, frame, fsync_dir
from ..storage.storage import CHECKPOINTS_DIR
from .checkpoints import Checkpoint, CheckpointStore, delta_rows
from .cluster.wire import (
    ProtocolError,
    decode_checkpoint,
    decode_delta,
    encode_checkpoint,
    encode_delta,
)

DIR_NAME = CHECKPOINTS_DIR
MANIFEST_NAME = "MANIFEST.json"
#: the files' format: a reopen uses only checkpoints written in this one
FORMAT = 1
MAGIC = b"NORIACKP"
#: deltas on disk of more rows or keys than this and than their base holds: the shard
#: is written whole instead (its file then holds at most about twice its state)
COMPACT_MIN = 4096
#: checkpoints at or below any time (``CheckpointStore.latest``)
EVER = 1 << 62


def engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("noria-py")
    except PackageNotFoundError:
        return "unknown"


def view_nodes(graph: Graph, readers: Iterable[str]) -> list[str]:
    """Every node shard a view reads through, tables' base nodes aside, in creation
    order (some may be shared with views made before it: the planner reuses nodes)."""
    seen: set[str] = set()
    stack = list(readers)
    while stack:
        nid = stack.pop()
        if nid in seen or graph[nid].kind == "base":
            continue
        seen.add(nid)
        stack.extend(graph[nid].parents)
    return sorted(seen, key=lambda n: graph[n].num)


def owned(graph: Graph, views: Iterable[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """Per view (name, readers), in the order given (the catalog's, which a reopen
    creates them in), the nodes it reads through that no view before it does: those
    its plan makes when it is created after them."""
    taken: set[str] = set()
    out: dict[str, list[str]] = {}
    for name, readers in views:
        mine = [n for n in view_nodes(graph, readers) if n not in taken]
        taken.update(mine)
        out[name] = mine
    return out


def view_shape(graph: Graph, nodes: list[str], keys: dict[str, str]) -> list[list[Any]]:
    """Per node a view owns, [kind, shard, operator, parents' keys] (``keys``: node id ->
    key, a table's base node by its table): what a plan must match for its
    checkpoints to be loaded into it."""
    out: list[list[Any]] = []
    for nid in nodes:
        node = graph[nid]
        parents = [keys.get(p) or f"table:{graph[p].table}" for p in node.parents]
        out.append([node.kind, node.shard, node.op.describe(), parents])
    return out


@dataclass
class Cut:
    """What one cut stands for (the manifest's contents)."""
    lsn: int
    crc: int | None
    engine: str
    shards: int
    catalog: list[str]
    #: view -> the shape of its nodes (``view_shape``)
    views: dict[str, list[list[Any]]]
    #: shard key -> {"file", "length", "base_rows" (rows or entries of its whole state),
    #: "delta_rows" (of the deltas after it), "form"}
    nodes: dict[str, dict[str, Any]]
    next_file: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "lsn": self.lsn, "crc": self.crc, "engine": self.engine,
                "shards": self.shards, "catalog": self.catalog, "views": self.views,
                "nodes": self.nodes, "next_file": self.next_file}


class DiskCheckpoints:
    """The ``checkpoints/`` directory of one data directory."""

    def __init__(self, data_dir: Path, sync: bool = True) -> None:
        self.dir = Path(data_dir) / DIR_NAME
        self.sync = sync
        #: the last cut written or read (what the files on disk stand for)
        self.cut_now: Cut | None = None
        #: shard key -> its node id in this process (for appending to its file)
        self.ids: dict[str, str] = {}
        self.notes: list[str] = []

    # ------------------------------------------------------------ reading

    def read_manifest(self) -> Cut | None:
        """The manifest, or None (none, or damaged: noted)."""
        path = self.dir / MANIFEST_NAME
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.notes.append(f"{DIR_NAME}/{MANIFEST_NAME}: unreadable ({exc}); views recomputed")
            return None
        try:
            doc = json.loads(raw)
            body = doc["body"]
            if doc.get("crc") != zlib.crc32(_canonical(body)):
                raise ValueError("its checksum does not match")
            if body.get("format") != FORMAT:
                raise ValueError(f"format {body.get('format')!r}, not {FORMAT}")
            cut = Cut(int(body["lsn"]), body["crc"], str(body["engine"]), int(body["shards"]),
                      list(body["catalog"]), dict(body["views"]), dict(body["nodes"]),
                      int(body["next_file"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.notes.append(f"{DIR_NAME}/{MANIFEST_NAME}: damaged ({exc}); views recomputed "
                              "from the tables")
            return None
        return cut

    def usable(self, cut: Cut, lsn: int | None, crc: int | None, catalog: list[str],
               shards: int) -> str | None:
        """Why ``cut`` cannot stand for the views of a database opened with ``catalog``
        and ``shards`` whose log was split after batch ``lsn`` (None: not split), batch
        ``lsn``'s record having CRC ``crc`` (None: the snapshot's batch); None if it can."""
        if cut.engine != engine_version():
            return f"written by noria-py {cut.engine}, this is {engine_version()}"
        if cut.shards != shards:
            return f"written with shards={cut.shards}, opened with shards={shards}"
        if cut.catalog != catalog:
            return "the catalog changed since"
        if lsn != cut.lsn:
            return (f"the log cannot be split after batch {cut.lsn} (a snapshot after it, a "
                    "table dropped since, or the log does not reach it)")
        if crc is not None and cut.crc is not None and crc != cut.crc:
            return f"batch {cut.lsn} in the log is not the one the checkpoints saw"
        return None

    def load(self, cut: Cut, key: str) -> Checkpoint | None:
        """Shard ``key``'s state as of ``cut``, or None (no file, or damaged: noted)."""
        entry = cut.nodes.get(key)
        if entry is None:
            return None
        name = str(entry.get("file"))
        path = self.dir / name
        try:
            length = int(entry["length"])
            buf = path.read_bytes()
        except (OSError, KeyError, TypeError, ValueError) as exc:
            self.notes.append(f"{DIR_NAME}/{name} ({key}): unreadable ({exc})")
            return None
        try:
            return _fold(buf, length, key)
        except _Damaged as exc:
            self.notes.append(f"{DIR_NAME}/{name} ({key}): {exc}; its view is recomputed "
                              "from the tables")
            return None

    # ------------------------------------------------------------ writing

    def write_cut(self, lsn: int, crc: int | None, catalog: list[str], shards: int,
                  views: dict[str, list[list[Any]]], nodes: dict[str, tuple[str, str]],
                  store: CheckpointStore) -> None:
        """Write a cut: ``nodes`` maps each shard's key to (its node id, its form), every
        one checkpointed in ``store`` just now (so the store's newest checkpoint of each
        is its state at batch ``lsn``). Raises OSError if the disk fails (the previous
        cut stays in force)."""
        old = self.cut_now
        journal = store.journal if store.journal is not None else {}
        self.dir.mkdir(exist_ok=True)
        next_file = old.next_file if old is not None else 0
        out: dict[str, dict[str, Any]] = {}
        for key, (nid, form) in nodes.items():
            prev = old.nodes.get(key) if old is not None else None
            deltas = journal.get(nid, [])
            if (prev is not None and self.ids.get(key) == nid and nid not in store.rewrite
                    and prev["form"] == form):
                # (decided by rows before any is encoded: the deltas of a busy shard
                # soon hold more than its state, which is then written whole instead)
                rows = prev["delta_rows"] + sum(delta_rows(d) for _, d in deltas)
                if rows <= max(prev["base_rows"], COMPACT_MIN):
                    records = [frame(codec.packb(["delta", encode_delta(form, d)], big_ints=True))
                               for _, d in deltas]
                    if records:
                        self._append(self.dir / prev["file"], prev["length"], records)
                    out[key] = dict(prev, length=prev["length"] + sum(map(len, records)),
                                    delta_rows=rows)
                    continue
            ck = store.latest(nid, EVER)
            assert ck is not None, nid
            name = f"ck-{next_file:08d}.bin"
            next_file += 1
            head = frame(codec.packb(["shard", FORMAT, key]))
            base = frame(codec.packb(["base", encode_checkpoint(ck)], big_ints=True))
            self._create(self.dir / name, [MAGIC, head, base])
            out[key] = {"file": name, "length": len(MAGIC) + len(head) + len(base),
                        "base_rows": ck.rows(), "delta_rows": 0, "form": form}
        cut = Cut(lsn, crc, engine_version(), shards, list(catalog), views, out, next_file)
        body = cut.to_json()
        doc = json.dumps({"crc": zlib.crc32(_canonical(body)), "body": body}).encode()
        atomic_write(self.dir / MANIFEST_NAME, [doc], sync=self.sync)
        self.cut_now = cut
        self.ids = {key: nid for key, (nid, _) in nodes.items()}
        store.journal = {}
        store.rewrite.clear()
        named = {e["file"] for e in out.values()} | {MANIFEST_NAME}
        for p in self.dir.iterdir():
            if p.name not in named:
                p.unlink(missing_ok=True)

    def _append(self, path: Path, length: int, records: list[bytes]) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)         # (past it: a cut that never finished)
            os.lseek(fd, length, os.SEEK_SET)
            for r in records:
                _write_all(fd, r)
            if self.sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _create(self, path: Path, chunks: list[bytes]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for c in chunks:
                _write_all(fd, c)
            if self.sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        # (the directory entry is made durable by the manifest's atomic_write, which
        # syncs the directory after renaming the manifest into place)

    def forget(self) -> None:
        """Delete every checkpoint on disk (``noria-py repair`` after dropping damage:
        batch numbers then name other writes than the checkpoints saw)."""
        if self.dir.is_dir():
            for p in self.dir.iterdir():
                p.unlink(missing_ok=True)
            self.dir.rmdir()
            if self.sync:
                fsync_dir(self.dir.parent)
        self.cut_now = None


def inspect(data_dir: Path) -> list[str]:
    """What is wrong with a data directory's checkpoints (for ``noria-py repair``: a
    reopen skips what is listed, recomputing those views, so nothing needs dropping)."""
    disk = DiskCheckpoints(Path(data_dir))
    cut = disk.read_manifest()
    if cut is not None:
        for key in cut.nodes:
            disk.load(cut, key)
    return disk.notes


class _Damaged(Exception):
    pass


def _canonical(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fold(buf: bytes, length: int, key: str) -> Checkpoint:
    """The state a shard's file holds up to ``length``: its base with its deltas folded
    in; ``_Damaged`` if any of it is missing or fails its checks."""
    if len(buf) < length:
        raise _Damaged(f"{len(buf)} bytes, shorter than the {length} the manifest names")
    if buf[:len(MAGIC)] != MAGIC:
        raise _Damaged("not a checkpoint file")
    scanner = FrameScanner(memoryview(buf)[:length], len(MAGIC))
    store = CheckpointStore()
    form = ""
    n = 0
    try:
        for fr in scanner:
            rec = codec.unpackb(fr.payload)
            if n == 0:
                if rec != ("shard", FORMAT, key):
                    raise _Damaged(f"its first record names {rec!r}, not this shard")
            elif n == 1:
                if not (type(rec) is tuple and len(rec) == 2 and rec[0] == "base"):
                    raise _Damaged("its second record is not a whole state")
                ck = decode_checkpoint(rec[1])
                form = ck.form
                store.adopt(key, ck)
            else:
                if not (type(rec) is tuple and len(rec) == 2 and rec[0] == "delta"):
                    raise _Damaged(f"record {n} is not a delta")
                store.put(key, n, {}, form, decode_delta(form, rec[1]), False, EVER)
            n += 1
    except (codec.DecodeError, ProtocolError, AssertionError, ValueError, TypeError) as exc:
        raise _Damaged(f"record {n} is unusable ({exc})") from None
    if scanner.problem is not None or scanner.end != length:
        raise _Damaged(f"damaged at byte {scanner.end} ({scanner.problem or 'short'})")
    if n < 2:
        raise _Damaged("it holds no state")
    return cast(Checkpoint, store.latest(key, EVER))
