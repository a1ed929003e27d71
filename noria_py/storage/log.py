"""The write-ahead log of base-table batches, and the record framing shared
with snapshots.

Why this shape: a base write is acknowledged only once it is on disk, so
each batch is one self-checking record appended and synced in a single
step. After a crash the file can end in a partly written record (or in
zeros, where the file grew before its data reached the disk); the CRC and
length let recovery find the last complete record, cut the file there and
carry on, instead of refusing to start.

Files in a data directory
-------------------------
``LOCK``
    Held with ``flock`` by the one process that has the directory open.
``catalog.json``
    ``{"version": 1, "statements": [DDL, ...]}``, replaced atomically.
``snapshot.bin``
    All base rows as of a batch number (see :mod:`.snapshot`).
``wal-<generation>.log``
    The log described here; generation is a zero-padded decimal number.

Log file layout (all integers little-endian)
--------------------------------------------
Header, 32 bytes::

    magic    8 bytes   b"NORIAWAL"
    version  u32       1, or 2: a tagged log (its batch records may carry a tag)
    gen      u64       generation, equal to the number in the file name
    base     u64       lsn before the first record (the snapshot's lsn)
    crc      u32       crc32 of the 28 bytes above

then records, back to back::

    length   u32       payload length in bytes, 1 .. MAX_RECORD
    crc      u32       zlib.crc32 of the payload
    payload  length bytes, one msgpack array (see codec.py):

        [0, lsn, table, [row, ...] inserts, [row, ...] deletes]   a write batch
        [1, lsn, table]                                           DROP TABLE
        [2, lsn, table, n, [[dtype, bytes], ...]]                 an insert of n rows
                                                                  given as columns

    and, in a version-2 (tagged) log only, a batch or columns record may end in one
    more element, the write's tag (an int, 1 .. 2**64-1)::

        [0, lsn, table, inserts, deletes, tag]
        [2, lsn, table, n, columns, tag]

A columns record holds one [dtype, bytes] pair per column of the table, in order:
dtype is "<i8" (INT) or "<f8" (FLOAT), bytes the n little-endian values (8n bytes).
It is what a write of columns (``Table.insert_arrow``, a large insert into a table
kept as columns) logs, so that a bulk load is not encoded a row at a time; replay
turns it back into rows.

A batch's lsn is the previous batch's lsn + 1 (the first is ``base + 1``).
A drop does not consume an lsn; it carries the lsn of the batch before it,
and its position in the file orders it against the batches.

Generations and snapshots: snapshot.bin records the generation ``G`` of
the log that was active when it was taken; it covers that log and every
earlier one. Recovery therefore deletes logs with generation <= G and
replays only ``wal-(G+1).log``. Ordering by generation rather than by lsn
is what keeps drops (which have no lsn of their own) right when a snapshot
falls between a batch and a drop.

A record is "bad" when its header is short, its length is 0 or beyond the
end of the file or MAX_RECORD, its CRC does not match, its payload does not
decode, or its contents are malformed or out of lsn sequence. What a bad
record means depends on what follows it (:func:`classify_bad_record`):

* a *torn tail*: the bad record is the last thing in the file (it is
  incomplete, or complete but failing its CRC with at most zeros after it,
  and no valid record can be found anywhere after it). That is what a crash
  in the middle of an append leaves, and that append was never acknowledged
  (``LogWriter.append`` returns only after ``fsync``), so recovery cuts the
  file at the record's start and notes it;
* *damage*: anything else, e.g. a valid record somewhere after the bad one,
  non-zero bytes after a bad record of plausible length, or a record whose
  CRC matches but whose contents are unusable (a torn write cannot match a
  CRC). Cutting there would drop acknowledged batches, so opening refuses
  (``CorruptionError``) and ``noria-py repair`` drops the damage only when
  asked to.

Tags (version 2): the base logs a cluster's workers keep on disk
(``runtime/cluster/writes.py``, ``DiskLogs``) name each write by the tag its client
gave it, in the write's own record, so that whether a write landed can be answered
from the log alone after every process that held it in memory is gone (``Storage``
with ``tagged=True`` creates its logs at version 2; a record without a tag is
untagged, e.g. a write made at the controller). The framing and the records of
version 1 are unchanged and version-1 logs open as before (a tag there is
malformed); only a tagged log is written at version 2, so an engine that reads
version 1 only refuses it by its header rather than taking a tag for damage.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

__all__ = [
    "LOG_MAGIC",
    "LOG_VERSION",
    "TAGGED_LOG_VERSION",
    "LOG_HEADER_SIZE",
    "RECORD_HEADER",
    "MAX_RECORD",
    "BATCH",
    "COLUMNS",
    "DROP",
    "HeaderError",
    "LogHeader",
    "encode_log_header",
    "decode_log_header",
    "frame",
    "Frame",
    "FrameScanner",
    "next_record",
    "classify_bad_record",
    "LogWriter",
    "fsync_dir",
    "atomic_write",
]

LOG_MAGIC = b"NORIAWAL"
LOG_VERSION = 1
#: a tagged log's version (its batch and columns records may end in the write's tag)
TAGGED_LOG_VERSION = 2
_LOG_HEADER_BODY = struct.Struct("<8sIQQ")
_CRC = struct.Struct("<I")
LOG_HEADER_SIZE = _LOG_HEADER_BODY.size + _CRC.size  # 32

RECORD_HEADER = struct.Struct("<II")
MAX_RECORD = 1 << 30

BATCH = 0
DROP = 1
COLUMNS = 2


class HeaderError(ValueError):
    """A file header that is not ours or is damaged (never a torn tail:
    headers are written to a temporary file and renamed into place)."""


@dataclass(frozen=True)
class LogHeader:
    gen: int
    base_lsn: int
    version: int = LOG_VERSION


def encode_log_header(gen: int, base_lsn: int, version: int = LOG_VERSION) -> bytes:
    body = _LOG_HEADER_BODY.pack(LOG_MAGIC, version, gen, base_lsn)
    return body + _CRC.pack(zlib.crc32(body))


def decode_log_header(buf: bytes) -> LogHeader:
    if len(buf) < LOG_HEADER_SIZE:
        raise HeaderError(f"file is {len(buf)} bytes, shorter than the {LOG_HEADER_SIZE}-byte header")
    body = bytes(buf[: _LOG_HEADER_BODY.size])
    magic, version, gen, base = _LOG_HEADER_BODY.unpack(body)
    if magic != LOG_MAGIC:
        raise HeaderError(f"not a noria_py log (magic {magic!r})")
    (crc,) = _CRC.unpack_from(buf, _LOG_HEADER_BODY.size)
    if crc != zlib.crc32(body):
        raise HeaderError("log header checksum mismatch")
    if version not in (LOG_VERSION, TAGGED_LOG_VERSION):
        raise HeaderError(f"log format version {version} is not supported (expected "
                          f"{LOG_VERSION} or {TAGGED_LOG_VERSION})")
    return LogHeader(gen, base, version)


def frame(payload: bytes) -> bytes:
    """One record: the header and payload joined, so it goes out in one write."""
    return RECORD_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class Frame:
    start: int
    end: int
    payload: memoryview


class FrameScanner:
    """Iterates over the well-framed records of ``buf`` from ``pos``.

    When iteration stops, ``end`` is the offset just after the last good
    frame and ``problem`` says why it stopped early (``None`` at a clean
    end of file). The caller may also stop at a frame whose payload it
    rejects; it then uses that frame's ``start`` as the end.
    """

    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self._buf = memoryview(buf)
        self.end = pos
        self.problem: str | None = None

    def __iter__(self) -> Iterator[Frame]:
        buf = self._buf
        n = len(buf)
        pos = self.end
        hsize = RECORD_HEADER.size
        while pos < n:
            if n - pos < hsize:
                self.problem = f"incomplete record header ({n - pos} of {hsize} bytes)"
                return
            length, crc = RECORD_HEADER.unpack_from(buf, pos)
            if length == 0 and crc == 0:
                self.problem = "zero-filled bytes instead of a record"
                return
            if length == 0 or length > MAX_RECORD:
                self.problem = f"implausible record length {length}"
                return
            body = pos + hsize
            if length > n - body:
                self.problem = f"incomplete record (length {length}, only {n - body} bytes present)"
                return
            payload = buf[body : body + length]
            if zlib.crc32(payload) != crc:
                self.problem = "checksum mismatch"
                return
            yield Frame(pos, body + length, payload)
            pos = body + length
            self.end = pos


def _plausible(buf: memoryview, pos: int, accept) -> bool:
    n = len(buf)
    hsize = RECORD_HEADER.size
    if n - pos < hsize:
        return False
    length, crc = RECORD_HEADER.unpack_from(buf, pos)
    if not 0 < length <= min(n - pos - hsize, MAX_RECORD):
        return False
    payload = buf[pos + hsize : pos + hsize + length]
    return zlib.crc32(payload) == crc and bool(accept(payload))


#: the first byte of every record's payload: a msgpack array of 3, 5 or (tagged) 6 items
_RECORD_FIRST_BYTES = (0x93, 0x95, 0x96)


def next_record(buf: bytes | memoryview, start: int, accept, first_bytes=_RECORD_FIRST_BYTES) -> int | None:
    """The offset of the first valid-looking record at or after ``start`` (a
    plausible length, a matching CRC, and a payload ``accept`` takes), or None.

    Scans the whole rest of the file: a bad record's length cannot be trusted,
    so the next good one may be anywhere. Candidates are narrowed with numpy
    to the offsets whose payload would start with one of ``first_bytes`` (a
    record is a msgpack array of 3 or 5 items), so that only those pay for a
    CRC."""
    import numpy as np
    view = memoryview(buf)
    n = len(view)
    hsize = RECORD_HEADER.size
    arr = np.frombuffer(view, dtype=np.uint8)
    step = 1 << 20
    for lo in range(start, max(start, n - hsize), step):
        hi = min(lo + step, n - hsize)
        window = arr[lo + hsize : hi + hsize]
        mask = window == first_bytes[0]
        for b in first_bytes[1:]:
            mask |= window == b
        for off in np.flatnonzero(mask).tolist():
            if _plausible(view, lo + off, accept):
                return lo + off
    return None


def classify_bad_record(buf: bytes | memoryview, start: int, accept, checksum_ok: bool = False) -> int | None:
    """Whether the bad record at ``start`` is a torn tail (None) or damage
    (returns the offset of evidence: the first valid record after it, or the
    first non-zero byte past its end).

    ``checksum_ok``: the record's CRC matched but its payload was unusable,
    which a torn write cannot cause, so it is damage at once (``start``)."""
    if checksum_ok:
        return start
    view = memoryview(buf)
    n = len(view)
    hsize = RECORD_HEADER.size
    if n - start >= hsize:
        length, _ = RECORD_HEADER.unpack_from(view, start)
        after = start + hsize + length
        if 0 < length <= MAX_RECORD and after < n:
            # a complete record of plausible length with bytes after it: a torn
            # write ends the file (perhaps in zeros), it is not followed by data
            tail = bytes(view[after:]).lstrip(b"\0")
            if tail:
                return n - len(tail)
    return next_record(view, start + 1, accept)


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable; without it a crash can
    bring back the old directory entry even after the file was synced."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, chunks, sync: bool = True) -> int:
    """Replace ``path`` with the concatenated ``chunks`` so that a crash leaves
    either the old file or the new one, never a mix. Returns the size."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 0
    try:
        for chunk in chunks:
            _write_all(fd, chunk)
            size += len(chunk)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
    return size


