"""SELECT (and UNION) to a ``Query``.

The order of work follows SQL's logical order: FROM (joins), WHERE, GROUP BY and
aggregates, HAVING, the SELECT list, DISTINCT, ORDER BY and LIMIT. Two things are
Noria-specific:

- lookup keys: top-level ``col = ?`` conjuncts are not filters but the view's key,
  so the view is materialized for every key and a read picks one;
- predicate placement: WHERE conjuncts are pushed to the join input they concern,
  and equalities across join inputs become join keys, because a dataflow keeps the
  state of every join and the smaller its inputs the cheaper it is to maintain.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from sqlglot import exp

from .errors import SqlError, UnknownTableError, UnsupportedError
from .expr import Call, Col, Expr, columns_used
from .plan import (AggCall, Aggregate, Distinct, Filter, Join, OrderKey, Project, Query, Rel,
                   Scan, SetOp, TopK, Union_, Values)
from .resolve import Context, Field, Scope, check_clauses
from .subquery import SubqueryJoiner, has_subquery
from .scalar import (AggCollector, AggRef, Translator, conjunction, contains_aggregate,
                     mismatch, nullable, remap, same)
from .typerules import unify
from .types import ColumnInfo


# ---------------------------------------------------------------- entry point

def build_query(ctx: Context, node: exp.Expr, *, allow_key: bool) -> Query:
    """The plan of a query expression. ``allow_key``: whether top-level ``col = ?``
    conjuncts may become the lookup key (only for a view's or statement's own query)."""
    while isinstance(node, exp.Subquery) and isinstance(node.this, exp.Query):
        for mod in ("order", "limit", "offset"):
            if node.args.get(mod):
                raise ctx.unsupported(f"{mod.upper()} on a parenthesized query", node)
        node = node.this
    if isinstance(node, exp.SetOperation):
        return _union(ctx, node)
    if isinstance(node, exp.Select):
        return _select(ctx, node, allow_key)
    raise ctx.unsupported(f"{node.key.upper()} as a query", node)


def visible_rel(q: Query) -> Rel:
    """The query's relation without its hidden columns (for use as an input)."""
    if not q.hidden:
        return q.root
    cols = q.root.columns[:q.visible]
    return Project(q.root, tuple(Col(i, c.type, c.name) for i, c in enumerate(cols)), cols)


# ---------------------------------------------------------------- helpers
_SELECT_ARGS = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                "offset", "distinct"}


def _and_parts(node: exp.Expr | None) -> list[exp.Expr]:
    """Top-level AND conjuncts of a condition, parentheses removed."""
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _and_parts(node.this) + _and_parts(node.expression)
    return [node]


def _key_conjunct(node: exp.Expr) -> tuple[exp.Column, exp.Placeholder] | None:
    if not isinstance(node, exp.EQ):
        return None
    a, b = node.this, node.expression
    if isinstance(b, exp.Column) and isinstance(a, exp.Placeholder):
        a, b = b, a
    if (isinstance(a, exp.Column) and not isinstance(a.this, exp.Star)
            and isinstance(b, exp.Placeholder) and not b.this):
        return a, b
    return None


def _int_literal(ctx: Context, node: exp.Expr | None, what: str) -> int:
    n = node
    negative = False
    while isinstance(n, (exp.Paren, exp.Neg)):
        negative ^= isinstance(n, exp.Neg)
        n = n.this
    if isinstance(n, exp.Literal) and not n.is_string:
        try:
            v = int(n.this)
        except ValueError:
            v = None
        if v is not None:
            if negative or v < 0:
                raise ctx.error(SqlError, f"{what} must not be negative: {node.sql()}", node)
            return v
    raise ctx.unsupported(f"{what} that is not an integer constant: {node.sql()}", node)


def _position_ref(node: exp.Expr) -> int | None:
    """The 1-based position for ORDER BY/GROUP BY ``n``, or None if not a bare integer."""
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None


def _filtered(rel: Rel, preds: list[Expr]) -> Rel:
    pred = conjunction(preds)
    return rel if pred is None else Filter(rel, pred)


def _expr_name(e: Expr, fallback: str) -> str:
    return e.name if isinstance(e, Col) and e.name else fallback


# ---------------------------------------------------------------- FROM

