"""SQL text to a logical plan, with no knowledge of the engine that runs it.

``parse`` turns one statement into a ``Statement`` (see ``plan.py``); names are
resolved against a ``Catalog`` and every user error is raised as a subclass of
``errors.Error`` with the position of the offending text.
"""
from __future__ import annotations

from typing import Any, Sequence

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
from .parse import MAX_DEPTH, offset_to_position, parse_statements, split_statements
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
from .types import PYTHON_TYPES, ColumnInfo, SqlType, TableSchema

__all__ = [
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


def parse(sql: str, catalog: Catalog, params: Sequence[Any] = ()) -> Statement:
    """The plan of the one statement in ``sql``.

    ``params`` are the values of its ``?``: bound as constants in INSERT, DELETE and
    UPDATE; the lookup-key values of a SELECT (kept in ``Select.params``). A view's
    ``?`` stay unbound, so CREATE VIEW takes no params.
    """
    trees = parse_statements(sql)
    if not trees:
        raise ParseError("no SQL statement given", sql, None)
    if len(trees) > 1:
        ctx = Context(sql, catalog)
        raise ParseError("more than one statement given (use split_statements for "
                         "scripts)", sql, ctx.pos(trees[1]))
    node = trees[0]
    ctx = Context(sql, catalog)
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
        query = select.build_query(ctx, node, allow_key=True)
        _check_plan_depth(sql, query)
        if len(query.key) != len(params):
            raise ArityError(f"the query has {len(query.key)} parameters (?) but "
                             f"{len(params)} values were given")
        return Select(query, params, sql.strip().rstrip(";").strip())

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
