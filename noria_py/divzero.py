"""PostgreSQL's division by zero, as a value: ``DIV0``.

PostgreSQL raises SQLSTATE 22012 when ``/`` or ``%`` meets a zero divisor (integers,
``numeric`` and ``double precision`` alike). The engine cannot raise where that
happens: an expression over rows runs in the dataflow after the write that brought the
row was accepted (noria_py/expression.py says why), and a view is read long after. So
the PostgreSQL front end's SQL divides with ``PG_DIV`` and ``PG_MOD``
(``sql_frontend.postgres_division`` writes ``a / b`` so), which give this marker where
the engine's ``/`` gives NULL (SQLite's answer, which the Python API and the
sqllogictest corpus keep), and the marker is carried to whoever reads it:

- **Expressions** pass it on: any operator with a marker operand is the marker (so are
  ``_int64``'s checks), except where PostgreSQL would not evaluate that operand: a
  CASE branch not taken, COALESCE after a non-NULL, an AND's or OR's operand after
  the deciding one (left to right, as PostgreSQL evaluates them: ``FALSE AND x``,
  ``b = 0 OR a / b > 1``) or beside a constant that decides it (``x OR TRUE``, which
  PostgreSQL folds before any row). A WHERE's top-level AND runs its conditions in
  PostgreSQL's order, cheapest first by its planner's cost model, up to the first
  FALSE or NULL (noria_py/expression.py, ``qual_order``, ``_quals``).
- **Conditions** (WHERE, HAVING, ``noria_py.ops.filter``): a row whose condition is the
  marker is kept, as a row of markers (every column the marker), so a read that returns
  it fails instead of silently missing it. Under a read by key it keeps the key's
  columns, so that read fails for that key alone, as PostgreSQL's (evaluating the
  condition for that key's rows only) does, where nothing between makes that unsafe
  (noria_py/planner/poison.py has the rules); elsewhere its key is the marker, and
  every read by key of its reader fails (ops/reader.py). A join passes it on as a row
  of markers, matched or not (ops/join.py).
- **Aggregates**: SUM, AVG, MIN, MAX and COUNT of a group are the marker while a marker
  is among its inputs (counted, so deleting that row heals the group); COUNT(*) while
  a row of markers is, told by a column that is the marker in each
  (``accumulators.PgCount``, ``planner.poison.count_probe``).
- **Writes**: a row to be written holding the marker (``INSERT ... VALUES (1 / 0)``, an
  UPDATE's new value), or a DELETE or UPDATE whose WHERE is the marker for some row,
  raises ``DivisionByZeroError`` before anything is applied: a write is all or none.
- **Reads over the wire**: the PostgreSQL session sends ErrorResponse 22012 for a
  result holding the marker, and the session goes on. The Python API shows it as is
  (``repr``: ``DIVISION_BY_ZERO``), in the few places it can meet one: ``PG_DIV``
  written by hand, or a view made through the PostgreSQL front end.

Invariants of the value, which the engine's containers rely on: one object (``DIV0``),
equal only to itself (``==`` and ``!=`` are identity, so ``list.remove``, ``in`` and a
tuple's ``==`` never mistake it for another value), with a fixed hash, and no
order of its own: ``<``, ``<=``, ``>``, ``>=`` and arithmetic with it give ``DIV0`` (how
an expression passes it on), so every sort goes through ``noria_py.ordering``'s keys,
which rank it above NaN, and MIN/MAX count it apart. msgpack carries it as extension
type 5 (``storage.codec``), so it crosses a cluster's wire and sits in checkpoints.
"""
from __future__ import annotations

from typing import Any


class DivisionByZero:
    """The type of ``DIV0``; there is one instance."""
    __slots__ = ()
    _instance: "DivisionByZero | None" = None

    def __new__(cls) -> "DivisionByZero":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DIVISION_BY_ZERO"

    def __reduce__(self) -> str:
        return "DIV0"

    def __hash__(self) -> int:
        return 0x5EED_D1F0

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    def __bool__(self) -> bool:
        return True

    def _absorb(self, *other: Any) -> "DivisionByZero":
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _absorb
    __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = _absorb
    __lt__ = __le__ = __gt__ = __ge__ = _absorb


DIV0 = DivisionByZero()


def holds_div0(rows: list[tuple]) -> bool:
    """Whether any value of ``rows`` is ``DIV0``."""
    return any(DIV0 in r for r in rows)     # (``in``: identity, then DIV0's own ==)