@dataclass
class _Item:
    rel: Rel
    scope: Scope
    kind: str                     # "first", "inner" or "left"
    join: exp.Join | None = None  # the JOIN node that brought this item in


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
        rel = visible_rel(view)
        fields = [Field(alias, n, c.type, c.nullable)
                  for n, c in zip(view.names, rel.columns)]
    return rel, Scope(_renamed(ctx, node, fields))


def _renamed(ctx: Context, node: exp.Expr, fields: list[Field]) -> list[Field]:
    """Apply ``AS alias(c1, c2, ...)`` column names, where given."""
    alias = node.args.get("alias")
    cols = alias.args.get("columns") if isinstance(alias, exp.TableAlias) else None
    if not cols:
        return fields
    if len(cols) != len(fields):
        raise ctx.error(SqlError, f"{alias.sql()} names {len(cols)} columns but the "
                                  f"source has {len(fields)}", alias)
    return [Field(f.qualifier, c.name, f.type, f.nullable) for f, c in zip(fields, cols)]


def _from_item(ctx: Context, node: exp.Expr) -> tuple[Rel, Scope]:
    if isinstance(node, exp.Table):
        if node.args.get("joins"):
            return _join_group(ctx, node)
        return _table_source(ctx, node)
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Table) and inner.args.get("joins"):
            if node.alias:
                raise ctx.unsupported("alias on a parenthesized join", node)
            return _join_group(ctx, inner)
        if isinstance(inner, exp.Table):
            return _table_source(ctx, inner)
        if isinstance(inner, exp.Query):
            q = build_query(ctx, inner, allow_key=False)
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


def _items(ctx: Context, first: exp.Expr, joins: list[exp.Join]) -> list[_Item]:
    rel, scope = _from_item(ctx, first)
    items = [_Item(rel, scope, "first")]
    for j in joins:
        kind = _join_kind(ctx, j)
        rel, scope = _from_item(ctx, j.this)
        items.append(_Item(rel, scope, kind, j))
    return items


def _join_group(ctx: Context, node: exp.Table) -> tuple[Rel, Scope]:
    """A parenthesized join, ``(a JOIN b ON ...)``, as one FROM item."""
    bare = node.copy()
    bare.set("joins", None)
    items = _items(ctx, bare, list(node.args.get("joins") or []))
    return _join_items(ctx, items, [])


class _Layout:
    """Where each FROM item's columns sit in the concatenated scope."""

    def __init__(self, items: list[_Item]) -> None:
        self.offsets: list[int] = []
        fields: list[Field] = []
        for it in items:
            self.offsets.append(len(fields))
            fields += it.scope.fields
        self.scope = Scope(fields)

    def items_of(self, e: Expr) -> set[int]:
        return {bisect_right(self.offsets, c) - 1 for c in columns_used(e)}

    def prefix(self, k: int, items: list[_Item]) -> Scope:
        return Scope(self.scope.fields[:self.offsets[k] + len(items[k].scope)])


def _join_items(ctx: Context, items: list[_Item], where: list[Expr]) -> tuple[Rel, Scope]:
    """Join the FROM items, placing each WHERE conjunct (over the full scope) as early
    as it can go without changing the result. Comma joins are reordered so that each
    item joins on an equality with those before it where one exists (a cross product
    of many tables would otherwise be kept as state); the columns keep FROM order."""
    order = _join_order(items, where)
    if order is None:
        return _join_in_order(ctx, items, where)
    layout = _Layout(items)
    moved = [items[i] for i in order]
    new_layout = _Layout(moved)
    new_start = {i: new_layout.offsets[k] for k, i in enumerate(order)}

    def to_new(c: int) -> int:
        i = bisect_right(layout.offsets, c) - 1
        return new_start[i] + (c - layout.offsets[i])

    rel, _ = _join_in_order(ctx, moved, [remap(c, to_new) for c in where])
    back = [to_new(c) for c in range(len(layout.scope))]
    cols = tuple(rel.columns[c] for c in back)
    return Project(rel, tuple(Col(c, rel.columns[c].type, rel.columns[c].name)
                              for c in back), cols), layout.scope


