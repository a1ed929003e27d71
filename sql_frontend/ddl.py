"""CREATE TABLE, CREATE VIEW, DROP TABLE and DROP VIEW.

Constraints the engine does not enforce are rejected rather than ignored, so a
schema never silently promises more than it keeps; the few that change nothing
(an explicit NULL, a foreign key, which SQLite does not enforce by default either)
are accepted.
"""
from __future__ import annotations

import re

from sqlglot import exp

from .errors import AlreadyExistsError, SqlError, UnknownColumnError, UnknownTableError
from .plan import CreateTable, CreateView, DropTable, DropView, NoOp
from .resolve import Context
from .select import build_query
from .typerules import declared_type
from .types import ColumnInfo, TableSchema

_HARMLESS = (exp.NotNullColumnConstraint, exp.PrimaryKeyColumnConstraint, exp.Reference,
             exp.CommentColumnConstraint)
_CONSTRAINT_NAMES = {
    exp.UniqueColumnConstraint: "UNIQUE", exp.DefaultColumnConstraint: "DEFAULT",
    exp.CheckColumnConstraint: "CHECK", exp.CollateColumnConstraint: "COLLATE",
    exp.AutoIncrementColumnConstraint: "AUTOINCREMENT",
    exp.GeneratedAsIdentityColumnConstraint: "GENERATED ... AS IDENTITY",
    exp.ComputedColumnConstraint: "generated column",
}


def _name_taken(ctx: Context, name: str) -> str | None:
    if ctx.catalog.table(name) is not None:
        return "table"
    if ctx.catalog.view(name) is not None:
        return "view"
    return None


def _check_modifiers(ctx: Context, node: exp.Create) -> None:
    if node.args.get("replace"):
        raise ctx.unsupported("CREATE OR REPLACE", node)
    props = node.args.get("properties")
    extra = [p for p in (props.expressions if props is not None else [])
             # CREATE MATERIALIZED VIEW: every view here is materialized (Materialize's
             # and ReadySet's users write it)
             if not (isinstance(p, exp.MaterializedProperty)
                     and (node.args.get("kind") or "").upper() == "VIEW")]
    if extra:
        raise ctx.unsupported(f"table property {extra[0].sql()}", extra[0])
    if node.args.get("unique"):
        raise ctx.unsupported("CREATE UNIQUE", node)


def create(ctx: Context, node: exp.Create) -> CreateTable | CreateView | NoOp:
    kind = (node.args.get("kind") or "").upper()
    if kind == "TABLE":
        return _create_table(ctx, node)
    if kind == "VIEW":
        return _create_view(ctx, node)
    if kind == "INDEX":
        return _create_index(ctx, node)
    raise ctx.unsupported(f"CREATE {kind}", node)


def _create_index(ctx: Context, node: exp.Create) -> NoOp:
    """CREATE INDEX changes nothing here (every view is materialized and indexed by its
    key already), so it is accepted once its table and columns check out. A UNIQUE
    index would be a constraint the engine does not enforce: rejected."""
    if node.args.get("unique"):
        raise ctx.unsupported("CREATE UNIQUE INDEX (uniqueness is not enforced)", node)
    index = node.this
    table = index.args.get("table") if isinstance(index, exp.Index) else None
    if not isinstance(table, exp.Table):
        raise ctx.unsupported("CREATE INDEX without ON table", node)
    schema = ctx.catalog.table(table.name)
    if schema is None:
        raise ctx.error(UnknownTableError, f"no such table: {table.name}", table)
    params = index.args.get("params")
    for col in (params.args.get("columns") or []) if params is not None else []:
        target = col.this if isinstance(col, exp.Ordered) else col
        if not isinstance(target, exp.Column):
            raise ctx.unsupported(f"index on expression {target.sql()}", target)
        if schema.index_of(target.name) is None:
            raise ctx.error(SqlError, f"table {schema.name} has no column named "
                                      f"{target.name}", target)
    return NoOp("CREATE INDEX")


