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
from .state import bare_key, index_add

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
        # key -> {row: count}
        self.left: dict[object, dict[tuple, int]] = {}
        self.right: dict[object, dict[tuple, int]] = {}

    def process(self, port: int, batch: Batch) -> Batch:
        out_rows: list[tuple] = []
        out_signs: list[int] = []
        outer = self.join_kind == "left"
        if port == LEFT:
            keyf = self._lkey
            right = self.right
            pad = self.pad
            for l, s in zip(batch.rows, batch.signs):
                k = keyf(l)
                matched = False
                if not _has_null(k):
                    bucket = right.get(k)
                    if bucket:
                        for r, c in bucket.items():
                            if c > 0:
                                matched = True
                                out_rows.append(l + r)
                                out_signs.append(s * c)
                if outer and not matched:
                    out_rows.append(l + pad)
                    out_signs.append(s)
                index_add(self.left, k, l, s)
        else:
            # Right deltas are grouped by key so that a key whose right side goes
            # 1 -> 0 -> 1 within the batch (an aggregate's -old/+new) swaps no padding.
            keyf = self._rkey
            by_key: dict[tuple, list[tuple[tuple, int]]] = {}
            for r, s in zip(batch.rows, batch.signs):
                k = keyf(r)
                if _has_null(k):
                    continue
                deltas = by_key.get(k)
                if deltas is None:
                    by_key[k] = [(r, s)]
                else:
                    deltas.append((r, s))
            left = self.left
            right = self.right
            pad = self.pad
            for k, deltas in by_key.items():
                bucket = left.get(k)
                rbucket = right.get(k)
                if rbucket is None:
                    rbucket = right[k] = {}
                if outer:
                    before = sum(rbucket.values())
                for r, s in deltas:
                    c = rbucket.get(r, 0) + s
                    if c:
                        rbucket[r] = c
                    else:
                        del rbucket[r]
                if outer:
                    after = sum(rbucket.values())
                if not rbucket:
                    del right[k]
                if bucket:
                    if outer and before <= 0 < after:
                        for l, c in bucket.items():
                            out_rows.append(l + pad)
                            out_signs.append(-c)
                    for r, s in deltas:
                        for l, c in bucket.items():
                            out_rows.append(l + r)
                            out_signs.append(s * c)
                    if outer and after <= 0 < before:
                        for l, c in bucket.items():
                            out_rows.append(l + pad)
                            out_signs.append(c)
        return Batch(out_rows, out_signs)

    def snapshot(self) -> Batch:
        out = Batch()
        outer = self.join_kind == "left"
        for k, lbucket in self.left.items():
            rbucket = self.right.get(k) if not _has_null(k) else None
            live = {r: c for r, c in rbucket.items() if c > 0} if rbucket else {}
            for l, lc in lbucket.items():
                if live:
                    for r, rc in live.items():
                        out.add(l + r, lc * rc)
                elif outer:
                    out.add(l + self.pad, lc)
        return out

    def describe(self) -> str:
        return f"{self.join_kind} join {list(self.left_keys)}={list(self.right_keys)}"
