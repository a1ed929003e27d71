"""Shared helpers for the operator unit tests."""
from __future__ import annotations

from collections import Counter, defaultdict

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


def multiset_add(m: dict, rows, sign: int = 1) -> None:
    for r in rows:
        m[r] = m.get(r, 0) + sign
        if m[r] == 0:
            del m[r]


def expand(m: dict) -> list:
    out = []
    for r, c in m.items():
        out.extend([r] * c)
    return out


def counter(rows) -> dict:
    d: dict = defaultdict(int)
    for r in rows:
        d[r] += 1
    return dict(d)
