"""Per-group running values for aggregates, each able to take a row back out.

Every accumulator handles retractions (sign < 0) exactly, which is what makes a
grouped operator incremental: MIN and MAX keep every value in a sorted multiset so
that deleting the current extreme reveals the next one. NULL inputs are skipped, as
SQL requires.
"""
from __future__ import annotations

from sortedcontainers import SortedList

from sql_frontend.plan import AggCall


class Accumulator:
    __slots__ = ()

    def update(self, v, s: int) -> None:
        raise NotImplementedError

    def value(self):
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


class Sum(Accumulator):
    __slots__ = ("total", "n")

    def __init__(self) -> None:
        self.total = 0
        self.n = 0

    def update(self, v, s: int) -> None:
        if v is not None:
            self.total += v * s
            self.n += s

    def value(self):
        return self.total if self.n > 0 else None


class Avg(Sum):
    __slots__ = ()

    def value(self):
        return self.total / self.n if self.n > 0 else None


class Min(Accumulator):
    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values = SortedList()

    def update(self, v, s: int) -> None:
        if v is None:
            return
        if s > 0:
            for _ in range(s):
                self.values.add(v)
        else:
            for _ in range(-s):
                self.values.discard(v)

    def value(self):
        return self.values[0] if self.values else None


class Max(Min):
    __slots__ = ()

    def value(self):
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


_MAKERS = {"count": Count, "count_star": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max}


def make(call: AggCall) -> Accumulator:
    acc = _MAKERS[call.func]()
    return Distinct(acc) if call.distinct else acc
