"""The sqllogictest runner: ``noria-py logictest FILE... [--mode M] [-v]``.

Every ``query`` record becomes a view fed by the statements before it, and its rows are
compared with the expected ones in the file's own format (see the corpus's FORMAT.wiki:
I/T/R columns, rowsort/valuesort/nosort, hash-threshold with MD5, skipif/onlyif, halt).

Two modes, and both must give the expected answer:

- ``initial``: the file runs in order in one database; at a query, its view is created
  over the data already there (the initialization path), read, and dropped again.
- ``incremental``: the views come first and the data after. The file is cut into
  *epochs* at its schema statements (CREATE/DROP ...). At the start of each epoch that
  has queries, a fresh database gets the live schema, then the views of all the epoch's
  queries, then the rows the tables hold at that point (written after the views, so they
  flow through them), and then the epoch's own INSERT/UPDATE/DELETE statements run in
  order; each view is read when the runner reaches its query. In the usual file shape
  (tables created first, then data, then queries) this is one epoch whose views see
  every write arrive.

A query is *unsupported* when the engine rejects its SQL with a ``noria_py.Error``
raised while the statement is parsed or planned (the front end's clear errors:
unsupported constructs, types it will not mix), or when it reads a table that an
earlier statement could not fill (an unsupported write). Anything else that does not
give the expected rows is *wrong*, including Python exceptions that are not
``noria_py.Error`` (bugs, listed with ``-v``).

We are no named engine: ``onlyif X`` records are skipped and ``skipif X`` records run,
whatever X is.

The corpus comes from SQLite, which drops a table or view that views read (they fail
when next read); the engine refuses that (``DependentViewsError``, as PostgreSQL does
without CASCADE). Such a ``statement ok`` DROP is carried out as soon as the views
reading its object are dropped (in the corpus: the next statements), so the file's
views do not pile up in the graph for the rest of the file.
"""
from __future__ import annotations

import hashlib
import math
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import sql_frontend
from noria_py import DependentViewsError, Error, connect
from sql_frontend import plan as lp

_HASH_LINE = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")


# ---------------------------------------------------------------- records

@dataclass
class Record:
    kind: str                      # "statement", "query", "halt", "hash-threshold"
    line: int                      # 1-based line of the record's first line
    sql: str = ""
    ok: bool = True                # statement ok / statement error
    types: str = ""                # query column types
    sort: str = "nosort"
    label: str | None = None
    expected: list[str] = field(default_factory=list)
    skip: bool = False             # a skipif/onlyif condition excludes it
    threshold: int = 0             # hash-threshold value


def parse_file(text: str) -> list[Record]:
    """The records of a test script, conditions applied (``skip`` set)."""
    records: list[Record] = []
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        # skip blank lines (comment lines are not blank, but carry nothing)
        while i < n and (not lines[i].strip() or lines[i].startswith("#")):
            i += 1
        if i >= n:
            break
        block: list[tuple[int, str]] = []
        while i < n and lines[i].strip():
            if not lines[i].startswith("#"):
                block.append((i + 1, lines[i].rstrip("\r")))
            i += 1
        if not block:
            continue
        rec = _record(block)
        if rec is not None:
            records.append(rec)
    return records


def _record(block: list[tuple[int, str]]) -> Record | None:
    skip = False
    k = 0
    while k < len(block):
        words = block[k][1].split()
        if words and words[0] in ("skipif", "onlyif"):
            # we are no named engine: onlyif X never holds, skipif X never triggers
            if words[0] == "onlyif":
                skip = True
            k += 1
            continue
        break
    if k >= len(block):
        return None
    line, head = block[k]
    words = head.split()
    body = [t for _, t in block[k + 1:]]
    if words[0] == "statement":
        return Record("statement", line, "\n".join(body),
                      ok=len(words) < 2 or words[1] == "ok", skip=skip)
    if words[0] == "query":
        sql_lines: list[str] = []
        expected: list[str] = []
        seen_sep = False
        for t in body:
            if not seen_sep and t.strip() == "----":
                seen_sep = True
            elif seen_sep:
                expected.append(t)
            else:
                sql_lines.append(t)
        types = words[1] if len(words) > 1 else ""
        sort = words[2] if len(words) > 2 else "nosort"
        label = words[3] if len(words) > 3 else None
        return Record("query", line, "\n".join(sql_lines), types=types, sort=sort,
                      label=label, expected=expected, skip=skip)
    if words[0] == "halt":
        return Record("halt", line, skip=skip)
    if words[0] == "hash-threshold":
        return Record("hash-threshold", line, threshold=int(words[1]), skip=skip)
    return Record("unknown", line, head, skip=True)