def _join_order(items: list[_Item], where: list[Expr]) -> list[int] | None:
    """A greedy order for a FROM list of comma joins (None: keep the written order)."""
    if len(items) < 3 or any(it.kind not in ("first", "inner") or
                             (it.join is not None and it.join.args.get("on") is not None)
                             for it in items):
        return None
    layout = _Layout(items)
    links: list[set[int]] = []
    for c in where:
        if isinstance(c, Call) and c.op == "eq":
            a, b = (layout.items_of(x) for x in c.args)
            if len(a) == 1 and len(b) == 1 and a != b:
                links.append(a | b)
    order = [0]
    left = list(range(1, len(items)))
    while left:
        done = set(order)
        pick = next((i for i in left if any(i in l and (l - {i}) <= done for l in links)),
                    left[0])
        order.append(pick)
        left.remove(pick)
    return None if order == list(range(len(items))) else order


def _join_in_order(ctx: Context, items: list[_Item], where: list[Expr]) -> tuple[Rel, Scope]:
    layout = _Layout(items)
    pushed: list[list[Expr]] = [[] for _ in items]   # filters on an item's own input
    at_step: list[list[Expr]] = [[] for _ in items]  # candidates when item k joins
    top: list[Expr] = []
    for c in where:
        its = layout.items_of(c)
        if not its:
            top.append(c)
        elif len(its) == 1 and items[min(its)].kind != "left":
            i = min(its)
            pushed[i].append(remap(c, lambda x, o=layout.offsets[i]: x - o))
        else:
            at_step[max(its)].append(c)

    acc = _filtered(items[0].rel, pushed[0])
    for k in range(1, len(items)):
        it = items[k]
        off = layout.offsets[k]
        local = (lambda x, o=off: x - o)
        right = _filtered(it.rel, pushed[k])
        on_node = it.join.args.get("on") if it.join is not None else None
        tr = Translator(ctx, layout.prefix(k, items), clause="ON")
        on = [(tr.condition(p), p) for p in _and_parts(on_node)]
        keys: list[tuple[Expr, Expr]] = []
        right_preds: list[Expr] = []
        post: list[Expr] = []
        if it.kind == "left":
            for c, src in on:
                its = layout.items_of(c)
                pair = _split_eq(layout, c, k)
                if its <= {k}:
                    right_preds.append(remap(c, local))
                elif pair is not None:
                    keys.append(pair)
                else:
                    raise ctx.unsupported(
                        f"LEFT JOIN condition {src.sql()} (only equalities between the "
                        f"two sides and conditions on the right side)", src)
            post = at_step[k]
        else:
            for c in [c for c, _ in on] + at_step[k]:
                its = layout.items_of(c)
                pair = _split_eq(layout, c, k)
                if its == {k}:
                    right_preds.append(remap(c, local))
                elif pair is not None:
                    keys.append(pair)
                else:
                    post.append(c)
        right = _filtered(right, right_preds)
        joined = _equi_join(acc, right, it.kind, keys)
        acc = _filtered(joined, post)
    return _filtered(acc, top), layout.scope


def _split_eq(layout: _Layout, c: Expr, k: int) -> tuple[Expr, Expr] | None:
    """(left side, right side over item k's own columns) if ``c`` equates the two."""
    if not (isinstance(c, Call) and c.op == "eq"):
        return None
    a, b = c.args
    ia, ib = layout.items_of(a), layout.items_of(b)
    off = layout.offsets[k]
    if ia and ib and max(ia) < k and ib == {k}:
        return a, remap(b, lambda x: x - off)
    if ia and ib and max(ib) < k and ia == {k}:
        return b, remap(a, lambda x: x - off)
    return None


def _equi_join(left: Rel, right: Rel, kind: str, keys: list[tuple[Expr, Expr]]) -> Rel:
    """A Join on key expressions; computed keys get a column of their own in a Project
    below the join, dropped again above it."""
    nl, nr = len(left.columns), len(right.columns)
    lextra: list[Expr] = []
    rextra: list[Expr] = []

    def key_pos(e: Expr, width: int, extra: list[Expr]) -> int:
        if isinstance(e, Col):
            return e.index
        for j, x in enumerate(extra):
            if same(x, e):
                return width + j
        extra.append(e)
        return width + len(extra) - 1

    lkeys = tuple(key_pos(a, nl, lextra) for a, _ in keys)
    rkeys = tuple(key_pos(b, nr, rextra) for _, b in keys)
    left2, right2 = _extend(left, lextra), _extend(right, rextra)
    rcols = right2.columns
    if kind == "left":
        rcols = tuple(ColumnInfo(c.name, c.type, True) for c in rcols)
    join = Join(left2, right2, kind, lkeys, rkeys, left2.columns + rcols)
    if not lextra and not rextra:
        return join
    keep = list(range(nl)) + [len(left2.columns) + i for i in range(nr)]
    cols = tuple(join.columns[i] for i in keep)
    return Project(join, tuple(Col(i, join.columns[i].type, join.columns[i].name)
                               for i in keep), cols)


