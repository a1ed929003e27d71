"""The name PostgreSQL gives a result column the query did not name.

The engine names such a column as written (``COUNT(*)``, ``a + 1``: the name an outer
query quotes to read it); PostgreSQL names it after what it is (its rules are
``FigureColname`` in its parser): a column reference by the column, a function call
by the function (``count``, ``upper``), a cast by what it casts (or, for a constant,
by the type), ``CASE`` as ``case``, and anything else ``?column?``. The PostgreSQL
front end shows the second, so that ``row.count`` or a DataFrame's ``count`` column
means what it does against PostgreSQL.

``postgres_column_name(name)`` reads the engine's name back as an expression, and
renames it only if it is exactly how the engine writes that expression
(``select._select_item`` names an unnamed column ``expression.sql()``): a name given
with ``AS`` (``"Total votes"``) stays, unless it is written exactly so (``AS "a + 1"``).
"""
from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

#: PostgreSQL's names of the types a constant may be cast to (``SELECT 1::int`` is "int4")
_TYPE_NAMES = {
    exp.DataType.Type.INT: "int4", exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.SMALLINT: "int2", exp.DataType.Type.TEXT: "text",
    exp.DataType.Type.VARCHAR: "varchar", exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.FLOAT: "float4", exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.DATE: "date", exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz", exp.DataType.Type.DECIMAL: "numeric",
}


@lru_cache(maxsize=4096)
def postgres_column_name(name: str) -> str:
    """PostgreSQL's name for a result column the engine calls ``name``."""
    try:
        node = sqlglot.parse_one(name)
    except SqlglotError:
        return name
    if isinstance(node, exp.Column) or node.sql() != name:
        return name                     # a column, or a name given with AS
    return _figure(node) or "?column?"


def _figure(node: exp.Expr) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, (exp.Cast, exp.TryCast)):
        inner = _figure(node.this)
        if inner is not None:
            return inner
        to = node.args.get("to")
        return _TYPE_NAMES.get(to.this) if isinstance(to, exp.DataType) else None
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Anonymous):
        if node.name.upper() in ("PG_DIV", "PG_MOD"):   # ``a / b`` as postgres_division writes it
            return None
        if node.name.upper() == "PG_AVG":               # ``AVG(x)``, as it writes that
            return "avg"
        return node.name.lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None
