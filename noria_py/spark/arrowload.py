"""``noria-py load --engine arrow``: the load without Spark, for inputs small enough that
starting a JVM would cost more than the rows (docs/benchmarks-spark.md).

It reads the files with pyarrow (Parquet) or with a line reader that splits CSV as Spark
does, checks the rows, and writes the good ones through ``Table.insert_arrow``, in the
same process and without staging files. Invariants, each the Spark path's (``load.py``)
so that the engine a load ran on changes nothing but its speed:

- The same checks, in the same order for a row, the first that fails naming the row's
  column and reason: a malformed CSV line; for each table column in order, a CSV value
  its type cannot parse ("not a valid INT: 12abc"), then a NULL in a NOT NULL or
  primary-key column; a duplicate primary key (an earlier row has it); a primary key
  already in the table. A Parquet column whose type cannot be stored fails the whole
  load. CSV text is parsed with the same rules as Spark's SQL expressions (the same
  regular expressions; ``trim`` strips spaces only; ``""`` and an empty field are NULL).
- Rows are ordered by file path, then position, as Spark orders ``(__file, __mono)``:
  "earlier" in a duplicate key means that, and so do the row numbers (1-based, header
  and blank lines excluded) in messages and the reject file.
- CSV lines are split as Spark's non-multiline reader does: a record is a physical line
  (``\\n``, ``\\r\\n`` or ``\\r``), lines of only whitespace are skipped, a quote is
  escaped with a backslash, and a quoted value followed by anything but the delimiter
  is taken as unquoted text, quotes included (univocity's STOP_AT_DELIMITER). A line
  with more or fewer values than the header is malformed; its values still count for
  duplicate keys, as in Spark.
- Nothing is written before every row is checked: a rejected load changes nothing.
  The whole input is held in memory, which is why large inputs go to Spark (``load.py``,
  ``ARROW_MAX_BYTES``).

- Files are checked as a whole before any row, with the same functions on both engines
  (the Spark engine runs them on local files before Spark reads them): every CSV
  header names the same columns (``check_header``); the Parquet files have the same
  columns, and types that one type holds (``parquet_schema``: int32 in one file and
  int64 in another load as int64; int and string are a ``LoadError``). Nanosecond
  timestamps are truncated to microseconds, the engine's unit.

The one known difference: a file name is shown as the path, where Spark shows its URI
(a space as ``%20``).
"""
from __future__ import annotations

import base64
import csv
import decimal
import glob
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sql_frontend.types import SqlType, TableSchema

from ..arrowio import ARROW_TYPES
from .schema import DATE_RE, TS_RE, TSTZ_RE, LoadError, match_columns, not_null, spark_type_fits

# the Spark path's regular expressions (load.py), in RE2's spelling; Java's \s is
# [ \t\n\x0B\f\r], RE2's lacks \x0B
_WS = r"[ \t\n\x0B\f\r]"
_INT_RE = rf"^{_WS}*[+-]?[0-9]+{_WS}*$"
_FLOAT_RE = (rf"^{_WS}*([+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?"
             rf"|[+-]?(inf|infinity|nan)){_WS}*$")
_BOOL = {"true": True, "t": True, "1": True, "yes": True, "y": True, "on": True,
         "false": False, "f": False, "0": False, "no": False, "n": False, "off": False}
_LINE = re.compile(r"\r\n|\r|\n")


@dataclass
class Input:
    """The rows read from the files, in load order: the source columns (CSV: text),
    each row's file (an index into ``files``) and 1-based row number in it, and the
    malformed CSV lines (row index -> the line)."""
    names: list[str]
    columns: list[pa.Array]
    files: list[str]
    file_of: np.ndarray
    row_of: np.ndarray
    malformed: dict[int, str]

    @property
    def num_rows(self) -> int:
        return len(self.file_of)


@dataclass
class Checked:
    """The table's columns, converted (``values``); for each row the index of the check
    it failed (-1: none) and that check's column and reason."""
    values: list[pa.Array]
    failed: np.ndarray
    bad_col: dict[int, str]
    bad_reason: dict[int, str]


