"""Subqueries in expressions, decorrelated into joins the dataflow can maintain.

Each subquery becomes extra columns joined onto the relation of the enclosing query
(``SubqueryJoiner.rel``), and the expression reads those columns:

- uncorrelated ``EXISTS`` / ``IN`` / scalar subqueries: a LEFT JOIN on no key (every
  row meets the subquery's one-row summary, or NULLs when it has none);
- correlated ones (the subquery's WHERE names outer columns): the distinct values of
  the outer columns it uses (``D``) are joined with the subquery's FROM under its
  WHERE (equalities become join keys, the rest a filter), grouped per ``D`` row, and
  LEFT JOINed back onto the outer relation on those columns.

What each kind reads from the joined columns:

- ``EXISTS``: a marker column is not NULL.
- ``x IN (SELECT y ...)``, with SQL's NULL rules: TRUE when some y equals x; else NULL
  when the subquery has rows and x is NULL or some y is NULL; else FALSE (``NOT IN``
  is its negation, so a NULL y makes ``NOT IN`` never TRUE, as SQL says).
- scalar: the subquery's one value. It must provably give at most one row (an
  aggregate without GROUP BY): SQLite would take an arbitrary first row otherwise. A
  correlated aggregate with no rows in its group gives the aggregate of nothing
  (COUNT 0, others NULL).

Everything here is built from the ordinary plan relations (Join, Aggregate, Distinct,
Project, Filter), so it is maintained incrementally like any other view: an insert or
delete in the subquery's tables changes the summary rows, and the joins turn that
into changes of the outer rows.

sqlglot's ``unnest_subqueries`` does a similar rewrite, but it needs a qualified tree,
leaves non-equality correlation alone and ignores NULLs for ``NOT IN``; the plan-level
rewrite here keeps SQL's semantics and reports what it cannot do.
"""
from __future__ import annotations

from sqlglot import exp

from .aggregates import aggregate
from .errors import SqlError, UnknownColumnError
from .expr import Call, Col, Expr, Lit, columns_used
from .from_clause import NestedQuery, from_items, visible_rel
from .joins import FromItem, Layout, and_parts, equi_join, filtered, join_items, split_eq
from .plan import AggCall, Aggregate, Distinct, Filter, Project, Rel, TopK, Values
from .resolve import Context, Field, Scope, check_clauses
from .scalar import AggCollector, AggRef, Translator, contains_aggregate, mismatch, remap
from .typerules import comparable
from .types import ColumnInfo, SqlType

_STRICT_OPS = {"add", "sub", "mul", "div", "mod", "pgdiv", "pgmod", "neg", "eq", "ne", "lt", "le", "gt", "ge"}
_CMP_OPS = {"eq", "ne", "lt", "le", "gt", "ge"}


def has_subquery(node: exp.Expr | None) -> bool:
    if node is None:
        return False
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select))
               for n in node.walk())


class LayeredScope(Scope):
    """Inner fields first; a name the inner scope lacks resolves in the outer one (SQL's
    rule for correlated subqueries: the nearest FROM clause wins)."""

    def __init__(self, inner: Scope, outer: Scope) -> None:
        super().__init__(inner.fields + outer.fields)
        self.inner = inner
        self.outer = outer

    def resolve(self, ctx: Context, column: exp.Column) -> int:
        try:
            return self.inner.resolve(ctx, column)
        except UnknownColumnError as inner_err:
            try:
                return len(self.inner) + self.outer.resolve(ctx, column)
            except UnknownColumnError:
                raise inner_err from None


def _hidden(i: int, t: SqlType, nullable: bool = True) -> ColumnInfo:
    return ColumnInfo(f"\x00sub{i}", t, nullable)


def _cols(rel: Rel, idx) -> tuple[Expr, ...]:
    return tuple(Col(i, rel.columns[i].type, rel.columns[i].name) for i in idx)


def _project(rel: Rel, exprs: list[Expr], infos: list[ColumnInfo]) -> Project:
    return Project(rel, tuple(exprs), tuple(infos))


def _at_most_one_row(rel: Rel) -> bool:
    if isinstance(rel, Aggregate):
        return not rel.group_by
    if isinstance(rel, (Project, Filter, Distinct)):
        return _at_most_one_row(rel.input)
    if isinstance(rel, Values):
        return len(rel.rows) <= 1
    if isinstance(rel, TopK):
        return rel.limit is not None and rel.limit <= 0
    return False


