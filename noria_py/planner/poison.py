"""A read by key finds the row whose WHERE divided by zero (noria_py/divzero.py).

A WHERE whose condition is PostgreSQL's division-by-zero marker keeps its row as a
row of markers (ops/filter.py), so that a read returning it fails with 22012 as
PostgreSQL's would. A row of markers has no key, though, and PostgreSQL evaluates a
lookup ``SELECT ... FROM v WHERE key = $1`` by testing ``key = $1`` first (the
cheaper qual, or the index's) and the view's WHERE only for that key's rows: it fails
exactly when a row of that key meets the zero divisor. So before a keyed view is built,
``keep_key_columns`` gives each filter under its reader the key's columns to keep as
they are in a row of markers (``lp.Filter.keep``): the row stays under its key, and a
lookup of that key returns it and fails, while other keys read as usual.

Rules, each of which keeps the old behaviour (every column the marker) where it does not
hold, since the old behaviour is never silently wrong for a whole read:

- Only filters whose subtree divides as PostgreSQL does (``pgdiv``/``pgmod``: views
  made by the front end), so the Python API's plans, and the nodes they share, are
  unchanged; the keeping filter is a relation of its own (``keep`` is part of its
  value), a node apart from the unkeyed view's.
- Only through projections of plain columns, filters, DISTINCT, TopKs (``LIMIT``: a
  row of markers sorts first and is never cut, ops/topk.py) and aggregates grouped by
  the read's key between the filter and the reader: a join could match the kept row. In an aggregate the kept row joins its key's group, whose
  aggregates of the row's other columns are then the marker, COUNT(*) too (told by
  ``count_probe``'s column; where there is none, nothing is kept: COUNT(*) would count
  the row).
- Only where a visible column of the read, not a key column, is a plain column of the
  filter's row (or an aggregate of one, or COUNT(*)): that column carries the marker
  to the read (a read whose every column
  is the key would otherwise return the kept row as a good one).
"""
from __future__ import annotations

import dataclasses

from sql_frontend import plan as lp
from sql_frontend.expr import Call, Col


def divides(rel: object) -> bool:
    """Whether ``rel`` (a relation or an expression) or anything under it divides as
    PostgreSQL does (without recursion: views over views nest deep)."""
    todo: list[object] = [rel]
    seen: set[int] = set()
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Call):
            if x.op in ("pgdiv", "pgmod"):
                return True
            todo.extend(x.args)
        elif isinstance(x, tuple):
            todo.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (Col, type)):
            todo.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return False


def keep_key_columns(query: lp.Query) -> lp.Rel:
    """``query.root``, its dividing filters under the reader made to keep the key's
    columns in a row of markers where the rules above allow; else ``query.root``.
    (A loop, not a recursion: a chain of views read by key can be deep.)"""
    if not query.key:
        return query.root
    key = frozenset(query.key)
    carriers = frozenset(range(query.visible)) - key
    # down the chain of projections, DISTINCTs, filters and aggregates: each with the
    # columns of its output that are the key and that would carry the marker
    Chained = lp.Project | lp.Distinct | lp.Filter | lp.Aggregate | lp.TopK
    chain: list[tuple[Chained, frozenset[int], frozenset[int]]] = []
    rel: lp.Rel = query.root
    while isinstance(rel, (lp.Project, lp.Distinct, lp.Filter, lp.Aggregate, lp.TopK)):
        chain.append((rel, key, carriers))
        if isinstance(rel, lp.Aggregate):
            width = len(rel.group_by)
            if not all(k < width for k in key):
                chain.pop()
                break
            below = frozenset(rel.group_by[k] for k in key)
            args: set[int] = set()
            for c in carriers:      # a group column, an aggregate of a carrier, COUNT(*)
                if c < width:
                    args.add(rel.group_by[c])
                elif (arg := rel.aggs[c - width].arg) is not None:
                    args.add(arg)
                elif rel.aggs[c - width].func == "count_star":
                    args.update(range(len(rel.input.columns)))
            carriers, key = frozenset(args) - below, below
        elif isinstance(rel, lp.Project):
            exprs = rel.exprs
            if not all(isinstance(exprs[k], Col) for k in key):
                chain.pop()
                break
            below = frozenset(exprs[k].index for k in key)      # type: ignore[union-attr]
            carriers = frozenset(exprs[c].index for c in carriers  # type: ignore[union-attr]
                                 if isinstance(exprs[c], Col)) - below
            key = below
        rel = rel.input
    # back up: each filter that divides (or has a division below it) keeps the key
    below_divides = divides(rel)
    inner: lp.Rel = rel
    for link, key, carriers in reversed(chain):
        out: lp.Rel = link
        if isinstance(link, lp.Filter):
            below_divides = below_divides or divides(link.predicate)
            if carriers - key and below_divides:
                out = dataclasses.replace(link, input=inner, keep=tuple(sorted(key)))
            elif inner is not link.input:
                out = dataclasses.replace(link, input=inner)
        elif inner is not link.input:
            out = dataclasses.replace(link, input=inner)
        if isinstance(out, lp.Aggregate) and out is not link and count_probe(out.input) is None \
                and any(a.func == "count_star" for a in out.aggs):
            return query.root       # (its COUNT(*) would count the kept row: not safe)
        inner = out
    return inner