# ---------------------------------------------------------------- files

def expand(paths: Sequence[str]) -> list[str]:
    """The files ``paths`` name, as Spark finds them (a glob's matches, a directory's
    files but those named ``_*`` or ``.*``), absolute, sorted by path: the order Spark's
    ``__file`` sorts in."""
    files: list[str] = []
    for p in paths:
        for prefix in ("file://", "file:"):
            if p.startswith(prefix):
                p = p[len(prefix):]
                break
        if "://" in p:
            raise LoadError(f"{p!r} is not a local file; load it with --engine spark")
        matches = sorted(glob.glob(p)) if any(ch in p for ch in "*?[") else [p]
        if not matches:
            raise LoadError(f"input path {p!r} matches no file")
        for m in matches:
            if os.path.isdir(m):
                files.extend(os.path.join(m, f) for f in sorted(os.listdir(m))
                             if not f.startswith(("_", ".")) and os.path.isfile(os.path.join(m, f)))
            else:
                files.append(m)
    return sorted({os.path.abspath(f) for f in files})


def input_bytes(paths: Sequence[str]) -> int | None:
    """The size of the files ``paths`` name; None if one is not local (a LoadError for a
    glob that matches nothing, whichever engine would run)."""
    if any("://" in p and not p.startswith("file:") for p in paths):
        return None
    try:
        return sum(os.path.getsize(f) for f in expand(paths))
    except OSError:
        return None


# ---------------------------------------------------------------- CSV

def split_csv_line(line: str) -> list[str | None]:
    """One CSV line's values as Spark's reader takes them (delimiter ``,``, quote ``"``,
    escape ``\\``); an empty value, quoted or not, is None."""
    if '"' not in line:
        return [v if v else None for v in line.split(",")]
    out: list[str | None] = []
    i, n = 0, len(line)
    while True:
        if i < n and line[i] == '"':
            buf: list[str] = []
            j = i + 1
            closed = False
            while j < n:
                ch = line[j]
                if ch == "\\" and j + 1 < n and line[j + 1] == '"':
                    buf.append('"')
                    j += 2
                elif ch == '"':
                    closed = True
                    j += 1
                    break
                else:
                    buf.append(ch)
                    j += 1
            if closed and (j == n or line[j] == ","):
                value: str | None = "".join(buf)
                i = j
            elif not closed:
                value, i = "".join(buf), n
            else:                   # a quote inside: the raw text up to the delimiter
                k = line.find(",", j)
                k = n if k < 0 else k
                value, i = line[i:k], k
        else:
            k = line.find(",", i)
            k = n if k < 0 else k
            value, i = line[i:k], k
        out.append(value if value else None)
        if i >= n:
            return out
        i += 1                      # the delimiter
        if i == n:
            out.append(None)
            return out


def _csv_lines(path: str) -> list[str]:
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", errors="replace")
    return [ln for ln in _LINE.split(text) if ln.strip()]


class _Fallback(Exception):
    """The file needs the line-by-line reader."""


_BLANKISH = re.compile(rb"(^|[\r\n])[ \t\f\v]+([\r\n]|$)")


def _fast_csv(path: str) -> tuple[list[str], list[pa.Array]] | None:
    """A CSV file read by pyarrow's parser when that gives what the line reader would: no
    quote below the header, no line of only spaces, every line as wide as the header, valid
    UTF-8 (else None). This is the bulk of CSV files, read at pyarrow's speed."""
    import pyarrow.csv as pa_csv
    with open(path, "rb") as fh:
        data = fh.read()
    first = len(data.split(b"\n", 1)[0].split(b"\r", 1)[0])
    if (not data or b'"' in data[first:] or data[:1] in b"\r\n \t" or _BLANKISH.search(data)):
        return None

    def refuse(row: Any) -> str:
        raise _Fallback()
    names = [h for h in split_csv_line(data[:first].decode("utf-8", "replace")) if h]
    if len(set(names)) < len(names) or data[:first].count(b",") + 1 != len(names):
        return None
    try:
        t = pa_csv.read_csv(pa.BufferReader(data),
                            pa_csv.ReadOptions(use_threads=True, skip_rows=1,
                                               column_names=names),
                            pa_csv.ParseOptions(quote_char=False, invalid_row_handler=refuse),
                            pa_csv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                  null_values=[""], strings_can_be_null=True))
    except (_Fallback, pa.ArrowInvalid):
        return None
    if t.column_names != names:
        return None
    return names, [c.combine_chunks() for c in t.columns]