def _strict_in(e: Expr, col: int) -> bool:
    """Whether ``e`` is NULL whenever column ``col`` is (so it is never TRUE then)."""
    if isinstance(e, Col):
        return e.index == col
    if isinstance(e, Call):
        if e.op in _STRICT_OPS:
            return any(_strict_in(a, col) for a in e.args)
        if e.op == "and":
            return any(_strict_in(a, col) for a in e.args)
    return False


class SubqueryJoiner:
    """Grows ``rel`` (the enclosing query's relation, before its SELECT list) by the
    columns subqueries need. ``scope`` names the first ``len(scope)`` columns.
    ``nested`` builds the plan of a subquery (and of a derived table in its FROM)."""

    def __init__(self, ctx: Context, rel: Rel, scope: Scope, nested: NestedQuery) -> None:
        self.ctx = ctx
        self.rel = rel
        self.scope = scope
        self.nested = nested

    # ------------------------------------------------------------ entry points

    def exists(self, node: exp.Exists) -> Expr:
        sub = self._query_node(node.this, node)
        marker = self._summary(sub, "exists", None, node)
        return Call("is_not_null", (marker,), SqlType.BOOL)

    def in_(self, x: Expr, query_node: exp.Expr, node: exp.Expr) -> Expr:
        sub = self._query_node(query_node, node)
        return self._summary(sub, "in", x, node)

    def scalar(self, node: exp.Subquery) -> Expr:
        sub = self._query_node(node, node)
        return self._summary(sub, "scalar", None, node)

    # ------------------------------------------------------------ building

    def _query_node(self, node: exp.Expr, where: exp.Expr) -> exp.Query:
        while isinstance(node, exp.Subquery) and not node.alias:
            for mod in ("order", "limit", "offset"):
                if node.args.get(mod):
                    raise self.ctx.unsupported(f"{mod.upper()} on a parenthesized query", node)
            node = node.this
        if not isinstance(node, exp.Query):
            raise self.ctx.unsupported(f"{node.key.upper()} as a subquery", where)
        return node

    def _join_on(self, right: Rel, keys: list[tuple[Expr, Expr]]) -> int:
        """LEFT JOIN ``right`` onto ``rel`` on (outer expr, right column expr) pairs;
        returns where right's columns start."""
        start = len(self.rel.columns)
        self.rel = equi_join(self.rel, right, "left", keys)
        return start

    def _summary(self, sub: exp.Query, kind: str, x: Expr | None, node: exp.Expr) -> Expr:
        try:
            q = self.nested(self.ctx, sub)
        except UnknownColumnError:
            if not isinstance(sub, exp.Select):
                raise
            return self._correlated(sub, kind, x, node)
        rel = visible_rel(q)
        return self._uncorrelated(rel, q.names, kind, x, node)

    # -- uncorrelated
    def _uncorrelated(self, rel: Rel, names, kind: str, x: Expr | None,
                      node: exp.Expr) -> Expr:
        ctx = self.ctx
        if kind == "exists":
            one = Distinct(_project(rel, [], []))
            marked = _project(one, [Lit(True, SqlType.BOOL)], [_hidden(0, SqlType.BOOL)])
            start = self._join_on(marked, [])
            return Col(start, SqlType.BOOL)
        if len(rel.columns) != 1:
            raise ctx.error(SqlError, f"the subquery gives {len(rel.columns)} columns "
                                      f"where one value is needed", node)
        if kind == "scalar":
            if not _at_most_one_row(rel):
                raise ctx.unsupported(
                    "scalar subquery that may give several rows (only an aggregate "
                    "without GROUP BY is known to give one)", node)
            start = self._join_on(rel, [])
            c = rel.columns[0]
            return Col(start, c.type, c.name)
        assert x is not None                # kind "in": in_() passes the left operand
        return self._in_value(x, rel, 0, (), node)

    def _in_value(self, x: Expr, rel: Rel, ycol: int, keys: tuple[int, ...],
                  node: exp.Expr, outer_keys: tuple[Expr, ...] = ()) -> Expr:
        """x IN (the ``ycol`` values of ``rel`` per group of ``keys`` columns), where the
        outer row's group is given by ``outer_keys`` (same length as ``keys``)."""
        ctx = self.ctx
        y = Col(ycol, rel.columns[ycol].type, rel.columns[ycol].name)
        if not comparable(x.type, y.type):
            raise mismatch(ctx, f"cannot compare {x.type.value} with {y.type.value} in "
                                f"{node.sql()}", node)
        kcols = list(_cols(rel, keys))
        # matches: distinct (keys..., y) with a marker
        match = Distinct(_project(rel, kcols + [y],
                                  [rel.columns[k] for k in keys] + [rel.columns[ycol]]))
        nk = len(keys)
        marked = _project(match, list(_cols(match, range(nk + 1))) + [Lit(True, SqlType.BOOL)],
                          list(match.columns) + [_hidden(0, SqlType.BOOL)])
        pairs: list[tuple[Expr, Expr]] = [(ok, Col(i, kc.type))
                                          for i, (ok, kc) in enumerate(zip(outer_keys, kcols))]
        pairs.append((x, Col(nk, y.type)))
        start = self._join_on(marked, pairs)
        m1 = Col(start + nk + 1, SqlType.BOOL)
        # group sizes: rows and non-NULL y per group
        agg = Aggregate(rel, tuple(keys),
                        (AggCall("count_star", None, False, SqlType.INT),
                         AggCall("count", ycol, False, SqlType.INT)),
                        tuple(rel.columns[k] for k in keys) +
                        (_hidden(1, SqlType.INT, False), _hidden(2, SqlType.INT, False)))
        start = self._join_on(agg, [(ok, Col(i, kc.type))
                                    for i, (ok, kc) in enumerate(zip(outer_keys, kcols))])
        n = Col(start + nk, SqlType.INT)
        nn = Col(start + nk + 1, SqlType.INT)
        B = SqlType.BOOL
        null = Lit(None, SqlType.NULL)
        empty = Call("eq", (Call("coalesce", (n, Lit(0, SqlType.INT)), SqlType.INT),
                            Lit(0, SqlType.INT)), B)
        return Call("case", (
            Call("is_not_null", (m1,), B), Lit(True, B),
            empty, Lit(False, B),
            Call("is_null", (x,), B), null,
            Call("gt", (n, nn), B), null,
            Lit(False, B)), B)

    # -- correlated
    def _correlated(self, sub: exp.Select, kind: str, x: Expr | None,
                    node: exp.Expr) -> Expr:
        ctx = self.ctx
        check_clauses(ctx, sub, {"expressions", "from_", "joins", "where", "distinct"})
        if sub.args.get("distinct") is not None and kind == "scalar":
            raise ctx.unsupported("SELECT DISTINCT in a correlated scalar subquery", sub)
        from_ = sub.args.get("from_")
        if from_ is None:
            raise ctx.unsupported("correlated subquery without FROM", sub)
        items = from_items(ctx, from_.this, list(sub.args.get("joins") or []), self.nested)
        inner = Layout(items).scope
        m = len(inner)
        outer = self.scope
        both = LayeredScope(inner, outer)
        tr = Translator(ctx, both, clause="WHERE")
        where = sub.args.get("where")
        local: list[Expr] = []
        corr: list[Expr] = []
        for part in and_parts(where.this if where is not None else None):
            if has_subquery(part):
                raise ctx.unsupported("a subquery inside a correlated subquery", part)
            e = tr.condition(part)
            (corr if any(c >= m for c in columns_used(e)) else local).append(e)
        if not corr:
            # it failed to resolve for another reason (e.g. an outer name in the SELECT
            # list): say so rather than guess
            raise ctx.unsupported("outer column outside the WHERE of a subquery", sub)
        outer_used = sorted({c - m for e in corr for c in columns_used(e) if c >= m})
        for k in outer_used:
            if not any(_strict_in(e, m + k) for e in corr):
                raise ctx.unsupported(
                    f"correlated condition on {outer.fields[k].name} that can hold when "
                    f"it is NULL", where)
        R, _ = join_items(ctx, items, local)
        nk = len(outer_used)
        outer_rel = self.rel
        D = Distinct(_project(outer_rel, list(_cols(outer_rel, outer_used)),
                              [_hidden(i, outer_rel.columns[k].type)
                               for i, k in enumerate(outer_used)]))
        # J = D x R under the correlated conditions: D's columns, then R's
        pos = {k: i for i, k in enumerate(outer_used)}
        moved = [remap(e, lambda c: (nk + c) if c < m else pos[c - m]) for e in corr]
        layout2 = Layout([_anonymous_item(D, nk), _anonymous_item(R, m)])
        keys: list[tuple[Expr, Expr]] = []
        rest: list[Expr] = []
        for e in moved:
            pair = split_eq(layout2, e, 1)
            if pair is not None and not any(c >= nk for c in columns_used(pair[0])):
                keys.append(pair)
            else:
                rest.append(e)
        J = filtered(equi_join(D, R, "inner", keys), rest)
        outer_keys = tuple(Col(k, outer_rel.columns[k].type, outer_rel.columns[k].name)
                           for k in outer_used)
        jscope = Scope([Field(None, f"\x00corr{i}", D.columns[i].type) for i in range(nk)]
                       + inner.fields)
        if kind == "exists":
            G = Distinct(_project(J, list(_cols(J, range(nk))), list(J.columns[:nk])))
            marked = _project(G, list(_cols(G, range(nk))) + [Lit(True, SqlType.BOOL)],
                              list(G.columns) + [_hidden(0, SqlType.BOOL)])
            start = self._join_on(marked, [(ok, Col(i, G.columns[i].type))
                                           for i, ok in enumerate(outer_keys)])
            return Col(start + nk, SqlType.BOOL)
        exprs = sub.expressions
        if len(exprs) != 1 or isinstance(exprs[0], exp.Star):
            raise ctx.error(SqlError, "the subquery must give exactly one column", sub)
        item = exprs[0].this if isinstance(exprs[0], exp.Alias) else exprs[0]
        if kind == "in":
            y = Translator(ctx, jscope, clause="the SELECT list")(item)
            if any(isinstance(a, AggRef) for a in [y]):
                raise ctx.unsupported("aggregate in a correlated IN subquery", item)
            width = len(J.columns)
            Jy = _project(J, list(_cols(J, range(width))) + [y],
                          list(J.columns) + [_hidden(3, y.type)])
            assert x is not None            # kind "in": in_() passes the left operand
            return self._in_value(x, Jy, width, tuple(range(nk)), node, outer_keys)
        # scalar: an aggregate of the group
        if not contains_aggregate(item):
            raise ctx.unsupported("correlated scalar subquery that is not an aggregate "
                                  "(it may give several rows)", sub)
        aggs = AggCollector()
        pre = Translator(ctx, jscope, aggs=aggs, clause="the SELECT list")(item)
        groups = list(_cols(J, range(nk)))
        agg_rel, post = aggregate(ctx, J, groups, aggs)
        value = post(pre, item)
        out = _project(agg_rel, list(_cols(agg_rel, range(nk))) +
                       [value, Lit(True, SqlType.BOOL)],
                       list(agg_rel.columns[:nk]) + [_hidden(4, value.type),
                                                     _hidden(5, SqlType.BOOL)])
        start = self._join_on(out, [(ok, Col(i, out.columns[i].type))
                                    for i, ok in enumerate(outer_keys)])
        empty = _empty_value(pre, aggs)
        B = SqlType.BOOL
        return Call("case", (Call("is_not_null", (Col(start + nk + 1, B),), B),
                             Col(start + nk, value.type), empty), value.type)


def _anonymous_item(rel: Rel, width: int) -> FromItem:
    """A FROM item over ``rel`` whose first ``width`` columns have no SQL names (only
    for a ``Layout``, which needs where each item's columns sit)."""
    return FromItem(rel, Scope([Field(None, f"\x00f{i}", rel.columns[i].type)
                                for i in range(width)]), "inner")


def _empty_value(e, aggs: AggCollector) -> Expr:
    """``e`` (over AggRefs and constants) as it is for a group with no rows."""
    if isinstance(e, AggRef):
        spec = aggs.specs[e.slot]
        if spec.func in ("count", "count_star"):
            return Lit(0, SqlType.INT)
        return Lit(None, e.type)
    if isinstance(e, Call):
        return Call(e.op, tuple(_empty_value(a, aggs) for a in e.args), e.type)
    if isinstance(e, Col):
        raise AssertionError("bare column in an aggregate subquery")  # post() rejected it
    return e
