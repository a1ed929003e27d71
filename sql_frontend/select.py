"""SELECT (and UNION) to a ``Query``.

The order of work follows SQL's logical order: FROM (joins), WHERE, GROUP BY and
aggregates, HAVING, the SELECT list, DISTINCT, ORDER BY and LIMIT. Two things are
Noria-specific:

- lookup keys: top-level ``col = ?`` conjuncts are not filters but the view's key,
  so the view is materialized for every key and a read picks one;
- range parameters: in a query whose reader holds its output rows as they are (no
  aggregate, DISTINCT or LIMIT: ``rangeable``), top-level ``col < ?``, ``<=``, ``>``,
  ``>=`` and ``col BETWEEN ? AND ?`` on one column are not filters either but the
  view's ``bounds``: its reader keeps the rows sorted on that column and a read is a
  range scan. A read then answers exactly as the filter would: the reader leaves out
  rows whose column is NULL (a comparison with NULL is never TRUE) and orders NaN above
  every other number, as the engine's comparisons do (noria_py/nan.py). Not where the
  query divides as PostgreSQL does (a WHERE that divides by zero keeps a row of
  markers, which has no place in a sorted index: planner/poison.py);
- predicate placement: WHERE conjuncts are pushed to the join input they concern,
  and equalities across join inputs become join keys, because a dataflow keeps the
  state of every join and the smaller its inputs the cheaper it is to maintain.

The clauses' machinery lives in modules of its own: ``from_clause`` (FROM items),
``joins`` (their layout and join planning), ``aggregates`` (the Aggregate) and
``subquery`` (subqueries in expressions). Those that build nested queries get
``nested_query`` from here as a callback, so none of them imports this module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlglot import exp

from .aggregates import Post, aggregate, has_aggref
from .catalog import Catalog
from .errors import SqlError, UnknownTableError
from .expr import Col, Expr
from .from_clause import from_items, visible_rel
from .joins import FromItem, Layout, and_parts, filtered, join_items
from .plan import (
    Bound,
    Distinct,
    Filter,
    OrderKey,
    Project,
    Query,
    Rel,
    SetOp,
    TopK,
    Union_,
    Values,
    divides,
)
from .resolve import Context, Scope, check_clauses
from .scalar import (
    AggCollector,
    Translator,
    contains_aggregate,
    expr_name,
    mismatch,
    nullable,
    same,
)
from .subquery import SubqueryJoiner, has_subquery
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


def nested_query(ctx: Context, node: exp.Expr) -> Query:
    """The plan of a query inside another (a derived table, a compound SELECT operand,
    a subquery): never with a lookup key. ``from_clause`` and ``subquery`` are handed
    this function, as their ``NestedQuery``, to recurse into whole queries."""
    return build_query(ctx, node, allow_key=False)


def _outermost(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Subquery) and isinstance(node.this, exp.Query):
        node = node.this
    return node


def keyable(node: exp.Expr) -> bool:
    """Whether a SELECT answered now may read its top-level ``col = ?`` conjuncts as a
    lookup key and still answer as SQL does: not for an aggregate without GROUP BY that
    has HAVING (an empty lookup could not tell a group HAVING dropped from no rows)."""
    node = _outermost(node)
    return not (isinstance(node, exp.Select) and needs_empty_answer(node)
                and node.args.get("having") is not None)


def needs_empty_answer(node: exp.Expr) -> bool:
    """An aggregate without GROUP BY: one row even over no rows, where its keyed view
    holds none for a key without rows (``Select.otherwise`` answers then)."""
    node = _outermost(node)
    return isinstance(node, exp.Select) and node.args.get("group") is None and _is_grouped(node)


_RANGE_OPS: dict[type[exp.Expr], str] = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
                                         exp.LTE: "<="}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
#: a range term: the column, its comparison (``plan.RANGE_OPS``), the operand
RangeTerm = tuple[exp.Column, str, exp.Expr]


def rangeable(node: exp.Expr, catalog: Catalog | None) -> bool:
    """Whether a SELECT's top-level range conjuncts may be range parameters
    (``Query.bounds``): its reader must hold its output rows as they are (no aggregate,
    DISTINCT, LIMIT or OFFSET, not compound), and nothing it reads divides as
    PostgreSQL does (a row of markers has no place in a sorted index). ``catalog``
    None: never (a cluster's reads are lookups at the workers: docs/sql.md)."""
    node = _outermost(node)
    if catalog is None or not isinstance(node, exp.Select) or _is_grouped(node):
        return False
    if any(node.args.get(a) is not None for a in ("distinct", "limit", "offset")):
        return False
    for f in node.find_all(exp.Anonymous):
        if f.name.upper() in ("PG_DIV", "PG_MOD"):
            return False
    for table in node.find_all(exp.Table):
        view = catalog.view(table.name.lower())
        if view is not None and divides(view.root):
            return False
    return True


def _column(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Column) and not isinstance(node.this, exp.Star)


def _is_mark(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Placeholder) and not node.this


def _range_terms(part: exp.Expr, operand: Callable[[exp.Expr | None], bool]
                 ) -> list[RangeTerm]:
    """``part``'s comparisons of a column with an ``operand`` (a ``?``, a constant), as
    ``column op operand``: one for ``<`` and the like, two for BETWEEN."""
    op = _RANGE_OPS.get(type(part))
    if op is not None:
        a, b = part.this, part.expression
        if operand(a) and _column(b):
            a, b, op = b, a, _FLIPPED[op]
        if _column(a) and operand(b):
            return [(a, op, b)]
    elif isinstance(part, exp.Between) and not part.args.get("symmetric"):
        low, high = part.args.get("low"), part.args.get("high")
        col = part.this
        if isinstance(col, exp.Column) and _column(col) and low is not None \
                and high is not None and operand(low) and operand(high):
            return [(col, ">=", low), (col, "<=", high)]
    return []


def _range_parts(parts: list[exp.Expr], operand: Callable[[exp.Expr | None], bool]
                 ) -> list[tuple[exp.Expr, list[RangeTerm]]]:
    """The conjuncts among ``parts`` that compare the first column compared with an
    ``operand`` (by its name as written: one column, one sorted index), with their
    terms; the others stay filters."""
    out: list[tuple[exp.Expr, list[RangeTerm]]] = []
    name = None
    for part in parts:
        terms = _range_terms(part, operand)
        if not terms:
            continue
        col = terms[0][0]
        this = (col.table.lower(), col.name.lower())
        if name is None:
            name = this
        if this == name:
            out.append((part, terms))
    return out


def _where_conjuncts(node: exp.Expr) -> list[exp.Expr]:
    where = node.args.get("where")
    return and_parts(where.this if where is not None else None)


def _key_parts(node: exp.Expr) -> list[exp.Expr]:
    node = _outermost(node)
    if not isinstance(node, exp.Select):
        return []
    where = node.args.get("where")
    return [part for part in and_parts(where.this if where is not None else None)
            if _key_conjunct(part) is not None]


def key_placeholders(node: exp.Expr, catalog: Catalog | None = None) -> set[int]:
    """The ids of the ``?`` that ``build_query(..., allow_key=True)`` makes the lookup
    key of ``node``: those of its top-level WHERE conjuncts ``col = ?``, and, where
    ``rangeable(node, catalog)``, its range parameters (``col > ?`` and the like)."""
    marks = {id(kc[1]) for kc in map(_key_conjunct, _key_parts(node)) if kc is not None}
    if rangeable(node, catalog):
        for _, terms in _range_parts(_where_conjuncts(_outermost(node)), _is_mark):
            marks.update(id(mark) for _, _, mark in terms)
    return marks


def falsify_keys(node: exp.Expr) -> None:
    """Replace ``node``'s key conjuncts with FALSE, in place: the query over no rows."""
    for part in _key_parts(node):
        part.replace(exp.false())


def lift_key_constants(node: exp.Expr, catalog: Catalog | None = None
                       ) -> tuple[exp.Select, tuple] | None:
    """A SELECT's top-level ``col = constant`` conjuncts as lookup keys: a copy of the
    query with each such constant (a number or a string) replaced by ``?``, and the
    constants in the order the key takes them; None when there are none, or when the
    query is not one whose answer its lookup gives (a compound query; one with ``?``
    already; one not ``keyable``). The caller checks that the key columns' types take
    the constants as they are (a lookup does not convert). Where ``rangeable(node,
    catalog)``, the constants of its range conjuncts on one column (``a > 5``,
    ``a BETWEEN 1 AND 9``) are lifted too, as range parameters.

    Two queries that differ only in such constants then plan to one view, read with
    different keys: how ad-hoc queries share views, as ReadySet caches queries."""
    if not isinstance(node, exp.Select) or node.find(exp.Placeholder) is not None:
        return None
    if not keyable(node):
        return None
    where = node.args.get("where")
    if where is None:
        return None
    copy = node.copy()
    lifted: list[tuple[exp.Placeholder, object]] = []
    for part in and_parts(copy.args["where"].this):
        if not isinstance(part, exp.EQ):
            continue
        for side in ("this", "expression"):
            other = part.expression if side == "this" else part.this
            value = _constant(part.args[side])
            if value is not None and isinstance(other, exp.Column) \
                    and not isinstance(other.this, exp.Star):
                mark = exp.Placeholder()
                mark.meta["start"] = _start(part.args[side])
                part.set(side, mark)
                lifted.append((mark, value))
                break
    if rangeable(copy, catalog):
        for _, terms in _range_parts(and_parts(copy.args["where"].this),
                                     lambda n: n is not None and _constant(n) is not None):
            for _, _, const in terms:
                mark = exp.Placeholder()
                mark.meta["start"] = _start(const)
                value = _constant(const)
                const.replace(mark)
                lifted.append((mark, value))
    if not lifted:
        return None
    lifted.sort(key=lambda mv: mv[0].meta["start"])      # the order _where_parts keys them
    return copy, tuple(v for _, v in lifted)


def _start(node: exp.Expr) -> int:
    """Where a constant starts in the text (a minus sign's node has no place: its
    number's)."""
    while isinstance(node, exp.Neg) and "start" not in node.meta:
        node = node.this
    return node.meta.get("start", 0)


def _constant(node: exp.Expr) -> object | None:
    """A number or string literal's value (a leading minus taken), else None."""
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return None if negative else node.this
    try:
        value: int | float = int(node.this)
    except ValueError:
        try:
            value = float(node.this)
        except ValueError:
            return None
    return -value if negative else value


# ---------------------------------------------------------------- helpers
_SELECT_ARGS = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                "offset", "distinct"}


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


