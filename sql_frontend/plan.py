"""The logical plan: what a query computes, with no word about how it runs.

Every relation knows its output ``columns``. Expressions inside a relation refer to
the columns of its input(s) by position (see ``expr.py``). The engine's planner turns
these trees into dataflow graphs; nothing here knows about the engine.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Union

from .expr import Call, Col, Expr
from .types import ColumnInfo, SqlType, TableSchema

# ---------------------------------------------------------------- relations

@dataclass(frozen=True)
class Scan:
    """All rows of a base table."""
    table: str
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class Filter:
    """Rows of ``input`` for which ``predicate`` is TRUE (not FALSE, not NULL).

    ``keep``: where the predicate is the engine's division-by-zero marker, the row is
    kept as a row of markers but for these columns, kept as they are (the key of the
    read above: noria_py/planner/poison.py)."""
    input: "Rel"
    predicate: Expr
    keep: tuple[int, ...] = ()

    @property
    def columns(self) -> tuple[ColumnInfo, ...]:
        return self.input.columns


@dataclass(frozen=True)
class Project:
    """One output column per expression, evaluated over ``input``'s columns."""
    input: "Rel"
    exprs: tuple[Expr, ...]
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class Join:
    """Equi-join. Output = left columns followed by right columns.

    ``kind`` is "inner" or "left". Rows match when every left key equals its right key
    (SQL equality: a NULL key matches nothing). Empty key tuples make a cross join.
    For a left join, a left row with no match is padded with NULLs on the right.

    ``keep``: output columns that a row of markers passed on (a side's row whose join
    key is the engine's division-by-zero marker) keeps as they are, the rest the
    marker (the key of the read above: noria_py/planner/poison.py).
    """
    left: "Rel"
    right: "Rel"
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    columns: tuple[ColumnInfo, ...]
    keep: tuple[int, ...] = ()


@dataclass(frozen=True)
class AggCall:
    """func is one of: count_star, count, sum, avg, pgavg (the PostgreSQL front end's
    AVG: exact over integers), min, max.

    ``arg`` is a column position in the Aggregate's input (None for count_star).
    COUNT skips NULLs; SUM/AVG/MIN/MAX of no non-NULL values are NULL; COUNT of none is 0.
    ``distinct`` is only allowed for count, sum and avg.
    """
    func: str
    arg: int | None
    distinct: bool
    type: SqlType


@dataclass(frozen=True)
class Aggregate:
    """GROUP BY. Output = the group columns (in ``group_by`` order), then one per agg.

    With ``group_by == ()`` there is exactly one output row at all times (a global
    aggregate over an empty input gives COUNT 0 and NULL for the others).
    """
    input: "Rel"
    group_by: tuple[int, ...]
    aggs: tuple[AggCall, ...]
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class Distinct:
    input: "Rel"

    @property
    def columns(self) -> tuple[ColumnInfo, ...]:
        return self.input.columns


@dataclass(frozen=True)
class Union_:
    """UNION ALL of inputs with the same number of columns (use Distinct over it for UNION)."""
    inputs: tuple["Rel", ...]
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class OrderKey:
    column: int                 # position in the input
    descending: bool = False
    nulls_first: bool = True    # SQLite's default: NULLs sort first ascending, last descending


@dataclass(frozen=True)
class TopK:
    """The first ``limit`` rows (after skipping ``offset``) by ``order``, within each group
    of equal ``partition`` columns (the view's lookup key; () for a global top-k).
    ``limit`` None means no limit (only an offset)."""
    input: "Rel"
    order: tuple[OrderKey, ...]
    limit: int | None
    offset: int
    partition: tuple[int, ...]

    @property
    def columns(self) -> tuple[ColumnInfo, ...]:
        return self.input.columns


@dataclass(frozen=True)
class Values:
    """A constant relation: ``rows`` (tuples of Python values), e.g. the single empty
    row that a SELECT without FROM reads from."""
    rows: tuple[tuple, ...]
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class SetOp:
    """EXCEPT or INTERSECT (set semantics: the output has no duplicates, NULLs are
    equal). ``kind`` is "except" (rows of left absent from right) or "intersect"
    (rows present in both). Inputs have the same number of columns."""
    left: "Rel"
    right: "Rel"
    kind: str
    columns: tuple[ColumnInfo, ...]


Rel = Union[Scan, Filter, Project, Join, Aggregate, Distinct, Union_, TopK, Values, SetOp]


# ---------------------------------------------------------------- queries

#: the comparisons a range parameter may make (``Bound.op``)
RANGE_OPS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Bound:
    """A range parameter: a read keeps the rows whose ``column`` (a position in
    ``root.columns``) compares ``op`` (one of ``RANGE_OPS``) to the read's parameter at
    ``slot`` (0-based, among all of the query's parameters in the order of their ``?``;
    the slots no bound takes are the equality key's, in ``key`` order)."""
    column: int
    op: str
    slot: int


