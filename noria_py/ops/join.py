"""Inner and left equi-joins, each side's rows kept under the join key.

A delta on one side is matched against the other side's current rows, then applied
to its own: processing the left delta before the right one gives exactly
dL x R_old + L_new x dR, the change of L x R. A left join also follows, per key,
whether the right side is empty (``KeyedState.apply(..., track=True)``), and swaps
NULL-padded rows for real matches (and back) as right rows come and go: padding that
goes is emitted first and padding that comes back last, so a reader applying rows in
order never holds two rows for a key. A NULL in a key matches nothing, as in SQL.

Each side is a ``state.KeyedState``. Where a side takes a big batch in its dense form
(one row a key, small int keys: a primary key, a group key) and the other side is
dense too, the batch is joined with array operations and emitted as columns; any
other batch is joined row by row, against the other side's buckets.

A checkpoint of a side held in arrays is a copy of them the first time, then only the
entries of the keys changed since (``array_state``): while ``tracking`` is on
(checkpoints are), the keys each batch changes in a side's arrays are kept as the side
applies it (``dense.KeyMarks``, handed to ``KeyedState.apply``: each key once, where
an update, its old row out and its new one in, is two rows). That is exact while the store's copy of the side
is the arrays as last exported (``_exported``: the ports exported as arrays, or loaded
from arrays, since the operator was last reset), since every change to the arrays is
a batch applied here.

Partial (``make_partial``; noria_py/partial.py says when): the join holds only the join
keys someone read (``holes``, ops/holes.py): for a held key, every left and every right
row of it; for any other key, nothing. A batch's rows under a hole are dropped on
arrival on either side (nothing is joined or emitted for them: nothing below holds
that key). An upquery fills a hole with the key's left and right rows at once
(``fill``) and answers the key's output rows; eviction makes it a hole again. The
sides are then kept by slot (ops/holes.py; one slot a key, the same on both sides): in
arrays while each key holds one row a side, as a full join's dense form, so a batch
is filtered and joined with array operations; in dicts otherwise. No checkpoint is
taken: a partial join comes back
from a crash all holes, and its reader's keys go with them (``Partial.lost``).

In a cluster each side's rows of a fill come up a chain of their own, and arrive
apart (``arrive``): the fill waits for the other side's (``waiting``). Each side's
fill left its source behind everything the source sent before, so a write arriving on
a side before that side's fill is in the fill (at a hole: dropped, as ever), and one
arriving after it is not: while the fill waits, such a write's rows of its keys are
added to the rows that side sent (``_wait``), and the hole is filled with both sides
as of the second's arrival. A key held meanwhile (two upqueries) answers from its
state. A fill waiting when a worker is lost never completes (its upquery is asked
again): the cluster's worker drops the waiting fills then.

Division by zero (``poison``: set where a side's plan divides as PostgreSQL does,
noria_py/divzero.py): a row whose WHERE divided by zero comes as a row of markers, its
join key the marker, which matches no real row. PostgreSQL fails a query whose scan of
a side meets that row, matched or not; so such a row on either side of an inner join
(the right side of a left join: its left side is padded and passed on already) is also
passed on as a row of markers of the output's width, with its sign, whatever it
matches, and ``snapshot`` has one for each such row held: a whole read of the join
fails as PostgreSQL's would, rather than silently miss the row. The output columns
``keep`` (a read's key on one side, kept by the filter below: planner/poison.py) are
the row's own values in it, so a read by that key fails for that key alone.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..batch import Batch
from ..divzero import DIV0
from ..nan import as_objects, concat
from .dense import DenseRows, KeyMarks, RowsDelta
from .holes import HeldKeys, Holes, norm
from .operator import Operator
from .state import Flips, KeyedState, items

LEFT, RIGHT = 0, 1
#: bytes a held join key costs besides its rows and its entry in ``holes``: the two
#: sides' arrays' slack (grown by a quarter, ``dense.slot_length``, and counted in
#: ``Holes.fixed_bytes`` too: on the safe side; tests/test_memory.py)
KEY_OVERHEAD = 30


def _has_null(k) -> bool:
    return k is None or (type(k) is tuple and None in k)


class Join(Operator, HeldKeys):
    kind = "join"
    stateful = True
    checkpoint_form = "input"
    #: while partial: the join keys held (the rest are holes)
    holes: Holes | None = None
    #: while partial: the partial reader below (noria_py/partial.py)
    owner: Any = None

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 left_width: int, right_width: int, poison: bool = False,
                 keep: tuple[int, ...] = ()) -> None:
        self.join_kind = kind
        #: rows of markers are passed on (the module docstring)
        self.poison = poison
        #: output columns a row of markers keeps as they are (the module docstring)
        self.keep = keep
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.left_width = left_width
        self.pad = (None,) * right_width
        self.reset()

    def reset(self) -> None:
        #: (left rows, right rows), each under its join key (partial: under its slot,
        #: the same on both sides)
        slots = self.holes is not None
        self.sides = (KeyedState(self.left_width, self.left_keys, slots),
                      KeyedState(len(self.pad), self.right_keys, slots))
        #: the ports whose arrays the checkpoint store holds as of the last export
        self._exported: set[int] = set()
        #: per side, the keys its arrays changed since the last export (``tracking``)
        self._marks = (KeyMarks(), KeyMarks())
        #: while partial in a cluster: the fills that have one side's rows and wait for
        #: the other's (``arrive``): upquery -> (key -> its index, each side's rows of
        #: each key so far, None until that side arrived)
        self.waiting: dict[Any, tuple[dict[Any, list[int]], list[list[Batch] | None]]] = {}
        if self.holes is not None:          # partial: every key a hole now, and the
            self.holes.clear()              # reader's keys go with them
            self.holes.manager.lost(self.owner)

    # ------------------------------------------------------------ partial state

    def slot_arrays(self) -> list[np.ndarray | list]:
        """Its arrays by slot (partial): each side's while in that form."""
        return [a for side in self.sides if side.dense is not None
                for a in side.dense.arrays()]

    def make_partial(self, manager: Any, owner: Any) -> None:
        """Hold only the join keys filled from now on (the module docstring);
        ``owner``: the partial reader below, whose keys these are."""
        self.partial = True
        self.owner = owner
        self.holes = Holes(manager, owner)
        self.sides = (KeyedState(self.left_width, self.left_keys, True),
                      KeyedState(len(self.pad), self.right_keys, True))

    def fill(self, key: Any, left: Batch, right: Batch, padded: bool) -> Batch:
        """Fill the hole ``key`` (as the sides keep it) with its ``left`` and ``right``
        rows (every row of that key on each side); its output rows (``key_rows``)."""
        holes = self.holes
        assert holes is not None
        slot = holes.add(key)
        for side, rows in zip(self.sides, (left, right)):
            if rows:
                layout = side.layout()
                side.apply(*side.prepare_slots([slot] * len(rows), rows))
                if side.layout() != layout:
                    holes.touched_all()
        self._measure(key)
        return self.key_rows(key, padded)

    def arrive(self, port: int, token: Any, keys: list[Any], rows: list[Batch],
               padded: bool) -> list[Batch] | None:
        """One side's rows of ``keys`` (as the sides keep them) for the fill ``token``, in
        a cluster, where each side's rows come up a chain of their own: None while the
        other side's have not arrived; then each key's output rows, a hole filled (with
        the rows of the side that came first and every write to it since: ``waiting``),
        a key held answered from its state (module docstring)."""
        entry = self.waiting.get(token)
        if entry is None:
            where: dict[Any, list[int]] = {}
            for i, k in enumerate(keys):
                where.setdefault(norm(k), []).append(i)
            sides: list[list[Batch] | None] = [None, None]
            entry = self.waiting[token] = (where, sides)
        where, sides = entry
        sides[port] = [Batch(list(b.rows), list(b.signs)) for b in rows]
        if sides[1 - port] is None:
            return None
        del self.waiting[token]
        left, right = cast("tuple[list[Batch], list[Batch]]", tuple(sides))
        holes = self.holes
        assert holes is not None
        return [self.key_rows(k, padded) if k in holes else self.fill(k, lb, rb, padded)
                for k, lb, rb in zip(keys, left, right)]

    def _wait(self, port: int, batch: Batch) -> None:
        """A write on side ``port`` while fills wait (``arrive``): its rows of their keys
        join the rows of that side where it came first (they are after its fill)."""
        keyf = self.sides[port]._keyf
        for where, sides in self.waiting.values():
            got = sides[port]
            if got is None:
                continue
            for r, s in zip(batch.rows, batch.signs):
                for i in where.get(norm(keyf(r)), ()):
                    got[i].add(r, s)

    def evict(self, key: Any) -> int:
        """Make the join key ``key`` a hole again; the bytes it was accounted at."""
        assert self.holes is not None
        slot, size = self.holes.remove(key)
        if slot >= 0:
            for side in self.sides:
                side.drop(slot)
        return size

    def _measure(self, key: Any) -> None:
        holes = self.holes
        assert holes is not None
        left, right = self.sides
        slot = holes.slot(key)
        holes.measure(key, holes.entry_bytes(key) + left.entry_bytes(slot)
                      + right.entry_bytes(slot) + KEY_OVERHEAD, slot)

    def computed(self, left: Batch, right: Batch) -> Batch:
        """The output of a full join like this one of ``left`` and ``right`` (every row
        of each side): what ``View.all`` of a partial view reads (nothing is filled)."""
        full = Join(self.join_kind, self.left_keys, self.right_keys, self.left_width,
                    len(self.pad), self.poison, self.keep)
        full.process(LEFT, left)
        full.process(RIGHT, right)
        return full.snapshot()

    def process(self, port: int, batch: Batch) -> Batch:
        if self.poison and batch and (port == RIGHT or self.join_kind != "left"):
            markers = self._markers(port, batch)
            if markers:
                out = self._process(port, batch)
                out.extend(markers)
                return out
        return self._process(port, batch)

    def _markers(self, port: int, batch: Batch) -> Batch:
        """A row of markers of the output's width for each row of ``batch`` whose join
        key holds the division-by-zero marker (a row of markers: the module docstring)."""
        out = Batch()
        if batch.cols and all(c.dtype != object for c in batch.cols):
            return out                  # (int64 and float64 columns hold no marker)
        keyf = self.sides[port]._keyf
        for r, s in zip(batch.rows, batch.signs):
            k = keyf(r)
            if k is DIV0 or (type(k) is tuple and any(v is DIV0 for v in k)):
                out.add(self._marker_row(port, r), s)
        return out

    def _marker_row(self, port: int, r: tuple) -> tuple:
        """The row of markers passed on for the row ``r`` of side ``port``: the marker
        but in the output columns ``keep``, which are ``r``'s values."""
        width = self.left_width + len(self.pad)
        if not self.keep:
            return (DIV0,) * width
        at = 0 if port == LEFT else self.left_width
        keep = self.keep
        return tuple(r[i - at] if i in keep and 0 <= i - at < len(r) else DIV0
                     for i in range(width))

    def _process(self, port: int, batch: Batch) -> Batch:
        holes = self.holes
        if holes is not None:           # partial: rows under holes stop here
            if self.waiting:
                self._wait(port, batch)
            own = self.sides[port]
            batch, slots = holes.select(batch, own.key, own._keyf)
            if not batch:
                return Batch()
            layout = own.layout()
            out = self._apply(port, *own.prepare_slots(slots, batch))
            holes.touched_slots(slots)
            if own.layout() != layout:
                holes.touched_all()
            return out
        if not batch:
            return Batch()
        return self._apply(port, *self.sides[port].prepare(batch))

    def _apply(self, port: int, keys: np.ndarray | list, batch: Batch) -> Batch:
        """Apply a batch to side ``port`` under ``keys`` (``prepare``, or slots while
        partial: the other side is kept by the same slots) and join it with the other."""
        own = self.sides[port]
        flips = own.apply(keys, batch, track=self.join_kind == "left" and port == RIGHT,
                          marks=self._marks[port] if self.tracking else None)
        if isinstance(keys, np.ndarray):
            got = self.sides[1 - port].gather(keys)
            if got is not None:
                return self._columns(port, batch, got, flips)
            keys = keys.tolist()
        if flips is not None and isinstance(flips[0], np.ndarray):   # (then both are)
            gone, came = flips
            flips = gone.tolist(), came.tolist()
        return self._rows(port, batch, keys if isinstance(keys, list) else keys.tolist(), flips)

    def _columns(self, port: int, batch: Batch, got: tuple[np.ndarray, list[np.ndarray]],
                 flips: Flips | None) -> Batch:
        """A columnar batch joined with the other side's rows (``gather``), as columns."""
        hit, matches = got
        cols: list[np.ndarray] = list(batch.cols)  # type: ignore[arg-type]  # columnar
        signs: np.ndarray = batch.sign_array  # type: ignore[assignment]  # columnar
        if hit.all():                       # (the common case: every key has a match)
            mine, matched = cols, signs
        else:
            mine, matched = [c[hit] for c in cols], signs[hit]
        pieces = [(mine + matches, matched) if port == LEFT else (matches + mine, matched)]
        if self.join_kind == "left":
            if port == LEFT:                # left rows with no right row: padded
                miss = ~hit
                if miss.any():
                    pieces.append(([c[miss] for c in cols] + self._pads(int(miss.sum())),
                                   signs[miss]))
            else:                           # right side filled: padding goes; emptied: back
                gone, came = flips  # type: ignore[misc]  # tracked: not None
                left = self.sides[LEFT]
                for ks, sign in ((came, -1), (gone, 1)):
                    if not len(ks):
                        continue
                    # the left side is dense (its gather answered in process): not None
                    has, lefts = left.gather(  # type: ignore[misc]
                        np.asarray(ks, dtype=np.int64))
                    n = int(has.sum())
                    if n:
                        piece = (lefts + self._pads(n), np.full(n, sign, dtype=np.int64))
                        pieces.insert(0 if sign == -1 else len(pieces), piece)
        if len(pieces) == 1:
            return Batch.columnar(*pieces[0])
        return Batch.columnar([concat(parts) for parts in zip(*(p[0] for p in pieces))],
                              np.concatenate([p[1] for p in pieces]))

    def _rows(self, port: int, batch: Batch, keys: list, flips: Flips | None) -> Batch:
        """A batch joined row by row with the other side's buckets."""
        out_rows: list[tuple] = []
        out_signs: list[int] = []
        add_row = out_rows.append
        add_sign = out_signs.append
        get = self.sides[1 - port].get
        rows, signs = batch.rows, batch.signs
        pad = self.pad
        if port == LEFT:
            outer = self.join_kind == "left"
            for k, l, s in zip(keys, rows, signs):
                matched = False
                bucket = None if k is None or (type(k) is tuple and None in k) else get(k)
                if bucket is not None:
                    if type(bucket) is tuple:
                        matched = True
                        add_row(l + bucket)
                        add_sign(s)
                    else:
                        for r, c in bucket.items():  # type: ignore[union-attr]  # a dict
                            if c > 0:
                                matched = True
                                add_row(l + r)
                                add_sign(s * c)
                if outer and not matched:
                    add_row(l + pad)
                    add_sign(s)
            return Batch(out_rows, out_signs)
        gone, came = flips if flips is not None else ((), ())
        for k in came:                      # padding goes: first
            bucket = None if _has_null(k) else get(k)
            if bucket is not None:
                for l, c in items(bucket):
                    add_row(l + pad)
                    add_sign(-c)
        for k, r, s in zip(keys, rows, signs):
            bucket = None if k is None or (type(k) is tuple and None in k) else get(k)
            if bucket is not None:
                if type(bucket) is tuple:
                    add_row(bucket + r)
                    add_sign(s)
                else:
                    for l, c in bucket.items():  # type: ignore[union-attr]  # a dict
                        add_row(l + r)
                        add_sign(s * c)
        for k in gone:                      # padding back: last
            bucket = None if _has_null(k) else get(k)
            if bucket is not None:
                for l, c in items(bucket):
                    add_row(l + pad)
                    add_sign(c)
        return Batch(out_rows, out_signs)

    def _pads(self, n: int) -> list[np.ndarray]:
        return [np.full(n, None, dtype=object) for _ in self.pad]

    def snapshot(self) -> Batch:
        """The join's whole output, every row with its count as its sign: as columns
        where both sides are dense (``_dense_snapshot``), else row by row."""
        if self.holes is None and not self.poison:
            got = self._dense_snapshot()
            if got is not None:
                return got
        return self._snapshot_rows()

    def _dense_snapshot(self) -> Batch | None:
        """``snapshot`` with array operations, when both sides are dense (each key one
        row, held in arrays): the left side's keys in order, the right side's rows
        gathered at them; an inner join keeps the keys that hit, a left join pads the
        others' right columns with NULL (those columns then objects). The same rows in
        the same order as ``_snapshot_rows``, with no Python step per row: a reader
        rebuilt from its parent reads this (docs/recovery.md, "Readers rebuilt from
        their parent"). None where a side is not dense."""
        left, right = (side.dense for side in self.sides)
        if left is None or right is None:
            return None
        keys = left.keys()
        if not len(keys):
            return Batch()
        hit, matches = right.gather(keys)
        mine = [p[keys] for p in left.parts]
        if self.join_kind != "left" or hit.all():
            if not hit.all():
                mine = [c[hit] for c in mine]
            cols = mine + matches
        else:
            padded = []
            for m in matches:
                col = np.full(len(keys), None, dtype=object)
                col[hit] = as_objects(m)
                padded.append(col)
            cols = mine + padded
        n = len(cols[0])
        return Batch.columnar(cols, np.ones(n, dtype=np.int64)) if n else Batch()

    def _snapshot_rows(self) -> Batch:
        out = Batch()
        outer = self.join_kind == "left"
        left, right = self.sides
        for k, lbucket in left.items():
            self._pair(out, lbucket, None if _has_null(k) else right.get(k), outer)
        if self.poison:                 # (a row of markers for each held: as ``process``)
            for port, side in enumerate(self.sides):
                if port == LEFT and outer:
                    continue
                for k, bucket in side.items():
                    if k is DIV0 or (type(k) is tuple and any(v is DIV0 for v in k)):
                        for r, c in items(bucket):
                            out.add(self._marker_row(port, r), c)
        return out

    def _pair(self, out: Batch, lbucket: Any, rbucket: Any, outer: bool) -> None:
        """The output rows of one key's left rows with its right rows (NULL-padded,
        ``outer``, where it has none), into ``out``."""
        live = [(r, c) for r, c in items(rbucket) if c > 0] if rbucket is not None else []
        for l, lc in items(lbucket):
            if live:
                for r, rc in live:
                    out.add(l + r, lc * rc)
            elif outer:
                out.add(l + self.pad, lc)

    def key_rows(self, key, padded: bool = True) -> Batch:
        """The output rows of one join key (bare for one column, else a tuple, as the
        sides keep it): an upquery's answer (noria_py/partial.py); ``padded`` False
        leaves out a left join's NULL-padded rows (a lookup on a right column never
        finds them)."""
        out = Batch()
        left, right = self.sides
        if self.holes is not None:      # (kept by slot)
            key = self.holes.slot(key)
            if key < 0:
                return out
        lbucket = None if _has_null(key) else left.get(key)
        if lbucket is None:
            return out
        self._pair(out, lbucket, right.get(key), padded and self.join_kind == "left")
        return out

    def contents(self) -> list[Batch]:
        return [side.snapshot() for side in self.sides]

    def array_state(self, full: bool = True) -> dict[int, DenseRows | RowsDelta | None]:
        out: dict[int, DenseRows | RowsDelta | None] = {}
        if self.holes is not None:      # (kept by slot: no checkpoint)
            return out
        for port, side in enumerate(self.sides):
            dense, marks = side.dense, self._marks[port]
            if dense is None:
                continue
            if full or port not in self._exported:
                out[port] = dense.copy()
            else:                           # (None: unchanged, the store's copy is current)
                out[port] = dense.changed(marks.take()) if marks else None
        for marks in self._marks:           # (kept: their bool arrays are reused)
            marks.clear()
        self._exported = set(out)
        return out

    def load_array_state(self, port: int, rows: DenseRows) -> None:
        self.sides[port].load_dense(rows)
        self._exported.add(port)

    def describe(self) -> str:
        return f"{self.join_kind} join {list(self.left_keys)}={list(self.right_keys)}"