def _int_literal(ctx: Context, node: exp.Expr, what: str) -> int:
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


# ---------------------------------------------------------------- SELECT

@dataclass
class _OutItem:
    name: str
    node: exp.Expr | None     # the SQL expression (None for a column from * expansion)
    pre: Expr                 # over the FROM scope (with AggRefs in a grouped query)


@dataclass
class _Source:
    """The FROM clause joined under the WHERE clause."""
    joiner: SubqueryJoiner   # its ``rel``: the join, filtered, grown by subquery columns
    scope: Scope             # names the FROM columns (the first ones of ``joiner.rel``)
    key_cols: list[Col]      # the lookup key's columns, in the order of their ``?``
    #: the range parameters: column, comparison, slot (among all ``?`` read, in order)
    range_cols: list[tuple[Col, str, int]]


def _select(ctx: Context, node: exp.Select, allow_key: bool) -> Query:
    """One SELECT, clause by clause in SQL's logical order (errors come in that order)."""
    check_clauses(ctx, node, _SELECT_ARGS)
    distinct_node = node.args.get("distinct")
    if distinct_node is not None and distinct_node.args.get("on") is not None:
        raise ctx.unsupported("DISTINCT ON", distinct_node)
    src = _from_where(ctx, node, allow_key)
    group = node.args.get("group")
    having = node.args.get("having")
    if group is not None:
        check_clauses(ctx, group, {"expressions"})
    aliases = {e.alias.lower(): e.this for e in node.expressions
               if isinstance(e, exp.Alias) and e.alias}
    aggs = AggCollector() if _is_grouped(node) else None
    out = _select_list(ctx, node, src, aggs)
    groups = _group_by(ctx, group, src, aliases, out) if aggs is not None else []
    having_pre = _having(ctx, having, src.scope, aggs, aliases)
    order_refs = _order_by(ctx, node.args.get("order"), src, aggs, aliases, out)
    base, post = _aggregation(ctx, src.joiner.rel, groups, aggs, having_pre, having)
    return _output(ctx, node, base, post, out, src.key_cols, order_refs,
                   distinct_node is not None, src.range_cols)


