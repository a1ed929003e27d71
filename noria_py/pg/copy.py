"""``COPY``: rows in and out in bulk, as psql's ``\\copy`` and drivers' copy APIs send
them (``COPY t [(cols)] FROM STDIN``, ``COPY t TO STDOUT``, ``COPY (SELECT ...) TO
STDOUT``), in PostgreSQL's text or CSV format.

Text format: one row a line, fields split by the delimiter (a tab), ``\\N`` for NULL,
backslash escapes (``\\t``, ``\\n``, ``\\\\``, ...). CSV: Python's ``csv`` dialect with
PostgreSQL's defaults (comma, double quotes); an empty field is NULL, as an unquoted
empty field is in PostgreSQL (a quoted empty string cannot be told from it here, so it
is NULL too). Binary format is refused. A field is read as its column's type, as a
parameter in text form is (``types.text_in``). The rows of one COPY FROM are one write:
every row, or none (a bad line, a duplicate key).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any

from sql_frontend.types import SqlType, TableSchema

from ..errors import DataError, NotSupportedError, ProgrammingError
from . import types as T

COPY_FROM = re.compile(r"""\s*COPY\s+(?P<table>"[^"]+"|\w+)\s*(?:\((?P<cols>[^)]*)\))?\s*
                           FROM\s+STDIN\b(?P<opts>.*?);?\s*$""", re.I | re.S | re.X)
COPY_TO = re.compile(r"""\s*COPY\s+(?:(?P<table>"[^"]+"|\w+)\s*(?:\((?P<cols>[^)]*)\))?|
                         \(\s*(?P<query>.*)\)\s*)\s*TO\s+STDOUT\b(?P<opts>.*?);?\s*$""",
                     re.I | re.S | re.X)


class CopyFormatError(DataError):
    """A line of COPY data that does not fit its table (22P04)."""


@dataclass(frozen=True)
class Format:
    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"


def parse_options(text: str) -> Format:
    """``WITH (FORMAT csv, HEADER, DELIMITER ',', NULL '')`` or the older ``CSV HEADER
    DELIMITER ','`` spelling."""
    t = text.strip()
    if t.upper().startswith("WITH"):
        t = t[4:].strip()
    if t.startswith("(") and t.endswith(")"):
        t = t[1:-1]
    words = re.findall(r"'(?:[^']|'')*'|[^\s,()]+", t)
    opts: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i].lower()
        nxt = words[i + 1] if i + 1 < len(words) else None
        if w in ("csv", "binary", "text"):
            opts["format"] = w
        elif w in ("format", "delimiter", "null", "quote", "escape", "encoding") and nxt:
            opts[w] = nxt.strip("'").replace("''", "'")
            i += 1
        elif w == "header":
            if nxt is not None and nxt.lower() in ("true", "false", "on", "off", "1", "0", "match"):
                opts["header"] = nxt.lower()
                i += 1
            else:
                opts["header"] = "true"
        else:
            raise NotSupportedError(f"COPY option {words[i]!r} is not supported")
        i += 1
    fmt = opts.get("format", "text").lower()
    if fmt == "binary":
        raise NotSupportedError("COPY in binary format is not supported; use text or csv")
    if fmt not in ("text", "csv"):
        raise ProgrammingError(f"COPY format {fmt!r} not recognized")
    if opts.get("encoding", "utf8").lower().replace("-", "") not in ("utf8", "unicode"):
        raise NotSupportedError("COPY takes UTF8 only")
    is_csv = fmt == "csv"
    delimiter = opts.get("delimiter", "," if is_csv else "\t")
    if len(delimiter) != 1:
        raise ProgrammingError("COPY delimiter must be a single one-byte character")
    return Format(is_csv, opts.get("header", "false") in ("true", "on", "1", "match"),
                  delimiter, opts.get("null", "" if is_csv else "\\N"))


def columns_of(schema: TableSchema, cols: str | None) -> list[int]:
    """The positions of a COPY's column list (all the table's columns without one)."""
    if not cols or not cols.strip():
        return list(range(len(schema.columns)))
    out = []
    for name in (c.strip().strip('"') for c in cols.split(",")):
        i = schema.index_of(name)
        if i is None:
            raise ProgrammingError(f'column "{name}" of relation "{schema.name}" does not exist')
        out.append(i)
    return out


_UNESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\"}


def read_rows(data: bytes, fmt: Format, schema: TableSchema, positions: list[int]) -> list[tuple]:
    """The table rows of COPY data (every column not named is NULL)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise CopyFormatError("COPY data is not valid UTF-8") from None
    if fmt.csv:
        lines: list[list[str | None]] = [
            [None if f == fmt.null else f for f in rec]
            for rec in csv.reader(io.StringIO(text), delimiter=fmt.delimiter) if rec]
    else:
        lines = []
        for line in text.split("\n"):
            line = line.removesuffix("\r")
            if line == "\\.":
                break
            if line == "":
                continue
            lines.append([None if f == fmt.null else
                          _UNESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), f)
                          for f in line.split(fmt.delimiter)])
    if fmt.header and lines:
        lines = lines[1:]
    readers = [T.text_in(schema.columns[i].type) for i in positions]
    width = len(schema.columns)
    rows = []
    for n, fields in enumerate(lines, 1):
        if len(fields) != len(positions):
            raise CopyFormatError(f"COPY {schema.name}, line {n}: {len(fields)} fields for "
                                  f"{len(positions)} columns")
        row: list[Any] = [None] * width
        for pos, read, field in zip(positions, readers, fields):
            if field is not None:
                try:
                    row[pos] = read(field)
                except ValueError:
                    col = schema.columns[pos]
                    raise CopyFormatError(f"COPY {schema.name}, line {n}, column {col.name}: "
                                          f"invalid input for {col.type.value}: {field[:40]!r}"
                                          ) from None
        rows.append(tuple(row))
    return rows


def write_rows(rows: list[tuple], types: list[SqlType], fmt: Format,
               header: list[str] | None = None) -> list[bytes]:
    """COPY data lines of ``rows`` (as CopyData bodies)."""
    out = []
    if fmt.csv:
        buf = io.StringIO()
        w = csv.writer(buf, delimiter=fmt.delimiter, lineterminator="\n")
        if fmt.header and header is not None:
            w.writerow(header)
        for row in rows:
            w.writerow([fmt.null if v is None else T.text_out(v).decode() for v in row])
        return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]
    if fmt.header and header is not None:
        out.append((fmt.delimiter.join(header) + "\n").encode())
    for row in rows:
        out.append((fmt.delimiter.join(fmt.null if v is None else escape(T.text_out(v).decode())
                                       for v in row) + "\n").encode())
    return out


def escape(text: str) -> str:
    return (text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))
