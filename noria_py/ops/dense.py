"""Keyed state held as arrays indexed by key, while each key holds at most one row.

The stateful operators at the end of a keyed view (a join on a primary key or a group
key, the reader) usually hold one row per key, and the keys are usually small
non-negative ints (ids). Held as arrays indexed by key (int64 or float64 where the
values allow, objects otherwise), with a mask of the keys present, a whole columnar
batch is applied with array operations: no Python step and no scattered dict entry
per row, which is what the vote workload's join and reader spent most of their time
on. (COUNT's array of counts, ops/aggregate.py, is sized by the same rule.) Anything outside that shape (a second row for a key, a
key that is not such an int, a sign other than +-1, the removal of a row not held) is
refused without changing anything; the operator then moves its state to its general
form for good.

A checkpoint of such a state (runtime/checkpoints.py) is a copy of the arrays
(``copy``) or, relative to an earlier copy, the entries of the keys changed since
(``changed``: a ``RowsDelta``), which ``put`` writes into that copy in place: after
``put``, the copy holds exactly the rows the state held when ``changed`` was taken,
provided every key changed in between is among the keys (``KeyMarks`` collects them as
batches are applied: ``apply`` hands it the keys a row was added at and those whose row
went and none came, each once, where the batch's key column held an updated key twice).

The mask of which keys hold a row is left out the same way (None in
``RowsDelta.present``) while no key gained or lost its row since the last ``changed``
(``moved``, set by any batch that is not a rewrite in place, and by ``drop`` and
``put``): every key a batch wrote held a row before it and holds one after, so each
key of the delta holds a row in the state and in the copy (as of the last delta or a
later ``copy``), and ``put`` leaves the copy's mask and count as they are. In the
vote view once every article has a count, that is every checkpoint of the join (the
mask's gather, its write and the count's recount in the store: ~70 µs of ~650,
docs/benchmarks.md, "Each key marked once").

A delta leaves out the parts no batch has changed since the last ``changed``
(``touched``; None in ``RowsDelta.parts``): in the vote view a reader's title never
changes, and gathering and writing its objects was about half of the reader's
checkpoint. A part stays untouched while every batch only rewrites keys that held a
row before and hold one after, each with the very value it held: for an object part
the same object, for a typed one the same bits. ``apply`` reads that off the part's
memory before and after the write (``_bits``: a typed part's bits, an object part's
references as their addresses), at the keys written: two gathers of 8-byte words, no
object touched, where comparing the values cost about what leaving them out saved
(measured when it was built); ``apply_rows`` (a batch of a few rows) compares the rows it read
before with those it writes, the objects by identity and typed values by value and
sign (``_same_values``). Two addresses read while both objects were alive are equal
only for the same object. Any key gaining or losing its row, any part replaced (a
change of type), any other path (``drop``, ``put``) touches every part; a fresh or
copied state has every part touched. A typed key part, touched (a key gained its row), is
not gathered either: it holds k at every key k a batch wrote, so its entries in the
delta are the delta's keys themselves. (Before ``apply_rows`` tracked them, a single small batch in
a checkpoint interval touched every part: at Figure 3's 80% load, most of the
reader's checkpoints gathered its titles.)
"""
from __future__ import annotations

import math
import sys
from itertools import chain
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from .. import tuning
from ..nan import NAN, as_objects, column_list, equal_values
from ..tuning import DENSE_LIMIT

#: the smallest size of arrays indexed by key (a full state's)
KEYS_FLOOR = 1024
#: the smallest size of arrays indexed by slot (a partial node's, ops/holes.py): slots
#: are handed out densely from 0, so a node holding few keys keeps small arrays
SLOTS_FLOOR = 16


def slot_length(slot: int) -> int:
    """The length an array indexed by slot grows to when ``slot`` falls past its end:
    ``slot`` and a quarter more (at least ``SLOTS_FLOOR``). Every partial node's arrays
    by slot grow by this one rule (ops/holes.py): their entries past the keys held are
    counted against ``memory_limit`` (``Holes.fixed_bytes``), so a doubling, which
    leaves up to as many spare entries as keys held, took up to half the limit's share
    of the arrays from the keys; a quarter keeps that spare under a fifth of the length
    at amortized constant cost a slot (an entry is copied about four times as the array
    grows, where doubling copied it once: numpy copies, a few ns an entry)."""
    return max(SLOTS_FLOOR, slot + 1 + (slot >> 2))