def _from_where(ctx: Context, node: exp.Select, allow_key: bool) -> _Source:
    """FROM and WHERE: the joined items, with WHERE's conjuncts placed in the joins, its
    subqueries joined on, and its ``col = ?`` conjuncts (if ``allow_key``) as the key."""
    items = _from(ctx, node)
    scope = Layout(items).scope
    where = node.args.get("where")
    ranges = allow_key and ctx.ranges and rangeable(node, ctx.catalog)
    key_nodes, range_nodes, rest = _where_parts(where, allow_key, ranges)
    tr_where = Translator(ctx, scope, clause="WHERE")
    deferred = [p for p in rest if has_subquery(p)]     # need the joined relation first
    where_exprs = [tr_where.condition(p) for p in rest if not has_subquery(p)]
    key_cols = []
    for col_node, _ in key_nodes:
        i = scope.resolve(ctx, col_node)
        key_cols.append(Col(i, scope.fields[i].type, scope.fields[i].name))
    slots = sorted([mark for _, mark in key_nodes] + [mark for _, _, mark in range_nodes],
                   key=lambda m: m.meta.get("start", 0))
    range_cols = []
    for col_node, op, mark in range_nodes:
        i = scope.resolve(ctx, col_node)
        range_cols.append((Col(i, scope.fields[i].type, scope.fields[i].name), op,
                           next(n for n, m in enumerate(slots) if m is mark)))
    rel, scope = join_items(ctx, items, where_exprs)
    joiner = SubqueryJoiner(ctx, rel, scope, nested_query)
    if deferred:
        tr_sub = Translator(ctx, scope, clause="WHERE", sub=joiner)
        preds = [tr_sub.condition(p) for p in deferred]
        joiner.rel = filtered(joiner.rel, preds)
    return _Source(joiner, scope, key_cols, range_cols)