def csv_names(line: str) -> list[str]:
    """The column names a CSV header line gives (an empty one is ``_cN``, as in Spark)."""
    return [h or f"_c{i}" for i, h in enumerate(split_csv_line(line))]


def check_header(f: str, header: list[str], first: str, names: list[str]) -> None:
    """Raise unless file ``f``'s ``header`` names the columns of the first file's
    (``names``), up to case; both engines check every file's header before any row."""
    if "_corrupt" in (h.lower() for h in header):
        raise LoadError("a CSV column may not be named _corrupt")
    if [h.lower() for h in header] != [h.lower() for h in names]:
        raise LoadError(f"csv input: {f} has the columns {header}, the first file "
                        f"{first} has {names}; nothing was loaded")


def csv_header(path: str) -> list[str] | None:
    """The header of a CSV file, its first line that is not blank, read without reading
    the rest of the file; None for a file of blank lines only."""
    with open(path, "rb") as fh:
        buf = b""
        while True:
            chunk = fh.read(1 << 16)
            buf += chunk
            parts = _LINE.split(buf.decode("utf-8", errors="replace"))
            for line in parts if not chunk else parts[:-1]:     # the last may go on
                if line.strip():
                    return csv_names(line)
            if not chunk:
                return None


def check_csv_headers(files: list[str]) -> None:
    """Every CSV file's header names the same columns (``check_header``): the Spark
    engine's check before it reads, which would otherwise fail inside Spark."""
    names: list[str] | None = None
    for f in files:
        header = csv_header(f)
        if header is None:
            continue
        if names is None:
            names, first = header, f
        check_header(f, header, first, names)


def read_csv(files: list[str]) -> Input:
    names: list[str] | None = None
    cols: list[list[str | None]] = []
    file_of: list[int] = []
    row_of: list[int] = []
    malformed: dict[int, str] = {}
    fast = [_fast_csv(f) for f in files]
    if all(r is not None for r in fast):
        return _fast_input(files, [r for r in fast if r is not None])
    for fi, f in enumerate(files):
        lines = _csv_lines(f)
        if not lines:
            continue
        header = csv_names(lines[0])
        if names is None:
            names = header
            check_header(files[0], names, files[0], names)
            cols = [[] for _ in names]
        else:
            check_header(f, header, files[0], names)
        width = len(names)
        start = len(file_of)
        for r, line in enumerate(lines[1:]):
            values = split_csv_line(line)
            if len(values) != width:
                malformed[len(file_of)] = line
                values = (values + [None] * width)[:width]
            for c, v in zip(cols, values):
                c.append(v)
            file_of.append(fi)
        row_of.extend(range(1, len(file_of) - start + 1))
    if names is None:
        names, cols = [], []
    return Input(names, [pa.array(c, pa.string()) for c in cols], files,
                 np.array(file_of, dtype=np.int64), np.array(row_of, dtype=np.int64), malformed)


def _fast_input(files: list[str], read: list[tuple[list[str], list[pa.Array]]]) -> Input:
    names = read[0][0] if read else []
    for f, (header, _) in zip(files, read):
        check_header(f, header, files[0], names)
    counts = [len(cols[0]) if cols else 0 for _, cols in read]
    columns = [pa.concat_arrays([cols[i] for _, cols in read]) for i in range(len(names))]
    file_of = np.repeat(np.arange(len(files), dtype=np.int64), counts)
    row_of = np.concatenate([np.arange(1, c + 1, dtype=np.int64) for c in counts]) \
        if counts else np.zeros(0, np.int64)
    return Input(names, columns, files, file_of, row_of, {})


