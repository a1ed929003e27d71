"""Scalar expressions of the logical plan.

Columns are referenced by position in the input relation, so the engine never
resolves names. ``Call.op`` is one of the names in ``OPS``; the engine evaluates
them with SQL's three-valued logic (NULL is ``None``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from .types import SqlType

# op name -> meaning (args)
OPS = {
    # arithmetic; INT op INT stays INT, division truncates toward zero; x/0 and x%0 are NULL
    "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "mod": "a % b",
    "neg": "-a",
    # the PostgreSQL front end's / and % (PG_DIV, PG_MOD): the same, but x/0 and x%0 are
    # the engine's division-by-zero marker instead of NULL (noria_py/divzero.py)
    "pgdiv": "a / b", "pgmod": "a % b",
    # comparisons, NULL if either side is NULL
    "eq": "a = b", "ne": "a <> b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
    # three-valued logic
    "and": "a AND b AND ...", "or": "a OR b OR ...", "not": "NOT a",
    "is_null": "a IS NULL", "is_not_null": "a IS NOT NULL",
    # searched CASE: (cond1, val1, cond2, val2, ..., else_value); else is Lit(None) if absent
    "case": "CASE WHEN c1 THEN v1 ... ELSE e END",
    "coalesce": "COALESCE(a, b, ...)", "nullif": "NULLIF(a, b)", "abs": "ABS(a)",
    # (x, v1, v2, ...): TRUE if x equals some v, else NULL if x or any v is NULL, else FALSE
    "in": "x IN (v1, v2, ...)",
    "like": "a LIKE pattern  (% and _; case-sensitive)",
    "concat": "a || b  (NULL if either is NULL)",
    "cast": "CAST(a AS type)  (Call.type is the target type)",
    "lower": "LOWER(a)", "upper": "UPPER(a)", "length": "LENGTH(a)",
}


@dataclass(frozen=True)
class Col:
    index: int                 # position in the input relation's columns
    type: SqlType
    name: str = ""             # for messages only


@dataclass(frozen=True)
class Lit:
    value: Any                 # a Python value of ``type`` (None for NULL)
    type: SqlType


@dataclass(frozen=True)
class Call:
    op: str                    # a key of OPS
    args: tuple["Expr", ...]
    type: SqlType              # result type


Expr = Union[Col, Lit, Call]


def columns_used(e: Expr) -> set[int]:
    """The input column positions an expression reads."""
    if isinstance(e, Col):
        return {e.index}
    if isinstance(e, Call):
        out: set[int] = set()
        for a in e.args:
            out |= columns_used(a)
        return out
    return set()
