"""Per-group running values for aggregates, each able to take a row back out.

Every accumulator handles retractions (sign < 0) exactly, which is what makes a
grouped operator incremental: MIN and MAX keep every value in a sorted multiset so
that deleting the current extreme reveals the next one. NULL inputs are skipped, as
SQL requires.

``to_data`` and ``from_data`` write an accumulator as plain values (lists, ints,
strings and the row values it holds) and read it back: how a checkpoint of an
aggregate crosses the network to the cluster's checkpoint store (never pickled).
Integers that may outgrow 64 bits (exact sums) are written as decimal strings.
"""
from __future__ import annotations

import math

from sortedcontainers import SortedList

from sql_frontend.plan import AggCall

from ..divzero import DIV0
from ..nan import NAN
from ..numeric import PgNumeric, avg_numeric
from .sortedcopy import copy_sorted


class Accumulator:
    __slots__ = ()

    def update(self, v, s: int) -> None:
        raise NotImplementedError

    def value(self):
        raise NotImplementedError

    def copy(self) -> "Accumulator":
        """An independent accumulator in the same state (for checkpoints)."""
        raise NotImplementedError

    def to_data(self) -> list:
        """Its state as plain values: [tag, ...] (``from_data`` reads it back)."""
        raise NotImplementedError


class Count(Accumulator):
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def update(self, v, s: int) -> None:
        if v is not None:
            self.n += s

    def value(self):
        return self.n

    def copy(self) -> "Count":
        c = Count()
        c.n = self.n
        return c

    def to_data(self) -> list:
        return ["count", self.n]


class PgCount(Count):
    """COUNT(x) in a plan that divides as PostgreSQL does (noria_py/divzero.py): the
    marker while one of its group's values is the marker (counted apart, so deleting
    that row heals the group), as PostgreSQL fails a COUNT that evaluates a division
    by zero. COUNT(*) (``star``) counts every row, and is the marker while a row's
    probe column is (a row of markers: planner/poison.py, ``count_probe``)."""
    __slots__ = ("div0s", "star")

    def __init__(self, star: bool = False) -> None:
        self.n = 0
        self.div0s = 0
        self.star = star

    def update(self, v, s: int) -> None:
        if v is DIV0:
            self.div0s += s
        elif v is not None or self.star:
            self.n += s

    def value(self):
        return DIV0 if self.div0s > 0 else self.n

    def copy(self) -> "PgCount":
        c = PgCount(self.star)
        c.n, c.div0s = self.n, self.div0s
        return c

    def to_data(self) -> list:
        return ["pgcount", self.n, self.div0s, self.star]


#: floats are summed exactly as integers in units of 2**-1074 (the smallest subnormal),
#: so a sum does not depend on the order rows arrive or leave in, and is rounded once
#: when read: a state rebuilt from a snapshot yields the very same float.
_FLOAT_SCALE = 1 << 1074


def _scaled_to_float(num: int, den: int) -> float:
    try:
        return num / den
    except OverflowError:
        return math.inf if num > 0 else -math.inf


class ExactAvg(PgNumeric):
    """AVG of integers: the float the engine computes with (what the Python API shows),
    holding the exact sum and count it is the quotient of, from which the PostgreSQL
    front end writes PostgreSQL's ``numeric`` (``exact``: noria_py/numeric.py,
    ``avg_numeric``). Arithmetic on it is ``numeric``'s with an int or another numeric
    (``PgNumeric``), a plain float's with a float. The storage codec carries it exactly,
    as msgpack extension type 6, once ``PgNumeric.made`` says this process has made one
    (so over a cluster's wire and in checkpoints it stays an ``ExactAvg``)."""
    __slots__ = ("total", "count")
    total: int
    count: int

    def __new__(cls, total: int, count: int) -> "ExactAvg":
        self = float.__new__(cls, total / count)       # (int / int: correctly rounded)
        self.total, self.count = total, count
        PgNumeric.made = True
        return self

    def exact(self) -> tuple[int, int]:
        return avg_numeric(self.total, self.count)

    def __reduce__(self) -> tuple:
        return ExactAvg, (self.total, self.count)


