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
  row of markers sorts first and is never cut, ops/topk.py), aggregates grouped by
  the read's key and joins on keys whose side holds every key column, between the
  filter and the reader. In an aggregate the kept row joins its key's group, whose
  aggregates of the row's other columns are then the marker, COUNT(*) too (told by
  ``count_probe``'s column; where there is none, nothing is kept: COUNT(*) would
  count the row). A join passes the kept row on with the key's columns (``lp.Join.keep``,
  ops/join.py), matched or not, its other columns the marker (unless the key holds
  the join key: the row is then joined as any other).
- Only where a column of the read, not a key column, is a plain column of the
  filter's row (or an aggregate of one, or COUNT(*), or the other side of a join):
  that column carries the marker to the read. Where the read names only the key, a
  hidden column is added to carry it (``_carrier``: one never the marker in another
  row), which the reader tests (its ``probe``, ops/reader.py).

Where no rule holds, the row of markers reaches the reader with the marker for its
key, and the reader fails every read by key while it holds it (ops/reader.py): as
PostgreSQL does where it must evaluate the division to find any key's rows.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sql_frontend import plan as lp
from sql_frontend.expr import Call, Col
from sql_frontend.plan import divides


def keep_key_columns(query: lp.Query) -> tuple[lp.Rel, int | None]:
    """``query.root``, its dividing filters under the reader made to keep the key's
    columns in a row of markers where the rules above allow; else ``query.root``. And
    the reader's probe: the position of a hidden column added to carry the marker
    where the read names only the key (``carrier``), else None."""
    root = _keep(query.root, query.key, query.visible)
    if root is not query.root or not query.key or not divides(query.root):
        return root, None       # (kept, or nothing to keep)
    carried = _carrier(query)
    if carried is None:
        return root, None
    wider, probe = carried
    return _keep(wider, query.key, query.visible, frozenset({probe})), probe


def _carrier(query: lp.Query) -> tuple[lp.Rel, int] | None:
    """Where no visible column of a read by key carries the marker (every one the key,
    or computed): the root, a projection, with one more column (hidden, at the end)
    that is a column of its input never the marker but in a row of markers (``safe``)
    and that carries it down to a dividing filter, and that column's position; or
    None."""
    root = query.root
    if not isinstance(root, lp.Project):
        return None
    safe = _all_facts(root.input, _safe_of)
    if safe is None:
        return None
    used = {e.index for e in root.exprs if isinstance(e, Col)}
    for c in sorted(safe[2] - used):
        col = root.input.columns[c]
        exprs = root.exprs + (Col(c, col.type, col.name),)
        wider = dataclasses.replace(root, exprs=exprs, columns=root.columns + (col,))
        if _keep(wider, query.key, query.visible, frozenset({len(root.exprs)})) is not wider:
            return wider, len(root.exprs)
    return None


def _keep(top: lp.Rel, read_key: tuple[int, ...], visible: int,
          extra: frozenset[int] = frozenset()) -> lp.Rel:
    """``top`` with the dividing filters of its chain keeping the key (the module
    docstring); ``extra``: hidden columns that carry the marker too."""
    if not read_key:
        return top
    key = frozenset(read_key)
    carriers = (frozenset(range(visible)) | extra) - key
    # down the chain of projections, DISTINCTs, filters, aggregates, TopKs and joins:
    # each with the columns of its output that are the key and that would carry the
    # marker, and the field of it that the chain goes down
    Chained = lp.Project | lp.Distinct | lp.Filter | lp.Aggregate | lp.TopK | lp.Join
    chain: list[tuple[Chained, frozenset[int], frozenset[int], str]] = []
    rel: lp.Rel = top
    while isinstance(rel, (lp.Project, lp.Distinct, lp.Filter, lp.Aggregate, lp.TopK,
                           lp.Join)):
        if isinstance(rel, lp.Join):
            down = _down_join(rel, key, carriers)
            if down is None:
                break
            side, key, carriers = down
            chain.append((rel, frozenset(_key_of(rel, side, key)), frozenset(), side))
            rel = getattr(rel, side)
            continue
        chain.append((rel, key, carriers, "input"))
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
    for link, key, carriers, side in reversed(chain):
        out: lp.Rel = link
        if isinstance(link, lp.Filter):
            below_divides = below_divides or divides(link.predicate)
            if carriers - key and below_divides:
                out = dataclasses.replace(link, input=inner, keep=tuple(sorted(key)))
            elif inner is not link.input:
                out = dataclasses.replace(link, input=inner)
        elif isinstance(link, lp.Join):
            if inner is not getattr(link, side):    # (its side keeps: so does the join)
                kept = tuple(sorted(key))
                out = dataclasses.replace(link, left=inner, keep=kept) if side == "left" \
                    else dataclasses.replace(link, right=inner, keep=kept)
            below_divides = below_divides or divides(link)
        elif inner is not link.input:
            out = dataclasses.replace(link, input=inner)
        if isinstance(out, lp.Aggregate) and out is not link and count_probe(out.input) is None \
                and any(a.func == "count_star" for a in out.aggs):
            return top      # (its COUNT(*) would count the kept row: not safe)
        inner = out
    return inner


