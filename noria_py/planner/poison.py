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
- Only through projections of plain columns, filters and DISTINCT between the filter
  and the reader: an aggregate would count the kept row in its key's group (COUNT does
  not see the marker), a TopK could cut it, a join could match it.
- Only where a visible column of the read, not a key column, is a plain column of the
  filter's row: that column carries the marker to the read (a read whose every column
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
    # down the chain of projections, DISTINCTs and filters: each with the columns of
    # its output that are the key and that would carry the marker
    Chained = lp.Project | lp.Distinct | lp.Filter
    chain: list[tuple[Chained, frozenset[int], frozenset[int]]] = []
    rel: lp.Rel = query.root
    while isinstance(rel, (lp.Project, lp.Distinct, lp.Filter)):
        chain.append((rel, key, carriers))
        if isinstance(rel, lp.Project):
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
        inner = out
    return inner
