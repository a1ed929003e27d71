"""``sortedcopy.copy_sorted``: a copy equals its original and changes independently of
it, for sorted lists with and without a key, small and across chunk boundaries (where
the library splits and joins chunks, and uses the positional index the copy leaves
empty)."""
from __future__ import annotations

import random

import pytest
from sortedcontainers import SortedKeyList, SortedList

from noria_py.ops.sortedcopy import copy_sorted


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("n", [0, 1, 50, 2500])
def test_a_copy_equals_and_changes_apart_from_its_original(keyed, n):
    rng = random.Random(n)
    values = [(rng.randrange(100), rng.randrange(10)) for _ in range(n)]
    s = SortedKeyList(values, key=lambda v: (-v[0], v[1])) if keyed else SortedList(values)
    s._reset(40)                      # small chunks: a few thousand values span many
    before = list(s)
    c = copy_sorted(s)
    assert type(c) is type(s) and list(c) == before and len(c) == len(s)
    if n:
        assert c[n // 2] == s[n // 2] and c.index(before[-1]) == s.index(before[-1])
    for _ in range(3 * n + 10):       # changed apart: adds, removals, positional reads
        v = (rng.randrange(100), rng.randrange(10))
        if rng.random() < 0.5 or not c:
            c.add(v)
        else:
            c.discard(c[rng.randrange(len(c))])
    c._check()                        # the library's own invariant check
    assert list(s) == before
    s._check()
    model = sorted(c, key=(lambda v: (-v[0], v[1])) if keyed else None)
    assert list(c) == model