def _extend(rel: Rel, extra: list[Expr]) -> Rel:
    if not extra:
        return rel
    cols = rel.columns
    exprs = tuple(Col(i, c.type, c.name) for i, c in enumerate(cols)) + tuple(extra)
    new = tuple(ColumnInfo(f"key{i}", e.type, nullable(e, cols)) for i, e in enumerate(extra))
    return Project(rel, exprs, cols + new)


# ---------------------------------------------------------------- SELECT

@dataclass
class _OutItem:
    name: str
    node: exp.Expr | None     # the SQL expression (None for a column from * expansion)
    pre: Expr                 # over the FROM scope (with AggRefs in a grouped query)


def _select(ctx: Context, node: exp.Select, allow_key: bool) -> Query:
    check_clauses(ctx, node, _SELECT_ARGS)
    distinct_node = node.args.get("distinct")
    if distinct_node is not None and distinct_node.args.get("on") is not None:
        raise ctx.unsupported("DISTINCT ON", distinct_node)
    distinct = distinct_node is not None
    from_ = node.args.get("from_")

    # FROM and WHERE
    if from_ is None:
        if node.args.get("joins"):
            raise ctx.unsupported("JOIN without FROM", node)
        # SELECT without FROM reads one row with no columns
        items = [_Item(Values(((),), ()), Scope([]), "first")]
    else:
        items = _items(ctx, from_.this, list(node.args.get("joins") or []))
    layout = _Layout(items)
    scope = layout.scope
    where = node.args.get("where")
    key_nodes: list[tuple[exp.Column, exp.Placeholder]] = []
    rest: list[exp.Expr] = []
    for part in _and_parts(where.this if where is not None else None):
        kc = _key_conjunct(part) if allow_key else None
        if kc is not None:
            key_nodes.append(kc)
        else:
            rest.append(part)
    key_nodes.sort(key=lambda kc: kc[1].meta.get("start", 0))
    tr_where = Translator(ctx, scope, clause="WHERE")
    deferred = [p for p in rest if has_subquery(p)]     # need the joined relation first
    where_exprs = [tr_where.condition(p) for p in rest if not has_subquery(p)]
    key_cols = []
    for col_node, _ in key_nodes:
        i = scope.resolve(ctx, col_node)
        key_cols.append(Col(i, scope.fields[i].type, scope.fields[i].name))
    rel, scope = _join_items(ctx, items, where_exprs)
    joiner = SubqueryJoiner(ctx, rel, scope)
    if deferred:
        tr_sub = Translator(ctx, scope, clause="WHERE", sub=joiner)
        preds = [tr_sub.condition(p) for p in deferred]
        joiner.rel = _filtered(joiner.rel, preds)

    # the SELECT list
    group = node.args.get("group")
    having = node.args.get("having")
    order = node.args.get("order")
    if group is not None:
        check_clauses(ctx, group, {"expressions"})
    aliases = {e.alias.lower(): e.this for e in node.expressions
               if isinstance(e, exp.Alias) and e.alias}
    order_terms = [o.this for o in (order.expressions if order is not None else [])]
    grouped = (group is not None or
               any(contains_aggregate(e) for e in node.expressions) or
               contains_aggregate(having.this if having is not None else None) or
               any(contains_aggregate(t) for t in order_terms))
    aggs = AggCollector() if grouped else None
    tr_select = Translator(ctx, scope, aggs=aggs, clause="the SELECT list",
                           sub=None if grouped else joiner)
    out: list[_OutItem] = []
    for e in node.expressions:
        out += _select_item(ctx, scope, tr_select, e)

    # GROUP BY (plus the key columns, so every key has its own groups)
    groups: list[Expr] = []
    if grouped:
        tr_group = Translator(ctx, scope, clause="GROUP BY", aliases=aliases)
        for g in (group.expressions if group is not None else []):
            p = _position_ref(g)
            if p is not None:
                if not 1 <= p <= len(out):
                    raise ctx.error(SqlError, f"GROUP BY term out of range: {p}", g)
                ge = out[p - 1].pre
                if _has_aggref(ge):
                    raise ctx.error(SqlError, f"GROUP BY {p} refers to an aggregate", g)
            else:
                ge = tr_group(g)
            if not any(same(ge, x) for x in groups):
                groups.append(ge)
        for kc in key_cols:
            if not any(same(kc, x) for x in groups):
                groups.append(kc)

    having_pre = None
    if having is not None:
        if not grouped:
            raise ctx.error(SqlError, "HAVING without GROUP BY or aggregates", having)
        tr_having = Translator(ctx, scope, aggs=aggs, clause="HAVING", aliases=aliases)
        having_pre = tr_having.condition(having.this)

    # ORDER BY: a select-list position, or an expression (hidden column if not listed)
    order_refs: list[tuple[int | Expr, exp.Ordered]] = []
    if order is not None:
        check_clauses(ctx, order, {"expressions"})
        tr_order = Translator(ctx, scope, aggs=aggs, clause="ORDER BY", aliases=aliases,
                              sub=None if grouped else joiner)
        for o in order.expressions:
            order_refs.append((_order_target(ctx, o, out, aliases, tr_order), o))

    # aggregation (over the FROM relation grown by the subqueries' columns)
    rel = joiner.rel
    base = rel
    post = (lambda e, n: e)
    if grouped:
        base, post = _aggregate(ctx, rel, groups, aggs)
        if having_pre is not None:
            base = Filter(base, post(having_pre, having))
    exprs = [post(o.pre, o.node if o.node is not None else node) for o in out]
    names = [o.name for o in out]
    nvis = len(exprs)

    def column_for(e: Expr, what: str) -> int:
        for i, x in enumerate(exprs):
            if same(x, e):
                return i
        if distinct and what == "order":
            raise ctx.unsupported("ORDER BY a column not in the SELECT DISTINCT list", order)
        exprs.append(e)
        return len(exprs) - 1

    key = tuple(column_for(post(kc, where), "key") for kc in key_cols)
    order_keys = []
    for target, o in order_refs:
        pos = target if isinstance(target, int) else column_for(post(target, o), "order")
        order_keys.append(_order_key(pos, o))

    hidden_names = [_expr_name(e, f"hidden{i}") for i, e in enumerate(exprs[nvis:])]
    cols = tuple(ColumnInfo(n, e.type, nullable(e, base.columns))
                 for n, e in zip(names + hidden_names, exprs))
    root: Rel = Project(base, tuple(exprs), cols)
    if distinct:
        root = Distinct(root)
    root = _limit(ctx, node, root, tuple(order_keys), key)
    return Query(root, tuple(names), key, len(exprs) - nvis, tuple(order_keys))


