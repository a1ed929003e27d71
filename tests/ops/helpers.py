"""Shared helpers for the operator unit tests."""
from __future__ import annotations

from collections import Counter

from noria_py.batch import Batch
from sql_frontend.expr import Call, Col, Lit
from sql_frontend.plan import AggCall
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

T = SqlType
INT, FLOAT, TEXT, BOOL = T.INT, T.FLOAT, T.TEXT, T.BOOL


def ms(batch: Batch) -> dict:
    """Row -> net count of a batch (zero counts dropped)."""
    return batch.multiset()


def col(i: int, t: SqlType = INT) -> Col:
    return Col(i, t)


def lit(v, t: SqlType = INT) -> Lit:
    return Lit(v, t)


def call(op: str, *args, t: SqlType = BOOL) -> Call:
    return Call(op, tuple(args), t)


def agg(func: str, arg: int | None = None, distinct: bool = False, t: SqlType = INT) -> AggCall:
    return AggCall(func, arg, distinct, t)


def schema(name: str, *cols, pk: tuple[int, ...] = ()) -> TableSchema:
    """cols: (name, type) or (name, type, nullable)."""
    return TableSchema(name, tuple(ColumnInfo(*c) for c in cols), pk)


def ins(*rows) -> Batch:
    return Batch.inserts(rows)


def dels(*rows) -> Batch:
    return Batch.deletes(rows)


class Tracker:
    """Feeds an operator and keeps the running multiset of everything it emitted.

    Every emitted delta must keep that multiset non-negative (an operator may never
    retract a row it has not emitted), and it must always equal ``snapshot()``.
    """

    def __init__(self, op) -> None:
        self.op = op
        # what the operator outputs before any input (a global aggregate's one row)
        self.acc: Counter = Counter(op.snapshot().multiset()) if op.stateful else Counter()

    def feed(self, port: int, batch: Batch) -> Batch:
        out = self.op.process(port, batch)
        for r, s in out:
            assert s != 0, f"zero sign emitted for {r!r}"
            self.acc[r] += s
        for r in list(self.acc):
            c = self.acc[r]
            assert c >= 0, f"{self.op.describe()} retracted {r!r} below zero (running count {c})"
            if c == 0:
                del self.acc[r]
        return out

    def state(self) -> dict:
        return dict(self.acc)

    def check(self) -> None:
        assert ms(self.op.snapshot()) == self.state()



def random_batch(model: dict, ops) -> Batch:
    """One batch of random ``(is_delete, row)`` ops, applied to ``model`` (row -> count) as
    well: a delete of a row the model does not hold becomes an insert."""
    b = Batch()
    for is_delete, r in ops:
        if is_delete and model.get(r, 0) > 0:
            model[r] -= 1
            if not model[r]:
                del model[r]
            b.add(r, -1)
        else:
            model[r] = model.get(r, 0) + 1
            b.add(r, 1)
    return b


def recompute_aggregate(group_by, aggs, rows: dict) -> dict:
    """What GROUP BY ``group_by`` with ``aggs`` gives over the multiset ``rows``, from scratch
    (the reference for Aggregate and Extremum)."""
    groups: dict = {}
    for r, c in rows.items():
        groups.setdefault(tuple(r[i] for i in group_by), []).extend([r] * c)
    if not group_by:
        groups.setdefault((), [])
    out = {}
    for k, rs in groups.items():
        vals = []
        for a in aggs:
            if a.func == "count_star":
                vals.append(len(rs))
                continue
            xs = [r[a.arg] for r in rs if r[a.arg] is not None]
            if a.distinct:
                xs = sorted(set(xs))
            if a.func == "count":
                vals.append(len(xs))
            elif a.func == "sum":
                vals.append(sum(xs) if xs else None)
            elif a.func == "avg":
                vals.append(sum(xs) / len(xs) if xs else None)
            elif a.func == "min":
                vals.append(min(xs) if xs else None)
            elif a.func == "max":
                vals.append(max(xs) if xs else None)
        out[k + tuple(vals)] = 1
    return out
