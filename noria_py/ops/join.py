"""Inner and left equi-joins, both sides indexed on the join key in one dict.

A delta on one side is matched against the other side's current index, then applied
to its own: processing the left delta before the right one gives exactly
dL x R_old + L_new x dR, the change of L x R. A left join also keeps, per key, whether
the right side is empty, and swaps NULL-padded rows for real matches (and back) as
right rows come and go. A NULL in a key matches nothing, as in SQL.
"""
from __future__ import annotations

from ..batch import Batch
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

    def process(self, port: int, batch: Batch) -> Batch:
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
        1 -> 0 -> 1 within the batch (an aggregate's -old/+new) swaps no padding."""
        add_row = out_rows.append
        add_sign = out_signs.append
        sides = self.sides
        keyf = self._rkey
        before: dict | None = {} if self.join_kind == "left" else None
        for r, s in zip(batch.rows, batch.signs):
            k = keyf(r)
            entry = sides.get(k)
            if entry is None:
                entry = sides[k] = [None, None]
            had = entry[1]
            if before is not None and k not in before:
                before[k] = count(had)
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
        if before:
            pad = self.pad
            for k, was in before.items():
                if _has_null(k):
                    continue                 # (a NULL key matched nothing either way)
                entry = sides.get(k)
                if entry is None or entry[0] is None:
                    continue
                now = count(entry[1])
                if (was > 0) == (now > 0):
                    continue
                sign = 1 if now <= 0 else -1     # padding back, or padding gone
                for l, c in items(entry[0]):
                    add_row(l + pad)
                    add_sign(sign * c)
        return Batch(out_rows, out_signs)

    def snapshot(self) -> Batch:
        out = Batch()
        outer = self.join_kind == "left"
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
