"""The Aggregate of a grouped query, and expressions rewritten to read its output.

Before the Aggregate exists, the SELECT list, HAVING and ORDER BY of a grouped query
are translated over the FROM scope, with each aggregate call as an ``AggRef`` into
an ``AggCollector``. ``aggregate`` then builds the node and a ``post`` function that
rewrites such expressions over its output. Invariants:

- the Aggregate's columns are the groups, in order, then one per collected aggregate
  (``AggRef.slot`` ``i`` is column ``len(groups) + i``);
- when a group or an aggregate argument is computed, a Project below the Aggregate
  computes all of them (each distinct expression once); otherwise it reads ``rel``;
- ``post`` accepts only expressions built from groups, AggRefs and constants: a
  column outside the groups and outside any aggregate is an UnsupportedError.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .errors import UnsupportedError
from .expr import Call, Col, Expr
from .plan import AggCall, Aggregate, Project, Rel
from .resolve import Context
from .scalar import AggCollector, AggRef, expr_name, nullable, same
from .types import ColumnInfo

#: rewrites an expression over the pre-aggregation scope to one over the Aggregate;
#: the SQL node is where an error points
Post = Callable[[Expr, exp.Expr | None], Expr]


def has_aggref(e: object) -> bool:
    """Whether ``e`` reads an aggregate (an ``AggRef``) anywhere."""
    if isinstance(e, AggRef):
        return True
    if isinstance(e, Call):
        return any(has_aggref(a) for a in e.args)
    return False


def aggregate(ctx: Context, rel: Rel, groups: list[Expr],
              aggs: AggCollector) -> tuple[Aggregate, Post]:
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
        cols = tuple(ColumnInfo(expr_name(e, f"expr{i}"), e.type, nullable(e, rel.columns))
                     for i, e in enumerate(inputs))
        agg_input = Project(rel, tuple(inputs), cols)
    calls = tuple(AggCall(s.func, a, s.distinct, s.type) for s, a in zip(specs, arg_pos))
    gcols = tuple(ColumnInfo(expr_name(g, f"group{i}"), g.type,
                             agg_input.columns[p].nullable)
                  for i, (g, p) in enumerate(zip(groups, group_pos)))
    acols = tuple(ColumnInfo(s.name, s.type, s.func not in ("count", "count_star"))
                  for s in specs)
    agg = Aggregate(agg_input, group_pos, calls, gcols + acols)
    ng = len(groups)

    def post(e: Expr, node: exp.Expr | None) -> Expr:
        for i, g in enumerate(groups):
            if same(e, g):
                return Col(i, g.type, expr_name(g, ""))
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
    """Where an error about column ``name`` in ``node`` points."""
    if node is None:
        return None
    for c in node.find_all(exp.Column):
        if c.name.lower() == name.lower():
            return c
    return node