def grown_size(keys: np.ndarray, size: int, by_slot: bool = False) -> int | None:
    """The array size that takes every key of ``keys`` (``size`` if it already does):
    indexed by key, twice the largest (at least ``KEYS_FLOOR``); indexed by slot
    (``by_slot``), ``slot_length`` of the largest; or None when one is negative or not
    below DENSE_LIMIT."""
    fit = fitted(keys, size, by_slot)
    return None if fit is None else fit[0]


def fitted(keys: np.ndarray, size: int, by_slot: bool = False) -> tuple[int, int] | None:
    """(``grown_size``, one past the largest of ``keys``: 0 for none), or None when
    one is negative or not below DENSE_LIMIT."""
    if not len(keys):
        return size, 0
    lo, hi = int(keys.min()), int(keys.max())
    if lo < 0 or hi >= DENSE_LIMIT:
        return None
    if hi < size:
        return size, hi + 1
    if by_slot:
        return min(DENSE_LIMIT, slot_length(hi)), hi + 1
    return min(DENSE_LIMIT, max(KEYS_FLOOR, 2 * hi)), hi + 1


def int_keys(values: Sequence) -> np.ndarray | None:
    """``values`` as an int64 array if every one is a Python int (not a bool, not None,
    not a float equal to an int: those compare equal to ints, so they would have to find
    the same entry), else None."""
    if set(map(type, values)) != {int}:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return None


def object_column(values: Sequence) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def column(values: Sequence) -> np.ndarray:
    """``values`` as an int64 or float64 array if they are all Python ints (that fit)
    or all floats, else as objects."""
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass
    elif kinds == {float}:
        return np.array(values, dtype=np.float64)
    return object_column(values)


#: part arrays kept typed (no Python object per value) while every value fits
TYPED = {np.dtype(np.int64): int, np.dtype(np.float64): float}
_INT64 = (-(1 << 63), (1 << 63) - 1)


class RowsDelta(NamedTuple):
    """What changed in a ``DenseRows`` at ``keys`` (int64, ascending): whether each holds
    a row (None: each held one at the last delta and holds one now, ``DenseRows.moved``),
    and each part's values there (copies; None: a part no batch changed since the last
    delta, the same values as then); ``size``, its arrays' length."""
    size: int
    keys: np.ndarray
    present: np.ndarray | None
    parts: list[np.ndarray | None]

    def __len__(self) -> int:
        return len(self.keys)


