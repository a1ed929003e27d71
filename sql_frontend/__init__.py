"""SQL text to a logical plan, with no knowledge of the engine that runs it.

``parse`` turns one statement into a ``Statement`` (see ``plan.py``); names are
resolved against a ``Catalog`` and every user error is raised as a subclass of
``errors.Error`` with the position of the offending text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence, cast

from sqlglot import exp

from . import ddl, dml, select
from .catalog import Catalog, DictCatalog
from .errors import (
    AlreadyExistsError,
    ArityError,
    Error,
    ParseError,
    SqlError,
    TypeMismatchError,
    UnknownColumnError,
    UnknownTableError,
    UnsupportedError,
)
from .expr import OPS, Call, Col, Expr, Lit, columns_used
from .parameters import parameter_types, positional
from .parse import (
    MAX_DEPTH,
    offset_to_position,
    parse_statements,
    postgres_division,
    postgres_order,
    split_statements,
)
from .pgnames import postgres_column_name
from .plan import (
    AggCall,
    Aggregate,
    CreateTable,
    CreateView,
    Delete,
    Distinct,
    DropTable,
    DropView,
    Filter,
    Insert,
    InsertSelect,
    Join,
    NoOp,
    OrderKey,
    Project,
    Query,
    Rel,
    Scan,
    Select,
    SetOp,
    Statement,
    TopK,
    Union_,
    Update,
    Values,
    plan_depth,
)
from .resolve import Context, placeholders_in_order
from .typerules import TEMPORAL, declared_type, parse_temporal
from .types import INT_MAX, INT_MIN, PYTHON_TYPES, ColumnInfo, SqlType, TableSchema

__all__ = [
    "parameter_types", "positional", "postgres_division", "postgres_order", "postgres_column_name", "InsertTemplate", "insert_template",
    "parse", "split_statements", "MAX_DEPTH",
    "Catalog", "DictCatalog",
    "Error", "SqlError", "ParseError", "UnsupportedError", "UnknownTableError",
    "UnknownColumnError", "AlreadyExistsError", "TypeMismatchError", "ArityError",
    "OPS", "Call", "Col", "Expr", "Lit", "columns_used",
    "AggCall", "Aggregate", "CreateTable", "CreateView", "Delete", "Distinct", "DropTable",
    "DropView", "Filter", "Insert", "InsertSelect", "Join", "NoOp", "OrderKey", "Project",
    "Query", "Rel", "Scan", "Select", "SetOp", "Statement", "TopK", "Union_", "Update", "Values",
    "PYTHON_TYPES", "ColumnInfo", "SqlType", "TableSchema",
]


def _check_plan_depth(sql: str, query: Query) -> None:
    """Refuse a plan deeper than MAX_DEPTH relations, as ``parse_statements`` refuses a
    statement that deep: the engine's planner recurses over the plan."""
    depth = plan_depth(query.root)
    if depth > MAX_DEPTH:
        raise UnsupportedError(f"unsupported: the query's plan nests {depth} relations deep "
                               f"(views over views, subqueries), more than {MAX_DEPTH}", sql, None)


_SUBSCRIBE = re.compile(r"\s*(?:COPY\s*\(\s*)?SUBSCRIBE\b", re.I)