def _from(ctx: Context, node: exp.Select) -> list[FromItem]:
    """The FROM items (one row of no columns for a SELECT without FROM)."""
    from_ = node.args.get("from_")
    if from_ is None:
        if node.args.get("joins"):
            raise ctx.unsupported("JOIN without FROM", node)
        # SELECT without FROM reads one row with no columns
        return [FromItem(Values(((),), ()), Scope([]), "first")]
    return from_items(ctx, from_.this, list(node.args.get("joins") or []), nested_query)


def _where_parts(where: exp.Where | None, allow_key: bool, ranges: bool = False
                 ) -> tuple[list[tuple[exp.Column, exp.Placeholder]], list[RangeTerm],
                            list[exp.Expr]]:
    """WHERE's conjuncts: the lookup-key ones (in the order of their ``?``), the range
    parameters' terms (if ``ranges``), the rest."""
    key_nodes: list[tuple[exp.Column, exp.Placeholder]] = []
    rest: list[exp.Expr] = []
    parts = and_parts(where.this if where is not None else None)
    range_parts = _range_parts(parts, _is_mark) if ranges else []
    ranged = {id(part) for part, _ in range_parts}
    range_nodes = [term for _, terms in range_parts for term in terms]
    for part in parts:
        if id(part) in ranged:
            continue
        kc = _key_conjunct(part) if allow_key else None
        if kc is not None:
            key_nodes.append(kc)
        else:
            rest.append(part)
    key_nodes.sort(key=lambda kc: kc[1].meta.get("start", 0))
    return key_nodes, range_nodes, rest


def _is_grouped(node: exp.Select) -> bool:
    """Whether the SELECT aggregates: a GROUP BY, or an aggregate call in its SELECT
    list, HAVING or ORDER BY."""
    having = node.args.get("having")
    order = node.args.get("order")
    order_terms = [o.this for o in (order.expressions if order is not None else [])]
    return (node.args.get("group") is not None or
            any(contains_aggregate(e) for e in node.expressions) or
            contains_aggregate(having.this if having is not None else None) or
            any(contains_aggregate(t) for t in order_terms))


def _select_list(ctx: Context, node: exp.Select, src: _Source,
                 aggs: AggCollector | None) -> list[_OutItem]:
    """The SELECT list over the FROM scope, ``*`` expanded (subqueries are supported
    only in an ungrouped SELECT)."""
    tr_select = Translator(ctx, src.scope, aggs=aggs, clause="the SELECT list",
                           sub=None if aggs is not None else src.joiner)
    out: list[_OutItem] = []
    for e in node.expressions:
        out += _select_item(ctx, src.scope, tr_select, e)
    return out


