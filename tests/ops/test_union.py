"""UNION ALL (noria_py/ops/union.py)."""
from __future__ import annotations

import pytest

from noria_py.batch import Batch
from noria_py.ops import Distinct, Union

from .helpers import Tracker


def test_passes_every_port_through_unchanged():
    u = Union()
    a = Batch([(1, None), (2, "x")], [1, -1])
    b = Batch([(1, None)], [3])
    assert u.process(0, a) is a
    assert u.process(1, b) is b
    assert u.process(7, b) is b
    assert list(a) == [((1, None), 1), ((2, "x"), -1)]


def test_stateless():
    u = Union()
    assert not u.stateful and u.kind == "union"
    with pytest.raises(NotImplementedError):
        u.snapshot()


def test_union_all_keeps_duplicates_and_distinct_over_it_is_union():
    u = Union()
    d = Tracker(Distinct())
    acc: dict = {}
    for port, batch in [(0, Batch.inserts([(1,), (None,)])), (1, Batch.inserts([(1,), (2,)])),
                        (0, Batch.deletes([(1,)])), (1, Batch.deletes([(2,)]))]:
        out = u.process(port, batch)
        for r, s in out:
            acc[r] = acc.get(r, 0) + s
        d.feed(0, out)
    assert {r: c for r, c in acc.items() if c} == {(1,): 1, (None,): 1}
    assert d.state() == {(1,): 1, (None,): 1}
    d.check()