# ---------------------------------------------------------------- values

_NUM_PREFIX = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _text_number(s: str) -> float | int:
    m = _NUM_PREFIX.match(s)
    if not m:
        return 0
    t = m.group(0).strip()
    try:
        return int(t)
    except ValueError:
        return float(t)


def _real_text(v: float) -> str:
    """A REAL as SQLite prints it as text (``%!.15g``: always with a decimal point)."""
    if math.isnan(v):
        return "NULL"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    s = "%.15g" % v
    if "e" in s:
        mant, ex = s.split("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{ex}"
    if "." not in s:
        s += ".0"
    return s


def _printable(s: str) -> str:
    if s == "":
        return "(empty)"
    return "".join(c if " " <= c <= "~" else "@" for c in s)


def render(value, col_type: str) -> str:
    """One result value as sqllogictest prints it for a column of type I, R or T."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        value = int(value)
    if col_type == "I":
        if isinstance(value, str):
            value = _text_number(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "NULL"
            if math.isinf(value):
                return str((1 << 63) - 1 if value > 0 else -(1 << 63))
            value = int(value)            # truncation toward zero, as sqlite3_column_int64
        return "%d" % value
    if col_type == "R":
        if isinstance(value, str):
            value = _text_number(value)
        return "%.3f" % float(value)
    # T
    if isinstance(value, float):
        return _real_text(value)
    if isinstance(value, int):
        return str(value)
    return _printable(str(value))


def result_values(rows: list[tuple], types: str, sort: str) -> list[str]:
    rendered = [tuple(render(v, types[i] if i < len(types) else "T")
                      for i, v in enumerate(r)) for r in rows]
    if sort == "rowsort":
        rendered.sort()
    values = [v for r in rendered for v in r]
    if sort == "valuesort":
        values.sort()
    return values


def values_hash(values: list[str]) -> str:
    h = hashlib.md5()
    for v in values:
        h.update(v.encode())
        h.update(b"\n")
    return h.hexdigest()


def matches(rows: list[tuple], rec: Record, ordered: bool) -> tuple[bool, str]:
    """Whether ``rows`` are what ``rec`` expects, and what was got (for messages)."""
    ncol = len(rec.types)
    if any(len(r) != ncol for r in rows):
        width = len(rows[0]) if rows else ncol
        return False, f"{width} columns where the record has {ncol} ({rec.types})"
    sort = rec.sort
    if sort == "nosort" and not ordered and len(rows) > 1:
        # no ORDER BY: any order is right; compare as a multiset of rows, unless the
        # expected values are hashed (then only their order was recorded)
        sort = "rowsort"
    values = result_values(rows, rec.types, sort)
    exp = rec.expected
    m = _HASH_LINE.match(exp[0].strip()) if len(exp) == 1 else None
    if m is not None:
        got = f"{len(values)} values hashing to {values_hash(values)}"
        if int(m.group(1)) == len(values) and m.group(2) == values_hash(values):
            return True, got
        if sort != rec.sort and rec.sort == "nosort":
            # hashed in SQLite's own order, which we cannot know without an ORDER BY:
            # try ours before giving up
            v2 = result_values(rows, rec.types, "nosort")
            if values_hash(v2) == m.group(2):
                return True, got
        return False, got
    expected = list(exp)
    if sort != rec.sort:
        # re-sort the expected values the same way (rows of ncol values)
        if ncol and len(expected) % ncol == 0:
            grouped = [tuple(expected[i:i + ncol]) for i in range(0, len(expected), ncol)]
            grouped.sort()
            expected = [v for r in grouped for v in r]
    if values == expected:
        return True, ""
    # some scripts list one row per line, values separated by spaces
    if ncol > 1 and len(expected) == len(rows):
        per_row = [" ".join(values[i:i + ncol]) for i in range(0, len(values), ncol)]
        if per_row == expected:
            return True, ""
    shown = " ".join(values[:40]) + (" ..." if len(values) > 40 else "")
    return False, shown


# ---------------------------------------------------------------- outcomes

PASS, WRONG, UNSUPPORTED = "passed", "wrong", "unsupported"


@dataclass
class Outcome:
    status: str
    detail: str = ""


@dataclass
class FileResult:
    path: str
    passed: int = 0
    wrong: int = 0
    unsupported: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)       # wrong answers and bugs
    reasons: dict[str, int] = field(default_factory=dict)  # unsupported, by message

    def line(self) -> str:
        return (f"{self.path}: {self.passed} passed, {self.wrong} wrong, "
                f"{self.unsupported} unsupported")


def _reason(err: BaseException) -> str:
    msg = str(err)
    msg = re.sub(r" \(at line \d+, column \d+\)", "", msg)
    msg = re.sub(r"'[^']*'|\d+(\.\d+)?", "_", msg)
    return f"{type(err).__name__}: {msg[:90]}"


# ---------------------------------------------------------------- engine access

def _tables_read(rel) -> set[str]:
    out: set[str] = set()
    stack = [rel]
    while stack:
        r = stack.pop()
        if isinstance(r, lp.Scan):
            out.add(r.table.lower())
            continue
        for name in ("input", "left", "right"):
            x = getattr(r, name, None)
            if x is not None:
                stack.append(x)
        for x in getattr(r, "inputs", ()) or ():
            stack.append(x)
    return out


class _Session:
    """One database plus the runner's bookkeeping about it."""

    def __init__(self) -> None:
        self.db = connect(clocks=False)
        self.tainted: set[str] = set()       # tables an unsupported write left incomplete
        self.views: dict[int, str] = {}      # record line -> view name (incremental)
        self.failed: dict[int, Outcome] = {} # record line -> why its view does not exist
        self.queries: dict[str, lp.Query] = {}   # view name -> its plan
        self.n = 0
        self.doomed: list[str] = []          # DROPs refused while views read their object

    def drop_doomed(self) -> None:
        """Carry out the refused DROPs whose objects no view reads any more."""
        progress = True
        while self.doomed and progress:
            progress = False
            for sql in list(self.doomed):
                try:
                    self.db.execute(sql)
                except DependentViewsError:
                    continue
                except Error:
                    pass                     # gone some other way
                self.doomed.remove(sql)
                progress = True

    def plan(self, sql: str) -> lp.Query:
        stmt = self.db.parse(sql)
        if not isinstance(stmt, lp.Select):
            raise sql_frontend.UnsupportedError(
                f"unsupported: a query record that is not a SELECT ({type(stmt).__name__})")
        return stmt.query

    def create(self, sql: str) -> tuple[str | None, Outcome | None]:
        """Install the query's view; (name, None) or (None, the outcome to report)."""
        self.create_many([(0, sql)])
        return self.views.pop(0, None), self.failed.pop(0, None)

    def create_many(self, queries: list[tuple[int, str]]) -> None:
        """Install many views at once (one initialization pass for all of them, where
        one CREATE VIEW each would walk the whole graph every time): fills ``views``
        and ``failed`` by record line."""
        todo: list[tuple[int, lp.CreateView]] = []
        for line, sql in queries:
            try:
                query = self.plan(sql)
            except Error as err:
                self.failed[line] = Outcome(UNSUPPORTED, _reason(err))
                continue
            except Exception as err:   # noqa: BLE001 - a bug: reported, counted as wrong
                self.failed[line] = Outcome(WRONG, f"bug while parsing: {_bug(err)}")
                continue
            bad = _tables_read(query.root) & self.tainted
            if bad:
                self.failed[line] = Outcome(
                    UNSUPPORTED, "reads a table an unsupported write left incomplete "
                                 f"({', '.join(sorted(bad))})")
                continue
            self.n += 1
            todo.append((line, lp.CreateView(f"_lt{self.n}", query, sql)))
        made = self.db.create_views([stmt for _, stmt in todo], keep_going=True)
        for (line, stmt), view in zip(todo, made):
            if isinstance(view, Error):
                self.failed[line] = Outcome(UNSUPPORTED, _reason(view))
            elif isinstance(view, Exception):
                self.failed[line] = Outcome(WRONG, f"bug while planning: {_bug(view)}")
            else:
                self.views[line] = stmt.name
                self.queries[stmt.name] = stmt.query

    def read(self, name: str) -> tuple[list[tuple], bool]:
        self.db.wait()
        v = self.db.view(name)
        ordered = bool(self.queries[name].order)
        return v.all(), ordered

    def drop(self, name: str) -> None:
        self.queries.pop(name, None)
        try:
            self.db.execute(f"DROP VIEW {name}")
        except Exception:   # noqa: BLE001 - a view that is gone already
            pass

    def has(self, name: str) -> bool:
        """Whether a table or view of that (lower-case) name exists."""
        return name in {t.lower() for t in self.db.tables()} or name in self.db.views()


def _bug(err: BaseException) -> str:
    tb = traceback.extract_tb(err.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"{type(err).__name__}: {err}{where}"


def _statement_kind(sql: str) -> str:
    """"write" for INSERT/UPDATE/DELETE, "ddl" for everything else."""
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    return "write" if head in ("INSERT", "UPDATE", "DELETE", "REPLACE") else "ddl"


def _write_target(sql: str) -> str | None:
    m = re.match(r"\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|"
                 r"DELETE\s+FROM)\s+([A-Za-z_][\w]*)", sql, re.I)
    return m.group(1).lower() if m else None


def _run_statement(s: _Session, rec: Record, res: FileResult) -> bool:
    """Execute a statement record; False if it went otherwise than the record says."""
    try:
        s.db.execute(rec.sql)
        if not rec.ok:
            res.notes.append(f"line {rec.line}: statement should have failed: "
                             f"{rec.sql[:100]}")
            return False
        if s.doomed:
            s.drop_doomed()
        return True
    except Error as err:
        if not rec.ok:
            return True
        if isinstance(err, DependentViewsError):
            s.doomed.append(rec.sql)       # SQLite would drop it now (module docstring)
            return True
        if _statement_kind(rec.sql) == "write":
            t = _write_target(rec.sql)
            if t is not None:
                s.tainted.add(t)
        # a DDL statement we cannot run leaves its table absent; queries on it are then
        # rejected with a clear error (unknown table) and counted as unsupported
        res.reasons[f"statement: {_reason(err)}"] = res.reasons.get(
            f"statement: {_reason(err)}", 0) + 1
        return True
    except Exception as err:   # noqa: BLE001
        res.notes.append(f"line {rec.line}: bug in statement {rec.sql[:80]!r}: {_bug(err)}")
        t = _write_target(rec.sql)
        if t is not None:
            s.tainted.add(t)
        return False


def _check(s: _Session, name: str, rec: Record) -> Outcome:
    bad = _tables_read(s.queries[name].root) & s.tainted
    if bad:
        # a write the engine rejected (after the view was made) left these incomplete
        return Outcome(UNSUPPORTED, "reads a table an unsupported write left incomplete "
                                    f"({', '.join(sorted(bad))})")
    try:
        rows, ordered = s.read(name)
    except Error as err:
        return Outcome(UNSUPPORTED, _reason(err))
    except Exception as err:   # noqa: BLE001
        return Outcome(WRONG, f"bug while reading: {_bug(err)}")
    ok, got = matches(rows, rec, ordered)
    if ok:
        return Outcome(PASS)
    return Outcome(WRONG, f"got {got}; expected "
                          f"{' '.join(rec.expected[:40])}")


# ---------------------------------------------------------------- modes

def _active(records: list[Record]) -> list[Record]:
    out = []
    for r in records:
        if r.kind == "halt" and not r.skip:
            break
        if r.skip or r.kind in ("hash-threshold", "unknown"):
            continue
        out.append(r)
    return out


def run_initial(records: list[Record], res: FileResult) -> dict[int, Outcome]:
    """Views created after the data: each query's view is built over the current state."""
    s = _Session()
    out: dict[int, Outcome] = {}
    for rec in records:
        if rec.kind == "statement":
            if not _run_statement(s, rec, res):
                res.wrong += 0      # statement mismatches are noted, counted by the caller
        elif rec.kind == "query":
            name, failed = s.create(rec.sql)
            if failed is not None:
                out[rec.line] = failed
                continue
            assert name is not None         # create gives a name or an outcome
            out[rec.line] = _check(s, name, rec)
            s.drop(name)
    return out


def run_incremental(records: list[Record], res: FileResult) -> dict[int, Outcome]:
    """Views created before the data, epoch by epoch (see the module docstring).

    A *state* database runs every statement of the file and never holds a query view;
    each epoch with queries gets a fresh database of its own (schema, views, rows)."""
    out: dict[int, Outcome] = {}
    st = _Session()
    schema: list[tuple[str, str]] = []     # (object name, CREATE statement) still alive
    epochs: list[list[Record]] = [[]]
    for rec in records:
        if rec.kind == "statement" and _statement_kind(rec.sql) == "ddl":
            epochs.append([rec])
        else:
            epochs[-1].append(rec)
    for epoch in epochs:
        body = epoch
        if epoch and epoch[0].kind == "statement" and _statement_kind(epoch[0].sql) == "ddl":
            ddl = epoch[0]
            _run_statement(st, ddl, res)
            _track_schema(schema, ddl.sql, st)
            body = epoch[1:]
        queries = [r for r in body if r.kind == "query"]
        ep = _rebuilt(st, schema, queries, res) if queries else None
        for rec in body:
            if rec.kind == "statement":
                _run_statement(st, rec, res)
                if ep is not None:
                    _run_statement(ep, rec, FileResult(""))
                    ep.tainted |= st.tainted
            else:
                assert ep is not None       # a query in body: ep was built for it
                name = ep.views.get(rec.line)
                if name is None:
                    out[rec.line] = ep.failed[rec.line]
                else:
                    out[rec.line] = _check(ep, name, rec)
    return out


def _track_schema(schema: list[tuple[str, str]], sql: str, s: _Session) -> None:
    """Keep the list of live CREATE TABLE/VIEW statements (in order) up to date."""
    m = re.match(r"\s*CREATE\s+(?:TEMP\w*\s+)?(TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                 r"([A-Za-z_][\w]*)", sql, re.I)
    if m:
        name = m.group(2).lower()
        live = s.has(name)
        if live and not any(n == name for n, _ in schema):
            schema.append((name, sql))
        return
    if re.match(r"\s*DROP\s+(TABLE|VIEW)\s", sql, re.I):
        # this DROP, and any refused earlier that it let through (``drop_doomed``)
        schema[:] = [(n, q) for n, q in schema if s.has(n)]


def _rebuilt(state: _Session, schema: list[tuple[str, str]], queries: list[Record],
             res: FileResult) -> _Session:
    """A fresh database with ``state``'s schema, the queries' views, then its rows."""
    s = _Session()
    s.tainted = set(state.tainted)
    for _, sql in schema:
        try:
            s.db.execute(sql)
        except Exception as err:   # noqa: BLE001 - it ran before; should not happen
            res.notes.append(f"replaying {sql[:60]!r}: {_bug(err)}")
    s.create_many([(rec.line, rec.sql) for rec in queries])
    for tname in state.db.tables():
        rows = state.db.table(tname).rows()
        if rows and s.has(tname.lower()):
            s.db.table(tname).insert(rows)
    return s


# ---------------------------------------------------------------- files

def run_file(path: str, mode: str = "both") -> tuple[FileResult, dict[int, str]]:
    """Counts for one file, and the query lines of wrong answers with their details."""
    res = FileResult(path)
    t0 = time.perf_counter()
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    records = _active(parse_file(text))
    results: list[dict[int, Outcome]] = []
    if mode in ("both", "initial"):
        results.append(run_initial(records, res))
    if mode in ("both", "incremental"):
        results.append(run_incremental(records, res))
    wrong: dict[int, str] = {}
    for rec in records:
        if rec.kind != "query":
            continue
        outs = [r.get(rec.line, Outcome(WRONG, "not run")) for r in results]
        statuses = {o.status for o in outs}
        if WRONG in statuses:
            res.wrong += 1
            details = [o.detail for o in outs if o.status == WRONG]
            which = [m for m, o in zip(_modes(mode), outs) if o.status == WRONG]
            wrong[rec.line] = f"[{'/'.join(which)}] {details[0]}"
        elif UNSUPPORTED in statuses:
            if PASS in statuses:
                # one mode answered, the other rejected: rejections come from the front
                # end and must not depend on the mode; count it as a failure
                res.wrong += 1
                wrong[rec.line] = "rejected in one mode only: " + "; ".join(
                    o.detail for o in outs)
            else:
                res.unsupported += 1
                why = next(o.detail for o in outs if o.status == UNSUPPORTED)
                res.reasons[why] = res.reasons.get(why, 0) + 1
        else:
            res.passed += 1
    # statements that went otherwise than the file says make the run untrustworthy
    res.wrong += len([n for n in res.notes if "statement should have failed" in n
                      or "bug in statement" in n])
    res.seconds = time.perf_counter() - t0
    return res, wrong


def _modes(mode: str) -> list[str]:
    return ["initial", "incremental"] if mode == "both" else [mode]


def _sql_of(records: list[Record], line: int) -> str:
    for r in records:
        if r.line == line:
            return r.sql
    return ""


def main(files: Iterable[str], mode: str = "both", verbose: bool = False,
         out=None) -> int:
    """Run the files; print one line per file and a total. Exit code 0 when nothing is
    wrong, 1 otherwise (2 if a file cannot be read)."""
    out = out or sys.stdout
    total = FileResult("total")
    status = 0
    reasons: dict[str, int] = {}
    for path in files:
        try:
            res, wrong = run_file(path, mode)
        except OSError as err:
            print(f"{path}: cannot read: {err}", file=out)
            status = 2
            continue
        if verbose:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
            records = parse_file(text)
            for line, detail in sorted(wrong.items()):
                sql = " ".join(_sql_of(records, line).split())
                print(f"  WRONG {path}:{line}: {sql[:200]}\n        {detail[:400]}", file=out)
            for note in res.notes:
                print(f"  NOTE {path}: {note}", file=out)
            print(f"  ({res.seconds:.1f}s)", file=out)
        for k, v in res.reasons.items():
            reasons[k] = reasons.get(k, 0) + v
        print(res.line(), file=out, flush=True)
        total.passed += res.passed
        total.wrong += res.wrong
        total.unsupported += res.unsupported
    if verbose and reasons:
        print("unsupported, by reason:", file=out)
        for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:40]:
            print(f"  {v:7d}  {k}", file=out)
    print(total.line(), file=out, flush=True)
    if total.wrong and status == 0:
        status = 1
    return status
