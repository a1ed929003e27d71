"""FROM items: tables, views, derived tables and parenthesized joins, with their names.

``from_items`` turns a FROM clause (its first item and its JOIN nodes) into the
``FromItem`` list that ``joins.join_items`` joins. Invariants:

- every item's scope has one field per column of its relation, in order; the
  qualifier is the alias, else the table or view name (None for an unaliased
  derived table), and ``AS alias(c1, ...)`` renames the columns;
- a view or derived table is read through ``visible_rel``: its hidden columns never
  reach the enclosing query;
- a query nested in FROM is built by the ``NestedQuery`` the caller passes in (the
  SELECT builder), which is how this module and ``subquery`` recurse into whole
  queries without importing ``select``.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .errors import SqlError, UnknownTableError
from .expr import Col
from .joins import FromItem, join_items
from .plan import Project, Query, Rel, Scan
from .resolve import Context, Field, Scope

#: The plan of a query nested in another (no lookup key: only a statement's own query
#: has one); ``select.nested_query``.
NestedQuery = Callable[[Context, exp.Expr], Query]


def visible_rel(q: Query) -> Rel:
    """The query's relation without its hidden columns (for use as an input)."""
    if not q.hidden:
        return q.root
    cols = q.root.columns[:q.visible]
    return Project(q.root, tuple(Col(i, c.type, c.name) for i, c in enumerate(cols)), cols)


def _table_source(ctx: Context, node: exp.Table) -> tuple[Rel, Scope]:
    if node.args.get("db") or node.args.get("catalog"):
        raise ctx.unsupported(f"schema-qualified table {node.sql()}", node)
    if not isinstance(node.this, exp.Identifier):
        raise ctx.unsupported(f"table expression {node.sql()}", node)
    name = node.name.lower()
    alias = (node.alias or name).lower()
    schema = ctx.catalog.table(name)
    if schema is not None:
        rel: Rel = Scan(name, schema.columns)
        fields = [Field(alias, c.name, c.type, c.nullable) for c in schema.columns]
    else:
        view = ctx.catalog.view(name)
        if view is None:
            raise ctx.error(UnknownTableError, f"no such table or view: {node.name}", node)
        ctx.views_read.add(name)
        rel = visible_rel(view)
        fields = [Field(alias, n, c.type, c.nullable)
                  for n, c in zip(view.names, rel.columns)]
    return rel, Scope(_renamed(ctx, node, fields))


def _renamed(ctx: Context, node: exp.Expr, fields: list[Field]) -> list[Field]:
    """Apply ``AS alias(c1, c2, ...)`` column names, where given."""
    alias = node.args.get("alias")
    if not isinstance(alias, exp.TableAlias):
        return fields
    cols = alias.args.get("columns")
    if not cols:
        return fields
    if len(cols) != len(fields):
        raise ctx.error(SqlError, f"{alias.sql()} names {len(cols)} columns but the "
                                  f"source has {len(fields)}", alias)
    return [Field(f.qualifier, c.name, f.type, f.nullable) for f, c in zip(fields, cols)]


def _from_item(ctx: Context, node: exp.Expr, nested: NestedQuery) -> tuple[Rel, Scope]:
    if isinstance(node, exp.Table):
        if node.args.get("joins"):
            return _join_group(ctx, node, nested)
        return _table_source(ctx, node)
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Table) and inner.args.get("joins"):
            if node.alias:
                raise ctx.unsupported("alias on a parenthesized join", node)
            return _join_group(ctx, inner, nested)
        if isinstance(inner, exp.Table):
            return _table_source(ctx, inner)
        if isinstance(inner, exp.Query):
            q = nested(ctx, inner)
            rel = visible_rel(q)
            qual = node.alias.lower() if node.alias else None
            fields = [Field(qual, n, c.type, c.nullable) for n, c in zip(q.names, rel.columns)]
            return rel, Scope(_renamed(ctx, node, fields))
    raise ctx.unsupported(f"{node.key.upper()} in FROM", node)


def _join_kind(ctx: Context, join: exp.Join) -> str:
    if join.args.get("using"):
        raise ctx.unsupported("JOIN ... USING", join)
    method = (join.args.get("method") or "").upper()
    if method:
        raise ctx.unsupported(f"{method} JOIN", join)
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if side in ("RIGHT", "FULL"):
        raise ctx.unsupported(f"{side} JOIN", join)
    if kind in ("SEMI", "ANTI", "ASOF", "STRAIGHT_JOIN") or join.args.get("match_condition"):
        raise ctx.unsupported(f"{kind} JOIN", join)
    if side == "LEFT":
        if join.args.get("on") is None:
            raise ctx.error(SqlError, "LEFT JOIN needs an ON condition", join)
        return "left"
    if kind == "CROSS" and join.args.get("on") is not None:
        raise ctx.error(SqlError, "CROSS JOIN cannot have an ON condition", join)
    return "inner"


def from_items(ctx: Context, first: exp.Expr, joins: list[exp.Join],
               nested: NestedQuery) -> list[FromItem]:
    """The FROM items of ``first`` and its ``joins``, in FROM order."""
    rel, scope = _from_item(ctx, first, nested)
    items = [FromItem(rel, scope, "first")]
    for j in joins:
        kind = _join_kind(ctx, j)
        rel, scope = _from_item(ctx, j.this, nested)
        items.append(FromItem(rel, scope, kind, j))
    return items


def _join_group(ctx: Context, node: exp.Table, nested: NestedQuery) -> tuple[Rel, Scope]:
    """A parenthesized join, ``(a JOIN b ON ...)``, as one FROM item."""
    bare = node.copy()
    bare.set("joins", None)
    items = from_items(ctx, bare, list(node.args.get("joins") or []), nested)
    return join_items(ctx, items, [])