def count_probe(rel: lp.Rel) -> int | None:
    """A column of ``rel``'s rows that is the marker in every row of markers ``rel``
    may give, and never in another row; None if none is known. An aggregate over a plan
    that divides as PostgreSQL does passes it to COUNT(*) (ops/aggregate.py), which is
    the marker while its group holds such a row: PostgreSQL's COUNT(*) fails there (it
    evaluates the WHERE of every row it counts), where counting the row would give a
    wrong count. COUNT(x) needs none: x is the marker in such a row.

    Each relation is read as three facts about its rows: whether it may give rows of
    markers (``P``), the columns that are the marker in every row of markers it gives
    (``M``; all of them when it gives none) and the columns that are never the marker
    in its other rows (``S``: a base table's columns, a literal; not a computed
    column, whose division may have met a zero). Only the shapes whose rows of markers
    are known are read: scans, filters, projections, DISTINCT, LIMIT, a join on keys,
    UNION ALL, VALUES; anything else gives None (COUNT(*) then counts such a row, a
    documented limit: docs/postgres.md). Without recursion: views nest deep."""
    facts: dict[int, tuple[bool, frozenset[int], frozenset[int]] | None] = {}
    todo: list[tuple[lp.Rel, bool]] = [(rel, False)]
    while todo:
        r, ready = todo.pop()
        if id(r) in facts:
            continue
        inputs: list[lp.Rel] = [getattr(r, f) for f in ("input", "left", "right")
                                if hasattr(r, f)]
        inputs += list(getattr(r, "inputs", ()))
        if not ready:
            todo.append((r, True))
            todo.extend((i, False) for i in inputs if id(i) not in facts)
            continue
        below = [facts[id(i)] for i in inputs]
        facts[id(r)] = None if any(b is None for b in below) else _facts(r, below)  # type: ignore[arg-type]
    top = facts[id(rel)]
    if top is None:
        return None
    _, marked, safe = top
    both = marked & safe
    return min(both) if both else None


_Facts = tuple[bool, frozenset[int], frozenset[int]]


def _facts(r: lp.Rel, below: list[_Facts]) -> _Facts | None:
    """``count_probe``'s (P, M, S) of ``r``, from its inputs'."""
    every = frozenset(range(len(r.columns)))
    if isinstance(r, (lp.Scan, lp.Values)):
        return False, every, every
    if isinstance(r, lp.Filter):            # a fresh row of markers keeps only ``keep``
        _, marked, safe = below[0]
        return True, marked - frozenset(r.keep), safe
    if isinstance(r, (lp.Distinct, lp.TopK)):
        return below[0]
    if isinstance(r, lp.Project):
        makes, marked, safe = below[0]
        m = {i for i, x in enumerate(r.exprs)
             if not makes or (isinstance(x, Col) and x.index in marked)}
        s = {i for i, x in enumerate(r.exprs)
             if (isinstance(x, Col) and x.index in safe) or not isinstance(x, (Col, Call))}
        return makes, frozenset(m), frozenset(s)
    if isinstance(r, lp.Join) and r.left_keys:
        (lp_, lm, ls), (rp, rm, rs) = below
        lw = len(r.left.columns)
        safe = ls | frozenset(j + lw for j in rs)
        if r.kind == "inner":
            # a side's row of markers, its join key the marker: a full row of markers
            if (lp_ and not set(r.left_keys) <= lm) or (rp and not set(r.right_keys) <= rm):
                return None
            return lp_ or rp, every, safe
        if rp and not set(r.right_keys) <= rm:
            return None
        # a left row of markers matches nothing: padded with NULLs on the right
        marked = lm if lp_ else every
        return lp_ or rp, marked, safe
    if isinstance(r, lp.Union_):
        return (any(b[0] for b in below), frozenset.intersection(*(b[1] for b in below)),
                frozenset.intersection(*(b[2] for b in below)))
    return None
