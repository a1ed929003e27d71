"""The operator interface (noria_py/ops/operator.py) and what every operator declares."""
from __future__ import annotations

import pytest

from noria_py.batch import Batch
from noria_py.ops import (
    Aggregate,
    Base,
    Distinct,
    Extremum,
    Filter,
    Join,
    Operator,
    Project,
    Reader,
    Sharder,
    TopK,
    Union,
)
from sql_frontend.plan import OrderKey
from sql_frontend.types import SqlType as T

from .helpers import agg, call, col, lit, schema


def test_base_interface():
    op = Operator()
    with pytest.raises(NotImplementedError):
        op.process(0, Batch())
    with pytest.raises(NotImplementedError):
        op.snapshot()
    op.reset()
    assert op.describe() == "?"
    assert not op.stateful and not op.splits


def stateful_ops():
    return [
        Base(schema("t", ("a", T.INT))),
        Join("left", (0,), (0,), 1, 1),
        Aggregate((0,), (agg("count_star"),)),
        Aggregate((0,), (agg("sum", 0),)),
        Extremum((0,), (agg("max", 0),)),
        Distinct(),
        TopK((OrderKey(0),), 1, 0, ()),
        Reader((0,), 1, 1),
    ]


@pytest.mark.parametrize("op", stateful_ops(), ids=lambda o: o.kind)
def test_stateful_operators_snapshot_and_reset(op):
    assert op.stateful
    op.process(0, Batch.inserts([(1,), (2,), (None,)]))
    assert op.snapshot().multiset()
    op.reset()
    assert not op.snapshot()


@pytest.mark.parametrize("op", [Filter(call("eq", col(0), lit(1))), Project((col(0),)), Union(),
                                Sharder((0,), 2)], ids=lambda o: o.kind)
def test_stateless_operators_have_no_snapshot(op):
    assert not op.stateful
    with pytest.raises(NotImplementedError):
        op.snapshot()
    assert op.splits is (op.kind == "sharder")
