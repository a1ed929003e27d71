"""Total orders over rows that may hold NULLs and NaNs, for ORDER BY, TopK and
deterministic output.

Python cannot compare None with a number, a NaN compares neither below nor above
anything (a sort, or a sorted container, holding one comes out in no order at all),
and a TopK must break ties the same way in every run (replay depends on it), so every
sort goes through these keys. Each value becomes (rank, value): NULLs rank first or
last as ORDER BY says (first ascending, last descending, by default: SQLite's order),
NaN ranks above every other value, as in PostgreSQL (after +inf ascending, first
descending), and the values between compare as themselves (noria_py.nan). The
division-by-zero marker (noria_py/divzero.py), which has no order, ranks with NaN.
"""
from __future__ import annotations

from typing import Callable, Sequence

from sql_frontend.plan import OrderKey

from .divzero import DIV0


class _Desc:
    """Wraps a value so that it sorts in reverse."""
    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return other.v < self.v

    def __gt__(self, other: "_Desc") -> bool:
        return other.v > self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.v == self.v

    def __hash__(self) -> int:
        return hash(self.v)


def row_key(row: tuple) -> tuple:
    """Any row's position in one fixed total order (NULLs first, NaN above numbers)."""
    return tuple([(0, 0) if v is None else (3, 0) if v is DIV0 else (1, v) if v == v else (2, 0)
                  for v in row])


#: ranks of a sort key's parts: NULLs first or last, NaN before (descending) or after
#: (ascending) the other values
_NULL_FIRST, _NAN_DESC, _VALUE, _NAN_ASC, _NULL_LAST = range(5)


def order_key(order: Sequence[OrderKey]) -> Callable[[tuple], tuple]:
    """Sort key for ORDER BY ``order``, ties broken by the whole row."""
    spec = [(o.column, o.descending, _NULL_FIRST if o.nulls_first else _NULL_LAST,
             (_NAN_DESC if o.descending else _NAN_ASC, 0)) for o in order]

    def key(row: tuple) -> tuple:
        parts: list[tuple] = []
        for col, desc, null_rank, nan in spec:
            v = row[col]
            if v is None:
                parts.append((null_rank, 0))
            elif v != v or v is DIV0:
                parts.append(nan)
            elif not desc:
                parts.append((_VALUE, v))
            elif isinstance(v, _NEGATED):   # (a number: its negation, compared in C)
                parts.append((_VALUE, -v))
            else:
                parts.append((_VALUE, _Desc(v)))
        parts.append(row_key(row))
        return tuple(parts)

    return key


#: the values a descending key negates rather than wraps in ``_Desc``: numbers (bools
#: and the exact AVG, a float subclass that compares as its float, included), which a
#: sorted container then compares in C (a NEXMark ``ORDER BY price DESC`` TopK spent
#: most of its time in ``_Desc``'s methods). The order is the same: a number and its
#: negation compare the other way round, exactly (ints of any size too). A column holds
#: numbers or not, so its keys are all negated or all wrapped.
_NEGATED = (int, float)