def _down_join(rel: lp.Join, key: frozenset[int], carriers: frozenset[int]
               ) -> tuple[str, frozenset[int], frozenset[int]] | None:
    """Through a join on keys whose read's key is on one side: that side's field, and
    the key and carriers in its columns; None where the chain stops. A row of markers
    of that side is passed on with the marker in every other column (ops/join.py), so
    a column of the other side carries it too where the side's join key is the marker
    in it (not a key column) and the row is not padded with NULLs instead (the left
    side of a left join)."""
    if not rel.left_keys or not key:
        return None
    lw = len(rel.left.columns)
    if all(k < lw for k in key):
        side, at, join_keys, other = "left", 0, rel.left_keys, frozenset(c for c in carriers
                                                                          if c >= lw)
    elif all(k >= lw for k in key):
        side, at, join_keys, other = "right", lw, rel.right_keys, frozenset(c for c in carriers
                                                                           if c < lw)
    else:
        return None
    width = len(getattr(rel, side).columns)
    side_key = frozenset(k - at for k in key)
    side_carriers = frozenset(c - at for c in carriers if 0 <= c - at < width)
    if other and not side_key & set(join_keys) and (rel.kind == "inner" or side == "right"):
        side_carriers |= frozenset(join_keys)
    return side, side_key, side_carriers


def _key_of(rel: lp.Join, side: str, side_key: frozenset[int]) -> list[int]:
    """The output positions of a side's key columns."""
    at = 0 if side == "left" else len(rel.left.columns)
    return [k + at for k in side_key]


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
    top = _all_facts(rel)
    if top is None:
        return None
    _, marked, safe = top
    both = marked & safe
    return min(both) if both else None


def _all_facts(rel: lp.Rel, of: "Callable[[lp.Rel, list[_Facts]], _Facts | None] | None" = None
               ) -> "_Facts | None":
    """``count_probe``'s (P, M, S) of ``rel`` (``of`` each relation's from its
    inputs', ``_facts`` by default), None where not known."""
    of = of or _facts
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
        facts[id(r)] = None if any(b is None for b in below) else of(r, below)  # type: ignore[arg-type]
    return facts[id(rel)]


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
            return lp_ or rp, every - frozenset(r.keep), safe
        if rp and not set(r.right_keys) <= rm:
            return None
        # a left row of markers matches nothing: padded with NULLs on the right
        marked = lm if lp_ else every
        return lp_ or rp, marked - frozenset(r.keep), safe
    if isinstance(r, lp.Union_):
        return (any(b[0] for b in below), frozenset.intersection(*(b[1] for b in below)),
                frozenset.intersection(*(b[2] for b in below)))
    return None


def _safe_of(r: lp.Rel, below: list[_Facts]) -> _Facts | None:
    """``_facts``, where only S counts (the columns never the marker but in a row of
    markers), and known through aggregates too: a group column of a safe column, an
    aggregate of one, COUNT(*) (the marker only where a row of markers is counted, a
    group whose read fails in PostgreSQL too)."""
    if isinstance(r, lp.Aggregate):
        safe = below[0][2]
        width = len(r.group_by)
        s = {i for i, g in enumerate(r.group_by) if g in safe}
        s |= {width + j for j, a in enumerate(r.aggs) if a.arg is None or a.arg in safe}
        return True, frozenset(), frozenset(s)
    if isinstance(r, lp.Join) and not r.left_keys:
        ls, rs = below[0][2], below[1][2]
        return True, frozenset(), ls | frozenset(j + len(r.left.columns) for j in rs)
    out = _facts(r, below)
    if out is None and isinstance(r, lp.Join):     # (rows of markers not known: S is)
        return True, frozenset(), below[0][2] | frozenset(j + len(r.left.columns)
                                                          for j in below[1][2])
    return out