# ---------------------------------------------------------------- Parquet

class SparkType:
    """The type Spark gives a Parquet column pyarrow reads as ``t``: its ``typeName`` (what
    ``schema.spark_type_fits`` checks) and ``simpleString`` (what messages show)."""

    def __init__(self, t: pa.DataType) -> None:
        self.name, self.simple = _spark_type(t)

    def typeName(self) -> str:         # noqa: N802  (Spark's spelling)
        return self.name

    def simpleString(self) -> str:     # noqa: N802
        return self.simple


def _spark_type(t: pa.DataType) -> tuple[str, str]:
    ints = {pa.int8(): ("byte", "tinyint"), pa.int16(): ("short", "smallint"),
            pa.int32(): ("integer", "int"), pa.int64(): ("long", "bigint"),
            pa.uint8(): ("short", "smallint"), pa.uint16(): ("integer", "int"),
            pa.uint32(): ("long", "bigint"), pa.uint64(): ("decimal", "decimal(20,0)"),
            pa.float32(): ("float", "float"), pa.float64(): ("double", "double"),
            pa.bool_(): ("boolean", "boolean"), pa.date32(): ("date", "date"),
            pa.null(): ("integer", "int")}
    if t in ints:
        return ints[t]
    if pa.types.is_decimal(t):
        return "decimal", f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string", "string"
    if pa.types.is_dictionary(t):
        return _spark_type(t.value_type)
    if pa.types.is_timestamp(t):
        return ("timestamp", "timestamp") if t.tz is not None else ("timestamp_ntz", "timestamp_ntz")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary", "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "array", f"array<{_spark_type(t.value_type)[1]}>"
    if pa.types.is_struct(t):
        return "struct", "struct<" + ",".join(f"{f.name}:{_spark_type(f.type)[1]}" for f in t) + ">"
    return str(t), str(t)


def parquet_schema(files: list[str]) -> tuple[pa.Schema | None, bool]:
    """The schema that holds every Parquet file's rows, from the files' footers: the first
    file's column names, each column's type promoted (int32 and int64 give int64); and
    whether the files' types differ. Raises a ``LoadError`` for a file that is not
    Parquet, columns that differ, or types that no type holds (int and string). Both
    engines read with it, the Spark engine before Spark sees the files."""
    schemas: list[pa.Schema] = []
    for f in files:
        try:
            s = pq.read_schema(f)
        except (OSError, pa.ArrowInvalid) as exc:
            raise LoadError(f"cannot read {f} as Parquet: {exc}") from None
        if schemas:
            names = schemas[0].names
            by_lower = {n.lower(): n for n in s.names}
            if set(by_lower) != {n.lower() for n in names}:
                raise LoadError(f"parquet input: {f} has the columns {s.names}, the "
                                f"first file {files[0]} has {names}; nothing was loaded")
            s = pa.schema([s.field(by_lower[n.lower()]).with_name(n) for n in names])
        schemas.append(s.remove_metadata())
    if not schemas:
        return None, False
    try:
        unified = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise LoadError(f"parquet input: the files' column types differ ({exc})") from None
    return unified, any(not s.equals(unified) for s in schemas)


def read_parquet(files: list[str]) -> Input:
    schema, _ = parquet_schema(files)
    if schema is None:
        return Input([], [], files, np.zeros(0, np.int64), np.zeros(0, np.int64), {})
    parts: list[pa.Table] = []
    file_of, row_of = [], []
    for fi, f in enumerate(files):
        t = pq.read_table(f)
        by_lower = {n.lower(): n for n in t.column_names}
        t = (t.select([by_lower[n.lower()] for n in schema.names])
             .rename_columns(schema.names).cast(schema))
        parts.append(t)
        file_of.append(np.full(t.num_rows, fi, dtype=np.int64))
        row_of.append(np.arange(1, t.num_rows + 1, dtype=np.int64))
    table = pa.concat_tables(parts)
    return Input(schema.names, [c.combine_chunks() for c in table.columns], files,
                 np.concatenate(file_of), np.concatenate(row_of), {})