class Sum(Accumulator):
    __slots__ = ("total", "ftotal", "floats", "special", "n")

    def __init__(self) -> None:
        self.total = 0          # exact sum of int values
        self.ftotal = 0         # exact sum of finite float values, in units of 2**-1074
        self.floats = 0         # how many float values are in
        self.special: dict[str, int] | None = None   # counts of inf, -inf, nan
        self.n = 0

    def update(self, v, s: int) -> None:
        if v is None:
            return
        if v is DIV0:
            if self.special is None:
                self.special = {}
            self.special["div0"] = self.special.get("div0", 0) + s
            self.n += s
            return
        if type(v) is float or type(v) is ExactAvg or type(v) is PgNumeric:
            if math.isfinite(v):
                num, den = v.as_integer_ratio()
                self.ftotal += num * (_FLOAT_SCALE // den) * s
            else:
                if self.special is None:
                    self.special = {}
                key = repr(v)
                self.special[key] = self.special.get(key, 0) + s
            self.floats += s
        else:
            self.total += v * s
        self.n += s

    def copy(self) -> "Sum":
        c = type(self)()
        c.total, c.ftotal, c.floats, c.n = self.total, self.ftotal, self.floats, self.n
        c.special = None if self.special is None else dict(self.special)
        return c

    def to_data(self) -> list:
        special = None if self.special is None else sorted(self.special.items())
        return [type(self).__name__.lower(), str(self.total), str(self.ftotal), self.floats,
                special, self.n]

    def _div0(self) -> bool:
        return self.special is not None and self.special.get("div0", 0) > 0

    def _special(self) -> float | None:
        sp = self.special
        if not sp:
            return None
        live = {k for k, c in sp.items() if c > 0 and k != "div0"}
        if "nan" in live or {"inf", "-inf"} <= live:
            return NAN
        if live:
            return math.inf if "inf" in live else -math.inf
        return None

    def _sum(self, count: int = 1):
        if self.floats > 0:
            special = self._special()
            if special is not None:
                return special
            return _scaled_to_float(self.total * _FLOAT_SCALE + self.ftotal, _FLOAT_SCALE * count)
        return self.total if count == 1 else self.total / count

    def value(self):
        if self.n <= 0:
            return None
        return DIV0 if self.special is not None and self._div0() else self._sum()


class Avg(Sum):
    __slots__ = ()

    def value(self):
        if self.n <= 0:
            return None
        if self.special is not None and self._div0():
            return DIV0
        v = self._sum(self.n)
        return float(v) if type(v) is int else v     # AVG is REAL even over one int


class PgAvg(Avg):
    """The PostgreSQL front end's AVG (``PG_AVG``): over integers, an ``ExactAvg`` (the
    front end's ``numeric``). Only its views pay for one: making it takes about 20
    times a float's time, and a column of them is kept as objects, not float64."""
    __slots__ = ()

    def value(self):
        if self.n > 0 and self.floats == 0 and not (self.special is not None
                                                     and self._div0()):
            return ExactAvg(self.total, self.n)
        return super().value()


class Min(Accumulator):
    """Every value in a sorted multiset, but NaNs, which are counted apart: a NaN
    compares with nothing (a ``SortedList`` holding one is out of order, and cannot find
    it again to remove it), and in SQL it is above every other value (noria_py.nan):
    MIN is NaN only when every value is, MAX whenever one is."""
    __slots__ = ("values", "nans", "div0s")

    def __init__(self) -> None:
        self.values = SortedList()
        self.nans = 0
        self.div0s = 0          # division-by-zero markers: they compare with nothing

    def update(self, v, s: int) -> None:
        if v is None:
            return
        if v is DIV0:
            self.div0s += s
        elif v != v:
            self.nans += s
        elif s > 0:
            for _ in range(s):
                self.values.add(v)
        else:
            for _ in range(-s):
                self.values.discard(v)

    def value(self):
        if self.div0s > 0:
            return DIV0
        if self.values:
            return self.values[0]
        return NAN if self.nans > 0 else None

    def copy(self) -> "Min":
        c = type(self)()
        c.values = copy_sorted(self.values)     # (no value sorted again)
        c.nans, c.div0s = self.nans, self.div0s
        return c

    def to_data(self) -> list:
        out = [type(self).__name__.lower(), list(self.values), self.nans]
        return out + [self.div0s] if self.div0s else out


class Max(Min):
    __slots__ = ()

    def value(self):
        if self.div0s > 0:
            return DIV0
        if self.nans > 0:
            return NAN
        return self.values[-1] if self.values else None


class Distinct(Accumulator):
    """Feeds an inner accumulator each distinct non-NULL value once (COUNT/SUM/AVG DISTINCT)."""
    __slots__ = ("counts", "inner")

    def __init__(self, inner: Accumulator) -> None:
        self.counts: dict = {}
        self.inner = inner

    def update(self, v, s: int) -> None:
        if v is None:
            return
        before = self.counts.get(v, 0)
        after = before + s
        if after:
            self.counts[v] = after
        else:
            del self.counts[v]
        if before <= 0 < after:
            self.inner.update(v, 1)
        elif after <= 0 < before:
            self.inner.update(v, -1)

    def value(self):
        return self.inner.value()

    def copy(self) -> "Distinct":
        c = Distinct(self.inner.copy())
        c.counts = dict(self.counts)
        return c

    def to_data(self) -> list:
        return ["distinct", list(self.counts.items()), self.inner.to_data()]


def from_data(data) -> Accumulator:
    """The accumulator ``to_data`` wrote; ValueError for anything else (the data may
    come from another process)."""
    try:
        tag = data[0]
        if tag == "count" and len(data) == 2 and type(data[1]) is int:
            c = Count()
            c.n = data[1]
            return c
        if tag == "pgcount" and len(data) == 4 and type(data[3]) is bool:
            p = PgCount(data[3])
            p.n, p.div0s = _int(data[1]), _int(data[2])
            return p
        if tag in ("sum", "avg", "pgavg") and len(data) == 6:
            s = {"sum": Sum, "avg": Avg, "pgavg": PgAvg}[tag]()
            s.total, s.ftotal = int(data[1]), int(data[2])
            s.floats, s.n = _int(data[3]), _int(data[5])
            s.special = None if data[4] is None else {str(k): _int(v) for k, v in data[4]}
            return s
        if tag in ("min", "max") and len(data) in (3, 4):
            m = Min() if tag == "min" else Max()
            m.values = SortedList(data[1])
            m.nans = _int(data[2])
            m.div0s = _int(data[3]) if len(data) == 4 else 0
            return m
        if tag == "distinct" and len(data) == 3:
            d = Distinct(from_data(data[2]))
            d.counts = {v: _int(c) for v, c in data[1]}
            return d
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise ValueError(f"not an accumulator's data: {e}") from None
    raise ValueError(f"not an accumulator's data: {str(data)[:80]}")


def _int(x) -> int:
    if type(x) is not int:
        raise ValueError(f"expected an integer, got {type(x).__name__}")
    return x


_MAKERS = {"count": Count, "count_star": Count, "sum": Sum, "avg": Avg, "pgavg": PgAvg,
           "min": Min, "max": Max}


def make(call: AggCall, pg: bool = False) -> Accumulator:
    """``call``'s accumulator; ``pg``: in a plan that divides as PostgreSQL does, where
    COUNT is ``PgCount``."""
    if pg and call.func in ("count", "count_star"):
        acc: Accumulator = PgCount(call.func == "count_star")
    else:
        acc = _MAKERS[call.func]()
    return Distinct(acc) if call.distinct else acc
