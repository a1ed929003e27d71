"""``df.write.format("noria")``: a PySpark Python data source that appends to a base table
(and ``spark.read.format("noria")`` reads a view or a table: ``read.py``).

    from noria_py.spark import register
    register(spark)                                   # once per SparkSession
    (df.write.format("noria").option("data_dir", "state/").option("table", "vote")
       .mode("append").save())

Only one process may open a data dir (it holds a lock), while a Spark write runs in
many: executors (on ``local[*]``, Python worker processes) and a commit step that
Spark runs in yet another Python worker. So the work is split:

1. ``writer()`` (planning, on the driver's machine) reads the table's schema from the
   data dir's catalog file, without opening the data dir, and rejects a DataFrame whose
   columns or types do not fit.
2. ``write()`` (each executor task) receives its partition as Arrow record batches,
   checks and converts them to the table's column types (NOT NULL included), and writes
   them to an Arrow IPC file ``DATA_DIR/staging/JOB/part-PPPPP-TTTT.arrow``, first under
   a temporary name, then renamed. Nothing touches the engine. It returns the file's
   name and row count as its commit message.
3. ``commit()`` runs once, after every task succeeded: it opens the data dir
   (``noria_py.connect(data_dir=...)``, taking the lock; it fails clearly if another
   process has it open), checks primary keys across all staged files and against the
   table before inserting anything, then inserts the staged rows in batches through
   the ordinary write path (the write-ahead log, fsynced per batch), closes the data
   dir and deletes the staging folder. ``abort()`` deletes the staged files.
   With ``.option("ingest", "false")`` commit only writes ``staging/JOB/MANIFEST.json``
   and leaves the ingestion to the caller: ``noria-py load`` does this, since it holds
   the data dir open itself (and shows progress).

So a failed task or job loads nothing, and bad rows are found before any insert. A
crash of the process in the middle of step 3 leaves the batches logged so far (each
whole); the staging folder is then still there to inspect. Row data crosses process
boundaries only as Arrow IPC files; Spark itself pickles the writer's options and the
small commit messages. With a cluster ``--master``, DATA_DIR must be a path every
executor can write to (a shared file system).
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.ipc as ipc

from .schema import LoadError, check_spark_schema, conform, table_schema
from .session import require_pyspark

require_pyspark()   # without PySpark: the install hint, not a ModuleNotFoundError

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType  # noqa: E402

STAGING = "staging"
MANIFEST = "MANIFEST.json"


@dataclass
class StagedFile(WriterCommitMessage):
    path: str
    rows: int


class NoriaDataSource(DataSource):
    """Writing: ``data_dir`` and ``table`` (required); ``job`` (a staging folder name,
    default random); ``ingest`` (default "true"); ``batch_rows`` (rows per insert).
    Reading (``read.py``): ``data_dir`` or ``server``, ``view`` or ``table``, ``key``."""

    @classmethod
    def name(cls) -> str:
        return "noria"

    def schema(self) -> StructType:
        from .read import resolve
        return resolve(self.options)[1].spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        from .read import NoriaReader, resolve
        opts, source = resolve(self.options)
        return NoriaReader(opts, source, schema)

    def writer(self, schema, overwrite: bool) -> "NoriaWriter":
        if overwrite:
            raise LoadError("the noria data source only appends: use .mode('append')")
        data_dir = self.options.get("data_dir")
        table = self.options.get("table")
        if not data_dir or not table:
            raise LoadError("the noria data source needs .option('data_dir', DIR) and "
                            ".option('table', NAME)")
        tschema = table_schema(data_dir, table)
        check_spark_schema(schema, tschema, "data frame")
        job = self.options.get("job") or uuid.uuid4().hex
        ingest = str(self.options.get("ingest", "true")).lower() not in ("false", "0", "no")
        batch_rows = int(self.options.get("batch_rows", 100_000))
        return NoriaWriter(os.path.abspath(data_dir), tschema.name, job, ingest, batch_rows)


def staging_dir(data_dir: str, job: str) -> Path:
    return Path(data_dir) / STAGING / job


class NoriaWriter(DataSourceArrowWriter):
    def __init__(self, data_dir: str, table: str, job: str, ingest: bool, batch_rows: int) -> None:
        self.data_dir = data_dir
        self.table = table
        self.job = job
        self.ingest = ingest
        self.batch_rows = batch_rows

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
        from pyspark import TaskContext

        tschema = table_schema(self.data_dir, self.table)
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx else 0
        attempt = ctx.taskAttemptId() if ctx else 0
        folder = staging_dir(self.data_dir, self.job)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"part-{part:05d}-{attempt}.arrow"
        tmp = final.with_suffix(".tmp")
        rows = 0
        writer = None
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                batch = conform(batch, tschema)
                if writer is None:
                    writer = ipc.new_file(str(tmp), batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return StagedFile("", 0)
        os.replace(tmp, final)
        return StagedFile(final.name, rows)

    def commit(self, messages) -> None:
        staged = [m for m in messages if isinstance(m, StagedFile) and m.rows]
        staged.sort(key=lambda m: m.path)
        folder = staging_dir(self.data_dir, self.job)
        files = [m.path for m in staged]
        manifest = {"table": self.table, "files": files, "rows": sum(m.rows for m in staged)}
        if not self.ingest:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / (MANIFEST + ".tmp")
            tmp.write_text(json.dumps(manifest))
            os.replace(tmp, folder / MANIFEST)
            return
        import noria_py
        db = noria_py.connect(data_dir=self.data_dir)
        try:
            ingest(db, self.table, [folder / f for f in files], self.batch_rows)
        finally:
            db.close()
        shutil.rmtree(folder, ignore_errors=True)

    def abort(self, messages) -> None:
        shutil.rmtree(staging_dir(self.data_dir, self.job), ignore_errors=True)


def read_manifest(data_dir: str, job: str) -> tuple[list[Path], int]:
    folder = staging_dir(data_dir, job)
    m = json.loads((folder / MANIFEST).read_text())
    return [folder / f for f in m["files"]], int(m["rows"])


def ingest(db, table: str, files: list[Path], batch_rows: int = 100_000, progress=None) -> int:
    """Insert the rows of staged Arrow IPC files into ``table``; primary keys are checked
    across all files and against the table first, so a conflict inserts nothing."""
    handle = db.table(table)
    schema = handle.schema
    if schema.primary_key:
        _check_keys(handle, schema, files)
    total = 0
    for path in files:
        with pa.memory_map(str(path)) as src:
            reader = ipc.open_file(src)
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                for start in range(0, batch.num_rows, batch_rows):
                    chunk = batch.slice(start, batch_rows)
                    # (numeric columns go in as arrays: Table.insert_arrow)
                    handle.insert_arrow(pa.Table.from_batches([chunk]))
                    total += chunk.num_rows
                    if progress is not None:
                        progress(chunk.num_rows)
    return total


def _check_keys(handle, schema, files: list[Path]) -> None:
    from ..errors import DuplicateKeyError
    pk = schema.primary_key
    existing = handle.primary_keys()
    seen: set = set()
    for path in files:
        with pa.memory_map(str(path)) as src:
            table = ipc.open_file(src).read_all()
        cols = [table.column(i).to_pylist() for i in pk]
        for n, key in enumerate(zip(*cols)):
            if key in seen or key in existing:
                where = "appears twice in the rows to load" if key in seen else "is already in the table"
                raise DuplicateKeyError(
                    f"primary key {key if len(key) > 1 else key[0]!r} of table {schema.name!r} "
                    f"{where} (staged file {path.name}, row {n + 1}); nothing was loaded")
            seen.add(key)
