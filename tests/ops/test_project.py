"""SELECT-list projection (noria_py/ops/project.py)."""
from __future__ import annotations

import pytest

from noria_py.batch import Batch
from noria_py.ops import Project
from sql_frontend.types import SqlType as T

from .helpers import call, col, lit


def test_identity_passes_the_batch_through():
    p = Project((col(0), col(1)))
    assert p.identity
    b = Batch([(1, None), (2, "x")], [1, -1])
    assert p.process(0, b) is b


def test_identity_prefix_of_wider_input_trims():
    p = Project((col(0),))
    assert p.identity
    out = p.process(0, Batch([(1, "a"), (2, "b")], [1, -1]))
    assert list(out) == [((1,), 1), ((2,), -1)]


def test_reorder_and_duplicate_columns():
    p = Project((col(2), col(0), col(2)))
    assert not p.identity
    out = p.process(0, Batch([(1, 2, 3), (4, 5, None)], [2, -1]))
    assert list(out) == [((3, 1, 3), 2), ((None, 4, None), -1)]


def test_expressions_propagate_nulls_and_keep_signs():
    p = Project((col(0), call("add", col(1), lit(1), t=T.INT),
                 call("coalesce", col(1), lit(0), t=T.INT), lit("k", T.TEXT),
                 call("is_null", col(1))))
    out = p.process(0, Batch([(1, 10), (2, None), (3, 7)], [1, 1, -1]))
    assert list(out) == [((1, 11, 10, "k", False), 1),
                         ((2, None, 0, "k", True), 1),
                         ((3, 8, 7, "k", False), -1)]


def test_deleting_what_was_inserted_cancels():
    p = Project((call("mul", col(0), lit(2), t=T.INT),))
    a = p.process(0, Batch.inserts([(1,), (None,)]))
    d = p.process(0, Batch.deletes([(1,), (None,)]))
    total = Batch(list(a.rows), list(a.signs))
    total.extend(d)
    assert total.multiset() == {}
    assert a.rows == [(2,), (None,)]


def test_projection_can_merge_rows():
    # two different input rows project to the same output row: counts add up
    p = Project((col(1),))
    out = p.process(0, Batch.inserts([(1, "a"), (2, "a"), (3, None)]))
    assert out.multiset() == {("a",): 2, (None,): 1}


def test_empty_batch_and_stateless():
    p = Project((call("neg", col(0), t=T.INT),))
    assert not p.process(0, Batch())
    assert not p.stateful
    with pytest.raises(NotImplementedError):
        p.snapshot()


def test_input_batch_not_mutated():
    p = Project((call("neg", col(0), t=T.INT),))
    b = Batch([(1,)], [-1])
    out = p.process(0, b)
    assert out.rows == [(-1,)] and out.signs == [-1]
    assert b.rows == [(1,)]


def test_projection_to_no_columns():
    # regression (expression.compile_row): a zero-column projection raised TypeError
    p = Project(())
    out = p.process(0, Batch([(1, "a"), (2, "b")], [1, -1]))
    assert list(out) == [((), 1), ((), -1)]
