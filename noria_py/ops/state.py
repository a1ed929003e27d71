"""Keyed state shared by the stateful operators.

``KeyedState`` is the one type a stateful operator keeps rows in: a multiset of rows
under each key (a join side, a reader). ``KeyedCounts`` keeps one int per key (COUNT's
row counts). Each hides two forms behind one interface, and the operators above never
ask which form they talk to:

- dense (``dense.DenseRows``, or an array of counts): arrays indexed by key, while
  every key is a small non-negative int and, for rows, holds at most one row (a
  primary key, a group key). A big batch is applied with array operations;
- general: a dict, key -> bucket of rows (``bucket_add``) or key -> count.

A state starts dense when its key is one column and moves to the general form for
good at the first batch the dense form refuses (the dense form refuses a batch
without changing anything, so the batch is then applied whole to the general form).
Both forms hold the same multiset, and every read (``get``, ``items``, ``rows``,
``snapshot``) answers the same in both: the model tests check one against the other.

``restore(snapshot())`` gives back an equal state (the seam checkpoints use).

A partial node (ops/holes.py) keeps a ``KeyedState(..., slots=True)``: the same two
forms indexed by each held key's slot, a small int, instead of the key (the dense form
then from the first row, whatever the key's type, with the key columns kept in the
rows), and ``KeyedCounts`` of slots; ``drop`` empties an evicted key's slot.
"""
from __future__ import annotations

import sys
from operator import itemgetter
from typing import Callable, Iterable, Iterator, NamedTuple

import numpy as np

from .. import tuning
from ..batch import Batch
from ..expression import columns_getter
from ..memory import bucket_bytes
from ..nan import column_list
from ..tuning import DENSE_LIMIT
from .dense import DenseRows, KeyMarks, batch_keys, batch_signs, column, grown_size

tuple_key = columns_getter    # row -> the tuple of its key columns

#: bytes of a dict's slot for one entry (hash, key and value pointers, and the slack
#: of its table): a bucket's share of the general form's dict (``entry_bytes``)
DICT_SLOT = 50


def bare_key(cols: tuple[int, ...]) -> Callable[[tuple], object]:
    """Like ``tuple_key``, but a one-column key is the bare value: no tuple to build and
    hash per row (the join's hot path)."""
    if len(cols) == 1:
        return itemgetter(cols[0])
    return tuple_key(cols)


def bucket_add(bucket, row: tuple, sign: int):
    """``bucket`` with ``sign`` copies of ``row`` added (negative removes): the new
    bucket, or None when it is empty.

    A bucket holding one copy of one row, by far the commonest (a key of a grouped or
    primary-keyed relation), is the bare row rather than a one-entry dict: a third of
    the memory, and no dict to build and drop when an aggregate swaps -old for +new.
    Anything else (copies, several rows, a count below zero in transit) is a
    ``{row: count}`` dict, changed in place. Readers of buckets go through ``items``,
    ``count`` and ``expand``."""
    if bucket is None:
        return row if sign == 1 else {row: sign}
    if type(bucket) is tuple:
        if sign == -1 and bucket == row:
            return None
        bucket = {bucket: 1}
    c = bucket.get(row, 0) + sign
    if c:
        bucket[row] = c
        return bucket
    del bucket[row]
    if not bucket:
        return None
    if len(bucket) == 1:                    # back to one row: bare again if one copy
        (last, n), = bucket.items()
        if n == 1:
            return last
    return bucket


def index_add(index: dict, key, row: tuple, sign: int) -> None:
    """Add ``sign`` copies of ``row`` under ``key`` (negative removes); empty buckets go
    (see ``bucket_add``)."""
    bucket = bucket_add(index.get(key), row, sign)
    if bucket is None:
        index.pop(key, None)
    else:
        index[key] = bucket


