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


def divides(rel: lp.Rel) -> bool:
    """Whether ``rel`` or anything under it divides as PostgreSQL does (without
    recursion: views over views nest deep)."""
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
    columns in a row of markers where the rules above allow; else ``query.root``."""
    if not query.key:
        return query.root
    key = frozenset(query.key)
    carriers = frozenset(range(query.visible)) - key
    return _keep(query.root, key, carriers)


def _keep(rel: lp.Rel, key: frozenset[int], carriers: frozenset[int]) -> lp.Rel:
    """``rel`` with its filters keeping the columns ``key`` (of ``rel``'s output), if
    some column of ``carriers`` (also of its output) is a plain column of theirs."""
    if isinstance(rel, lp.Project):
        exprs = rel.exprs
        if not all(isinstance(exprs[k], Col) for k in key):
            return rel
        below = frozenset(exprs[k].index for k in key)      # type: ignore[union-attr]
        marks = frozenset(exprs[c].index for c in carriers  # type: ignore[union-attr]
                          if isinstance(exprs[c], Col)) - below
        inner = _keep(rel.input, below, marks)
        return rel if inner is rel.input else dataclasses.replace(rel, input=inner)
    if isinstance(rel, lp.Distinct):
        inner = _keep(rel.input, key, carriers)
        return rel if inner is rel.input else dataclasses.replace(rel, input=inner)
    if isinstance(rel, lp.Filter) and carriers - key and divides(rel):
        inner = _keep(rel.input, key, carriers)
        return dataclasses.replace(rel, input=inner, keep=tuple(sorted(key)))
    return rel