class LogWriter:
    """Appends framed records to one log file, syncing each with ``fsync``
    before returning, so that an acknowledged batch survives a power loss.
    (``fdatasync`` would also do for appends; measured here it saved under
    10%, not worth a platform-dependent path.)"""

    def __init__(self, path: Path, size: int, sync: bool = True,
                 version: int = LOG_VERSION) -> None:
        self.path = path
        self.size = size
        self._sync = sync
        #: the header's version: tags may be logged only at ``TAGGED_LOG_VERSION``
        self.version = version
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    @classmethod
    def create(cls, path: Path, gen: int, base_lsn: int, sync: bool = True,
               version: int = LOG_VERSION) -> "LogWriter":
        """A new log, put in place atomically so that it is never seen
        without its header."""
        atomic_write(path, [encode_log_header(gen, base_lsn, version)], sync=sync)
        return cls(path, LOG_HEADER_SIZE, sync=sync, version=version)

    def append(self, record: bytes) -> None:
        """Write and sync one framed record. On failure, cut the file back to
        where it was, so that a failed write cannot leave a bad record in the
        middle of the log that would hide every later batch from recovery;
        if even that fails, raise ``OSError`` with ``broken`` set."""
        try:
            _write_all(self._fd, record)
            if self._sync:
                os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self.size)
                if self._sync:
                    os.fsync(self._fd)
            except OSError:
                exc.broken = True  # type: ignore[attr-defined]
            raise
        self.size += len(record)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
