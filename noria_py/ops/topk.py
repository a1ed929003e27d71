"""ORDER BY ... LIMIT k [OFFSET m], per lookup key (per partition).

Every input row is kept, ordered, so that when a row of the top k is deleted the next
one is already at hand; Noria instead asks upstream to refill, which needs a
materialized parent. A batch recomputes the visible slice of each partition it
touches once and emits the difference. Ties are broken by the whole row, so the
slice is the same in every run.

Checkpoints (``checkpoint_form = "keyed"``, runtime/checkpoints.py) hold an entry per
partition: its sorted rows, **shared** with the operator rather than copied (copy on
write). A partition the operator has handed to a checkpoint, or taken back from one,
is not in ``owned``; the first batch that changes it afterwards copies it first
(``sortedcopy.copy_sorted``: the chunks as they are, no key computed), so a
checkpoint's entries never change. A checkpoint therefore costs a dict entry per
partition changed since the last one, and a restore a dict entry per partition: no row
is sorted or copied to restore a TopK, whatever it holds (holding every row of its
input, it grows with the data: re-adding them one by one was what made its recovery
grow). The copies are paid instead by the partitions changed after a checkpoint, once
each per checkpoint interval.

Partial (``make_partial``; noria_py/partial.py says when: a TopK partitioned by exactly
its reader's key): only the partitions read are held (``holes``, ops/holes.py), each
with every input row of it, kept by slot (``parts`` indexed by the key's slot, not its
tuple); a batch's rows of other partitions are dropped on arrival, before anything is
sorted or sent on. An upquery fills a hole with every input row of its partition
(``fill``) and answers its window; eviction makes it a hole again. Invariant: a held
partition's sorted rows are exactly its input's rows for that key, so its window is the
full TopK's. No checkpoint is taken: a partial TopK comes back all holes.
"""
from __future__ import annotations

import sys
from typing import Any

from sortedcontainers import SortedKeyList

from sql_frontend.plan import OrderKey

from ..batch import Batch
from ..divzero import DIV0
from ..memory import deep_size
from ..ordering import order_key
from .holes import HeldKeys, Holes
from .operator import Operator
from .sortedcopy import copy_sorted
from .state import bare_key, tuple_key

#: bytes a held partition costs besides its entry in ``holes`` and its sorted rows:
#: its entries in ``parts`` and ``owned`` (tests/test_memory.py)
PART_OVERHEAD = 120
#: bytes of a ``SortedKeyList`` besides its rows (its lists, index and maxes)
SORTED_BYTES = 400


