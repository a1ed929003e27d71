"""INSERT, DELETE and UPDATE.

Their ``?`` are plain values, bound here in textual order, so the engine receives
constant expressions and never sees a parameter. Values are checked against the
column types only where a front-end check gives a better message (with a position);
the engine still validates every row it stores.
"""
from __future__ import annotations

from sqlglot import exp

from .errors import ArityError, SqlError, UnknownColumnError, UnknownTableError
from .expr import Expr, Lit
from .plan import Delete, Insert, InsertSelect, Update
from .resolve import Context, Field, Scope, check_clauses
from .scalar import Translator, mismatch
from .select import build_query
from .typerules import TEMPORAL, comparable, family, not_temporal, parse_temporal
from .types import SqlType, TableSchema


def _base_table(ctx: Context, node: exp.Expr, verb: str) -> tuple[TableSchema, exp.Table]:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise ctx.unsupported(f"{verb} target {node.sql()}", node)
    if node.args.get("db") or node.args.get("catalog"):
        raise ctx.unsupported(f"schema-qualified table {node.sql()}", node)
    schema = ctx.catalog.table(node.name)
    if schema is None:
        if ctx.catalog.view(node.name) is not None:
            raise ctx.unsupported(f"{verb} on view {node.name} (views are read-only)", node)
        raise ctx.error(UnknownTableError, f"no such table: {node.name}", node)
    return schema, node


def _scope(schema: TableSchema, table: exp.Table) -> Scope:
    qual = (table.alias or schema.name).lower()
    return Scope([Field(qual, c.name, c.type, c.nullable) for c in schema.columns])


def _fit(ctx: Context, e: Expr, target: SqlType, column: str, node: exp.Expr) -> Expr:
    """``e`` as a value for a column of type ``target``: text literals for date/time
    columns are parsed; values of another family are rejected."""
    if isinstance(e, Lit) and e.type == SqlType.TEXT and target in TEMPORAL:
        v = parse_temporal(e.value, target)
        if v is None:
            raise mismatch(ctx, f"{not_temporal(e.value, target)} (column {column})", node)
        return Lit(v, target)
    if not comparable(e.type, target):
        hint = ("; a TIMESTAMPTZ is an instant (a datetime with a time zone), a TIMESTAMP "
                "has no zone, and there is no session time zone: CAST to convert (a CAST "
                "reads a TIMESTAMP as UTC)"
                if {family(e.type), family(target)} == {"time", "instant"} else "")
        raise mismatch(ctx, f"column {column} is {target.value}, got {e.type.value}: "
                            f"{node.sql()}{hint}", node)
    return e


def insert(ctx: Context, node: exp.Insert) -> Insert | InsertSelect:
    check_clauses(ctx, node, {"this", "expression", "is_function", "stored", "by_name",
                               "exists", "partition", "settings", "default", "overwrite",
                               "ignore", "source"})
    for flag in ("overwrite", "ignore", "default", "by_name", "exists"):
        if node.args.get(flag):
            raise ctx.unsupported(f"INSERT ... {flag.upper()}", node)
    target = node.this
    names = None
    if isinstance(target, exp.Schema):
        names = list(target.expressions)
        target = target.this
    schema, table = _base_table(ctx, target, "INSERT")
    if names is None:
        positions = list(range(len(schema.columns)))
    else:
        positions = []
        for ident in names:
            i = schema.index_of(ident.name)
            if i is None:
                raise ctx.error(UnknownColumnError, f"table {schema.name} has no column "
                                                    f"named {ident.name}", ident)
            if i in positions:
                raise ctx.error(SqlError, f"column {ident.name} is named twice", ident)
            positions.append(i)
    values = node.args.get("expression")
    if isinstance(values, exp.Query):
        return _insert_select(ctx, schema, positions, values)
    if not isinstance(values, exp.Values):
        raise ctx.unsupported("INSERT without VALUES", values if values is not None else node)
    tr = Translator(ctx, Scope([]), clause="VALUES")
    rows = []
    for tup in values.expressions:
        cells = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
        if len(cells) != len(positions):
            pos = ctx.pos(tup)
            where = f" (at line {pos[0]}, column {pos[1]})" if pos else ""
            raise ArityError(f"INSERT INTO {schema.name}: a row has {len(cells)} values "
                             f"for {len(positions)} columns{where}")
        row: list[Expr] = [Lit(None, SqlType.NULL)] * len(schema.columns)
        for i, cell in zip(positions, cells):
            col = schema.columns[i]
            row[i] = _fit(ctx, tr(cell), col.type, col.name, cell)
        rows.append(tuple(row))
    return Insert(schema.name, tuple(rows))


def _insert_select(ctx: Context, schema: TableSchema, positions: list[int],
                   query_node: exp.Query) -> InsertSelect:
    query = build_query(ctx, query_node, allow_key=False)
    if query.visible != len(positions):
        raise ArityError(f"INSERT INTO {schema.name}: the SELECT gives {query.visible} "
                         f"columns for {len(positions)}")
    for i, p in enumerate(positions):
        col = schema.columns[p]
        t = query.root.columns[i].type
        if not comparable(t, col.type) or (col.type == SqlType.INT and t == SqlType.FLOAT):
            raise mismatch(ctx, f"column {col.name} is {col.type.value}, the SELECT gives "
                                f"{t.value}", query_node)
    return InsertSelect(schema.name, query, tuple(positions))


def delete(ctx: Context, node: exp.Delete) -> Delete:
    check_clauses(ctx, node, {"this", "where", "using", "cluster"})
    if node.args.get("using"):
        raise ctx.unsupported("DELETE ... USING", node)
    schema, table = _base_table(ctx, node.this, "DELETE")
    where = node.args.get("where")
    pred = None
    if where is not None:
        pred = Translator(ctx, _scope(schema, table), clause="WHERE").condition(where.this)
    return Delete(schema.name, pred)


def update(ctx: Context, node: exp.Update) -> Update:
    check_clauses(ctx, node, {"this", "expressions", "where"})
    schema, table = _base_table(ctx, node.this, "UPDATE")
    scope = _scope(schema, table)
    tr = Translator(ctx, scope, clause="UPDATE")
    assignments = []
    seen = set()
    for a in node.expressions:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
            raise ctx.unsupported(f"SET {a.sql()}", a)
        i = scope.resolve(ctx, a.this)
        if i in seen:
            raise ctx.error(SqlError, f"column {a.this.name} is set twice", a.this)
        seen.add(i)
        col = schema.columns[i]
        assignments.append((i, _fit(ctx, tr(a.expression), col.type, col.name,
                                    a.expression)))
    where = node.args.get("where")
    pred = tr.condition(where.this) if where is not None else None
    return Update(schema.name, tuple(assignments), pred)