def _select_item(ctx: Context, scope: Scope, tr: Translator, e: exp.Expr) -> list[_OutItem]:
    if isinstance(e, exp.Star):
        return [_OutItem(f.name, None, Col(i, f.type, f.name))
                for i, f in enumerate(scope.fields)]
    if isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
        q = e.table.lower()
        hits = [(i, f) for i, f in enumerate(scope.fields) if f.qualifier == q]
        if not hits:
            raise ctx.error(UnknownTableError, f"no such table in FROM: {e.table}", e)
        return [_OutItem(f.name, None, Col(i, f.type, f.name)) for i, f in hits]
    inner = e.this if isinstance(e, exp.Alias) else e
    pre = tr(inner)
    if isinstance(e, exp.Alias) and e.alias:
        name = e.alias
    elif isinstance(inner, exp.Column) and isinstance(pre, Col):
        name = pre.name
    else:
        name = inner.sql()
    return [_OutItem(name, inner, pre)]


def _order_target(ctx: Context, o: exp.Ordered, out: list[_OutItem],
                  aliases: dict[str, exp.Expr], tr: Translator) -> int | Expr:
    t = o.this
    p = _position_ref(t)
    if p is not None:
        if not 1 <= p <= len(out):
            raise ctx.error(SqlError, f"ORDER BY term out of range: {p} (the SELECT list "
                                      f"has {len(out)} columns)", t)
        return p - 1
    if isinstance(t, exp.Column) and not t.table and t.name.lower() in aliases:
        for i, item in enumerate(out):
            if item.node is not None and item.name.lower() == t.name.lower():
                return i
    e = tr(t)
    for i, item in enumerate(out):
        if same(item.pre, e):
            return i
    return e