def parse(sql: str, catalog: Catalog, params: Sequence[Any] = (), *,
          lift_constants: bool = False, ranges: bool = True) -> Statement:
    """The plan of the one statement in ``sql``.

    ``params`` are the values of its ``?``: bound as constants in INSERT, DELETE and
    UPDATE; in a SELECT, those of its top-level ``col = ?`` conjuncts are the lookup-key
    values (kept in ``Select.params``) and the others are bound as constants. A view's
    ``?`` stay unbound, so CREATE VIEW takes no params. ``lift_constants``: a SELECT
    without ``?`` has its top-level ``col = constant`` conjuncts planned as lookup
    keys, the constants as its params (``select.lift_key_constants``), where that gives
    the same answer; so queries differing only there have one plan. ``ranges``: a
    SELECT's (or a view's) top-level ``col < ?`` and the like (and, lifted, ``col <
    constant``) may be range parameters (``Query.bounds``, ``select.rangeable``);
    False keeps them filters, and a view's ``?`` there unsupported (a cluster).
    """
    if isinstance(sql, str) and _SUBSCRIBE.match(sql):
        raise UnsupportedError("unsupported: SUBSCRIBE runs through a subscription, not as a "
                               "statement: db.subscribe('view') in Python, or COPY (SUBSCRIBE "
                               "view) TO STDOUT through noria-py pg", sql, (1, 1))
    trees = parse_statements(sql)
    if not trees:
        raise ParseError("no SQL statement given", sql, None)
    if len(trees) > 1:
        ctx = Context(sql, catalog)
        raise ParseError("more than one statement given (use split_statements for "
                         "scripts)", sql, ctx.pos(trees[1]))
    node = trees[0]
    ctx = Context(sql, catalog, ranges=ranges)
    params = tuple(params)

    if isinstance(node, (exp.Insert, exp.Delete, exp.Update)):
        marks = placeholders_in_order(node)
        if len(marks) != len(params):
            raise ArityError(f"the statement has {len(marks)} parameters (?) but "
                             f"{len(params)} values were given")
        ctx.bound = {id(p): v for p, v in zip(marks, params)}
        if isinstance(node, exp.Insert):
            inserted = dml.insert(ctx, node)
            if isinstance(inserted, InsertSelect):
                _check_plan_depth(sql, inserted.query)
            return inserted
        if isinstance(node, exp.Delete):
            return dml.delete(ctx, node)
        return dml.update(ctx, node)

    if isinstance(node, exp.Query):
        if lift_constants and not params:
            lifted = _lifted(ctx, node, sql)
            if lifted is None and ctx.ranges:   # (the keys alone, the ranges filters)
                lifted = _lifted(Context(sql, catalog, ranges=False), node, sql)
            if lifted is not None:
                return lifted
        marks = placeholders_in_order(node)
        if len(marks) != len(params):
            raise ArityError(f"the query has {len(marks)} parameters (?) but "
                             f"{len(params)} values were given")
        allow_key = select.keyable(node)
        keys = select.key_placeholders(node, catalog if ranges else None) if allow_key else set()
        ctx.bound = {id(p): v for p, v in zip(marks, params) if id(p) not in keys}
        query = select.build_query(ctx, node, allow_key=allow_key)
        _check_plan_depth(sql, query)
        key_values = tuple(v for p, v in zip(marks, params) if id(p) in keys)
        return Select(query, key_values, sql.strip().rstrip(";").strip(),
                      _otherwise(ctx, node, query))

    if params:
        raise ArityError(f"{node.key.upper()} takes no parameters, {len(params)} given")
    if isinstance(node, exp.Create):
        created = ddl.create(ctx, node)
        if isinstance(created, CreateView):
            _check_plan_depth(sql, created.query)
        return created
    if isinstance(node, exp.Drop):
        return ddl.drop(ctx, node)
    start = offset_to_position(sql, len(sql) - len(sql.lstrip()))
    what = str(node.this).upper() if isinstance(node, exp.Command) else node.key.upper()
    raise UnsupportedError(f"unsupported: statement {what}", sql, start)


def _lifted(ctx: Context, node: exp.Query, sql: str) -> Select | None:
    """``node`` planned with its key constants lifted, when the key columns take the
    constants' Python types as they are; None otherwise (or on any error: the plan
    with the constants in place then decides)."""
    found = select.lift_key_constants(node, ctx.catalog if ctx.ranges else None)
    if found is None:
        return None
    copy, values = found
    try:
        query = select.build_query(Context(sql, ctx.catalog, ranges=ctx.ranges), copy,
                                   allow_key=True)
        _check_plan_depth(sql, query)
    except Error:
        return None
    if query.arity != len(values):
        return None
    for pos, value in zip(query.param_columns(), values):
        if type(value) not in PYTHON_TYPES.get(query.root.columns[pos].type, ()):
            return None
        if type(value) is int and not INT_MIN <= value <= INT_MAX:
            return None             # (a literal INT cannot hold: the plan with it says so)
    return Select(query, values, sql.strip().rstrip(";").strip(),
                  _otherwise(Context(sql, ctx.catalog, ranges=ctx.ranges), copy, query))


