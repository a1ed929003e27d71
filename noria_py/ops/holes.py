"""The keys a partial node holds (a reader's, an aggregate's groups, a join's keys):
the rest are holes, and a batch's rows under a hole are dropped on arrival.

One piece for every partial node (noria_py/partial.py says when a node is partial):
the reader and the partial aggregates and joins above it each keep a ``Holes``.

Array form. Each held key has a *slot*, a small int: slots are handed out densely
(a freed one is reused first), so arrays indexed by slot grow with the keys held, not
with the key range. The slots are a ``KeyMap``'s, one for a partial reader and the
partial operators of its path (``Holes(manager, owner)``): they hold the same keys
(filled on the way to the reader, evicted together), so a key has the same slot in
each, and the map is kept once a path rather than once a node. A key that is an int
in [0, DENSE_LIMIT) finds its slot in the map's hashed table (few keys held: bytes a
key held) or its dense ``_map`` (many: an int32 array indexed by key), whichever is
smaller (``KeyMap``); any other key (a negative or huge int, a string, a tuple of a
compound key) in the dict ``_odd``. Each slot knows
its key (``_key``, or ``_odd_at`` for the others) and how many nodes hold it
(``_refs``: the slot is free once none does). Each node keeps which slots it holds
(``_held``: during a fill the aggregate holds a key the reader does not yet) and
the bytes its keys are accounted at (``_size``). So

- a columnar batch's int64 key column is turned into slots, and its rows under holes
  dropped, with one indexing of ``_map`` (hashed: of its bits, then a probe of its
  table for the keys held) and one of ``_held`` (``select``: one vectorised test a
  batch);
- a node keeps its state in arrays indexed by slot (``KeyedState(..., slots=True)``,
  ``KeyedCounts`` of slots): a held key costs what full state costs a key (its entry
  in the arrays) plus 9 bytes here (``_held``, ``_size``), 12 a path (``_key``,
  ``_refs``) and the key map's: 8-16 bytes a key held and a bit a key of the range
  hashed, 4 bytes a key of the range dense, a path, where a dict-held key cost about
  1 KB over the vote view's three nodes.

Invariants: a key is held by a node exactly while its slot is in ``_held``
(``slot(key) >= 0``), and then the node holds every row of it (filled by an upquery,
every write to it since applied); a node keeps no state at a slot it does not hold
(``remove`` lets the slot go only after the caller cleared it, and ``_size`` is 0
there), so a slot handed out again finds every node's state there empty.
``_map[k] == s`` iff ``_key[s] == k`` for keys in the map's range held by some node,
and ``_refs[s]`` is the number of nodes of the map holding ``_key[s]``. Keys are
normalized as a dict would find them (``norm``: 1.0 and True find 1). Each held
key's bytes are accounted to the partial-state manager (``resize``), which bounds
their sum (``memory_limit``): measured when the key is filled, and for a key written
since (``dirty``) when the manager next reads the sum (``Partial.settle``); where no
limit is set, a write only marks the manager stale, and reading the sum measures
every held key. The arrays (the map's, counted by the node that made it, and each
node's ``_held`` and ``_size``, sized to the slots handed out, with slack) are no
key's: the manager adds their ``nbytes`` (``fixed_bytes``) to the keys' sum where it
compares it with the limit, so that the limit bounds them too, whatever the key
range. Sharing a map changes no node's answer: one made under another manager (a
cluster worker's operator, whose reader is elsewhere) keeps a map of its own.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

import numpy as np

from ..batch import Batch
from ..nan import column_list
from ..tuning import DENSE_LIMIT
from .dense import column, slot_length
from .state import as_int

#: bytes a held key in ``_map``'s range costs here besides the arrays (its slot's key
#: and size, its entry in ``_map``), which ``fixed_bytes`` counts apart
MAPPED_BYTES = 0
#: bytes of an int object (a free slot's number in ``_free``, an odd key's slot in
#: ``_odd`` and ``_odd_at``: 28, as allocated)
INT_BYTES = 32
#: bytes a held key outside it costs besides the key itself, the arrays and the two
#: dicts' tables (``fixed_bytes``): its slot's int
ODD_BYTES = INT_BYTES


def norm(key: Any) -> Any:
    """``key`` as a dict would find it: a float, bool or numpy int equal to an int is
    that int."""
    if type(key) is int or type(key) is str or type(key) is tuple:
        return key
    k = as_int(key)
    return key if k is None else k


class Held(Mapping):
    """The held keys of a ``Holes``, each to the bytes it is accounted at (a view)."""

    def __init__(self, holes: "Holes") -> None:
        self._holes = holes

    def __getitem__(self, key: Any) -> int:
        s = self._holes.slot(key)
        if s < 0:
            raise KeyError(key)
        return int(self._holes._size[s])

    def __contains__(self, key: object) -> bool:
        try:
            return self._holes.slot(key) >= 0
        except TypeError:
            return False

    def __iter__(self) -> Iterator[Any]:
        return iter(self._holes.keys())

    def __len__(self) -> int:
        return self._holes.n


class KeyMap:
    """The slots of the keys held by one or more ``Holes`` (a partial reader's and the
    partial operators of its path, which hold the same keys): each key held by any of
    them has one slot, which all of them use, until the last one lets it go (a count of
    holders by slot). So the map of the keys to their slots and the slots' keys are
    kept once a path, not once a node.

    An int key in [0, DENSE_LIMIT) (a *mapped* key) finds its slot in one of two forms,
    whichever is smaller for the keys held:

    - *dense*: ``_map``, an int32 array indexed by key (-1: no holder holds it), sized
      to the largest key held (4 bytes a key of the range), one indexing a batch;
    - *hashed*: ``_table``, an int32 open-addressing table of slots (linear probing,
      Knuth's multiplicative hash of the key, at most half full: 8 to 16 bytes a
      mapped key held), the slot's key read back from ``_key``, and ``_bits``, one
      bit a key of the range (which keys are held: a batch's keys not held are
      dropped by one indexing of it, and only the held ones probe the table).

    A map starts hashed and turns dense when the table would grow to the dense map's
    length (the keys held are then at least a quarter of their range); dense, it turns
    hashed again when the mapped keys held fall under a sixteenth of ``_map``'s length
    (so a form is kept over at least a quarter of its keys coming or going: amortized
    constant a key). Invariants: exactly one of ``_map`` and ``_table`` is non-empty
    once a key was held; hashed, every mapped key held is in ``_table`` and has its
    bit set, and no position between its home (its hash) and its position is empty
    (backward-shift deletion keeps that without tombstones). Hand-written because a
    batch's keys are looked up as one numpy array: a dict costs a Python step a key,
    and no library we use offers a mutable int-to-int hash table probed by arrays
    (pandas' is internal; its ``Index`` is rebuilt whole on each change)."""

    def __init__(self) -> None:
        #: int key in [0, len) -> its slot, -1 where no holder holds it (dense form)
        self._map = np.full(0, -1, dtype=np.int32)
        #: the open-addressing table of slots, -1 empty (hashed form; its length a power
        #: of two), and a bit a key of [0, 8 * len(_bits)): held by some holder
        self._table = np.full(0, -1, dtype=np.int32)
        self._bits = np.zeros(0, dtype=np.uint8)
        self._shift = 32            # 32 - log2(len(_table))
        self._hi = -1               # the largest mapped key held since the last rebuild
        self.mapped = 0             # mapped keys held
        #: any other key held -> its slot
        self._odd: dict = {}
        #: slot -> its key (where the key is mapped; else ``_odd_at``)
        self._key = np.zeros(0, dtype=np.int64)
        self._odd_at: dict[int, Any] = {}
        #: slot -> how many holders hold its key (0: a free slot)
        self._refs = np.zeros(0, dtype=np.int32)
        self._free: list[int] = []
        self.top = 0                # slots handed out so far (the free ones among them)

    @property
    def hashed(self) -> bool:
        """Whether the mapped keys are in the hashed form (``_table``)."""
        return not len(self._map)

    def slot(self, key: Any) -> int:
        """The slot of ``key`` (normalized: ``norm``), or -1 where no holder holds it."""
        if type(key) is not int:
            return self._odd.get(key, -1)
        m = self._map
        if 0 <= key < len(m):
            return m.item(key)
        if key < 0 or key >= DENSE_LIMIT:
            return self._odd.get(key, -1)
        i = self._find(key)
        return self._table.item(i) if i >= 0 else -1

    def _find(self, key: int) -> int:
        """The position of ``key`` (mapped) in ``_table``, -1 where it is not there (a
        hole, or the dense form): its home, or the next positions until an empty one."""
        t, keys = self._table, self._key
        mask = len(t) - 1
        if mask < 0:
            return -1
        i = (key * _KNUTH & 0xFFFFFFFF) >> self._shift
        while True:
            s = t.item(i)
            if s < 0:
                return -1
            if keys.item(s) == key:
                return i
            i = (i + 1) & mask

    def key_at(self, slot: int) -> Any:
        odd = self._odd_at
        if odd and slot in odd:
            return odd[slot]
        return self._key.item(slot)

    def keys_of(self, slots: np.ndarray) -> np.ndarray:
        """``Holes.keys_of``."""
        if not self._odd_at:
            return self._key[slots]
        return column([self.key_at(s) for s in slots.tolist()])

    def acquire(self, key: Any) -> int:
        """One more holder holds ``key`` (normalized): its slot, handed out if it is the
        first."""
        s = self.slot(key)
        if s < 0:
            if self._free:
                s = self._free.pop()
            else:
                s = self.top
                self.top += 1
                if s >= len(self._key):
                    size = slot_length(s)
                    self._key = _grown(self._key, size, 0)
                    self._refs = _grown(self._refs, size, 0)
            if type(key) is int and 0 <= key < DENSE_LIMIT:
                self._key[s] = key
                self._put(key, s)
            else:
                self._odd[key] = s
                self._odd_at[s] = key
        self._refs[s] += 1
        return s

    def _put(self, key: int, s: int) -> None:
        """Map ``key`` (mapped, held by no holder until now) to slot ``s``."""
        self.mapped += 1
        if not len(self._map) and 2 * self.mapped > len(self._table):  # (half full)
            size = max(16, 2 * len(self._table))
            self._rebuild(0 if size >= _span(max(key, self._hi)) else size)
        if key > self._hi:
            self._hi = key
        m = self._map
        if len(m):
            if key >= len(m):
                self._map = m = _grown(m, _span(key), -1)
            m[key] = s
            return
        b = self._bits
        if key >> 3 >= len(b):
            self._bits = b = _grown(b, (_span(key) + 7) >> 3, 0)
        b[key >> 3] = b.item(key >> 3) | 1 << (key & 7)
        t = self._table
        mask = len(t) - 1
        i = (key * _KNUTH & 0xFFFFFFFF) >> self._shift
        while t.item(i) >= 0:
            i = (i + 1) & mask
        t[i] = s

    def release(self, key: Any, slot: int) -> None:
        """A holder lets ``key`` (normalized, at ``slot``) go: the slot is free once
        none holds it."""
        refs = self._refs
        refs[slot] -= 1
        if refs.item(slot):
            return
        if type(key) is int and 0 <= key < DENSE_LIMIT:
            self._drop(key)
        else:
            del self._odd[key]
            del self._odd_at[slot]
        self._free.append(slot)

    def _drop(self, key: int) -> None:
        """Unmap ``key`` (mapped, held by no holder any more; its slot still names it)."""
        self.mapped -= 1
        m = self._map
        if len(m):
            m[key] = -1
            if len(m) >= _SMALLEST_SHRUNK and 16 * self.mapped < len(m):
                self._rebuild(_capacity(self.mapped))
            return
        b = self._bits
        b[key >> 3] = b.item(key >> 3) & ~(1 << (key & 7))
        t, keys = self._table, self._key
        mask = len(t) - 1
        i = self._find(key)
        assert i >= 0, key                  # (it was held)
        j = i
        while True:         # backward shift: no entry after i is left past a gap
            j = (j + 1) & mask
            sj = t.item(j)
            if sj < 0:
                break
            home = (keys.item(sj) * _KNUTH & 0xFFFFFFFF) >> self._shift
            if (j - home) & mask >= (j - i) & mask:     # i is on its way from home
                t[i] = sj
                i = j
        t[i] = -1

    def _rebuild(self, size: int) -> None:
        """The mapped keys held put in a table of ``size`` positions (a power of two),
        or in a dense map (``size`` 0)."""
        live = np.flatnonzero(self._refs[:self.top] > 0)
        if self._odd_at:
            live = live[~np.isin(live, np.fromiter(self._odd_at, dtype=np.int64))]
        keys = self._key[live]
        self._hi = int(keys.max()) if len(keys) else -1
        if not size:
            self._map = np.full(_span(max(self._hi, 0)), -1, dtype=np.int32)
            self._map[keys] = live
            self._table = np.full(0, -1, dtype=np.int32)
            self._bits = np.zeros(0, dtype=np.uint8)
            return
        self._map = np.full(0, -1, dtype=np.int32)
        self._shift = 32 - (size.bit_length() - 1)
        self._table = t = np.full(size, -1, dtype=np.int32)
        bits = np.zeros(_span(max(self._hi, 0)), dtype=bool)
        bits[keys] = True
        self._bits = np.packbits(bits, bitorder="little")
        mask = size - 1
        pos = (keys * _KNUTH & 0xFFFFFFFF) >> self._shift
        todo = np.arange(len(keys))
        while len(todo):    # each round: a key whose position is free takes it (one
            at = pos[todo]  # per position), the others try the next one
            free = t[at] < 0
            took, first = np.unique(at[free], return_index=True)
            t[took] = live[todo[free][first]]
            placed = np.zeros(len(keys), dtype=bool)
            placed[todo[free][first]] = True
            todo = todo[~placed[todo]]
            pos[todo] = (pos[todo] + 1) & mask

    def slots_of(self, col: np.ndarray) -> np.ndarray:
        """The slot of each int64 key of ``col`` (-1: no holder holds it), by one
        indexing of ``_map``, or of ``_bits`` and a probe of ``_table`` for the keys
        held (and a dict lookup for each key outside the range, while any such key is
        held)."""
        if not len(col):
            return np.zeros(0, dtype=np.int64)
        m = self._map
        hashed = not len(m)
        size = 8 * len(self._bits) if hashed else len(m)
        lo, hi = int(col.min()), int(col.max())
        if lo >= 0 and hi < size:
            if not hashed:
                return m[col].astype(np.int64)
            inside = None
            out = np.full(len(col), -1, dtype=np.int64)
            keys = col
        else:
            out = np.full(len(col), -1, dtype=np.int64)
            inside = (col >= 0) & (col < size)
            keys = col[inside]
            if not hashed:
                out[inside] = m[keys]
        if hashed:
            held = (self._bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1 == 1
            at = np.flatnonzero(held) if inside is None else np.flatnonzero(inside)[held]
            out[at] = self._probe(col[at])
        if inside is not None and self._odd:
            odd = self._odd
            for i in np.flatnonzero(~inside).tolist():
                out[i] = odd.get(col.item(i), -1)
        return out

    def _probe(self, keys: np.ndarray) -> np.ndarray:
        """The slots of ``keys`` (each held, hashed): every key at its home, then those
        not found there step on together while more than ``_FEW`` are left (a numpy
        round a step), and the last few one by one (``_find``)."""
        t, stored = self._table, self._key
        mask = len(t) - 1
        pos = (keys * _KNUTH & 0xFFFFFFFF) >> self._shift
        out = t[pos].astype(np.int64)
        assert (out >= 0).all()             # (held: their homes are taken)
        todo = np.flatnonzero(stored[out] != keys)
        while len(todo) > _FEW:
            pos[todo] = at = (pos[todo] + 1) & mask
            out[todo] = found = t[at]
            assert (found >= 0).all()
            todo = todo[stored[found] != keys[todo]]
        for i in todo.tolist():
            where = self._find(keys.item(i))
            assert where >= 0
            out[i] = t.item(where)
        return out

    def nbytes(self) -> int:
        """Its bytes (``Holes.fixed_bytes``): the arrays, the odd keys' dicts' tables
        (which keep their size once grown), the free slots' list and its ints."""
        free = self._free
        getsizeof = sys.getsizeof
        return (self._map.nbytes + self._table.nbytes + self._bits.nbytes
                + self._key.nbytes + self._refs.nbytes
                + getsizeof(self._odd) + getsizeof(self._odd_at)
                + getsizeof(free) + INT_BYTES * len(free))


#: Knuth's multiplicative hash constant (2**32 over the golden ratio): a mapped key
#: (< 2**22) times it stays under 2**54, exact in an int64
_KNUTH = 2654435761
#: keys left probing that ``KeyMap._probe`` steps on one by one rather than in a
#: numpy round (a round costs several µs however few keys it moves)
_FEW = 8
#: a dense map shorter than this stays dense, however few keys it holds
_SMALLEST_SHRUNK = 1 << 12


def _span(key: int) -> int:
    """The dense map's length that holds ``key``, with an eighth of slack."""
    return min(DENSE_LIMIT, max(64, key + key // 8 + 1))


def _capacity(n: int) -> int:
    """A table's length for ``n`` mapped keys: a power of two, at most a quarter full."""
    return max(16, 1 << (4 * n).bit_length())


def _grown(a: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``a`` copied into an array of ``size`` entries, the new ones ``fill``."""
    out = np.full(size, fill, dtype=a.dtype)
    out[:len(a)] = a
    return out


class Holes:
    """The held keys of one partial node, their slots and their accounted bytes; the
    slots are ``keymap``'s, shared with the other nodes of its path (``KeyMap``)."""

    def __init__(self, manager: Any, owner: Any = None) -> None:
        """``owner``: a partial reader whose ``Holes`` (under the same ``manager``) this
        node shares its ``KeyMap`` with (its path's); else a map of its own."""
        self.manager = manager
        theirs: Holes | None = getattr(owner, "holes", None)
        #: the key map (its path's); ``db.memory`` passes over it (noria_py/memory.py)
        #: and counts it in ``_own``, the node's that made it, once
        self.keymap: KeyMap
        self._own: KeyMap | None
        if theirs is not None and theirs.manager is manager:
            self.keymap, self._own = theirs.keymap, None
        else:
            self.keymap = self._own = KeyMap()
        self._empty()

    def _empty(self) -> None:
        #: slot -> whether this node holds its key (the keymap's slots; one more entry
        #: than slots sized, False: ``select``'s stand-in for a slot out of range)
        self._held = np.zeros(1, dtype=bool)
        #: slot -> the bytes its key is accounted at (0 at a slot not held)
        self._size = np.zeros(0, dtype=np.int64)
        self.n = 0                  # keys held
        #: held keys written since they were last measured (measured when the manager
        #: reads the total: ``Partial.settle``)
        self.dirty: set[Any] = set()

    @property
    def filled(self) -> Held:
        """Held key -> bytes accounted (a view; ``dict(...)`` copies it)."""
        return Held(self)

    @property
    def _top(self) -> int:
        """Slots handed out so far (the keymap's: arrays by slot span them)."""
        return self.keymap.top

    def __contains__(self, key: Any) -> bool:
        return self.slot(key) >= 0

    def __len__(self) -> int:
        return self.n

    # ------------------------------------------------------------ keys and slots

    def slot(self, key: Any) -> int:
        """The slot of ``key``, or -1 where it is a hole."""
        if type(key) is not int:
            key = norm(key)
        s = self.keymap.slot(key)
        held = self._held
        return s if 0 <= s < len(held) and held.item(s) else -1

    def key_at(self, slot: int) -> Any:
        return self.keymap.key_at(slot)

    def keys_of(self, slots: np.ndarray) -> np.ndarray:
        """The keys of held ``slots`` (an int64 array), as a column: int64 where every
        one is in ``_map``'s range, else as ``dense.column`` makes it."""
        return self.keymap.keys_of(slots)

    def keys(self) -> list:
        """Every key held."""
        held = np.flatnonzero(self._held)
        km = self.keymap
        if not km._odd_at:
            out: list = km._key[held].tolist()
            return out
        return [km.key_at(s) for s in held.tolist()]

    def add(self, key: Any) -> int:
        """Hold ``key`` (a hole until now); its slot."""
        key = norm(key)
        assert self.slot(key) < 0, key      # (a hole until now)
        s = self.keymap.acquire(key)
        if s + 1 >= len(self._held):
            size = slot_length(s)
            self._held = _grown(self._held, size + 1, 0)
            self._size = _grown(self._size, size, 0)
        self._held[s] = True
        self._size[s] = 0
        self.n += 1
        return s

    def remove(self, key: Any) -> tuple[int, int]:
        """``key`` a hole again: (its slot, -1 if it was not held; the bytes it was
        accounted at, which the caller gives back). The caller clears the node's state
        at the slot (it is handed out again once no node of the path holds the key)."""
        key = norm(key)
        s = self.slot(key)
        if s < 0:
            return -1, 0
        self.dirty.discard(key)
        self._held[s] = False
        size = int(self._size[s])
        self._size[s] = 0
        self.keymap.release(key, s)
        self.n -= 1
        return s, size

    def clear(self) -> None:
        """Every key a hole; their bytes given back to the manager."""
        total = int(self._size.sum())
        if total:
            self.manager.resize(total, 0)
        km = self.keymap
        for s in np.flatnonzero(self._held).tolist():
            km.release(km.key_at(s), s)
        self._empty()

    def fixed_bytes(self, arrays: Iterable[np.ndarray | list] = ()) -> int:
        """The bytes no held key is accounted at (the module docstring): the arrays
        here (``_held``, ``_size``), the key map where it is this node's
        (``KeyMap.nbytes``; a path's other nodes share it), and the free entries and
        slack of the node's ``arrays`` by slot (its ``slot_arrays``). Not the node's
        own objects holding no key (a few KB, the same whatever the data)."""
        return (self._held.nbytes + self._size.nbytes
                + (self._own.nbytes() if self._own is not None else 0)
                + spare_bytes(arrays, self.n))

    def size_of(self, key: Any) -> int:
        """The bytes a held ``key`` is accounted at (0 for a hole)."""
        s = self.slot(key)
        return int(self._size.item(s)) if s >= 0 else 0

    def entry_bytes(self, key: Any) -> int:
        """Bytes a held ``key`` costs here (what its node adds to its state's)."""
        if type(key) is int and 0 <= key < DENSE_LIMIT:
            return MAPPED_BYTES
        return ODD_BYTES + sys.getsizeof(key)

    # ------------------------------------------------------------ accounting

    def measure(self, key: Any, size: int, slot: int | None = None) -> None:
        """``key`` (held; at ``slot``, where the caller has it) now takes ``size``
        bytes."""
        s = self.slot(key) if slot is None else slot
        if s >= 0:
            self.manager.resize(self._size.item(s), size)
            self._size[s] = size

    def touched(self, rows: list[tuple], keyf: Callable[[tuple], Any]) -> None:
        """A batch of ``rows`` (under held keys) was applied: their keys are to be
        measured again when the manager next reads the total; without a limit, the
        manager measures everything then instead (``Partial.settle``)."""
        manager = self.manager
        if manager.limit is None:
            manager.stale = True
        else:
            self.dirty.update(map(keyf, rows))

    def touched_all(self) -> None:
        """Every held key is to be measured again (its node's layout changed)."""
        manager = self.manager
        if manager.limit is None:
            manager.stale = True
        else:
            self.dirty.update(self.keys())

    def touched_slots(self, slots: np.ndarray | list) -> None:
        """``touched``, for a batch applied at ``slots`` (held)."""
        manager = self.manager
        if manager.limit is None:
            manager.stale = True
        elif isinstance(slots, np.ndarray):
            self.dirty.update(column_list(self.keys_of(np.unique(slots))))
        else:
            self.dirty.update(map(self.key_at, slots))

    # ------------------------------------------------------------ batches

    def select(self, batch: Batch, cols: tuple[int, ...], keyf: Callable[[tuple], Any],
               bare: bool = True) -> tuple[Batch, np.ndarray | list[int]]:
        """The rows of ``batch`` whose key (``cols``, read by ``keyf``) is held, and
        each one's slot: an int64 array where the batch is columnar and the key one
        column (held bare, ``bare``), else a list."""
        if not self.n or not batch:
            return Batch(), []
        bcols = batch.cols
        if bcols is not None and len(cols) == 1 and bare:
            col = bcols[cols[0]]
            if col.dtype == np.int64:
                slots = self._slots_of(col)
            else:
                slot = self.slot
                slots = np.fromiter((slot(k) for k in column_list(col)), dtype=np.int64,
                                    count=len(col))
            mask = slots >= 0
            if mask.all():
                return batch, slots
            if not mask.any():
                return Batch(), []
            signs: np.ndarray = batch.sign_array    # type: ignore[assignment]  # columnar
            return Batch.columnar([c[mask] for c in bcols], signs[mask]), slots[mask]
        rows: list[tuple] = []
        kept: list[int] = []
        at: list[int] = []
        slot = self.slot
        for r, s in zip(batch.rows, batch.signs):
            i = slot(keyf(r))
            if i >= 0:
                rows.append(r)
                kept.append(s)
                at.append(i)
        return Batch(rows, kept), at

    def keep(self, batch: Batch, cols: tuple[int, ...], keyf: Callable[[tuple], Any],
             bare: bool = True) -> Batch:
        """The rows of ``batch`` whose key is held (``select`` without the slots)."""
        return self.select(batch, cols, keyf, bare)[0]

    def _slots_of(self, col: np.ndarray) -> np.ndarray:
        """The slot of each int64 key of ``col`` (-1: a hole): the keymap's slots
        (``KeyMap.slots_of``), less those this node does not hold (one indexing of
        ``_held``; -1 and a slot past it read its last entry, False)."""
        slots = self.keymap.slots_of(col)
        held = self._held
        last = len(held) - 1
        return np.where(held[np.minimum(slots, last)], slots, -1)


def spare_bytes(arrays: Iterable[np.ndarray | list], held: int) -> int:
    """The bytes of ``arrays`` (indexed by slot) beyond ``held`` entries: their free
    slots and their slack, which no key's accounted bytes include (a numpy array's
    items, a list's 8-byte references)."""
    out = 0
    for a in arrays:
        item = a.itemsize if isinstance(a, np.ndarray) else 8
        out += max(0, len(a) - held) * item
    return out


class HeldKeys:
    """What a partial stateful operator (aggregate, join, TopK, DISTINCT, reader) shares
    about its ``Holes``: turning full again, and measuring the keys written since they
    were last measured (each operator measures a key its own way: ``_measure``)."""

    partial: bool
    holes: Holes | None
    owner: Any

    def slot_arrays(self) -> list[np.ndarray | list]:
        """The arrays (and lists) of its state indexed by slot (none: its state is kept
        in dicts by slot), whose entries a held key's accounted bytes include."""
        return []

    def make_full(self) -> None:
        """Hold every key again (the caller refills the state: noria_py/partial.py)."""
        self.partial = False
        self.holes = None
        self.owner = None
        self.reset()

    def settle(self) -> None:
        """Measure the held keys written since they were last measured (an evicted key
        among them is not measured: it holds nothing)."""
        holes = self.holes
        assert holes is not None
        dirty, holes.dirty = holes.dirty, set()
        for k in dirty:
            if k in holes:
                self._measure(k)

    def reset(self) -> None:        # (the operator's own: Operator.reset)
        raise NotImplementedError

    def _measure(self, key: Any) -> None:
        raise NotImplementedError

