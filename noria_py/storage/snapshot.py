"""Snapshots: every base row as of one batch number, so that a restart reads
one compact file plus a short log instead of the whole history.

A snapshot is written to ``snapshot.bin.tmp``, synced, and renamed over
``snapshot.bin``; a crash therefore leaves the old snapshot or the new one.
Only after that rename is durable does the engine start a new log and delete
the old one (see :mod:`.log` for why logs are ordered by generation). Since
the file is never visible half-written, any damage in it is disk damage, not
a crash, and reading it raises instead of guessing.

Layout (little-endian)::

    magic    8 bytes   b"NORIASNP"
    version  u32       1
    gen      u64       generation of the log this snapshot covers
    lsn      u64       number of batches it includes
    crc      u32       crc32 of the 28 bytes above

then records framed as in the log (u32 length, u32 crc32, msgpack payload)::

    [0, table, [row, ...]]        rows of one table, in chunks of at most
                                  CHUNK_ROWS rows; a table with no rows has
                                  one record with an empty list
    [2, table, n, [[dtype, bytes], ...]]
                                  n rows of one table as columns (int64/float64
                                  bytes, as in the log's columns record), for a
                                  table the engine keeps as columns
    [1, n_tables, n_rows]         end marker; anything after it is an error
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from ..columns import ColumnChunk
from . import codec
from .log import FrameScanner, atomic_write, frame

__all__ = ["SNAPSHOT_MAGIC", "SNAPSHOT_VERSION", "CHUNK_ROWS", "SnapshotError", "SnapshotData", "write_snapshot", "read_snapshot"]

SNAPSHOT_MAGIC = b"NORIASNP"
SNAPSHOT_VERSION = 1
CHUNK_ROWS = 4096

_HEADER_BODY = struct.Struct("<8sIQQ")
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER_BODY.size + _CRC.size

_ROWS = 0
_END = 1
_COLUMNS = 2
#: the most rows in one columns record (16 MiB a column)
CHUNK_COLUMN_ROWS = 1 << 21


class SnapshotError(ValueError):
    """The snapshot file is damaged or not ours."""


@dataclass
class SnapshotData:
    gen: int
    lsn: int
    tables: dict[str, list[tuple]]


def _rows_record(name: str, rows: list) -> bytes:
    problem = codec.check_rows(rows)
    if problem is not None:
        raise codec.EncodeError(f"table {name!r}: {problem}")
    return frame(codec.packb((_ROWS, name, rows)))


def _chunks(gen: int, lsn: int, tables: Mapping[str, Iterable[tuple | ColumnChunk]]) -> Iterator[bytes]:
    body = _HEADER_BODY.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, gen, lsn)
    yield body + _CRC.pack(zlib.crc32(body))
    n_rows = 0
    for name, rows in tables.items():
        if not isinstance(name, str):
            raise codec.EncodeError(f"table name must be a str, not {type(name).__name__}")
        batch: list = []
        wrote = False
        for row in rows:
            if type(row) is ColumnChunk:           # (a table kept as columns)
                if batch:                           # (rows keep their order)
                    yield _rows_record(name, batch)
                    n_rows += len(batch)
                    batch = []
                for start in range(0, len(row), CHUNK_COLUMN_ROWS):
                    n, parts = codec.pack_columns([a[start:start + CHUNK_COLUMN_ROWS]
                                                   for a in row.arrays])
                    yield frame(codec.packb((_COLUMNS, name, n, parts)))
                    n_rows += n
                    wrote = True
                continue
            batch.append(row)
            if len(batch) == CHUNK_ROWS:
                yield _rows_record(name, batch)
                n_rows += len(batch)
                batch = []
                wrote = True
        if batch or not wrote:
            yield _rows_record(name, batch)
            n_rows += len(batch)
    yield frame(codec.packb((_END, len(tables), n_rows)))


def write_snapshot(
    path: Path, gen: int, lsn: int, tables: Mapping[str, Iterable[tuple | ColumnChunk]], sync: bool = True
) -> int:
    """Write the snapshot atomically; returns its size in bytes. Rows are
    streamed in chunks, so the encoded snapshot is never whole in memory; a
    :class:`~noria_py.columns.ColumnChunk` among a table's rows is written as
    columns records."""
    return atomic_write(path, _chunks(gen, lsn, tables), sync=sync)


def read_snapshot(path: Path) -> SnapshotData | None:
    """The snapshot at ``path``, or ``None`` if there is none."""
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        return None
    where = path.name
    if len(buf) < HEADER_SIZE:
        raise SnapshotError(f"{where}: {len(buf)} bytes, shorter than its header")
    magic, version, gen, lsn = _HEADER_BODY.unpack_from(buf, 0)
    if magic != SNAPSHOT_MAGIC:
        raise SnapshotError(f"{where}: not a noria_py snapshot (magic {magic!r})")
    (crc,) = _CRC.unpack_from(buf, _HEADER_BODY.size)
    if crc != zlib.crc32(buf[: _HEADER_BODY.size]):
        raise SnapshotError(f"{where}: header checksum mismatch")
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"{where}: format version {version} is not supported (expected {SNAPSHOT_VERSION})")
    tables: dict[str, list[tuple]] = {}
    n_rows = 0
    ended = False
    scanner = FrameScanner(buf, HEADER_SIZE)
    for fr in scanner:
        if ended:
            raise SnapshotError(f"{where}: data after the end marker at byte {fr.start}")
        try:
            rec = codec.unpackb(fr.payload)
        except codec.DecodeError as exc:
            raise SnapshotError(f"{where}: byte {fr.start}: {exc}") from None
        if type(rec) is tuple and len(rec) == 3 and rec[0] == _ROWS and type(rec[1]) is str and type(rec[2]) is tuple:
            rows = rec[2]
            if not codec.rows_are_plain(rows):
                raise SnapshotError(f"{where}: byte {fr.start}: malformed row")
            tables.setdefault(rec[1], []).extend(rows)
            n_rows += len(rows)
        elif type(rec) is tuple and len(rec) == 4 and rec[0] == _COLUMNS and type(rec[1]) is str:
            col_rows = codec.unpack_columns(rec[2], rec[3])
            if col_rows is None:
                raise SnapshotError(f"{where}: byte {fr.start}: malformed columns")
            tables.setdefault(rec[1], []).extend(col_rows)
            n_rows += len(col_rows)
        elif type(rec) is tuple and len(rec) == 3 and rec[0] == _END:
            if rec[1] != len(tables) or rec[2] != n_rows:
                raise SnapshotError(
                    f"{where}: end marker says {rec[1]} tables / {rec[2]} rows, found {len(tables)} / {n_rows}"
                )
            ended = True
        else:
            raise SnapshotError(f"{where}: byte {fr.start}: malformed record")
    if scanner.problem is not None:
        raise SnapshotError(f"{where}: byte {scanner.end}: {scanner.problem}")
    if not ended:
        raise SnapshotError(f"{where}: no end marker (file is incomplete)")
    return SnapshotData(gen, lsn, tables)

