"""``spark.read.format("noria")``: a view or a table of noria-py as a Spark DataFrame.

    from noria_py.spark import register
    register(spark)                                   # once per SparkSession
    df = (spark.read.format("noria").option("data_dir", "state/")
          .option("view", "votes").load())            # or .option("table", "vote")

Options: ``data_dir`` (a data directory) or ``server`` (``noria://HOST:PORT``, a running
cluster; ``token`` when it has one), and ``view`` or ``table``. A view with ``?`` is
read by lookup: ``.option("key", VALUE)`` (a JSON array of values for a view of more
than one ``?``), or an equality filter on its key columns (``df.filter("a = 3")``,
``a IN (1, 2)``), which Spark pushes down to the reader (``pushFilters``; ``register``
turns on ``spark.sql.python.filterPushdown.enabled``, which it needs).

How a read runs:

1. ``schema()`` (planning, in a Python worker of the driver) gives the columns and
   types from the data dir's ``catalog.json``: its statements are run in an empty
   in-memory engine, so a view's column types are the planner's own, and nothing is
   opened or locked. With ``server`` it asks the server.
2. ``reader()``/``pushFilters()``/``partitions()`` (planning too) check the options,
   take the key from the option or the filters, and refuse a parameterized view read
   without one. A data dir that another process holds open is refused here, by name.
3. ``read()`` (one task) opens the data dir (``noria_py.connect(data_dir=...)``, which
   replays its log and takes its lock until the read is done) or connects to the
   server, reads the rows (``all()``, or ``lookup_many`` of the keys) and yields them
   as Arrow record batches. One partition: only one process may open a data dir.

The Python Data Source API of PySpark 4.3 has no column pruning (Spark's
``PythonScanBuilder`` takes filters only): every column is read, and Spark drops the
unused ones after the scan. A schema given with ``spark.read.schema("a BIGINT, ...")``
reads only the columns it names (by name, ignoring case), which is the way to prune.
"""
from __future__ import annotations

import datetime
import fcntl
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import pyarrow as pa

from sql_frontend.types import SqlType

from ..errors import ProgrammingError, StorageError, UnknownTableError, UnknownViewError
from .arrow import rows_to_arrow
from .schema import LoadError
from .session import require_pyspark

require_pyspark()

from pyspark.sql.datasource import (  # noqa: E402
    DataSourceReader,
    EqualTo,
    Filter,
    In,
    InputPartition,
)
from pyspark.sql.types import (  # noqa: E402
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

#: the engine's column types as Spark's; TIMESTAMPTZ holds instants (UTC), as Spark's
#: TIMESTAMP (shown in the session's time zone), TIMESTAMP naive ones, as TIMESTAMP_NTZ
SPARK_TYPES: dict[SqlType, DataType] = {
    SqlType.INT: LongType(),
    SqlType.FLOAT: DoubleType(),
    SqlType.TEXT: StringType(),
    SqlType.BOOL: BooleanType(),
    SqlType.DATE: DateType(),
    SqlType.TIMESTAMP: TimestampNTZType(),
    SqlType.TIMESTAMPTZ: TimestampType(),
}

MAX_KEYS = 10_000       # keys a read may look up (the product of pushed IN lists)


class ReadOptionError(ProgrammingError):
    """``spark.read.format("noria")`` with options missing, in conflict or not valid:
    the message names the option to set."""


@dataclass
class Source:
    """What a read names: a view or a table, its columns and, for a view with ``?``,
    its key columns (names unknown over a server: then only ``key`` reads it)."""
    kind: str                       # "view" or "table"
    name: str
    columns: list[str]
    types: list[SqlType]
    key_names: list[str] | None
    key_types: list[SqlType]

    @property
    def key_arity(self) -> int:
        return len(self.key_types)

    def spark_schema(self) -> StructType:
        return StructType([StructField(c, spark_type(t, self, c), True)
                           for c, t in zip(self.columns, self.types)])


def spark_type(t: SqlType, source: Source | None = None, column: str = "") -> DataType:
    st = SPARK_TYPES.get(t)
    if st is None:      # (NULL: a view column that is only ever NULL)
        where = f" (column {column!r} of {source.kind} {source.name!r})" if source else ""
        raise LoadError(f"a noria {t.value} column has no Spark type{where}")
    return st


@dataclass
class Options:
    data_dir: str | None
    server: str | None
    token: str | None
    kind: str
    name: str
    key: str | None


def options(opts: Mapping[str, str]) -> Options:
    data_dir, server = opts.get("data_dir"), opts.get("server")
    view, table = opts.get("view"), opts.get("table")
    if bool(data_dir) == bool(server):
        raise ReadOptionError("spark.read.format('noria') needs one of .option('data_dir', DIR) "
                              "or .option('server', 'noria://HOST:PORT')"
                              + (", not both" if data_dir else ""))
    if bool(view) == bool(table):
        raise ReadOptionError("spark.read.format('noria') needs one of .option('view', NAME) or "
                              ".option('table', NAME)" + (", not both" if view else ""))
    kind, name = ("view", view) if view else ("table", table)
    assert name
    return Options(os.path.abspath(data_dir) if data_dir else None, server,
                   opts.get("token"), kind, name, opts.get("key"))


# ---------------------------------------------------------------- the catalog

def catalog_statements(data_dir: str) -> list[str]:
    path = Path(data_dir) / "catalog.json"
    if not Path(data_dir).is_dir():
        raise LoadError(f"data dir {data_dir!r} does not exist")
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text())["statements"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"cannot read the catalog {str(path)!r}: {exc}") from None