class KeyMarks:
    """The keys changed since the last ``take``, for a state held in arrays indexed by
    key. ``add`` keeps a batch's keys as they come (its int64 array, or the list of a
    batch applied row by row), by reference: nothing changes them afterwards (a
    batch's columns are immutable, and the operators make a new array for the keys
    they derive). They are marked in a bool array only at ``take`` (a checkpoint), or
    once ``tuning.MARKS_HELD`` batches' keys have piled up (which bounds what is held
    to that many batches' keys).

    Why not mark each batch's keys as it comes: the bool array, 100-200 KB in the vote
    view, is cold between batches (the state's own arrays, the payload logs and the
    next batch's rows go through the caches in between), so marking was a string of
    scattered writes to cold lines, twice a write (COUNT and the join); marked
    together, the lines the first batches' keys bring in stay warm for the rest, and a
    batch costs a list append in the flow (docs/benchmarks.md, "Checkpoints"). A
    bitmap, eight times smaller, marked at each batch (or every 4 to 64) by a Numba
    kernel, fared no better: its lines were cold at each marking all the same, and a
    batch paid what the checkpoint saved.

    The bool array is kept from one ``take`` to the next, all False in between: ``take``
    clears what it read in place. Invariant: every key marked is below ``size``, the
    bound the callers give (one past the largest key of the batch, which the state
    computed to fit its arrays anyway), so ``take`` reads and clears ``marked[:size]``
    alone. A new array of zeros at each ``take`` (as long as the state's arrays, twice
    the largest key) was written into fresh pages, which the kernel faulted in one by
    one, and ``flatnonzero`` read all of it (docs/benchmarks.md, "The marks kept from
    one checkpoint to the next")."""

    def __init__(self) -> None:
        self.marked = np.zeros(0, dtype=bool)
        self.held: list[np.ndarray | list[int]] = []
        #: one past the largest key an array held or marked since the last ``take``
        #: may have (a list's keys are bounded when they are marked)
        self.size = 0

    def add(self, keys: np.ndarray | list[int], size: int) -> None:
        """Hold ``keys`` (never changed afterwards) as changed: an array's keys each
        below ``size``; a list's are checked when marked (``size`` is not read)."""
        held = self.held
        held.append(keys)
        if size > self.size and not isinstance(keys, list):
            self.size = size
        if len(held) >= tuning.MARKS_HELD:
            self._mark()

    def _mark(self) -> None:
        """Mark the held keys in the bool array: the lists' keys chained into one index,
        one numpy call for them all (at 1 vote an insert the held keys are ~2,000 lists
        of one or two keys, and a call each cost ~1 ms a checkpoint), the arrays one
        call each (a batch's, big enough to pay for its call; not concatenated, which
        would copy them all)."""
        listed = list(chain.from_iterable(k for k in self.held if isinstance(k, list)))
        if listed:                              # (a list's keys are checked: cheap)
            top = max(listed) + 1
            if top > self.size:
                self.size = top
        size = self.size
        marked = self.marked
        if len(marked) < size:
            # (the marks so far copied into a new array of zeros; the new length's
            # spare quarter spares a growth a batch while the largest key creeps up)
            grown = self.marked = np.zeros(size + (size >> 2), dtype=bool)
            grown[:len(marked)] = marked
            marked = grown
        if listed:
            marked[listed] = True
        for k in self.held:
            if not isinstance(k, list):
                marked[k] = True
        self.held = []

    def take(self) -> np.ndarray:
        """The keys changed (int64, ascending); none are held or marked afterwards."""
        self._mark()
        size, self.size = self.size, 0
        marked = self.marked[:size]
        keys = np.flatnonzero(marked)
        marked[:] = False
        return keys

    def clear(self) -> None:
        """Forget the keys held and marked (a whole copy was taken instead)."""
        self.held = []
        self.marked[:self.size] = False
        self.size = 0

    def __bool__(self) -> bool:
        return (any(len(k) for k in self.held)
                or bool(self.marked[:self.size].any()))