def _order_key(pos: int, o: exp.Ordered) -> OrderKey:
    desc = bool(o.args.get("desc"))
    nulls_first = o.args.get("nulls_first")
    if nulls_first is None:
        nulls_first = not desc
    return OrderKey(pos, desc, bool(nulls_first))


def _limit(ctx: Context, node: exp.Expr, root: Rel, order: tuple[OrderKey, ...],
           partition: tuple[int, ...]) -> Rel:
    limit_node = node.args.get("limit")
    offset_node = node.args.get("offset")
    if limit_node is None and offset_node is None:
        return root
    limit = offset = None
    if limit_node is not None:
        if isinstance(limit_node, exp.Fetch):
            raise ctx.unsupported("FETCH", limit_node)
        limit = _int_literal(ctx, limit_node.expression, "LIMIT")
        if limit_node.args.get("offset") is not None:       # LIMIT offset, count
            offset = _int_literal(ctx, limit_node.args["offset"], "OFFSET")
    if offset_node is not None:
        offset = _int_literal(ctx, offset_node.expression, "OFFSET")
    return TopK(root, order, limit, offset or 0, partition)


def _has_aggref(e: object) -> bool:
    if isinstance(e, AggRef):
        return True
    if isinstance(e, Call):
        return any(_has_aggref(a) for a in e.args)
    return False


def _aggregate(ctx: Context, rel: Rel, groups: list[Expr], aggs: AggCollector):
    """Build the Aggregate (with a Project below it for computed groups or arguments) and
    the function that rewrites pre-aggregation expressions over its output."""
    specs = aggs.specs
    needed = list(groups) + [s.arg for s in specs if s.arg is not None]
    inputs: list[Expr] = []

    def slot(e: Expr) -> int:
        if all(isinstance(x, Col) for x in needed):
            return e.index  # type: ignore[union-attr]
        for i, x in enumerate(inputs):
            if same(x, e):
                return i
        inputs.append(e)
        return len(inputs) - 1

    group_pos = tuple(slot(g) for g in groups)
    arg_pos = [slot(s.arg) if s.arg is not None else None for s in specs]
    agg_input = rel
    if inputs:
        cols = tuple(ColumnInfo(_expr_name(e, f"expr{i}"), e.type, nullable(e, rel.columns))
                     for i, e in enumerate(inputs))
        agg_input = Project(rel, tuple(inputs), cols)
    calls = tuple(AggCall(s.func, a, s.distinct, s.type) for s, a in zip(specs, arg_pos))
    gcols = tuple(ColumnInfo(_expr_name(g, f"group{i}"), g.type,
                             agg_input.columns[p].nullable)
                  for i, (g, p) in enumerate(zip(groups, group_pos)))
    acols = tuple(ColumnInfo(s.name, s.type, s.func not in ("count", "count_star"))
                  for s in specs)
    agg = Aggregate(agg_input, group_pos, calls, gcols + acols)
    ng = len(groups)

    def post(e: Expr, node: exp.Expr | None) -> Expr:
        for i, g in enumerate(groups):
            if same(e, g):
                return Col(i, g.type, _expr_name(g, ""))
        if isinstance(e, AggRef):
            return Col(ng + e.slot, e.type, specs[e.slot].name)
        if isinstance(e, Col):
            # SQLite accepts such "bare" columns (taking them from an arbitrary row of
            # the group); that cannot be maintained incrementally, so it is unsupported
            raise ctx.error(UnsupportedError, f"column {e.name} must appear in GROUP BY or "
                                              f"be used in an aggregate function",
                            _find_column(node, e.name))
        if isinstance(e, Call):
            return Call(e.op, tuple(post(a, node) for a in e.args), e.type)
        return e

    return agg, post


def _find_column(node: exp.Expr | None, name: str) -> exp.Expr | None:
    if node is None:
        return None
    for c in node.find_all(exp.Column):
        if c.name.lower() == name.lower():
            return c
    return node


# ---------------------------------------------------------------- UNION, EXCEPT, INTERSECT

_COMPOUND_KINDS = {exp.Union: "union", exp.Except: "except", exp.Intersect: "intersect"}


