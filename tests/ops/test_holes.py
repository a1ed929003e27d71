"""ops/holes.py: a partial node's held keys and their slots; a batch's rows under holes
dropped, by row or (int keys) by one indexing of the key -> slot map kept up to date by
add and remove."""
from __future__ import annotations

from operator import itemgetter

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from noria_py.batch import Batch
from noria_py.ops import holes
from noria_py.ops.dense import SLOTS_FLOOR
from noria_py.ops.holes import Holes, KeyMap
from noria_py.ops.state import tuple_key

from .helpers import ms


class Manager:
    def __init__(self) -> None:
        self.total = 0

    def resize(self, old: int, new: int) -> None:
        self.total += new - old


def _columnar(keys: list, other: list) -> Batch:
    key_col = (np.array(keys, dtype=np.int64) if all(type(k) is int for k in keys)
               else np.array(keys, dtype=object))
    return Batch.columnar([key_col, np.array(other, dtype=np.int64)],
                          np.ones(len(keys), dtype=np.int64))


@pytest.mark.parametrize("form", ["rows", "columns"])
def test_keep_drops_the_rows_of_holes(form):
    h = Holes(Manager())
    keys = [3, 5, -1, 1 << 40, 3, 7, 5]
    rows = [(k, i) for i, k in enumerate(keys)]
    batch = Batch.inserts(rows) if form == "rows" else _columnar(keys, list(range(len(keys))))
    assert not h.keep(batch, (0,), itemgetter(0))          # nothing held: all dropped
    for k in (3, 7):
        h.add(k)
    assert ms(h.keep(batch, (0,), itemgetter(0))) == {(3, 0): 1, (3, 4): 1, (7, 5): 1}
    h.add(1 << 40)                  # past the table: the keys are filtered all the same
    h.add(-1)
    assert ms(h.keep(batch, (0,), itemgetter(0))) == {
        (3, 0): 1, (3, 4): 1, (7, 5): 1, (-1, 2): 1, (1 << 40, 3): 1}
    h.remove(3)
    h.remove(1 << 40)
    h.remove(-1)
    assert ms(h.keep(batch, (0,), itemgetter(0))) == {(7, 5): 1}
    h.add(5)
    assert ms(h.keep(batch, (0,), itemgetter(0))) == {(5, 1): 1, (7, 5): 1, (5, 6): 1}


def test_the_map_is_kept_up_to_date_by_add_and_remove():
    h = Holes(Manager())
    batch = _columnar(list(range(100)), list(range(100)))
    h.add(10)
    assert [r[0] for r in h.keep(batch, (0,), itemgetter(0)).rows] == [10]
    table = h.keymap._table                        # (a few keys: hashed)
    h.add(20)
    h.remove(10)
    assert h.keymap._table is table                # changed in place, not built again
    assert [r[0] for r in h.keep(batch, (0,), itemgetter(0)).rows] == [20]


def test_slots_are_dense_and_reused():
    """Slots are handed out from 0 and a freed one is reused, so arrays indexed by slot
    grow with the keys held, not with the key range; ``select`` gives each kept row's
    slot, and ``keys_of`` maps slots back to keys."""
    h = Holes(Manager())
    assert [h.add(k) for k in (1_000_000, 5, 1 << 40, "a")] == [0, 1, 2, 3]
    assert h.slot(5) == 1 and h.slot(6) == -1 and h.slot(-1) == -1
    assert h.remove(5) == (1, 0) and h.remove(5) == (-1, 0)
    assert h.add(7) == 1                    # the freed slot
    assert len(h.keymap._key) < 1000 and len(h._size) < 1000 and len(h) == 4
    kept, slots = h.select(_columnar([7, 1_000_000, 9, 1 << 40, 7], [0, 1, 2, 3, 4]),
                           (0,), itemgetter(0))
    assert [r[1] for r in kept.rows] == [0, 1, 3, 4]
    assert slots.tolist() == [1, 0, 2, 1]
    assert h.keys_of(slots).tolist() == [7, 1_000_000, 1 << 40, 7]
    assert sorted(h.keys(), key=repr) == sorted([7, 1_000_000, 1 << 40, "a"], key=repr)
    kept, at = h.select(Batch.inserts([("a", 1), ("b", 2), (7, 3)]), (0,), itemgetter(0))
    assert at == [3, 1] and [r[1] for r in kept.rows] == [1, 3]