def catalog_database(data_dir: str):
    """An empty in-memory engine with the data dir's tables and views (no rows): their
    column types without opening the data dir."""
    from ..client import Database
    db = Database()
    for sql in db._create_catalog_tables(catalog_statements(data_dir)):
        db.execute(sql)
    return db


def open_engine(o: Options):
    import noria_py
    if o.server:
        return noria_py.connect(o.server, token=o.token)
    return noria_py.connect(data_dir=o.data_dir)


def describe(db, o: Options) -> Source:
    """The view or table ``o`` names, in ``db`` (an engine or a cluster client)."""
    where = f"data dir {o.data_dir!r}" if o.data_dir else o.server
    if o.kind == "table":
        try:
            schema = db.table(o.name).schema
        except UnknownTableError:
            raise UnknownTableError(f"{where} has no table {o.name!r} (tables: "
                                    f"{', '.join(sorted(db.tables())) or 'none'})") from None
        return Source("table", schema.name, [c.name for c in schema.columns],
                      [c.type for c in schema.columns], [], [])
    try:
        v = db.view(o.name)
    except UnknownViewError:
        raise UnknownViewError(f"{where} has no view {o.name!r} (views: "
                               f"{', '.join(sorted(db.views())) or 'none'})") from None
    check = getattr(v, "_check_key", None)      # (the embedded view's; not over a server)
    if check is not None:
        return Source("view", v.name, list(v.columns), list(v.types), list(check.names),
                      list(check.types))
    return Source("view", v.name, list(v.columns), list(v.types), None,
                  [SqlType.NULL] * v.key_arity)


def resolve(opts: Mapping[str, str]) -> tuple[Options, Source]:
    o = options(opts)
    if o.data_dir:
        db = catalog_database(o.data_dir)
    else:
        db = open_engine(o)
    try:
        return o, describe(db, o)
    finally:
        db.close()


def check_not_busy(data_dir: str) -> None:
    """Refuse a data dir that a process holds open (its LOCK): the read must open it."""
    path = Path(data_dir) / "LOCK"
    if not path.exists():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise busy(data_dir, os.pread(fd, 32, 0).decode(errors="replace").strip()) from None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def busy(data_dir: str, pid: str = "") -> StorageError:
    who = f" (process {pid})" if pid else ""
    return StorageError(
        f"data dir {data_dir!r} is open in another process{who}, and only one process may open "
        "it: spark.read.format('noria') opens it in a Spark worker. Close the other connection "
        "first, or serve the data dir (noria-py serve --data-dir DIR) and read from the server "
        "with .option('server', 'noria://HOST:PORT')")


# ---------------------------------------------------------------- keys

def parse_key(text: str, source: Source) -> tuple:
    """``.option("key", ...)``: a value, or a JSON array of one value per ``?``."""
    if source.key_arity > 1:
        try:
            values = json.loads(text)
        except ValueError:
            values = None
        if not isinstance(values, list) or len(values) != source.key_arity:
            raise ReadOptionError(f"view {source.name!r} has {source.key_arity} ? parameters: "
                                  f".option('key', ...) takes a JSON array of "
                                  f"{source.key_arity} values, got {text!r}")
        return tuple(_value(v, t, source) for v, t in zip(values, source.key_types))
    return (_value(text, source.key_types[0], source),)


def _value(v: Any, t: SqlType, source: Source) -> Any:
    try:
        if not isinstance(v, str) or t == SqlType.TEXT:
            return v
        if t == SqlType.INT:
            return int(v)
        if t == SqlType.FLOAT:
            return float(v)
        if t == SqlType.BOOL:
            return {"true": True, "false": False, "1": True, "0": False}[v.strip().lower()]
        if t == SqlType.DATE:
            return datetime.date.fromisoformat(v.strip())
        if t in (SqlType.TIMESTAMP, SqlType.TIMESTAMPTZ):
            return datetime.datetime.fromisoformat(v.strip())
        if t == SqlType.NULL:        # (over a server the key's type is not known: a JSON value)
            try:
                return json.loads(v)
            except ValueError:
                return v
    except (ValueError, KeyError):
        raise ReadOptionError(f"key value {v!r} for view {source.name!r} is not a "
                              f"{t.value}") from None
    return v