class TopK(Operator, HeldKeys):
    kind = "topk"
    stateful = True
    checkpoint_form = "keyed"
    #: whether to track the partitions changed since the last export (set by the domain)
    tracking = False
    #: while partial: the partitions held (the rest are holes)
    holes: Holes | None = None
    #: while partial: the partial reader below (noria_py/partial.py)
    owner: Any = None

    def __init__(self, order: tuple[OrderKey, ...], limit: int | None, offset: int,
                 partition: tuple[int, ...], pg: bool = False) -> None:
        self.order = order
        self.limit = limit
        self.offset = offset
        self.partition = partition
        #: over a plan that divides as PostgreSQL does: a row holding the division-by-zero
        #: marker sorts first and is always in its partition's window (``_window``), so
        #: a read of it fails, as PostgreSQL's, which evaluates every row before the
        #: LIMIT, does; never cut silently
        self.pg = pg
        base = order_key(order)
        self._sortkey = base if not pg else (
            lambda r: ((0,) if any(v is DIV0 for v in r) else (1,), base(r)))
        self._part = tuple_key(partition)
        self.reset()

    def reset(self) -> None:
        #: partition (its tuple; partial: its key's slot) -> its sorted input rows
        self.parts: dict[Any, SortedKeyList] = {}
        #: partitions this operator may change in place (the others are shared with a
        #: checkpoint: copied before their first change)
        self.owned: set[Any] = set()
        #: partitions changed since the last export (while ``tracking``)
        self._changed: set[Any] = set()
        if self.holes is not None:          # partial: every partition a hole now, and
            self.holes.clear()              # the reader's keys go with them
            self.holes.manager.lost(self.owner)

    # ------------------------------------------------------------ partial state

    def make_partial(self, manager: Any, owner: Any) -> None:
        """Hold only the partitions filled from now on (the module docstring);
        ``owner``: the partial reader below, whose keys these partitions are."""
        self.partial = True
        self.owner = owner
        self.holes = Holes(manager, owner)
        #: a row's partition as ``holes`` holds it: bare for one column, else a tuple
        self._held_key = bare_key(self.partition)
        #: bytes of a row's sort key (``_row_bytes``), once measured
        self._key_bytes: int | None = None
        self.parts = {}
        self.owned = set()

    def fill(self, key: Any, batch: Batch) -> Batch:
        """Fill the hole ``key`` (the partition as held: ``_held_key``) with ``batch``,
        every input row of it; its window, as insertions."""
        holes = self.holes
        assert holes is not None
        slot = holes.add(key)
        out = self._apply(batch.rows, batch.signs, [slot] * len(batch)) if batch else Batch()
        self._measure(key)
        return out

    def key_rows(self, key: Any) -> Batch:
        """The window of the held partition ``key`` (an upquery's answer)."""
        assert self.holes is not None
        slot = self.holes.slot(key)
        return Batch(self._window(self.parts.get(slot)) if slot >= 0 else [])

    def part_rows(self, part: tuple) -> Batch:
        """The window of partition ``part`` (its values in ``partition`` order) of a full
        TopK: an upquery's answer where the TopK is the source (partial.py)."""
        return Batch(self._window(self.parts.get(part)))

    def evict(self, key: Any) -> int:
        """Make the partition ``key`` a hole again; the bytes it was accounted at."""
        assert self.holes is not None
        slot, size = self.holes.remove(key)
        if slot >= 0:
            self.parts.pop(slot, None)
            self.owned.discard(slot)
        return size

    def _measure(self, key: Any) -> None:
        holes = self.holes
        assert holes is not None
        slot = holes.slot(key)
        rows = self.parts.get(slot)
        size = holes.entry_bytes(key) + PART_OVERHEAD
        if rows:                        # (``deep_size`` of the container took ms a key)
            size += SORTED_BYTES + len(rows) * self._row_bytes(rows)
        holes.measure(key, size, slot)

    def _row_bytes(self, rows: SortedKeyList) -> int:
        """Bytes a row of ``rows`` costs: the row tuple (from up to 8 of them), its sort
        key (``deep_size`` of the first one measured: the keys are alike, and walking
        one took most of a fill) and their two pointers in the container's lists."""
        n = len(rows)
        some = [rows[i * n // 8] for i in range(min(n, 8))]
        if self._key_bytes is None:
            self._key_bytes = deep_size(self._sortkey(some[0]))
        return 16 + self._key_bytes + sum(map(sys.getsizeof, some)) // len(some)

    def computed(self, batch: Batch) -> Batch:
        """The output of a full TopK like this one over ``batch`` (every input row):
        what ``View.all`` of a partial view reads (nothing is filled)."""
        full = TopK(self.order, self.limit, self.offset, self.partition, self.pg)
        full.process(0, batch)
        return full.snapshot()

    def _window(self, rows: SortedKeyList | None) -> list[tuple]:
        if not rows:
            return []
        end = None if self.limit is None else self.offset + self.limit
        if self.pg and any(v is DIV0 for v in rows[0]):     # (markers sort first)
            return [rows[0]] + list(rows[self.offset + 1:None if end is None else end + 1])
        return list(rows[self.offset:end])

    def process(self, port: int, batch: Batch) -> Batch:
        holes = self.holes
        if holes is not None:           # partial: rows of partitions that are holes stop here
            batch, slots = holes.select(batch, self.partition, self._held_key)
            if not batch:
                return Batch()
            holes.touched_slots(slots)
            return self._apply(batch.rows, batch.signs,
                               slots.tolist() if not isinstance(slots, list) else slots)
        return self._apply(batch.rows, batch.signs, map(self._part, batch.rows))

    def _apply(self, rows_in: Any, signs: Any, at: Any) -> Batch:
        """Apply ``rows_in`` (with ``signs``) to the partitions ``at`` (one a row: the
        partition tuple, or the slot while partial); the windows' changes."""
        before: dict[Any, list[tuple]] = {}
        parts, owned = self.parts, self.owned
        for r, s, p in zip(rows_in, signs, at):
            rows = parts.get(p)
            if p not in before:
                before[p] = self._window(rows)
                if p not in owned:              # new, or shared with a checkpoint
                    owned.add(p)
                    if rows is not None:
                        rows = parts[p] = copy_sorted(rows)
            if rows is None:
                rows = parts[p] = SortedKeyList(key=self._sortkey)
            if s > 0:
                for _ in range(s):
                    rows.add(r)
            else:
                for _ in range(-s):
                    rows.discard(r)
        if self.tracking:
            self._changed.update(before)
        out = Batch()
        for p, old in before.items():
            rows = parts.get(p)
            new = self._window(rows)
            if rows is not None and not rows:
                del parts[p]
            if old == new:
                continue
            diff: dict[tuple, int] = {}
            for r in old:
                diff[r] = diff.get(r, 0) - 1
            for r in new:
                diff[r] = diff.get(r, 0) + 1
            for r, c in diff.items():
                if c:
                    out.add(r, c)
        return out

    def snapshot(self) -> Batch:
        out = Batch()
        for rows in self.parts.values():
            for r in self._window(rows):
                out.add(r)
        return out

    # ------------------------------------------------------------ checkpoints

    def export_state(self, changed_only: bool) -> dict:
        """Partition -> its sorted rows (None: gone), shared: each becomes the
        checkpoint's, and this operator copies it before changing it again."""
        parts = self.parts
        if changed_only:
            out = {p: parts.get(p) for p in self._changed}
            self.owned.difference_update(self._changed)
        else:
            out = dict(parts)
            self.owned = set()
        self._changed = set()
        return out

    def load_state(self, entries: dict) -> None:
        """The partitions of a checkpoint, shared (copied before their first change). A
        partial TopK takes nothing: it comes back all holes."""
        self.reset()
        if self.holes is not None:
            return
        # (an entry None, a partition gone, reads as none; a list of rows, from the
        # cluster's wire, is sorted back into a container: the rows come in order)
        self.parts = {p: rows if rows is None or isinstance(rows, SortedKeyList)
                      else SortedKeyList(rows, key=self._sortkey)
                      for p, rows in entries.items()}

    def describe(self) -> str:
        return f"topk {self.limit} offset {self.offset} per {list(self.partition)}"