def test_keys_are_found_as_a_dict_would_find_them():
    h = Holes(Manager())
    h.add(1.0)                              # held as the int
    assert h.slot(1) == h.slot(True) == h.slot(np.int64(1)) == 0
    assert 1 in h.filled and h.keys() == [1]
    assert h.slot(1.5) == -1
    nan = float("nan")
    h.add(nan)
    assert h.slot(nan) == 1


def test_non_int_keys_and_keys_held_as_tuples():
    h = Holes(Manager())
    h.add("a")
    batch = _columnar(["a", "b", None], [1, 2, 3])
    assert ms(h.keep(batch, (0,), itemgetter(0))) == {("a", 1): 1}
    t = Holes(Manager())
    t.add((4,))                             # a group key of one column, as a tuple
    ints = _columnar([4, 5, 4], [1, 2, 3])
    assert ms(t.keep(ints, (0,), tuple_key((0,)), bare=False)) == {(4, 1): 1, (4, 3): 1}


def test_bytes_are_given_back_to_the_manager():
    m = Manager()
    h = Holes(m)
    h.add(1)
    h.add(2)
    h.measure(1, 100)
    h.measure(2, 50)
    h.measure(3, 70)                        # not held: not accounted
    assert m.total == 150
    assert h.remove(1) == (0, 100)
    m.total -= 100
    h.clear()
    assert m.total == 0 and len(h) == 0


class _Reader:
    def __init__(self, holes: Holes) -> None:
        self.holes = holes


def test_a_path_shares_one_key_map():
    """The nodes of a path (an owner reader's ``Holes`` and its operators') share one
    ``KeyMap``: a key has the same slot in each, stays mapped while any of them holds
    it, and its slot is handed out again only once none does; the map (sized to the key
    range) is counted once, by its owner. A node of another manager keeps its own."""
    m = Manager()
    reader = Holes(m)
    op = Holes(m, _Reader(reader))
    assert op.keymap is reader.keymap and Holes(Manager(), _Reader(reader)).keymap \
        is not reader.keymap
    assert op.add(500_000) == 0 and op.add(7) == 1
    assert reader.slot(500_000) == -1 and 500_000 not in reader   # not held by it
    assert reader.add(500_000) == 0
    batch = _columnar([7, 500_000, 3], [0, 1, 2])
    assert ms(reader.keep(batch, (0,), itemgetter(0))) == {(500_000, 1): 1}
    assert ms(op.keep(batch, (0,), itemgetter(0))) == {(7, 0): 1, (500_000, 1): 1}
    assert op.remove(500_000) == (0, 0)
    assert reader.slot(500_000) == 0        # still held by the reader: still mapped
    assert reader.add(9) == 2               # (slot 0 is not free)
    assert reader.remove(500_000) == (0, 0)
    assert reader.keymap.slot(500_000) == -1
    assert op.add(11) == 0                  # free once neither holds it
    assert sorted(op.keys()) == [7, 11] and sorted(reader.keys()) == [9]
    big = reader.keymap.nbytes()
    assert big > 60_000                     # a bit a key of the range (few keys held:
    assert not len(reader.keymap._map)      # hashed, not 4 bytes a key of the range)
    assert reader.fixed_bytes() >= big > op.fixed_bytes()
    op.clear()
    assert reader.keymap.slot(7) == -1 and reader.slot(9) == 2


def test_a_key_map_turns_dense_and_hashed_as_the_keys_held_grow_and_shrink():
    """Few keys of a large range are hashed (bytes a key held, not a key of the range);
    over about half the range, dense; and hashed again under a sixteenth."""
    km = KeyMap()
    for k in range(0, 100_000, 100):                    # 1,000 keys of 100,000
        km.acquire(k)
    assert km.hashed and km.nbytes() < 60_000           # (450 KB dense)
    assert km.slots_of(np.arange(0, 3000, dtype=np.int64)).tolist().count(-1) == 2970
    for k in range(60_000):                             # 60% of the range
        km.acquire(k)
    assert not km.hashed and km.slot(59_999) >= 0 and km.slot(60_001) == -1
    assert km.nbytes() < 2 * 450_000 + 20 * km.top
    for k in range(50_000):
        km.release(k, km.slot(k))
    assert not km.hashed                                # 10,500 held: still dense
    for k in range(50_000, 60_000):
        km.release(k, km.slot(k))
    assert km.hashed and km.slot(99_900) >= 0 and km.slot(1) == -1 and km.slot(100) >= 0
    assert km.mapped == 1000


