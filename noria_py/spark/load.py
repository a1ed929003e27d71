"""``noria-py load TABLE PATH...``: bulk-load Parquet or CSV files into a base table.

Two engines run a load, with the same checks, messages and error classes: Spark (this
module), and pyarrow in this process (``arrowload.py``), which starts no JVM; that fixed
cost (~30 s) dwarfs a small load. ``--engine auto`` (the default) takes arrow for
inputs up to ``ARROW_MAX_BYTES``, Spark beyond, or for files that are not local.

How a load runs on Spark:

1. The table's schema comes from the data dir's catalog; the data dir is then opened
   (``noria_py.connect(data_dir=DIR)``), which takes its lock for the whole load.
2. Spark (``--master``, ``local[*]`` by default) reads the files and validates every row
   against the schema in one pass of DataFrame expressions: CSV text is parsed into the
   column's type (strictly: ``12abc`` is not an integer), Parquet column types must fit
   the table's, NOT NULL and primary-key columns must hold a value, a primary key may
   appear once (within the files and against the rows already in the table). Each row
   carries its file and position, so a bad row is reported as file, row number (1-based,
   header excluded), column and reason.
3. Any bad row stops the load before anything is written: nothing is loaded. With
   ``--skip-bad`` the bad rows go to a reject file (CSV: file, row, column, reason, the
   row's values as JSON) and the rest is loaded.
4. The good rows are written with the "noria" data source (``datasource.py``,
   ``ingest=false``): executors write Arrow IPC files to ``DATA_DIR/staging/JOB/``.
5. This process ingests them in batches through ``Table.insert`` (the write-ahead log,
   fsynced per batch), showing progress, then removes the staging folder.

The base table of an embedded data dir is a single node, so rows are not split by
shard on the way in: the engine's sharders split them, by its stable hash
(``noria_py.hashing``), downstream of the base table. With ``--server noria://HOST:PORT``
the rows are staged in a scratch dir and inserted through the cluster client in batches
of ``--batch-rows``; the controller validates and logs each batch as it does any insert.
Validation happens before the first batch, so a bad row still loads nothing; a batch
the server refuses (a key inserted meanwhile by another client) stops the load there.
"""
from __future__ import annotations

import csv
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from sql_frontend.types import SqlType