# ---------------------------------------------------------------- checks

def _mask(arr: pa.Array) -> np.ndarray:
    """A boolean array's values as numpy, NULL as False."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _parse_where(text: pa.Array, ok: np.ndarray, parse: Callable[[pa.Array], pa.Array],
                 one: Callable[[str], Any], target: pa.DataType) -> pa.Array:
    """``text`` parsed into ``target`` where ``ok``, NULL elsewhere: vectorized, value by
    value (``one``; None when it fails) if the vector parse refuses any of them."""
    chosen = pc.if_else(pa.array(ok), text, pa.nulls(len(text), pa.string()))
    try:
        return parse(chosen)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        out = []
        for v in chosen.to_pylist():
            try:
                out.append(None if v is None else one(v))
            except (ValueError, OverflowError):
                out.append(None)
        return pa.array(out, target)


def _int(v: str) -> int:
    n = int(v.strip())
    if not -2**63 <= n < 2**63:
        raise OverflowError(v)
    return n


def _float(v: str) -> float | None:
    s = v.strip().lower()
    if s in ("-nan", "+nan"):
        return None                 # the regex takes them; Spark's cast does not
    return float(s)


def _timestamp(v: str) -> Any:
    import datetime
    return datetime.datetime.fromisoformat(v.strip())


def _timestamptz(v: str) -> Any:
    import datetime
    ts = datetime.datetime.fromisoformat(v.strip())
    return ts.replace(tzinfo=datetime.timezone.utc) if ts.tzinfo is None \
        else ts.astimezone(datetime.timezone.utc)


def _date(v: str) -> Any:
    import datetime
    return datetime.date.fromisoformat(v.strip())


def parse_text(text: pa.Array, t: SqlType) -> pa.Array:
    """CSV text as a column of ``t``, NULL where it is not a value of ``t``: the Spark
    path's ``_parse_text``."""
    target = ARROW_TYPES[t]
    if t is SqlType.TEXT:
        return text
    spaces = pc.utf8_trim(text, " ")            # Spark's trim: spaces only
    if t is SqlType.INT:
        ok = _mask(pc.match_substring_regex(text, _INT_RE))
        return _parse_where(pc.utf8_trim_whitespace(text), ok,
                            lambda a: pc.cast(a, pa.int64()), _int, target)
    if t is SqlType.FLOAT:
        ok = _mask(pc.match_substring_regex(pc.utf8_lower(text), _FLOAT_RE))
        signed_nan = _mask(pc.match_substring_regex(pc.utf8_lower(pc.utf8_trim_whitespace(text)),
                                                    r"^[+-]nan$"))
        return _parse_where(pc.utf8_trim_whitespace(text), ok & ~signed_nan,
                            lambda a: pc.cast(a, pa.float64()), _float, target)
    if t is SqlType.BOOL:
        lowered = pc.utf8_lower(spaces)
        true = _mask(pc.is_in(lowered, pa.array([k for k, v in _BOOL.items() if v])))
        false = _mask(pc.is_in(lowered, pa.array([k for k, v in _BOOL.items() if not v])))
        return pc.if_else(pa.array(true), True,
                          pc.if_else(pa.array(false), False, pa.nulls(len(text), pa.bool_())))
    if t is SqlType.DATE:
        ok = _mask(pc.match_substring_regex(spaces, DATE_RE))
        return _parse_where(spaces, ok, lambda a: pc.cast(a, pa.date32()), _date, target)
    if t is SqlType.TIMESTAMP:
        ok = _mask(pc.match_substring_regex(spaces, TS_RE))
        return _parse_where(spaces, ok, lambda a: pc.cast(a, target), _timestamp, target)
    if t is SqlType.TIMESTAMPTZ:
        ok = _mask(pc.match_substring_regex(spaces, TSTZ_RE))
        return _parse_where(spaces, ok, lambda a: pc.cast(a, target), _timestamptz, target)
    raise LoadError(f"cannot load a column of type {t.value}")


