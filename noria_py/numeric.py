"""PostgreSQL's ``numeric``, where the PostgreSQL front end's SQL makes one: an AVG of
integers (``ops.accumulators.ExactAvg``) and arithmetic on it (``PgNumeric``).

The engine has no decimal type: such a value is a float (the nearest one to it), which
is what the engine computes, compares, sorts and sums with, and what the Python API
shows. It also holds its exact value, ``unscaled / 10**scale`` (``exact()``), with
``scale`` PostgreSQL's display scale, from which the front end writes PostgreSQL's text
(``3.0000000000000000``) and binary ``numeric`` (noria_py/pg/types.py).

Arithmetic follows PostgreSQL's numeric operators (src/backend/utils/adt/numeric.c)
where the other operand is an int (PostgreSQL's integers are cast to numeric of scale
0) or another such value: ``+`` and ``-`` exact at the larger scale, ``*`` exact at the
sum of the scales, ``/`` rounded half away from zero at ``select_div_scale``'s scale
(at least 16 significant digits), unary ``-`` and ``abs`` exact. With a float (PostgreSQL's
``numeric`` op ``double precision`` is ``double precision``) the answer is a plain
float (``as_float(v)`` op the float); with anything else the other operand decides (the
division-by-zero marker, noria_py/divzero.py, absorbs it). ``%`` and ``//`` are the float's (not PostgreSQL's).

Invariant: ``float(v)`` is ``exact()``'s value rounded to the nearest float, for
``PgNumeric``; an ``ExactAvg`` is its sum / count so rounded (its ``exact()`` is that
quotient at the display scale, as PostgreSQL's ``avg`` rounds it).
"""
from __future__ import annotations

from typing import Any, ClassVar

#: PostgreSQL's NUMERIC_MIN_SIG_DIGITS and NUMERIC_MAX_DISPLAY_SCALE
MIN_SIG_DIGITS = 16
MAX_DISPLAY_SCALE = 1000


def _weight(x: int) -> tuple[int, int]:
    """PostgreSQL's ``numeric`` weight of the integer ``|x|`` (its base-10000 digits
    less one) and its first base-10000 digit; (0, 0) for zero."""
    x = abs(x)
    weight = 0
    while x >= 10000:
        x //= 10000
        weight += 1
    return weight, x


def _weight_of(unscaled: int, scale: int) -> tuple[int, int]:
    """The weight and first base-10000 digit of ``unscaled / 10**scale`` as PostgreSQL
    stores it (digits aligned on the decimal point); (0, 0) for zero."""
    if unscaled == 0:
        return 0, 0
    groups = -(-scale // 4)
    weight, first = _weight(abs(unscaled) * 10 ** (4 * groups - scale))
    return weight - groups, first


def div_scale(u1: int, s1: int, u2: int, s2: int) -> int:
    """PostgreSQL's ``select_div_scale``: the scale of ``(u1 / 10**s1) / (u2 /
    10**s2)``, enough for ``MIN_SIG_DIGITS`` significant digits, never below either
    operand's scale."""
    w1, f1 = _weight_of(u1, s1)
    w2, f2 = _weight_of(u2, s2)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    return min(max(MIN_SIG_DIGITS - 4 * qweight, s1, s2, 0), MAX_DISPLAY_SCALE)


def divide(u1: int, s1: int, u2: int, s2: int) -> tuple[int, int]:
    """``(u1 / 10**s1) / (u2 / 10**s2)`` as PostgreSQL's numeric division gives it:
    (unscaled, scale), at ``div_scale``, rounded half away from zero; exact in
    integers whatever the sizes."""
    if u2 == 0:
        raise ZeroDivisionError("numeric division by zero")
    scale = div_scale(u1, s1, u2, s2)
    num = abs(u1) * 10 ** (s2 + scale)
    den = abs(u2) * 10 ** s1
    q, r = divmod(num, den)
    if 2 * r >= den:
        q += 1
    return (-q if (u1 < 0) != (u2 < 0) else q), scale


def avg_numeric(total: int, count: int) -> tuple[int, int]:
    """``total / count`` as PostgreSQL's ``avg`` of integers gives it: (``q``,
    ``scale``), the value ``q / 10**scale`` (a numeric division: ``divide``)."""
    return divide(total, 0, count, 0)


def _exact_of(o: Any) -> tuple[int, int] | None:
    """An operand as (unscaled, scale): a numeric's, an int's at scale 0; else None."""
    if isinstance(o, PgNumeric):
        return o.exact()
    if type(o) is int:
        return o, 0
    return None


def as_float(v: "PgNumeric") -> float:
    """``v`` as PostgreSQL casts a ``numeric`` to ``double precision``: its exact value
    (for an AVG, the quotient at its display scale) to the nearest float."""
    u, s = v.exact()
    return u / 10 ** s


def _add(a: tuple[int, int], b: tuple[int, int]) -> "PgNumeric":
    (u1, s1), (u2, s2) = a, b
    s = max(s1, s2)
    return PgNumeric(u1 * 10 ** (s - s1) + u2 * 10 ** (s - s2), s)


class PgNumeric(float):
    """An exact ``numeric`` (the module docstring): ``unscaled / 10**scale``."""
    __slots__ = ("_unscaled", "_scale")
    _unscaled: int
    _scale: int
    #: whether this process has made one (storage/codec.py looks for them only then)
    made: ClassVar[bool] = False

    def __new__(cls, unscaled: int, scale: int) -> "PgNumeric":
        self = super().__new__(cls, unscaled / 10 ** scale)   # (int / int: correctly rounded)
        self._unscaled, self._scale = unscaled, scale
        PgNumeric.made = True
        return self

    def exact(self) -> tuple[int, int]:
        """The value as (unscaled, scale)."""
        return self._unscaled, self._scale

    def __reduce__(self) -> tuple:
        return PgNumeric, self.exact()

    def __add__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return as_float(self) + o if isinstance(o, float) else NotImplemented
        return _add(self.exact(), e)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return as_float(self) - o if isinstance(o, float) else NotImplemented
        return _add(self.exact(), (-e[0], e[1]))

    def __rsub__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return o - as_float(self) if isinstance(o, float) else NotImplemented
        u, s = self.exact()
        return _add(e, (-u, s))

    def __mul__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return as_float(self) * o if isinstance(o, float) else NotImplemented
        u, s = self.exact()
        return PgNumeric(u * e[0], s + e[1])

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return as_float(self) / o if isinstance(o, float) else NotImplemented
        return PgNumeric(*divide(*self.exact(), *e))

    def __rtruediv__(self, o: Any) -> Any:
        e = _exact_of(o)
        if e is None:
            return o / as_float(self) if isinstance(o, float) else NotImplemented
        return PgNumeric(*divide(*e, *self.exact()))

    def __neg__(self) -> "PgNumeric":
        u, s = self.exact()
        return PgNumeric(-u, s)

    def __pos__(self) -> "PgNumeric":
        return self

    def __abs__(self) -> "PgNumeric":
        u, s = self.exact()
        return PgNumeric(abs(u), s)