# ---------------------------------------------------------------- the reader

class NoriaReader(DataSourceReader):
    def __init__(self, opts: Options, source: Source, schema: StructType) -> None:
        self.opts = opts
        self.source = source
        by_lower = {c.lower(): i for i, c in enumerate(source.columns)}
        self.names = [f.name for f in schema.fields]
        unknown = [n for n in self.names if n.lower() not in by_lower]
        if unknown:
            raise ReadOptionError(f"the schema names column(s) {unknown} that {source.kind} "
                                  f"{source.name!r} does not have (it has {source.columns})")
        self.picked = [by_lower[n.lower()] for n in self.names]
        self.keys: list[tuple] | None = None
        if opts.key is not None:
            if source.kind != "view" or not source.key_arity:
                raise ReadOptionError(f"{source.kind} {source.name!r} has no ? parameters: "
                                      "read it without .option('key', ...)")
            self.keys = [parse_key(opts.key, source)]

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Equality (or IN) filters on every key column of a view with ``?`` become
        lookups. Every filter is handed back all the same: Spark checks the rows again,
        so a key the filter's and the engine's types compare differently finds no row
        Spark would not have kept."""
        names = self.source.key_names
        if self.keys is None and self.source.key_arity and names:
            wanted: dict[str, list] = {}
            for f in filters:
                if isinstance(f, EqualTo) and len(f.attribute) == 1:
                    wanted[f.attribute[0].lower()] = [f.value]
                elif isinstance(f, In) and len(f.attribute) == 1:
                    wanted[f.attribute[0].lower()] = list(f.value)
            if all(n.lower() in wanted for n in names):
                per_column = [wanted[n.lower()] for n in names]
                keys = list(itertools.islice(itertools.product(*per_column), MAX_KEYS + 1))
                if len(keys) <= MAX_KEYS:
                    self.keys = keys
        yield from filters

    def partitions(self) -> list[InputPartition]:
        s = self.source
        if s.kind == "view" and s.key_arity and self.keys is None:
            on = (f" or filter on {' and '.join(f'{n} = VALUE' for n in s.key_names)}"
                  if s.key_names and all(n.lower() in {c.lower() for c in s.columns}
                                         for n in s.key_names) else "")
            example = "VALUE" if s.key_arity == 1 else "'[V1, V2, ...]' (a JSON array)"
            raise ReadOptionError(
                f"view {s.name!r} has {s.key_arity} ? parameter(s)"
                + (f" ({', '.join(s.key_names)})" if s.key_names else "")
                + f": read it by key with .option('key', {example}){on}")
        if self.opts.data_dir:
            check_not_busy(self.opts.data_dir)
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        o, s = self.opts, self.source
        try:
            db = open_engine(o)
        except StorageError as exc:
            if "already in use" in str(exc) and o.data_dir:
                raise busy(o.data_dir) from None
            raise
        try:
            if s.kind == "table":
                handle = db.table(s.name)
                rows = (handle.rows() if hasattr(handle, "rows")
                        else db.execute(f'SELECT * FROM "{s.name}"').fetchall())
            else:
                view = db.view(s.name)
                if self.keys is None:
                    rows = view.all()
                else:
                    keys: list = [k[0] if len(k) == 1 else k for k in self.keys]
                    rows = [r for found in view.lookup_many(keys) for r in found]
        finally:
            db.close()
        if self.picked != list(range(len(s.columns))):
            rows = [tuple(r[i] for i in self.picked) for r in rows]
        table = rows_to_arrow(rows, self.names, [s.types[i] for i in self.picked])
        yield from table.to_batches(max_chunksize=65_536)


def dataframe(spark, *, view: str | None = None, table: str | None = None,
              data_dir: str | None = None, server: str | None = None, key: Any = None,
              token: str | None = None):
    """``spark.read.format("noria")`` with these options, checked in this process first,
    so that a wrong name or option, or a data dir held open (by this process too), is a
    ``noria_py.Error`` here rather than a Spark ``AnalysisException`` that quotes one."""
    from . import register
    given = {"view": view, "table": table, "data_dir": data_dir, "server": server,
             "token": token}
    opts = {k: v for k, v in given.items() if v is not None}
    if key is not None:
        opts["key"] = (json.dumps(list(key), default=str) if isinstance(key, (tuple, list))
                       else str(key).lower() if isinstance(key, bool) else str(key))
    o, source = resolve(opts)
    NoriaReader(o, source, source.spark_schema())       # (checks the key)
    if o.data_dir:
        check_not_busy(o.data_dir)
    register(spark)
    return spark.read.format("noria").options(**opts).load()