def _stored(arr: pa.Array, t: SqlType) -> pa.Array:
    """A Parquet column (its type checked by ``spark_type_fits``) as the table's type:
    Spark's ``CAST`` (session time zone UTC): in a TIMESTAMP column an instant becomes its
    UTC wall-clock time; in a TIMESTAMPTZ column an instant stays, a wall-clock time is
    taken as UTC."""
    target = ARROW_TYPES[t]
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_timestamp(arr.type):
        if arr.type.tz is not None and t is not SqlType.TIMESTAMPTZ:
            arr = arr.cast(pa.int64()).cast(pa.timestamp(arr.type.unit))
        return arr.cast(target, safe=False)
    return arr.cast(target)


def check(data: Input, fmt: str, schema: TableSchema, existing: set[tuple]) -> Checked:
    """Every row checked as the Spark path's ``_validate`` does."""
    src = match_columns(data.names, schema, f"{fmt} input")
    index = {n: i for i, n in enumerate(data.names)}
    nn = not_null(schema)
    n = data.num_rows
    failed = np.full(n, -1, dtype=np.int64)
    names: list[str] = []                               # per check: its column
    reasons: list[Callable[[int], str]] = []            # per check: a row's reason

    def add(col: str, mask: np.ndarray, reason: Callable[[int], str]) -> None:
        failed[(failed == -1) & mask] = len(names)
        names.append(col)
        reasons.append(reason)

    if fmt == "csv" and data.malformed:
        bad_lines = np.zeros(n, dtype=bool)
        bad_lines[list(data.malformed)] = True
        add("(whole row)", bad_lines, lambda r: "malformed CSV line: " + data.malformed[r][:200])
    values = []
    for i, (s, col) in enumerate(zip(src, schema.columns)):
        raw = data.columns[index[s]]
        if fmt == "parquet":
            st = SparkType(raw.type)
            if not spark_type_fits(st, col.type):
                raise LoadError(f"{fmt} input: column {s!r} has type {st.simpleString()}, "
                                f"which cannot be stored in {col.type.value} column {col.name!r} "
                                f"(every row); nothing was loaded")
            v = _stored(raw, col.type)
        else:
            v = parse_text(raw, col.type)
            if col.type is not SqlType.TEXT:
                text = raw

                def invalid(r: int, text: pa.Array = text, t: SqlType = col.type) -> str:
                    return f"not a valid {t.value}: {text[r].as_py()}"
                add(col.name, _mask(pc.and_(pc.is_valid(raw), pc.is_null(v))), invalid)
        if nn[i]:
            reason = "NULL in a primary-key column" if i in schema.primary_key \
                else "NULL in a NOT NULL column"
            add(col.name, _mask(pc.is_null(raw)), _constant(reason))
        values.append(v)
    if schema.primary_key:
        pk_name = ", ".join(schema.columns[i].name for i in schema.primary_key)
        dup = np.zeros(n, dtype=bool)
        exists = np.zeros(n, dtype=bool)
        keys = list(zip(*[values[i].to_pylist() for i in schema.primary_key]))
        norm_existing = {_key(k) for k in existing}
        seen: set[tuple] = set()
        for r, key in enumerate(keys):
            if any(v is None for v in key):
                continue            # (a NULL in the key: an earlier check has the row)
            k = _key(key)
            if k in seen:
                dup[r] = True
            else:
                seen.add(k)
                exists[r] = k in norm_existing
        add(pk_name, dup, lambda r: "duplicate primary key (an earlier row has it)")
        add(pk_name, exists, lambda r: "primary key already in the table")
    bad = np.flatnonzero(failed >= 0)
    return Checked(values, failed, {int(r): names[failed[r]] for r in bad},
                   {int(r): reasons[failed[r]](int(r)) for r in bad})


def _constant(reason: str) -> Callable[[int], str]:
    return lambda r: reason