def _create_table(ctx: Context, node: exp.Create) -> CreateTable:
    _check_modifiers(ctx, node)
    if node.args.get("expression") is not None:
        raise ctx.unsupported("CREATE TABLE ... AS SELECT", node.args["expression"])
    schema_node = node.this
    if not isinstance(schema_node, exp.Schema) or not isinstance(schema_node.this, exp.Table):
        raise ctx.unsupported("CREATE TABLE without a column list", node)
    table = schema_node.this
    if table.args.get("db") or table.args.get("catalog"):
        raise ctx.unsupported(f"schema-qualified table {table.sql()}", table)
    name = table.name.lower()
    if_not_exists = bool(node.args.get("exists"))
    taken = _name_taken(ctx, name)
    if taken and not if_not_exists:
        raise ctx.error(AlreadyExistsError, f"{taken} {table.name} already exists", table)

    columns: list[ColumnInfo] = []
    pk: list[int] = []
    seen: dict[str, int] = {}
    pk_nodes: list[exp.Expr] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            cname = item.name
            if cname.lower() in seen:
                raise ctx.error(AlreadyExistsError, f"duplicate column name: {cname}", item)
            kind = item.args.get("kind")
            if kind is None:
                raise ctx.unsupported(f"column {cname} without a type", item)
            t = declared_type(kind)
            if t is None:
                raise ctx.unsupported(f"column type {_type_text(ctx, item)}", item)
            not_null = False
            for c in item.args.get("constraints") or []:
                k = c.args.get("kind")
                if isinstance(k, exp.PrimaryKeyColumnConstraint):
                    pk.append(len(columns))
                    pk_nodes.append(c)
                    not_null = True
                elif isinstance(k, exp.NotNullColumnConstraint):
                    if k.args.get("allow_null"):       # explicit NULL: the default anyway
                        continue
                    not_null = True
                elif not isinstance(k, _HARMLESS):
                    what = _CONSTRAINT_NAMES.get(type(k), k.sql() if k is not None else c.sql())
                    raise ctx.unsupported(f"column constraint {what}", c)
            seen[cname.lower()] = len(columns)
            columns.append(ColumnInfo(cname, t, not not_null))
        elif isinstance(item, exp.PrimaryKey):
            pk_nodes.append(item)
            for ident in item.expressions:
                ident_name = ident.name if not isinstance(ident, exp.Ordered) else ident.this.name
                i = seen.get(ident_name.lower())
                if i is None:
                    raise ctx.error(UnknownColumnError, f"PRIMARY KEY names unknown column "
                                              f"{ident_name}", ident)
                pk.append(i)
        elif isinstance(item, (exp.ForeignKey, exp.Constraint)) and _is_foreign_key(item):
            continue
        else:
            raise ctx.unsupported(f"table constraint {item.sql()}", item)
    if not columns:        # (PostgreSQL takes a table of no columns; rows of none mean nothing here)
        raise ctx.unsupported(f"table {table.name} without columns", schema_node)
    if len(pk_nodes) > 1:
        raise ctx.error(SqlError, f"table {table.name} has more than one primary key",
                        pk_nodes[1])
    if len(set(pk)) != len(pk):
        raise ctx.error(SqlError, "PRIMARY KEY names a column twice", pk_nodes[0])
    for i in pk:
        c = columns[i]
        columns[i] = ColumnInfo(c.name, c.type, False)
    return CreateTable(TableSchema(name, tuple(columns), tuple(pk)), if_not_exists)


def _type_text(ctx: Context, coldef: exp.ColumnDef) -> str:
    """The type as the user wrote it (sqlglot normalizes, e.g. BLOB to VARBINARY)."""
    end = coldef.this.meta.get("end") if isinstance(coldef.this, exp.Identifier) else None
    if end is not None:
        m = re.match(r"\s*([A-Za-z_][\w]*(\s*\([^)]*\))?)", ctx.sql[end + 1:])
        if m:
            return m.group(1)
    return coldef.args["kind"].sql()


def _is_foreign_key(item: exp.Expr) -> bool:
    if isinstance(item, exp.ForeignKey):
        return True
    return all(isinstance(e, exp.ForeignKey) for e in item.expressions)


def _create_view(ctx: Context, node: exp.Create) -> CreateView:
    _check_modifiers(ctx, node)
    if node.args.get("exists"):
        raise ctx.unsupported("CREATE VIEW IF NOT EXISTS", node)
    target = node.this
    if isinstance(target, exp.Schema):
        raise ctx.unsupported("CREATE VIEW with a column list", target)
    if not isinstance(target, exp.Table):
        raise ctx.unsupported(f"view name {target.sql()}", target)
    name = target.name.lower()
    taken = _name_taken(ctx, name)
    if taken:
        raise ctx.error(AlreadyExistsError, f"{taken} {target.name} already exists", target)
    body = node.args.get("expression")
    if body is None:
        raise ctx.error(SqlError, "CREATE VIEW needs AS SELECT ...", node)
    query = build_query(ctx, body, allow_key=True)
    return CreateView(name, query, ctx.sql.strip().rstrip(";").strip(), tuple(sorted(ctx.views_read)))


def drop(ctx: Context, node: exp.Drop) -> DropTable | DropView | NoOp:
    kind = (node.args.get("kind") or "").upper()
    if kind == "INDEX":
        return NoOp("DROP INDEX")         # indexes are not kept (see _create_index)
    if kind not in ("TABLE", "VIEW"):
        raise ctx.unsupported(f"DROP {kind}", node)
    for flag in ("cascade", "materialized", "temporary", "purge"):
        if node.args.get(flag):
            raise ctx.unsupported(f"DROP {kind} ... {flag.upper()}", node)
    tables = node.args.get("tables") or ([node.this] if node.this is not None else [])
    if len(tables) != 1:
        raise ctx.unsupported(f"DROP {kind} of several names", node)
    table = tables[0]
    name = table.name.lower()
    if_exists = bool(node.args.get("exists"))
    is_table = ctx.catalog.table(name) is not None
    is_view = ctx.catalog.view(name) is not None
    if kind == "TABLE":
        if not is_table and not if_exists:
            hint = " (it is a view: use DROP VIEW)" if is_view else ""
            raise ctx.error(UnknownTableError, f"no such table: {table.name}{hint}", table)
        return DropTable(name, if_exists)
    if not is_view and not if_exists:
        hint = " (it is a table: use DROP TABLE)" if is_table else ""
        raise ctx.error(UnknownTableError, f"no such view: {table.name}{hint}", table)
    return DropView(name, if_exists)
