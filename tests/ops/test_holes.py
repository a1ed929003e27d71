"""ops/holes.py: a partial node's held keys and their slots; a batch's rows under holes
dropped, by row or (int keys) by one indexing of the key -> slot map kept up to date by
add and remove."""
from __future__ import annotations

from operator import itemgetter

import numpy as np
import pytest

from noria_py.batch import Batch
from noria_py.ops.holes import Holes
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
    table = h.keymap._map
    h.add(20)
    h.remove(10)
    assert h.keymap._map is table                  # changed in place, not built again
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
    big = reader.keymap._map.nbytes
    assert big > 2_000_000                  # sized to the key range
    assert reader.fixed_bytes() >= big > op.fixed_bytes()
    op.clear()
    assert reader.keymap.slot(7) == -1 and reader.slot(9) == 2
