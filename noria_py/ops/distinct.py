"""SELECT DISTINCT (and UNION): a row is output while at least one copy is present.

Partial (``make_partial``; noria_py/partial.py says when: a DISTINCT feeding one partial
reader alone, whose key columns are among its columns): only the rows of the keys read
are held (``holes``, ops/holes.py), their counts kept by the key's slot (``by_slot``:
slot -> row -> count, so that a key is evicted as one entry); a batch's rows of other
keys are dropped on arrival. An upquery fills a hole with every input row of its key
(``fill``) and answers its distinct rows. Invariant: a held key's counts are exactly
its input's, so its rows are the full DISTINCT's rows of that key. No checkpoint is
taken: a partial DISTINCT comes back all holes.
"""
from __future__ import annotations

import sys
from itertools import islice
from typing import Any

from ..batch import Batch
from .holes import HeldKeys, Holes
from .operator import Operator
from .state import bare_key

#: bytes a held key costs besides its entry in ``holes``, its rows' dict and their
#: tuples: its entry in ``by_slot`` (tests/test_memory.py)
KEY_OVERHEAD = 100


class Distinct(Operator, HeldKeys):
    kind = "distinct"
    stateful = True
    checkpoint_form = "input"
    #: while partial: the keys held (the rest are holes)
    holes: Holes | None = None
    #: while partial: the partial reader below (noria_py/partial.py)
    owner: Any = None

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.counts: dict[tuple, int] = {}
        #: partial: a held key's slot -> its rows -> their counts
        self.by_slot: dict[int, dict[tuple, int]] = {}
        if self.holes is not None:          # partial: every key a hole now, and the
            self.holes.clear()              # reader's keys go with them
            self.holes.manager.lost(self.owner)

    # ------------------------------------------------------------ partial state

    def make_partial(self, manager: Any, owner: Any, cols: tuple[int, ...]) -> None:
        """Hold only the keys filled from now on (the module docstring): ``cols``, the
        columns holding the reader's key, in its order; ``owner``: that reader."""
        self.partial = True
        self.owner = owner
        self.holes = Holes(manager, owner)
        self.key_cols = cols
        #: a row's key as ``holes`` holds it: bare for one column, else a tuple
        self._held_key = bare_key(cols)
        self.counts = {}
        self.by_slot = {}

    def fill(self, key: Any, batch: Batch) -> Batch:
        """Fill the hole ``key`` (as held: ``_held_key``) with ``batch``, every input
        row of it; its distinct rows, as insertions."""
        holes = self.holes
        assert holes is not None
        slot = holes.add(key)
        out = self._apply_slots(batch.rows, batch.signs, [slot] * len(batch))
        self._measure(key)
        return out

    def key_rows(self, key: Any) -> Batch:
        """The distinct rows of the held ``key`` (an upquery's answer)."""
        assert self.holes is not None
        counts = self.by_slot.get(self.holes.slot(key), {})
        return Batch([r for r, c in counts.items() if c > 0])

    def evict(self, key: Any) -> int:
        """Make ``key`` a hole again; the bytes it was accounted at."""
        assert self.holes is not None
        slot, size = self.holes.remove(key)
        if slot >= 0:
            self.by_slot.pop(slot, None)
        return size

    def _measure(self, key: Any) -> None:
        holes = self.holes
        assert holes is not None
        slot = holes.slot(key)
        counts = self.by_slot.get(slot)
        size = holes.entry_bytes(key) + KEY_OVERHEAD
        if counts:                      # the dict and its row tuples (64 of them sampled,
            n = len(counts)             # scaled up), not the values the tuples point
            some = list(islice(counts, 64))     # to: the input's, as the reader's rows'
            size += (sys.getsizeof(counts)
                     + sum(map(sys.getsizeof, some)) * n // len(some))
        holes.measure(key, size, slot)

    def computed(self, batch: Batch) -> Batch:
        """The output of a full DISTINCT over ``batch`` (every input row): what an
        upquery through a full DISTINCT, or ``View.all`` of a partial view, reads."""
        full = Distinct()
        full.process(0, batch)
        return full.snapshot()

    def _apply_slots(self, rows: Any, signs: Any, slots: Any) -> Batch:
        """``process`` of rows under held keys, each at its key's slot."""
        by_slot = self.by_slot
        out = Batch()
        before: dict[tuple, int] = {}
        touched: dict[tuple, dict[tuple, int]] = {}
        for r, s, slot in zip(rows, signs, slots):
            counts = by_slot.get(slot)
            if counts is None:
                counts = by_slot[slot] = {}
            c = counts.get(r, 0)
            if r not in before:
                before[r] = c
                touched[r] = counts
            c += s
            if c:
                counts[r] = c
            else:
                del counts[r]
        for r, c0 in before.items():
            c1 = touched[r].get(r, 0)
            if c0 <= 0 < c1:
                out.add(r, 1)
            elif c1 <= 0 < c0:
                out.add(r, -1)
        return out

    def process(self, port: int, batch: Batch) -> Batch:
        holes = self.holes
        if holes is not None:           # partial: rows of keys that are holes stop here
            batch, slots = holes.select(batch, self.key_cols, self._held_key)
            if not batch:
                return Batch()
            holes.touched_slots(slots)
            return self._apply_slots(batch.rows, batch.signs,
                                     slots if isinstance(slots, list) else slots.tolist())
        counts = self.counts
        before: dict[tuple, int] = {}
        for r, s in zip(batch.rows, batch.signs):
            c = counts.get(r, 0)
            if r not in before:
                before[r] = c
            c += s
            if c:
                counts[r] = c
            else:
                del counts[r]
        out = Batch()
        for r, c0 in before.items():
            c1 = counts.get(r, 0)
            if c0 <= 0 < c1:
                out.add(r, 1)
            elif c1 <= 0 < c0:
                out.add(r, -1)
        return out

    def _all_counts(self) -> dict[tuple, int]:
        if self.holes is None:
            return self.counts
        out: dict[tuple, int] = {}
        for counts in self.by_slot.values():
            out.update(counts)
        return out

    def contents(self) -> list[Batch]:
        counts = self._all_counts()
        return [Batch(list(counts), list(counts.values()))]

    def load_input(self, port: int, batch: Batch) -> None:
        """The counts themselves, without ``process``: that would build an output row
        per distinct row of the whole state, which a restore throws away (most of a
        restored DISTINCT shard's recovery time, docs/benchmarks.md). A checkpoint's
        rows (``contents``, ``CheckpointStore.latest``) are distinct with nonzero
        counts: on an empty state they become the counts at once. Partial: the rows of
        held keys only (``process``)."""
        if self.holes is not None:
            self.process(port, batch)
            return
        rows, signs = batch.rows, batch.signs
        counts = self.counts
        if not counts:
            loaded = dict(zip(rows, signs))
            if len(loaded) == len(rows) and 0 not in loaded.values():
                self.counts = loaded
                return
        for r, s in zip(rows, signs):
            c = counts.get(r, 0) + s
            if c:
                counts[r] = c
            else:
                counts.pop(r, None)

    def load_counts(self, port: int, counts: dict) -> None:
        """A checkpoint's counts (a copy, never 0) taken over as they are on an empty
        state: no row is hashed again, so a restore costs the store's copy of the
        dict, one pass in C (a DISTINCT over every vote holds a row per vote)."""
        if not self.counts and self.holes is None:
            self.counts = counts
        else:                   # (a UNION's second port: counts add up across ports)
            self.load_input(port, Batch(list(counts), list(counts.values())))

    def snapshot(self) -> Batch:
        return Batch([r for r, c in self._all_counts().items() if c > 0])
