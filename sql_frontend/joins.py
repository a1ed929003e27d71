"""Join planning: FROM items, where their columns sit, and how they are joined.

A FROM clause is a list of ``FromItem``: the first has kind ``"first"``, each later
one ``"inner"`` or ``"left"`` and the JOIN node that brought it in. Invariants:

- ``Layout``: item ``i``'s columns start at ``offsets[i]`` of the concatenated scope
  (the items' scopes in FROM order); expressions over the whole FROM clause use
  those positions.
- ``join_items`` returns the FROM items' columns in FROM order whatever order it joins
  them in, so callers never see a reordering.
- a WHERE conjunct is placed where it gives the same rows as a filter above all the
  joins: on an item's own input when it reads that item alone (never the right side
  of a LEFT JOIN, whose NULL-extended rows it would change), as a key of an inner
  join when it equates earlier items with the one being joined, otherwise right
  after the join that brings in the last item it reads (at the top if it reads none).
- ``equi_join``: the left columns, then the right ones (nullable for a LEFT JOIN);
  computed keys get columns below the join that are dropped above it.

No ``select`` import here: building the FROM items themselves (which may be queries)
is ``from_clause``'s job.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from sqlglot import exp

from .expr import Call, Col, Expr, columns_used
from .plan import Filter, Join, Project, Rel
from .resolve import Context, Field, Scope
from .scalar import Translator, conjunction, nullable, remap, same
from .types import ColumnInfo


@dataclass
class FromItem:
    """One input of a FROM clause: its relation, the names it brings, how it joins."""
    rel: Rel
    scope: Scope
    kind: str                     # "first", "inner" or "left"
    join: exp.Join | None = None  # the JOIN node that brought this item in


def and_parts(node: exp.Expr | None) -> list[exp.Expr]:
    """Top-level AND conjuncts of a condition, parentheses removed."""
    out: list[exp.Expr] = []
    stack = [node]                  # (a loop: a chain of thousands of ANDs is one level)
    while stack:
        n = stack.pop()
        if n is None:
            continue
        while isinstance(n, exp.Paren):
            n = n.this
        if isinstance(n, exp.And):
            stack.append(n.expression)
            stack.append(n.this)
        else:
            out.append(n)
    return out


def filtered(rel: Rel, preds: list[Expr]) -> Rel:
    """``rel`` under the conjunction of ``preds`` (itself when there are none)."""
    pred = conjunction(preds)
    return rel if pred is None else Filter(rel, pred)


class Layout:
    """Where each FROM item's columns sit in the concatenated scope."""

    def __init__(self, items: list[FromItem]) -> None:
        self.offsets: list[int] = []
        fields: list[Field] = []
        for it in items:
            self.offsets.append(len(fields))
            fields += it.scope.fields
        self.scope = Scope(fields)

    def items_of(self, e: Expr) -> set[int]:
        """The indexes of the items whose columns ``e`` reads."""
        return {bisect_right(self.offsets, c) - 1 for c in columns_used(e)}

    def prefix(self, k: int, items: list[FromItem]) -> Scope:
        """The scope of items 0 to ``k`` (what item ``k``'s ON condition can name)."""
        return Scope(self.scope.fields[:self.offsets[k] + len(items[k].scope)])


def join_items(ctx: Context, items: list[FromItem], where: list[Expr]) -> tuple[Rel, Scope]:
    """Join the FROM items, placing each WHERE conjunct (over the full scope) as early
    as it can go without changing the result. Comma joins are reordered so that each
    item joins on an equality with those before it where one exists (a cross product
    of many tables would otherwise be kept as state); the columns keep FROM order."""
    order = _join_order(items, where)
    if order is None:
        return _join_in_order(ctx, items, where)
    layout = Layout(items)
    moved = [items[i] for i in order]
    new_layout = Layout(moved)
    new_start = {i: new_layout.offsets[k] for k, i in enumerate(order)}

    def to_new(c: int) -> int:
        i = bisect_right(layout.offsets, c) - 1
        return new_start[i] + (c - layout.offsets[i])

    rel, _ = _join_in_order(ctx, moved, [remap(c, to_new) for c in where])
    back = [to_new(c) for c in range(len(layout.scope))]
    cols = tuple(rel.columns[c] for c in back)
    return Project(rel, tuple(Col(c, rel.columns[c].type, rel.columns[c].name)
                              for c in back), cols), layout.scope


def _join_order(items: list[FromItem], where: list[Expr]) -> list[int] | None:
    """A greedy order for a FROM list of comma joins (None: keep the written order)."""
    if len(items) < 3 or any(it.kind not in ("first", "inner") or
                             (it.join is not None and it.join.args.get("on") is not None)
                             for it in items):
        return None
    layout = Layout(items)
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
        pick = next((i for i in left
                     if any(i in link and (link - {i}) <= done for link in links)),
                    left[0])
        order.append(pick)
        left.remove(pick)
    return None if order == list(range(len(items))) else order


def _join_in_order(ctx: Context, items: list[FromItem], where: list[Expr]) -> tuple[Rel, Scope]:
    layout = Layout(items)
    pushed: list[list[Expr]] = [[] for _ in items]   # filters on an item's own input
    at_step: list[list[Expr]] = [[] for _ in items]  # candidates when item k joins
    top: list[Expr] = []
    for c in where:
        its = layout.items_of(c)
        if not its:
            top.append(c)
        elif len(its) == 1 and items[min(its)].kind != "left":
            i = min(its)
            base = layout.offsets[i]        # remap applies the lambda at once
            pushed[i].append(remap(c, lambda x: x - base))
        else:
            at_step[max(its)].append(c)

    acc = filtered(items[0].rel, pushed[0])
    for k in range(1, len(items)):
        it = items[k]
        off = layout.offsets[k]

        def local(x: int, o: int = off) -> int:
            return x - o

        right = filtered(it.rel, pushed[k])
        on_node = it.join.args.get("on") if it.join is not None else None
        tr = Translator(ctx, layout.prefix(k, items), clause="ON")
        on = [(tr.condition(p), p) for p in and_parts(on_node)]
        keys: list[tuple[Expr, Expr]] = []
        right_preds: list[Expr] = []
        post: list[Expr] = []
        if it.kind == "left":
            for c, src in on:
                its = layout.items_of(c)
                pair = split_eq(layout, c, k)
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
                pair = split_eq(layout, c, k)
                if its == {k}:
                    right_preds.append(remap(c, local))
                elif pair is not None:
                    keys.append(pair)
                else:
                    post.append(c)
        right = filtered(right, right_preds)
        joined = equi_join(acc, right, it.kind, keys)
        acc = filtered(joined, post)
    return filtered(acc, top), layout.scope


def split_eq(layout: Layout, c: Expr, k: int) -> tuple[Expr, Expr] | None:
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


def equi_join(left: Rel, right: Rel, kind: str, keys: list[tuple[Expr, Expr]]) -> Rel:
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
    """``rel`` with the ``extra`` expressions appended as columns."""
    if not extra:
        return rel
    cols = rel.columns
    exprs = tuple(Col(i, c.type, c.name) for i, c in enumerate(cols)) + tuple(extra)
    new = tuple(ColumnInfo(f"key{i}", e.type, nullable(e, cols)) for i, e in enumerate(extra))
    return Project(rel, exprs, cols + new)