from ..storage import Storage
from .schema import (
    DATE_RE,
    TS_RE,
    TSTZ_RE,
    LoadError,
    match_columns,
    not_null,
    spark_type_fits,
    table_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_SPARK_SQL_TYPES = {SqlType.INT: "BIGINT", SqlType.FLOAT: "DOUBLE", SqlType.TEXT: "STRING",
                    SqlType.BOOL: "BOOLEAN", SqlType.DATE: "DATE",
                    SqlType.TIMESTAMP: "TIMESTAMP_NTZ", SqlType.TIMESTAMPTZ: "TIMESTAMP"}
_INT_RE = r"^\\s*[+-]?[0-9]+\\s*$"
_FLOAT_RE = r"^\\s*([+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan))\\s*$"
MAX_REPORTED = 10


@dataclass
class LoadReport:
    table: str
    rows: int = 0                   # rows loaded
    rejected: int = 0               # bad rows skipped (--skip-bad)
    reject_file: str | None = None
    seconds: float = 0.0
    phases: dict = field(default_factory=dict)
    engine: str = "spark"           # which engine ran: "spark" or "arrow"

    def __str__(self) -> str:
        s = f"loaded {self.rows} rows into {self.table} in {self.seconds:.1f}s"
        if self.rows and self.seconds:
            s += f" ({self.rows / self.seconds:,.0f} rows/s)"
        if self.rejected:
            s += f"; {self.rejected} bad rows written to {self.reject_file}"
        return s


def _sql_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def guess_format(paths: list[str]) -> str:
    exts = {Path(p.rstrip("/")).suffix.lower() for p in paths}
    if exts <= {".parquet", ".pq"}:
        return "parquet"
    if exts <= {".csv"}:
        return "csv"
    raise LoadError(f"cannot tell the format of {paths} from their names; pass --format parquet "
                    "or --format csv")


def _display(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


ENGINES = ("auto", "arrow", "spark")
# ``--engine auto`` loads inputs up to this many bytes without Spark (``arrowload.py``),
# larger ones with it (docs/benchmarks-spark.md, "Choosing the engine")
ARROW_MAX_BYTES = 256 * 1024 * 1024


def choose_engine(engine: str, paths: list[str]) -> str:
    """``arrow`` or ``spark`` for ``engine`` (auto: by the input's size in bytes)."""
    if engine not in ENGINES:
        raise LoadError(f"unknown engine {engine!r}: use auto, arrow or spark")
    if engine != "auto":
        return engine
    from .arrowload import input_bytes
    size = input_bytes(paths)
    return "arrow" if size is not None and size <= ARROW_MAX_BYTES else "spark"


def load(table: str, paths: list[str], *, data_dir: str | None = None, server: str | None = None,
         fmt: str | None = None, master: str | None = None, skip_bad: bool = False,
         reject_file: str | None = None, batch_rows: int = 100_000, progress: bool = True,
         spark=None, out=sys.stderr, token: str | None = None,
         engine: str = "auto") -> LoadReport:
    """Load ``paths`` into ``table`` (module docstring); ``engine``: ``spark``, ``arrow``
    (pyarrow in this process, no JVM: ``arrowload.py``) or ``auto`` (arrow for inputs up
    to ``ARROW_MAX_BYTES``, else spark). The engine changes the speed, not the result:
    the same checks, messages and error classes. ``report.engine`` says which ran."""
    start = time.perf_counter()
    if (server is None) == (data_dir is None):
        raise LoadError("say where to load: --data-dir DIR or --server noria://HOST:PORT")
    if not paths:
        raise LoadError("no input files given")
    for p in paths:
        if "://" not in p and not any(ch in p for ch in "*?[") and not os.path.exists(p):
            raise LoadError(f"input file {p!r} does not exist")
    fmt = (fmt or guess_format(paths)).lower()
    if fmt not in ("parquet", "csv"):
        raise LoadError(f"unknown format {fmt!r}: use parquet or csv")
    engine = choose_engine(engine, paths)
    import noria_py
    if engine == "arrow":
        return _load_arrow(table, paths, fmt, data_dir=data_dir, server=server, token=token,
                           skip_bad=skip_bad, reject_file=reject_file, batch_rows=batch_rows,
                           progress=progress, out=out, start=start)
    if server is not None:
        # a cluster: the rows are staged in a scratch dir that holds the table's
        # definition, and inserted through the client in batches
        db = noria_py.connect(server, token=token)
        try:
            handle = db.table(table)
            stage = _scratch_dir(handle.sql)
        except BaseException:
            db.close()
            raise
        schema = handle.schema
    else:
        assert data_dir is not None     # exactly one of server and data_dir, checked above
        schema = table_schema(data_dir, table)      # fails fast, before Spark starts
        stage = data_dir
    report = LoadReport(table=schema.name, engine="spark")

    from . import get_session, register
    from .datasource import ingest, read_manifest, staging_dir
    if spark is None:
        spark = get_session(master)
    if server is None:
        db = noria_py.connect(data_dir=data_dir)
    plan = _ReadPlan()
    try:
        t0 = time.perf_counter()
        plan = _plan_read(fmt, paths)
        raw = _read(spark, fmt, paths, plan)
        checked, src_cols = _validate(spark, raw, fmt, schema, db, plan)
        bad = checked.where("__bad_reason IS NOT NULL")
        first_bad = (bad.orderBy("__file", "__mono")
                     .select("__file", "__block", "__mono", "__bad_col", "__bad_reason", "__raw")
                     .limit(MAX_REPORTED).collect())
        report.phases["validate"] = time.perf_counter() - t0
        if first_bad:
            rowno = _row_numbers(raw)
            if not skip_bad:
                n = bad.count()
                lines = [f"  {_display(r['__file'])}, row {rowno(r)}, column {r['__bad_col']}: "
                         f"{r['__bad_reason']}" for r in first_bad]
                more = f"\n  ... and {n - len(first_bad)} more" if n > len(first_bad) else ""
                raise LoadError(f"{n} bad row(s) in the input; nothing was loaded "
                                f"(--skip-bad loads the rest and writes the bad rows to a "
                                f"reject file):\n" + "\n".join(lines) + more)
            reject_file = reject_file or f"{schema.name}.rejects.csv"
            report.rejected = _write_rejects(bad, rowno, reject_file)
            report.reject_file = reject_file
        good = checked.where("__bad_reason IS NULL").selectExpr(
            *[f"__v{i} AS {_q(c.name)}" for i, c in enumerate(schema.columns)])
        t0 = time.perf_counter()
        register(spark)
        job = "load-" + uuid.uuid4().hex
        try:
            (good.write.format("noria").option("data_dir", os.path.abspath(stage))
             .option("table", schema.name).option("job", job).option("ingest", "false")
             .mode("append").save())
            files, total = read_manifest(stage, job)
            report.phases["spark_write"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            bar = _progress(total, schema.name, progress, out)
            try:
                report.rows = ingest(db, schema.name, files, batch_rows,
                                     progress=bar.update if bar else None)
            finally:
                if bar:
                    bar.close()
            report.phases["ingest"] = time.perf_counter() - t0
        finally:
            shutil.rmtree(staging_dir(stage, job), ignore_errors=True)
    except _spark_errors() as exc:
        raise LoadError(f"Spark could not load the input: {_spark_message(exc)}; nothing "
                        f"was loaded") from None
    finally:
        if plan.nanos:
            spark.conf.unset(_NANOS_AS_LONG)
        db.close()
        if server is not None:
            shutil.rmtree(stage, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def _load_arrow(table: str, paths: list[str], fmt: str, *, data_dir: str | None,
                server: str | None, token: str | None, skip_bad: bool, reject_file: str | None,
                batch_rows: int, progress: bool, out, start: float) -> LoadReport:
    import noria_py

    from .arrowload import load_arrow
    if server is not None:
        db = noria_py.connect(server, token=token)
    else:
        assert data_dir is not None
        table_schema(data_dir, table)               # the same message for an unknown table
        db = noria_py.connect(data_dir=data_dir)
    try:
        schema = db.table(table).schema
        report = LoadReport(table=schema.name, engine="arrow")
        load_arrow(db, schema, paths, fmt, report, skip_bad=skip_bad, reject_file=reject_file,
                   batch_rows=batch_rows, progress=progress, out=out, max_reported=MAX_REPORTED)
    finally:
        db.close()
    report.seconds = time.perf_counter() - start
    return report


def _scratch_dir(create_sql: str) -> str:
    """A data dir holding only the table's definition: where Spark's executors stage the
    rows for a load into a cluster."""
    import tempfile
    path = tempfile.mkdtemp(prefix="noria-load-")
    st = Storage(path)
    st.load()
    st.set_catalog([create_sql])
    st.close()
    return path


def _progress(total: int, name: str, enabled: bool, out):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="rows", unit_scale=True, desc=f"loading {name}", file=out)


@dataclass
class _ReadPlan:
    """What the files' own metadata says before Spark reads them (local files only):
    the schema to read Parquet files with when their types differ (Spark would take
    one file's), and the Parquet columns holding nanosecond timestamps (Spark reads
    those only as integers, ``_NANOS_AS_LONG``), with the type Spark gives a timestamp."""
    ddl: str | None = None
    nanos: dict[str, Any] = field(default_factory=dict)


_NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


def _plan_read(fmt: str, paths: list[str]) -> _ReadPlan:
    """Check local files as the arrow engine does (``arrowload.check_csv_headers``,
    ``parquet_schema``), so a mismatch is a ``LoadError`` naming the file, not an
    exception from inside a Spark job."""
    import pyarrow as pa

    from .arrowload import SparkType, check_csv_headers, expand, parquet_schema
    if any("://" in p and not p.startswith("file:") for p in paths):
        return _ReadPlan()
    files = expand(paths)
    if fmt == "csv":
        check_csv_headers(files)
        return _ReadPlan()
    schema, differ = parquet_schema(files)
    if schema is None:
        return _ReadPlan()
    nanos = {f.name: SparkType(f.type) for f in schema
             if pa.types.is_timestamp(f.type) and f.type.unit == "ns"}
    if not differ and not nanos:
        return _ReadPlan()
    ddl = ", ".join(f"{_q(f.name)} {'bigint' if f.name in nanos else SparkType(f.type).simpleString()}"
                    for f in schema)
    return _ReadPlan(ddl, nanos)


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    return (PySparkException, Py4JJavaError)


def _spark_message(exc: BaseException) -> str:
    """The first line of Spark's own message, without the Java stack."""
    text = str(getattr(exc, "java_exception", None) or exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "An error occurred while calling")):
            return line.split("Exception: ", 1)[-1][:500]
    return type(exc).__name__


def _read(spark, fmt: str, paths: list[str], plan: _ReadPlan):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType
    if fmt == "parquet":
        if plan.nanos:
            spark.conf.set(_NANOS_AS_LONG, "true")
        reader = spark.read.schema(plan.ddl) if plan.ddl else spark.read
        df = reader.parquet(*paths)
    else:
        header = spark.read.option("header", True).csv(paths).columns
        if "_corrupt" in header:
            raise LoadError("a CSV column may not be named _corrupt")
        struct = StructType([StructField(c, StringType()) for c in header]
                            + [StructField("_corrupt", StringType())])
        df = (spark.read.schema(struct).option("header", True).option("enforceSchema", False)
              .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
              .csv(paths))
    # position of each row: its file split, and an id increasing within the split
    return df.select("*", F.col("_metadata.file_path").alias("__file"),
                     F.col("_metadata.file_block_start").alias("__block"),
                     F.monotonically_increasing_id().alias("__mono"))


def _validate(spark, raw, fmt: str, schema, db, plan: _ReadPlan):
    """``raw`` with __v0.. (the table's columns, converted), __bad_col, __bad_reason, __raw."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    data_cols = [c for c in raw.columns if not c.startswith("__") and c != "_corrupt"]
    src = match_columns(data_cols, schema, f"{fmt} input")
    fields = {f.name: plan.nanos.get(f.name, f.dataType) for f in raw.schema.fields}
    nn = not_null(schema)
    values, checks = [], []          # checks: (column name, condition, reason) in order
    if fmt == "csv":
        checks.append(("(whole row)", "_corrupt IS NOT NULL",
                       "concat('malformed CSV line: ', substr(_corrupt, 1, 200))"))
    for i, (s, col) in enumerate(zip(src, schema.columns)):
        s_q = _q(s)
        if fmt == "parquet":
            if not spark_type_fits(fields[s], col.type):
                raise LoadError(f"{fmt} input: column {s!r} has type {fields[s].simpleString()}, "
                                f"which cannot be stored in {col.type.value} column {col.name!r} "
                                f"(every row); nothing was loaded")
            # nanoseconds since the epoch, truncated to microseconds as pyarrow does
            v = f"CAST(timestamp_micros({s_q} div 1000) AS {_SPARK_SQL_TYPES[col.type]})" \
                if s in plan.nanos else f"CAST({s_q} AS {_SPARK_SQL_TYPES[col.type]})"
        else:
            v = _parse_text(s_q, col.type)
            if col.type is not SqlType.TEXT:
                checks.append((col.name, f"{s_q} IS NOT NULL AND ({v}) IS NULL",
                               f"concat('not a valid {col.type.value}: ', {s_q})"))
        if nn[i]:
            reason = "'NULL in a primary-key column'" if i in schema.primary_key \
                else "'NULL in a NOT NULL column'"
            checks.append((col.name, f"{s_q} IS NULL", reason))
        values.append(F.expr(v).alias(f"__v{i}"))
    df = raw.select("*", *values,
                    F.to_json(F.struct(*[F.col(_q(c)) for c in data_cols])).alias("__raw"))
    if schema.primary_key:
        pk = [f"__v{i}" for i in schema.primary_key]
        pk_name = ", ".join(schema.columns[i].name for i in schema.primary_key)
        w = Window.partitionBy(*pk).orderBy("__file", "__mono")
        df = df.withColumn("__pk_n", F.row_number().over(w))
        checks.append((pk_name, "__pk_n > 1", "'duplicate primary key (an earlier row has it)'"))
        existing = list(db.table(schema.name).primary_keys())
        if existing:
            from .arrow import rows_to_arrow
            keys = rows_to_arrow(existing, [f"__k{j}" for j in range(len(pk))],
                                 [schema.columns[i].type for i in schema.primary_key])
            kdf = spark.createDataFrame(keys).withColumn("__exists", F.lit(True))
            cond = [df[p] == kdf[f"__k{j}"] for j, p in enumerate(pk)]
            df = df.join(F.broadcast(kdf) if len(existing) < 1_000_000 else kdf, cond, "left")
            checks.append((pk_name, "__exists IS NOT NULL",
                           "'primary key already in the table'"))
    bad_col = "CASE " + " ".join(f"WHEN {c} THEN {_sql_str(n)}" for n, c, _ in checks) + " END" \
        if checks else "CAST(NULL AS STRING)"
    bad_reason = "CASE " + " ".join(f"WHEN {c} THEN {r}" for _, c, r in checks) + " END" \
        if checks else "CAST(NULL AS STRING)"
    df = df.select("*", F.expr(bad_col).alias("__bad_col"), F.expr(bad_reason).alias("__bad_reason"))
    return df, src


def _parse_text(s: str, t: SqlType) -> str:
    """Spark SQL turning CSV text ``s`` into a value of ``t``; NULL where it is not one."""
    if t is SqlType.TEXT:
        return s
    if t is SqlType.INT:
        return f"CASE WHEN {s} RLIKE '{_INT_RE}' THEN try_cast(trim({s}) AS BIGINT) END"
    if t is SqlType.FLOAT:
        return f"CASE WHEN lower({s}) RLIKE '{_FLOAT_RE}' THEN try_cast(trim({s}) AS DOUBLE) END"
    if t is SqlType.BOOL:
        return (f"CASE WHEN lower(trim({s})) IN ('true', 't', '1', 'yes', 'y', 'on') THEN TRUE "
                f"WHEN lower(trim({s})) IN ('false', 'f', '0', 'no', 'n', 'off') THEN FALSE END")
    if t is SqlType.DATE:
        return f"CASE WHEN trim({s}) RLIKE '{DATE_RE}' THEN try_cast(trim({s}) AS DATE) END"
    if t is SqlType.TIMESTAMP:
        return f"CASE WHEN trim({s}) RLIKE '{TS_RE}' THEN try_cast(trim({s}) AS TIMESTAMP_NTZ) END"
    if t is SqlType.TIMESTAMPTZ:        # text without an offset is UTC, the session's zone
        return f"CASE WHEN trim({s}) RLIKE '{TSTZ_RE}' THEN try_cast(trim({s}) AS TIMESTAMP) END"
    raise LoadError(f"cannot load a column of type {t.value}")


class _NamedRow(Protocol):
    """A row read by column name: a pyspark ``Row``, or a dict of ``Table.to_pylist``."""

    def __getitem__(self, name: str, /) -> Any: ...


def _row_numbers(raw: DataFrame) -> Callable[[_NamedRow], int]:
    """A function of a bad row (with __file, __block, __mono) giving its 1-based row number
    in its file: rows before its split, plus its place within the split."""
    from pyspark.sql import functions as F
    splits = (raw.groupBy("__file", "__block", F.shiftright("__mono", 33).alias("__part"))
              .agg(F.min("__mono").alias("first"), F.count(F.lit(1)).alias("n")).collect())
    by_file: dict[str, list] = {}
    for r in splits:
        by_file.setdefault(r["__file"], []).append(r)
    offset: dict[tuple, tuple[int, int]] = {}
    for f, rs in by_file.items():
        before = 0
        for r in sorted(rs, key=lambda r: r["__block"]):
            offset[(f, r["__block"], r["__part"])] = (before, r["first"])
            before += r["n"]

    def rowno(r: _NamedRow) -> int:
        before, first = offset[(r["__file"], r["__block"], r["__mono"] >> 33)]
        return before + (r["__mono"] - first) + 1
    return rowno


def _write_rejects(bad, rowno, path: str) -> int:
    rows = bad.select("__file", "__block", "__mono", "__bad_col", "__bad_reason", "__raw").toArrow()
    n = rows.num_rows
    recs = rows.to_pylist()
    recs.sort(key=lambda r: (r["__file"], r["__mono"]))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["file", "row", "column", "reason", "values"])
        for r in recs:
            w.writerow([_display(r["__file"]), rowno(r), r["__bad_col"], r["__bad_reason"], r["__raw"]])
    return n


def main(args) -> int:
    """The CLI entry (``noria-py load``)."""
    from ..errors import Error
    try:
        report = load(args.table, args.paths, data_dir=args.data_dir, server=args.server,
                      fmt=args.format, master=args.master, skip_bad=args.skip_bad,
                      reject_file=args.reject_file, batch_rows=args.batch_rows,
                      progress=not args.quiet, token=getattr(args, "token", None),
                      engine=getattr(args, "engine", "auto"))
    except Error as exc:
        print(f"noria-py load: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0

