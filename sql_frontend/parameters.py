"""Parameters written the PostgreSQL way (``$1``, ``$2``), and the type each ``?`` of a
statement takes from where it stands.

``positional(sql)`` rewrites ``$n`` to ``?`` (padded with spaces, so every error's
line and column still point into the text the user wrote) and says which ``$n`` each
``?`` is; a ``$n`` inside a string, a quoted name or a comment is left alone.

``parameter_types(sql, catalog)`` is what a PostgreSQL server answers in a
ParameterDescription: for each ``?`` the type its context gives it, or None where
nothing does (the caller then takes the value as text). The context is the other side
of a comparison, arithmetic, ``IN`` or ``BETWEEN`` when that is a column of a table or
view the statement names; the target column of an INSERT's VALUES or an UPDATE's SET;
the type of a ``CAST``/``::``; INT for LIMIT and OFFSET. It reads the syntax only: a
statement it cannot type still runs, and the plan checks the values then.
"""
from __future__ import annotations

import re

from sqlglot import exp

from .catalog import Catalog
from .errors import ParseError
from .parse import parse_statements
from .resolve import placeholders_in_order
from .typerules import declared_type
from .types import SqlType

_TOKEN = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|/\*.*?(?:\*/|$)|\$(\d+)""",
                    re.S)


def positional(sql: str) -> tuple[str, list[int]]:
    """``sql`` with each ``$n`` as ``?``, and the n of each ``?`` in order of appearance
    (1-based). A statement mixing ``$n`` and ``?`` is refused."""
    order: list[int] = []

    def swap(m: re.Match) -> str:
        if m.group(1) is None:
            return m.group(0)
        order.append(int(m.group(1)))
        return "?" + " " * (len(m.group(0)) - 1)

    out = _TOKEN.sub(swap, sql)
    if order and "?" in _TOKEN.sub(lambda m: " " * len(m.group(0)), sql):
        raise ParseError("a statement takes $n parameters or ? parameters, not both", sql, None)
    if any(n < 1 for n in order):
        raise ParseError("parameters are numbered from $1", sql, None)
    return out, order


def parameter_types(sql: str, catalog: Catalog) -> list[SqlType | None]:
    """The type of each ``?`` in ``sql`` from its context (module docstring)."""
    trees = parse_statements(sql)
    if len(trees) != 1:
        return []
    node = trees[0]
    marks = placeholders_in_order(node)
    columns = _columns(node, catalog)
    return [_context_type(m, node, columns) for m in marks]


def _columns(node: exp.Expr, catalog: Catalog) -> dict[tuple[str | None, str], SqlType | None]:
    """(qualifier, column) and (None, column) of every table or view ``node`` names, to
    the column's type (None where one name has two types)."""
    out: dict[tuple[str | None, str], SqlType | None] = {}

    def put(key: tuple[str | None, str], t: SqlType) -> None:
        out[key] = t if out.get(key, t) == t else None

    for table in node.find_all(exp.Table):
        name = table.name.lower()
        alias = (table.alias_or_name or name).lower()
        pairs: list[tuple[str, SqlType]] = []
        schema = catalog.table(name)
        if schema is not None:
            pairs = [(c.name, c.type) for c in schema.columns]
        else:
            view = catalog.view(name)
            if view is not None:
                pairs = [(n, view.root.columns[i].type) for i, n in enumerate(view.names)]
        for col, t in pairs:
            put((alias, col.lower()), t)
            put((None, col.lower()), t)
    return out


_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
             exp.NullSafeNEQ, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def _column_type(col: exp.Expr, columns: dict) -> SqlType | None:
    if not isinstance(col, exp.Column):
        return None
    qual = col.table.lower() if col.table else None
    return columns.get((qual, col.name.lower()))


def _context_type(mark: exp.Placeholder, root: exp.Expr, columns: dict) -> SqlType | None:
    parent = mark.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Cast):
        return declared_type(parent.to)
    if isinstance(parent, (exp.Limit, exp.Offset, exp.Fetch)):
        return SqlType.INT
    if isinstance(parent, _COMPARED):
        other = parent.left if parent.right is mark else parent.right
        if isinstance(parent.parent, exp.Update) and parent in parent.parent.expressions:
            other = parent.left
        return _column_type(other, columns)
    if isinstance(parent, (exp.In, exp.Between)):
        return _column_type(parent.this, columns)
    if isinstance(parent, exp.Anonymous) and parent.name.upper() in ("PG_DIV", "PG_MOD") \
            and len(parent.expressions) == 2:   # ``a / b`` as postgres_division writes it
        left, right = parent.expressions
        return _column_type(left if right is mark else right, columns)
    if isinstance(parent, exp.Tuple) and isinstance(root, exp.Insert):
        position = next(i for i, e in enumerate(parent.expressions) if e is mark)
        return _insert_target(root, position, columns)
    return None


def _insert_target(insert: exp.Insert, position: int, columns: dict) -> SqlType | None:
    target = insert.this
    if isinstance(target, exp.Schema):
        names = [c.name.lower() for c in target.expressions]
        table = target.this
    else:
        names, table = [], target
    if not isinstance(table, exp.Table):
        return None
    alias = table.name.lower()
    if names:
        return columns.get((alias, names[position])) if position < len(names) else None
    ordered = [col for (qual, col) in columns if qual == alias]
    return columns.get((alias, ordered[position])) if position < len(ordered) else None
