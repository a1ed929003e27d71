"""Name resolution: which input column a SQL name means, and the per-statement context.

Plans refer to columns by position, so every name is resolved here against a
``Scope``: the columns of the relation being built, each tagged with the table
alias it came from. Keeping our own scope (rather than sqlglot's ``qualify``) lets
errors name the missing or ambiguous column at its position, and lets the same
scope follow the plan as joins concatenate inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from .catalog import Catalog
from .errors import SqlError, UnknownColumnError, UnsupportedError
from .parse import position
from .types import ColumnInfo, SqlType


@dataclass
class Context:
    """What every stage of one statement needs: the text (for positions), the catalog,
    and the values bound to ``?`` placeholders (by node identity) where binding is allowed."""
    sql: str
    catalog: Catalog
    bound: dict[int, Any] = field(default_factory=dict)
    views_read: set[str] = field(default_factory=set)    # views named in FROM, lower case
    #: whether ``col < ?`` and the like may be range parameters (``Query.bounds``)
    ranges: bool = True

    def pos(self, node: exp.Expr | None) -> tuple[int, int] | None:
        return position(self.sql, node)

    def unsupported(self, what: str, node: exp.Expr | None) -> UnsupportedError:
        return UnsupportedError(f"unsupported: {what}", self.sql, self.pos(node))

    def error(self, cls: type[SqlError], message: str, node: exp.Expr | None) -> SqlError:
        return cls(message, self.sql, self.pos(node))


def placeholders_in_order(node: exp.Expr) -> list[exp.Placeholder]:
    """The ``?`` of a statement in the order they appear in the text."""
    found = [p for p in node.find_all(exp.Placeholder)]
    return sorted(found, key=lambda p: p.meta.get("start", 0))


@dataclass(frozen=True)
class Field:
    """One column visible to names: ``qualifier`` is the lower-case table alias (None
    for columns of an unaliased derived table)."""
    qualifier: str | None
    name: str
    type: SqlType
    nullable: bool = True

    def info(self) -> ColumnInfo:
        return ColumnInfo(self.name, self.type, self.nullable)


class Scope:
    """The columns a clause can name, in relation order."""

    def __init__(self, fields: list[Field]) -> None:
        self.fields = list(fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __add__(self, other: "Scope") -> "Scope":
        return Scope(self.fields + other.fields)

    def qualifiers(self) -> set[str]:
        return {f.qualifier for f in self.fields if f.qualifier is not None}

    def find(self, name: str, qualifier: str | None) -> list[int]:
        name_l = name.lower()
        q = qualifier.lower() if qualifier else None
        return [i for i, f in enumerate(self.fields)
                if f.name.lower() == name_l and (q is None or f.qualifier == q)]

    def resolve(self, ctx: Context, column: exp.Column) -> int:
        """The position ``column`` names; UnknownColumnError if none or several."""
        if column.args.get("db") or column.args.get("catalog"):
            raise ctx.unsupported(f"schema-qualified column {column.sql()}", column)
        qualifier = column.table or None
        hits = self.find(column.name, qualifier)
        if len(hits) == 1:
            return hits[0]
        shown = column.sql()
        if not hits:
            if qualifier and qualifier.lower() not in self.qualifiers():
                raise ctx.error(UnknownColumnError,
                                f"no such column: {shown} (no table or alias {qualifier!r} "
                                f"in this FROM clause)", column)
            raise ctx.error(UnknownColumnError, f"no such column: {shown}", column)
        raise ctx.error(UnknownColumnError, f"ambiguous column name: {shown}", column)


_CLAUSE_NAMES = {"with_": "WITH (common table expressions)", "laterals": "LATERAL",
                 "qualify": "QUALIFY", "windows": "WINDOW clause", "into": "SELECT INTO",
                 "pivots": "PIVOT", "connect": "CONNECT BY", "sample": "TABLESAMPLE",
                 "returning": "RETURNING", "conflict": "ON CONFLICT", "alternative": "OR ...",
                 "from_": "FROM", "order": "ORDER BY", "limit": "LIMIT"}


def check_clauses(ctx: Context, node: exp.Expr, allowed: set[str]) -> None:
    """Reject any clause of ``node`` outside ``allowed``: sqlglot parses far more than
    the plan can express, and an ignored clause would silently change the meaning."""
    for key, value in node.args.items():
        if key in allowed or value is None or value is False or value == [] or value == "":
            continue
        what = _CLAUSE_NAMES.get(key, key.rstrip("_").upper())
        raise ctx.unsupported(what, value if isinstance(value, exp.Expr) else node)