def _group_by(ctx: Context, group: exp.Group | None, src: _Source,
              aliases: dict[str, exp.Expr], out: list[_OutItem]) -> list[Expr]:
    """The groups of a grouped SELECT: GROUP BY's terms (a SELECT-list position or an
    expression), then the key columns, so every key has its own groups."""
    groups: list[Expr] = []
    tr_group = Translator(ctx, src.scope, clause="GROUP BY", aliases=aliases)
    for g in (group.expressions if group is not None else []):
        p = _position_ref(g)
        if p is not None:
            if not 1 <= p <= len(out):
                raise ctx.error(SqlError, f"GROUP BY term out of range: {p}", g)
            ge = out[p - 1].pre
            if has_aggref(ge):
                raise ctx.error(SqlError, f"GROUP BY {p} refers to an aggregate", g)
        else:
            ge = tr_group(g)
        if not any(same(ge, x) for x in groups):
            groups.append(ge)
    for kc in src.key_cols:
        if not any(same(kc, x) for x in groups):
            groups.append(kc)
    return groups


def _having(ctx: Context, having: exp.Having | None, scope: Scope,
            aggs: AggCollector | None, aliases: dict[str, exp.Expr]) -> Expr | None:
    """The HAVING condition over the FROM scope (with AggRefs), if there is one."""
    if having is None:
        return None
    if aggs is None:
        raise ctx.error(SqlError, "HAVING without GROUP BY or aggregates", having)
    tr_having = Translator(ctx, scope, aggs=aggs, clause="HAVING", aliases=aliases)
    return tr_having.condition(having.this)


def _order_by(ctx: Context, order: exp.Order | None, src: _Source, aggs: AggCollector | None,
              aliases: dict[str, exp.Expr], out: list[_OutItem]
              ) -> list[tuple[int | Expr, exp.Ordered]]:
    """Each ORDER BY term's target: a SELECT-list position, or an expression (a hidden
    column if the list does not have it)."""
    order_refs: list[tuple[int | Expr, exp.Ordered]] = []
    if order is not None:
        check_clauses(ctx, order, {"expressions"})
        tr_order = Translator(ctx, src.scope, aggs=aggs, clause="ORDER BY", aliases=aliases,
                              sub=None if aggs is not None else src.joiner)
        for o in order.expressions:
            order_refs.append((_order_target(ctx, o, out, aliases, tr_order), o))
    return order_refs


def _aggregation(ctx: Context, rel: Rel, groups: list[Expr], aggs: AggCollector | None,
                 having_pre: Expr | None, having: exp.Having | None) -> tuple[Rel, Post]:
    """The relation the SELECT list reads (the Aggregate over ``rel``, the FROM relation
    grown by the subqueries' columns, under HAVING; or ``rel`` when not grouped) and
    the ``post`` that rewrites expressions over the FROM scope to read it."""
    if aggs is None:
        return rel, _unchanged
    base: Rel
    base, post = aggregate(ctx, rel, groups, aggs)
    if having_pre is not None:
        base = Filter(base, post(having_pre, having))
    return base, post


def _unchanged(e: Expr, node: exp.Expr | None) -> Expr:
    """The ``post`` of a SELECT without aggregation."""
    return e


def _output(ctx: Context, node: exp.Select, base: Rel, post: Post, out: list[_OutItem],
            key_cols: list[Col], order_refs: list[tuple[int | Expr, exp.Ordered]],
            distinct: bool, range_cols: list[tuple[Col, str, int]]) -> Query:
    """The Query over ``base``: the SELECT list, then the hidden columns the key and
    ORDER BY need, under DISTINCT and ORDER BY/LIMIT."""
    order = node.args.get("order")
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

    key = tuple(column_for(post(kc, node.args.get("where")), "key") for kc in key_cols)
    bounds = tuple(Bound(column_for(post(rc, node.args.get("where")), "key"), op, slot)
                   for rc, op, slot in range_cols)
    order_keys = []
    for target, o in order_refs:
        pos = target if isinstance(target, int) else column_for(post(target, o), "order")
        order_keys.append(_order_key(pos, o))

    hidden_names = [expr_name(e, f"hidden{i}") for i, e in enumerate(exprs[nvis:])]
    cols = tuple(ColumnInfo(n, e.type, nullable(e, base.columns))
                 for n, e in zip(names + hidden_names, exprs))
    root: Rel = Project(base, tuple(exprs), cols)
    if distinct:
        root = Distinct(root)
    root = _limit(ctx, node, root, tuple(order_keys), key)
    return Query(root, tuple(names), key, len(exprs) - nvis, tuple(order_keys), bounds)


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
    queries = [nested_query(ctx, b) for b in operands]
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