def _otherwise(ctx: Context, node: exp.Query, query: Query) -> Query | None:
    """``Select.otherwise`` of a keyed query (``node`` is changed: build it first)."""
    if not query.key or not select.needs_empty_answer(node):
        return None
    select.falsify_keys(node)
    return select.build_query(ctx, node, allow_key=False)


@dataclass(frozen=True)
class InsertTemplate:
    """An ``INSERT ... VALUES`` whose every value is a ``?`` (``insert_template``): it is
    bound without parsing again, as a prepared INSERT runs many times."""
    table: str
    columns: tuple[SqlType, ...]        # the table's column types, in table order
    rows: int
    slots: tuple[tuple[int, int], ...]  # (row, column) of each ? in order

    def bind(self, params: Sequence[Any]) -> list[tuple]:
        """The rows, with ``params`` in their places (None in the other columns); a str
        for a DATE, TIMESTAMP or TIMESTAMPTZ column is read as its ISO text, as the parse
        does."""
        if len(params) != len(self.slots):
            raise ArityError(f"the statement has {len(self.slots)} parameters (?) but "
                             f"{len(params)} values were given")
        out = [[None] * len(self.columns) for _ in range(self.rows)]
        for (r, c), v in zip(self.slots, params):
            t = self.columns[c]
            if type(v) is str and t in TEMPORAL:
                parsed = parse_temporal(v, t)
                if parsed is None:
                    raise TypeMismatchError(f"{v!r} is not a {t.value} (table {self.table}, "
                                            f"column {c + 1})")
                v = parsed
            out[r][c] = v
        return [tuple(row) for row in out]


def _bare_slot(c: exp.Expression) -> bool:
    """``?`` (or ``$n``), or one cast to a type (``$1::BIGINT``, as SQLAlchemy writes
    its inserts), which ``insert_template`` takes only to its column's own type."""
    if isinstance(c, exp.Cast):
        c = c.this
    return isinstance(c, exp.Placeholder) and not c.this


def insert_template(sql: str, catalog: Catalog) -> InsertTemplate | None:
    """The template of an INSERT whose values are all ``?`` (or ``?`` cast to the
    column's own type, a no-op); None for any other statement. Raises what ``parse``
    raises for a bad one."""
    trees = parse_statements(sql)
    if len(trees) != 1 or not isinstance(trees[0], exp.Insert):
        return None
    node = trees[0]
    values = node.args.get("expression")
    if not isinstance(values, exp.Values):
        return None
    tuples = [t.expressions if isinstance(t, exp.Tuple) else [t] for t in values.expressions]
    if not all(_bare_slot(c) for t in tuples for c in t):
        return None
    plan = parse(sql, catalog, (None,) * sum(len(t) for t in tuples))
    if not isinstance(plan, Insert):
        return None
    schema = catalog.table(plan.table)
    assert schema is not None
    target = node.this
    if isinstance(target, exp.Schema):
        positions = [schema.index_of(i.name) for i in target.expressions]
    else:
        positions = list(range(len(schema.columns)))
    for t in tuples:        # a cast is a slot only when it casts to its column's type
        for j, c in enumerate(t):
            if isinstance(c, exp.Cast) and (
                    declared_type(c.to) is not schema.columns[cast(int, positions[j])].type):
                return None
    slots = tuple((r, cast(int, positions[j])) for r, t in enumerate(tuples)
                  for j in range(len(t)))
    return InsertTemplate(schema.name, tuple(c.type for c in schema.columns), len(tuples),
                          slots)