def index_batch(index: dict, keys: Iterable, rows: Iterable[tuple], signs: Iterable[int],
                before: dict | None = None) -> None:
    """``index_add`` for each (key, row, sign) in turn, its two commonest cases inline
    (a row arriving at an empty key, the one row of a key leaving): a reader's per-row
    hot loop. ``before``, if given, gets key -> whether it held rows (a count above 0)
    before the batch, for each key the batch touches."""
    get = index.get
    for k, r, s in zip(keys, rows, signs):
        had = get(k)
        if before is not None and k not in before:
            before[k] = had is not None and (type(had) is tuple or count(had) > 0)
        if had is None and s == 1:
            index[k] = r
        elif s == -1 and type(had) is tuple and had == r:
            del index[k]
        else:
            index_add(index, k, r, s)


def items(bucket) -> Iterable[tuple[tuple, int]]:
    """(row, count) pairs of a bucket."""
    return ((bucket, 1),) if type(bucket) is tuple else bucket.items()


def count(bucket) -> int:
    """The number of rows in a bucket (0 for none)."""
    if bucket is None:
        return 0
    return 1 if type(bucket) is tuple else sum(bucket.values())


def expand(bucket, out: list[tuple]) -> None:
    """Append each row of ``bucket`` (a bucket, or any {row: count}) as many times as it
    is present."""
    if type(bucket) is tuple:
        out.append(bucket)
        return
    for r, c in bucket.items():
        if c == 1:
            out.append(r)
        elif c > 1:
            out.extend([r] * c)


def as_int(key) -> int | None:
    """The int equal to ``key`` (a float, bool, numpy int...), which a dict would find
    under that int; None if there is none."""
    try:
        k = int(key)
    except (TypeError, ValueError, OverflowError):
        return None
    return k if k == key else None


#: (keys whose rows went and none came, keys that held none and got some): what a
#: left join's padding follows (``KeyedState.apply(..., track=True)``): int64 arrays
#: from the dense form, else lists
Flips = tuple[np.ndarray, np.ndarray] | tuple[list, list]


