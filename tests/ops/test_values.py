"""Constant relations (noria_py/ops/values.py), e.g. for SELECT without FROM."""
from __future__ import annotations

from noria_py.batch import Batch
from noria_py.ops import Values


def test_snapshot_is_the_rows_and_survives_reset():
    op = Values(((),))
    assert op.stateful and op.snapshot().multiset() == {(): 1}
    op.reset()
    assert op.snapshot().multiset() == {(): 1}
    assert Values(((1, "a"), (1, "a"))).snapshot().multiset() == {(1, "a"): 2}


def test_process_emits_nothing():
    assert not Values(((1,),)).process(0, Batch.inserts([(2,)]))
