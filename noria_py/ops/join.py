"""Inner and left equi-joins, both sides indexed on the join key in one dict.

A delta on one side is matched against the other side's current index, then applied
to its own: processing the left delta before the right one gives exactly
dL x R_old + L_new x dR, the change of L x R. A left join also keeps, per key, whether
the right side is empty, and swaps NULL-padded rows for real matches (and back) as
right rows come and go. A NULL in a key matches nothing, as in SQL.

A join on one column starts in dense form (``dense.DenseRows``, one per side): while
each key holds at most one row a side (a primary key, a group key) and the keys are
small ints, a big batch is joined with array operations and emitted as columns. The
first batch outside that shape moves the state to the general dict for good.
"""
from __future__ import annotations

import numpy as np

from ..batch import Batch
from . import dense
from .dense import DenseRows, batch_columns
from .operator import Operator
from .state import bare_key, bucket_add, count, items

LEFT, RIGHT = 0, 1


def _has_null(k) -> bool:
    return k is None or (type(k) is tuple and None in k)


class Join(Operator):
    kind = "join"
    stateful = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 left_width: int, right_width: int) -> None:
        self.join_kind = kind
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.left_width = left_width
        self.pad = (None,) * right_width
        self._lkey = bare_key(left_keys)
        self._rkey = bare_key(right_keys)
        self.reset()

    def reset(self) -> None:
        # key -> [left bucket, right bucket] (state.bucket_add; None for no rows): one
        # probe finds both sides of a key
        self.sides: dict = {}
        self.dense: tuple[DenseRows, DenseRows] | None = (
            (DenseRows(self.left_width, self.left_keys[0]),
             DenseRows(len(self.pad), self.right_keys[0]))
            if len(self.left_keys) == 1 else None)

    def process(self, port: int, batch: Batch) -> Batch:
        if self.dense is not None:
            if not batch:
                return Batch()
            out = self._apply_dense(port, batch)
            if out is not None:
                return out
            self._to_sides()
        out_rows: list[tuple] = []
        out_signs: list[int] = []
        add_row = out_rows.append
        add_sign = out_signs.append
        sides = self.sides
        if port == LEFT:
            keyf = self._lkey
            outer = self.join_kind == "left"
            pad = self.pad
            for l, s in zip(batch.rows, batch.signs):
                k = keyf(l)
                entry = sides.get(k)
                if entry is None:
                    entry = sides[k] = [None, None]
                matched = False
                bucket = entry[1]
                if bucket is not None and not (k is None or (type(k) is tuple and None in k)):
                    if type(bucket) is tuple:
                        matched = True
                        add_row(l + bucket)
                        add_sign(s)
                    else:
                        for r, c in bucket.items():
                            if c > 0:
                                matched = True
                                add_row(l + r)
                                add_sign(s * c)
                if outer and not matched:
                    add_row(l + pad)
                    add_sign(s)
                entry[0] = bucket_add(entry[0], l, s)
                if entry[0] is None and entry[1] is None:
                    del sides[k]
            return Batch(out_rows, out_signs)
        return self._right(batch, out_rows, out_signs)

    def _right(self, batch: Batch, out_rows: list, out_signs: list) -> Batch:
        """A right delta is matched against the left rows of its key as it comes. For a
        left join, whether each touched key's right side was empty before the batch is
        noted at its first delta and compared at the end, so a key whose right side goes
        1 -> 0 -> 1 within the batch (an aggregate's -old/+new) swaps no padding. Padding
        that goes is emitted first and padding that comes back last, so a reader sees
        each key's old row leave before its new one arrives (its fast path)."""
        add_row = out_rows.append
        add_sign = out_signs.append
        sides = self.sides
        get = sides.get
        rows = batch.rows
        cols = batch.cols
        if cols is not None and len(self.right_keys) == 1:
            keys = cols[self.right_keys[0]].tolist()     # one C call, not one per row
        else:
            keys = map(self._rkey, rows)
        outer = self.join_kind == "left"
        before: dict = {}
        for k, r, s in zip(keys, rows, batch.signs):
            entry = get(k)
            if entry is None:
                entry = sides[k] = [None, None]
            had = entry[1]
            if outer and k not in before:
                before[k] = count(had) > 0      # its right side held rows before the batch
            bucket = entry[0]
            if bucket is not None and not (k is None or (type(k) is tuple and None in k)):
                if type(bucket) is tuple:
                    add_row(bucket + r)
                    add_sign(s)
                else:
                    for l, c in bucket.items():
                        add_row(l + r)
                        add_sign(s * c)
            # bucket_add(had, r, s), its two commonest cases inline
            if had is None and s == 1:
                entry[1] = r
            elif s == -1 and type(had) is tuple and had == r:
                entry[1] = None
                if bucket is None:
                    del sides[k]
            else:
                entry[1] = bucket_add(had, r, s)
                if entry[1] is None and bucket is None:
                    del sides[k]
        if not before:
            return Batch(out_rows, out_signs)
        gone_rows: list[tuple] = []
        gone_signs: list[int] = []
        pad = self.pad
        for k, was in before.items():
            entry = get(k)
            if entry is None or entry[0] is None or _has_null(k):
                continue                # no left rows, or a NULL key (padded either way)
            now = count(entry[1]) > 0
            if was == now:
                continue
            if now:                     # padding gone: first
                for l, c in items(entry[0]):
                    gone_rows.append(l + pad)
                    gone_signs.append(-c)
            else:                       # padding back: last
                for l, c in items(entry[0]):
                    add_row(l + pad)
                    add_sign(c)
        if gone_rows:
            gone_rows.extend(out_rows)
            gone_signs.extend(out_signs)
            return Batch(gone_rows, gone_signs)
        return Batch(out_rows, out_signs)

    def _apply_dense(self, port: int, batch: Batch) -> Batch | None:
        """The batch joined in dense form, or None (nothing changed) if it does not fit.
        For a left join, padding that goes comes first and padding that comes back last,
        so that a reader applying rows in order never holds two rows for a key."""
        if len(batch) < dense.DENSE_MIN:
            return self._apply_dense_rows(port, batch)
        split = batch_columns(batch, (self.left_keys if port == LEFT else self.right_keys)[0])
        if split is None:
            return None
        keys, cols, signs = split
        flips = self.dense[port].apply(keys, cols, signs)
        if flips is None:
            return None
        other = self.dense[1 - port]
        hit, got = other.gather(keys)
        if hit.all():                       # (the common case: every key has a match)
            mine, matched = cols, signs
        else:
            mine, matched = [c[hit] for c in cols], signs[hit]
        pieces = [(mine + got, matched) if port == LEFT else (got + mine, matched)]
        if self.join_kind == "left":
            if port == LEFT:                # left rows with no right row: padded
                miss = ~hit
                if miss.any():
                    pieces.append(([c[miss] for c in cols] + self._pads(int(miss.sum())),
                                   signs[miss]))
            else:                           # right side filled: padding goes; emptied: back
                gone, came = flips
                for ks, sign in ((came, -1), (gone, 1)):
                    if not len(ks):
                        continue
                    has, lefts = other.gather(ks)
                    n = int(has.sum())
                    if n:
                        piece = (lefts + self._pads(n), np.full(n, sign, dtype=np.int64))
                        pieces.insert(0 if sign == -1 else len(pieces), piece)
        if len(pieces) == 1:
            return Batch.columnar(*pieces[0])
        return Batch.columnar([np.concatenate(parts) for parts in zip(*(p[0] for p in pieces))],
                              np.concatenate([p[1] for p in pieces]))

    def _apply_dense_rows(self, port: int, batch: Batch) -> Batch | None:
        """``_apply_dense`` for a few rows, one at a time."""
        rows, signs = batch.rows, batch.signs
        col = (self.left_keys if port == LEFT else self.right_keys)[0]
        keys = [r[col] for r in rows]
        flips = self.dense[port].apply_rows(keys, rows, signs)
        if flips is None:
            return None
        get = self.dense[1 - port].get
        match: dict = {}            # key -> the other side's row (None: none), each looked up once
        for k in keys:
            if k not in match:
                match[k] = get(k)
        pad = self.pad
        outer = self.join_kind == "left"
        out_rows: list[tuple] = []
        out_signs: list[int] = []
        if outer and port == RIGHT:
            for k in flips[1]:              # padding goes, first
                l = match[k]
                if l is not None:
                    out_rows.append(l + pad)
                    out_signs.append(-1)
        for k, r, s in zip(keys, rows, signs):
            o = match[k]
            if o is not None:
                out_rows.append(r + o if port == LEFT else o + r)
                out_signs.append(s)
            elif outer and port == LEFT:
                out_rows.append(r + pad)
                out_signs.append(s)
        if outer and port == RIGHT:
            for k in flips[0]:              # padding back, last
                l = match[k]
                if l is not None:
                    out_rows.append(l + pad)
                    out_signs.append(1)
        return Batch(out_rows, out_signs)

    def _pads(self, n: int) -> list[np.ndarray]:
        return [np.full(n, None, dtype=object) for _ in self.pad]

    def _to_sides(self) -> None:
        """Leave dense form for good: its rows into ``sides``."""
        left, right = self.dense
        self.dense = None
        sides = self.sides
        for k, row in left.items():
            sides[k] = [row, None]
        for k, row in right.items():
            entry = sides.get(k)
            if entry is None:
                sides[k] = [None, row]
            else:
                entry[1] = row

    def snapshot(self) -> Batch:
        out = Batch()
        outer = self.join_kind == "left"
        if self.dense is not None:
            left, right = self.dense
            for k, l in left.items():
                r = right.get(k)
                if r is not None:
                    out.add(l + r, 1)
                elif outer:
                    out.add(l + self.pad, 1)
            return out
        for k, (lbucket, rbucket) in self.sides.items():
            if lbucket is None:
                continue
            live = ([(r, c) for r, c in items(rbucket) if c > 0]
                    if rbucket is not None and not _has_null(k) else [])
            for l, lc in items(lbucket):
                if live:
                    for r, rc in live:
                        out.add(l + r, lc * rc)
                elif outer:
                    out.add(l + self.pad, lc)
        return out

    def describe(self) -> str:
        return f"{self.join_kind} join {list(self.left_keys)}={list(self.right_keys)}"
