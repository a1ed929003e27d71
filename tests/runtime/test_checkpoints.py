"""Checkpoint chains (runtime/checkpoints.py): a state restored from a base and deltas
equals the live state it was taken of, for every checkpointed operator, with
checkpoints at random points, deltas folded at random low marks, restores at any time
a recovery may ask for, and crashes after which the shard goes on from a restored
state (as ``Domain.restore_state`` does), its next deltas relative to it (hypothesis),
also when every delta and checkpoint crosses the cluster's wire codec (a worker sends
them to the controller's store, which sends one back to a spare); restores stay as they
were while the restored operator goes on (state shared with the store is copied on
write); and the store stays bounded in a long run, by the keys changed rather than the
state where the state is held in arrays.

Readers come in four shapes: with and without a SELECT list of their own (which a
checkpoint must hold applied once: its rows as kept, a computed column, a hidden
column and an ORDER BY), each over keys that make its state general (several rows a
key, keys of other types) or keep it dense (fresh int keys)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noria_py import tuning
from noria_py.batch import Batch
from noria_py.ops.aggregate import Aggregate
from noria_py.ops.dense import DenseRows, column
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
from noria_py.runtime.cluster import wire
from noria_py.storage.codec import packb, unpackb
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
#: (port, rows, whether to delete rows held instead of inserting, whether to
#: checkpoint, where the low mark is, whether to crash and restore first (1 in 8))
step = st.tuples(st.integers(0, 1), st.lists(st.tuples(keys, values), max_size=40),
                 st.booleans(), st.booleans(), st.floats(0, 1), st.integers(0, 7))
#: the same with distinct int keys, which the test moves to a range of their own per
#: step: a join side then stays in arrays (a second row for a key would move it to its
#: general form for good), and its arrays grow
dense_step = st.tuples(st.integers(0, 1),
                       st.lists(st.tuples(st.integers(0, 40), values), max_size=40,
                                unique_by=lambda r: r[0]),
                       st.booleans(), st.booleans(), st.floats(0, 1), st.integers(0, 7))
#: (whether the plan is of dense steps, the steps)
steps = st.one_of(st.tuples(st.just(False), st.lists(step, min_size=1, max_size=25)),
                  st.tuples(st.just(True), st.lists(dense_step, min_size=1, max_size=25)))


class Shard:
    """An operator and what its domain does for checkpoints (``Domain.checkpoint``):
    keep the batches taken since the last one, hand ``checkpoints.delta`` to the store."""

    def __init__(self, make, store: CheckpointStore, over_wire: bool = False) -> None:
        self.make = make
        self.over_wire = over_wire
        self.op: Operator = self._new_op()
        self.store = store
        self.time = 0
        self.since: list[tuple[int, Batch]] = []
        self.taken: list[tuple[int, Batch]] = []     # every batch, in order
        self.low = 0                                 # the low mark, never lowered

    def _new_op(self) -> Operator:
        op: Operator = self.make()
        op.tracking = True
        return op

    def take(self, port: int, batch: Batch) -> None:
        self.op.process(port, batch)
        self.time += 1
        self.since.append((port, self.op.taken(port, batch)))
        self.taken.append((port, batch))

    def crash_and_restore(self, at_most: int) -> None:
        """Lose the operator; restore it from the newest checkpoint at or below
        ``at_most`` and the batches taken after it (``Domain.restore_state``)."""
        ck = self.store.latest("n", at_most)
        assert ck is not None                    # (the first is at time 0)
        self.op = self._new_op()
        checkpoints.load(self.op, ck)
        self.store.keep_upto("n", ck.time)
        self.since = []
        for port, batch in self.taken[ck.time:]:
            self.op.process(port, batch)
            self.since.append((port, self.op.taken(port, batch)))

    def checkpoint(self, stable: int) -> None:
        self.low = stable = max(self.low, stable)
        full = not self.store.has("n")
        change = checkpoints.delta(self.op, full, self.since)
        self.since = []
        form = str(self.op.checkpoint_form)
        if self.over_wire:
            change = wire.decode_delta(form, unpackb(packb(wire.encode_delta(form, change))))
        self.store.put("n", self.time, {"p": self.time}, str(self.op.checkpoint_form), change,
                       full, stable)


def restored(make, store: CheckpointStore, at_most: int,
             over_wire: bool = False) -> tuple[Operator, int] | None:
    ck = store.latest("n", at_most)
    if ck is None:
        return None
    if over_wire:
        ck = wire.decode_checkpoint(unpackb(packb(wire.encode_checkpoint(ck))))
    op = make()
    checkpoints.load(op, ck)
    assert ck.parent_times == {"p": ck.time}
    return op, ck.time


def state(op: Operator) -> list:
    """The operator's output and, where its state is its input, every row it holds per
    port (a join's right rows that match nothing are in no output); a TopK's every
    partition."""
    out = sorted(map(repr, op.snapshot().consolidated().rows))
    if isinstance(op, TopK):        # (every row it holds, not only the visible ones)
        out += [sorted(repr((p, list(rows))) for p, rows in op.parts.items() if rows)]
    if op.checkpoint_form == "input":
        out += [sorted(map(repr, b.consolidated().multiset().items())) for b in op.contents()]
    return out


@pytest.mark.parametrize("kind", sorted(OPS))
@settings(max_examples=40, deadline=None)
@given(plan=steps, columnar=st.booleans(), over_wire=st.booleans(),
       marks_held=st.sampled_from([1, 2, tuning.MARKS_HELD]))
def test_a_restored_checkpoint_equals_the_state_it_was_taken_of(kind, plan, columnar, over_wire,
                                                                 marks_held):
    # (``marks_held``: the batches whose keys a state in arrays holds before marking
    # them; small, the marking between checkpoints is exercised too)
    shipped, tuning.MARKS_HELD = tuning.MARKS_HELD, marks_held
    try:
        _restored_equals(kind, plan, columnar, over_wire)
    finally:
        tuning.MARKS_HELD = shipped


def _restored_equals(kind: str, plan, columnar: bool, over_wire: bool) -> None:
    make, ports = OPS[kind]
    store = CheckpointStore()
    shard = Shard(make, store, over_wire)
    held: list[list[tuple]] = [[], []]
    history = [state(shard.op)]                  # the live state after each time
    shard.checkpoint(stable=0)
    dense, plan = plan
    fresh = iter(range(10**6))
    for i, (port, rows, delete, ckpt, frac, crash) in enumerate(plan):
        port %= ports
        if dense:
            rows = [(41 * i + k, v) for k, v in rows]
        if crash == 0:
            # a recovery starts at or above the low mark, which is at or above the
            # newest checkpoint folded into the base
            shard.crash_and_restore(max(shard.low, shard.time - int(frac * 3)))
            assert state(shard.op) == history[-1], kind
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
        got = restored(make, store, max(at, 0), over_wire)
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


def _columnar(rows: list[tuple[int, int]], sign: int = 1) -> Batch:
    return Batch.columnar([np.array(c, dtype=np.int64) for c in zip(*rows)],
                          np.full(len(rows), sign, dtype=np.int64))


@pytest.mark.parametrize("kind", ["join", "count"])
def test_state_in_arrays_is_checkpointed_by_the_keys_changed(kind):
    """The vote view's shape: 1,000 keys held in arrays, a few changed between
    checkpoints. After the first (whole) checkpoint, each delta holds the keys the
    batches since touched, no more, so the store holds the state plus those (not a
    second copy of it), after a restore from the store too; and what it holds restores
    to the live state."""
    make, _ = OPS[kind]
    store = CheckpointStore()
    shard = Shard(make, store)
    live = {k: 0 for k in range(1000)}
    if kind == "join":                          # one side never changes: no delta at all
        shard.take(0, _columnar([(k, k) for k in live]))
        shard.take(1, _columnar([(k, 0) for k in live]))
    else:
        shard.take(0, _columnar([(k, 0) for k in live]))
    whole = 2000 if kind == "join" else 1000
    shard.checkpoint(stable=0)
    assert store.size("n") == (whole, 0)
    rng = np.random.default_rng(1)
    for i in range(30):
        if i == 15:
            shard.crash_and_restore(shard.time)
        touched = sorted(set(rng.integers(0, 1000, 50).tolist()))
        for k in touched:                       # each count moves: -old, +new
            if kind == "join":
                shard.take(1, _columnar([(k, live[k])], -1))
                shard.take(1, _columnar([(k, live[k] + 1)]))
            else:
                shard.take(0, _columnar([(k, i)]))
            live[k] += 1
        stable = shard.time - 1                 # the last delta stays above the low mark
        shard.checkpoint(stable=stable)
        held, deltas = store.size("n")
        assert deltas == 1
        assert held == whole + len(touched), (i, held)
        op, t = restored(make, store, shard.time)  # type: ignore[misc]
        assert t == shard.time and state(op) == state(shard.op)


def test_a_join_side_marks_each_key_an_update_rewrote_once():
    """COUNT's output into the vote join: per key changed, its old row out and its new
    one in, in one batch. The side holds each such key once for its checkpoint's
    marking (not once a row: twice the marking), and while every key keeps its row the
    delta carries no mask (``RowsDelta.present`` None), which the store's copy takes as
    it is; a key gaining its row (or the fill, before the first delta) brings the mask
    back. Each restores to the live state."""
    make, _ = OPS["join"]
    store = CheckpointStore()
    shard = Shard(make, store)
    live = dict.fromkeys(range(100), 0)
    shard.take(0, _columnar([(k, k) for k in live]))
    shard.take(1, _columnar([(k, 0) for k in live]))
    shard.checkpoint(stable=0)
    # (batches of at least ``tuning.ARRAY_MIN`` rows, applied as arrays, and of a few,
    # applied row by row)
    for keys, fresh in ((list(range(0, 80, 2)), True), (list(range(1, 81, 2)), False),
                        ([5, 60, 99], False), ([*range(50, 90), *range(150, 160)], True)):
        rows: list[tuple[int, int]] = []
        signs: list[int] = []
        for k in keys:
            if k in live:
                rows.append((k, live[k]))
                signs.append(-1)
            live[k] = live.get(k, 0) + 1
            rows.append((k, live[k]))
            signs.append(1)
        shard.take(1, Batch.columnar([np.array(c, dtype=np.int64) for c in zip(*rows)],
                                     np.array(signs, dtype=np.int64)))
        held = shard.op._marks[1].held      # type: ignore[attr-defined]
        assert sum(map(len, held)) == len(keys), held
        change = checkpoints.delta(shard.op, False, shard.since)
        shard.since = []
        (port, delta), = change
        assert port == 1 and delta.keys.tolist() == keys      # type: ignore[union-attr]
        assert (delta.present is None) is not fresh           # type: ignore[union-attr]
        store.put("n", shard.time, {"p": shard.time}, "input", change, False, shard.time - 1)
        op, _ = restored(make, store, shard.time)
        assert state(op) == state(shard.op)


def test_counts_back_in_an_array_after_a_restore_from_entries():
    """COUNT's counts left their array (a key that is not an int), were checkpointed as
    entries, and came back into an array when restored from them: the next deltas
    (keys changed, in arrays) apply to the entries the store holds."""
    make, _ = OPS["count"]
    store = CheckpointStore()
    shard = Shard(make, store)
    shard.take(0, Batch.inserts([(1, 0), (2, 0), ("a", 0)]))
    shard.checkpoint(stable=0)                  # entries: the counts are a dict
    shard.take(0, Batch.deletes([("a", 0)]))
    shard.checkpoint(stable=0)
    shard.crash_and_restore(shard.time)         # from entries: 1 and 2, in an array
    assert shard.op.counts.form == "dense"      # type: ignore[attr-defined]
    shard.take(0, Batch.deletes([(1, 0)]))
    for i in range(3):
        shard.take(0, _columnar([(2, i), (3, i)]))
        shard.checkpoint(stable=shard.time - 1)
        op, _ = restored(make, store, shard.time)  # type: ignore[misc]
        assert state(op) == state(shard.op)
    assert state(shard.op) == ["(2, 4)", "(3, 3)"]


@settings(max_examples=200, deadline=None)
@given(plan=st.lists(st.tuples(st.lists(st.integers(0, 60), unique=True, max_size=40),
                               st.lists(st.one_of(st.integers(-3, 3), st.floats(-2, 2),
                                                  st.none(), st.just("s")), min_size=40,
                                        max_size=40),
                               st.booleans(), st.booleans()),
                     min_size=1, max_size=12))
def test_a_copy_of_rows_in_arrays_is_brought_up_to_date_by_the_keys_changed(plan):
    """``DenseRows.put(changed(keys touched))`` on a copy taken earlier gives the live
    rows, whatever types the values came in since (a part that takes another type, or
    empties and takes a new one)."""
    live = DenseRows(2, key=0)
    copy: DenseRows | None = None               # (taken at the first sync: typed parts)
    touched: set[int] = set()
    for keys, values, clear, sync in plan:
        if clear:                               # every row goes: the parts may retype
            keys = live.keys().tolist()
        held = dict(live.items())
        rows = [held[k] if k in held else (k, v) for k, v in zip(keys, values)]
        signs = np.array([-1 if k in held else 1 for k in keys], dtype=np.int64)
        key_arr = np.array(keys, dtype=np.int64)
        parts = [column([r[i] for r in rows]) for i in range(2)]
        if keys:
            assert live.apply(key_arr, parts, signs) is not None
        touched.update(keys)
        if sync:
            if copy is None:
                copy = live.copy()
            else:
                copy.put(live.changed(np.array(sorted(touched), dtype=np.int64)))
            touched = set()
            assert len(copy) == len(live)
            assert sorted(map(repr, copy.items())) == sorted(map(repr, live.items()))
            assert all(k in (None, int, float) and (k is None) == (p.dtype == object)
                       for k, p in zip(copy.kinds, copy.parts))


def test_a_join_side_restored_from_rows_into_arrays_is_checkpointed_whole_first():
    """A side the store holds as rows (it had left its arrays when checkpointed) comes
    back into arrays when restored from them: its next checkpoint copies the arrays
    whole, the one after hands over the keys changed, and each restores to the state
    it was taken of, the later one folded on a copy (the chain keeps the earlier)."""
    make, _ = OPS["join"]
    store = CheckpointStore()
    shard = Shard(make, store)
    shard.take(1, Batch.inserts([(1, 10), (1, 11), (2, 20)]))  # two rows for 1: rows
    shard.checkpoint(stable=0)
    shard.take(1, Batch.deletes([(1, 11)]))
    shard.checkpoint(stable=0)
    shard.crash_and_restore(shard.time)
    assert shard.op.sides[1].form == "dense"    # type: ignore[attr-defined]
    history = {}
    for i in range(3):
        shard.take(1, _columnar([(3 + i, i)]))
        shard.take(0, Batch.inserts([(3, "x")] if i == 0 else []))
        shard.checkpoint(stable=2)              # the deltas stay apart
        history[shard.time] = state(shard.op)
    for t, want in reversed(history.items()):
        op, at = restored(make, store, t)       # type: ignore[misc]
        assert at == t and state(op) == want, t


def test_null_counts_that_go_are_checkpointed():
    """COUNT(x) keeps the rows whose x is NULL apart: a NULL count held at one
    checkpoint and gone by the next is gone from the store too."""
    make, _ = OPS["count_x"]
    store = CheckpointStore()
    shard = Shard(make, store)
    shard.take(0, Batch.inserts([(1, None), (1, 5), (2, 7)]))
    shard.checkpoint(stable=0)
    shard.checkpoint(stable=0)                  # whole, then an empty delta
    shard.take(0, Batch.deletes([(1, None), (1, 5)]))   # group 1 gone, its NULL count too
    shard.take(0, Batch.inserts([(1, 6)]))
    assert not shard.op.nulls                   # type: ignore[attr-defined]
    shard.checkpoint(stable=0)
    op, _ = restored(make, store, shard.time)   # type: ignore[misc]
    assert state(op) == state(shard.op) == ["(1, 1)", "(2, 1)"]


def test_a_null_count_that_moves_while_the_row_count_stays_is_checkpointed():
    """COUNT(x) over counts in an array: a group's NULL row in and a non-NULL row out
    in one interval leave its row count as it was, yet COUNT(x) moved (an export that
    looked only at which row counts changed would miss it); the next checkpoint has
    it."""
    make, _ = OPS["count_x"]
    store = CheckpointStore()
    shard = Shard(make, store)
    shard.take(0, Batch.inserts([(1, 5), (1, 6), (2, 7)]))
    assert shard.op.counts.form == "dense"      # type: ignore[attr-defined]
    shard.checkpoint(stable=0)
    shard.take(0, Batch.inserts([(1, None)]))
    shard.take(0, Batch.deletes([(1, 6)]))
    shard.checkpoint(stable=0)
    op, _ = restored(make, store, shard.time)   # type: ignore[misc]
    assert state(op) == state(shard.op) == ["(1, 1)", "(2, 1)"]


def test_counts_changed_in_their_array_then_moved_out_of_it_are_checkpointed():
    """Keys COUNT changed while its counts were an array, and the counts then left the
    array before the next checkpoint: that checkpoint has them too."""
    make, _ = OPS["count"]
    store = CheckpointStore()
    shard = Shard(make, store)
    shard.take(0, _columnar([(1, 0), (2, 0)]))
    shard.checkpoint(stable=0)
    shard.take(0, _columnar([(2, 0), (5, 0)]))
    shard.take(0, Batch.inserts([("a", 0)]))
    assert shard.op.counts.form == "general"    # type: ignore[attr-defined]
    shard.checkpoint(stable=0)
    op, _ = restored(make, store, shard.time)   # type: ignore[misc]
    assert state(op) == state(shard.op) == ["('a', 1)", "(1, 1)", "(2, 2)", "(5, 1)"]


def test_a_copy_of_rows_in_arrays_takes_the_types_its_values_come_in():
    """``put`` retypes a part where the values came in another type: to objects where
    rows of the old type stay (a float among ints), to the new type where every row is
    new (the state emptied and refilled with floats, as ``apply`` does)."""
    def rows(keys: list[int], values: list) -> tuple[np.ndarray, list[np.ndarray]]:
        return np.array(keys, dtype=np.int64), [np.array(keys, dtype=np.int64), column(values)]

    live = DenseRows(2, key=0)
    one = np.ones(3, dtype=np.int64)
    live.apply(*rows([0, 1, 2], [10, 11, 12]), one)
    copy = live.copy()
    assert copy.parts[1].dtype == np.int64
    live.apply(*rows([3], [1.5]), one[:1])              # a float among the ints: objects
    assert live.parts[1].dtype == object
    copy.put(live.changed(np.array([3], dtype=np.int64)))
    assert sorted(copy.items()) == sorted(live.items()) == [
        (0, (0, 10)), (1, (1, 11)), (2, (2, 12)), (3, (3, 1.5))]
    assert copy.kinds[1] is None and type(copy.get(3)[1]) is float  # type: ignore[index]

    live = DenseRows(2, key=0)
    live.apply(*rows([0, 1], [10, 11]), one[:2])
    copy = live.copy()
    live.apply(*rows([0, 1], [10, 11]), -one[:2])        # emptied
    live.apply(*rows([5], [2.5]), one[:1])               # refilled with floats
    assert live.parts[1].dtype == np.float64
    copy.put(live.changed(np.array([0, 1, 5], dtype=np.int64)))
    assert list(copy.items()) == list(live.items()) == [(5, (5, 2.5))]
    assert copy.parts[1].dtype == np.float64 and copy.kinds[1] is float