class KeyedState:
    """A multiset of rows of ``width`` columns under each key; a row's key is its
    ``key`` columns (the bare value for one column, a tuple for several).

    Applying a batch takes two calls, so that an operator can use the keys for more
    than the update (a join probes the other side with them): ``prepare`` gives the
    keys and the batch as the state takes it, ``apply`` applies them. Reads return
    buckets (``bucket_add``: a bare row tuple for one copy of one row, else a
    {row: count} dict), which ``items``, ``count`` and ``expand`` read.

    ``get`` is bound to the current form's own lookup when the form is chosen (the
    dict's ``get`` itself in the general form), so a read, the reader's whole job,
    costs no Python call of this class."""

    get: Callable[[object], tuple | dict | None]

    def __init__(self, width: int, key: tuple[int, ...], slots: bool = False) -> None:
        self.width = width
        self.key = key
        self._keyf = bare_key(key)
        #: indexed by slot (a partial node's, ops/holes.py) rather than by key: the
        #: caller gives each row's slot (``prepare_slots``), reads and drops by slot;
        #: the rows keep their key columns as they are
        self.slots = slots
        self.reset()

    def reset(self) -> None:
        """Empty, and dense again where the key allows."""
        #: the dense form (None once general); ``dense.parts`` are its arrays
        self.dense: DenseRows | None = (
            DenseRows(self.width, None) if self.slots
            else DenseRows(self.width, self.key[0]) if len(self.key) == 1 else None)
        if self.slots:
            self.dense.by_slot = True  # type: ignore[union-attr]  # just made
        self._index: dict = {}          # the general form: key -> bucket
        self.get = self._index.get if self.dense is None else self._get_dense

    @property
    def form(self) -> str:
        return "general" if self.dense is None else "dense"

    def __len__(self) -> int:
        """The number of keys holding rows."""
        return len(self.dense) if self.dense is not None else len(self._index)

    # ------------------------------------------------------------ writes

    def prepare(self, batch: Batch) -> tuple[np.ndarray | list, Batch]:
        """The key of each row of ``batch``, and the batch as ``apply`` takes it. Where
        the dense form can take the batch whole (``tuning.ARRAY_MIN`` rows or more, int
        keys), the keys are an int64 array and the batch is columnar; otherwise the
        keys are a list."""
        if self.dense is not None and len(batch) >= tuning.ARRAY_MIN:
            keys = batch_keys(batch, self.key[0])
            if keys is not None:
                if batch.cols is None:
                    batch = Batch.columnar([column(c) for c in zip(*batch.rows)],
                                           batch_signs(batch))
                return keys, batch
        if batch.cols is not None and len(self.key) == 1:
            return column_list(batch.cols[self.key[0]]), batch
        return list(map(self._keyf, batch.rows)), batch

    def prepare_slots(self, slots: np.ndarray | list, batch: Batch) -> tuple[np.ndarray | list, Batch]:
        """``prepare`` for a state indexed by slot, given each row's slot (an int64 array
        or a list: ``Holes.select``): the slots as ``apply`` takes them, and the batch."""
        if self.dense is not None and len(batch) >= tuning.ARRAY_MIN:
            if batch.cols is None:
                batch = Batch.columnar([column(c) for c in zip(*batch.rows)],
                                       batch_signs(batch))
            if not isinstance(slots, np.ndarray):
                slots = np.array(slots, dtype=np.int64)
            return slots, batch
        return (slots.tolist() if isinstance(slots, np.ndarray) else slots), batch

    def layout(self) -> tuple | None:
        """What a key's ``entry_bytes`` depends on besides its own rows: the form, and
        each array's type in the dense form (a part that turns to objects makes every
        row's values objects). A partial node measures every key again when it moves."""
        return None if self.dense is None else tuple(self.dense.kinds)

    def drop(self, key: object) -> None:
        """Every row under ``key`` gone (an evicted key of a partial node)."""
        if self.dense is not None:
            self.dense.drop(key)        # type: ignore[arg-type]  # dense: an int key
        else:
            self._index.pop(key, None)

    def entry_bytes(self, key: object) -> int:
        """The bytes of the rows under ``key`` and their entry (what eviction accounts):
        in the dense form the arrays' entries and the objects they point to, in the
        general form the bucket and a dict slot (``DICT_SLOT``)."""
        if self.dense is not None:
            return self.dense.entry_bytes(key)  # type: ignore[arg-type]  # an int key
        bucket = self._index.get(key)
        if bucket is None:
            return 0
        return bucket_bytes(None, bucket) - sys.getsizeof(None) + DICT_SLOT

    def apply(self, keys: np.ndarray | list, batch: Batch, track: bool = False,
              marks: KeyMarks | None = None) -> Flips | None:
        """Add each row of ``batch`` under its key (``prepare``) as many times as its
        sign says (negative removes). With ``track``: the keys whose rows went
        (every row gone, none left) and those that got rows where they held none, as
        the batch leaves them; otherwise None. ``marks`` (a checkpointing operator's)
        gets the keys the batch changed in the dense form (``DenseRows.apply``); in the
        general form, none (the operator's delta is then the batches it took)."""
        held = self.dense
        if held is not None:
            flips: Flips | None
            if isinstance(keys, np.ndarray):     # (prepare made the batch columnar)
                flips = held.apply(keys, list(batch.cols),  # type: ignore[arg-type]
                                   batch_signs(batch), marks)
            else:
                flips = held.apply_rows(keys, batch.rows, batch.signs, marks)
            if flips is not None:
                return flips if track else None
            self.to_general()
            if isinstance(keys, np.ndarray):
                keys = keys.tolist()
        if not track:
            index_batch(self._index, keys, batch.rows, batch.signs)
            return None
        before: dict = {}
        index = self._index
        index_batch(index, keys, batch.rows, batch.signs, before)
        gone, came = [], []
        for k, was in before.items():
            now = count(index.get(k)) > 0
            if was and not now:
                gone.append(k)
            elif now and not was:
                came.append(k)
        return gone, came

    def to_general(self) -> None:
        """Leave the dense form for good: its rows into the dict."""
        held = self.dense
        if held is None:
            return
        self.dense = None
        self._index.update(held.items())
        self.get = self._index.get

    def dense_copy(self) -> DenseRows | None:
        """A copy of the dense form's arrays (None in the general form): a checkpoint
        of this state at memory speed."""
        return None if self.dense is None else self.dense.copy()

    def load_dense(self, rows: DenseRows) -> None:
        """The state ``rows`` (from ``dense_copy``) holds, in the dense form."""
        self.reset()
        self.dense = rows
        self.get = self._get_dense

    def restore(self, snapshot: Batch) -> None:
        """The state ``snapshot()`` was taken of."""
        self.reset()
        if snapshot:
            self.apply(*self.prepare(snapshot))

    # ------------------------------------------------------------ reads

    def _get_dense(self, key: object) -> tuple | None:
        """``get`` in the dense form: the bucket of rows held under ``key`` (a bare
        row, there), or None. A key equal to an int (a float, a bool) finds that
        int's row, as it would in a dict."""
        if type(key) is not int:
            key = as_int(key)
            if key is None:
                return None
        return self.dense.row(key)  # type: ignore[union-attr]  # bound only while dense

    def gather(self, keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """For int64 ``keys``: which hold a row, and those rows' columns; None in the
        general form (``get`` then, key by key)."""
        held = self.dense
        if held is None:
            return None
        return held.gather(keys)

    def items(self) -> Iterator[tuple[object, tuple | dict]]:
        """(key, bucket) for every key holding rows."""
        if self.dense is not None:
            return self.dense.items()
        return iter(self._index.items())

    def rows(self) -> list[tuple]:
        """Every row, as many times as it is held."""
        if self.dense is not None:
            return [row for _, row in self.dense.items()]
        out: list[tuple] = []
        for bucket in self._index.values():
            expand(bucket, out)
        return out

    def snapshot(self) -> Batch:
        """Every row held, with its count as its sign (``restore`` takes it back)."""
        if self.dense is not None:
            return Batch.inserts(self.rows())
        rows: list[tuple] = []
        signs: list[int] = []
        for bucket in self._index.values():
            for r, c in items(bucket):
                rows.append(r)
                signs.append(c)
        return Batch(rows, signs)


def net_by_key(keys: np.ndarray, signs: np.ndarray | list) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of a batch, sorted, and the sum of the signs of each."""
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv, weights=signs, minlength=len(uniq)).astype(np.int64)


class DenseCounts(NamedTuple):
    """COUNT's state in a checkpoint while its counts are an array: a copy of the array,
    and the NULL counts kept apart (``Aggregate.export_state``)."""
    counts: np.ndarray
    nulls: dict


class CountsDelta(NamedTuple):
    """What changed in COUNT's array of counts since its last export: the counts at
    ``keys`` (int64, ascending; 0: the group is gone), the NULL counts of those keys
    where any is or was held (0: none), and the array's length."""
    size: int
    keys: np.ndarray
    counts: np.ndarray
    nulls: dict

    def __len__(self) -> int:
        return len(self.keys)


#: keys touched, their counts before and after (parallel; int64 arrays or lists)
Changes = tuple[np.ndarray, np.ndarray, np.ndarray] | tuple[list, list, list]


class KeyedCounts:
    """An int per key (COUNT's rows per group); a key whose count is 0 is not held.

    Dense: one int64 array indexed by key (0: no group) while every key is a small
    non-negative int: a columnar batch is counted with array operations only (the
    array spans every key up to the largest seen: at most DENSE_LIMIT entries, 32 MiB).
    General: a dict. A count may be below 0 in transit (a removal before its row)."""

    #: whether the array is indexed by slot (a partial aggregate's), so grown by
    #: ``dense.slot_length``
    by_slot = False

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.dense: np.ndarray | None = np.zeros(0, dtype=np.int64)
        self._counts: dict = {}

    @property
    def form(self) -> str:
        return "general" if self.dense is None else "dense"

    def __len__(self) -> int:
        return (int(np.count_nonzero(self.dense)) if self.dense is not None
                else len(self._counts))

    def add(self, keys: np.ndarray | list, signs: np.ndarray | list) -> Changes:
        """Add each sign to its key's count: an int64 array of keys with an array of
        signs, or lists. Returns every key touched with its count before and after:
        as int64 arrays in ascending key order where the batch was counted with array
        operations (array keys always; many small int keys while dense), else as
        lists in first-seen order."""
        if isinstance(keys, np.ndarray):
            uniq, delta = net_by_key(keys, signs)
            if self.dense is not None and self._fits(uniq):
                old = self.dense[uniq]
                new = old + delta
                self.dense[uniq] = new
                return uniq, old, new
            self.to_general()
            touched, old_l, new_l = self._add_general(uniq.tolist(), delta.tolist())
            return uniq, np.array(old_l, dtype=np.int64), np.array(new_l, dtype=np.int64)
        counts = self.dense
        if counts is not None and keys:
            if set(map(type, keys)) == {int}:
                hi = max(keys)
                if hi < DENSE_LIMIT and min(keys) >= 0:
                    if hi < len(counts) and len(keys) < tuning.ARRAY_MIN:
                        return self._add_rows_dense(keys, signs)
                    return self.add(np.array(keys, dtype=np.int64),
                                    np.array(signs, dtype=np.int64))
            self.to_general()
        return self._add_general(keys, signs)

    def _add_rows_dense(self, keys: list[int], signs: np.ndarray | list) -> Changes:
        """``add`` of a few keys known to be in the array: plain Python, since numpy's
        cost per call would dominate."""
        counts: np.ndarray = self.dense  # type: ignore[assignment]  # add(): not None
        item = counts.item                  # (a Python int, without a numpy scalar)
        before: dict[int, int] = {}
        for k, s in zip(keys, signs):
            old = item(k)
            if k not in before:
                before[k] = old
            counts[k] = old + s
        touched = list(before)
        return touched, list(before.values()), list(map(item, touched))

    def _add_general(self, keys: Iterable, signs: Iterable[int]) -> Changes:
        counts = self._counts
        before: dict = {}
        for k, s in zip(keys, signs):
            old = counts.get(k, 0)
            if k not in before:
                before[k] = old
            new = old + s
            if new:
                counts[k] = new
            else:
                counts.pop(k, None)
        touched = list(before)
        return touched, list(before.values()), [counts.get(k, 0) for k in touched]

    def _fits(self, keys: np.ndarray) -> bool:
        """Whether the array can take these keys (growing it if need be)."""
        dense: np.ndarray = self.dense  # type: ignore[assignment]  # add(): not None
        size = grown_size(keys, len(dense), self.by_slot)
        if size is None:
            return False
        if size > len(dense):
            grown = np.zeros(size, dtype=np.int64)
            grown[:len(dense)] = dense
            self.dense = grown
        return True

    def drop(self, key) -> None:
        """``key``'s count gone (an evicted group of a partial aggregate)."""
        if self.dense is None:
            self._counts.pop(key, None)
        elif 0 <= key < len(self.dense):
            self.dense[key] = 0

    def to_general(self) -> None:
        """Leave the array for good: its counts into the dict."""
        counts = self.dense
        if counts is None:
            return
        self.dense = None
        keys = np.flatnonzero(counts)
        self._counts.update(zip(keys.tolist(), counts[keys].tolist()))

    def positive(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The keys whose count is above 0 and their counts, as int64 arrays; None in
        the general form (``items`` then)."""
        counts = self.dense
        if counts is None:
            return None
        keys = np.flatnonzero(counts > 0)
        return keys.astype(np.int64), counts[keys]

    def get(self, key) -> int:
        if self.dense is None:
            return self._counts.get(key, 0)
        k = key if type(key) is int else as_int(key)
        return int(self.dense[k]) if k is not None and 0 <= k < len(self.dense) else 0

    def items(self) -> Iterator[tuple[object, int]]:
        """(key, count) for every key held (counts below 0 in transit included)."""
        if self.dense is None:
            return iter(self._counts.items())
        keys = np.flatnonzero(self.dense)
        return zip(keys.tolist(), self.dense[keys].tolist())