@dataclass(frozen=True)
class Query:
    """A SELECT as a view: a relation plus how it is read.

    - ``root.columns`` = the visible columns, then ``hidden`` extra columns at the end
      (lookup-key columns the SELECT list did not name).
    - ``key``: positions in ``root.columns`` that ``?`` parameters bind, in the order the
      ``?`` appear. () means the view is read whole.
    - ``order``: how a read sorts the rows it returns (ORDER BY); () = unspecified.
      Any LIMIT/OFFSET is already in the root as a TopK partitioned by ``key``.
    - ``bounds``: range parameters (``col > ?``, ``BETWEEN ? AND ?``), all on one
      column; the root does not filter on them, the reader's sorted index answers
      them (noria_py/ops/reader.py). Only in a query with no aggregate, DISTINCT or
      LIMIT (sql_frontend/select.py, ``rangeable``).
    """
    root: Rel
    names: tuple[str, ...]          # visible column names
    key: tuple[int, ...] = ()
    hidden: int = 0
    order: tuple[OrderKey, ...] = ()
    bounds: tuple[Bound, ...] = ()

    @property
    def arity(self) -> int:
        """How many values a read takes: the key's and the bounds'."""
        return len(self.key) + len(self.bounds)

    def param_columns(self) -> tuple[int, ...]:
        """The column (a position in ``root.columns``) each of a read's values is
        compared with, in the order of the ``?``."""
        by_slot = {b.slot: b.column for b in self.bounds}
        keys = iter(self.key)
        return tuple(by_slot[i] if i in by_slot else next(keys) for i in range(self.arity))

    @property
    def visible(self) -> int:
        return len(self.names)


def divides(rel: object) -> bool:
    """Whether a plan (a relation or an expression) divides as PostgreSQL does anywhere
    (``pgdiv``/``pgmod``: the ``pg`` front end's ``/`` and ``%``), found without
    recursion: views over views nest deep. The planner's division-by-zero rules
    (noria_py/planner/poison.py) and the front end's range parameters (select.py)
    both ask it."""
    todo: list[object] = [rel]
    seen: set[int] = set()
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Call):
            if x.op in ("pgdiv", "pgmod"):
                return True
            todo.extend(x.args)
        elif isinstance(x, tuple):
            todo.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (Col, type)):
            todo.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return False


def plan_depth(rel: Rel) -> int:
    """How many relations deep ``rel`` nests (found without recursion: views over views
    can nest a plan deeper than any one statement's text)."""
    deepest = 0
    stack = [(rel, 1)]
    while stack:
        r, depth = stack.pop()
        deepest = max(deepest, depth)
        children = [getattr(r, f) for f in ("input", "left", "right") if hasattr(r, f)]
        children += getattr(r, "inputs", ())
        stack.extend((c, depth + 1) for c in children)
    return deepest


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class CreateTable:
    schema: TableSchema
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateView:
    name: str
    query: Query
    sql: str                        # the original statement text (persisted in the catalog)
    reads: tuple[str, ...] = ()     # the views it reads, by name (sorted, lower case): the
                                    # plan has their plans inlined, which no longer says so


@dataclass(frozen=True)
class Insert:
    """Rows to add. Each row has one constant expression per table column (in table
    order; columns the INSERT did not name are Lit(None)). Parameters are bound."""
    table: str
    rows: tuple[tuple[Expr, ...], ...]


@dataclass(frozen=True)
class Delete:
    """Delete the rows of ``table`` where ``where`` is TRUE (all rows if None).
    Expressions refer to the table's columns; parameters are bound."""
    table: str
    where: Expr | None


@dataclass(frozen=True)
class Update:
    table: str
    assignments: tuple[tuple[int, Expr], ...]   # (column position, new value expr over old row)
    where: Expr | None


@dataclass(frozen=True)
class InsertSelect:
    """INSERT INTO table [(cols)] SELECT ...: the query's rows, as they are when the
    statement runs. ``positions[i]`` is the table column that query column i fills;
    the other columns are NULL."""
    table: str
    query: Query
    positions: tuple[int, ...]


@dataclass(frozen=True)
class NoOp:
    """A statement that changes nothing the engine keeps (CREATE/DROP INDEX: indexes
    are a matter of physical design, and every view is materialized anyway)."""
    what: str


@dataclass(frozen=True)
class DropTable:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class DropView:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class Select:
    """A query to answer now. ``params`` are the values for its ``?`` (the lookup key).
    ``otherwise``: the answer when the lookup finds no row, for a keyed aggregate
    without GROUP BY (SQL answers one row even over no rows, which a keyed view does not
    hold): the same query with its key conjuncts FALSE."""
    query: Query
    params: tuple = ()
    sql: str = ""
    otherwise: Query | None = None


Statement = Union[CreateTable, CreateView, Insert, InsertSelect, Delete, Update, DropTable,
                  DropView, Select, NoOp]
