"""A data dir's table schemas, read without opening (or locking) the data dir, and the
checks that decide whether Spark columns and Arrow batches fit a table."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

import sql_frontend
from sql_frontend import plan as lp
from sql_frontend.catalog import DictCatalog
from sql_frontend.types import SqlType, TableSchema

from ..arrowio import ARROW_TYPES
from ..errors import DataError, UnknownTableError


class LoadError(DataError):
    """Rows that cannot go into the table, or a source that cannot be read."""


def read_catalog(data_dir: str) -> dict[str, TableSchema]:
    """Table name (lower case) -> schema, from ``DATA_DIR/catalog.json``."""
    path = Path(data_dir) / "catalog.json"
    if not Path(data_dir).is_dir():
        raise LoadError(f"data dir {data_dir!r} does not exist; create it and its tables with "
                        "noria_py.connect(data_dir=...) first")
    if not path.exists():
        return {}
    try:
        statements = json.loads(path.read_text())["statements"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"cannot read the catalog {str(path)!r}: {exc}") from None
    tables: dict[str, TableSchema] = {}
    for sql in statements:
        if not sql.lstrip().upper().startswith("CREATE TABLE"):
            continue
        stmt = sql_frontend.parse(sql, DictCatalog(tables))
        if isinstance(stmt, lp.CreateTable):
            tables[stmt.schema.name.lower()] = stmt.schema
    return tables


def table_schema(data_dir: str, table: str) -> TableSchema:
    tables = read_catalog(data_dir)
    schema = tables.get(table.lower())
    if schema is None:
        have = ", ".join(sorted(tables)) or "none"
        raise UnknownTableError(f"data dir {data_dir!r} has no table {table!r} (tables: {have}); "
                                "create it first (CREATE TABLE ...)")
    return schema


def not_null(schema: TableSchema) -> list[bool]:
    return [not c.nullable or i in schema.primary_key for i, c in enumerate(schema.columns)]


# ---------------------------------------------------------------- Spark types

_SPARK_OK = {
    SqlType.INT: {"byte", "short", "integer", "long"},
    SqlType.FLOAT: {"byte", "short", "integer", "long", "float", "double", "decimal"},
    SqlType.TEXT: {"string", "varchar", "char"},
    SqlType.BOOL: {"boolean"},
    SqlType.DATE: {"date"},
    SqlType.TIMESTAMP: {"timestamp", "timestamp_ntz"},
    # a wall-clock time (timestamp_ntz) is taken as UTC, as PostgreSQL's cast does in
    # time zone UTC; an instant (timestamp) is kept
    SqlType.TIMESTAMPTZ: {"timestamp", "timestamp_ntz"},
}

# CSV text each engine parses into a DATE, TIMESTAMP or TIMESTAMPTZ (the same regular
# expressions for Spark's RLIKE and pyarrow's RE2). TIMESTAMPTZ text may end in an
# offset after the seconds, ``Z``, ``+HH:MM`` or ``+HHMM``; text without one is UTC.
DATE_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
TS_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?)?$"
TSTZ_RE = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?"
           r"(Z|[+-][0-9]{2}:?[0-9]{2})?)?)?$")


def spark_type_fits(spark_type, sql_type: SqlType) -> bool:
    name = spark_type.typeName()
    return name == "void" or name in _SPARK_OK.get(sql_type, set())


def match_columns(names: list[str], schema: TableSchema, where: str) -> list[str]:
    """The source column for each table column, by name (case-insensitive); every table
    column must be there and nothing else."""
    by_lower = {n.lower(): n for n in names}
    missing = [c.name for c in schema.columns if c.name.lower() not in by_lower]
    wanted = {c.name.lower() for c in schema.columns}
    extra = [n for n in names if n.lower() not in wanted]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing column(s) {missing}")
        if extra:
            parts.append(f"column(s) {extra} that table {schema.name!r} does not have")
        raise LoadError(f"{where}: {' and '.join(parts)}; table {schema.name!r} has columns "
                        f"{[c.name for c in schema.columns]}")
    return [by_lower[c.name.lower()] for c in schema.columns]


def check_spark_schema(struct, schema: TableSchema, where: str) -> list[str]:
    """Raise unless a DataFrame with ``struct`` can be written to the table."""
    cols = match_columns([f.name for f in struct.fields], schema, where)
    fields = {f.name: f for f in struct.fields}
    for name, col in zip(cols, schema.columns):
        t = fields[name].dataType
        if not spark_type_fits(t, col.type):
            raise LoadError(f"{where}: column {name!r} has type {t.simpleString()}, which cannot "
                            f"be stored in {col.type.value} column {col.name!r} of table "
                            f"{schema.name!r}")
    return cols


# ---------------------------------------------------------------- Arrow batches

def conform(batch: pa.RecordBatch, schema: TableSchema) -> pa.RecordBatch:
    """The batch as the table's columns, in order, with the table's Arrow types; raises
    LoadError for a NULL in a NOT NULL column or a value the type cannot hold."""
    cols = match_columns(batch.schema.names, schema, "data frame")
    nn = not_null(schema)
    arrays = []
    for name, col, required in zip(cols, schema.columns, nn):
        arr = batch.column(batch.schema.get_field_index(name))
        target = ARROW_TYPES[col.type]
        if pa.types.is_timestamp(arr.type) and arr.type.tz is not None:
            # instants become their UTC wall-clock time (the engine's timestamps are naive)
            arr = arr.cast(pa.int64()).cast(pa.timestamp(arr.type.unit))
        if arr.type != target:
            try:
                arr = arr.cast(target, safe=not (pa.types.is_floating(target)))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise LoadError(f"column {col.name!r}: values of type {arr.type} do not fit "
                                f"{col.type.value} ({exc})") from None
        if required and arr.null_count:
            raise LoadError(f"column {col.name!r}: NULL in a NOT NULL column of table "
                            f"{schema.name!r}")
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in schema.columns])