def _key(key: tuple) -> tuple:
    """A key as Spark groups it: every NaN alike (and -0.0 = 0.0, as in Python)."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in key)


# ---------------------------------------------------------------- the load

def raw_json(data: Input, r: int) -> str:
    """A row's source values as JSON, as Spark's ``to_json`` writes them (NULLs left out;
    numbers as Java prints them; dates and times in ISO form)."""
    parts = []
    for name, col in zip(data.names, data.columns):
        v = col[r].as_py()
        if v is None:
            continue
        parts.append(json.dumps(name, ensure_ascii=False) + ":" + _json_value(v, col.type))
    return "{" + ",".join(parts) + "}"


def _json_value(v: Any, t: pa.DataType) -> str:
    import datetime
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, float):
        return _java_float(v, single=pa.types.is_float32(t))
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc)
            return json.dumps(v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z")
        return json.dumps(v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}")
    if isinstance(v, datetime.date):
        return json.dumps(v.isoformat())
    if isinstance(v, bytes):
        return json.dumps(base64.b64encode(v).decode())
    return json.dumps(v, ensure_ascii=False, default=str)


def _java_float(v: float, single: bool = False) -> str:
    """``v`` as Java's ``Double.toString`` (``Float.toString``) prints it: the shortest
    digits, positional from 10^-3 to 10^7, else ``d.dddE±n``."""
    if math.isnan(v):
        return '"NaN"'
    if math.isinf(v):
        return '"Infinity"' if v > 0 else '"-Infinity"'
    x: Any = np.float32(v) if single else v
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return np.format_float_positional(x, unique=True, trim="0")
    mantissa, _, exp = np.format_float_scientific(x, unique=True, trim="0").partition("e")
    return f"{mantissa}E{int(exp)}"


def load_arrow(db: Any, schema: TableSchema, paths: Sequence[str], fmt: str, report: Any, *,
               skip_bad: bool, reject_file: str | None, batch_rows: int, progress: bool,
               out: Any = sys.stderr, max_reported: int = 10) -> None:
    """Check the files' rows and insert the good ones into ``db``'s table (``report``:
    the caller's ``LoadReport``, filled in)."""
    from .load import _progress
    t0 = time.perf_counter()
    files = expand(paths)
    data = read_csv(files) if fmt == "csv" else read_parquet(files)
    existing = db.table(schema.name).primary_keys() if schema.primary_key else set()
    checked = check(data, fmt, schema, existing)
    bad = sorted(checked.bad_col)       # row order is (file, position): load order
    report.phases["validate"] = time.perf_counter() - t0

    def where(r: int) -> str:
        return (f"  {data.files[data.file_of[r]]}, row {data.row_of[r]}, column "
                f"{checked.bad_col[r]}: {checked.bad_reason[r]}")
    if bad and not skip_bad:
        shown = bad[:max_reported]
        more = f"\n  ... and {len(bad) - len(shown)} more" if len(bad) > len(shown) else ""
        raise LoadError(f"{len(bad)} bad row(s) in the input; nothing was loaded "
                        f"(--skip-bad loads the rest and writes the bad rows to a "
                        f"reject file):\n" + "\n".join(where(r) for r in shown) + more)
    if bad:
        reject_file = reject_file or f"{schema.name}.rejects.csv"
        Path(reject_file).parent.mkdir(parents=True, exist_ok=True)
        with open(reject_file, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["file", "row", "column", "reason", "values"])
            for r in bad:
                w.writerow([data.files[data.file_of[r]], int(data.row_of[r]), checked.bad_col[r],
                            checked.bad_reason[r], raw_json(data, r)])
        report.rejected = len(bad)
        report.reject_file = reject_file
    good = pa.Table.from_arrays(checked.values, names=[c.name for c in schema.columns])
    if bad:
        good = good.filter(pa.array(checked.failed < 0))
    t0 = time.perf_counter()
    handle = db.table(schema.name)
    bar = _progress(good.num_rows, schema.name, progress, out)
    try:
        for start in range(0, good.num_rows, batch_rows):
            chunk = good.slice(start, batch_rows)
            handle.insert_arrow(chunk)
            report.rows += chunk.num_rows
            if bar:
                bar.update(chunk.num_rows)
    finally:
        if bar:
            bar.close()
    report.phases["ingest"] = time.perf_counter() - t0