def _compound_chain(ctx: Context, node: exp.Expr, mods: list[exp.Expr]
                    ) -> tuple[list[exp.Expr], list[tuple[str, bool, exp.Expr]]]:
    """The operands and operators of a compound SELECT in textual order.

    SQLite gives UNION, EXCEPT and INTERSECT the same precedence and applies them left
    to right; sqlglot binds INTERSECT tighter and wraps the operand in a Subquery, so
    such operands are flattened back into the chain (SQLite has no parenthesized
    compound operands, so a Subquery here can only come from that). ``mods`` collects
    the nodes that carry ORDER BY/LIMIT/OFFSET."""
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.SetOperation):
        if node.alias:
            raise ctx.unsupported("alias on a compound SELECT operand", node)
        return _compound_chain(ctx, node.this, mods)
    if not isinstance(node, exp.SetOperation):
        return [node], []
    kind = _COMPOUND_KINDS.get(type(node))
    if kind is None:
        raise ctx.unsupported(node.key.upper(), node)
    check_clauses(ctx, node, {"this", "expression", "distinct", "order", "limit", "offset"})
    if any(node.args.get(m) for m in ("order", "limit", "offset")):
        mods.append(node)
    distinct = bool(node.args.get("distinct"))
    if kind != "union" and not distinct:
        raise ctx.unsupported(f"{kind.upper()} ALL", node)
    lops, lkinds = _compound_chain(ctx, node.this, mods)
    rops, rkinds = _compound_chain(ctx, node.expression, mods)
    return lops + rops, lkinds + [(kind, distinct, node)] + rkinds


def _union(ctx: Context, node: exp.SetOperation) -> Query:
    mods: list[exp.Expr] = []
    operands, ops = _compound_chain(ctx, node, mods)
    if len(mods) > 1:
        raise ctx.unsupported("ORDER BY or LIMIT inside a compound SELECT", mods[1])
    queries = [build_query(ctx, b, allow_key=False) for b in operands]
    rels = [visible_rel(q) for q in queries]
    width = len(queries[0].names)
    for b, q in zip(operands, queries):
        if q.visible != width:
            raise ctx.error(SqlError, f"compound SELECT operands have different numbers "
                                      f"of columns ({width} and {q.visible})", b)
    names = queries[0].names
    cols = []
    for i in range(width):
        types = [r.columns[i].type for r in rels]
        t = unify(types)
        if t is None:
            raise mismatch(ctx, f"compound SELECT column {i + 1} ({names[i]}) mixes "
                                f"{', '.join(sorted({x.value for x in types}))}", node)
        cols.append(ColumnInfo(names[i], t, any(r.columns[i].nullable for r in rels)))
    columns = tuple(cols)
    # fold left to right; runs of UNION ALL (and of UNION) become one Union_ node
    root: Rel = rels[0]
    pending: list[Rel] = [root]
    pending_distinct = None
    for (kind, distinct, _), rel in zip(ops, rels[1:]):
        if kind == "union" and (pending_distinct is None or pending_distinct == distinct):
            pending.append(rel)
            pending_distinct = distinct
            continue
        root = _close_union(pending, pending_distinct, columns)
        if kind == "union":
            pending, pending_distinct = [root, rel], distinct
            continue
        root = SetOp(root, rel, kind, columns)
        pending, pending_distinct = [root], None
    root = _close_union(pending, pending_distinct, columns)
    order_keys = []
    mod = mods[0] if mods else node
    order = mod.args.get("order")
    for o in (order.expressions if order is not None else []):
        t = o.this
        p = _position_ref(t)
        if p is not None:
            if not 1 <= p <= width:
                raise ctx.error(SqlError, f"ORDER BY term out of range: {p}", t)
            order_keys.append(_order_key(p - 1, o))
            continue
        if isinstance(t, exp.Column) and not t.table:
            hits = [i for i, n in enumerate(names) if n.lower() == t.name.lower()]
            if hits:
                order_keys.append(_order_key(hits[0], o))
                continue
        raise ctx.unsupported(f"ORDER BY {t.sql()} on a compound SELECT (use a column "
                              f"name or position of the result)", t)
    root = _limit(ctx, mod, root, tuple(order_keys), ())
    return Query(root, tuple(names), (), 0, tuple(order_keys))


def _close_union(pending: list[Rel], distinct: bool | None,
                 columns: tuple[ColumnInfo, ...]) -> Rel:
    if len(pending) == 1:
        return pending[0]
    root: Rel = Union_(tuple(pending), columns)
    return Distinct(root) if distinct else root
