"""Checkpoint chains (runtime/checkpoints.py): a state restored from a base and deltas
equals the live state it was taken of, for every checkpointed operator, with
checkpoints at random points, deltas folded at random low marks, and restores at any
time a recovery may ask for (hypothesis), which stay as they were while the restored
operator goes on (state shared with the store is copied on write); and the store stays
bounded in a long run.

Readers come in four shapes: with and without a SELECT list of their own (which a
checkpoint must hold applied once: its rows as kept, a computed column, a hidden
column and an ORDER BY), each over keys that make its state general (several rows a
key, keys of other types) or keep it dense (a fresh int key per row inserted)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py.batch import Batch
from noria_py.ops.aggregate import Aggregate
from noria_py.ops.distinct import Distinct
from noria_py.ops.extremum import Extremum
from noria_py.ops.join import Join
from noria_py.ops.operator import Operator
from noria_py.ops.project import Project
from noria_py.ops.reader import Reader
from noria_py.ops.setop import SetOp
from noria_py.ops.topk import TopK
from noria_py.runtime import checkpoints
from noria_py.runtime.checkpoints import CheckpointStore
from sql_frontend.expr import Call, Col, Lit
from sql_frontend.plan import OrderKey
from sql_frontend.types import SqlType
from tests.ops.helpers import agg

INT = SqlType.INT


def _select_reader() -> Reader:
    """A reader applying its view's SELECT list: (v, k, COALESCE(v, -7)) of (k, v), keyed
    on k, ordered by the hidden third column (applied twice, it would key on v)."""
    select = Project((Col(1, INT), Col(0, INT), Call("coalesce", (Col(1, INT), Lit(-7, INT)), INT)))
    return Reader((1,), 2, 3, (OrderKey(2, True),), select=select)


#: operator factories, with the number of input ports and the row width they take
OPS = {
    "count": (lambda: Aggregate((0,), (agg("count_star"),)), 1),
    "count_x": (lambda: Aggregate((0,), (agg("count", 1),)), 1),
    "sum_avg": (lambda: Aggregate((0,), (agg("sum", 1), agg("avg", 1), agg("count", 1, True))), 1),
    "global": (lambda: Aggregate((), (agg("sum", 1), agg("count_star"))), 1),
    "minmax": (lambda: Extremum((0,), (agg("min", 1), agg("max", 1))), 1),
    "join": (lambda: Join("left", (0,), (0,), 2, 2), 2),
    "topk": (lambda: TopK((OrderKey(1, True),), 2, 0, (0,)), 1),
    "distinct": (lambda: Distinct(), 1),
    "except": (lambda: SetOp("except"), 2),
    "reader": (lambda: Reader((0,), 2, 2), 1),
    "reader_dense": (lambda: Reader((0,), 2, 2), 1),
    "reader_select": (_select_reader, 1),
    "reader_select_dense": (_select_reader, 1),
}
#: kinds whose inserted rows each get a fresh int key (a reader's state stays dense)
FRESH_KEYS = {"reader_dense", "reader_select_dense"}

values = st.one_of(st.none(), st.integers(0, 6), st.sampled_from([0.5, -1.25, 1e300]))
keys = st.one_of(st.integers(0, 40), st.sampled_from([None, "a", "b"]))   # (one type a column)
#: (port, rows, whether to delete rows held instead of inserting)
steps = st.lists(st.tuples(st.integers(0, 1), st.lists(st.tuples(keys, values), max_size=40),
                           st.booleans(), st.booleans(), st.floats(0, 1)),
                 min_size=1, max_size=25)


class Shard:
    """An operator and what its domain does for checkpoints (``Domain.checkpoint``):
    keep the batches taken since the last one, hand ``checkpoints.delta`` to the store."""

    def __init__(self, make, store: CheckpointStore) -> None:
        self.op: Operator = make()
        if self.op.checkpoint_form == "keyed":
            self.op.tracking = True  # type: ignore[attr-defined]
        self.store = store
        self.time = 0
        self.since: list[tuple[int, Batch]] = []

    def take(self, port: int, batch: Batch) -> None:
        self.op.process(port, batch)
        self.time += 1
        self.since.append((port, self.op.taken(port, batch)))

    def checkpoint(self, stable: int) -> None:
        full = not self.store.has("n")
        change = checkpoints.delta(self.op, full, self.since)
        self.since = []
        self.store.put("n", self.time, {"p": self.time}, str(self.op.checkpoint_form), change,
                       full, stable)


def restored(make, store: CheckpointStore, at_most: int) -> tuple[Operator, int] | None:
    ck = store.latest("n", at_most)
    if ck is None:
        return None
    op = make()
    checkpoints.load(op, ck)
    assert ck.parent_times == {"p": ck.time}
    return op, ck.time


def state(op: Operator) -> list:
    return sorted(map(repr, op.snapshot().consolidated().rows))


@pytest.mark.parametrize("kind", sorted(OPS))
@settings(max_examples=40, deadline=None)
@given(plan=steps, columnar=st.booleans())
def test_a_restored_checkpoint_equals_the_state_it_was_taken_of(kind, plan, columnar):
    make, ports = OPS[kind]
    store = CheckpointStore()
    shard = Shard(make, store)
    held: list[list[tuple]] = [[], []]
    history = [state(shard.op)]                  # the live state after each time
    shard.checkpoint(stable=0)
    fresh = iter(range(10**6))
    for port, rows, delete, ckpt, frac in plan:
        port %= ports
        if delete:
            rows = held[port][:len(rows)]
            del held[port][:len(rows)]
            batch = Batch.deletes(rows)
        else:
            rows = [(next(fresh) if kind in FRESH_KEYS else k, v) for k, v in rows]
            held[port].extend(rows)
            batch = Batch.inserts(rows)
            if columnar and rows and all(type(k) is int and type(v) is int for k, v in rows):
                batch = Batch.columnar([np.array(c, dtype=np.int64) for c in zip(*rows)],
                                       np.ones(len(rows), dtype=np.int64))
        shard.take(port, batch)
        history.append(state(shard.op))
        if ckpt:
            shard.checkpoint(stable=int(frac * shard.time))
        # a recovery may start at any time at or above the low mark
        at = shard.time - int(frac * 3)
        got = restored(make, store, max(at, 0))
        if got is not None:
            op, t = got
            assert t <= max(at, 0)
            assert state(op) == history[t], (kind, t)
            # the restored operator goes on (state shared with the store is copied
            # before it changes): the checkpoint it came from stays as it was
            op.process(port, batch)
            again = restored(make, store, max(at, 0))
            assert again is not None and state(again[0]) == history[t], (kind, t)
    if kind in FRESH_KEYS:
        assert shard.op.state.form == "dense"   # type: ignore[attr-defined]


def test_the_store_stays_bounded_in_a_long_run():
    """One copy of the state plus the deltas above the low mark, however long it runs."""
    store = CheckpointStore()
    shard = Shard(OPS["join"][0], store)
    keys = np.random.default_rng(0).integers(0, 50, 3000).tolist()
    sizes = []
    for i in range(3000):
        shard.take(i % 2, Batch.inserts([(keys[i], i)]))
        if i >= 100:                             # a sliding window of 100 live rows a side
            j = i - 100
            shard.take(j % 2, Batch.deletes([(keys[j], j)]))
        if i % 10 == 0:
            shard.checkpoint(stable=shard.time - 40)
            sizes.append(store.size("n"))
    held, deltas = zip(*sizes[10:])
    assert max(deltas) <= 5
    assert max(held) <= 2 * 100 + 5 * 40
