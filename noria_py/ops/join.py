"""Inner and left equi-joins, each side indexed on its join key.

A delta on one side is matched against the other side's current index, then applied
to its own: processing the left delta before the right one gives exactly
dL x R_old + L_new x dR, the change of L x R. A left join also keeps, per key, whether
the right side is empty, and swaps NULL-padded rows for real matches (and back) as
right rows come and go. A NULL in a key matches nothing, as in SQL.
"""
from __future__ import annotations

from ..batch import Batch
from .operator import Operator
from .state import bare_key, count, index_add, index_batch, items

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
        # key -> bucket of rows (state.index_add)
        self.left: dict[object, dict[tuple, int]] = {}
        self.right: dict[object, dict[tuple, int]] = {}

    def process(self, port: int, batch: Batch) -> Batch:
        out_rows: list[tuple] = []
        out_signs: list[int] = []
        add_row = out_rows.append
        add_sign = out_signs.append
        outer = self.join_kind == "left"
        if port == LEFT:
            keyf = self._lkey
            right = self.right
            left = self.left
            pad = self.pad
            for l, s in zip(batch.rows, batch.signs):
                k = keyf(l)
                matched = False
                if not (k is None or (type(k) is tuple and None in k)):
                    bucket = right.get(k)
                    if bucket is not None:
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
                index_add(left, k, l, s)
            return Batch(out_rows, out_signs)
        # A right delta is matched against the left rows of its key as it comes. For a
        # left join, whether each touched key's right side was empty before the batch is
        # noted at its first delta and compared at the end, so a key whose right side
        # goes 1 -> 0 -> 1 within the batch (an aggregate's -old/+new) swaps no padding.
        # (The left index does not change during a right batch, so the right index can
        # take the whole batch after the matching.)
        keyf = self._rkey
        left = self.left
        right = self.right
        rows = batch.rows
        keys = list(map(keyf, rows))
        for k, r, s in zip(keys, rows, batch.signs):
            if k is None or (type(k) is tuple and None in k):
                continue
            bucket = left.get(k)
            if bucket is not None:
                if type(bucket) is tuple:
                    add_row(bucket + r)
                    add_sign(s)
                else:
                    for l, c in bucket.items():
                        add_row(l + r)
                        add_sign(s * c)
        before: dict | None = {} if outer else None
        index_batch(right, keys, rows, batch.signs, before)
        if before:
            pad = self.pad
            get = right.get
            for k, was in before.items():
                now = get(k)
                now = 0 if now is None else 1 if type(now) is tuple else count(now)
                if (was > 0) == (now > 0) or k is None or (type(k) is tuple and None in k):
                    continue                 # (a NULL key matched nothing either way)
                bucket = left.get(k)
                if bucket is not None:
                    sign = 1 if now <= 0 else -1     # padding back, or padding gone
                    for l, c in items(bucket):
                        add_row(l + pad)
                        add_sign(sign * c)
        return Batch(out_rows, out_signs)

    def snapshot(self) -> Batch:
        out = Batch()
        outer = self.join_kind == "left"
        for k, lbucket in self.left.items():
            rbucket = self.right.get(k) if not _has_null(k) else None
            live = [(r, c) for r, c in items(rbucket) if c > 0] if rbucket is not None else []
            for l, lc in items(lbucket):
                if live:
                    for r, rc in live:
                        out.add(l + r, lc * rc)
                elif outer:
                    out.add(l + self.pad, lc)
        return out

    def describe(self) -> str:
        return f"{self.join_kind} join {list(self.left_keys)}={list(self.right_keys)}"
