"""A base's write history (runtime/history.py): trimmed, it still gives the table as of
any write from its trim point on, and a base comes back from it right; it stays bounded
in a long run of inserts and deletes."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import tuning
from noria_py.batch import Batch
from noria_py.errors import RecoveryError
from noria_py.ops.base import Base
from noria_py.runtime.history import WriteHistory
from sql_frontend.types import ColumnInfo, SqlType, TableSchema

SCHEMAS = {
    "log": TableSchema("t", [ColumnInfo("a", SqlType.INT, True), ColumnInfo("b", SqlType.INT, True)], ()),
    "keyed": TableSchema("t", [ColumnInfo("a", SqlType.INT, False), ColumnInfo("b", SqlType.INT, True)], (0,)),
}


def _rows(base: Base) -> list:
    return sorted(base.snapshot().consolidated().multiset().items())


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(SCHEMAS)), seed=st.integers(0, 10_000),
       trims=st.lists(st.integers(0, 40), max_size=6))
def test_the_table_as_of_any_write_after_the_trim_point(kind, seed, trims):
    """Against a plain replay of every write: ``state_at(t)`` for every t from the trim
    point on, ``since``, and a trim below the trim point a no-op."""
    rng = random.Random(seed)
    schema = SCHEMAS[kind]
    history = WriteHistory(Base(schema))
    writes: list[Batch] = []
    live: list[tuple] = []
    for i in range(40):
        if live and rng.random() < 0.4:
            gone = live.pop(rng.randrange(len(live)))
            b = Batch([gone], [-1])
        else:
            row = (i, rng.randrange(5))
            live.append(row)
            b = Batch([row], [1])
        writes.append(b)
        history.append(b)
        if trims and rng.random() < 0.2:
            history.trim(trims.pop())
    assert len(history) == 40
    for t in range(41):
        if t < history.start:
            with pytest.raises(RecoveryError, match="use strategy='lineage'"):
                history.state_at(t)
            continue
        plain = Base(schema)
        for b in writes[:t]:
            plain.process(0, b)
        assert _rows(history.state_at(t)) == _rows(plain), t
        at, after = history.since(t)
        assert at == max(t, history.start) and after == writes[at:]
    start = history.start
    history.trim(start - 1)
    assert history.start == start


def test_an_insert_only_table_shares_its_batches():
    base = Base(SCHEMAS["log"])
    history = WriteHistory(base)
    b = Batch.columnar([np.arange(100), np.arange(100)], np.ones(100, dtype=np.int64))
    history.append(b)
    history.trim(1)
    assert history.folded.chunks[0] is b and not history.batches
    history.append(Batch([(5, 5)], [1]))
    start, table, after = history.table()       # (its batches themselves: none joined)
    assert start == 1 and table[0] is b and len(table) == 1 and len(after) == 1
    history.append(Batch([(5, 5)], [-1]))
    history.trim(3)                             # (a delete: the table turns indexed)
    start, table, after = history.table()
    assert start == 3 and len(table) == 1 and not after
    assert sorted(table[0].rows) == [(i, i) for i in range(100)]


@pytest.mark.parametrize("seed", [None, 4, 5])
@pytest.mark.parametrize("strategy", ["treeclock", "lineage"])
def test_a_base_comes_back_from_a_trimmed_history(strategy, seed, monkeypatch):
    """Many inserts and deletes with the history trimmed at every write: it holds
    only the last few, and the base, failed (with messages still in flight to its
    children: ``seed``), comes back right from the table as of the trim point and the
    writes since, which must reach back to what every child has taken, and to the
    stateful descendants' last checkpoints (docs/recovery.md: a parent failing with its
    stateful child regenerates from there), so the COUNT checkpoints at every
    acknowledgement here."""
    monkeypatch.setattr(tuning, "HISTORY_TRIM_EVERY", 1)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", tuning.ACK_EVERY)
    db = noria_py.connect(shards=2, seed=seed)
    db.execute("CREATE TABLE vote (a INT, u INT)")
    db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote GROUP BY a")
    vote = db.table("vote")
    model: list[tuple] = []
    rng = random.Random(3)
    for i in range(400):
        if model and rng.random() < 0.45:
            row = model.pop(rng.randrange(len(model)))
            vote.delete([row])
        else:
            row = (rng.randrange(6), i)
            model.append(row)
            vote.insert([row])
    base = next(n["id"] for n in db.graph() if n["kind"] == "base")
    history = db.runtime.durable[base]
    assert history.start > 300 and len(history.batches) < 100, (history.start, len(history.batches))
    db.fail(base)
    db.recover(base, strategy=strategy)
    vote.insert([(1, 10_000)])
    model.append((1, 10_000))
    db.wait()
    want: dict = {}
    for a, _ in model:
        want[a] = want.get(a, 0) + 1
    assert sorted(db.view("c").all()) == sorted(want.items())
    assert sorted(db.execute("SELECT a, u FROM vote").fetchall()) == sorted(model)


def test_the_history_stays_bounded_without_clocks(monkeypatch):
    """Without clocks (no payload logs) the trim point is what the children have taken."""
    monkeypatch.setattr(tuning, "HISTORY_TRIM_EVERY", 8)
    db = noria_py.connect(clocks=False)
    db.execute("CREATE TABLE t (a INT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    for i in range(300):
        db.table("t").insert([(i % 3,)])
        db.table("t").delete([(i % 3,)])
    base = next(n["id"] for n in db.graph() if n["kind"] == "base")
    assert len(db.runtime.durable[base].batches) <= 9


def test_a_history_pinned_by_a_checkpoint_is_not_trimmed_at_every_write(monkeypatch):
    """A stateful child's stable checkpoint holds the history back (its recovery
    replays from there): past ``HISTORY_TRIM_EVERY`` writes a trim is then tried once
    every ``HISTORY_TRIM_EVERY`` more, not at every write (a pass over the children
    each, 1% of a write of 100 rows), and the history still trims once released."""
    from noria_py.runtime.embedded import EmbeddedRuntime
    monkeypatch.setattr(tuning, "HISTORY_TRIM_EVERY", 16)
    tries: list[int] = []
    trim = EmbeddedRuntime._trim_history

    def counted(self, base_id, d, history):
        tries.append(len(history.batches))
        trim(self, base_id, d, history)
    monkeypatch.setattr(EmbeddedRuntime, "_trim_history", counted)
    db = noria_py.connect()
    db.execute("CREATE TABLE vote (a INT, u INT)")
    db.execute("CREATE VIEW c AS SELECT a, COUNT(*) AS n FROM vote GROUP BY a")
    for i in range(400):                # (fewer than COUNT's checkpoint interval)
        db.table("vote").insert([(i % 5, i)])
    base = next(n["id"] for n in db.graph() if n["kind"] == "base")
    history = db.runtime.durable[base]
    assert history.start < 16, "the checkpoint pins the history (else this tests nothing)"
    assert 400 // 16 - 2 <= len(tries) <= 400 // 16, tries
    # released: COUNT, then the reader (whose acknowledgements carry its own newest,
    # and so let COUNT's become stable), checkpoint
    for kind in ("aggregate", "reader"):
        db.runtime.domains[next(n["id"] for n in db.graph() if n["kind"] == kind)].checkpoint()
    for i in range(200):
        db.table("vote").insert([(i % 5, i)])
    assert history.start >= 400, (history.start, len(history.batches))


@pytest.mark.slow
def test_memory_stays_flat_over_millions_of_row_writes():
    """Issue 24's goal: at most 8 MB per million row-writes over a long run of inserts
    and deletes (it was 16 before the history was trimmed; 0.1 after)."""
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "noria_tools.memorybench", "churn", "3000000", "1"],
                         capture_output=True, text=True, check=True, timeout=600)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["mb_per_million"] <= 8, r