#: a key far beyond the others (which keeps a map hashed while held)
TOP = 40_000


class KeyMapModel(RuleBasedStateMachine):
    """``KeyMap`` against a dict (key -> slot, and its holders): acquire, release and
    lookups (one key, a column), through both forms and the switches between them (a
    dense map of 64 or more keys may turn hashed again here: ``_SMALLEST_SHRUNK``)."""

    KEYS = st.one_of(st.integers(0, 300), st.integers(0, 3000),
                     st.sampled_from([-1, 1 << 40, TOP, "a"]))

    def __init__(self) -> None:
        super().__init__()
        self.km = KeyMap()
        self.model: dict = {}       # key -> [slot, holders]
        self.peak = 0               # the most keys held at once

    def _acquire(self, key) -> None:
        s = self.km.acquire(key)
        if key in self.model:
            assert self.model[key][0] == s
            self.model[key][1] += 1
        else:
            assert s not in {v[0] for v in self.model.values()}
            self.model[key] = [s, 1]
            self.peak = max(self.peak, len(self.model))

    @rule(key=KEYS)
    def acquire(self, key) -> None:
        self._acquire(key)

    @rule(lo=st.integers(0, 300), n=st.integers(1, 200))
    def acquire_many(self, lo: int, n: int) -> None:
        for k in range(lo, lo + n):
            self._acquire(k)

    @rule(seed=st.integers(0, 1000), n=st.integers(1, 200))
    def acquire_scattered(self, seed: int, n: int) -> None:
        """(Knuth's hash spreads a run of keys without a collision: these collide.)"""
        for k in np.random.default_rng(seed).choice(600, n, replace=False).tolist():
            self._acquire(k)

    @rule(data=st.data())
    def release(self, data) -> None:
        if not self.model:
            return
        key = data.draw(st.sampled_from(sorted(self.model, key=repr)))
        s, n = self.model[key]
        self.km.release(key, s)
        if n == 1:
            del self.model[key]
        else:
            self.model[key][1] -= 1

    @rule(frac=st.integers(2, 16))
    def release_most(self, frac: int) -> None:
        for key in sorted(self.model, key=repr)[: len(self.model) * (frac - 1) // frac]:
            s, n = self.model.pop(key)
            for _ in range(n):
                self.km.release(key, s)

    @rule(keys=st.lists(st.integers(-5, 6000) | st.sampled_from([1 << 40, TOP]),
                        max_size=50))
    def slots_of(self, keys) -> None:
        held = [k for k in self.model if type(k) is int]
        col = np.array(keys + held, dtype=np.int64)
        want = [self.model[k][0] if k in self.model else -1 for k in col.tolist()]
        assert self.km.slots_of(col).tolist() == want

    @invariant()
    def every_key_finds_its_slot(self) -> None:
        km = self.km
        for k, (s, _) in self.model.items():
            assert km.slot(k) == s and km.key_at(s) == k
        for k in (0, 7, 301, 4999, 5001, -1, TOP, 1 << 40, "b"):
            if k not in self.model:
                assert km.slot(k) == -1
        assert km.mapped == sum(type(k) is int and 0 <= k < holes.DENSE_LIMIT
                                for k in self.model)

    @invariant()
    def slots_are_reused_and_their_arrays_grow_by_a_quarter(self) -> None:
        """A freed slot is handed out before a new one (so the slots handed out are the
        most keys held at once), and the arrays by slot span them with at most a
        quarter more (``slot_length``: no doubling, whose spare entries would take the
        limit's share from the keys)."""
        km = self.km
        assert km.top == self.peak
        assert len(km._free) == km.top - len(self.model)
        for a in (km._key, km._refs):
            assert km.top <= len(a) <= max(SLOTS_FLOOR, km.top + km.top // 4 + 1)


@pytest.fixture
def small_dense_maps(monkeypatch):
    monkeypatch.setattr(holes, "_SMALLEST_SHRUNK", 64)


def test_key_map_model(small_dense_maps):
    """The model above, run by hypothesis (``_SMALLEST_SHRUNK`` lowered, so that dense
    maps of this test's few keys turn hashed again)."""
    run = KeyMapModel.TestCase
    run.settings = settings(max_examples=20, stateful_step_count=25, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])
    run().runTest()