class DenseRows:
    """Up to one row per int key, as ``parts``: arrays indexed by key, each holding one
    column of the row, and ``present``, which keys hold a row. A part is int64 or
    float64 while every value put in it has been of that type (comparing, gathering and
    storing such values touches no Python object), and an object array otherwise.

    ``key``: the part that is the key itself (a join's key column, a reader's), if the
    caller derives the keys from it: a row read is then built with the key in its place
    rather than from that part's array, one memory access less per lookup."""

    #: whether the arrays are indexed by slot (a partial node's:
    #: ``KeyedState(..., slots=True)``), so grown by ``slot_length``
    by_slot = False

    def __init__(self, parts: int, key: int | None = None) -> None:
        self.key = key
        self.present = np.zeros(0, dtype=bool)
        self.parts = [np.empty(0, dtype=object) for _ in range(parts)]
        self.kinds: list[type | None] = [None] * parts     # int, float: the part is typed
        self.n = 0
        #: per part, whether a value of it may have changed since the last ``changed``
        self.touched = [True] * parts
        #: whether a key may have gained or lost its row since the last ``changed``
        #: (while not, every key a batch wrote held a row before it and holds one
        #: after: a delta's mask is all True, and needs neither gathering nor writing)
        self.moved = True
        self._refresh()

    def _refresh(self) -> None:
        """``row`` anew, over the arrays as they are now (called whenever one is
        replaced)."""
        #: int key -> its row, or None (``get`` without the int check: one call less on
        #: the reader's lookup, through ``KeyedState.get``)
        self.row = _row_getter(self.present, self.parts, self.key)
        #: per part, its memory as 8-byte words (``_words``): what ``apply`` compares
        self._bits = [_words(p) for p in self.parts]

    def __len__(self) -> int:
        return self.n

    def copy(self) -> "DenseRows":
        """An independent copy (the arrays copied at memory speed: a checkpoint)."""
        c = DenseRows.__new__(DenseRows)
        c.key = self.key
        c.by_slot = self.by_slot
        c.present = self.present.copy()
        c.parts = [p.copy() for p in self.parts]
        c.kinds = list(self.kinds)
        c.n = self.n
        c.touched = [True] * len(c.parts)
        c.moved = True
        c._refresh()
        return c

    @classmethod
    def from_arrays(cls, key: int | None, present: np.ndarray,
                    parts: list[np.ndarray]) -> "DenseRows":
        """The rows ``present`` and ``parts`` hold (as ``copy`` makes them; a checkpoint
        that crossed the network), taking the arrays as they are."""
        if any(len(p) != len(present) for p in parts) or present.dtype != bool:
            raise ValueError("dense rows need a bool mask and parts of its length")
        c = cls.__new__(cls)
        c.key = key
        c.present = present
        c.parts = parts
        c.kinds = [TYPED.get(p.dtype) for p in parts]
        c.n = int(present.sum())
        c.touched = [True] * len(parts)
        c.moved = True
        c._refresh()
        return c

    def changed(self, keys: np.ndarray) -> RowsDelta:
        """The entries at ``keys`` (int64, ascending, each below the arrays' length), as
        copies, of the parts touched since the last call (None for the others): where a
        checkpoint's copy of this state, as of that call (or a ``copy`` since), has to
        be brought up to date. A typed key part's entries are ``keys`` itself (k at
        every key k: the part holds the key of each row, and a key gone keeps it). The
        mask is None while no key gained or lost its row since the last call
        (``moved``), ``keys`` being keys batches wrote: each held a row then and holds
        one now. No part is touched afterwards."""
        touched = self.touched
        self.touched = [False] * len(touched)
        moved, self.moved = self.moved, False
        key = self.key
        # (a typed key part holds k at every key k written: ``keys`` are its values
        # there, with no gather; the delta only reads them)
        return RowsDelta(len(self.present), keys, self.present[keys] if moved else None,
                         [None if not t else keys if i == key and p.dtype == np.int64
                          else p[keys] for i, (p, t) in enumerate(zip(self.parts, touched))])

    def put(self, delta: RowsDelta) -> None:
        """Write ``delta`` (``changed`` of the state this one was copied from, later on) in
        place: this then holds what that state held when ``delta`` was taken. A part
        whose values came in another type than it holds becomes objects, unless every
        row it holds is written over (then it takes the new type, as ``apply`` does)."""
        if delta.size > len(self.present):
            self._grow(delta.size)
        keys, present = delta.keys, self.present
        if delta.present is None:           # (every key held a row and holds one: as is)
            rows = len(keys)
        else:
            rows = int(np.count_nonzero(delta.present))
            self.n += rows - int(np.count_nonzero(present[keys]))
            present[keys] = delta.present
            self.moved = True
        self.touched = [True] * len(self.parts)
        for i, new in enumerate(delta.parts):
            if new is None:                 # (unchanged since the last delta)
                continue
            held = self.parts[i]
            if held.dtype != new.dtype:
                if self.n == rows:          # no row kept apart
                    held = np.empty(len(held), dtype=new.dtype)
                    if held.dtype == object:
                        held[:] = None
                else:
                    held = as_objects(held)
                self.parts[i] = held
                self.kinds[i] = TYPED.get(held.dtype)
            _assign(held, keys, new)
        self._refresh()

    def _grow(self, size: int) -> None:
        """Arrays of ``size`` entries (more than now), the new ones empty."""
        old = len(self.present)
        present = np.zeros(size, dtype=bool)
        present[:old] = self.present
        self.present = present
        for i, p in enumerate(self.parts):
            grown = np.empty(size, dtype=p.dtype)
            grown[:old] = p
            self.parts[i] = grown
        self._refresh()

    def _fit(self, keys: np.ndarray) -> int | None:
        """Grow the arrays to take ``keys`` if need be; one past the largest (0 for
        none), or None if they cannot be held (the arrays left as they are)."""
        fit = fitted(keys, len(self.present), self.by_slot)
        if fit is None:
            return None
        size, top = fit
        if size > len(self.present):
            self._grow(size)
        return top

    def apply(self, keys: np.ndarray, parts: Sequence[np.ndarray], signs: np.ndarray,
              marks: KeyMarks | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Apply a batch (per row: its key, its parts, its sign), or refuse it and change
        nothing (None). Accepted: signs of +-1, each key removed at most once and added
        at most once, every removal of the row held, every addition to a key left
        empty. Returns (keys whose row went and none came, keys that had no row and got
        one): where a left join's padding changes. ``marks`` (a checkpointing
        operator's) gets the keys the batch changed: those a row was added at, and
        those whose row went and none came, each once (an update, -old +new, is two
        rows of one key: marking the batch's keys marked it twice)."""
        top = self._fit(keys) if len(parts) == len(self.parts) else None
        if top is None:
            return None
        neg = signs == -1
        pos = signs == 1
        kn = keys[neg]
        kp = keys[pos]
        if len(kn) + len(kp) != len(keys) or not _distinct(kn) or not _distinct(kp):
            return None
        present = self.present
        if len(kn):
            if not present[kn].all():
                return None
            for held, new in zip(self.parts, parts):
                if not equal_values(held[kn], new[neg]):
                    return None
        had = present[kp]
        present[kn] = False
        if had.any() and present[kp].any():
            present[kn] = True
            return None
        present[kp] = True
        empty = self.n == len(kn)
        gone = kn[~present[kn]]
        touched = self.touched
        # (a part is left untouched only by rewrites in place: see the module's doc)
        in_place = not len(gone) and bool(had.all())
        if not in_place:
            self.moved = True
        for i, new in enumerate(parts):
            held = self.parts[i]
            if held.dtype != new.dtype and (empty or held.dtype != object):
                # typed as the values coming in while it holds nothing; objects once
                # two kinds of values meet
                held = (np.empty(len(held), dtype=new.dtype) if empty
                        else as_objects(held))
                self._set_part(i, held)
                self.kinds[i] = TYPED.get(held.dtype)
                touched[i] = True
            if touched[i] or not in_place:
                touched[i] = True
                _assign(held, kp, new[pos])
                continue
            if i == self.key:               # (it holds each key: k at k, as before)
                continue
            bits = self._bits[i]
            before = bits[kp]
            _assign(held, kp, new[pos])
            touched[i] = not np.array_equal(before, bits[kp])
        for held, kind in zip(self.parts, self.kinds):
            if kind is None:
                held[gone] = None       # no stale references
        self.n += len(kp) - len(kn)
        if marks is not None:               # (every key of the batch is below ``top``)
            marks.add(kp, top)
            if len(gone):
                marks.add(gone, top)
        return gone, kp[~had]

    def apply_rows(self, keys: Sequence, items: Sequence[tuple], signs: Sequence[int],
                   marks: KeyMarks | None = None) -> tuple[list, list] | None:
        """``apply`` for a few rows (``items``: each row, a tuple of its parts), in
        Python, one delta at a time: accepted if every delta finds the key in the state
        the earlier ones left (an addition to an empty key, a removal of the row held).
        ``marks`` gets the keys the batch touched, as ``apply``'s."""
        parts = self.parts
        present = self.present
        size = len(present)
        held = self.row
        after: dict = {}        # key -> its parts as the batch leaves them (None: empty)
        had: dict = {}          # key -> its row before the batch (None: empty)
        for k, item, s in zip(keys, items, signs):
            if type(k) is not int or k < 0 or k >= DENSE_LIMIT:
                return None
            if k in after:
                cur = after[k]
            else:
                cur = had[k] = held(k)
            if s == 1 and cur is None:
                after[k] = item
            elif s == -1 and cur is not None and cur == item:
                after[k] = None
            else:
                return None
        if not after:
            return [], []
        # a part stays untouched only by rewrites in place, as in ``apply``: every key
        # written held a row and keeps one, each with the same object (an object part)
        # or bits (a typed one) there; a value that does not fit a typed part makes the
        # part objects below, which touches it
        touched = self.touched
        if all(had[k] is not None and item is not None for k, item in after.items()):
            kinds = self.kinds
            for i, t in enumerate(touched):
                if not t and i != self.key and not _same_values(kinds[i], i, had, after):
                    touched[i] = True
        else:
            self.touched = [True] * len(parts)
            self.moved = True
        top = max(after)
        if top >= size:
            self._fit(np.array([top], dtype=np.int64))
            present = self.present
        kinds = self.kinds
        if self.n == 0:                 # holding nothing: type the parts anew
            for i, p in enumerate(parts):
                seen = {type(item[i]) for item in after.values() if item is not None}
                kind = seen.pop() if len(seen) == 1 else None
                if kind is not kinds[i] and kind in (int, float):
                    self._set_part(i, np.empty(len(p), dtype=np.int64 if kind is int
                                               else np.float64))
                    kinds[i] = kind
        gone, came = [], []
        for k, item in after.items():
            if item is None:
                if had[k] is not None:
                    present[k] = False
                    for i, kind in enumerate(kinds):
                        if kind is None:
                            parts[i][k] = None
                    gone.append(k)
                continue
            present[k] = True
            for i, v in enumerate(item):
                kind = kinds[i]
                if kind is not None and (type(v) is not kind or (
                        kind is int and not _INT64[0] <= v <= _INT64[1])):
                    self._set_part(i, as_objects(parts[i]))  # a value that does not fit
                    kinds[i] = None
                parts[i][k] = v
            if had[k] is None:
                came.append(k)
        self.n += len(came) - len(gone)
        if marks is not None:
            marks.add(list(after), 0)   # (a list: bounded as it is marked)
        return gone, came

    def drop(self, k: int) -> None:
        """The row at ``k`` gone, if there is one (an evicted key of a partial node)."""
        if 0 <= k < len(self.present) and self.present[k]:
            self.present[k] = False
            self.touched = [True] * len(self.parts)
            self.moved = True
            for p, kind in zip(self.parts, self.kinds):
                if kind is None:
                    p[k] = None         # no stale reference
            self.n -= 1

    def arrays(self) -> list[np.ndarray]:
        """The arrays indexed by key: whether each holds a row, and each part."""
        return [self.present, *self.parts]

    def entry_bytes(self, k: int) -> int:
        """Bytes the row at ``k`` costs: its entries in the arrays (a bool and each
        part's item) and the objects an object part points to there (0: no row)."""
        if not (0 <= k < len(self.present) and self.present.item(k)):
            return 0
        size = 1 + 8 * len(self.parts)          # (every part's items are 8 bytes)
        for p, kind in zip(self.parts, self.kinds):
            if kind is None:                    # objects
                v = p.item(k)
                if v is not None:
                    size += sys.getsizeof(v)
        return size

    def _set_part(self, i: int, part: np.ndarray) -> None:
        self.parts[i] = part
        self.touched[i] = True
        self._refresh()

    def get(self, key: object) -> tuple | None:
        """The row held for ``key``, or None."""
        return self.row(key) if type(key) is int else None

    def gather(self, keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Which of ``keys`` hold a row, and their parts. A key outside the arrays (a
        negative one too: a join's other side may have left the dense form for it)
        holds none."""
        present = self.present
        if not len(keys):
            return np.zeros(0, dtype=bool), [p[:0] for p in self.parts]
        if int(keys.max()) >= len(present) or int(keys.min()) < 0:
            hit = np.zeros(len(keys), dtype=bool)
            inside = (keys >= 0) & (keys < len(present))
            hit[inside] = present[keys[inside]]
        else:
            hit = present[keys]
        at = keys[hit]
        return hit, [p[at] for p in self.parts]

    def keys(self) -> np.ndarray:
        return np.flatnonzero(self.present)

    def items(self) -> Iterator[tuple[int, tuple]]:
        """(key, row) for every key holding a row."""
        keys = self.keys()
        return zip(keys.tolist(), zip(*[column_list(p[keys]) for p in self.parts]))


def rows_by_key(hit: np.ndarray, columns: Sequence[Sequence]) -> list[list[tuple]]:
    """Per key, ``[row]`` where ``hit`` says it holds one and ``[]`` where not, the rows
    made of ``columns`` (Python values, one a hit, in order): a dense reader's
    ``lookup_many``, at the reader or at a cluster client."""
    if hit.all():                   # (every key holds a row: no test per key)
        return [[row] for row in zip(*columns)]
    rows = iter(zip(*columns))
    return [[next(rows)] if h else [] for h in hit.tolist()]


def _same(k: int) -> int:
    return k


def _item(part: np.ndarray):
    """int key -> the Python value ``part`` holds there (a float part's NaN as the one
    NaN: ``item`` makes a new float object each time)."""
    item = part.item
    if part.dtype.kind != "f":
        return item

    def value(k: int) -> float:
        v = item(k)
        return v if v == v else NAN
    return value


class _References:
    """An object array's memory as numpy's array interface describes it, with uint64
    items: the addresses of the objects it refers to (``_words``). Holds the array, so
    that the view made of it keeps the memory alive."""

    def __init__(self, a: np.ndarray) -> None:
        self.base = a
        self.__array_interface__ = {"version": 3, "shape": a.shape, "strides": a.strides,
                                    "typestr": "<u8",
                                    "data": (a.__array_interface__["data"][0], True)}


def _words(part: np.ndarray) -> np.ndarray:
    """A read-only view of ``part``'s items as 8-byte words: a typed part's bits, an object
    part's references (addresses), so that comparing two reads of it tells whether the
    items written in between were the same ones, without touching an object."""
    if part.dtype == object:
        return np.asarray(_References(part))
    if part.dtype.itemsize in (1, 2, 4, 8):      # (bits: a float's -0.0 is not 0.0)
        return part.view(np.dtype(f"u{part.dtype.itemsize}"))
    return part


def _assign(held: np.ndarray, at: np.ndarray, new: np.ndarray) -> None:
    """``held[at] = new``; float values going into an object array as objects whose
    NaN is the one NaN."""
    held[at] = as_objects(new) if held.dtype == object and new.dtype.kind == "f" else new


def _row_getter(present: np.ndarray, parts: list[np.ndarray], key: int | None):
    """int key -> the tuple of ``parts``' values at key (at position ``key``, the key),
    or None where ``present`` says no row: a reader's lookup, written out for the usual
    widths (a comprehension costs more than the three values it reads)."""
    size, has = len(present), present.item
    item = [_same if i == key else _item(p) for i, p in enumerate(parts)]
    if key == 0 and len(item) == 3:         # an id first: the commonest view shape
        _, b, c = item
        return lambda k: (k, b(k), c(k)) if 0 <= k < size and has(k) else None
    if key == 0 and len(item) == 2:
        _, b = item
        return lambda k: (k, b(k)) if 0 <= k < size and has(k) else None
    if len(item) == 1:
        a, = item
        return lambda k: (a(k),) if 0 <= k < size and has(k) else None
    if len(item) == 2:
        a, b = item
        return lambda k: (a(k), b(k)) if 0 <= k < size and has(k) else None
    if len(item) == 3:
        a, b, c = item
        return lambda k: (a(k), b(k), c(k)) if 0 <= k < size and has(k) else None
    return lambda k: tuple([f(k) for f in item]) if 0 <= k < size and has(k) else None


def _same_values(kind: type | None, i: int, before: dict, after: dict) -> bool:
    """Whether writing each row of ``after`` (key -> row) over the row ``before`` held
    there leaves part ``i`` as it was: the same object in an object part (``kind``
    None; the rows read before keep the old objects alive, so ``is`` is exact), the
    same value in an int part, the same value and sign in a float part (-0.0 is not
    0.0; a NaN counts as changed). A value of another type is caught by the caller."""
    if kind is None:
        return all(before[k][i] is row[i] for k, row in after.items())
    if kind is float:
        return all(before[k][i] == row[i]
                   and math.copysign(1.0, before[k][i]) == math.copysign(1.0, row[i])
                   for k, row in after.items())
    return all(before[k][i] == row[i] for k, row in after.items())


def _distinct(keys: np.ndarray) -> bool:
    if len(keys) < 2:
        return True
    if (keys[1:] > keys[:-1]).all():        # ascending, as an aggregate emits them
        return True
    s = np.sort(keys)
    return bool((s[1:] != s[:-1]).all())


def batch_keys(batch, key: int) -> np.ndarray | None:
    """Column ``key`` of a batch as int64 keys, or None if a key is not an int."""
    cols = batch.cols
    if cols is None:
        return int_keys([r[key] for r in batch.rows])
    keys = cols[key]
    if keys.dtype == np.int64:
        return keys
    return int_keys(keys.tolist()) if keys.dtype == object else None


def batch_signs(batch) -> np.ndarray:
    signs = batch.sign_array
    return signs if signs is not None else np.array(batch.signs, dtype=np.int64)


def batch_columns(batch, key: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray] | None:
    """(``batch_keys``, the batch's columns, its signs as int64), or None."""
    keys = batch_keys(batch, key)
    if keys is None:
        return None
    cols = batch.cols
    if cols is None:
        cols = [column(c) for c in zip(*batch.rows)]
    return keys, list(cols), batch_signs(batch)
